//! Engine benchmark (not a test): prints figures, with a baseline measured
//! in the same run.
//! - in-process resolve of a present fact (ns/op) at 10k, 100k and 1M facts,
//!   beside a plain `HashMap<String, _>` lookup of as many keys;
//! - index memory per fact at 1M facts (resident set growth);
//! - publish-side throughput: audit EventList JSON decoded and reduced to
//!   facts, beside a bare `serde_json::Value` parse of the same bytes.
//!
//! Run: `cargo bench -p runtime --bench engine`

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use rules::attribution::audit::{EventList, Published, publish};
use rules::attribution::index::Query;
use rules::attribution::{Fact, GroupResource, Scope};
use runtime::attribution::clock::SystemClock;
use runtime::attribution::transport::FactBatch;
use runtime::attribution::{Engine, EngineConfig};
use runtime::metrics::Metrics;

fn rss_bytes() -> u64 {
    testkit::process::rss_kib(std::process::id()).map_or(0, |kb| kb * 1024)
}

fn uid(i: usize) -> String {
    format!("{:08x}-0000-4000-8000-{:012x}", i, i)
}

fn fact(i: usize) -> Fact {
    Fact {
        author: format!("user-{}", i % 1000),
        namespace: format!("ns-{}", i % 100),
        name: format!("object-{i}"),
        uid: uid(i),
        resource_version: (100_000 + i).to_string(),
        verb: "update".into(),
        audit_id: uid(i + 1),
        stage_timestamp: "2026-06-25T12:00:00.700000Z".into(),
        ..Fact::default()
    }
}

fn engine_with(n: usize, scope: &Scope) -> Arc<Engine> {
    let mut config = EngineConfig::default();
    config.index.max_facts = n + 1;
    config.index.max_facts_per_type = n + 1;
    let e = Arc::new(Engine::new(config, Arc::new(SystemClock), Arc::new(Metrics::new())));
    let now = runtime::attribution::clock::Clock::now_ms(&SystemClock);
    for chunk in (0..n).collect::<Vec<_>>().chunks(512) {
        e.apply_batch(FactBatch { scope: scope.clone(), facts: chunk.iter().map(|&i| fact(i)).collect(), at_ms: now });
    }
    e
}

fn main() {
    let scope = Scope::new("bench", GroupResource::new("apps", "deployments"));
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    println!("== resolve of a present fact (in-process, exact tier)");
    println!("{:>10} {:>14} {:>18} {:>8}", "facts", "resolve ns/op", "HashMap get ns/op", "ratio");
    for n in [10_000usize, 100_000, 1_000_000] {
        let before = rss_bytes();
        let e = engine_with(n, &scope);
        let grown = rss_bytes().saturating_sub(before);
        let queries: Vec<Query> = (0..4096)
            .map(|k| {
                let i = (k * 7919) % n;
                Query {
                    uid: uid(i),
                    resource_version: (100_000 + i).to_string(),
                    namespace: format!("ns-{}", i % 100),
                    name: format!("object-{i}"),
                    ..Query::default()
                }
            })
            .collect();
        let iters = 400_000;
        let t = Instant::now();
        rt.block_on(async {
            for k in 0..iters {
                let r = e.resolve(&scope, "v1", &queries[k % queries.len()]).await;
                black_box(r);
            }
        });
        let resolve_ns = t.elapsed().as_nanos() as f64 / iters as f64;

        let map: HashMap<String, usize> = (0..n).map(|i| (uid(i), i)).collect();
        let t = Instant::now();
        for k in 0..iters {
            black_box(map.get(&queries[k % queries.len()].uid));
        }
        let map_ns = t.elapsed().as_nanos() as f64 / iters as f64;
        println!("{n:>10} {resolve_ns:>14.0} {map_ns:>18.1} {:>7.1}x", resolve_ns / map_ns);
        if n == 1_000_000 {
            println!("index memory at {n} facts: {} bytes/fact (resident set growth while filing)", grown / n as u64);
        }
        drop(e);
    }

    println!("== publish side: audit events reduced to facts");
    let events: Vec<serde_json::Value> = (0..10_000)
        .map(|i| {
            serde_json::json!({
                "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse",
                "auditID": uid(i), "stage": "ResponseComplete", "verb": "update",
                "requestURI": format!("/apis/apps/v1/namespaces/ns/deployments/d{i}"),
                "user": {"username": "alice", "groups": ["system:authenticated"]},
                "objectRef": {"resource": "deployments", "namespace": "ns", "name": format!("d{i}"), "apiGroup": "apps", "apiVersion": "v1"},
                "responseStatus": {"code": 200},
                "requestObject": {"metadata": {"name": format!("d{i}")}, "spec": {"replicas": 2}},
                "responseObject": {"metadata": {"name": format!("d{i}"), "namespace": "ns", "uid": uid(i), "resourceVersion": (1000 + i).to_string()}, "spec": {"replicas": 2}},
                "stageTimestamp": "2026-06-25T12:00:00.700000Z"
            })
        })
        .collect();
    let body =
        serde_json::to_vec(&serde_json::json!({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": events}))
            .unwrap();
    let rounds = 10;
    let t = Instant::now();
    let mut facts = 0;
    for _ in 0..rounds {
        let list = EventList::from_json(&body).unwrap();
        for ev in &list.items {
            if let Published::Fact { fact, .. } = publish("bench", ev) {
                facts += 1;
                black_box(fact);
            }
        }
    }
    let publish_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for _ in 0..rounds {
        black_box(serde_json::from_slice::<serde_json::Value>(&body).unwrap());
    }
    let parse_s = t.elapsed().as_secs_f64();
    let n = (10_000 * rounds) as f64;
    println!(
        "publish: {:.0} audit events/s -> {facts} facts; bare JSON parse of the same bytes: {:.0} events/s; ratio {:.2}x",
        n / publish_s,
        n / parse_s,
        publish_s / parse_s
    );
}
