//! Redis-only tests: the pure rules, then fault and compatibility tests
//! against a real `redis-server` started on a free loopback port.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::attribution::transport::conformance::{
    Recorder, RedisHarness, counter, fact, gate_on, scope, start, test_config, wait_caught_up,
};
use rules::attribution::DEFAULT_STREAM_PREFIX;
use testkit::{RedisServer, TlsFiles};

fn id(ms: u64, seq: u64) -> EntryId {
    EntryId { ms, seq }
}

// ------------------------------------------------------------- pure rules

#[test]
fn entry_ids_parse_order_and_print() {
    assert_eq!(EntryId::parse("1700000000000-3"), Some(id(1_700_000_000_000, 3)));
    assert_eq!(EntryId::parse("nope"), None);
    assert_eq!(EntryId::parse("1-x"), None);
    assert!(id(5, 9) < id(6, 0) && id(6, 0) < id(6, 1));
    assert_eq!(id(12, 3).to_string(), "12-3");
}

#[test]
fn redact_url_hides_only_the_password() {
    assert_eq!(redact_url("redis://:pw@h:6379/0"), "redis://:***@h:6379/0");
    assert_eq!(redact_url("rediss://user:pw@h:1"), "rediss://user:***@h:1");
    assert_eq!(redact_url("redis://h:6379"), "redis://h:6379");
}

/// A stream whose held entries have consecutive ids ending at `last`.
fn probe(added: u64, length: u64, last: EntryId) -> Probe {
    let first = if length > 0 { id(last.ms + 1 - length, 0) } else { id(0, 0) };
    Probe { added, length, last, first, holds_cursor: length > 0 }
}

const TTL_MS: u64 = 60_000;

/// A follower at `cursor` (an entry it read), `ordinal` known, having seen
/// `seen_added` entries; entry n has id n, as in `probe`.
fn at(ordinal: Option<u64>, cursor: EntryId, seen_added: u64) -> Followed {
    Followed { ordinal, cursor, cursor_is_entry: true, seen_added, seen_last: cursor.max(id(seen_added, 0)) }
}

fn outcome(gap: u64, ordinal: Option<u64>, loss: Loss) -> ProbeOutcome {
    ProbeOutcome { gap, ordinal, loss }
}

#[test]
fn probe_rule_reports_a_gap_only_for_unread_trimmed_entries() {
    // Read 4 of 10; 8 trimmed: entries 5..8 were lost unread.
    let out = probe_rule(at(Some(4), id(4, 0), 10), probe(10, 2, id(10, 0)), TTL_MS);
    assert_eq!(out, outcome(4, Some(8), Loss::Trimmed));
    // Caught up (read all 10), 8 trimmed: ageing, not loss.
    let out = probe_rule(at(Some(10), id(10, 0), 10), probe(10, 2, id(10, 0)), TTL_MS);
    assert_eq!(out, outcome(0, Some(10), Loss::None));
    // Unknown ordinal (re-warmed mid-stream): no claim, until the tail.
    let out = probe_rule(at(None, id(4, 0), 10), probe(10, 2, id(10, 0)), TTL_MS);
    assert_eq!(out, outcome(0, None, Loss::None));
    let out = probe_rule(at(None, id(10, 0), 10), probe(10, 2, id(10, 0)), TTL_MS);
    assert_eq!(out.ordinal, Some(10));
}

#[test]
fn a_vanished_stream_is_a_gap_of_what_the_follower_had_not_read() {
    let gone = probe(0, 0, id(0, 0));
    assert_eq!(probe_rule(at(Some(4), id(4, 0), 10), gone, TTL_MS), outcome(6, Some(0), Loss::Vanished));
    // An idle stream expiring after it was read lost nothing.
    assert_eq!(probe_rule(at(Some(10), id(10, 0), 10), gone, TTL_MS), outcome(0, Some(0), Loss::None));
    // Ordinal unknown: no claim.
    assert_eq!(probe_rule(at(None, id(4, 0), 10), gone, TTL_MS), outcome(0, Some(0), Loss::None));
}

