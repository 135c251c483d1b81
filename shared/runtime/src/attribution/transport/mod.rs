//! The transports: the two-method seam between the publish side and the
//! index (`FactPublisher` / `FactFollower`), with a Redis Streams
//! implementation compatible with gitops-reverser and an in-process one.
//!
//! spec/attribution.md, "The transports": "The transport sits behind a
//! two-method seam (FactPublisher / FactFollower) with one conformance suite
//! over both implementations." The suite is `conformance.rs`; both
//! implementations run the very same property functions.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rules::attribution::{Fact, Scope};
use tokio::sync::watch;

use crate::metrics::Metrics;

pub mod memory;
pub mod redis;

#[cfg(test)]
mod conformance;
#[cfg(test)]
mod tests;

pub use memory::{MemoryFollower, MemoryPublisher, MemoryTransport};
pub use redis::{RedisFollower, RedisOptions, RedisPublisher, RedisTransport};

/// Every way a fact transport fails. Messages say what failed and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// `--author-attribution-transport` named something else.
    #[error("unknown transport {0:?}: use `memory` or `redis`")]
    UnknownTransport(String),

    /// The memory transport with more than one replica.
    #[error(
        "the memory transport is refused with --replica-count {replicas}: facts published on one replica would never reach the watchers of another; run one replica or use --author-attribution-transport redis with --redis-url"
    )]
    MemoryTransportReplicas { replicas: u32 },

    /// `--author-attribution-transport redis` without a URL.
    #[error(
        "the redis transport needs a Redis URL: pass --redis-url (or REVERSER_REDIS_URL) redis://[:password@]host:port[/db], or rediss:// for TLS"
    )]
    RedisUrlMissing,

    /// The Redis URL (or its TLS material) could not be used.
    #[error(
        "Redis URL {url} is not usable: {source}; fix the URL (redis:// or rediss://, password in the userinfo) or the CA certificate"
    )]
    RedisConfig {
        /// The URL with any password redacted.
        url: String,
        #[source]
        source: ::redis::RedisError,
    },

    /// The follower's retry pacing is out of bounds.
    #[error(transparent)]
    Backoff(#[from] crate::backoff::BackoffError),

    /// A Redis command failed.
    #[error(
        "Redis {op} on {target} failed: {source}; check that Redis at {url} is reachable and the credentials are right"
    )]
    Redis {
        op: &'static str,
        target: String,
        /// The URL with any password redacted.
        url: String,
        #[source]
        source: ::redis::RedisError,
    },
    /// Redis evicts keys, so it may drop acknowledged facts.
    #[error(
        "Redis at {url} has maxmemory-policy {policy}, which evicts keys: it may drop acknowledged fact streams \
         silently; set maxmemory-policy noeviction (Redis then refuses writes when full and the API server retries), \
         or give --allow-evicting-redis to accept the loss (counted as stream gaps)"
    )]
    EvictingRedis { url: String, policy: String },
}

use TransportError as Error;

/// `Result` with [`TransportError`] as the default error.
pub type Result<T, E = TransportError> = std::result::Result<T, E>;

/// Facts of one scope, as one stream entry carries them. `at_ms` is when the
/// batch was appended (a Redis entry id's milliseconds; the clock's now for
/// memory): the index ages facts out from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactBatch {
    pub scope: Scope,
    pub facts: Vec<Fact>,
    pub at_ms: u64,
}

/// Where a follower delivers what it reads: the engine's index (which wakes
/// the waiters the facts could answer). Must not block.
pub trait FactSink: Send + Sync + 'static {
    fn apply(&self, batch: FactBatch);
}

/// The knobs both transports share. Defaults are the reference
/// implementation's (facts/attribution-wire.md, "The stream": "maxLen 10000
/// entries; read count 512 entries per stream per read; block 1 s; trim
/// interval 1 min; TTL 10 min").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportConfig {
    /// Stream key prefix, `gitops-reverser` by default.
    pub prefix: String,
    /// `--author-attribution-ttl`: stream retention, and how far back a
    /// (re)started follower re-warms.
    pub ttl: Duration,
    /// `XADD ... MAXLEN ~ <max_len>`: a hot type cannot grow without bound.
    pub max_len: u64,
    /// Entries read per stream per read.
    pub read_count: usize,
    /// How long one blocking read waits; a subscription change takes effect
    /// within one such period.
    pub block: Duration,
    /// How often the publish path also trims a stream by `MINID`.
    pub trim_interval: Duration,
    /// First retry delay after a failed follower read; doubles per failure.
    pub retry_min: Duration,
    /// Ceiling of the follower's retry delay: below the grace (see
    /// [`retry_ceiling`]), so facts appended right after Redis returns are
    /// read while the resolutions waiting for them still wait.
    pub retry_max: Duration,
    /// How long the publisher waits for Redis to answer an append before
    /// the receiver answers 503 (the API server then retries the batch).
    pub response_timeout: Duration,
    /// `--allow-evicting-redis`: accept a `maxmemory-policy` that evicts.
    pub allow_evicting: bool,
}

