//! Transport throughput, printed as figures (never asserted):
//! - our batched publish rate (facts/s and entries/s) against a real
//!   `redis-server`, next to `redis-benchmark`'s raw XADD rate on the same
//!   server in the same run, and their ratio;
//! - the follower's apply rate (facts/s delivered into a sink) re-warming a
//!   full stream, for Redis and for memory.
//!
//! Run: `cargo bench -p runtime --bench transport`

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rules::attribution::{Fact, GroupResource, Scope};
use runtime::attribution::transport::{
    FactBatch, FactFollower, FactPublisher, FactSink, MemoryTransport, RedisOptions, RedisTransport, TransportConfig,
};
use runtime::metrics::Metrics;
use testkit::RedisServer;

const CLIENTS: usize = 50;

fn fact(i: usize) -> Fact {
    Fact {
        author: "system:serviceaccount:argocd:argocd-application-controller".into(),
        namespace: "shop".into(),
        name: format!("web-{i}"),
        uid: format!("5f0c2a8e-1b7d-4c1e-9a7b-{i:012}"),
        resource_version: (100_000 + i).to_string(),
        verb: "patch".into(),
        audit_id: format!("7d1c9a52-0000-4000-8000-{i:012}"),
        stage_timestamp: "2026-01-02T03:04:05.123456Z".into(),
        ..Fact::default()
    }
}

fn scope(i: usize) -> Scope {
    Scope::new("prod-eu-1", GroupResource::new("apps", format!("type{i}")))
}

/// `redis-benchmark` XADD of one one-fact entry over `CLIENTS` connections,
/// `pipeline` commands in flight per connection: the raw append rate.
fn raw_xadd_rate(server: &RedisServer, payload: &str, n: usize, pipeline: usize) -> f64 {
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
        .args(["-c", &CLIENTS.to_string(), "-n", &n.to_string(), "--csv"])
        .args(["-P", &pipeline.to_string()])
        .args(["XADD", "bench:raw", "MAXLEN", "~", "10000", "*", "facts", payload])
        .output()
        .expect("run redis-benchmark (package redis-tools)");
    let text = String::from_utf8_lossy(&out.stdout);
    // The CSV's rps column, counted from the right: the command itself
    // contains commas and quotes.
    let last = text.lines().last().unwrap_or_default();
    last.rsplit(',')
        .nth(6)
        .and_then(|v| v.trim_matches('"').parse().ok())
        .unwrap_or_else(|| panic!("cannot read redis-benchmark output: {text}"))
}

/// `CLIENTS` concurrent publishes of `batch` facts over `scopes` scopes each
/// (one entry per scope per publish), `rounds` each.
async fn publish_rate<P: FactPublisher + Clone + 'static>(
    p: &P,
    batch: usize,
    scopes: usize,
    rounds: usize,
) -> (f64, f64) {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let p = p.clone();
        tasks.push(tokio::spawn(async move {
            for r in 0..rounds {
                // Distinct facts: a batch equal to an earlier one is deduplicated, never appended.
                let first = (c * rounds + r) * batch;
                let facts = (0..batch).map(|i| (scope((c + r + i) % scopes), fact(first + i))).collect();
                p.publish(facts).await.expect("publish");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let facts = (CLIENTS * rounds * batch) as f64;
    let entries = (CLIENTS * rounds * scopes.min(batch)) as f64;
    (facts / secs, entries / secs)
}

#[derive(Default)]
struct Counting {
    facts: AtomicU64,
}

impl FactSink for Counting {
    fn apply(&self, batch: FactBatch) {
        self.facts.fetch_add(batch.facts.len() as u64, Ordering::Relaxed);
    }
}

/// A fresh follower re-warms `total` facts already in retention; facts/s
/// from its start until the last one is in the sink.
async fn follow_rate<F: FactFollower + Clone + 'static>(f: F, s: &Scope, total: u64) -> f64 {
    let sink = Arc::new(Counting::default());
    f.acquire(s);
    let start = Instant::now();
    let run = {
        let (f, sink) = (f.clone(), sink.clone());
        tokio::spawn(async move { f.follow(sink).await })
    };
    while sink.facts.load(Ordering::Relaxed) < total {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let rate = total as f64 / start.elapsed().as_secs_f64();
    run.abort();
    rate
}

async fn fill<P: FactPublisher>(p: &P, s: &Scope, entries: usize, per_entry: usize) {
    for e in 0..entries {
        p.publish((0..per_entry).map(|i| (s.clone(), fact(e * per_entry + i))).collect()).await.expect("publish");
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this
    // binary without it, and then a small smoke run keeps the suite fast.
    let full = std::env::args().any(|a| a == "--bench");
    let scale = if full { 1 } else { 50 };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let server = RedisServer::start().expect("start redis-server");
    let config = TransportConfig::default();
    let metrics = Arc::new(Metrics::new());
    let redis =
        RedisTransport::new(RedisOptions { url: server.url(), ca_cert_pem: None }, config.clone(), metrics.clone())
            .unwrap();
    if !full {
        println!("(smoke run at 1/{scale} scale, debug build: figures are not meaningful; use `cargo bench`)");
    }
    let one = Fact::encode_entry(&[fact(1)]);
    println!(
        "transport benchmark: redis-server on 127.0.0.1:{}, {CLIENTS} concurrent clients, fact JSON {} bytes",
        server.port(),
        one.len() - 2
    );

    let raw = raw_xadd_rate(&server, &one, 200_000 / scale, 1);
    let raw_p = raw_xadd_rate(&server, &one, 400_000 / scale, 16);
    println!("redis-benchmark raw XADD, 1 fact/entry, no pipelining: {raw:>12.0} entries/s  (the baseline below)");
    println!("redis-benchmark raw XADD, 1 fact/entry, -P 16:         {raw_p:>12.0} entries/s");
    rt.block_on(async {
        let p = redis.publisher();
        for (batch, scopes, rounds) in [(1, 1, 2_000), (10, 1, 400), (100, 4, 80), (500, 4, 20)] {
            let rounds = (rounds / scale).max(1);
            let (facts, entries) = publish_rate(&p, batch, scopes, rounds).await;
            println!(
                "our publish, {batch:>3} facts/publish over {scopes} scope(s): {facts:>12.0} facts/s  {entries:>10.0} entries/s  facts/s vs raw XADD/s = {:.2}x",
                facts / raw
            );
        }

        let s = Scope::new("bench", GroupResource::new("", "configmaps"));
        let (entries, per_entry) = (2_000 / scale, 100);
        let total = (entries * per_entry) as u64;
        fill(&redis.publisher(), &s, entries, per_entry).await;
        let r = follow_rate(redis.follower(), &s, total).await;
        println!("redis follower apply (re-warm {total} facts in {entries} entries): {r:>12.0} facts/s");

        let memory = MemoryTransport::new(1, config.clone(), Arc::new(Metrics::new())).unwrap();
        fill(&memory.publisher(), &s, entries, per_entry).await;
        let m = follow_rate(memory.follower(), &s, total).await;
        println!("memory follower apply (re-warm {total} facts in {entries} entries): {m:>12.0} facts/s");
        let (mf, _) = publish_rate(&memory.publisher(), 100, 4, 80).await;
        println!("memory publish, 100 facts/publish over 4 scopes: {mf:>12.0} facts/s");
    });
}