#[test]
fn a_stream_evicted_and_created_again_is_told_apart_from_a_trim() {
    // Read 7 of 9; the key was evicted and 3 new entries made a new stream.
    // Fewer ever added than read: the 2 known unread are lost, the new
    // stream is read from its start, and the event is a recreation.
    let out = probe_rule(at(Some(7), id(7, 0), 9), probe(3, 3, id(12, 0)), TTL_MS);
    assert_eq!(out, outcome(2, Some(0), Loss::Recreated));
    // More ever added than read, none trimmed, yet the cursor's own entry is
    // gone: a new stream too (a trim only ever takes entries before it).
    let new = Probe { added: 9, length: 9, last: id(30, 0), first: id(22, 0), holds_cursor: false };
    assert_eq!(probe_rule(at(Some(7), id(7, 0), 7), new, TTL_MS), outcome(0, Some(0), Loss::Recreated));
    // The new stream was itself trimmed before the follower read it.
    let new = Probe { added: 9, length: 4, last: id(30, 0), first: id(27, 0), holds_cursor: false };
    assert_eq!(probe_rule(at(Some(7), id(7, 0), 7), new, TTL_MS), outcome(5, Some(5), Loss::Recreated));
    // The cursor's entry was trimmed (k <= trimmed): an ordinary trim.
    let trimmed = Probe { added: 12, length: 4, last: id(12, 0), first: id(9, 0), holds_cursor: false };
    assert_eq!(probe_rule(at(Some(7), id(7, 0), 7), trimmed, TTL_MS), outcome(1, Some(8), Loss::Trimmed));
    // A re-warm cursor is no entry: its absence proves nothing, and a first
    // held entry at or before what the follower saw fits a trim.
    let f = Followed { cursor_is_entry: false, ..at(Some(7), id(7, 0), 7) };
    let fits_a_trim = Probe { first: id(6, 0), ..new };
    assert_eq!(probe_rule(f, fits_a_trim, TTL_MS).loss, Loss::None);
    // But a stream whose every entry is newer than all the follower saw,
    // with fewer trimmed than it saw, is a new one, cursor entry or not.
    assert_eq!(probe_rule(f, new, TTL_MS), outcome(5, Some(5), Loss::Recreated));
}

/// Found by `evictions_are_never_over_reported`: a stream trimmed empty and
/// probed (ordinal 3, cursor no entry), then evicted and created again with
/// 5 entries before the next probe. Its entries-added (5) is past the
/// follower's ordinal and no cursor entry can be missed, so only the ids
/// tell the new stream apart; counted from the old ordinal, the follower
/// would later charge entries it had read.
#[test]
fn a_stream_emptied_evicted_and_created_again_is_a_new_stream() {
    let f = Followed { ordinal: Some(3), cursor: id(0, 0), cursor_is_entry: false, seen_added: 3, seen_last: id(3, 0) };
    let new = probe(5, 5, id(8, 0));
    assert_eq!(probe_rule(f, new, TTL_MS), outcome(0, Some(0), Loss::Recreated));
    // The same figures from the same stream, had it kept its ids <= 3: no.
    let same = Probe { added: 5, length: 2, last: id(8, 0), first: id(7, 0), holds_cursor: false };
    assert_eq!(probe_rule(f, same, TTL_MS), outcome(0, Some(3), Loss::None));
}

#[test]
fn a_new_stream_a_ttl_after_the_old_one_may_be_an_ordinary_expiry() {
    let later = probe(1, 1, id(7 + TTL_MS, 0));
    // The follower had read all: an idle stream expired, then a new append.
    assert_eq!(probe_rule(at(Some(7), id(7, 0), 7), later, TTL_MS), outcome(0, Some(0), Loss::None));
    // Entries it knew of and had not read are still lost.
    let later = probe(1, 1, id(9 + TTL_MS, 0));
    assert_eq!(probe_rule(at(Some(7), id(7, 0), 9), later, TTL_MS), outcome(2, Some(0), Loss::Vanished));
}

#[test]
fn every_policy_but_noeviction_evicts() {
    for p in [
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
        "ALLKEYS-LRU",
    ] {
        assert!(policy_evicts(p), "{p}");
    }
    assert!(!policy_evicts("noeviction"));
    assert!(!policy_evicts(""));
}

// ------------------------------------------------------- real redis-server

fn transport(url: String, ca: Option<Vec<u8>>, metrics: &Arc<Metrics>) -> RedisTransport {
    RedisTransport::new(RedisOptions { url, ca_cert_pem: ca }, test_config(), metrics.clone()).unwrap()
}

