//! The Redis Streams transport, wire-compatible with gitops-reverser
//! (facts/attribution-wire.md, "The stream"): one stream per (route,
//! group/resource), one entry per (batch, stream) with exactly one field,
//! `facts`, holding a JSON array; `XADD MAXLEN ~` plus `EXPIRE` in one
//! pipeline, `XTRIM MINID` amortized onto publish; one blocking `XREAD`
//! across the whole subscription set with per-stream cursors held in memory
//! (no consumer groups).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ::redis::aio::MultiplexedConnection;
use ::redis::streams::StreamReadReply;
use ::redis::{AsyncConnectionConfig, Client, RedisError, Value};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use super::{
    FactBatch, FactFollower, FactPublisher, FactSink, FollowerCore, TransportConfig, TransportKind,
    entry_is_acceptable, group_by_scope,
};
use rules::attribution::{Fact, Scope};

use super::{Error, Result};
use crate::backoff::Backoff;
use crate::metrics::Metrics;
use crate::redact::redact_url;

const TRANSPORT: &str = "redis";
/// The one entry field (facts/attribution-wire.md: "exactly one field, `facts`").
pub const ENTRY_FIELD: &str = "facts";

/// How to reach Redis. Password and TLS come from the URL
/// (`rediss://:password@host:port/db`); `ca_cert_pem` is the CA to trust for
/// `rediss://` when the server's certificate is not in the system store.
#[derive(Clone, Default)]
pub struct RedisOptions {
    pub url: String,
    pub ca_cert_pem: Option<Vec<u8>>,
}

impl fmt::Debug for RedisOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisOptions")
            .field("url", &redact_url(&self.url))
            .field("ca_cert_pem", &self.ca_cert_pem.as_ref().map(|c| c.len()))
            .finish()
    }
}

/// A Redis stream entry id, `<ms>-<seq>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EntryId {
    pub ms: u64,
    pub seq: u64,
}

impl EntryId {
    pub fn parse(s: &str) -> Option<Self> {
        let (ms, seq) = s.split_once('-')?;
        Some(Self { ms: ms.parse().ok()?, seq: seq.parse().ok()? })
    }
}

impl fmt::Display for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// What the probe script answers per stream: entries ever added, length,
/// last entry id, first held entry id, and whether the follower's own last
/// entry is still held.
type ProbeReply = (u64, u64, String, String, u8);

/// What the follower learns about one stream before each read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Probe {
    /// `entries-added`: every entry ever appended to the stream.
    pub added: u64,
    /// `length`: entries still held.
    pub length: u64,
    /// `last-generated-id`; `0-0` when the key does not exist.
    pub last: EntryId,
    /// `recorded-first-entry-id`: the first entry still held; `0-0` when
    /// none is.
    pub first: EntryId,
    /// Whether the stream holds an entry whose id is the follower's cursor
    /// (asked only when the cursor is an entry the follower read).
    pub holds_cursor: bool,
}

/// What the follower knows of one stream between probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Followed {
    /// Entries of the stream at or before the cursor, when known.
    pub ordinal: Option<u64>,
    pub cursor: EntryId,
    /// The cursor is an entry the follower read (not a re-warm start).
    pub cursor_is_entry: bool,
    /// `entries-added` as far as the follower saw it (0: no stream).
    pub seen_added: u64,
    /// The stream's last entry id as far as the follower saw it.
    pub seen_last: EntryId,
}

/// How entries were lost, for the log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loss {
    None,
    /// Trimmed (MAXLEN, MINID) before the follower read them.
    Trimmed,
    /// The key is gone (evicted by `maxmemory-policy`, or deleted).
    Vanished,
    /// The key was evicted or deleted and a later append created a new
    /// stream under the same key between two probes. Entries appended to
    /// the old stream after the previous probe cannot be counted: the count
    /// is a lower bound, and the event itself is counted apart.
    Recreated,
}

/// The probe's verdict: entries lost unread, how, and the follower's new
/// ordinal (how many of the stream's entries lie at or before its cursor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProbeOutcome {
    pub gap: u64,
    pub ordinal: Option<u64>,
    pub loss: Loss,
}

