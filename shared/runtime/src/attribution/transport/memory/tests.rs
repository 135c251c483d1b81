use super::*;
use rules::attribution::GroupResource;

#[test]
fn refused_with_more_than_one_replica() {
    let metrics = Arc::new(Metrics::new());
    for ok in [0, 1] {
        assert!(MemoryTransport::new(ok, TransportConfig::default(), metrics.clone()).is_ok());
    }
    let err = MemoryTransport::new(2, TransportConfig::default(), metrics).unwrap_err();
    assert!(matches!(err, Error::MemoryTransportReplicas { replicas: 2 }));
}

#[test]
fn reads_report_entries_trimmed_past_the_cursor() {
    let metrics = Arc::new(Metrics::new());
    let config = TransportConfig { max_len: 3, ..TransportConfig::default() };
    let t = MemoryTransport::new(1, config, metrics).unwrap();
    let s = Scope::new("r", GroupResource::new("", "configmaps"));
    for i in 0..5 {
        t.publish_at(&s, vec![Fact { author: "a".into(), name: i.to_string(), ..Fact::default() }], now_ms());
    }
    // Entries 1..5 appended, 3..5 kept.
    let behind = t.hub.read(&s, 1, 10);
    assert_eq!(behind.gap, 1, "entry 2 was never read");
    assert_eq!(behind.entries.len(), 3);
    let caught_up = t.hub.read(&s, 5, 10);
    assert_eq!((caught_up.gap, caught_up.entries.len()), (0, 0));
    // A fresh follower starts just before what is retained: no gap.
    assert_eq!(t.hub.warm_cursor(&s), 2);
}

#[test]
fn a_log_past_the_ttl_is_dropped_and_a_new_one_numbers_on() {
    let metrics = Arc::new(Metrics::new());
    let config = TransportConfig { ttl: std::time::Duration::from_secs(60), ..TransportConfig::default() };
    let t = MemoryTransport::new(1, config, metrics.clone()).unwrap();
    let fact = |name: &str| vec![Fact { author: "a".into(), name: name.into(), ..Fact::default() }];
    let old = now_ms() - 120_000;
    // 1,000 routes seen once, two minutes ago: nothing of them stays.
    for i in 0..1000 {
        t.publish_at(&Scope::new(format!("route-{i}"), GroupResource::new("", "configmaps")), fact("x"), old);
    }
    let live = Scope::new("live", GroupResource::new("", "configmaps"));
    t.publish_at(&live, fact("y"), now_ms());
    assert_eq!(t.expire(), 1, "only the scope with a fact inside the TTL is held");
    assert_eq!(metrics.memory_scopes.get(), 1);

    // A follower that had read route-7 to its end, then the route comes back.
    let s = Scope::new("route-7", GroupResource::new("", "configmaps"));
    let cursor = 1; // route-7's only entry, as numbered before it was dropped
    assert_eq!(t.hub.warm_cursor(&s), 1, "a fresh follower starts past every number reused");
    t.publish_at(&s, fact("z"), now_ms());
    let read = t.hub.read(&s, cursor, 10);
    assert_eq!((read.gap, read.entries.len()), (0, 1), "the new entry is read, and the dropped ones are no gap");
    assert!(read.entries[0].seq > cursor);
}

/// Polls until `pred` holds (the follower records what it applied right
/// after handing it to the sink).
async fn eventually(what: &str, pred: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !pred() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// What every live follower applied leaves the log (its facts are in each
/// follower's index); what one of them has not applied stays, and a scope
/// released and acquired again is re-warmed from what came meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_every_follower_applied_leave_the_log() {
    use super::super::conformance::{Recorder, fact, scope, start, wait_caught_up};
    let t = MemoryTransport::new(1, TransportConfig::default(), Arc::new(Metrics::new())).unwrap();
    let (a, b) = (scope("r", "", "configmaps"), scope("r", "", "secrets"));
    let p = t.publisher();
    let f1 = t.follower();
    f1.acquire(&a);
    let rec = Arc::new(Recorder::default());
    let _run = start(&f1, rec.clone());
    wait_caught_up(&f1).await;
    for i in 0..3 {
        p.publish(vec![(a.clone(), fact("alice", &format!("a{i}")))]).await.unwrap();
    }
    rec.wait_for_name("a2").await;
    eventually("the applied entries to leave the log", || t.retained(&a) == 0).await;

    // A second follower that does not read `a` yet: `a` is kept for it.
    let f2 = t.follower();
    p.publish(vec![(a.clone(), fact("alice", "a3"))]).await.unwrap();
    rec.wait_for_name("a3").await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert_eq!(t.retained(&a), 1, "f2 has not applied it");
    f2.acquire(&a);
    let rec2 = Arc::new(Recorder::default());
    let run2 = start(&f2, rec2.clone());
    rec2.wait_for_name("a3").await;
    eventually("both followers to have applied a3", || t.retained(&a) == 0).await;
    drop(run2);
    drop(f2);
    eventually("f2 to be gone from the hub", || t.hub.logs().followers.len() == 1).await;

    // Released: what comes meanwhile is kept and re-warmed on return.
    f1.acquire(&b);
    p.publish(vec![(b.clone(), fact("bob", "b0"))]).await.unwrap();
    rec.wait_for_name("b0").await;
    f1.release(&b);
    tokio::time::timeout(std::time::Duration::from_secs(10), f1.settled()).await.unwrap();
    p.publish(vec![(b.clone(), fact("bob", "b1"))]).await.unwrap();
    p.publish(vec![(a.clone(), fact("alice", "sentinel"))]).await.unwrap();
    rec.wait_for_name("sentinel").await;
    assert_eq!(t.retained(&b), 1, "b1 waits for a follower of b");
    f1.acquire(&b);
    rec.wait_for_name("b1").await;
    let names = rec.names();
    assert_eq!(names.iter().filter(|n| *n == "b0").count(), 1, "b0 was applied once: {names:?}");
    eventually("b1 to leave the log", || t.retained(&b) == 0).await;
}