/// Publishes, retrying as the API server retries a failed audit POST.
async fn publish_retrying(p: &RedisPublisher, facts: Vec<(Scope, Fact)>) {
    for attempt in 0..50 {
        match p.publish(facts.clone()).await {
            Ok(_) => return,
            Err(e) => {
                tracing::debug!(attempt, error = %e, "publish retry");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    panic!("publish never succeeded");
}

/// Redis killed mid-follow and restarted on the same port: the follower
/// counts the failed reads, retries with backoff, resumes with the cursors it
/// held, and every fact published successfully is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn follower_resumes_after_redis_is_killed_and_restarted() {
    let mut h = RedisHarness::new(test_config());
    let a = scope("r", "", "configmaps");
    let follower = h.transport.follower();
    follower.acquire(&a);
    let rec = Arc::new(Recorder::default());
    let _run = start(&follower, rec.clone());
    wait_caught_up(&follower).await;
    let p = h.transport.publisher();
    p.publish(vec![(a.clone(), fact("alice", "before"))]).await.unwrap();
    rec.wait_for_name("before").await;

    h.server.kill();
    let err = p.publish(vec![(a.clone(), fact("bob", "during"))]).await.unwrap_err();
    assert!(matches!(err, Error::Redis { .. }) && err.to_string().contains("reachable"), "{err}");
    // The follower's reads now fail and are counted.
    let errors = "gitopsreverser_attribution_fact_follower_errors_total{transport=\"redis\"}";
    for _ in 0..200 {
        if counter(&h.metrics.render(), errors) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(counter(&h.metrics.render(), errors) > 0);

    h.server.restart().unwrap();
    // The receiver's failed batch is retried by the API server, then more.
    publish_retrying(&p, vec![(a.clone(), fact("bob", "during"))]).await;
    publish_retrying(&p, vec![(a.clone(), fact("carol", "after"))]).await;
    rec.wait_for_name("after").await;
    assert_eq!(rec.names(), ["before", "during", "after"]);
    let text = h.metrics.render();
    assert!(counter(&text, "gitopsreverser_attribution_fact_follower_last_success_timestamp_seconds") > 0);
}

/// A follower stalled while `XTRIM MAXLEN` (exact, by hand) trims past its
/// cursor reports exactly the entries it never read.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn slow_follower_trimmed_past_reports_exact_gap() {
    let h = RedisHarness::new(test_config());
    let a = scope("r", "", "configmaps");
    let key = h.key(&a);
    let follower = h.transport.follower();
    follower.acquire(&a);
    let gate = gate_on("s1");
    let _run = start(&follower, gate.sink.clone());
    wait_caught_up(&follower).await;
    let p = h.transport.publisher();
    p.publish(vec![(a.clone(), fact("a", "s1"))]).await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), gate.entered).await.unwrap().unwrap();
    for i in 2..=20 {
        p.publish(vec![(a.clone(), fact("a", &format!("s{i}")))]).await.unwrap();
    }
    h.server.cli(&["XTRIM", &key, "MAXLEN", "5"]).unwrap();
    gate.open.send(()).unwrap();
    gate.recorder.wait_for_name("s20").await;
    assert_eq!(gate.recorder.names(), ["s1", "s16", "s17", "s18", "s19", "s20"]);
    let gaps =
        counter(&h.metrics.render(), &format!("gitopsreverser_attribution_fact_stream_gaps_total{{stream=\"{key}\"}}"));
    assert_eq!(gaps, 14, "s2..s15 were lost unread");
}

/// A followed stream evicted (here `DEL`, as `allkeys-lru` does it) while the
/// follower was busy, then created again by the next append, is not taken
/// for the old stream: the follower reads the new one from its start and
/// counts the re-creation (the facts appended before the eviction are lost,
/// and how many cannot be known).
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn a_stream_evicted_and_created_again_is_counted_and_read_from_its_start() {
    let h = RedisHarness::new(test_config());
    let a = scope("r", "", "configmaps");
    let key = h.key(&a);
    let follower = h.transport.follower();
    follower.acquire(&a);
    let gate = gate_on("v1");
    let _run = start(&follower, gate.sink.clone());
    wait_caught_up(&follower).await;
    let p = h.transport.publisher();
    p.publish(vec![(a.clone(), fact("a", "v1"))]).await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), gate.entered).await.unwrap().unwrap();
    for i in 2..=6 {
        p.publish(vec![(a.clone(), fact("a", &format!("v{i}")))]).await.unwrap();
    }
    h.server.cli(&["DEL", &key]).unwrap();
    for i in 7..=8 {
        p.publish(vec![(a.clone(), fact("a", &format!("v{i}")))]).await.unwrap();
    }
    gate.open.send(()).unwrap();
    gate.recorder.wait_for_name("v8").await;
    assert_eq!(gate.recorder.names(), ["v1", "v7", "v8"]);
    let text = h.metrics.render();
    assert_eq!(
        counter(&text, &format!("gitopsreverser_attribution_fact_stream_recreations_total{{stream=\"{key}\"}}")),
        1,
        "{text}"
    );
}

