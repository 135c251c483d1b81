//! Sidecar benchmark (not a test), on the real binary. Prints:
//! - `Resolve` round trip over the Unix socket (p50, p99) beside a raw
//!   Unix-socket echo round trip measured in the same run, and their ratio;
//! - receiver throughput: audit events/s over mTLS (10,000-event batches);
//! - resident memory idle and with 100,000 facts in the index.
//!
//! Run: `cargo bench -p reverser-sidecar --bench sidecar`

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use runtime::proto::ResolveRequest;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let s = Sidecar::start("serve", &["--author-attribution-max-facts", "2000000"]);
    let pid = s.child.as_ref().unwrap().id();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = rss_kib(pid);

    // Receiver throughput: 10 batches of 10,000 events = 100,000 facts.
    let (batches, per) = (10, 10_000);
    let mut bodies = Vec::new();
    for b in 0..batches {
        bodies.push(event_list(
            (0..per)
                .map(|i| {
                    let n = b * per + i;
                    audit_event(
                        "update",
                        &format!("user-{}", n % 100),
                        "bench",
                        &format!("cm-{n}"),
                        &format!("uid-{n}"),
                        "7",
                    )
                })
                .collect(),
        ));
    }
    let t = Instant::now();
    for body in &bodies {
        let (code, text) = s.post("/audit-webhook/bench", body);
        assert_eq!(code, 200, "{text}");
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "receiver: {:.0} audit events/s over mTLS ({} batches of {per}, curl per batch)",
        (batches * per) as f64 / secs,
        batches
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let loaded = rss_kib(pid);
    println!("resident memory: idle {} MiB; with 100,000 facts {} MiB", idle / 1024, loaded / 1024);

    // Resolve round trips over the socket (facts present: exact tier).
    let mut c = s.client().await;
    let n = 20_000;
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let k = (i * 7919) % (batches * per);
        let req = ResolveRequest {
            r#type: configmaps("bench"),
            event_type: "MODIFIED".into(),
            object_json: watch_object("bench", &format!("cm-{k}"), &format!("uid-{k}"), "7", false),
        };
        let t = Instant::now();
        let r = c.resolve(req).await.unwrap().into_inner();
        lat.push(t.elapsed());
        assert_eq!(r.tier, "exact");
    }
    lat.sort();

    // Baseline: a raw Unix-socket echo of a similar-sized message.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("echo.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 256];
        loop {
            let Ok(k) = sock.read(&mut buf).await else { return };
            if k == 0 || sock.write_all(&buf[..k]).await.is_err() {
                return;
            }
        }
    });
    let mut client = tokio::net::UnixStream::connect(&path).await.unwrap();
    let msg = vec![7u8; 200];
    let mut back = vec![0u8; 200];
    let mut echo = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        client.write_all(&msg).await.unwrap();
        client.read_exact(&mut back).await.unwrap();
        echo.push(t.elapsed());
    }
    echo.sort();
    let (p50, p99, e50, e99) =
        (percentile(&lat, 0.5), percentile(&lat, 0.99), percentile(&echo, 0.5), percentile(&echo, 0.99));
    println!(
        "Resolve round trip: p50 {:.1} us, p99 {:.1} us; raw Unix-socket echo: p50 {:.1} us, p99 {:.1} us; ratio p50 {:.1}x, p99 {:.1}x",
        p50.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        e50.as_secs_f64() * 1e6,
        e99.as_secs_f64() * 1e6,
        p50.as_secs_f64() / e50.as_secs_f64(),
        p99.as_secs_f64() / e99.as_secs_f64()
    );
}
