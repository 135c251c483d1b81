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