/// The stream-gap rule. Trimming (MAXLEN, MINID) only ever removes the oldest
/// entries, so `added - length` entries are gone, and they are the first
/// ones. A follower that knows its ordinal `k` (entries at or before its
/// cursor) lost `added - length - k` entries it never read, if that is
/// positive. Entries at or before the cursor were already read, so "ordinary
/// ageing of an entry a caught-up follower already read is not counted as
/// loss" falls out: only a follower that was behind is ever reported.
///
/// A stream that vanished whole (an evicting `maxmemory-policy`) took the
/// entries the follower knew of and had not read. One that vanished and was
/// created again by a later append is told apart from a trim by
/// [`recreated`]. Every append renews the stream's `EXPIRE` of one TTL, so a
/// new stream whose last entry is a TTL or more past the old one's may have
/// followed an ordinary expiry: that is not called an eviction.
///
/// The ordinal is learnt whenever the cursor is at the stream's tail (then it
/// equals `added`), and kept by counting entries read; until it is known
/// (right after a re-warm that started mid-stream) no gap is claimed.
pub(crate) fn probe_rule(f: Followed, probe: Probe, ttl_ms: u64) -> ProbeOutcome {
    if probe.added == 0 && probe.length == 0 {
        // No stream (expired, evicted, or never written): whatever comes
        // next is new. An idle stream expiring after it was read lost nothing.
        let gap = f.ordinal.map_or(0, |k| f.seen_added.saturating_sub(k));
        let loss = if gap > 0 { Loss::Vanished } else { Loss::None };
        return ProbeOutcome { gap, ordinal: Some(0), loss };
    }
    let trimmed = probe.added.saturating_sub(probe.length);
    let recreated = recreated(f, probe, trimmed);
    let (mut gap, mut ordinal, mut loss) = (0, f.ordinal, Loss::None);
    if recreated {
        gap = f.ordinal.map_or(0, |k| f.seen_added.saturating_sub(k));
        let may_have_expired = probe.last.ms >= f.seen_last.ms.saturating_add(ttl_ms);
        loss = match (may_have_expired, gap) {
            (false, _) => Loss::Recreated,
            (true, 0) => Loss::None,
            (true, _) => Loss::Vanished,
        };
        // The new stream's entries came after the cursor unless Redis's
        // clock went back; then nothing is known.
        ordinal = (probe.last > f.cursor).then_some(0);
    }
    if let Some(k) = ordinal
        && trimmed > k
    {
        gap += trimmed - k;
        ordinal = Some(trimmed);
        if loss == Loss::None {
            loss = Loss::Trimmed;
        }
    }
    if f.cursor >= probe.last {
        ordinal = Some(probe.added);
    }
    ProbeOutcome { gap, ordinal, loss }
}

/// Whether the stream under the key is not the one the follower last probed.
/// A stream only grows `entries-added`, and a trim takes its oldest entries
/// first, so each clause is impossible for the same stream:
/// - fewer entries ever added than the follower saw (or read);
/// - the follower's own last entry gone although fewer entries than it had
///   read were trimmed;
/// - every held entry newer than the last one the follower saw, although
///   fewer entries than it saw were trimmed. This one needs no cursor entry:
///   a follower that saw a stream emptied by a trim, then evicted and
///   created again, would otherwise go on counting the new stream's entries
///   from the old one's ordinal and later charge entries it had read.
///
/// Ids are time-based: a new stream's first id is past the old stream's
/// last unless Redis's clock went back, and then nothing can be told.
fn recreated(f: Followed, probe: Probe, trimmed: u64) -> bool {
    let fewer_added = probe.added < f.seen_added.max(f.ordinal.unwrap_or(0));
    let cursor_gone = f.ordinal.is_some_and(|k| f.cursor_is_entry && trimmed < k && !probe.holds_cursor);
    let all_newer = probe.length > 0 && probe.first > f.seen_last && trimmed < f.seen_added;
    fewer_added || cursor_gone || all_newer
}

/// For each key: `{entries-added, length, last-generated-id,
/// recorded-first-entry-id, holds-cursor}`, `{0, 0, "0-0", "0-0", 0}` for a
/// missing key; `ARGV[i]` is the key's cursor, or
/// `-` when it is not an entry the follower read. A script so the follower
/// gets a few integers rather than `XINFO STREAM`'s first and last entries
/// in full.
const PROBE_SCRIPT: &str = r"
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 0 then
    out[i] = {0, 0, '0-0', '0-0', 0}
  else
    local info = redis.call('XINFO', 'STREAM', key)
    local added, len, last, first = 0, 0, '0-0', '0-0'
    for j = 1, #info, 2 do
      local f = info[j]
      if f == 'entries-added' then added = info[j + 1]
      elseif f == 'length' then len = info[j + 1]
      elseif f == 'last-generated-id' then last = info[j + 1]
      elseif f == 'recorded-first-entry-id' then first = info[j + 1] end
    end
    local holds = 0
    if ARGV[i] ~= '-' and #redis.call('XRANGE', key, ARGV[i], ARGV[i]) > 0 then holds = 1 end
    out[i] = {added, len, last, first, holds}
  end
