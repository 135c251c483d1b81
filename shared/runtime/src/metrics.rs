//! Metrics under the names of the spec's "What is observable" table,
//! rendered as Prometheus text. One [`Metrics`] per process, shared by the
//! publish side, the index, the resolver, the transports and the commit writer.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use rules::attribution::ScopeHasher;
use rules::attribution::audit::{Event, Published, publish};

/// Labels of a resolution: fixed words and the type's names.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResolutionLabels {
    pub tier: &'static str,
    pub actor_kind: &'static str,
    pub group: Arc<str>,
    pub version: Arc<str>,
    pub resource: Arc<str>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WaitLabels {
    pub tier: &'static str,
    /// `write` or `removal`.
    pub event_kind: &'static str,
    pub group: Arc<str>,
    pub version: Arc<str>,
    pub resource: Arc<str>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabels {
    pub group: String,
    pub version: String,
    pub resource: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpLabel {
    /// `written` or `matched`.
    pub op: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StreamLabel {
    pub stream: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransportLabel {
    pub transport: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModeLabel {
    /// `aof`, `rdb`, `none` or `unknown`.
    pub mode: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabel {
    /// Redis's `maxmemory-policy`, as it reported it.
    pub policy: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AuditLabels {
    pub group: String,
    pub resource: String,
    pub verb: String,
    /// `fact`, `rejected` (the accept gate) or `no_attribution_fact` (the
    /// publish gates).
    pub result: String,
    /// Which gate, for a rejection; empty for a fact.
    pub reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CommitLabels {
    /// `user`, `serviceaccount` or `none` (unresolved).
    pub author_kind: String,
}

/// Every metric of the spec's table.
#[derive(Debug)]
pub struct Metrics {
    pub resolutions: Family<ResolutionLabels, Counter>,
    pub resolution_wait_seconds: Family<WaitLabels, Histogram, fn() -> Histogram>,
    /// Resolutions that skipped the grace (adaptive grace, per type).
    pub grace_skipped: Family<TypeLabels, Counter>,
    pub facts: Family<OpLabel, Counter>,
    pub fact_index_entries: Gauge,
    pub fact_index_evictions: Family<ReasonLabel, Counter>,
    /// Re-delivered facts (an auditID the index already held) ignored.
    pub fact_duplicates: Counter,
    pub collection_without_uidset: Family<ReasonLabel, Counter>,
    pub fact_stream_gaps: Family<StreamLabel, Counter>,
    /// Followed streams evicted and created again between two reads: facts
    /// appended in between are lost, uncounted.
    pub fact_stream_recreations: Family<StreamLabel, Counter>,
    pub fact_stream_decode_errors: Family<TransportLabel, Counter>,
    pub fact_follower_errors: Family<TransportLabel, Counter>,
    pub fact_follower_last_success_timestamp_seconds: Gauge<f64, AtomicU64>,
    pub transport_info: Family<TransportLabel, Gauge>,
    /// Scopes (route, type) whose log the memory transport holds: one with
    /// no fact inside the TTL is dropped.
    pub memory_scopes: Gauge,
    /// 1 on the persistence mode Redis reported, 0 on the others.
    pub redis_persistence: Family<ModeLabel, Gauge>,
    /// 1 on the `maxmemory-policy` Redis reported when it evicts keys.
    pub redis_evicting_policy: Family<PolicyLabel, Gauge>,
    /// Appends refused because Redis's `maxmemory-policy` evicts keys and
    /// `--allow-evicting-redis` was not given.
    pub redis_evicting_refusals: Counter,
    pub audit_events: Family<AuditLabels, Counter>,
    pub commits: Family<CommitLabels, Counter>,
    /// Writes of a sensitive type (Secrets) skipped: never in clear text.
    pub mirror_sensitive_skipped: Counter,
    /// Changes not mirrored because of who made them (`reason`: actor).
    pub mirror_excluded: Family<ReasonLabel, Counter>,
    /// Pushes that failed (the commits stay in the clone for the next push).
    pub mirror_push_failures: Counter,
    /// Changes of the GitTarget or its GitProvider applied without a restart.
    pub mirror_config_reloads: Counter,
    /// 1 while the GitTarget cannot be mirrored (deleted, branch not
    /// allowed, provider gone): nothing is committed or pushed.
    pub mirror_held: Gauge,
    /// Follows refused past --author-attribution-max-followed (an Acquire
    /// refused, or a Resolve of a type answered without following it).
    pub follow_refusals: Counter,
    /// Label sets refused because the types labelled reached the cap
    /// (counted under the `_other` type instead).
    pub label_types_refused: Counter,
    /// Each resolution label set's counter and histogram, found by one lookup.
    handles: ResolutionHandles,
    /// The (group, resource) pairs metrics are labelled with, up to the cap:
    /// 10k junk types made a 21 MB `/metrics` (issue 30).
    types: TypeCap,
    /// `facts_total{op="matched"}`, counted once per answered resolution.
    matched: OnceLock<Counter>,
}

/// The type label of the types past [`Metrics::set_max_types`].
pub const OTHER_TYPES: &str = "_other";

/// How many distinct (group, resource) pairs label the per-type metrics by
/// default (`--metrics-max-types`).
pub const DEFAULT_MAX_TYPES: usize = 1000;

#[derive(Debug)]
struct TypeCap {
    max: std::sync::atomic::AtomicUsize,
    seen: Mutex<TypeSet>,
}

/// The (group, resource) pairs seen, by group, so a lookup of `&str`s
/// allocates nothing (the receiver counts every audit event).
#[derive(Debug, Default)]
struct TypeSet {
    by_group: std::collections::HashMap<Box<str>, std::collections::HashSet<Box<str>>>,
    len: usize,
}

impl Default for TypeCap {
    fn default() -> Self {
        TypeCap { max: DEFAULT_MAX_TYPES.into(), seen: Mutex::default() }
    }
}

/// The counter and wait histogram of every resolution label set seen, so
/// that counting a resolution takes one lookup under one lock; the families'
/// own `get_or_create` takes a lock and hashes five labels, twice per
/// resolution, and `Resolve` is a short burst of work. The handles share
/// their values with the families, which render them.
#[derive(Debug, Default)]
struct ResolutionHandles(Mutex<hashbrown::HashMap<HandleKey, (Counter, Histogram), ScopeHasher>>);

/// Hashes as [`HandleQuery`] does: the same fields in the same order.
#[derive(Debug, Hash, PartialEq, Eq)]
struct HandleKey {
    tier: &'static str,
    actor_kind: &'static str,
    removal: bool,
    group: Box<str>,
    version: Box<str>,
    resource: Box<str>,
}

#[derive(Hash)]
struct HandleQuery<'a> {
    tier: &'static str,
    actor_kind: &'static str,
    removal: bool,
    group: &'a str,
    version: &'a str,
    resource: &'a str,
}

impl From<&HandleQuery<'_>> for HandleKey {
    fn from(q: &HandleQuery<'_>) -> Self {
        let &HandleQuery { tier, actor_kind, removal, group, version, resource } = q;
        Self { tier, actor_kind, removal, group: group.into(), version: version.into(), resource: resource.into() }
    }
}

impl hashbrown::Equivalent<HandleKey> for HandleQuery<'_> {
    fn equivalent(&self, k: &HandleKey) -> bool {
        (self.tier, self.actor_kind, self.removal, self.group, self.version, self.resource)
            == (k.tier, k.actor_kind, k.removal, &*k.group, &*k.version, &*k.resource)
    }
}

fn wait_histogram() -> Histogram {
    Histogram::new([0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0])
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            resolutions: Family::default(),
            resolution_wait_seconds: Family::new_with_constructor(wait_histogram),
            grace_skipped: Family::default(),
            facts: Family::default(),
            fact_index_entries: Gauge::default(),
            fact_index_evictions: Family::default(),
            fact_duplicates: Counter::default(),
            collection_without_uidset: Family::default(),
            fact_stream_gaps: Family::default(),
            fact_stream_recreations: Family::default(),
            fact_stream_decode_errors: Family::default(),
            fact_follower_errors: Family::default(),
            fact_follower_last_success_timestamp_seconds: Gauge::default(),
            transport_info: Family::default(),
            memory_scopes: Gauge::default(),
            redis_persistence: Family::default(),
            redis_evicting_policy: Family::default(),
            redis_evicting_refusals: Counter::default(),
            audit_events: Family::default(),
            commits: Family::default(),
            mirror_sensitive_skipped: Counter::default(),
            mirror_excluded: Family::default(),
            mirror_push_failures: Counter::default(),
            mirror_config_reloads: Counter::default(),
            mirror_held: Gauge::default(),
            label_types_refused: Counter::default(),
            follow_refusals: Counter::default(),
            handles: ResolutionHandles::default(),
            types: TypeCap::default(),
            matched: OnceLock::new(),
        }
    }
}

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// At most `max` distinct (group, resource) pairs label the per-type
    /// metrics; the rest are counted under the type `_other`.
    pub fn set_max_types(&self, max: usize) {
        self.types.max.store(max, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether (group, resource) may label a new series: one already seen,
    /// or a new one under the cap. A refusal is counted.
    fn admits_type(&self, group: &str, resource: &str) -> bool {
        let mut seen = self.types.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.by_group.get(group).is_some_and(|r| r.contains(resource)) {
            return true;
        }
        if seen.len < self.types.max.load(std::sync::atomic::Ordering::Relaxed) {
            seen.by_group.entry(group.into()).or_default().insert(resource.into());
            seen.len += 1;
            return true;
        }
        drop(seen);
        self.label_types_refused.inc();
        false
    }

    /// (group, version, resource), or the `_other` type past the cap.
    fn type_labels<'a>(&self, group: &'a str, version: &'a str, resource: &'a str) -> (&'a str, &'a str, &'a str) {
        if self.admits_type(group, resource) { (group, version, resource) } else { ("", "", OTHER_TYPES) }
    }

    /// Counts an audit event's outcome on `gitopsreverser_audit_events_total`.
    pub fn audit_event(&self, group: &str, resource: &str, verb: &str, result: &str, reason: &str) {
        let (group, _, resource) = self.type_labels(group, "", resource);
        self.audit_events
            .get_or_create(&AuditLabels {
                group: group.to_owned(),
                resource: resource.to_owned(),
                verb: verb.to_owned(),
                result: result.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Counts one resolution of a type on `resolutions_total` and its wait
    /// on `resolution_wait_seconds`.
    pub fn resolution(
        &self,
        (group, version, resource): (&str, &str, &str),
        tier: &'static str,
        actor_kind: &'static str,
        removal: bool,
        waited_seconds: f64,
    ) {
        let mut q = HandleQuery { tier, actor_kind, removal, group, version, resource };
        let mut held = self.handles.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((count, wait)) = held.get(&q) {
            count.inc();
            wait.observe(waited_seconds);
            return;
        }
        // A label set not seen yet needs its type under the cap.
        (q.group, q.version, q.resource) = self.type_labels(group, version, resource);
        let (count, wait) = held.entry_ref(&q).or_insert_with(|| self.resolution_handles(&q));
        count.inc();
        wait.observe(waited_seconds);
    }

    /// The families' counter and wait histogram of a label set not seen yet.
    fn resolution_handles(&self, q: &HandleQuery<'_>) -> (Counter, Histogram) {
        let &HandleQuery { tier, actor_kind, removal, group, version, resource } = q;
        let (group, version, resource): (Arc<str>, Arc<str>, Arc<str>) =
            (group.into(), version.into(), resource.into());
        let event_kind = if removal { "removal" } else { "write" };
        let wait =
            WaitLabels { tier, event_kind, group: group.clone(), version: version.clone(), resource: resource.clone() };
        let count =
            self.resolutions.get_or_create(&ResolutionLabels { tier, actor_kind, group, version, resource }).clone();
        (count, self.resolution_wait_seconds.get_or_create(&wait).clone())
    }

    pub fn collection_without_uidset(&self, reason: &str) {
        self.collection_without_uidset.get_or_create(&ReasonLabel { reason: reason.to_owned() }).inc();
    }

    /// Counts one resolution that skipped the grace (adaptive grace).
    pub fn grace_skipped(&self, group: &str, version: &str, resource: &str) {
        let (group, version, resource) = self.type_labels(group, version, resource);
        self.grace_skipped
            .get_or_create(&TypeLabels { group: group.into(), version: version.into(), resource: resource.into() })
            .inc();
    }

    pub fn fact_op(&self, op: &'static str, n: u64) {
        self.facts.get_or_create(&OpLabel { op }).inc_by(n);
    }

    /// [`Metrics::fact_op`] `matched` by one: a resolution's, so its handle
    /// is kept rather than found under the family's lock each time.
    pub fn fact_matched(&self) {
        self.matched.get_or_init(|| self.facts.get_or_create(&OpLabel { op: "matched" }).clone()).inc();
    }

    pub fn eviction(&self, reason: &str) {
        self.fact_index_evictions.get_or_create(&ReasonLabel { reason: reason.to_owned() }).inc();
    }

    pub fn decode_error(&self, transport: &str) {
        self.fact_stream_decode_errors.get_or_create(&TransportLabel { transport: transport.to_owned() }).inc();
    }

    pub fn follower_error(&self, transport: &str) {
        self.fact_follower_errors.get_or_create(&TransportLabel { transport: transport.to_owned() }).inc();
    }

    pub fn stream_gap(&self, stream: &str, n: u64) {
        self.fact_stream_gaps.get_or_create(&StreamLabel { stream: stream.to_owned() }).inc_by(n);
    }

    pub fn stream_recreated(&self, stream: &str) {
        self.fact_stream_recreations.get_or_create(&StreamLabel { stream: stream.to_owned() }).inc();
    }

    /// Marks a successful follower read now.
    pub fn follower_success(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or_default();
        self.fact_follower_last_success_timestamp_seconds.set(now);
    }

    /// Renders every metric as Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut registry = Registry::default();
        let p = "gitopsreverser";
        // prometheus-client appends `_total` to counters itself.
        registry.register(
            format!("{p}_attribution_resolutions"),
            "which evidence named the author and who it named, per type",
            self.resolutions.clone(),
        );
        registry.register(
            format!("{p}_attribution_resolution_wait_seconds"),
            "how long the join waited, by tier and by write/removal",
            self.resolution_wait_seconds.clone(),
        );
        registry.register(
            format!("{p}_attribution_grace_skipped"),
            "resolutions that answered without waiting the grace (adaptive grace: a long run of misses with no fact of the type)",
            self.grace_skipped.clone(),
        );
        registry.register(format!("{p}_attribution_facts"), "facts written / matched", self.facts.clone());
        registry.register(
            format!("{p}_attribution_fact_index_entries"),
            "entries held across every scope",
            self.fact_index_entries.clone(),
        );
        registry.register(
            format!("{p}_attribution_fact_index_evictions"),
            "facts evicted before their TTL, by reason: per_type and total (the caps bind), span (held past 49 days)",
            self.fact_index_evictions.clone(),
        );
        registry.register(
            format!("{p}_attribution_fact_duplicates"),
            "re-delivered facts (an auditID already held) that changed nothing",
            self.fact_duplicates.clone(),
        );
        registry.register(
            format!("{p}_attribution_collection_without_uidset"),
            "how often the precise collection join was unavailable",
            self.collection_without_uidset.clone(),
        );
        registry.register(
            format!("{p}_attribution_fact_stream_gaps"),
            "facts lost for good to a trim or an eviction",
            self.fact_stream_gaps.clone(),
        );
        registry.register(
            format!("{p}_attribution_fact_stream_recreations"),
            "followed streams evicted and created again between two reads (facts lost, how many unknown)",
            self.fact_stream_recreations.clone(),
        );
        registry.register(
            format!("{p}_attribution_fact_stream_decode_errors"),
            "entries skipped because they could not be decoded",
            self.fact_stream_decode_errors.clone(),
        );
        registry.register(
            format!("{p}_attribution_fact_follower_errors"),
            "follower reads that failed and were retried",
            self.fact_follower_errors.clone(),
        );
        registry.register(
            format!("{p}_attribution_fact_follower_last_success_timestamp_seconds"),
            "whether the follower is reading at all",
            self.fact_follower_last_success_timestamp_seconds.clone(),
        );
        registry.register(
            format!("{p}_attribution_transport_info"),
            "which contract the metrics above are read under",
            self.transport_info.clone(),
        );
        registry.register(
            format!("{p}_attribution_follow_refusals"),
            "follows refused past --author-attribution-max-followed (an Acquire, or a Resolve answered without following)",
            self.follow_refusals.clone(),
        );
        registry.register(
            format!("{p}_metrics_label_types_refused"),
            "series of a type past --metrics-max-types, counted under the type _other instead",
            self.label_types_refused.clone(),
        );
        registry.register(
            format!("{p}_attribution_transport_memory_scopes"),
            "scopes (route, type) the memory transport holds a log of; one with no fact inside the TTL is dropped",
            self.memory_scopes.clone(),
        );
        registry.register(
            format!("{p}_attribution_redis_persistence"),
            "what keeps acknowledged facts across a Redis restart (aof keeps them; rdb, none and unknown may not)",
            self.redis_persistence.clone(),
        );
        registry.register(
            format!("{p}_attribution_redis_evicting_policy"),
            "1 when Redis's maxmemory-policy may evict acknowledged fact streams (allkeys-*, volatile-*)",
            self.redis_evicting_policy.clone(),
        );
        registry.register(
            format!("{p}_attribution_redis_evicting_refusals"),
            "appends refused because Redis's maxmemory-policy evicts keys (give --allow-evicting-redis to accept it)",
            self.redis_evicting_refusals.clone(),
        );
        registry.register(format!("{p}_audit_events"), "audit events by outcome", self.audit_events.clone());
        registry.register(format!("{p}_commits"), "what reached Git", self.commits.clone());
        registry.register(
            format!("{p}_mirror_sensitive_skipped"),
            "writes of Secrets skipped: never written in clear text",
            self.mirror_sensitive_skipped.clone(),
        );
        registry.register(
            format!("{p}_mirror_excluded"),
            "changes not mirrored because an excluded actor made them",
            self.mirror_excluded.clone(),
        );
        registry.register(
            format!("{p}_mirror_push_failures"),
            "pushes that failed; the commits stay in the clone for the next push",
            self.mirror_push_failures.clone(),
        );
        registry.register(
            format!("{p}_mirror_config_reloads"),
            "changes of the GitTarget or its GitProvider applied without a restart",
            self.mirror_config_reloads.clone(),
        );
        registry.register(
            format!("{p}_mirror_held"),
            "1 while the GitTarget cannot be mirrored: nothing is committed or pushed",
            self.mirror_held.clone(),
        );
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("writing to a String cannot fail");
        out
    }
}

/// The publish side ([`publish`]), counted on `gitopsreverser_audit_events_total` (a fact, or
/// the rejection's gate) and, for a collection fact without a uid set, on
/// `gitopsreverser_attribution_collection_without_uidset_total`.
pub fn publish_counted(route: &str, ev: &Event, metrics: &Metrics) -> Published {
    let p = publish(route, ev);
    let (group, resource) =
        ev.object_ref.as_ref().map(|r| (r.api_group.as_str(), r.resource.as_str())).unwrap_or(("", ""));
    match &p {
        Published::Fact { without_uidset, .. } => {
            metrics.audit_event(group, resource, &ev.verb, "fact", "");
            if let Some(reason) = without_uidset {
                metrics.collection_without_uidset(reason);
            }
        }
        Published::Rejected(r) => metrics.audit_event(group, resource, &ev.verb, r.result(), r.label()),
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_spec_metric_names() {
        let m = Metrics::new();
        m.fact_op("written", 2);
        m.decode_error("redis");
        m.eviction("per_type");
        m.stream_gap("s", 1);
        m.stream_recreated("s");
        m.audit_event("", "configmaps", "create", "fact", "");
        m.commits.get_or_create(&CommitLabels { author_kind: "user".into() }).inc();
        let text = m.render();
        for name in [
            "gitopsreverser_attribution_facts_total{op=\"written\"} 2",
            "gitopsreverser_attribution_fact_stream_decode_errors_total{transport=\"redis\"} 1",
            "gitopsreverser_attribution_fact_index_evictions_total{reason=\"per_type\"} 1",
            "gitopsreverser_attribution_fact_stream_gaps_total{stream=\"s\"} 1",
            "gitopsreverser_attribution_fact_stream_recreations_total{stream=\"s\"} 1",
            "gitopsreverser_attribution_fact_index_entries 0",
            "gitopsreverser_attribution_fact_follower_last_success_timestamp_seconds",
            "gitopsreverser_commits_total{author_kind=\"user\"} 1",
            "gitopsreverser_audit_events_total{",
        ] {
            assert!(text.contains(name), "missing {name} in\n{text}");
        }
    }

    #[test]
    fn each_resolution_counts_once_under_its_own_labels() {
        let m = Metrics::new();
        let cm = ("", "v1", "configmaps");
        m.resolution(cm, "exact", "user", false, 0.0);
        m.resolution(cm, "exact", "user", false, 0.3);
        m.resolution(cm, "exact", "serviceaccount", false, 0.0);
        m.resolution(cm, "absent", "none", true, 2.0);
        m.resolution(("apps", "v1", "deployments"), "exact", "user", false, 0.0);
        let text = m.render();
        let labels = |tier: &str, kind: &str, g: &str, r: &str| {
            format!("tier=\"{tier}\",actor_kind=\"{kind}\",group=\"{g}\",version=\"v1\",resource=\"{r}\"")
        };
        for (line, n) in [
            (labels("exact", "user", "", "configmaps"), 2),
            (labels("exact", "serviceaccount", "", "configmaps"), 1),
            (labels("absent", "none", "", "configmaps"), 1),
            (labels("exact", "user", "apps", "deployments"), 1),
        ] {
            let want = format!("gitopsreverser_attribution_resolutions_total{{{line}}} {n}");
            assert!(text.contains(&want), "missing {want} in\n{text}");
        }
        // One wait histogram per (tier, write or removal, type): both actor
        // kinds of an exact write of a ConfigMap land in the same one.
        let wait = "gitopsreverser_attribution_resolution_wait_seconds_count{tier=\"exact\",event_kind=\"write\",group=\"\",version=\"v1\",resource=\"configmaps\"} 3";
        assert!(text.contains(wait), "missing {wait} in\n{text}");
        let removal = "gitopsreverser_attribution_resolution_wait_seconds_bucket{le=\"2.0\",tier=\"absent\",event_kind=\"removal\"";
        assert!(text.contains(removal), "missing {removal} in\n{text}");
    }
}