/// A sink that stops the follower on each fact named in `names`, reports
/// the name, and goes on when told.
struct Stops {
    inner: Arc<Recorder>,
    names: Vec<String>,
    entered: std::sync::Mutex<tokio::sync::mpsc::UnboundedSender<String>>,
    go: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl FactSink for Stops {
    fn apply(&self, batch: FactBatch) {
        let hit = batch.facts.iter().find(|f| self.names.contains(&f.name)).map(|f| f.name.clone());
        self.inner.apply(batch);
        if let Some(name) = hit {
            let _ = self.entered.lock().unwrap().send(name);
            tokio::task::block_in_place(|| {
                let _ = self.go.lock().unwrap().recv();
            });
        }
    }
}

/// The real-Redis case of `a_stream_emptied_evicted_and_created_again_is_a_new_stream`
/// (proptest's counterexample): a stream trimmed empty before the follower
/// read it, evicted and created again with 5 entries while the follower was
/// busy elsewhere, then trimmed to 2 after the follower read its first
/// entry. Lost unread: the 3 first entries, then 2 of the new stream; the
/// follower must charge 5, not 7.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn a_stream_emptied_then_created_again_is_charged_only_what_was_lost() {
    let h = RedisHarness::new(TransportConfig { read_count: 1, ..test_config() });
    let (a, b) = (scope("r", "", "configmaps"), scope("r", "", "secrets"));
    let key = h.key(&a);
    let follower = h.transport.follower();
    follower.acquire(&a);
    follower.acquire(&b);
    let rec = Arc::new(Recorder::default());
    let (etx, mut entered) = tokio::sync::mpsc::unbounded_channel();
    let (go, grx) = std::sync::mpsc::channel();
    let names = ["hold1", "hold2", "n1"].map(str::to_owned).to_vec();
    let sink = Arc::new(Stops { inner: rec.clone(), names, entered: etx.into(), go: grx.into() });
    let _run = start(&follower, sink);
    wait_caught_up(&follower).await;
    let p = h.transport.publisher();
    let cli = |args: &[&str]| h.server.cli(args).unwrap();
    let stopped_at = async |entered: &mut tokio::sync::mpsc::UnboundedReceiver<String>| {
        tokio::time::timeout(Duration::from_secs(20), entered.recv()).await.unwrap().unwrap()
    };
    let series = format!("gitopsreverser_attribution_fact_stream_gaps_total{{stream=\"{key}\"}}");

