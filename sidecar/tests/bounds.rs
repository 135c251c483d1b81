//! Everything the sidecar holds is bounded (issue 30 item 9), through the
//! real binary: what the memory transport keeps per (route, type) goes
//! with the TTL.

use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::audit_event;
use testkit::sidecar::Sidecar;

/// A metric's value (summed over its label sets).
fn metric(s: &Sidecar, name: &str) -> Option<f64> {
    let text = s.metrics();
    let mut found = None;
    for l in text.lines().filter(|l| l.starts_with(name) && !l.starts_with('#')) {
        let v: f64 = l.rsplit(' ').next()?.parse().ok()?;
        found = Some(found.unwrap_or(0.0) + v);
    }
    found
}

fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_memory_transport_drops_what_it_held_for_a_route_after_the_ttl() {
    const ROUTES: usize = 500;
    let key = "example.com/route";
    let s = Sidecar::start(
        "serve",
        &["--author-attribution-ttl", "2s", "--author-attribution-audit-route-annotation-key", key],
    );
    // One batch naming 500 routes, each seen once (the probe's leak: a route
    // costs ~2.5 KiB for good).
    let events: Vec<Value> = (0..ROUTES)
        .map(|i| {
            let mut e = audit_event("create", "alice", "shop", &format!("cm-{i}"), &format!("uid-{i}"), "1");
            e["annotations"] = serde_json::json!({key: format!("route-{i}")});
            e
        })
        .collect();
    // On the bare path the route is the annotation's (a shared backend).
    assert_eq!(s.post("/audit-webhook", &testkit::event_list(events)).0, 200);
    let scopes = "gitopsreverser_attribution_transport_memory_scopes";
    wait_for("the routes' logs", || metric(&s, scopes) == Some(ROUTES as f64));
    // A TTL later nothing of them is held.
    wait_for("the logs dropped after the TTL", || metric(&s, scopes) == Some(0.0));
}

/// Acquire references belong to the connection that took them: a client
/// that goes away without releasing them (killed, say) leaves nothing held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_references_are_released_when_their_client_disconnects() {
    use runtime::proto::FollowRequest;
    use runtime::proto::attribution_client::AttributionClient;
    let s = Sidecar::start("serve", &[]);
    let request = || FollowRequest { route: "default".into(), group: String::new(), resource: "configmaps".into() };
    {
        let mut gone = AttributionClient::new(testkit::sidecar::unix_channel(&s.socket).await);
        for expected in [1, 2] {
            assert_eq!(gone.acquire(request()).await.unwrap().into_inner().refs, expected);
        }
        // Dropped without a Release: its connection closes.
    }
    let mut other = AttributionClient::new(testkit::sidecar::unix_channel(&s.socket).await);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // Each probe takes one and gives it back. (The gone client's
        // references may be released between the two: the release's count
        // is not compared with the acquire's.)
        let refs = other.acquire(request()).await.unwrap().into_inner().refs;
        other.release(request()).await.unwrap();
        if refs == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the gone client's 2 references are still held ({refs} after one more)");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // And a release past what is held is still refused, not an underflow.
    let err = other.release(request()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
}

/// `--metrics-max-types`: 10 types in, at most 3 label the series; the
/// rest are counted under `_other`, and the refusals counted.
#[test]
fn metric_label_sets_are_capped_by_type() {
    let s = Sidecar::start("serve", &["--metrics-max-types", "3"]);
    let events: Vec<Value> = (0..10)
        .map(|i| {
            let mut e = audit_event("create", "alice", "shop", &format!("o-{i}"), &format!("uid-{i}"), "1");
            e["objectRef"]["resource"] = format!("kind{i}s").into();
            e
        })
        .collect();
    assert_eq!(s.post_events("default", &events), 200);
    let text = s.metrics();
    let resources: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("gitopsreverser_audit_events_total{"))
        .filter_map(|l| l.split("resource=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(resources.len(), 4, "three types and _other: {resources:?}");
    assert!(resources.contains("_other"), "{resources:?}");
    assert_eq!(metric(&s, "gitopsreverser_metrics_label_types_refused_total"), Some(7.0));
}

/// `--author-attribution-max-followed`: an Acquire past the cap is refused
/// and counted; one released makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_are_capped() {
    use runtime::proto::FollowRequest;
    use runtime::proto::attribution_client::AttributionClient;
    let s = Sidecar::start("serve", &["--author-attribution-max-followed", "2"]);
    let mut c = AttributionClient::new(testkit::sidecar::unix_channel(&s.socket).await);
    let of =
        |resource: &str| FollowRequest { route: "default".into(), group: String::new(), resource: resource.into() };
    c.acquire(of("configmaps")).await.unwrap();
    c.acquire(of("secrets")).await.unwrap();
    // Another reference on a followed type is no new follow.
    assert_eq!(c.acquire(of("secrets")).await.unwrap().into_inner().refs, 2);
    let err = c.acquire(of("services")).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err}");
    assert!(err.message().contains("--author-attribution-max-followed"), "{err}");
    assert_eq!(metric(&s, "gitopsreverser_attribution_follow_refusals_total"), Some(1.0));
    c.release(of("configmaps")).await.unwrap();
    c.acquire(of("services")).await.unwrap();
}