end
return out
";

/// The Redis transport: a client (no connection yet) and the shared knobs.
#[derive(Clone)]
pub struct RedisTransport {
    shared: Arc<Shared>,
}

struct Shared {
    client: Client,
    url: String,
    config: TransportConfig,
    /// The follower's retry pacing, checked once at construction.
    backoff: Backoff,
    metrics: Arc<Metrics>,
    /// Whether Redis answered the last time anyone in this process asked
    /// (the monitor's PING, a publish, a follower read).
    up: watch::Sender<bool>,
    /// The `maxmemory-policy` Redis last reported, when it evicts keys.
    evicting: watch::Sender<Option<String>>,
}

impl fmt::Debug for RedisTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisTransport").field("url", &self.shared.url).field("config", &self.shared.config).finish()
    }
}

impl RedisTransport {
    /// Parses the URL (and TLS material); does not connect.
    pub fn new(options: RedisOptions, config: TransportConfig, metrics: Arc<Metrics>) -> Result<Self> {
        let url = redact_url(&options.url);
        let backoff = Backoff::new(config.retry_min, config.retry_max)?;
        let client = match options.ca_cert_pem {
            Some(ca) => Client::build_with_tls(
                options.url.as_str(),
                ::redis::TlsCertificates { client_tls: None, root_cert: Some(ca) },
            ),
            None => Client::open(options.url.as_str()),
        }
        .map_err(|source| Error::RedisConfig { url: url.clone(), source })?;
        metrics
            .transport_info
            .get_or_create(&crate::metrics::TransportLabel { transport: TransportKind::Redis.label().to_owned() })
            .set(1);
        let up = watch::Sender::new(false);
        let evicting = watch::Sender::new(None);
        Ok(Self { shared: Arc::new(Shared { client, url, config, backoff, metrics, up, evicting }) })
    }

    /// Whether Redis answers, as this process last saw it (`/readyz` of a
    /// receiver). `false` until something has reached it.
    pub fn health(&self) -> watch::Receiver<bool> {
        self.shared.up.subscribe()
    }

    /// The `maxmemory-policy` Redis reported on the monitor's last
    /// connection, when it is one that evicts keys.
    pub fn evicting_policy(&self) -> watch::Receiver<Option<String>> {
        self.shared.evicting.subscribe()
    }

