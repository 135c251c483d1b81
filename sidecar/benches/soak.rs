//! Soak benchmark (not a test), on the real binaries: a `receive` and a
//! `serve` on a real redis-server (AOF, `appendfsync always`), fed like an
//! API server feeds them, with one Redis restart (at 40% of the run) and one
//! `receive` restart (kill -9, at 70%). Prints one row per minute:
//! - audit events acknowledged (5,000/s in 400-event batches over 8
//!   keep-alive mTLS connections; a batch answered otherwise than 200, or
//!   whose connection failed, is retried as the API server retries it);
//! - Resolves of acknowledged facts (1,000/s over the socket), their p99, and
//!   how many did not name the fact's author (lost, or wrong);
//! - resident memory and open files of both processes (they must level off).
//!
//! TTL 1 minute, so the index turns over every minute. Run:
//! `cargo bench -p reverser-sidecar --bench soak -- --minutes 5`
//! (default 60; `--events-per-sec`, `--resolves-per-sec` to change the load).
//!
//! `--evicting` runs it on a Redis that evicts keys (`maxmemory 16mb`,
//! `maxmemory-policy allkeys-lru`, the usual managed default): first
//! `receive` without `--allow-evicting-redis`, which must refuse the batch,
//! then the soak with the flag, printing the stream gaps `serve` counted
//! (issue 30: acknowledged facts an eviction took). `--maxmemory 4mb` makes
//! Redis smaller than a minute of facts, so it evicts the followed stream
//! itself, not only the per-batch dedup keys.

mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Tls, client_config, connect, post};
use runtime::proto::ResolveRequest;
use support::*;
use testkit::{RedisServer, free_port};

const BATCH: usize = 400;
const CONNECTIONS: usize = 8;
/// A fact is resolved between these ages after its batch was acknowledged:
/// past the follower's delivery, well inside the 1-minute TTL.
const MIN_AGE: Duration = Duration::from_secs(2);
const MAX_AGE: Duration = Duration::from_secs(40);

struct Args {
    minutes: u64,
    events_per_sec: u64,
    resolves_per_sec: u64,
    evicting: bool,
    /// Redis's `maxmemory` with `--evicting`.
    maxmemory: String,
}

fn args() -> Args {
    let mut a =
        Args { minutes: 60, events_per_sec: 5_000, resolves_per_sec: 1_000, evicting: false, maxmemory: "16mb".into() };
    common::each_flag(|flag, next| {
        match flag {
            "--minutes" => a.minutes = common::number(flag, next),
            "--events-per-sec" => a.events_per_sec = common::number(flag, next),
            "--resolves-per-sec" => a.resolves_per_sec = common::number(flag, next),
            "--maxmemory" => {
                assert!(!next.is_empty(), "--maxmemory takes a size");
                a.maxmemory = next.to_owned();
            }
            "--evicting" => {
                a.evicting = true;
                return false;
            }
            _ => return false,
        }
        true
    });
    a
}

fn proc_stat(pid: u32) -> (u64, usize) {
    let rss = common::rss_kib(pid);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0);
    (rss, fds)
}

/// What happened in one minute.
#[derive(Default)]
struct Minute {
    acked: u64,
    post_retries: u64,
    resolves: u64,
    wrong_or_absent: u64,
    latencies: Vec<Duration>,
}

struct Shared {
    /// Acknowledged object ids, oldest first, with when.
    acked: Mutex<VecDeque<(Instant, u64)>>,
    minute: Mutex<Minute>,
    total_acked: AtomicU64,
    total_resolves: AtomicU64,
    total_lost: AtomicU64,
    receiver_port: u16,
    certs: std::path::PathBuf,
}

fn author(id: u64) -> String {
    format!("user-{}", id % 50)
}

fn batch(first: u64) -> Vec<u8> {
    event_list(
        (first..first + BATCH as u64)
            .map(|id| audit_event("update", &author(id), "soak", &format!("cm-{id}"), &format!("u-{id}"), "7"))
            .collect(),
    )
}

