//! Sidecar benchmark (not a test), on the real binary with its embedded
//! defaults (memory transport, the default caps), every ratio against a
//! baseline measured in the same run. Prints:
//! - resident memory idle, with 100,000 and with 1,000,000 facts held, and
//!   the growth per fact;
//! - receiver throughput: audit events/s over mTLS, 400-event batches on 8
//!   keep-alive connections (as the API server posts them), beside a bare
//!   axum + rustls server in another process that only parses the same
//!   `EventList` JSON;
//! - `Resolve` round trips over the Unix socket (p50, p99) beside a minimal
//!   tonic unary echo over a Unix socket in another process (same runtime
//!   settings as the sidecar's socket API: a current-thread runtime of its
//!   own; same request and response sizes), and a raw Unix-socket echo in
//!   a third process; one call to each in turn.
//!
//! The baselines run as this same executable in another process
//! (`SIDECAR_BENCH_ROLE`): bench-only code, not in the product.
//!
//! Run: `cargo bench -p reverser-sidecar --bench sidecar` (`-- --facts N`,
//! a multiple of 100,000, for a quicker run than the default million).

/// The product's allocator (sidecar/src/main.rs): the baselines this
/// executable serves in its helper processes run on what `serve` runs on.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::{client_config, connect, cpu_and_switches, percentile, post, rss_kib};
use prost::Message;
use runtime::proto::ResolveRequest;
use runtime::proto::attribution_client::AttributionClient;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BATCH: usize = 400;
const CONNECTIONS: usize = 8;
/// Facts loaded: the default cap; `-- --facts N` (a multiple of 100,000)
/// for a quicker run while working on the socket path.
fn facts() -> usize {
    let mut args = std::env::args().skip_while(|a| a != "--facts").skip(1);
    args.next().map_or(1_000_000, |n| n.parse().expect("--facts takes a number"))
}
/// Spread over types so the default per-type cap (250,000) binds none.
const TYPES: [&str; 8] =
    ["configmaps", "secrets", "services", "serviceaccounts", "pods", "endpoints", "events", "persistentvolumeclaims"];
/// Eight hex digits in the batch template that each batch overwrites with
/// its own number, so every fact is distinct without rendering JSON per batch.
const MARK: &[u8] = b"ffffbbbb";
const ROLE: &str = "SIDECAR_BENCH_ROLE";

fn uid(b: &str, i: usize) -> String {
    format!("{b}-0000-4000-8000-{i:012x}")
}

fn name(b: &str, i: usize) -> String {
    format!("obj-{b}-{i:04}")
}

/// One 400-event batch as the API server posts it, with where [`MARK`] is.
fn template() -> (Vec<u8>, Vec<usize>) {
    let b = std::str::from_utf8(MARK).unwrap();
    let events = (0..BATCH)
        .map(|i| {
            let ty = TYPES[i % TYPES.len()];
            let mut ev = audit_event("update", &format!("user-{}", i % 50), "bench", &name(b, i), &uid(b, i), "7");
            ev["auditID"] = format!("{b}-aaaa-4000-8000-{i:012x}").into();
            ev["objectRef"]["resource"] = ty.into();
            ev["requestURI"] = format!("/api/v1/namespaces/bench/{ty}/{}", name(b, i)).into();
            ev
        })
        .collect();
    let body = event_list(events);
    let marks = body.windows(MARK.len()).enumerate().filter(|(_, w)| *w == MARK).map(|(i, _)| i).collect();
    (body, marks)
}

struct Batches {
    template: Vec<u8>,
    marks: Vec<usize>,
}

impl Batches {
    fn body(&self, n: u32) -> Vec<u8> {
        let mut body = self.template.clone();
        let hex = format!("{n:08x}");
        for &at in &self.marks {
            body[at..at + MARK.len()].copy_from_slice(hex.as_bytes());
        }
        body
    }
}