    /// Watches Redis: a `PING` every second while it answers, every
    /// [`MONITOR_DOWN_EVERY`] while it does not, so [`RedisTransport::health`]
    /// turns as soon as Redis does, and a follower waiting out a retry pause
    /// reconnects at once. Runs until dropped.
    pub async fn monitor(&self) {
        let shared = &self.shared;
        let mut conn: Option<MultiplexedConnection> = None;
        loop {
            let ok = match &mut conn {
                Some(c) => ::redis::cmd("PING").query_async::<String>(c).await.is_ok(),
                None => match shared.connect(MONITOR_TIMEOUT).await {
                    Ok(mut c) => {
                        let ok = ::redis::cmd("PING").query_async::<String>(&mut c).await.is_ok();
                        if ok {
                            shared.check_persistence(&mut c).await;
                            shared.check_eviction(&mut c).await;
                        }
                        conn = Some(c);
                        ok
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, url = %shared.url, "Redis monitor: not reachable");
                        false
                    }
                },
            };
            if !ok {
                conn = None;
            }
            shared.set_up(ok);
            tokio::time::sleep(if ok { MONITOR_UP_EVERY } else { MONITOR_DOWN_EVERY }).await;
        }
    }

    pub fn publisher(&self) -> RedisPublisher {
        RedisPublisher {
            inner: Arc::new(PublisherInner {
                shared: self.shared.clone(),
                conn: tokio::sync::Mutex::new(None),
                trims: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// A new follower with its own connection, subscription set and cursors.
    pub fn follower(&self) -> RedisFollower {
        RedisFollower { shared: self.shared.clone(), core: Arc::new(FollowerCore::new()) }
    }
}

/// The monitor's pace: slow while Redis answers, quick while it does not, so
/// a restart is noticed well within a grace.
const MONITOR_UP_EVERY: Duration = Duration::from_secs(1);
const MONITOR_DOWN_EVERY: Duration = Duration::from_millis(200);
const MONITOR_TIMEOUT: Duration = Duration::from_secs(1);

/// What keeps acknowledged facts across a Redis restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// `appendonly yes`: every append is in the AOF (fsynced per
    /// `appendfsync`, each second by default).
    Aof,
    /// Snapshots only (`save`): whatever arrived since the last one is lost.
    Rdb,
    /// Neither: a restart loses every fact.
    None,
    /// Redis would not say (CONFIG and INFO refused).
    Unknown,
}

impl Persistence {
    pub fn label(self) -> &'static str {
        match self {
            Persistence::Aof => "aof",
            Persistence::Rdb => "rdb",
            Persistence::None => "none",
            Persistence::Unknown => "unknown",
        }
    }

    /// The rule: AOF keeps acknowledged facts, snapshots keep some, nothing
    /// keeps none. `appendonly` and `save` as `CONFIG GET` answers them.
    pub fn of(appendonly: &str, save: &str) -> Self {
        if appendonly.eq_ignore_ascii_case("yes") {
            Persistence::Aof
        } else if !save.trim().is_empty() {
            Persistence::Rdb
        } else {
            Persistence::None
        }
    }
}

/// Whether a `maxmemory-policy` evicts keys: every policy but `noeviction`
/// does, once `maxmemory` is reached (`volatile-*` picks keys with an
/// EXPIRE, which every fact stream carries).
pub fn policy_evicts(policy: &str) -> bool {
    let p = policy.trim().to_ascii_lowercase();
    p.starts_with("allkeys-") || p.starts_with("volatile-")
}

impl Shared {
    /// Reads Redis's `maxmemory-policy` (on each new monitor connection: at
    /// start and on every reconnect). An evicting policy is refused (every
    /// append fails, `/readyz` says why) unless `--allow-evicting-redis`,
    /// which still warns and shows it on `/readyz` and `/metrics`.
    async fn check_eviction(&self, c: &mut MultiplexedConnection) {
        let reply: Result<Vec<String>, RedisError> =
            ::redis::cmd("CONFIG").arg("GET").arg("maxmemory-policy").query_async(c).await;
        let policy = match reply {
            Ok(r) => r.get(1).cloned().unwrap_or_default(),
            Err(e) => {
                tracing::warn!(url = %self.url, error = %e, "Redis would not report its maxmemory-policy (CONFIG refused): make sure it is noeviction, or an evicting policy may drop acknowledged facts silently");
                return;
            }
        };
        let evicting = policy_evicts(&policy).then(|| policy.clone());
        self.metrics.redis_evicting_policy.clear();
        if evicting.is_some() {
            self.metrics
                .redis_evicting_policy
                .get_or_create(&crate::metrics::PolicyLabel { policy: policy.clone() })
                .set(1);
            if self.config.allow_evicting {
                tracing::warn!(url = %self.url, policy = %policy, "Redis evicts keys (maxmemory-policy {policy}), accepted by --allow-evicting-redis: a stream it evicts loses acknowledged facts, counted on gitopsreverser_attribution_fact_stream_gaps_total; set noeviction to keep them");
            } else {
                tracing::error!(url = %self.url, policy = %policy, "{}", Error::EvictingRedis { url: self.url.clone(), policy: policy.clone() });
            }
        }
        self.evicting.send_if_modified(|v| {
            let changed = *v != evicting;
            *v = evicting;
            changed
        });
    }

    /// An append is refused while Redis evicts and that was not accepted.
    fn refuse_evicting(&self) -> Result<()> {
        if self.config.allow_evicting {
            return Ok(());
        }
        match self.evicting.borrow().as_ref() {
            Some(policy) => {
                self.metrics.redis_evicting_refusals.inc();
                Err(Error::EvictingRedis { url: self.url.clone(), policy: policy.clone() })
            }
            None => Ok(()),
        }
    }

    /// Reads Redis's persistence settings (on each new monitor connection),
    /// sets `gitopsreverser_attribution_redis_persistence{mode}`, and warns
    /// when a restart would lose acknowledged facts.
    async fn check_persistence(&self, c: &mut MultiplexedConnection) {
        let config = async {
            let aof: Vec<String> = ::redis::cmd("CONFIG").arg("GET").arg("appendonly").query_async(c).await?;
            let save: Vec<String> = ::redis::cmd("CONFIG").arg("GET").arg("save").query_async(c).await?;
            Ok::<_, RedisError>(Persistence::of(
                aof.get(1).map_or("", String::as_str),
                save.get(1).map_or("", String::as_str),
            ))
        };
        let mode = match config.await {
            Ok(mode) => mode,
            // Managed Redis often renames CONFIG; INFO still tells about the AOF.
            Err(_) => match ::redis::cmd("INFO").arg("persistence").query_async::<String>(c).await {
                Ok(info) if info.lines().any(|l| l.trim() == "aof_enabled:1") => Persistence::Aof,
                Ok(_) | Err(_) => Persistence::Unknown,
            },
        };
        let labels = |m: Persistence| crate::metrics::ModeLabel { mode: m.label().to_owned() };
        for m in [Persistence::Aof, Persistence::Rdb, Persistence::None, Persistence::Unknown] {
            self.metrics.redis_persistence.get_or_create(&labels(m)).set(i64::from(m == mode));
        }
        match mode {
            Persistence::Aof => {
                tracing::info!(url = %self.url, "Redis persistence: AOF; acknowledged facts survive a Redis restart")
            }
            Persistence::Rdb => {
                tracing::warn!(url = %self.url, "Redis persists by snapshots only: a Redis restart loses every fact acknowledged since the last snapshot; set appendonly yes (appendfsync everysec) to keep them")
            }
            Persistence::None => {
                tracing::warn!(url = %self.url, "Redis has no persistence (appendonly no, no save points): a Redis restart loses every acknowledged fact; set appendonly yes (appendfsync everysec) to keep them")
            }
            Persistence::Unknown => {
                tracing::warn!(url = %self.url, "Redis would not report its persistence settings (CONFIG and INFO refused): make sure appendonly is yes, or a Redis restart loses acknowledged facts")
            }
        }
    }

    fn set_up(&self, up: bool) {
        self.up.send_if_modified(|v| {
            let changed = *v != up;
            *v = up;
            changed
        });
    }

    async fn connect(&self, response_timeout: Duration) -> Result<MultiplexedConnection, RedisError> {
        // Connecting is bounded by the same timeout, at most 5 s: a stalled
        // Redis accepts the TCP connection and then never answers the
        // handshake, and an append must not wait past --redis-timeout.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(response_timeout.min(Duration::from_secs(5))))
            .set_response_timeout(Some(response_timeout));
        self.client.get_multiplexed_async_connection_with_config(&config).await
    }

    fn error(&self, op: &'static str, target: String, source: RedisError) -> Error {
        Error::Redis { op, target, url: self.url.clone(), source }
    }
}

/// Whether a failure means the connection should be dropped and made anew.
fn is_connection_failure(e: &RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout()
}

/// Whether the connection was already gone when the command was sent (Redis
/// restarted since): a new connection may succeed at once. Not a timeout,
/// which would only double the wait.
fn is_stale_connection(e: &RedisError) -> bool {
    (e.is_connection_dropped() || e.is_io_error()) && !e.is_timeout() && !e.is_connection_refusal()
}

/// Appends batches with `XADD MAXLEN ~` + `EXPIRE` in one pipeline.
#[derive(Clone)]
pub struct RedisPublisher {
    inner: Arc<PublisherInner>,
}

impl fmt::Debug for RedisPublisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisPublisher").field("url", &self.inner.shared.url).finish()
    }
}

