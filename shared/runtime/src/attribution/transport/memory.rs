//! The in-memory transport: the same contract as Redis Streams, in-process,
//! with no Redis (spec/attribution.md, "The transports": "memory runs
//! attribution entirely in-process with no Redis, and is refused with more
//! than one replica").
//!
//! One hub holds one bounded log per scope (entries numbered 1, 2, ...), the
//! in-process stand-in for a stream; each follower keeps its own per-scope
//! cursor, exactly as a Redis follower keeps its per-stream entry id.
//!
//! A log whose every entry is older than the TTL is dropped by [`expire`]
//! (a Redis stream's EXPIRE does the same), so a route or type seen once
//! costs nothing after a TTL (issue 30: about 2.5 KiB per scope stayed for
//! good). A log made again later numbers on from the highest number any
//! dropped log reached, so no follower's cursor can skip its entries.
//!
//! An entry every live follower of the hub has applied is dropped too: its
//! facts are in each follower's index, and nothing else reads the log (a
//! restart is a new process, whose hub is empty). What a log keeps is what
//! some follower has not applied: the facts of a type nobody follows yet,
//! or no longer (a later acquire re-warms from them), and the backlog of a
//! follower behind. At a million facts this was the log's 65 bytes a fact
//! beside the index's 137 (issue 31). A follower made after an entry was
//! dropped does not see it; the sidecar makes one follower per hub.
//!
//! [`expire`]: MemoryTransport::expire

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::{Error, Result};
use super::{
    FactBatch, FactFollower, FactPublisher, FactSink, FollowerCore, TransportConfig, TransportKind,
    entry_is_acceptable, group_by_scope, now_ms,
};
use crate::metrics::Metrics;
use rules::attribution::index::PackedFacts;
use rules::attribution::{Fact, Scope};

const TRANSPORT: &str = "memory";

/// The memory transport: one per process, shared by the publisher and every
/// follower of that process.
#[derive(Debug, Clone)]
pub struct MemoryTransport {
    hub: Arc<Hub>,
}

impl MemoryTransport {
    /// Refuses `replica_count > 1`: facts published in-process on one replica
    /// never reach a watcher on another.
    pub fn new(replica_count: u32, config: TransportConfig, metrics: Arc<Metrics>) -> Result<Self> {
        if replica_count > 1 {
            return Err(Error::MemoryTransportReplicas { replicas: replica_count });
        }
        metrics
            .transport_info
            .get_or_create(&crate::metrics::TransportLabel { transport: TransportKind::Memory.label().to_owned() })
            .set(1);
        Ok(Self {
            hub: Arc::new(Hub { logs: Mutex::new(Logs::default()), version: watch::Sender::new(0), config, metrics }),
        })
    }

    /// Drops the logs whose every entry is older than the TTL; returns how
    /// many scopes the hub still holds.
    pub fn expire(&self) -> usize {
        self.hub.expire(now_ms())
    }

    pub fn publisher(&self) -> MemoryPublisher {
        MemoryPublisher { hub: self.hub.clone() }
    }

    /// A new follower with its own subscription set and cursors; the hub
    /// keeps what it has not applied while it lives.
    pub fn follower(&self) -> MemoryFollower {
        let id = {
            let mut logs = self.hub.logs();
            logs.next_follower += 1;
            let id = logs.next_follower;
            logs.followers.insert(id, HashMap::new());
            id
        };
        MemoryFollower {
            hub: self.hub.clone(),
            core: Arc::new(FollowerCore::new()),
            registration: Arc::new(Registration { hub: self.hub.clone(), id }),
        }
    }

    /// Appends a batch stamped `at_ms` rather than now (tests of the TTL
    /// horizon: an entry older than retention must not be re-warmed).
    #[cfg(test)]
    pub(crate) fn publish_at(&self, scope: &Scope, facts: Vec<Fact>, at_ms: u64) {
        self.hub.append(scope, facts, at_ms);
        self.hub.version.send_modify(|v| *v += 1);
    }

    /// Entries the scope's log still holds.
    #[cfg(test)]
    pub(crate) fn retained(&self, scope: &Scope) -> u64 {
        self.hub.logs().map.get(scope).map_or(0, |l| l.entries.len() as u64)
    }
}

/// Every scope's log, where a new one numbers from, and what each live
/// follower has applied.
#[derive(Debug, Default)]
struct Logs {
    map: HashMap<Scope, ScopeLog>,
    /// The highest entry number of any dropped log.
    base: u64,
    /// Per live follower, per scope it reads, the last entry it applied.
    followers: HashMap<u64, HashMap<Scope, u64>>,
    next_follower: u64,
}

