//! Why attribution is unresolved: which known cause fits the evidence, and
//! how to check it, rather than a bare "unknown" (issue 9: "the audit
//! policy drops this type; the route has never resolved; the follower is
//! not reading").

use serde::Serialize;

use super::explanation::Explanation;

/// A follower whose last successful read is older than this is not reading
/// (a healthy one reads at least once per block period, 1 s by default).
pub const FOLLOWER_STALE_SECS: f64 = 60.0;

/// A known cause of an unresolved attribution.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum Cause {
    /// The process answering does not follow the type's stream, or its
    /// follower has not read successfully for a while
    /// (`fact_follower_last_success_timestamp_seconds`).
    FollowerNotReading {
        following: bool,
        /// Seconds since the last successful read; `None`: never read.
        seconds_since_last_read: Option<f64>,
    },
    /// No fact has ever arrived on the audit route: the API server posts
    /// audit events to another route, or nowhere ("A misrouted provider is
    /// loud").
    RouteNeverResolved { route: String },
    /// Facts arrive on the route, but none of any kind for this type: the
    /// audit policy logs this type below `Metadata`, or not at all.
    AuditPolicyDropsType { resource: String },
    /// Facts for the type arrive, none usable for this object: its last
    /// change is older than the TTL, or the request published no fact (no
    /// name: an aggregated create; no resolvable user).
    NoFactForObject { facts_for_type: u64 },
    /// The adaptive grace stopped waiting for this type: its watch events
    /// resolve on what the index holds at once, so a fact that arrives after
    /// its watch event is not waited for.
    GraceSkipped { misses_in_a_row: u32, after_misses: u32 },
}

impl Cause {
    /// The machine-readable name (`follower_not_reading`, ...).
    pub fn label(&self) -> &'static str {
        match self {
            Cause::FollowerNotReading { .. } => "follower_not_reading",
            Cause::RouteNeverResolved { .. } => "route_never_resolved",
            Cause::AuditPolicyDropsType { .. } => "audit_policy_drops_type",
            Cause::NoFactForObject { .. } => "no_fact_for_object",
            Cause::GraceSkipped { .. } => "grace_skipped",
        }
    }

    /// One sentence saying what is wrong.
    pub fn summary(&self) -> String {
        match self {
            Cause::FollowerNotReading { following: false, .. } => {
                "the follower is not reading: the answering process does not follow this type's stream".into()
            }
            Cause::FollowerNotReading { seconds_since_last_read: None, .. } => {
                "the follower is not reading: it has never completed a read of the fact streams".into()
            }
            Cause::FollowerNotReading { seconds_since_last_read: Some(s), .. } => {
                format!("the follower is not reading: its last successful read was {s:.0}s ago")
            }
            Cause::RouteNeverResolved { route } => {
                format!("the route has never resolved: no fact has ever arrived on audit route {route:?}")
            }
            Cause::AuditPolicyDropsType { resource } => format!(
                "the audit policy drops this type: facts arrive on the route, but none of any kind for {resource}"
            ),
            Cause::NoFactForObject { facts_for_type } => format!(
                "no fact names this object ({facts_for_type} facts are held for its type): its last change is \
                 older than the TTL, or the request published no fact"
            ),
            Cause::GraceSkipped { misses_in_a_row, after_misses } => format!(
                "the adaptive grace is skipped for this type: {misses_in_a_row} resolutions in a row found no \
                 fact (the limit is {after_misses}), so its events no longer wait for one"
            ),
        }
    }

    /// How to check it: what to look at, printed after "how to check:", so
    /// it does not start with "check" again.
    pub fn check(&self) -> String {
        match self {
            Cause::FollowerNotReading { following: false, .. } => {
                "the sidecar follows a type once its watcher first resolves an event of it, or from the start \
                 with --follow <route>:<group/resource>; check that the watcher covers this type and that --route \
                 is the route the sidecar's watcher asks about"
                    .into()
            }
            Cause::FollowerNotReading { .. } => {
                "the sidecar's gitopsreverser_attribution_fact_follower_last_success_timestamp_seconds and \
                 gitopsreverser_attribution_fact_follower_errors_total on its /metrics, and whether Redis is \
                 reachable from it (its log names the failing read)"
                    .into()
            }
            Cause::RouteNeverResolved { route } => format!(
                "whether the API server's audit webhook posts to /audit-webhook/{route} (or carries the route \
                 annotation), and whether --route matches the ClusterProvider's spec.attribution.auditRoute"
            ),
            // docs/audit-setup.md: a Secret's contents never go to the
            // receiver; at Metadata its name still attributes it.
            Cause::AuditPolicyDropsType { resource } if resource == "secrets" => {
                "the API server's audit policy: a rule must log secrets at Metadata (never \
                 RequestResponse, which would send their data to the receiver) for ResponseComplete; \
                 gitopsreverser_audit_events_total shows which types arrive"
                    .into()
            }
            Cause::AuditPolicyDropsType { resource } => format!(
                "the API server's audit policy: a rule must log {resource} at RequestResponse for \
                 ResponseComplete; gitopsreverser_audit_events_total shows which types arrive"
            ),
            Cause::NoFactForObject { .. } => {
                "compare the object's last change time with --author-attribution-ttl (10m by default); \
                 gitopsreverser_audit_events_total{reason=\"no_attribution_fact\"} counts requests that \
                 published nothing"
                    .into()
            }
            Cause::GraceSkipped { .. } => "the first fact of the type restores the full grace; \
                 gitopsreverser_attribution_grace_skipped_total counts the events that did not wait. \
                 Without --author-attribution-adaptive-grace every event waits the full grace"
                .into(),
        }
    }
}

/// The causes that fit an unresolved explanation, strongest first.
/// `route_ever_fed` is whether any fact has ever arrived on the route (from
/// the route health, or whether any stream of the route exists); `None`
/// when nothing shows one did (a process that has resolved nothing on the
/// route yet). Only a route known to be fed makes the audit policy the
/// cause: "facts arrive on the route, but none for this type" beside "no
/// fact has ever arrived on the route" would contradict it (issue 29).
pub fn unresolved_causes(
    e: &Explanation,
    route: &str,
    resource: &str,
    route_ever_fed: Option<bool>,
    now_secs: f64,
) -> Vec<Cause> {
    let mut causes = 'evidence: {
        // A follower that is not reading makes every other signal meaningless.
        let age = (e.follower_last_success > 0.0).then(|| (now_secs - e.follower_last_success).max(0.0));
        if !e.following || age.is_none_or(|a| a > FOLLOWER_STALE_SECS) {
            break 'evidence vec![Cause::FollowerNotReading { following: e.following, seconds_since_last_read: age }];
        }
        if e.facts_for_type > 0 {
            break 'evidence vec![Cause::NoFactForObject { facts_for_type: e.facts_for_type }];
        }
        let never = Cause::RouteNeverResolved { route: route.to_owned() };
        let policy = Cause::AuditPolicyDropsType { resource: resource.to_owned() };
        match route_ever_fed {
            Some(true) => vec![policy],
            Some(false) | None => vec![never],
        }
    };
    // Beside whichever fits: the events did not wait for a late fact.
    if let Some(g) = e.grace.filter(|g| g.skipping) {
        causes.push(Cause::GraceSkipped { misses_in_a_row: g.misses_in_a_row, after_misses: g.after_misses });
    }
    causes
}