    // Three entries trimmed away while the follower is held on another stream.
    p.publish(vec![(b.clone(), fact("b", "hold1"))]).await.unwrap();
    assert_eq!(stopped_at(&mut entered).await, "hold1");
    for i in 1..=3 {
        p.publish(vec![(a.clone(), fact("a", &format!("x{i}")))]).await.unwrap();
    }
    cli(&["XTRIM", &key, "MAXLEN", "0"]);
    go.send(()).unwrap();
    for _ in 0..200 {
        if counter(&h.metrics.render(), &series) == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(counter(&h.metrics.render(), &series), 3, "x1..x3 lost unread");

    // Evicted and created again while the follower is held again.
    p.publish(vec![(b.clone(), fact("b", "hold2"))]).await.unwrap();
    assert_eq!(stopped_at(&mut entered).await, "hold2");
    cli(&["DEL", &key]);
    for i in 1..=5 {
        p.publish(vec![(a.clone(), fact("a", &format!("n{i}")))]).await.unwrap();
    }
    go.send(()).unwrap();
    // Read from the new stream's start; trimmed to 2 after its first entry.
    assert_eq!(stopped_at(&mut entered).await, "n1");
    cli(&["XTRIM", &key, "MAXLEN", "2"]);
    go.send(()).unwrap();
    rec.wait_for_name("n5").await;
    assert_eq!(rec.names(), ["hold1", "hold2", "n1", "n4", "n5"]);
    let text = h.metrics.render();
    assert_eq!(counter(&text, &series), 5, "x1..x3, then n2 and n3: {text}");
    let recreations = format!("gitopsreverser_attribution_fact_stream_recreations_total{{stream=\"{key}\"}}");
    assert_eq!(counter(&text, &recreations), 1, "{text}");
}

/// Hand-written entries the follower cannot use (an authorless fact, not
/// JSON, no `facts` field) are each counted as a decode error, and the
/// entries after them are applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn undecodable_and_authorless_entries_are_counted_and_skipped() {
    let h = RedisHarness::new(test_config());
    let a = scope("prod", "", "configmaps");
    let key = h.key(&a);
    let follower = h.transport.follower();
    follower.acquire(&a);
    let rec = Arc::new(Recorder::default());
    let _run = start(&follower, rec.clone());
    wait_caught_up(&follower).await;
    let cli = |args: &[&str]| h.server.cli(args).unwrap();
    cli(&["XADD", &key, "*", "facts", r#"[{"name":"cm","uid":"u1","verb":"update"}]"#]);
    cli(&["XADD", &key, "*", "facts", "not json"]);
    cli(&["XADD", &key, "*", "other", r#"[{"author":"x","name":"wrong-field"}]"#]);
    cli(&["XADD", &key, "*", "facts", r#"[{"author":"alice","name":"good","uid":"u2"}]"#]);
    rec.wait_for_name("good").await;
    assert_eq!(rec.names(), ["good"]);
    let series = "gitopsreverser_attribution_fact_stream_decode_errors_total{transport=\"redis\"}";
    assert_eq!(counter(&h.metrics.render(), series), 3);
}

/// Compatibility, read side: an entry written with `redis-cli XADD` in
/// exactly the reference format (key, field, JSON array) is followed and
/// every field of the fact is recovered.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn follows_entries_written_in_the_reference_format() {
    let h = RedisHarness::new(test_config());
    let a = Scope::new("prod:eu%1", rules::attribution::GroupResource::new("apps", "deployments"));
    let key = "gitops-reverser:author:v2:audit:route:prod%3Aeu%251:apps/deployments";
    assert_eq!(h.key(&a), key);
    let follower = h.transport.follower();
    follower.acquire(&a);
    let rec = Arc::new(Recorder::default());
    let _run = start(&follower, rec.clone());
    wait_caught_up(&follower).await;
    let json = r#"[{"author":"oidc:alice@example.com","namespace":"shop","name":"web","uid":"7d1c","resourceVersion":"4242","displayName":"Alice","email":"alice@example.com","verb":"patch","auditID":"a1b2","stageTimestamp":"2026-01-02T03:04:05.123456Z"},{"author":"system:serviceaccount:kube-system:gc","namespace":"shop","verb":"deletecollection","labelSelector":"app=web","uids":["u1","u2"],"stageTimestamp":"2026-01-02T03:04:06.000001Z"}]"#;
    h.server.cli(&["XADD", key, "*", "facts", json]).unwrap();
    rec.wait_for("the entry", |b| !b.is_empty()).await;
    let batch = rec.batches().remove(0);
    assert_eq!(batch.scope, a);
    assert_eq!(batch.facts.len(), 2);
    let f = &batch.facts[0];
    assert_eq!(
        (f.author.as_str(), f.namespace.as_str(), f.name.as_str(), f.uid.as_str()),
        ("oidc:alice@example.com", "shop", "web", "7d1c")
    );
    assert_eq!(
        (f.resource_version.as_str(), f.display_name.as_str(), f.email.as_str()),
        ("4242", "Alice", "alice@example.com")
    );
    assert_eq!((f.verb.as_str(), f.audit_id.as_str()), ("patch", "a1b2"));
    assert_eq!(f.stage_timestamp, "2026-01-02T03:04:05.123456Z");
    let c = &batch.facts[1];
    assert!(c.is_collection());
    assert_eq!(c.label_selector, "app=web");
    assert_eq!(c.uids.as_deref(), Some(&["u1".to_string(), "u2".to_string()][..]));
    // And the entry id's milliseconds are the batch's time.
    let first = h.server.cli(&["XRANGE", key, "-", "+"]).unwrap();
    let entry_ms: u64 = first.lines().next().unwrap().split('-').next().unwrap().parse().unwrap();
    assert_eq!(batch.at_ms, entry_ms);
}

/// Compatibility, write side: what our publisher writes reads back with
/// `redis-cli XRANGE` as the reference format, with the TTL set by EXPIRE.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn publishes_the_reference_format() {
    let h = RedisHarness::new(test_config());
    let a = scope("prod-eu-1", "", "configmaps");
    let key = "gitops-reverser:author:v2:audit:route:prod-eu-1:configmaps";
    let mut f = fact("alice", "cm");
    f.audit_id = "a-9".into();
    f.stage_timestamp = "2026-01-02T03:04:05.123456Z".into();
    h.transport.publisher().publish(vec![(a.clone(), f), (a.clone(), fact("bob", "cm2"))]).await.unwrap();
    let out = h.server.cli(&["XRANGE", key, "-", "+"]).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "one entry, one field: {out}");
    assert!(EntryId::parse(lines[0]).is_some(), "{out}");
    assert_eq!(lines[1], "facts");
    let value: serde_json::Value = serde_json::from_str(lines[2]).unwrap();
    assert_eq!(
        value,
        serde_json::json!([
            {"author":"alice","namespace":"shop","name":"cm","uid":"uid-cm","resourceVersion":"1","verb":"update","auditID":"a-9","stageTimestamp":"2026-01-02T03:04:05.123456Z"},
            {"author":"bob","namespace":"shop","name":"cm2","uid":"uid-cm2","resourceVersion":"1","verb":"update"}
        ])
    );
    let ttl: i64 = h.server.cli(&["TTL", key]).unwrap().trim().parse().unwrap();
    assert!(ttl > 0 && ttl <= 120, "EXPIRE set to the TTL: {ttl}");
}

/// The amortized retention trim drops entries older than the TTL, by the
/// server's clock, on a publish once the trim interval has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn publish_trims_past_the_retention_horizon() {
    let config =
        crate::attribution::transport::TransportConfig { trim_interval: Duration::from_millis(0), ..test_config() };
    let h = RedisHarness::new(config);
    let a = scope("r", "", "configmaps");
    let key = h.key(&a);
    use crate::attribution::transport::conformance::Harness;
    h.publish_aged(&a, vec![fact("old", "old")], Duration::from_secs(600));
    let p = h.transport.publisher();
    p.publish(vec![(a.clone(), fact("new", "n1"))]).await.unwrap();
    // The first publish learns the server time; the next one trims.
    p.publish(vec![(a.clone(), fact("new", "n2"))]).await.unwrap();
    let out = h.server.cli(&["XRANGE", &key, "-", "+"]).unwrap();
    assert!(!out.contains("\"old\""), "aged entry kept: {out}");
    assert!(out.contains("n1") && out.contains("n2"), "{out}");
}

/// Password from the URL: right password works, wrong one is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn password_comes_from_the_url() {
    let server = RedisServer::start_with(&["--requirepass", "s3cret"], None).unwrap();
    let metrics = Arc::new(Metrics::new());
    let a = scope("r", "", "configmaps");
    let good = transport(format!("redis://:s3cret@127.0.0.1:{}", server.port()), None, &metrics);
    let follower = good.follower();
    follower.acquire(&a);
    let rec = Arc::new(Recorder::default());
    let _run = start(&follower, rec.clone());
    wait_caught_up(&follower).await;
    good.publisher().publish(vec![(a.clone(), fact("alice", "authed"))]).await.unwrap();
    rec.wait_for_name("authed").await;

    let bad = transport(format!("redis://:wrong@127.0.0.1:{}", server.port()), None, &metrics);
    let err = bad.publisher().publish(vec![(a, fact("eve", "x"))]).await.unwrap_err();
    assert!(!err.to_string().contains("wrong@"), "password leaked: {err}");
}

fn tls_files(dir: &std::path::Path) -> (TlsFiles, Vec<u8>) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let files = TlsFiles { cert: dir.join("server.pem"), key: dir.join("server.key"), ca: dir.join("ca.pem") };
    std::fs::write(&files.cert, cert.pem()).unwrap();
    std::fs::write(&files.key, key.serialize_pem()).unwrap();
    std::fs::write(&files.ca, ca_cert.pem()).unwrap();
    (files, ca_cert.pem().into_bytes())
}