#[derive(Debug)]
struct Hub {
    logs: Mutex<Logs>,
    /// Bumped on every append so waiting followers wake.
    version: watch::Sender<u64>,
    config: TransportConfig,
    metrics: Arc<Metrics>,
}

#[derive(Debug, Default)]
struct ScopeLog {
    /// Number of the last entry ever appended (entries are 1-based).
    last_seq: u64,
    /// The number this log started after: none below it was ever its own.
    base: u64,
    entries: VecDeque<Entry>,
}

#[derive(Debug, Clone)]
struct Entry {
    seq: u64,
    at_ms: u64,
    /// Packed: the index beside the log already holds these facts, so the
    /// log's copy (one TTL of them, for a later subscription to re-warm
    /// from) is kept as small as it reads back.
    facts: Arc<PackedFacts>,
}

/// What one read of one scope returned.
#[derive(Debug, Default)]
struct Read {
    /// Entries after the cursor that were trimmed before this follower read
    /// them ("a trim gap reported only when the follower was behind").
    gap: u64,
    entries: Vec<Entry>,
}

impl Hub {
    fn logs(&self) -> std::sync::MutexGuard<'_, Logs> {
        self.logs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn expire(&self, now: u64) -> usize {
        let horizon = now.saturating_sub(self.config.ttl.as_millis() as u64);
        let mut logs = self.logs();
        let Logs { map, base, .. } = &mut *logs;
        map.retain(|_, log| {
            while log.entries.front().is_some_and(|e| e.at_ms <= horizon) {
                log.entries.pop_front();
            }
            if log.entries.is_empty() {
                *base = (*base).max(log.last_seq);
                return false;
            }
            true
        });
        let held = map.len();
        self.metrics.memory_scopes.set(held as i64);
        held
    }

    fn append(&self, scope: &Scope, facts: Vec<Fact>, at_ms: u64) {
        // Packed outside the lock: appends of other scopes do not wait on it.
        let facts = Arc::new(PackedFacts::pack(&facts));
        let mut logs = self.logs();
        let base = logs.base;
        let log =
            logs.map.entry(scope.clone()).or_insert_with(|| ScopeLog { last_seq: base, base, ..ScopeLog::default() });
        log.last_seq += 1;
        log.entries.push_back(Entry { seq: log.last_seq, at_ms, facts });
        // MAXLEN bound (exact here; Redis's `~` is a cost optimisation) and
        // retention by age, both on the publish path.
        let max_len = usize::try_from(self.config.max_len).unwrap_or(usize::MAX);
        while log.entries.len() > max_len {
            log.entries.pop_front();
        }
        let horizon = now_ms().saturating_sub(self.config.ttl.as_millis() as u64);
        while log.entries.front().is_some_and(|e| e.at_ms <= horizon) {
            log.entries.pop_front();
        }
    }

    /// `follower` applied `scope`'s entries up to `seq`: what every live
    /// follower has applied is dropped.
    fn applied(&self, follower: u64, scope: &Scope, seq: u64) {
        let mut logs = self.logs();
        let Logs { map, followers, .. } = &mut *logs;
        let Some(cursors) = followers.get_mut(&follower) else { return };
        match cursors.get_mut(scope) {
            Some(at) => *at = seq,
            None => {
                cursors.insert(scope.clone(), seq);
            }
        }
        let upto = followers.values().map(|c| c.get(scope).copied().unwrap_or(0)).min().unwrap_or(0);
        if let Some(log) = map.get_mut(scope) {
            while log.entries.front().is_some_and(|e| e.seq <= upto) {
                log.entries.pop_front();
            }
        }
    }

    /// `follower` no longer reads `scope`: what it applied no longer
    /// lets anything go (entries from now on are kept for its return).
    fn stopped(&self, follower: u64, scope: &Scope) {
        if let Some(cursors) = self.logs().followers.get_mut(&follower) {
            cursors.remove(scope);
        }
    }

    /// The cursor a follower starts a scope at: past everything older than
    /// one TTL ("a restart re-warms from one TTL of stream retention").
    fn warm_cursor(&self, scope: &Scope) -> u64 {
        let horizon = now_ms().saturating_sub(self.config.ttl.as_millis() as u64);
        let logs = self.logs();
        let Some(log) = logs.map.get(scope) else {
            // Nothing held: start past every number a later log can reuse.
            return logs.base;
        };
        let first = log.entries.front().map_or(log.last_seq + 1, |e| e.seq);
        let aged = log.entries.iter().take_while(|e| e.at_ms <= horizon).last().map(|e| e.seq);
        aged.unwrap_or(first.saturating_sub(1))
    }