/// Posts batches `from..to` to `port` on [`CONNECTIONS`] keep-alive
/// connections; how long it took.
async fn blast(port: u16, certs: &Path, path: &'static str, batches: &Arc<Batches>, from: u32, to: u32) -> Duration {
    let config = client_config(certs).unwrap();
    let next = Arc::new(AtomicU32::new(from));
    let t = Instant::now();
    let tasks: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            let (config, next, batches) = (config.clone(), next.clone(), batches.clone());
            tokio::spawn(async move {
                let mut conn = connect(port, config).await.unwrap();
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= to {
                        return;
                    }
                    let status = post(&mut conn, path, &batches.body(n)).await.unwrap();
                    assert_eq!(status, 200, "batch {n} to {path}");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    t.elapsed()
}

fn facts_held(s: &Sidecar) -> u64 {
    s.metrics()
        .lines()
        .find_map(|l| l.strip_prefix("gitopsreverser_attribution_fact_index_entries "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Waits until the follower has filed `n` facts.
async fn settle(s: &Sidecar, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while facts_held(s) < n {
        assert!(Instant::now() < deadline, "the index holds {} facts, not {n}", facts_held(s));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
}

/// A baseline process: this executable in `role`; its first stdout line is
/// its port (or `ready`).
fn helper(role: &str, env: &[(&str, &Path)]) -> (Child, String) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env(ROLE, role).stdout(Stdio::piped()).stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
    (child, line.trim().to_owned())
}

/// `1000000` as `1,000,000`, as the README's tables print counts.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    match std::env::var(ROLE).as_deref() {
        Ok(role) => baselines::run(role),
        Err(_) => tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(bench()),
    }
}

async fn bench() {
    let facts = facts();
    assert!(facts >= 100_000 && facts.is_multiple_of(100_000), "--facts must be a multiple of 100,000");
    let follow: Vec<String> = TYPES.iter().map(|t| format!("bench:{t}")).collect();
    let mut s = Sidecar::start("serve", &["--follow", &follow.join(",")]);
    let pid = s.child.as_ref().unwrap().id();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = rss_kib(pid);
    let (mut parser, port) = helper("parse", &[("CERTS", &s.certs)]);
    let parse_port: u16 = port.parse().unwrap();

    // Receiver: the same batches to the sidecar and to the parse-only
    // server, alternating 100,000 events at a time.
    let (template, marks) = template();
    let batches = Arc::new(Batches { template, marks });
    let per_chunk = (100_000 / BATCH) as u32;
    let (mut ours, mut theirs) = (Duration::ZERO, Duration::ZERO);
    let mut at_100k = 0;
    for chunk in 0..(facts / 100_000) as u32 {
        let (from, to) = (chunk * per_chunk, (chunk + 1) * per_chunk);
        ours += blast(s.audit_port, &s.certs, "/audit-webhook/bench", &batches, from, to).await;
        theirs += blast(parse_port, &s.certs, "/audit-webhook/bench", &batches, from, to).await;
        if chunk == 0 {
            settle(&s, 100_000).await;
            at_100k = rss_kib(pid);
        }
    }
    settle(&s, facts as u64).await;
    let loaded = rss_kib(pid);
    let _ = parser.kill();
    let events = facts as f64;
    let (ours_rate, theirs_rate) = (events / ours.as_secs_f64(), events / theirs.as_secs_f64());

    // Resolve, beside the echoes. The echo answers with this very response,
    // so both carry the same bytes each way.
    let mut client = s.client().await;
    let request = |k: usize| {
        let (b, i) = (format!("{:08x}", k / BATCH), (k % BATCH) / TYPES.len() * TYPES.len());
        ResolveRequest {
            r#type: configmaps("bench"),
            event_type: "MODIFIED".into(),
            object_json: watch_object("bench", &name(&b, i), &uid(&b, i), "7", false),
        }
    };
    let sample = client.resolve(request(0)).await.unwrap().into_inner();
    assert_eq!(sample.tier, "exact", "{sample:?}");
    let dir = tempfile::tempdir().unwrap();
    let canned = dir.path().join("response.bin");
    std::fs::write(&canned, sample.encode_to_vec()).unwrap();
    let (mut echo, _) = helper("echo", &[("SOCKETS", dir.path()), ("RESPONSE", &canned)]);
    let (mut raw_echo, _) = helper("raw", &[("SOCKETS", dir.path())]);
    let mut echo_client = AttributionClient::new(channel(&dir.path().join("grpc.sock")).await);
    let mut raw = tokio::net::UnixStream::connect(dir.path().join("raw.sock")).await.unwrap();
    let (req_len, resp_len) = (request(0).encoded_len(), sample.encoded_len());

    // One call to each in turn, 20,000 times after 2,000 uncounted: the
    // machine's slow spells (2 shared cores) land on all three alike, and
    // each server answers a call after idling between its calls, as a
    // sidecar does. What each server spends per call is read around the
    // counted calls: on-CPU time and context switches of all its threads
    // (each is busy only with its own calls).
    let (warm, counted) = (2_000, 20_000);
    let (mut lat, mut lat_echo, mut lat_raw) = (Vec::new(), Vec::new(), Vec::new());
    let msg = vec![7u8; req_len];
    let mut back = vec![0u8; req_len];
    let echo_pid = echo.id();
    let (mut before, mut before_echo) = ((0, 0), (0, 0));
    for j in 0..warm + counted {
        if j == warm {
            (before, before_echo) = (cpu_and_switches(pid), cpu_and_switches(echo_pid));
        }
        let keep = j >= warm;
        let k = (j * 7919) % facts;
        // Each request is built before its clock starts: only the round
        // trip is timed, alike for both.
        let req = request(k);
        let t = Instant::now();
        let r = client.resolve(req).await.unwrap().into_inner();
        let took = t.elapsed();
        assert_eq!(r.tier, "exact");
        let req = request(k);
        let t = Instant::now();
        let e = echo_client.resolve(req).await.unwrap().into_inner();
        let took_echo = t.elapsed();
        assert_eq!(e.encoded_len(), resp_len);
        let t = Instant::now();
        raw.write_all(&msg).await.unwrap();
        raw.read_exact(&mut back).await.unwrap();
        let took_raw = t.elapsed();
        if keep {
            lat.push(took);
            lat_echo.push(took_echo);
            lat_raw.push(took_raw);
        }
    }
    let delta = |b: (u64, u64), a: (u64, u64)| (a.0.saturating_sub(b.0), a.1.saturating_sub(b.1));
    let (cpu, cpu_echo) = (delta(before, cpu_and_switches(pid)), delta(before_echo, cpu_and_switches(echo_pid)));
    let _ = echo.kill();
    let _ = raw_echo.kill();
    for v in [&mut lat, &mut lat_echo, &mut lat_raw] {
        v.sort_unstable();
    }
    let p = |v: &[Duration]| (percentile(v, 0.5), percentile(v, 0.99));
    let ((r50, r99), (e50, e99), (w50, w99)) = (p(&lat), p(&lat_echo), p(&lat_raw));

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at the end: {}", load.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
    println!();
    println!("| resident memory of `serve` | MiB | bytes per fact |");
    println!("|---|---|---|");
    println!("| idle | {:.1} | |", idle as f64 / 1024.0);
    println!(
        "| 100,000 facts held | {:.1} | {:.0} |",
        at_100k as f64 / 1024.0,
        (at_100k.saturating_sub(idle) * 1024) as f64 / 100_000.0
    );
    if facts > 100_000 {
        println!(
            "| {} facts held | {:.1} | {:.0} |",
            thousands(facts),
            loaded as f64 / 1024.0,
            (loaded.saturating_sub(idle) * 1024) as f64 / facts as f64
        );
    }
    println!();
    println!("| receiver, mTLS, {BATCH}-event batches on {CONNECTIONS} connections | audit events/s |");
    println!("|---|---|");
    println!("| `serve` receiver (decode, gates, publish, index) | {ours_rate:.0} |");
    println!("| bare axum + rustls, parse only, another process (baseline) | {theirs_rate:.0} |");
    println!("| ratio | {:.2}x |", ours_rate / theirs_rate);
    println!();
    println!(
        "| round trip over a Unix socket ({} calls each, one to each in turn; request {req_len} B, response {resp_len} B) | p50 | p99 |",
        lat.len()
    );
    println!("|---|---|---|");
    println!("| `Resolve` (gRPC, fact present) | {:.1} us | {:.1} us |", us(r50), us(r99));
    println!("| tonic unary echo, another process (baseline) | {:.1} us | {:.1} us |", us(e50), us(e99));
    println!("| raw socket echo, another process | {:.1} us | {:.1} us |", us(w50), us(w99));
    println!(
        "| `Resolve` / tonic echo | {:.2}x | {:.2}x |",
        r50.as_secs_f64() / e50.as_secs_f64(),
        r99.as_secs_f64() / e99.as_secs_f64()
    );
    let calls = lat.len() as f64;
    println!();
    println!("| per call, server side (all threads) | CPU | context switches |");
    println!("|---|---|---|");
    println!("| `serve` answering `Resolve` | {:.1} us | {:.2} |", cpu.0 as f64 / 1e3 / calls, cpu.1 as f64 / calls);
    println!("| tonic echo | {:.1} us | {:.2} |", cpu_echo.0 as f64 / 1e3 / calls, cpu_echo.1 as f64 / calls);
    // Off this runtime, which must go on to close the connections: one left
    // open would hold the socket API until the shutdown deadline.
    drop((client, echo_client, raw));
    let status = tokio::task::spawn_blocking(move || s.sigterm()).await.unwrap();
    assert!(status.success(), "serve exited with {status}");
}

/// The baselines, each run as another process of this executable.
mod baselines {
    use std::path::PathBuf;
    use std::sync::Arc;

    use axum::Router;
    use axum::body::Bytes;
    use axum::http::StatusCode;
    use axum::routing::post;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto;
    use hyper_util::service::TowerToHyperService;
    use prost::Message;
    use runtime::proto::attribution_server::{Attribution, AttributionServer};
    use runtime::proto::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tonic::{Request, Response, Status, Streaming};

    fn env(key: &str) -> PathBuf {
        PathBuf::from(std::env::var_os(key).unwrap_or_else(|| panic!("{key} is not set")))
    }

    pub fn run(role: &str) {
        // The sidecar's own runtime settings for the same work: its receiver
        // runs on the shared multi-threaded runtime (`reverser-sidecar`'s
        // main), its socket API on a current-thread runtime of its own
        // (`Tasks::spawn_on_own_thread`).
        let multi = || tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        let own = || tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        match role {
            "parse" => multi().block_on(parse_only(env("CERTS"))),
            "echo" => own().block_on(echo(env("SOCKETS"), env("RESPONSE"))),
            "raw" => own().block_on(raw(env("SOCKETS"))),
            other => panic!("unknown role {other}"),
        }
    }

    /// An mTLS server (the same certificates, client certificate required)
    /// whose only work is parsing the body as JSON.
    async fn parse_only(certs: PathBuf) {
        let pem = |name: &str| std::fs::read(certs.join(name)).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls_pemfile::certs(&mut pem("ca.pem").as_slice()) {
            roots.add(c.unwrap()).unwrap();
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .unwrap();
        let chain = rustls_pemfile::certs(&mut pem("server.pem").as_slice()).collect::<Result<Vec<_>, _>>().unwrap();
        let key = rustls_pemfile::private_key(&mut pem("server-key.pem").as_slice()).unwrap().unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let app = Router::new().route(
            "/audit-webhook/{route}",
            post(|body: Bytes| async move {
                match serde_json::from_slice::<serde_json::Value>(&body) {
                    Ok(v) => (StatusCode::OK, format!("{}\n", v["items"].as_array().map_or(0, Vec::len))),
                    Err(e) => (StatusCode::BAD_REQUEST, e.to_string()),
                }
            }),
        );
        let app = app.layer(axum::extract::DefaultBodyLimit::max(16 << 20));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("{}", listener.local_addr().unwrap().port());
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), TowerToHyperService::new(app))
                    .await;
            });
        }
    }

    /// Answers every `Resolve` with the same response.
    struct Echo(ResolveResponse);

    #[tonic::async_trait]
    impl Attribution for Echo {
        async fn resolve(&self, req: Request<ResolveRequest>) -> Result<Response<ResolveResponse>, Status> {
            drop(req.into_inner());
            Ok(Response::new(self.0.clone()))
        }
        async fn explain(&self, _: Request<ExplainRequest>) -> Result<Response<ExplainResponse>, Status> {
            Err(Status::unimplemented("echo"))
        }
        async fn commit(&self, _: Request<CommitRequest>) -> Result<Response<CommitResponse>, Status> {
            Err(Status::unimplemented("echo"))
        }
        async fn reconcile(&self, _: Request<Streaming<ReconcileChunk>>) -> Result<Response<CommitResponse>, Status> {
            Err(Status::unimplemented("echo"))
        }
        async fn acquire(&self, _: Request<FollowRequest>) -> Result<Response<FollowResponse>, Status> {
            Err(Status::unimplemented("echo"))
        }
        async fn release(&self, _: Request<FollowRequest>) -> Result<Response<FollowResponse>, Status> {
            Err(Status::unimplemented("echo"))
        }
    }

    /// A tonic unary echo on `grpc.sock`.
    async fn echo(dir: PathBuf, response: PathBuf) {
        let canned = ResolveResponse::decode(std::fs::read(response).unwrap().as_slice()).unwrap();
        let grpc = tokio::net::UnixListener::bind(dir.join("grpc.sock")).unwrap();
        println!("ready");
        tonic::transport::Server::builder()
            .add_service(AttributionServer::new(Echo(canned)))
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(grpc))
            .await
            .unwrap();
    }

    /// A raw echo of whatever arrives on `raw.sock`.
    async fn raw(dir: PathBuf) {
        let raw = tokio::net::UnixListener::bind(dir.join("raw.sock")).unwrap();
        println!("ready");
        loop {
            let (mut sock, _) = raw.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                loop {
                    let Ok(k) = sock.read(&mut buf).await else { return };
                    if k == 0 || sock.write_all(&buf[..k]).await.is_err() {
                        return;
                    }
                }
            });
        }
    }
}