impl Default for TransportConfig {
    fn default() -> Self {
        Self {
            prefix: rules::attribution::DEFAULT_STREAM_PREFIX.to_owned(),
            ttl: Duration::from_secs(600),
            max_len: 10_000,
            read_count: 512,
            block: Duration::from_secs(1),
            trim_interval: Duration::from_secs(60),
            retry_min: Duration::from_millis(100),
            retry_max: Duration::from_secs(1),
            response_timeout: Duration::from_secs(10),
            allow_evicting: false,
        }
    }
}

/// The follower's longest retry pause for a grace: a third of it, at most
/// one second, never below the first step. A pause as long as the grace
/// would leave every resolution right after a Redis restart `absent`.
pub fn retry_ceiling(grace: Duration, retry_min: Duration) -> Duration {
    (grace / 3).min(Duration::from_secs(1)).max(retry_min)
}

/// The publish side of the seam: the audit receiver hands it every fact of
/// one decoded EventList, and it appends one entry per scope ("appends one
/// batched entry per type").
pub trait FactPublisher: Send + Sync {
    /// Publishes `facts`, grouped into one batch (one stream entry) per scope,
    /// in first-seen scope order with each scope's facts in input order.
    /// Returns how many facts are stored (now, or by an earlier publish of
    /// the same batch). An error means nothing can be assumed written: the
    /// caller answers the API server with an error so it retries the batch.
    /// Publishing the same batch again stores it once (Redis: a dedup key per
    /// batch), and a duplicate that gets through anyway changes no
    /// resolution: the index ignores a fact whose auditID it holds.
    fn publish(&self, facts: Vec<(Scope, Fact)>) -> impl Future<Output = Result<usize>> + Send;
}

/// The follow side of the seam: a reference-counted subscription set that
/// changes at runtime, and a follow loop delivering [`FactBatch`]es to a
/// [`FactSink`].
pub trait FactFollower: Send + Sync {
    /// Adds one reference to `scope`; the first reference adds its stream to
    /// the subscription set (re-warmed from one TTL of retention).
    fn acquire(&self, scope: &Scope);
    /// Drops one reference; the last one removes the stream from the set.
    fn release(&self, scope: &Scope);
    /// The scopes currently subscribed (reference count > 0).
    fn subscriptions(&self) -> Vec<Scope>;
    /// `true` once every subscribed stream has been read up to its tail since
    /// it was (re)warmed: the follower has caught up to the TTL horizon, so
    /// the index holds what retention holds (for `/readyz`).
    fn caught_up(&self) -> watch::Receiver<bool>;
    /// Resolves once the follow loop reads exactly the current subscription
    /// set (after an acquire/release, within one block period).
    fn settled(&self) -> impl Future<Output = ()> + Send;
    /// The follow loop. Runs until the future is dropped (abort its task);
    /// read failures are counted, logged and retried with backoff, never
    /// returned. Run one loop per follower.
    fn follow(&self, sink: Arc<dyn FactSink>) -> impl Future<Output = ()> + Send;
}

/// Groups facts into one batch per scope: first-seen scope order, input order
/// within a scope. A pure rule ("one batched entry per type").
pub fn group_by_scope(facts: Vec<(Scope, Fact)>) -> Vec<(Scope, Vec<Fact>)> {
    let mut order: Vec<(Scope, Vec<Fact>)> = Vec::new();
    let mut slot: BTreeMap<Scope, usize> = BTreeMap::new();
    for (scope, fact) in facts {
        match slot.get(&scope) {
            Some(&i) => order[i].1.push(fact),
            None => {
                slot.insert(scope.clone(), order.len());
                order.push((scope, vec![fact]));
            }
        }
    }
    order
}