struct PublisherInner {
    shared: Arc<Shared>,
    conn: tokio::sync::Mutex<Option<MultiplexedConnection>>,
    /// Per stream: when it was last trimmed and the server time (ms) of the
    /// last entry we appended to it.
    trims: Mutex<HashMap<String, TrimState>>,
}

#[derive(Debug, Clone, Copy)]
struct TrimState {
    last_trim: Instant,
    last_id_ms: u64,
}

impl RedisPublisher {
    async fn connection(&self) -> Result<MultiplexedConnection, RedisError> {
        let mut guard = self.inner.conn.lock().await;
        if let Some(c) = guard.as_ref() {
            return Ok(c.clone());
        }
        let c = self.inner.shared.connect(self.inner.shared.config.response_timeout).await?;
        *guard = Some(c.clone());
        Ok(c)
    }

    async fn forget_connection(&self) {
        *self.inner.conn.lock().await = None;
    }

    fn trims(&self) -> std::sync::MutexGuard<'_, HashMap<String, TrimState>> {
        self.inner.trims.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One batch's append, idempotent: `KEYS[1]` the stream, `KEYS[2]` the
/// batch's dedup key; `ARGV` maxLen, the `facts` value, the TTL in seconds,
/// and a `MINID` to trim to (empty: no trim this time). When the dedup key
/// exists the batch was appended before (a retry of a batch whose reply was
/// lost to a timeout): nothing is appended and the first append's id is
/// returned. `XADD MAXLEN ~` and `EXPIRE` as the reference issues them, in
/// one script so the append and its dedup key land together or not at all.
const APPEND_SCRIPT: &str = r"
local seen = redis.call('GET', KEYS[2])
if seen then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  return {seen, 1}
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'facts', ARGV[2])
redis.call('SET', KEYS[2], id, 'EX', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[3])
if ARGV[4] ~= '' then
  redis.call('XTRIM', KEYS[1], 'MINID', '~', ARGV[4])
