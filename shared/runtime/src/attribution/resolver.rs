//! The resolver (spec §4 "The join side" and "The wait"): one watch event
//! in, the strongest fact about its object out, waiting up to the grace for
//! a fact that could match. The [`Engine`] also is the index's
//! [`FactSink`]: applying a batch files its facts and wakes exactly the
//! resolvers registered under the keys they filled.
//!
//! Resolutions are independent futures: a removal waiting out its grace
//! delays no other resolution (no head-of-line blocking).

use std::borrow::Cow;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rules::attribution::audit::{Event, Published};
use rules::attribution::grace::{AdaptiveGrace, Streaks, Wait};
use rules::attribution::index::{Answered, Candidate, FactRef, Index, IndexConfig, Lookup, Match, Query};
use rules::attribution::why::{CandidateView, EvidenceFact, Explanation, RouteHealthView};
use rules::attribution::{ActorKind, Scope, ScopeHasher, Tier};
use tokio::sync::watch;

use super::clock::Clock;
use super::transport::{FactBatch, FactSink};
use super::waiters::WaiterRegistry;
use crate::metrics::{Metrics, publish_counted};

/// A route that never resolved and has this many unresolved events in a row
/// is misrouted ("a lone miss is ordinary; a run of them with nothing ever
/// matched is the signature of a route nobody writes to").
pub const MISROUTED_AFTER: u32 = 5;

/// Engine settings; defaults are the sidecar's flags' defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineConfig {
    /// `--author-attribution-grace`.
    pub grace: Duration,
    pub index: IndexConfig,
    /// `--author-attribution-adaptive-grace`: `None` waits the full grace always.
    pub adaptive: Option<AdaptiveGrace>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self { grace: Duration::from_secs(3), index: IndexConfig::default(), adaptive: None }
    }
}

/// Who authored a watch event, on which evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    pub tier: Tier,
    /// The winning fact; `None` when `tier` is `absent`.
    pub fact: Option<FactRef>,
    pub waited: Duration,
}

impl Resolution {
    pub fn actor_kind(&self) -> ActorKind {
        self.fact.as_ref().map_or(ActorKind::None, |f| f.fact.actor_kind())
    }

    pub fn author(&self) -> Option<&str> {
        self.fact.as_ref().map(|f| f.fact.author.as_str())
    }
}

/// Per-route memory for the misrouted-route warning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteHealth {
    pub ever_resolved: bool,
    pub unresolved_in_a_row: u32,
    pub warned: bool,
}

/// The attribution engine: index, waiter registry, resolver.
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    index: RwLock<Index>,
    /// What answered each object last (issue 30): its own lock, so
    /// remembering an answer never takes the index's write lock.
    answered: Mutex<Answered>,
    waiters: WaiterRegistry,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    routes: Mutex<hashbrown::HashMap<String, RouteHealth, ScopeHasher>>,
    /// Runs of misses per (route, type), when the grace adapts.
    streaks: Option<Mutex<Streaks>>,
    shutdown: watch::Sender<bool>,
    last_sweep_ms: Mutex<u64>,
    /// Evictions not yet logged, and when they last were.
    evictions_unlogged: Mutex<(u64, Option<u64>)>,
}

/// At most one eviction warning per this long: the caps binding is a sizing
/// problem, worth a line a minute, not one per fact.
const EVICTION_LOG_EVERY_MS: u64 = 60_000;

/// How often applying facts also sweeps expired ones (memory only).
const SWEEP_EVERY_MS: u64 = 10_000;

