use super::*;
use rules::attribution::GroupResource;

fn scope(resource: &str) -> Scope {
    Scope::new("r", GroupResource::new("", resource))
}

fn fact(author: &str, name: &str) -> Fact {
    Fact { author: author.into(), name: name.into(), ..Fact::default() }
}

#[test]
fn group_by_scope_keeps_first_seen_scope_order_and_fact_order() {
    let grouped =
        group_by_scope(vec![(scope("b"), fact("x", "1")), (scope("a"), fact("x", "2")), (scope("b"), fact("x", "3"))]);
    let shape: Vec<(String, Vec<String>)> = grouped
        .into_iter()
        .map(|(s, f)| (s.group_resource.resource, f.into_iter().map(|f| f.name).collect()))
        .collect();
    assert_eq!(
        shape,
        vec![("b".to_string(), vec!["1".to_string(), "3".to_string()]), ("a".to_string(), vec!["2".to_string()]),]
    );
    assert!(group_by_scope(Vec::new()).is_empty());
}

#[test]
fn an_entry_with_one_authorless_fact_is_refused_whole() {
    assert!(entry_is_acceptable(&[fact("a", "1"), fact("b", "2")]));
    assert!(!entry_is_acceptable(&[fact("a", "1"), fact(" ", "2")]));
}

#[test]
fn subscriptions_are_reference_counted() {
    let core = FollowerCore::new();
    let requested = core.requested_rx();
    core.acquire(&scope("a"));
    core.acquire(&scope("a"));
    assert_eq!(*requested.borrow(), 1, "a second reference changes nothing");
    assert!(!*core.caught_up().borrow(), "a new scope is not caught up yet");
    core.release(&scope("a"));
    assert_eq!(core.subscriptions(), vec![scope("a")]);
    core.release(&scope("a"));
    assert!(core.subscriptions().is_empty());
    assert_eq!(*requested.borrow(), 2);
    // An unpaired release is ignored, never underflows.
    core.release(&scope("a"));
    assert_eq!(*requested.borrow(), 2);
}

#[test]
fn transport_kind_parses_the_flag_values() {
    assert_eq!("memory".parse::<TransportKind>().unwrap(), TransportKind::Memory);
    assert_eq!("redis".parse::<TransportKind>().unwrap(), TransportKind::Redis);
    let err = "kafka".parse::<TransportKind>().unwrap_err().to_string();
    assert!(err.contains("kafka") && err.contains("memory"), "{err}");
}

#[test]
fn build_refuses_memory_with_replicas_and_redis_without_url() {
    let metrics = Arc::new(Metrics::new());
    let opts = |kind, replica_count, redis| TransportOptions {
        kind,
        replica_count,
        redis,
        config: TransportConfig::default(),
    };
    let err = Transport::build(opts(TransportKind::Memory, 3, None), metrics.clone()).unwrap_err();
    assert!(matches!(err, Error::MemoryTransportReplicas { replicas: 3 }));
    assert!(err.to_string().contains("--replica-count 3"), "{err}");
    let t = Transport::build(opts(TransportKind::Memory, 1, None), metrics.clone()).unwrap();
    assert_eq!(t.kind(), TransportKind::Memory);
    assert!(matches!(
        Transport::build(opts(TransportKind::Redis, 1, None), metrics.clone()),
        Err(Error::RedisUrlMissing)
    ));
    let bad = RedisOptions { url: "http://:secret@nowhere".into(), ca_cert_pem: None };
    let err = Transport::build(opts(TransportKind::Redis, 1, Some(bad)), metrics).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::RedisConfig { .. }), "{msg}");
    assert!(!msg.contains("secret"), "password leaked: {msg}");
}

/// The runtime-selected forms delegate to the real transport.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_forms_run_the_selected_transport() {
    let metrics = Arc::new(Metrics::new());
    let t = Transport::build(
        TransportOptions {
            kind: TransportKind::Memory,
            replica_count: 1,
            redis: None,
            config: conformance::test_config(),
        },
        metrics,
    )
    .unwrap();
    let follower = t.follower();
    follower.acquire(&scope("a"));
    let rec = Arc::new(conformance::Recorder::default());
    let _run = conformance::start(&follower, rec.clone());
    conformance::wait_caught_up(&follower).await;
    t.publisher().publish(vec![(scope("a"), fact("alice", "via-any"))]).await.unwrap();
    rec.wait_for_name("via-any").await;
}