end
return {id, 0}
";

/// The dedup key of one batch: its stream and the SHA-256 of the entry it
/// appends. The API server re-sends a batch byte for byte, so a retry
/// encodes to the same entry and finds the key; the facts carry their
/// auditIDs, so two different batches never share it.
pub(crate) fn dedup_key(prefix: &str, stream: &str, entry: &str) -> String {
    let mut h = Sha256::new();
    h.update(stream.as_bytes());
    h.update([0]);
    h.update(entry.as_bytes());
    format!("{prefix}:author:v2:audit:dedup:{}", hex::encode(h.finalize()))
}

impl FactPublisher for RedisPublisher {
    /// Appends one entry per scope through [`APPEND_SCRIPT`], so a batch
    /// published twice (the API server retrying after our reply was lost)
    /// is stored once, and the retry is answered with what Redis did the
    /// first time.
    async fn publish(&self, facts: Vec<(Scope, Fact)>) -> Result<usize> {
        let shared = &self.inner.shared;
        let config = &shared.config;
        let batches = group_by_scope(facts);
        if batches.is_empty() {
            return Ok(0);
        }
        shared.refuse_evicting()?;
        let ttl_ms = config.ttl.as_millis() as u64;
        let ttl_secs = config.ttl.as_secs().max(1);
        let mut pipe = ::redis::pipe();
        let mut keys = Vec::with_capacity(batches.len());
        let mut counts = Vec::with_capacity(batches.len());
        {
            let trims = self.trims();
            for (scope, facts) in &batches {
                let key = scope.stream_key(&config.prefix);
                let entry = Fact::encode_entry(facts);
                // Retention trim, amortized: at most once per trim interval
                // per stream, by the server's own clock (the id of our last
                // append there), so a skewed local clock cannot trim early.
                let min_id = trims
                    .get(&key)
                    .filter(|t| t.last_trim.elapsed() >= config.trim_interval)
                    .map(|t| t.last_id_ms.saturating_sub(ttl_ms).to_string())
                    .unwrap_or_default();
                pipe.cmd("EVAL")
                    .arg(APPEND_SCRIPT)
                    .arg(2)
                    .arg(&key)
                    .arg(dedup_key(&config.prefix, &key, &entry))
                    .arg(config.max_len)
                    .arg(entry)
                    .arg(ttl_secs)
                    .arg(min_id);
                keys.push(key);
                counts.push(facts.len());
            }
        }
        // A connection Redis dropped (it restarted) fails the first command
        // sent on it: reconnect and send again, once. Safe even if the first
        // send did land: the script appends a batch only once.
        let mut attempt = 0;
        let appended = loop {
            attempt += 1;
            let result: Result<Vec<(String, u8)>, RedisError> = match self.connection().await {
                Ok(mut conn) => pipe.query_async(&mut conn).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(ids) => break ids,
                Err(e) => {
                    if is_connection_failure(&e) {
                        self.forget_connection().await;
                    }
                    if attempt == 1 && is_stale_connection(&e) {
                        tracing::debug!(error = %e, "Redis connection was gone; appending on a new one");
                        continue;
                    }
                    shared.set_up(!is_connection_failure(&e));
                    let target = keys.join(", ");
                    return Err(shared.error("XADD pipeline", target, e));
                }
            }
        };
        shared.set_up(true);
        let mut written = 0usize;
        let mut again = 0usize;
        {
            let mut trims = self.trims();
            let now = Instant::now();
            for ((key, (id, duplicate)), n) in keys.into_iter().zip(appended).zip(counts) {
                if duplicate == 1 {
                    again += n;
                    tracing::debug!(stream = %key, %id, facts = n, "audit batch appended before (a retry): not appended again");
                    continue;
                }
                written += n;
                let last_id_ms = EntryId::parse(&id).map_or(0, |i| i.ms);
                let state = trims.entry(key).or_insert(TrimState { last_trim: now, last_id_ms });
                if now.duration_since(state.last_trim) >= config.trim_interval {
                    state.last_trim = now;
                }
                state.last_id_ms = last_id_ms;
            }
        }
        shared.metrics.fact_op("written", written as u64);
        Ok(written + again)
    }
}