    fn read(&self, scope: &Scope, cursor: u64, count: usize) -> Read {
        let logs = self.logs();
        let Some(log) = logs.map.get(scope) else {
            return Read::default();
        };
        let first = log.entries.front().map_or(log.last_seq + 1, |e| e.seq);
        // Entries of a dropped log (all past the TTL) are no gap.
        let gap = first.saturating_sub(cursor.max(log.base) + 1);
        let entries = log.entries.iter().skip_while(|e| e.seq <= cursor).take(count).cloned().collect();
        Read { gap, entries }
    }
}

/// Publishes into the hub.
#[derive(Debug, Clone)]
pub struct MemoryPublisher {
    hub: Arc<Hub>,
}

impl FactPublisher for MemoryPublisher {
    async fn publish(&self, facts: Vec<(Scope, Fact)>) -> Result<usize> {
        let batches = group_by_scope(facts);
        if batches.is_empty() {
            return Ok(0);
        }
        let at_ms = now_ms();
        let mut written = 0;
        for (scope, facts) in batches {
            written += facts.len();
            self.hub.append(&scope, facts, at_ms);
        }
        self.hub.version.send_modify(|v| *v += 1);
        self.hub.metrics.fact_op("written", written as u64);
        Ok(written)
    }
}

/// Follows scopes of the hub.
#[derive(Debug, Clone)]
pub struct MemoryFollower {
    hub: Arc<Hub>,
    core: Arc<FollowerCore>,
    registration: Arc<Registration>,
}

/// A follower's place in the hub, given up when its last clone goes.
#[derive(Debug)]
struct Registration {
    hub: Arc<Hub>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.hub.logs().followers.remove(&self.id);
    }
}

struct Cursor {
    seq: u64,
    caught_up: bool,
}

impl FactFollower for MemoryFollower {
    fn acquire(&self, scope: &Scope) {
        self.core.acquire(scope);
    }
    fn release(&self, scope: &Scope) {
        self.core.release(scope);
    }
    fn subscriptions(&self) -> Vec<Scope> {
        self.core.subscriptions()
    }
    fn caught_up(&self) -> watch::Receiver<bool> {
        self.core.caught_up()
    }
    async fn settled(&self) {
        self.core.settled().await;
    }

    async fn follow(&self, sink: Arc<dyn FactSink>) {
        let hub = &self.hub;
        let count = hub.config.read_count.max(1);
        let mut cursors: HashMap<Scope, Cursor> = HashMap::new();
        let mut version = hub.version.subscribe();
        let mut requested = self.core.requested_rx();
        loop {
            // Mark both signals seen BEFORE reading, so an append or a
            // subscription change landing mid-read still wakes the wait below.
            version.borrow_and_update();
            requested.borrow_and_update();
            let (generation, scopes) = self.core.snapshot();
            let me = self.registration.id;
            cursors.retain(|s, _| {
                let kept = scopes.contains(s);
                if !kept {
                    hub.stopped(me, s);
                }
                kept
            });
            for scope in &scopes {
                if !cursors.contains_key(scope) {
                    let seq = hub.warm_cursor(scope);
                    cursors.insert(scope.clone(), Cursor { seq, caught_up: false });
                    // Not caught up until this stream is read: whoever waits
                    // for `settled` then `caught_up` sees its facts.
                    self.core.set_caught_up(false);
                }
            }
            self.core.mark_applied(generation);

            let mut more = false;
            for scope in &scopes {
                let Some(cursor) = cursors.get_mut(scope) else {
                    continue;
                };
                let read = hub.read(scope, cursor.seq, count);
                if read.gap > 0 {
                    let stream = scope.stream_key(&hub.config.prefix);
                    tracing::warn!(%stream, lost_entries = read.gap, "fact follower fell behind and entries were trimmed before it read them; their facts are lost for good");
                    hub.metrics.stream_gap(&stream, read.gap);
                }
                cursor.caught_up = read.entries.len() < count;
                more |= !cursor.caught_up;
                let read_any = !read.entries.is_empty();
                for entry in read.entries {
                    cursor.seq = entry.seq;
                    let facts = entry.facts.unpack();
                    if entry_is_acceptable(&facts) {
                        sink.apply(FactBatch { scope: scope.clone(), facts, at_ms: entry.at_ms });
                    } else {
                        tracing::warn!(%scope, entry = entry.seq, "fact entry skipped: a fact in it names no author");
                        hub.metrics.decode_error(TRANSPORT);
                    }
                }
                if read_any {
                    hub.applied(me, scope, cursor.seq);
                }
            }
            hub.metrics.follower_success();
            self.core.set_caught_up(cursors.values().all(|c| c.caught_up));
            if more {
                tokio::task::yield_now().await;
                continue;
            }
            tokio::select! {
                r = version.changed() => if r.is_err() { return; },
                r = requested.changed() => if r.is_err() { return; },
            }
        }
    }
}

#[cfg(test)]
mod tests;