/// Whether an entry's facts may enter the index: one authorless fact refuses
/// the entry whole (facts/attribution-wire.md: "an entry carrying a fact
/// without it is refused whole and counted as a decode error").
pub(crate) fn entry_is_acceptable(facts: &[Fact]) -> bool {
    facts.iter().all(|f| !f.author.trim().is_empty())
}

/// Which transport a process runs (`--transport memory|redis`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    Memory,
    Redis,
}

impl TransportKind {
    /// The `transport` label value.
    pub fn label(self) -> &'static str {
        match self {
            TransportKind::Memory => "memory",
            TransportKind::Redis => "redis",
        }
    }
}

impl std::str::FromStr for TransportKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "memory" => Ok(TransportKind::Memory),
            "redis" => Ok(TransportKind::Redis),
            other => Err(Error::UnknownTransport(other.to_owned())),
        }
    }
}

/// Everything needed to build a transport at runtime.
#[derive(Debug, Clone)]
pub struct TransportOptions {
    pub kind: TransportKind,
    /// `--replica-count`: the memory transport is refused above 1.
    pub replica_count: u32,
    /// Required for `redis`: the URL carries password and TLS
    /// (`rediss://:password@host:port/db`).
    pub redis: Option<RedisOptions>,
    pub config: TransportConfig,
}

/// A transport selected at runtime.
#[derive(Debug, Clone)]
pub enum Transport {
    Memory(MemoryTransport),
    Redis(RedisTransport),
}

impl Transport {
    /// Builds the selected transport. No I/O: Redis is connected lazily, so a
    /// process can start while Redis is still coming up.
    pub fn build(options: TransportOptions, metrics: Arc<Metrics>) -> Result<Self> {
        match options.kind {
            TransportKind::Memory => {
                Ok(Transport::Memory(MemoryTransport::new(options.replica_count, options.config, metrics)?))
            }
            TransportKind::Redis => {
                let redis = options.redis.ok_or(Error::RedisUrlMissing)?;
                Ok(Transport::Redis(RedisTransport::new(redis, options.config, metrics)?))
            }
        }
    }

    pub fn kind(&self) -> TransportKind {
        match self {
            Transport::Memory(_) => TransportKind::Memory,
            Transport::Redis(_) => TransportKind::Redis,
        }
    }

    /// The `maxmemory-policy` Redis reported when it evicts keys (`None`:
    /// memory, which has no such thing).
    pub fn evicting_policy(&self) -> Option<watch::Receiver<Option<String>>> {
        match self {
            Transport::Memory(_) => None,
            Transport::Redis(t) => Some(t.evicting_policy()),
        }
    }

    /// Whether the transport's backend answers (`None`: memory, always).
    pub fn health(&self) -> Option<watch::Receiver<bool>> {
        match self {
            Transport::Memory(_) => None,
            Transport::Redis(t) => Some(t.health()),
        }
    }

    /// Watches the backend until dropped (see [`RedisTransport::monitor`]);
    /// returns at once for memory.
    pub async fn monitor(&self) {
        if let Transport::Redis(t) = self {
            t.monitor().await;
        }
    }

    /// Drops what the transport holds past the TTL (the memory transport's
    /// logs; Redis expires its streams itself).
    pub fn expire(&self) {
        if let Transport::Memory(t) = self {
            t.expire();
        }
    }

    pub fn publisher(&self) -> AnyPublisher {
        match self {
            Transport::Memory(t) => AnyPublisher::Memory(t.publisher()),
            Transport::Redis(t) => AnyPublisher::Redis(t.publisher()),
        }
    }

    /// A new follower with its own subscription set and cursors.
    pub fn follower(&self) -> AnyFollower {
        match self {
            Transport::Memory(t) => AnyFollower::Memory(t.follower()),
            Transport::Redis(t) => AnyFollower::Redis(t.follower()),
        }
    }
}

/// Either publisher, chosen at runtime.
#[derive(Debug, Clone)]
pub enum AnyPublisher {
    Memory(MemoryPublisher),
    Redis(RedisPublisher),
}

impl FactPublisher for AnyPublisher {
    async fn publish(&self, facts: Vec<(Scope, Fact)>) -> Result<usize> {
        match self {
            AnyPublisher::Memory(p) => p.publish(facts).await,
            AnyPublisher::Redis(p) => p.publish(facts).await,
        }
    }
}

/// Either follower, chosen at runtime.
#[derive(Debug, Clone)]
pub enum AnyFollower {
    Memory(MemoryFollower),
    Redis(RedisFollower),
}