/// Follows a runtime-changing set of streams with one blocking `XREAD`.
#[derive(Clone)]
pub struct RedisFollower {
    shared: Arc<Shared>,
    core: Arc<FollowerCore>,
}

impl fmt::Debug for RedisFollower {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisFollower")
            .field("url", &self.shared.url)
            .field("subscriptions", &self.core.subscriptions())
            .finish()
    }
}

/// One followed stream: its cursor, held in memory only.
#[derive(Debug)]
struct StreamState {
    scope: Scope,
    cursor: EntryId,
    /// The cursor is an entry read from the stream (not a re-warm start).
    cursor_is_entry: bool,
    ordinal: Option<u64>,
    /// `entries-added` as far as the follower saw it (0: no stream).
    added: u64,
    /// The last entry id as far as the follower saw it.
    last: EntryId,
    caught_up: bool,
}

impl FactFollower for RedisFollower {
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
        let mut streams: BTreeMap<String, StreamState> = BTreeMap::new();
        let mut conn: Option<MultiplexedConnection> = None;
        let mut backoff = self.shared.backoff.clone();
        let mut requested = self.core.requested_rx();
        let mut up = self.shared.up.subscribe();
        loop {
            match self.read_once(&mut conn, &mut streams, &mut requested, sink.as_ref()).await {
                Ok(()) => {
                    backoff.reset();
                    self.shared.set_up(true);
                }
                Err(e) => {
                    self.shared.metrics.follower_error(TRANSPORT);
                    // The index misses whatever is appended meanwhile.
                    self.core.set_caught_up(false);
                    let delay = backoff.next_delay();
                    tracing::warn!(error = %e, retry_in = %crate::cli::humanize(delay), url = %self.shared.url, "fact follower read failed; retrying with the cursors it holds");
                    if !is_connection_failure(&e) {
                        tokio::time::sleep(delay).await;
                        continue;
                    }
                    conn = None;
                    self.shared.set_up(false);
                    up.borrow_and_update();
                    // Redis answering again (the monitor, a publish) ends the
                    // pause at once; never sooner than the first step, so a
                    // flapping signal cannot spin the loop.
                    let back = async {
                        let _ = up.wait_for(|v| *v).await;
                        tokio::time::sleep(self.shared.config.retry_min).await;
                    };
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = back => tracing::debug!("Redis answers again: the follower reconnects now"),
                    }
                }
            }
        }
    }
}