impl Engine {
    pub fn new(config: EngineConfig, clock: Arc<dyn Clock>, metrics: Arc<Metrics>) -> Self {
        let now = clock.now_ms();
        Self {
            config,
            index: RwLock::new(Index::new(config.index)),
            answered: Mutex::new(Answered::new(config.index.ttl_ms, config.index.max_facts_per_type)),
            waiters: WaiterRegistry::new(),
            clock,
            metrics,
            routes: Mutex::default(),
            streaks: config.adaptive.map(|a| Mutex::new(Streaks::new(a))),
            shutdown: watch::channel(false).0,
            last_sweep_ms: Mutex::new(now),
            evictions_unlogged: Mutex::new((0, None)),
        }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub fn waiters(&self) -> &WaiterRegistry {
        &self.waiters
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Index> {
        self.index.write().unwrap_or_else(|e| e.into_inner())
    }

    fn answered(&self) -> std::sync::MutexGuard<'_, Answered> {
        self.answered.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Objects whose last answer is remembered (bounded by the TTL and the
    /// per-type cap).
    pub fn answered_len(&self) -> usize {
        self.answered().len()
    }

    /// `q` carrying what answered its object last, unless it already does.
    fn with_previous<'q>(&self, scope: &Scope, q: &'q Query) -> Cow<'q, Query> {
        if q.previous.is_some() || q.uid.is_empty() {
            return Cow::Borrowed(q);
        }
        match self.answered().previous(scope, &q.uid, self.clock.now_ms()) {
            Some(p) => Cow::Owned(Query { previous: Some(p), ..q.clone() }),
            None => Cow::Borrowed(q),
        }
    }

    fn streaks(&self) -> Option<std::sync::MutexGuard<'_, Streaks>> {
        self.streaks.as_ref().map(|m| m.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Facts held (`fact_index_entries`).
    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The publish side for one audit event, counted on
    /// `gitopsreverser_audit_events_total` (see [`publish_counted`]).
    pub fn publish_event(&self, route: &str, ev: &Event) -> Published {
        publish_counted(route, ev, &self.metrics)
    }

    /// Files a batch and wakes the resolvers its facts could answer.
    pub fn apply_batch(&self, batch: FactBatch) {
        let now = self.clock.now_ms();
        if !batch.facts.is_empty()
            && let Some(mut streaks) = self.streaks()
        {
            // Before filing: a resolution that reads this fact must not then
            // count a miss against a streak the fact already ended.
            streaks.fact_filed(&batch.scope);
        }
        let (keys, len, evictions_before, evictions_after) = {
            let mut ix = self.write();
            let before = ix.evictions();
            let mut keys = Vec::new();
            let mut duplicates = 0;
            for fact in batch.facts {
                let filed = ix.file(&batch.scope, fact, batch.at_ms);
                duplicates += u64::from(filed.duplicate);
                keys.extend(filed.keys);
            }
            self.metrics.fact_duplicates.inc_by(duplicates);
            let mut last = self.last_sweep_ms.lock().unwrap_or_else(|e| e.into_inner());
            if now.saturating_sub(*last) >= SWEEP_EVERY_MS {
                ix.sweep(now);
                self.answered().sweep(now);
                *last = now;
            }
            (keys, ix.len(), before, ix.evictions())
        };
        // Wake after the write lock is released: a woken resolver re-reads.
        self.waiters.wake(&batch.scope, &keys);
        self.metrics.fact_index_entries.set(len as i64);
        for _ in evictions_before.per_type..evictions_after.per_type {
            self.metrics.eviction("per_type");
        }
        for _ in evictions_before.total..evictions_after.total {
            self.metrics.eviction("total");
        }
        for _ in evictions_before.span..evictions_after.span {
            self.metrics.eviction("span");
        }
        let evicted =
            (evictions_after.per_type - evictions_before.per_type) + (evictions_after.total - evictions_before.total);
        if evicted > 0 {
            self.log_evictions(evicted, now, &evictions_after);
        }
    }

    /// Evictions drop facts the receiver acknowledged: say so (rate-limited),
    /// not only count it.
    fn log_evictions(&self, evicted: u64, now: u64, totals: &rules::attribution::index::Evictions) {
        let mut state = self.evictions_unlogged.lock().unwrap_or_else(|e| e.into_inner());
        state.0 += evicted;
        if state.1.is_some_and(|last| now.saturating_sub(last) < EVICTION_LOG_EVERY_MS) {
            return;
        }
        tracing::warn!(
            evicted = state.0,
            per_type_total = totals.per_type,
            total_cap_total = totals.total,
            max_facts = self.config.index.max_facts,
            max_facts_per_type = self.config.index.max_facts_per_type,
            "the fact index is full: acknowledged facts were evicted before their TTL, so their objects may resolve absent; \
             raise --author-attribution-max-facts / --author-attribution-max-facts-per-type or shorten --author-attribution-ttl"
        );
        *state = (0, Some(now));
    }

    /// Drops expired facts (memory only; expiry is decided on read anyway).
    pub fn sweep(&self) {
        let now = self.clock.now_ms();
        let len = {
            let mut ix = self.write();
            ix.sweep(now);
            ix.len()
        };
        self.answered().sweep(now);
        self.metrics.fact_index_entries.set(len as i64);
    }

    /// One read of the index, as of now.
    pub fn lookup(&self, scope: &Scope, q: &Query) -> Lookup {
        self.read().lookup(scope, q, self.clock.now_ms())
    }

    /// A resolution's read: as of now, with what answered the object last
    /// (read afresh each time: another resolution of it may have ended).
    fn read_for(&self, scope: &Scope, q: &Query) -> Lookup {
        let q = self.with_previous(scope, q);
        self.lookup(scope, &q)
    }

    /// Every fact the index holds for the object, and why each would lose.
    pub fn explain(&self, scope: &Scope, q: &Query) -> Vec<Candidate> {
        self.read().explain(scope, q, self.clock.now_ms())
    }

    /// What the evidence says about the object `q` describes, as `Explain`
    /// answers it. `following`: whether this process follows the type.
    pub fn explanation(&self, scope: &Scope, q: &Query, following: bool) -> Explanation {
        let engine = self;
        let q = self.with_previous(scope, q);
        let q = &*q;
        let winner = engine.lookup(scope, q);
        let candidates = engine
            .explain(scope, q)
            .into_iter()
            .map(|c| CandidateView {
                wins: winner.best.as_ref().is_some_and(|w| w.tier == c.tier && w.fact.same(&c.fact)),
                tier: c.tier,
                asserts: c.tier.asserts().into(),
                fact: EvidenceFact::from(&*c.fact),
                excluded: c.excluded.map(str::to_owned),
            })
            .collect();
        Explanation {
            winner_tier: winner.best.as_ref().map_or(Tier::Absent, |m| m.tier),
            settled: winner.settled,
            candidates,
            route: engine.route_health(&scope.route).map(|h| RouteHealthView {
                ever_resolved: h.ever_resolved,
                unresolved_in_a_row: h.unresolved_in_a_row,
                misrouted: h.warned,
            }),
            following,
            follower_last_success: engine.metrics().fact_follower_last_success_timestamp_seconds.get(),
            facts_for_type: engine.facts_for_type(scope) as u64,
            grace: engine.streaks().map(|s| s.view(scope)),
        }
    }

    /// Facts held for `scope` (see [`Index::scope_len`]).
    pub fn facts_for_type(&self, scope: &Scope) -> usize {
        self.read().scope_len(scope)
    }

    /// Ends every wait now: in-flight resolutions return their best answer.
    pub fn shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Resolves one watch event's author. `version` only labels metrics.
    pub async fn resolve(&self, scope: &Scope, version: &str, q: &Query) -> Resolution {
        let start = self.clock.monotonic();
        let deadline_ms = rules::attribution::grace::deadline_ms(
            self.clock.now_ms(),
            self.config.grace.as_millis() as u64,
            q.written_at_us,
        );
        match self.answer_now(scope, version, q, start, deadline_ms) {
            Some(r) => r,
            // Boxed: only a resolution that waits carries the wait's state
            // (waiter, timer, shutdown signal); the common one answers at once.
            None => Box::pin(self.wait(scope, version, q, start, deadline_ms)).await,
        }
    }

    /// The answer without waiting, when waiting could not change it: the
    /// first read settles, the wait ended before it began, or the adaptive
    /// grace skips the wait.
    fn answer_now(
        &self,
        scope: &Scope,
        version: &str,
        q: &Query,
        start: Duration,
        deadline_ms: u64,
    ) -> Option<Resolution> {
        // Fast path: a read that settles needs no waiter (nothing to wait for).
        let first = self.read_for(scope, q);
        // A relisted object written long ago (a first start's every object)
        // has a deadline already past: what the index holds is the answer,
        // with no waiter and no timer to set up and tear down.
        if first.settled || deadline_ms <= self.clock.now_ms() {
            return Some(self.finish(scope, version, q, first.best, start));
        }
        if self.streaks().is_some_and(|s| s.wait(scope) == Wait::Skip) {
            // Adaptive grace: no fact of this type for a long run of events;
            // what the index holds now is what the grace would end on.
            self.metrics.grace_skipped(&scope.group_resource.group, version, &scope.group_resource.resource);
            return Some(self.finish(scope, version, q, first.best, start));
        }
        None
    }

    /// Waits up to the grace for a fact that could settle `q`.
    async fn wait(&self, scope: &Scope, version: &str, q: &Query, start: Duration, deadline_ms: u64) -> Resolution {
        let mut shutdown = self.shutdown.subscribe();
        // Register BEFORE the read that decides to wait, so a fact landing
        // in between still wakes us.
        let mut waiter = self.waiters.register(scope, &q.waiter_keys());
        let mut grace_over = self.clock.sleep_until(deadline_ms);
        let best = loop {
            let l = self.read_for(scope, q);
            if l.settled || *shutdown.borrow_and_update() {
                break l.best;
            }
            tokio::select! {
                biased;
                _ = waiter.woken() => continue,
                _ = shutdown.changed() => {}
                _ = &mut grace_over => {}
            }
            // Grace over or shutting down: what is there now is the answer.
            break self.read_for(scope, q).best;
        };
        drop(waiter);
        self.finish(scope, version, q, best, start)
    }

    fn finish(&self, scope: &Scope, version: &str, q: &Query, best: Option<Match>, start: Duration) -> Resolution {
        let r = Resolution {
            tier: best.as_ref().map_or(Tier::Absent, |m| m.tier),
            fact: best.map(|m| m.fact),
            waited: self.clock.monotonic().saturating_sub(start),
        };
        if let Some(f) = &r.fact
            && !q.uid.is_empty()
        {
            self.answered().record(scope, &q.uid, f.answered(q), self.clock.now_ms());
        }
        self.observe(scope, version, q, &r);
        r
    }

    fn observe(&self, scope: &Scope, version: &str, q: &Query, r: &Resolution) {
        let gr = &scope.group_resource;
        self.metrics.resolution(
            (&gr.group, version, &gr.resource),
            r.tier.label(),
            r.actor_kind().label(),
            q.removal,
            r.waited.as_secs_f64(),
        );
        if r.fact.is_some() {
            self.metrics.fact_matched();
        }
        self.track_route(&scope.route, r.tier != Tier::Absent);
        if let Some(mut streaks) = self.streaks() {
            streaks.resolved(scope, r.tier == Tier::Absent);
        }
    }

    fn track_route(&self, route: &str, resolved: bool) {
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        // One lookup; the route is copied only the first time it is seen.
        let h = routes.entry_ref(route).or_default();
        if resolved {
            h.ever_resolved = true;
            h.unresolved_in_a_row = 0;
            return;
        }
        h.unresolved_in_a_row = h.unresolved_in_a_row.saturating_add(1);
        if !h.ever_resolved && !h.warned && h.unresolved_in_a_row >= MISROUTED_AFTER {
            h.warned = true;
            tracing::warn!(
                route,
                unresolved = h.unresolved_in_a_row,
                "attribution has never resolved on audit route {route:?}: no fact has ever arrived for it. \
                 Point the API server's audit webhook at /audit-webhook/{route} (or set the route annotation), \
                 or set the ClusterProvider's spec.attribution.auditRoute to the route its audit events arrive on"
            );
        }
    }

    /// The misrouted-route state of `route`, if it has seen a resolution.
    pub fn route_health(&self, route: &str) -> Option<RouteHealth> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner()).get(route).copied()
    }
}

impl FactSink for Engine {
    fn apply(&self, batch: FactBatch) {
        self.apply_batch(batch);
    }
}

#[cfg(test)]
mod tests;