impl FactFollower for AnyFollower {
    fn acquire(&self, scope: &Scope) {
        match self {
            AnyFollower::Memory(f) => f.acquire(scope),
            AnyFollower::Redis(f) => f.acquire(scope),
        }
    }
    fn release(&self, scope: &Scope) {
        match self {
            AnyFollower::Memory(f) => f.release(scope),
            AnyFollower::Redis(f) => f.release(scope),
        }
    }
    fn subscriptions(&self) -> Vec<Scope> {
        match self {
            AnyFollower::Memory(f) => f.subscriptions(),
            AnyFollower::Redis(f) => f.subscriptions(),
        }
    }
    fn caught_up(&self) -> watch::Receiver<bool> {
        match self {
            AnyFollower::Memory(f) => f.caught_up(),
            AnyFollower::Redis(f) => f.caught_up(),
        }
    }
    async fn settled(&self) {
        match self {
            AnyFollower::Memory(f) => f.settled().await,
            AnyFollower::Redis(f) => f.settled().await,
        }
    }
    async fn follow(&self, sink: Arc<dyn FactSink>) {
        match self {
            AnyFollower::Memory(f) => f.follow(sink).await,
            AnyFollower::Redis(f) => f.follow(sink).await,
        }
    }
}

/// The reference-counted subscription set and the loop's published state,
/// shared by both followers.
#[derive(Debug)]
pub(crate) struct FollowerCore {
    counts: Mutex<BTreeMap<Scope, usize>>,
    /// Bumped whenever the set's membership changes.
    requested: watch::Sender<u64>,
    /// The generation the loop last started reading under.
    applied: watch::Sender<u64>,
    caught_up: watch::Sender<bool>,
}

impl FollowerCore {
    pub(crate) fn new() -> Self {
        Self {
            counts: Mutex::new(BTreeMap::new()),
            requested: watch::Sender::new(0),
            applied: watch::Sender::new(0),
            // Nothing subscribed is trivially caught up.
            caught_up: watch::Sender::new(true),
        }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, BTreeMap<Scope, usize>> {
        // A poisoned lock only means a panic elsewhere mid-update of a plain
        // map of counters; the map itself is still coherent.
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn acquire(&self, scope: &Scope) {
        let mut counts = self.counts();
        let n = counts.entry(scope.clone()).or_insert(0);
        *n += 1;
        if *n == 1 {
            tracing::debug!(%scope, "fact follower: scope acquired");
            // Not caught up until the new stream is read to its tail.
            self.set_caught_up(false);
            self.requested.send_modify(|g| *g += 1);
        }
    }

    pub(crate) fn release(&self, scope: &Scope) {
        let mut counts = self.counts();
        match counts.get_mut(scope) {
            Some(n) if *n > 1 => *n -= 1,
            Some(_) => {
                counts.remove(scope);
                tracing::debug!(%scope, "fact follower: scope released");
                self.requested.send_modify(|g| *g += 1);
            }
            None => {
                tracing::warn!(%scope, "fact follower: release of a scope never acquired; ignored (acquire and release must pair)");
            }
        }
    }

    pub(crate) fn subscriptions(&self) -> Vec<Scope> {
        self.counts().keys().cloned().collect()
    }

    /// The current generation and scope set, read together.
    pub(crate) fn snapshot(&self) -> (u64, Vec<Scope>) {
        let counts = self.counts();
        (*self.requested.borrow(), counts.keys().cloned().collect())
    }

    pub(crate) fn requested_rx(&self) -> watch::Receiver<u64> {
        self.requested.subscribe()
    }

    pub(crate) fn mark_applied(&self, generation: u64) {
        self.applied.send_if_modified(|g| {
            let changed = *g != generation;
            *g = generation;
            changed
        });
    }

    pub(crate) fn set_caught_up(&self, value: bool) {
        self.caught_up.send_if_modified(|v| {
            let changed = *v != value;
            *v = value;
            changed
        });
    }

    pub(crate) fn caught_up(&self) -> watch::Receiver<bool> {
        self.caught_up.subscribe()
    }

    pub(crate) async fn settled(&self) {
        let mut applied = self.applied.subscribe();
        loop {
            let want = *self.requested.borrow();
            if *applied.borrow_and_update() >= want {
                return;
            }
            if applied.changed().await.is_err() {
                return;
            }
        }
    }
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or_default()
}