/// One API server connection: a batch every `every`, each retried until 200.
async fn poster(s: Arc<Shared>, next_id: Arc<AtomicU64>, every: Duration, until: Instant) {
    let mut conn: Option<Tls> = None;
    let mut tick = tokio::time::interval(every);
    while Instant::now() < until {
        tick.tick().await;
        let first = next_id.fetch_add(BATCH as u64, Ordering::Relaxed);
        let body = batch(first);
        loop {
            if conn.is_none() {
                conn = match client_config(&s.certs) {
                    Ok(config) => connect(s.receiver_port, config).await.ok(),
                    Err(_) => None,
                };
            }
            let status = match conn.as_mut() {
                Some(c) => post(c, "/audit-webhook/soak", &body).await.unwrap_or(0),
                None => 0,
            };
            if status == 200 {
                break;
            }
            conn = None;
            s.minute.lock().unwrap().post_retries += 1;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let now = Instant::now();
        s.acked.lock().unwrap().extend((first..first + BATCH as u64).map(|id| (now, id)));
        s.minute.lock().unwrap().acked += BATCH as u64;
        s.total_acked.fetch_add(BATCH as u64, Ordering::Relaxed);
    }
}

/// Resolves acknowledged facts at `per_sec`, checking each names its author.
async fn resolver(s: Arc<Shared>, socket: std::path::PathBuf, per_sec: u64, until: Instant, seed: u64) {
    let mut client = runtime::proto::attribution_client::AttributionClient::new(channel(&socket).await);
    // xorshift: enough to spread picks, no dependency.
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / per_sec as f64));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while Instant::now() < until {
        tick.tick().await;
        let id = {
            let mut acked = s.acked.lock().unwrap();
            let now = Instant::now();
            while acked.front().is_some_and(|(at, _)| now.duration_since(*at) > MAX_AGE) {
                acked.pop_front();
            }
            let ripe = acked.partition_point(|(at, _)| now.duration_since(*at) >= MIN_AGE);
            if ripe == 0 {
                continue;
            }
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            acked[(state % ripe as u64) as usize].1
        };
        let object = watch_object("soak", &format!("cm-{id}"), &format!("u-{id}"), "7", false);
        let t = Instant::now();
        let r = client
            .resolve(ResolveRequest { r#type: Some(soak_type()), event_type: "MODIFIED".into(), object_json: object })
            .await;
        let took = t.elapsed();
        let right = r.as_ref().is_ok_and(|r| r.get_ref().tier == "exact" && r.get_ref().author == author(id));
        let mut m = s.minute.lock().unwrap();
        m.resolves += 1;
        m.latencies.push(took);
        s.total_resolves.fetch_add(1, Ordering::Relaxed);
        if !right {
            m.wrong_or_absent += 1;
            s.total_lost.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn soak_type() -> runtime::proto::TypeRef {
    runtime::proto::TypeRef {
        route: "soak".into(),
        group: String::new(),
        version: "v1".into(),
        resource: "configmaps".into(),
    }
}

/// A counter's total over its label sets, in a `/metrics` response.
fn counted(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

fn p99(mut v: Vec<Duration>) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * 0.99).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
    let run = Duration::from_secs(a.minutes * 60);
    let aof = tempfile::tempdir().unwrap();
    let mut redis_args = vec!["--appendonly", "yes", "--appendfsync", "always", "--dir", aof.path().to_str().unwrap()];
    if a.evicting {
        redis_args.extend(["--maxmemory", &a.maxmemory, "--maxmemory-policy", "allkeys-lru"]);
    }
    let mut redis = RedisServer::start_with(&redis_args, None).expect("redis-server");
    let url = redis.url();
    let port = free_port().unwrap();
    let listen = format!("127.0.0.1:{port}");
    let mut receive_args = vec!["--redis-url", &url, "--audit-listen", &listen, "--author-attribution-ttl", "1m"];
    if a.evicting {
        // Without the flag: the batch is refused, and /readyz says why.
        let refusing = Sidecar::start("receive", &receive_args);
        // To the port given (--audit-listen), over the API server's mTLS.
        let body = event_list(vec![audit_event("update", "user-0", "soak", "cm-x", "u-x", "7")]);
        let status = match connect(port, client_config(&refusing.certs).expect("client certificates")).await {
            Ok(mut c) => post(&mut c, "/audit-webhook/soak", &body).await.unwrap_or(0),
            Err(_) => 0,
        };
        let ready = testkit::sidecar::http_get(refusing.metrics_port, "/readyz");
        let why = ready.lines().skip_while(|l| !l.is_empty()).collect::<Vec<_>>().join(" ");
        println!("evicting Redis, no --allow-evicting-redis: a batch is answered {status}; /readyz: {}", why.trim());
        drop(refusing);
        receive_args.push("--allow-evicting-redis");
    }
    let mut receiver = Sidecar::start("receive", &receive_args);
    let mut serve_args = vec![
        "--redis-url",
        &url,
        "--audit-listen",
        "off",
        "--follow",
        "soak:configmaps",
        "--author-attribution-ttl",
        "1m",
    ];
    if a.evicting {
        serve_args.push("--allow-evicting-redis");
    }
    let serve = Sidecar::start_sharing_certs("serve", &serve_args, Some(&receiver.certs));
    let serve_pid = serve.child.as_ref().unwrap().id();
    let shared = Arc::new(Shared {
        acked: Mutex::new(VecDeque::new()),
        minute: Mutex::new(Minute::default()),
        total_acked: AtomicU64::new(0),
        total_resolves: AtomicU64::new(0),
        total_lost: AtomicU64::new(0),
        receiver_port: port,
        certs: receiver.certs.clone(),
    });
    println!(
        "soak: {} min, {} audit events/s in {BATCH}-event batches over {CONNECTIONS} connections, {} Resolves/s, TTL 1m; \
         Redis restart at {:.0} s, receive restart (kill -9) at {:.0} s",
        a.minutes,
        a.events_per_sec,
        a.resolves_per_sec,
        run.as_secs_f64() * 0.4,
        run.as_secs_f64() * 0.7
    );
    println!(
        "| minute | events acked | post retries | Resolves | Resolve p99 | not resolvable | stream gaps | streams recreated | serve RSS | serve fds | receive RSS | receive fds |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");

    let start = Instant::now();
    let until = start + run;
    let next_id = Arc::new(AtomicU64::new(0));
    let every = Duration::from_secs_f64((CONNECTIONS * BATCH) as f64 / a.events_per_sec as f64);
    let mut tasks = Vec::new();
    for _ in 0..CONNECTIONS {
        tasks.push(tokio::spawn(poster(shared.clone(), next_id.clone(), every, until)));
    }
    let resolvers = 20u64;
    for i in 0..resolvers {
        let per = (a.resolves_per_sec / resolvers).max(1);
        tasks.push(tokio::spawn(resolver(shared.clone(), serve.socket.clone(), per, until, i)));
    }

    let (mut redis_done, mut receive_done) = (false, false);
    let mut minute = 1;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let elapsed = start.elapsed();
        if !redis_done && elapsed >= run.mul_f64(0.4) {
            redis_done = true;
            // SIGKILL, then the same port and AOF directory.
            tokio::task::block_in_place(|| redis.restart()).expect("redis-server restarts");
        }
        if !receive_done && elapsed >= run.mul_f64(0.7) {
            receive_done = true;
            drop(receiver);
            receiver = Sidecar::start_sharing_certs("receive", &receive_args, Some(&shared.certs));
        }
        if elapsed >= Duration::from_secs(60 * minute) || Instant::now() >= until {
            let m = std::mem::take(&mut *shared.minute.lock().unwrap());
            let (srss, sfds) = proc_stat(serve_pid);
            let (rrss, rfds) = proc_stat(receiver.child.as_ref().unwrap().id());
            let metrics = serve.metrics();
            let gaps = counted(&metrics, "gitopsreverser_attribution_fact_stream_gaps_total");
            let recreated = counted(&metrics, "gitopsreverser_attribution_fact_stream_recreations_total");
            println!(
                "| {minute} | {} | {} | {} | {:.1} ms | {} | {gaps} | {recreated} | {:.1} MiB | {sfds} | {:.1} MiB | {rfds} |",
                m.acked,
                m.post_retries,
                m.resolves,
                p99(m.latencies).as_secs_f64() * 1000.0,
                m.wrong_or_absent,
                srss as f64 / 1024.0,
                rrss as f64 / 1024.0
            );
            minute += 1;
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    println!(
        "total: {} audit events acknowledged; {} Resolves of acknowledged facts, {} of them not naming the fact's author",
        shared.total_acked.load(Ordering::Relaxed),
        shared.total_resolves.load(Ordering::Relaxed),
        shared.total_lost.load(Ordering::Relaxed)
    );
    if a.evicting {
        // What the policy took, by Redis's own count.
        let port = url.rsplit(':').next().unwrap_or_default().trim_end_matches('/').to_owned();
        let info = std::process::Command::new("redis-cli").args(["-p", &port, "info", "stats"]).output();
        let evicted = info
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|t| t.lines().find_map(|l| l.strip_prefix("evicted_keys:").map(|v| v.trim().to_owned())));
        println!(
            "Redis evicted {} keys (since its restart); serve counted {} stream gaps and {} streams evicted and created again (facts lost, count unknown)",
            evicted.unwrap_or_else(|| "?".into()),
            counted(&serve.metrics(), "gitopsreverser_attribution_fact_stream_gaps_total"),
            counted(&serve.metrics(), "gitopsreverser_attribution_fact_stream_recreations_total")
        );
    }
    drop(serve);
    drop(receiver);
}