/// TLS from the URL (`rediss://`), with a real handshake against
/// `redis-server --tls-port` and a CA generated here; an untrusted server
/// certificate is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn tls_comes_from_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let (files, ca_pem) = tls_files(dir.path());
    let server = RedisServer::start_with(&[], Some(&files)).unwrap();
    let tls_port = server.tls_port().unwrap();
    let metrics = Arc::new(Metrics::new());
    let a = scope("r", "", "configmaps");
    let t = transport(format!("rediss://localhost:{tls_port}"), Some(ca_pem), &metrics);
    let follower = t.follower();
    follower.acquire(&a);
    let rec = Arc::new(Recorder::default());
    let _run = start(&follower, rec.clone());
    wait_caught_up(&follower).await;
    t.publisher().publish(vec![(a.clone(), fact("alice", "over-tls"))]).await.unwrap();
    rec.wait_for_name("over-tls").await;

    // Without our CA the server certificate is not trusted.
    let untrusted = transport(format!("rediss://localhost:{tls_port}"), None, &metrics);
    assert!(untrusted.publisher().publish(vec![(a, fact("eve", "x"))]).await.is_err());
}

// ------------------------------------------------ model check of the gap rule

mod gap_model {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[derive(Debug, Clone)]
    enum Op {
        Append(u64),
        TrimTo(u64),
        Read(u64),
        /// The key evicted whole (an evicting `maxmemory-policy`).
        Evict,
    }

    fn op(evictions: bool) -> impl Strategy<Value = Op> {
        let evict = if evictions { 1 } else { 0 };
        prop_oneof![
            3 => (1u64..6).prop_map(Op::Append),
            3 => (0u64..8).prop_map(Op::TrimTo),
            3 => (1u64..6).prop_map(Op::Read),
            evict => Just(Op::Evict),
        ]
    }

    /// A model stream: entries get ids 1, 2, ... across re-creations (as
    /// time-based ids do); trims take from the front; an eviction takes all.
    #[derive(Default)]
    struct Stream {
        held: VecDeque<u64>,
        exists: bool,
        added: u64,
        last: u64,
        next: u64,
    }

    impl Stream {
        fn probe(&self, f: &Followed) -> Probe {
            if !self.exists {
                return Probe { added: 0, length: 0, last: id(0, 0), first: id(0, 0), holds_cursor: false };
            }
            let holds_cursor = f.cursor_is_entry && self.held.contains(&f.cursor.ms);
            let first = id(self.held.front().copied().unwrap_or(0), 0);
            Probe { added: self.added, length: self.held.len() as u64, last: id(self.last, 0), first, holds_cursor }
        }
    }