impl RedisFollower {
    /// One turn of the loop: reconcile the subscription set, probe for trim
    /// gaps, block on one `XREAD` across every stream, deliver.
    async fn read_once(
        &self,
        conn: &mut Option<MultiplexedConnection>,
        streams: &mut BTreeMap<String, StreamState>,
        requested: &mut watch::Receiver<u64>,
        sink: &dyn FactSink,
    ) -> Result<(), RedisError> {
        let config = &self.shared.config;
        let metrics = &self.shared.metrics;
        requested.borrow_and_update();
        let (generation, scopes) = self.core.snapshot();
        let wanted: BTreeMap<String, Scope> = scopes.into_iter().map(|s| (s.stream_key(&config.prefix), s)).collect();
        streams.retain(|k, _| wanted.contains_key(k));
        if wanted.is_empty() {
            self.core.mark_applied(generation);
            self.core.set_caught_up(true);
            // Nothing to read: wait for an acquire (or a block period).
            let _ = tokio::time::timeout(config.block, requested.changed()).await;
            return Ok(());
        }
        let c = match conn {
            Some(c) => c,
            None => conn.insert(self.shared.connect(config.block + Duration::from_secs(10)).await?),
        };
        if wanted.keys().any(|k| !streams.contains_key(k)) {
            // Re-warm from one TTL of retention, by the server's clock since
            // entry ids are the server's.
            let (secs, micros): (u64, u64) = ::redis::cmd("TIME").query_async(c).await?;
            let now_ms = secs * 1000 + micros / 1000;
            let start = EntryId { ms: now_ms.saturating_sub(config.ttl.as_millis() as u64), seq: 0 };
            // Not caught up until the new streams are read: whoever waits
            // for `settled` then `caught_up` sees their facts.
            self.core.set_caught_up(false);
            for (key, scope) in &wanted {
                streams.entry(key.clone()).or_insert_with(|| StreamState {
                    scope: scope.clone(),
                    cursor: start,
                    cursor_is_entry: false,
                    ordinal: None,
                    added: 0,
                    last: EntryId::default(),
                    caught_up: false,
                });
            }
        }
        self.core.mark_applied(generation);

        let keys: Vec<&String> = streams.keys().collect();
        let count = config.read_count.max(1);
        let mut pipe = ::redis::pipe();
        let probe = pipe.cmd("EVAL").arg(PROBE_SCRIPT).arg(keys.len()).arg(&keys);
        for state in streams.values() {
            probe.arg(if state.cursor_is_entry { state.cursor.to_string() } else { "-".to_owned() });
        }
        let xread = pipe
            .cmd("XREAD")
            .arg("COUNT")
            .arg(count)
            .arg("BLOCK")
            .arg(config.block.as_millis().max(1) as u64)
            .arg("STREAMS")
            .arg(&keys);
        for state in streams.values() {
            xread.arg(state.cursor.to_string());
        }
        let (probes, reply): (Vec<ProbeReply>, Option<StreamReadReply>) = pipe.query_async(c).await?;
        metrics.follower_success();

        for ((key, state), (added, length, last, first, holds)) in streams.iter_mut().zip(probes) {
            let probe = Probe {
                added,
                length,
                last: EntryId::parse(&last).unwrap_or_default(),
                first: EntryId::parse(&first).unwrap_or_default(),
                holds_cursor: holds == 1,
            };
            let followed = Followed {
                ordinal: state.ordinal,
                cursor: state.cursor,
                cursor_is_entry: state.cursor_is_entry,
                seen_added: state.added,
                seen_last: state.last.max(state.cursor),
            };
            let outcome = probe_rule(followed, probe, config.ttl.as_millis() as u64);
            match outcome.loss {
                Loss::None => {}
                Loss::Trimmed => {
                    tracing::warn!(stream = %key, lost_entries = outcome.gap, cursor = %state.cursor, "fact follower fell behind and entries were trimmed before it read them; their facts are lost for good")
                }
                Loss::Vanished => {
                    tracing::warn!(stream = %key, lost_entries = outcome.gap, "a followed stream vanished (evicted by Redis's maxmemory-policy, or deleted) before the follower read all of it; those facts are lost for good")
                }
                Loss::Recreated => {
                    metrics.stream_recreated(key);
                    tracing::warn!(stream = %key, lost_entries_at_least = outcome.gap, cursor = %state.cursor, "a followed stream was evicted by Redis's maxmemory-policy (or deleted) and created again by a later append: facts appended to it after the follower's last read are lost for good, how many cannot be known; set maxmemory-policy noeviction to keep them")
                }
            }
            if outcome.gap > 0 {
                metrics.stream_gap(key, outcome.gap);
            }
            state.added = probe.added;
            state.last = probe.last;
            state.ordinal = outcome.ordinal;
            // Streams absent from the reply had nothing past the cursor.
            state.caught_up = true;
        }

        for stream in reply.map(|r| r.keys).unwrap_or_default() {
            let Some(state) = streams.get_mut(&stream.key) else {
                continue;
            };
            state.caught_up = stream.ids.len() < count;
            for entry in stream.ids {
                let Some(id) = EntryId::parse(&entry.id) else {
                    tracing::warn!(stream = %stream.key, id = %entry.id, "stream entry id is not <ms>-<seq>; skipped");
                    continue;
                };
                state.cursor = id;
                state.cursor_is_entry = true;
                state.ordinal = state.ordinal.map(|k| k + 1);
                state.added = state.added.max(state.ordinal.unwrap_or(0));
                match decode_entry(&entry.map) {
                    Ok(facts) if entry_is_acceptable(&facts) => {
                        sink.apply(FactBatch { scope: state.scope.clone(), facts, at_ms: id.ms })
                    }
                    Ok(_) => {
                        tracing::warn!(stream = %stream.key, %id, "fact entry skipped: a fact in it names no author");
                        metrics.decode_error(TRANSPORT);
                    }
                    Err(e) => {
                        tracing::warn!(stream = %stream.key, %id, error = %e, "fact entry skipped: it could not be decoded");
                        metrics.decode_error(TRANSPORT);
                    }
                }
            }
        }
        self.core.set_caught_up(streams.values().all(|s| s.caught_up));
        Ok(())
    }
}

/// Decodes an entry's `facts` field (a JSON array of facts).
fn decode_entry(fields: &HashMap<String, Value>) -> rules::Result<Vec<Fact>> {
    let bytes: &[u8] = match fields.get(ENTRY_FIELD) {
        Some(Value::BulkString(b)) => b,
        Some(Value::SimpleString(s)) => s.as_bytes(),
        _ => {
            return Err(rules::Error::FactDecode(serde::de::Error::custom("the entry has no `facts` field")));
        }
    };
    Fact::decode_entry(bytes)
}

#[cfg(test)]
mod tests;
