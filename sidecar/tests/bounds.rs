//! Bounds of the socket API through the real binary (issue 30): a
//! connection carries a watcher's whole window of waiting Resolves at once,
//! and a connection that never speaks is closed.

mod support;

use std::time::{Duration, Instant};

use runtime::proto::ResolveRequest;
use support::*;

/// 5,000 Resolves waiting out the grace on ONE connection end within about
/// one grace (hyper's default of 200 streams per connection ran them in
/// waves: 1,000 took 15 s at a 3 s grace).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_waiting_resolves_on_one_connection_end_in_one_grace() {
    let s = Sidecar::start("serve", &["--author-attribution-grace", "1s", "--follow", "lab:configmaps"]);
    let client = s.client().await; // one channel: one connection, cloned per call
    let start = Instant::now();
    let calls: Vec<_> = (0..5_000)
        .map(|i| {
            let mut c = client.clone();
            let object = watch_object("ns", &format!("cm{i}"), &format!("u-{i}"), "1", false);
            tokio::spawn(async move {
                let req = ResolveRequest { r#type: configmaps("lab"), event_type: "ADDED".into(), object_json: object };
                c.resolve(req).await.map(|r| r.into_inner().tier)
            })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap().expect("a Resolve failed").as_str(), "absent");
    }
    // Waves of 200 would take 25 graces; one grace plus the work is the bound.
    let took = start.elapsed();
    assert!(took < Duration::from_secs(8), "5,000 waiting Resolves took {took:?}");
}

/// A Unix-socket connection that never sends the HTTP/2 preface is closed
/// after the preface timeout, not kept for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_socket_connection_is_closed() {
    use tokio::io::AsyncReadExt;
    let s = Sidecar::start("serve", &[]);
    let mut silent = tokio::net::UnixStream::connect(&s.socket).await.unwrap();
    let start = Instant::now();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(15), silent.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "still open after 15 s: {read:?}");
    assert!(start.elapsed() >= Duration::from_secs(4), "closed before the timeout: {:?}", start.elapsed());
    // A client that speaks is served meanwhile and after.
    let mut client = s.client().await;
    let r = client
        .resolve(ResolveRequest {
            r#type: configmaps("lab"),
            event_type: "BOOKMARK".into(),
            object_json: b"{}".to_vec(),
        })
        .await;
    assert!(r.is_ok(), "{r:?}");
}