    fn run(ops: &[Op], known_from_start: bool) -> (u64, u64) {
        let mut s = Stream { next: 1, ..Default::default() };
        let mut f = Followed {
            ordinal: known_from_start.then_some(0),
            cursor: id(0, 0),
            cursor_is_entry: false,
            seen_added: 0,
            seen_last: id(0, 0),
        };
        let (mut reported, mut lost) = (0u64, 0u64);
        let read = |s: &Stream, f: &mut Followed, count: u64| -> u64 {
            let out = probe_rule(*f, s.probe(f), u64::MAX / 4);
            f.ordinal = out.ordinal;
            f.seen_added = if s.exists { s.added } else { 0 };
            f.seen_last = id(if s.exists { s.last } else { 0 }, 0).max(f.cursor);
            let from = f.cursor.ms;
            for &e in s.held.iter().filter(|e| **e > from).take(count as usize) {
                f.cursor = id(e, 0);
                f.cursor_is_entry = true;
                f.ordinal = f.ordinal.map(|k| k + 1);
            }
            out.gap
        };
        for op in ops {
            match *op {
                Op::Append(n) => {
                    if !s.exists {
                        s = Stream { exists: true, next: s.next, ..Default::default() };
                    }
                    for _ in 0..n {
                        s.held.push_back(s.next);
                        s.last = s.next;
                        s.next += 1;
                        s.added += 1;
                    }
                }
                Op::TrimTo(len) => {
                    while s.held.len() as u64 > len {
                        let e = s.held.pop_front().unwrap();
                        lost += u64::from(e > f.cursor.ms);
                    }
                }
                Op::Evict => {
                    lost += s.held.iter().filter(|e| **e > f.cursor.ms).count() as u64;
                    s = Stream { next: s.next, ..Default::default() };
                }
                Op::Read(count) => reported += read(&s, &mut f, count),
            }
        }
        // Flush: one last read sees any trim since the previous one.
        reported += read(&s, &mut f, 0);
        (reported, lost)
    }

    proptest! {
        /// Against a model stream, the gaps the rule reports add up to
        /// exactly the entries trimmed before the follower read them: never
        /// more (a caught-up follower is not charged), never fewer. A follower
        /// that started on a missing stream knows its ordinal (0) from the
        /// start; one re-warmed mid-stream does not, and may only under-report.
        #[test]
        fn reported_gaps_equal_entries_lost_unread(
            ops in proptest::collection::vec(op(false), 1..60),
            known_from_start in any::<bool>(),
        ) {
            let (reported, lost) = run(&ops, known_from_start);
            if known_from_start {
                prop_assert_eq!(reported, lost);
            } else {
                prop_assert!(reported <= lost, "over-reported {} > {}", reported, lost);
            }
        }

        /// With evictions (a stream vanishing whole, maybe created again by
        /// the next append) the rule never charges more than was lost unread.
        #[test]
        fn evictions_are_never_over_reported(
            ops in proptest::collection::vec(op(true), 1..60),
            known_from_start in any::<bool>(),
        ) {
            let (reported, lost) = run(&ops, known_from_start);
            prop_assert!(reported <= lost, "over-reported {} > {}", reported, lost);
        }
    }
}

/// Ids of the connections currently blocked in (or last running) XREAD.
fn xread_client_ids(server: &RedisServer) -> Vec<String> {
    let list = server.cli(&["CLIENT", "LIST"]).unwrap();
    list.lines()
        .filter(|l| l.contains(" cmd=xread"))
        .filter_map(|l| l.split(' ').find_map(|kv| kv.strip_prefix("id=")))
        .map(str::to_owned)
        .collect()
}

