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