async fn one_xread_client(server: &RedisServer) -> String {
    for _ in 0..200 {
        let ids = xread_client_ids(server);
        if ids.len() == 1 {
            return ids[0].clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no single XREAD connection: {:?}", xread_client_ids(server));
}

/// The subscription set changes on the same connection: the reader
/// re-issues its XREAD "rather than tearing the connection down".
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn subscription_changes_reuse_the_connection() {
    let h = RedisHarness::new(test_config());
    let (a, b) = (scope("r", "", "configmaps"), scope("r", "", "secrets"));
    let follower = h.transport.follower();
    follower.acquire(&a);
    let rec = Arc::new(Recorder::default());
    let _run = start(&follower, rec.clone());
    wait_caught_up(&follower).await;
    let before = one_xread_client(&h.server).await;
    follower.acquire(&b);
    tokio::time::timeout(Duration::from_secs(20), follower.settled()).await.unwrap();
    h.transport.publisher().publish(vec![(b.clone(), fact("bob", "b"))]).await.unwrap();
    rec.wait_for_name("b").await;
    follower.release(&a);
    tokio::time::timeout(Duration::from_secs(20), follower.settled()).await.unwrap();
    assert_eq!(one_xread_client(&h.server).await, before);
}

/// A batch published twice is stored once, and the second publish answers
/// as the first did.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn publishing_a_batch_again_stores_it_once() {
    let h = RedisHarness::new(test_config());
    let a = scope("r", "", "configmaps");
    let key = h.key(&a);
    let batch = vec![(a.clone(), fact("alice", "cm")), (a.clone(), fact("bob", "cm2"))];
    let p = h.transport.publisher();
    assert_eq!(p.publish(batch.clone()).await.unwrap(), 2);
    assert_eq!(p.publish(batch.clone()).await.unwrap(), 2, "stored, by the first publish");
    assert_eq!(h.server.cli(&["XLEN", &key]).unwrap().trim(), "1");
    // Another batch is another entry.
    p.publish(vec![(a.clone(), fact("carol", "cm3"))]).await.unwrap();
    assert_eq!(h.server.cli(&["XLEN", &key]).unwrap().trim(), "2");
    // The dedup key lives as long as the stream's retention.
    let keys = h.server.cli(&["KEYS", "gitops-reverser:author:v2:audit:dedup:*"]).unwrap();
    let dedup = keys.lines().next().unwrap().to_owned();
    let ttl: i64 = h.server.cli(&["TTL", &dedup]).unwrap().trim().parse().unwrap();
    assert!(ttl > 0 && ttl <= 120, "{ttl}");
}

/// Redis stalls past the publisher's timeout: the publish fails although
/// the append went through once Redis resumed; the retry stores nothing
/// twice, and is answered with success.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn a_publish_that_timed_out_after_storing_is_not_stored_again_on_retry() {
    let server = RedisServer::start_with(&["--enable-debug-command", "yes"], None).unwrap();
    let metrics = Arc::new(Metrics::new());
    let config = TransportConfig { response_timeout: Duration::from_millis(300), ..test_config() };
    let t = RedisTransport::new(RedisOptions { url: server.url(), ca_cert_pem: None }, config, metrics).unwrap();
    let a = scope("r", "", "configmaps");
    let key = a.stream_key(DEFAULT_STREAM_PREFIX);
    let p = t.publisher();
    p.publish(vec![(a.clone(), fact("warm", "up"))]).await.unwrap();
    // The server stalls 1.5 s: our append waits in its socket, the reply
    // times out, and Redis runs the append when it wakes.
    let port = server.port().to_string();
    let stall = std::thread::spawn(move || {
        std::process::Command::new("redis-cli").args(["-p", &port, "DEBUG", "SLEEP", "1.5"]).output().unwrap()
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let batch = vec![(a.clone(), fact("alice", "cm"))];
    assert!(p.publish(batch.clone()).await.is_err(), "timed out");
    assert!(stall.join().unwrap().status.success());
    assert_eq!(server.cli(&["XLEN", &key]).unwrap().trim(), "2", "Redis did append");
    assert_eq!(p.publish(batch).await.unwrap(), 1);
    assert_eq!(server.cli(&["XLEN", &key]).unwrap().trim(), "2", "the retry appended nothing");
}

#[test]
fn the_follower_pause_stays_below_the_grace() {
    use crate::attribution::transport::retry_ceiling;
    let min = Duration::from_millis(100);
    assert_eq!(retry_ceiling(Duration::from_secs(3), min), Duration::from_secs(1));
    assert_eq!(retry_ceiling(Duration::from_millis(900), min), Duration::from_millis(300));
    assert_eq!(retry_ceiling(Duration::from_secs(60), min), Duration::from_secs(1));
    assert_eq!(retry_ceiling(Duration::from_millis(30), min), min, "never below the first step");
}

/// The monitor turns `health` as Redis goes away and comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn the_monitor_reports_redis_down_and_back() {
    let mut h = RedisHarness::new(test_config());
    let mut health = h.transport.health();
    assert!(!*health.borrow(), "unknown until reached");
    let t = h.transport.clone();
    let monitor = tokio::spawn(async move { t.monitor().await });
    let wait = |want: bool, health: &mut tokio::sync::watch::Receiver<bool>| {
        let mut health = health.clone();
        async move { tokio::time::timeout(Duration::from_secs(5), health.wait_for(|v| *v == want)).await.is_ok() }
    };
    assert!(wait(true, &mut health).await, "up");
    h.server.kill();
    assert!(wait(false, &mut health).await, "down");
    h.server.restart().unwrap();
    let start = std::time::Instant::now();
    assert!(wait(true, &mut health).await, "up again");
    assert!(start.elapsed() < Duration::from_secs(1), "noticed within a fraction of a grace: {:?}", start.elapsed());
    monitor.abort();
}

#[test]
fn persistence_reads_aof_then_snapshots() {
    assert_eq!(Persistence::of("yes", ""), Persistence::Aof);
    assert_eq!(Persistence::of("yes", "3600 1"), Persistence::Aof);
    assert_eq!(Persistence::of("no", "3600 1 300 100"), Persistence::Rdb);
    assert_eq!(Persistence::of("no", ""), Persistence::None);
    assert_eq!(Persistence::of("no", "  "), Persistence::None);
}
