//! Reliability through the real binary (issue 18): a retried batch never
//! changes an author, nothing acknowledged is lost, bad input costs nothing.
//! Real redis-server, real mTLS, the real socket API.

mod support;

use std::time::{Duration, Instant};

use runtime::proto::{ResolveRequest, ResolveResponse};
use support::*;
use testkit::RedisServer;

/// Like `Sidecar::start`, with the process's log (stderr, at `info`) kept
/// in a file the test reads.
fn start_logging(mode: &str, extra: &[&str]) -> (Sidecar, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (audit_port, metrics_port) = (testkit::free_port().unwrap(), testkit::free_port().unwrap());
    let (socket, certs, log) = (dir.path().join("reverser.sock"), dir.path().join("certs"), dir.path().join("log"));
    let mut cmd = std::process::Command::new(BIN);
    cmd.arg(mode)
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
        .args(["--audit-listen", &format!("127.0.0.1:{audit_port}")])
        .arg("--dev-certs-dir")
        .arg(&certs);
    if mode == "serve" {
        cmd.arg("--socket").arg(&socket);
    }
    let child = cmd
        .args(extra)
        .env("REVERSER_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let s = Sidecar { child: Some(child), dir, socket, audit_port, metrics_port, certs };
    eventually("the sidecar to listen", || {
        std::net::TcpStream::connect(("127.0.0.1", s.metrics_port)).is_ok() && (mode != "serve" || s.socket.exists())
    });
    (s, log)
}

/// A `receive` on `url`, and a `serve` following `lab:configmaps` from the
/// same Redis (extra flags appended), sharing the receiver's certificates.
fn receive_and_follow(url: &str, receive_extra: &[&str], serve_extra: &[&str]) -> (Sidecar, Sidecar) {
    let receiver = Sidecar::start("receive", &[&["--redis-url", url][..], receive_extra].concat());
    let follower = Sidecar::start_sharing_certs(
        "serve",
        &[&["--redis-url", url, "--audit-listen", "off", "--follow", "lab:configmaps"][..], serve_extra].concat(),
        Some(&receiver.certs),
    );
    (receiver, follower)
}

fn stamped(verb: &str, user: &str, name: &str, uid: &str, rv: &str, micros: u32) -> serde_json::Value {
    let mut e = audit_event(verb, user, "ns", name, uid, rv);
    e["stageTimestamp"] = format!("2026-11-29T12:00:00.{micros:06}Z").into();
    e
}

async fn resolve_on(s: &Sidecar, event_type: &str, object: Vec<u8>) -> ResolveResponse {
    s.client()
        .await
        .resolve(ResolveRequest { r#type: configmaps("lab"), event_type: event_type.into(), object_json: object })
        .await
        .unwrap()
        .into_inner()
}

/// Polls until `f` holds (the follower reads within one block period).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// alice writes rv 5, bob rv 6, alice's batch is posted again (the API
/// server retries any non-2xx): the removal that follows, with no delete
/// evidence, falls back to bob.
fn post_the_retried_history(receiver: &Sidecar) {
    let alice = event_list(vec![stamped("update", "alice", "cm", "u-1", "5", 1)]);
    let bob = event_list(vec![stamped("update", "bob", "cm", "u-1", "6", 2)]);
    for batch in [&alice, &bob, &alice] {
        let (code, body) = receiver.post("/audit-webhook/lab", batch);
        assert_eq!(code, 200, "{body}");
    }
}

async fn the_removal_falls_back_to_the_last_writer(api: &Sidecar) {
    // Both facts held, the duplicate not: only then is the answer decided.
    eventually("the facts to be followed", || {
        api.metrics().contains("gitopsreverser_attribution_fact_index_entries 2")
    });
    let r = resolve_on(api, "DELETED", watch_object("ns", "cm", "u-1", "7", false)).await;
    assert_eq!((r.action.as_str(), r.tier.as_str(), r.author.as_str()), ("delete", "latest", "bob"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_a_retried_batch_never_changes_the_author_of_a_removal() {
    let s = Sidecar::start("serve", &["--author-attribution-grace", "500ms", "--follow", "lab:configmaps"]);
    post_the_retried_history(&s);
    the_removal_falls_back_to_the_last_writer(&s).await;
    assert!(s.metrics().contains("gitopsreverser_attribution_fact_duplicates_total 1"), "{}", s.metrics());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_a_retried_batch_never_changes_the_author_of_a_removal_even_after_a_rewarm() {
    let redis = RedisServer::start().expect("redis-server must be installed");
    let url = redis.url();
    let receiver = Sidecar::start("receive", &["--redis-url", &url]);
    let follower = |certs| {
        Sidecar::start_sharing_certs(
            "serve",
            &[
                "--redis-url",
                &url,
                "--audit-listen",
                "off",
                "--follow",
                "lab:configmaps",
                "--author-attribution-grace",
                "500ms",
            ],
            certs,
        )
    };
    let first = follower(Some(&receiver.certs));
    post_the_retried_history(&receiver);
    the_removal_falls_back_to_the_last_writer(&first).await;
    // A process started afterwards re-warms from the stream, duplicate included.
    let second = follower(Some(&receiver.certs));
    eventually("the re-warm", || http_get(second.metrics_port, "/readyz").starts_with("HTTP/1.1 200"));
    the_removal_falls_back_to_the_last_writer(&second).await;
}

/// Redis stalls past the receiver's timeout: the POST is answered 503
/// although Redis appended it when it woke; the API server's retry is
/// answered 200 and stores nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_answered_503_after_storing_is_stored_once_on_retry() {
    let redis = RedisServer::start_with(&["--enable-debug-command", "yes"], None).unwrap();
    let url = redis.url();
    let (receiver, follower) = receive_and_follow(&url, &["--redis-timeout", "300ms"], &[]);
    let warm = event_list(vec![stamped("create", "alice", "warm", "u-w", "1", 1)]);
    assert_eq!(receiver.post("/audit-webhook/lab", &warm).0, 200);
    let port = redis.port().to_string();
    let stall = std::thread::spawn(move || {
        std::process::Command::new("redis-cli").args(["-p", &port, "DEBUG", "SLEEP", "1.5"]).output().unwrap()
    });
    std::thread::sleep(Duration::from_millis(200));
    let batch = event_list(vec![stamped("update", "bob", "cm", "u-1", "6", 2)]);
    let (code, body) = receiver.post("/audit-webhook/lab", &batch);
    assert_eq!(code, 503, "{body}");
    assert!(stall.join().unwrap().status.success());
    let stream = "gitops-reverser:author:v2:audit:route:lab:configmaps";
    assert_eq!(redis.cli(&["XLEN", stream]).unwrap().trim(), "2", "Redis appended the batch it answered 503 for");
    let (code, body) = receiver.post("/audit-webhook/lab", &batch);
    assert_eq!(code, 200, "{body}");
    assert_eq!(redis.cli(&["XLEN", stream]).unwrap().trim(), "2", "the retry is not stored again");
    let r = resolve_on(&follower, "MODIFIED", watch_object("ns", "cm", "u-1", "6", false)).await;
    assert_eq!((r.tier.as_str(), r.author.as_str()), ("exact", "bob"));
}

fn readyz(port: u16) -> String {
    http_get(port, "/readyz")
}

/// Redis restarts (no persistence): while it is down the receiver reports
/// not ready; once it is back the first POST is stored (no 503 from a dead
/// connection) and its fact resolves within the grace, not `absent`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_redis_restart_the_first_post_is_stored_and_resolves_within_the_grace() {
    let mut redis = RedisServer::start().unwrap();
    let url = redis.url();
    let (receiver, follower) = receive_and_follow(&url, &[], &[]);
    eventually("the receiver to be ready", || readyz(receiver.metrics_port).starts_with("HTTP/1.1 200"));
    let before = event_list(vec![stamped("create", "alice", "before", "u-b", "1", 1)]);
    assert_eq!(receiver.post("/audit-webhook/lab", &before).0, 200);
    let r = resolve_on(&follower, "ADDED", watch_object("ns", "before", "u-b", "1", false)).await;
    assert_eq!(r.tier, "exact");

    redis.kill();
    eventually("the receiver to report Redis down", || readyz(receiver.metrics_port).contains("Redis does not answer"));
    eventually("the follower to report Redis down", || readyz(follower.metrics_port).starts_with("HTTP/1.1 503"));
    // Long enough for a doubling retry pause to have grown past the grace.
    std::thread::sleep(Duration::from_secs(4));
    redis.restart().unwrap();

    let after = event_list(vec![stamped("create", "bob", "after", "u-a", "2", 2)]);
    let (code, body) = receiver.post("/audit-webhook/lab", &after);
    assert_eq!(code, 200, "the first post after the restart: {body}");
    let r = resolve_on(&follower, "ADDED", watch_object("ns", "after", "u-a", "2", false)).await;
    assert_eq!((r.tier.as_str(), r.author.as_str()), ("exact", "bob"), "waited {} ms", r.waited_ms);
    eventually("the receiver to be ready again", || readyz(receiver.metrics_port).starts_with("HTTP/1.1 200"));
    eventually("the follower to be ready again", || readyz(follower.metrics_port).starts_with("HTTP/1.1 200"));
}

/// Issue 29: an event no API server would send (no user) was answered
/// `rejected: 1` with no reason and never logged. The reply now says why
/// per reason, and the log says it, once a minute at most.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_that_make_no_fact_say_why_in_the_reply_and_once_in_the_log() {
    let (s, log) = start_logging("serve", &[]);
    let mut nobody = stamped("update", "x", "a", "u-a", "2", 2);
    nobody["user"] = serde_json::json!({});
    let read = stamped("get", "alice", "b", "u-b", "2", 2);
    for _ in 0..3 {
        let (code, text) = s.post("/audit-webhook/lab", &event_list(vec![nobody.clone(), read.clone()]));
        assert_eq!(
            (code, text.trim()),
            (200, r#"{"events":2,"facts":0,"rejected":2,"reasons":{"no_user":1,"verb":1}}"#)
        );
    }
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_eq!(logged.matches("audit events make no fact: no user.username").count(), 1, "{logged}");
    assert!(!logged.contains("reason=verb"), "a read is what a broad audit policy sends, not a fault:\n{logged}");
}

/// One undecodable event costs only itself: the rest of its batch is
/// stored, the refused one is counted and logged with its auditID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_event_never_costs_its_batch() {
    let (s, log) = start_logging("serve", &["--follow", "lab:configmaps"]);
    let mut typed = stamped("update", "mallory", "typed", "u-t", "3", 3);
    typed["auditID"] = "refused-1".into();
    typed["impersonatedUser"] = "not an object".into();
    // A spec nested 200 levels deep, past what a whole-body parse accepts
    // (written as text: serde_json could not build it as a Value).
    let mut deep = stamped("update", "bob", "deep", "u-d", "4", 4);
    deep["requestObject"] = serde_json::json!({"metadata": {"name": "deep"}, "spec": "SPEC"});
    let deep =
        serde_json::to_string(&deep).unwrap().replace("\"SPEC\"", &format!("{}1{}", "[".repeat(200), "]".repeat(200)));
    let good = serde_json::to_string(&stamped("update", "alice", "good", "u-g", "2", 2)).unwrap();
    let body = format!(r#"{{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{good},{typed},{deep}]}}"#);
    assert!(serde_json::from_str::<serde_json::Value>(&body).is_err(), "the body nests past serde_json's limit");
    let (code, text) = s.post("/audit-webhook/lab", body.as_bytes());
    assert_eq!((code, text.trim()), (200, r#"{"events":3,"facts":2,"rejected":1,"reasons":{"undecodable":1}}"#));
    let r = resolve_on(&s, "MODIFIED", watch_object("ns", "good", "u-g", "2", false)).await;
    assert_eq!((r.tier.as_str(), r.author.as_str()), ("exact", "alice"));
    let r = resolve_on(&s, "MODIFIED", watch_object("ns", "deep", "u-d", "4", false)).await;
    assert_eq!((r.tier.as_str(), r.author.as_str()), ("exact", "bob"));
    assert!(s.metrics().contains(r#"gitopsreverser_audit_events_total{group="",resource="configmaps",verb="update",result="rejected",reason="undecodable"} 1"#), "{}", s.metrics());
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("audit event refused") && logged.contains("refused-1"), "{logged}");
    // A body that is no EventList is still a 400.
    assert_eq!(s.post("/audit-webhook/lab", b"[1,2]").0, 400);
}

/// A mutual-TLS connection to the receiver with the development client
/// certificate, speaking `alpn`.
async fn tls_connect(s: &Sidecar, alpn: &[u8]) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let pem = |name: &str| std::fs::read(s.certs.join(name)).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut pem("ca.pem").as_slice()) {
        roots.add(c.unwrap()).unwrap();
    }
    let chain = rustls_pemfile::certs(&mut pem("client.pem").as_slice()).collect::<Result<Vec<_>, _>>().unwrap();
    let key = rustls_pemfile::private_key(&mut pem("client-key.pem").as_slice()).unwrap().unwrap();
    let mut config =
        rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .unwrap();
    config.alpn_protocols = vec![alpn.to_vec()];
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", s.audit_port)).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)).connect(name, tcp).await.unwrap()
}

/// Reads until the server closes; returns what it sent, or panics when it
/// holds the connection past `within`.
async fn until_closed(conn: &mut (impl tokio::io::AsyncRead + Unpin), within: Duration) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(within, read).await.expect("the server still holds the connection");
    out
}

/// After the TLS handshake a client gets `--audit-header-timeout` for its
/// request head (HTTP/1 and HTTP/2) and `--audit-body-timeout` for its body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_hold_no_connection_past_the_timeouts() {
    use tokio::io::AsyncWriteExt;
    let s = Sidecar::start("serve", &["--audit-header-timeout", "1s", "--audit-body-timeout", "1s"]);
    let limit = Duration::from_secs(4);

    // HTTP/1: a request head that never ends.
    let mut c = tls_connect(&s, b"http/1.1").await;
    c.write_all(b"POST /audit-webhook/lab HTTP/1.1\r\nHost: localhost\r\n").await.unwrap();
    let start = Instant::now();
    until_closed(&mut c, limit).await;
    assert!(start.elapsed() >= Duration::from_millis(500), "closed too early: {:?}", start.elapsed());

    // HTTP/1: a body that never ends: 408.
    let mut c = tls_connect(&s, b"http/1.1").await;
    c.write_all(b"POST /audit-webhook/lab HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"items\":[").await.unwrap();
    let answer = String::from_utf8_lossy(&until_closed(&mut c, limit).await).to_string();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("--audit-body-timeout"), "{answer}");

    // HTTP/2: the connection preface and settings, then no request at all.
    let mut c = tls_connect(&s, b"h2").await;
    c.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00").await.unwrap();
    until_closed(&mut c, limit).await;

    // A client that sends its batch is served as ever.
    let batch = event_list(vec![stamped("create", "alice", "cm", "u-1", "1", 1)]);
    assert_eq!(s.post("/audit-webhook/lab", &batch).0, 200);
}

/// Only a stale socket is replaced: a regular file, a directory or a
/// symbolic link at `--socket` is refused with a clear error and left alone.
#[test]
fn anything_but_a_stale_socket_at_the_socket_path_is_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("precious.txt");
    std::fs::write(&file, "keep me").unwrap();
    let sub = dir.path().join("a-dir");
    std::fs::create_dir(&sub).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    for (path, what) in [(&file, "a regular file"), (&sub, "a directory"), (&link, "a symbolic link")] {
        let out = std::process::Command::new(BIN)
            .args(["serve", "--audit-listen", "off", "--metrics-listen", "127.0.0.1:0", "--socket"])
            .arg(path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains(&format!("it is {what}, which the sidecar never replaces")), "{stderr}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    assert!(sub.is_dir() && link.is_symlink());
}

/// Development certificates are 0700/0600 whatever the umask, and a set
/// that others may write (a CA dropped in would be trusted) is refused.
#[test]
fn dev_certificates_ignore_the_umask_and_a_writable_set_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let metrics = testkit::free_port().unwrap();
    let serve = |umask: &str| {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "umask {umask}; exec \"$0\" serve --audit-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:{metrics} --socket \"$1\" --dev-certs-dir \"$2\""
            ))
            .arg(BIN)
            .arg(dir.path().join("s.sock"))
            .arg(&certs)
            .env("REVERSER_LOG", "warn")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut child = serve("000");
    eventually("the sidecar to listen", || std::net::TcpStream::connect(("127.0.0.1", metrics)).is_ok());
    child.kill().unwrap();
    child.wait().unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&certs), 0o700);
    for f in ["ca.pem", "server.pem", "server-key.pem", "client.pem", "client-key.pem"] {
        assert_eq!(mode(&certs.join(f)), 0o600, "{f}");
    }

    std::fs::set_permissions(certs.join("ca.pem"), std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = serve("022").wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("ca.pem is writable by its group or by others (mode 666)"), "{stderr}");
    std::fs::set_permissions(certs.join("ca.pem"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(&certs, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = serve("022").wait_with_output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("(mode 777)"), "the directory too");
}

/// `object_json` that names no object is refused at once, not after the
/// grace with `absent`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_json_that_names_no_object_is_invalid_argument_at_once() {
    let s = Sidecar::start("serve", &[]);
    let mut c = s.client().await;
    for (event_type, object) in [
        ("MODIFIED", &b"null"[..]),
        ("MODIFIED", b"123"),
        ("DELETED", b"[]"),
        ("ADDED", b"{}"),
        ("ADDED", b""),
        ("MODIFIED", br#"{"metadata":{"name":""}}"#),
        ("MODIFIED", br#"{"metadata":"cm"}"#),
        ("MODIFIED", br#"{"data":{"k":"v"},"metadata":null}"#),
        // Not JSON past the metadata: refused though only metadata is read.
        ("MODIFIED", br#"{"metadata":{"name":"cm","uid":"u"},"data":{"k":"#),
    ] {
        let start = Instant::now();
        let status = c
            .resolve(ResolveRequest {
                r#type: configmaps("lab"),
                event_type: event_type.into(),
                object_json: object.to_vec(),
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{object:?}: {status}");
        assert!(start.elapsed() < Duration::from_secs(1), "{object:?} waited {:?}", start.elapsed());
    }
    // A BOOKMARK carries no object to name.
    let r = c
        .resolve(ResolveRequest {
            r#type: configmaps("lab"),
            event_type: "BOOKMARK".into(),
            object_json: b"{}".to_vec(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.action, "ignored");
}

fn rss_kib(s: &Sidecar) -> u64 {
    let pid = s.child.as_ref().unwrap().id();
    testkit::process::rss_kib(pid).expect("the sidecar's VmRSS in /proc")
}

/// Batches past `--audit-body-limit` are refused by their Content-Length
/// before a byte is read, and a body with no length is never buffered past
/// the limit: eight 48 MB posts at once (three times the 16 MiB limit)
/// leave the process about as small as it was.
#[test]
fn oversized_batches_cost_no_memory() {
    let s = Sidecar::start("serve", &[]);
    let big = s.dir.path().join("big.json");
    // Sparse: 48 MB that take no disk.
    std::fs::File::create(&big).unwrap().set_len(48 << 20).unwrap();
    let before = rss_kib(&s);
    let curl = |extra: &[&str]| {
        let mut c = std::process::Command::new("curl");
        c.args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", s.ca().to_str().unwrap()])
            .args(["--cert", s.certs.join("client.pem").to_str().unwrap()])
            .args(["--key", s.certs.join("client-key.pem").to_str().unwrap()])
            .args(["-H", "Content-Type: application/json"])
            .args(extra)
            .arg("--data-binary")
            .arg(format!("@{}", big.display()))
            .arg(format!("https://localhost:{}/audit-webhook/lab", s.audit_port))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        c.spawn().unwrap()
    };
    // HTTP/1.1 with a length: curl waits for 100 Continue, which never comes.
    let posts: Vec<_> = (0..8).map(|_| curl(&["--http1.1"])).collect();
    for p in posts {
        let out = p.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "413");
    }
    // HTTP/2, or no 100-continue: the head decides, the body is dropped
    // (the client may see its stream reset rather than the 413).
    let posts: Vec<_> =
        (0..8).map(|i| if i % 2 == 0 { curl(&[]) } else { curl(&["--http1.1", "-H", "Expect:"]) }).collect();
    for p in posts {
        let code = String::from_utf8_lossy(&p.wait_with_output().unwrap().stdout).to_string();
        assert!(code == "413" || code == "000", "{code}");
    }
    let after = rss_kib(&s);
    assert!(after < before + 16 * 1024, "resident grew from {before} KiB to {after} KiB");
    // No length (chunked): read up to the limit, then 413.
    let out = curl(&["-H", "Transfer-Encoding: chunked", "-H", "Expect:"]).wait_with_output().unwrap();
    let code = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(code == "413" || code == "000", "{code}");
    // And the receiver still serves.
    let batch = event_list(vec![stamped("create", "alice", "cm", "u-1", "1", 1)]);
    assert_eq!(s.post("/audit-webhook/lab", &batch).0, 200);
}

/// A Resolve makes the process follow the type it names; when no Resolve
/// names it again for a TTL the follow is released (junk routes stop
/// costing reads), while `--follow` types stay followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_nobody_uses_are_released_after_a_ttl() {
    let s = Sidecar::start(
        "serve",
        &["--author-attribution-ttl", "2s", "--author-attribution-grace", "100ms", "--follow", "kept:configmaps"],
    );
    let mut c = s.client().await;
    let following = |route: &'static str| {
        let socket = s.socket.clone();
        async move {
            let mut c = runtime::proto::attribution_client::AttributionClient::new(channel(&socket).await);
            c.explain(runtime::proto::ExplainRequest { r#type: configmaps(route), ..Default::default() })
                .await
                .unwrap()
                .into_inner()
                .following
        }
    };
    // Twenty junk routes, junk-0 asked about last.
    for i in (0..20).rev() {
        let mut t = configmaps("lab");
        t.as_mut().unwrap().route = format!("junk-{i}");
        c.resolve(ResolveRequest {
            r#type: t,
            event_type: "MODIFIED".into(),
            object_json: watch_object("ns", "x", "u", "1", false),
        })
        .await
        .unwrap();
    }
    let start = Instant::now();
    assert!(following("junk-0").await);
    while following("junk-0").await {
        assert!(start.elapsed() < Duration::from_secs(10), "still following a type nobody asked about");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(start.elapsed() >= Duration::from_millis(1500), "released before its TTL: {:?}", start.elapsed());
    assert!(!following("junk-19").await);
    assert!(following("kept").await, "--follow is not released");
}

/// On connecting, the sidecar reads Redis's persistence settings: with none
/// it warns and says so on /metrics; with AOF it says facts survive.
#[test]
fn redis_without_persistence_is_reported() {
    let redis = RedisServer::start().unwrap();
    let (s, log) = start_logging("receive", &["--redis-url", &redis.url()]);
    let none = r#"gitopsreverser_attribution_redis_persistence{mode="none"} 1"#;
    eventually("the persistence metric", || s.metrics().contains(none));
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("Redis has no persistence") && logged.contains("appendonly yes"), "{logged}");

    let dir = tempfile::tempdir().unwrap();
    let aof = RedisServer::start_with(&["--appendonly", "yes", "--dir", dir.path().to_str().unwrap()], None).unwrap();
    let (s, _log) = start_logging("receive", &["--redis-url", &aof.url()]);
    eventually("the persistence metric", || {
        s.metrics().contains(r#"gitopsreverser_attribution_redis_persistence{mode="aof"} 1"#)
    });
    assert!(s.metrics().contains(r#"gitopsreverser_attribution_redis_persistence{mode="none"} 0"#));
}

/// Facts evicted by the caps while their posts were acknowledged are
/// logged, not only counted.
#[test]
fn evictions_of_acknowledged_facts_are_logged() {
    let (s, log) = start_logging("serve", &["--author-attribution-max-facts", "2", "--follow", "lab:configmaps"]);
    let batch =
        event_list((0..5).map(|i| stamped("create", "alice", &format!("cm{i}"), &format!("u{i}"), "1", i)).collect());
    assert_eq!(s.post("/audit-webhook/lab", &batch).0, 200);
    eventually("the eviction to be counted", || {
        s.metrics().contains(r#"gitopsreverser_attribution_fact_index_evictions_total{reason="total"} 3"#)
    });
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("the fact index is full") && logged.contains("evicted=3"), "{logged}");
    // Rate-limited: a second batch within the minute adds no line.
    assert_eq!(s.post("/audit-webhook/lab", &event_list(vec![stamped("create", "bob", "x", "ux", "1", 9)])).0, 200);
    eventually("the next eviction", || {
        s.metrics().contains(r#"gitopsreverser_attribution_fact_index_evictions_total{reason="total"} 4"#)
    });
    assert_eq!(std::fs::read_to_string(&log).unwrap().matches("the fact index is full").count(), 1);
}

/// A name-only fact (Metadata level: no body, so no uid or rv), as the
/// documented policy audits Secrets and an aggregated API sends every write.
fn name_only(verb: &str, user: &str, name: &str, stamp: &str) -> serde_json::Value {
    let mut e = audit_event(verb, user, "ns", name, "", "");
    e["level"] = "Metadata".into();
    e["auditID"] = format!("audit-{verb}-{user}-{stamp}").into();
    e["stageTimestamp"] = format!("2026-11-29T12:00:{stamp}Z").into();
    e.as_object_mut().unwrap().remove("responseObject");
    e
}

/// A watched ConfigMap created at `12:00:<created>Z`.
fn created_object(name: &str, uid: &str, rv: &str, created: &str) -> Vec<u8> {
    let meta = serde_json::json!({"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv,
        "creationTimestamp": format!("2026-11-29T12:00:{created}Z")});
    serde_json::to_vec(&serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})).unwrap()
}

/// Resolves `object` while `lagging` (the change's own fact, still in its
/// audit batch) is posted 300 ms later.
async fn resolve_with_lagging_fact(
    s: &Sidecar,
    event_type: &str,
    object: Vec<u8>,
    lagging: Option<serde_json::Value>,
) -> ResolveResponse {
    let mut client = s.client().await;
    let req = ResolveRequest { r#type: configmaps("lab"), event_type: event_type.into(), object_json: object };
    let resolving = tokio::spawn(async move { client.resolve(req).await.unwrap().into_inner() });
    if let Some(fact) = lagging {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (code, body) = tokio::task::block_in_place(|| s.post("/audit-webhook/lab", &event_list(vec![fact])));
        assert_eq!(code, 200, "{body}");
    }
    resolving.await.unwrap()
}

/// Issue 30 (probe scenario 8, R8/R6/R2/R3): a weak tier never names the
/// actor of an earlier change while this change's own fact is in its batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weak_tier_never_names_an_earlier_actor() {
    let s = Sidecar::start("serve", &["--author-attribution-grace", "2s", "--follow", "lab:configmaps"]);
    let post = |e: serde_json::Value| assert_eq!(s.post("/audit-webhook/lab", &event_list(vec![e])).0, 200);

    // R8: mallory's Metadata-level edit attributed v10; alice's edit of v11 lags.
    post(name_only("update", "mallory", "secret", "01.0"));
    eventually("the fact to be filed", || s.metrics().contains("gitopsreverser_attribution_fact_index_entries 1"));
    let v10 = resolve_on(&s, "MODIFIED", created_object("secret", "u-s", "10", "00")).await;
    assert_eq!((v10.tier.as_str(), v10.author.as_str()), ("name", "mallory"));
    let v11 = resolve_with_lagging_fact(
        &s,
        "MODIFIED",
        created_object("secret", "u-s", "11", "00"),
        Some(name_only("update", "alice", "secret", "05.0")),
    )
    .await;
    assert_eq!((v11.tier.as_str(), v11.author.as_str()), ("name", "alice"), "{v11:?}");
    assert!(v11.waited_ms >= 250, "it waited for alice's fact: {v11:?}");

    // R2: a body-less delete by mallory, a recreate, alice's delete lagging.
    post(name_only("delete", "mallory", "re", "01.0"));
    let gone = resolve_with_lagging_fact(
        &s,
        "DELETED",
        created_object("re", "u-re2", "20", "03"),
        Some(name_only("delete", "alice", "re", "09.0")),
    )
    .await;
    assert_eq!((gone.tier.as_str(), gone.author.as_str()), ("name", "alice"), "{gone:?}");

    // R3: a body-less deletecollection names nobody created after it; with
    // only that fact present the grace ends absent.
    let mut coll = audit_event("deletecollection", "mallory", "ns", "", "", "");
    coll["requestURI"] = "/api/v1/namespaces/ns/configmaps".into();
    coll["stageTimestamp"] = "2026-11-29T12:00:01.000000Z".into();
    coll.as_object_mut().unwrap().remove("responseObject");
    post(coll);
    let young = resolve_with_lagging_fact(&s, "DELETED", created_object("young", "u-y", "30", "04"), None).await;
    assert_eq!((young.tier.as_str(), young.author.as_str()), ("absent", ""), "{young:?}");
    assert!(young.waited_ms >= 1900, "it waited the grace: {young:?}");
    // An object older than the request is covered by it, as before.
    let old = resolve_on(&s, "DELETED", created_object("old", "u-o", "31", "00")).await;
    assert_eq!((old.tier.as_str(), old.author.as_str()), ("deletecollection_scope", "mallory"));
}

fn redis_pid(redis: &RedisServer) -> String {
    let info = redis.cli(&["INFO", "server"]).unwrap();
    info.lines().find_map(|l| l.strip_prefix("process_id:")).expect("INFO names the pid").trim().to_owned()
}

fn signal(pid: &str, sig: &str) {
    assert!(std::process::Command::new("kill").args([sig, pid]).status().unwrap().success());
}

/// Issue 30 (5): Redis's `maxmemory-policy` is read at start and on every
/// reconnect; an evicting one is refused (503, not ready, counted) unless
/// `--allow-evicting-redis`, which is then shown on /readyz and /metrics.
#[test]
fn an_evicting_redis_is_refused_unless_allowed() {
    let redis = RedisServer::start().unwrap();
    redis.cli(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]).unwrap();
    let batch = event_list(vec![stamped("update", "alice", "cm", "u-1", "5", 1)]);
    let (s, log) = start_logging("receive", &["--redis-url", &redis.url()]);
    let gauge = r#"gitopsreverser_attribution_redis_evicting_policy{policy="allkeys-lru"} 1"#;
    eventually("the policy to be read", || s.metrics().contains(gauge));
    let (code, body) = s.post("/audit-webhook/lab", &batch);
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("maxmemory-policy allkeys-lru") && body.contains("--allow-evicting-redis"), "{body}");
    let ready = readyz(s.metrics_port);
    assert!(ready.starts_with("HTTP/1.1 503") && ready.contains("maxmemory-policy allkeys-lru"), "{ready}");
    assert!(s.metrics().contains("gitopsreverser_attribution_redis_evicting_refusals_total 1"), "{}", s.metrics());
    assert!(std::fs::read_to_string(&log).unwrap().contains("evicts keys"));
    drop(s);

    let allowed = Sidecar::start("receive", &["--redis-url", &redis.url(), "--allow-evicting-redis"]);
    eventually("the policy to be read", || allowed.metrics().contains(gauge));
    assert_eq!(allowed.post("/audit-webhook/lab", &batch).0, 200);
    let ready = readyz(allowed.metrics_port);
    assert!(
        ready.starts_with("HTTP/1.1 200") && ready.contains("warning: Redis maxmemory-policy allkeys-lru"),
        "{ready}"
    );
    drop(allowed);

    // Turned evicting while running: noticed on the next reconnect.
    redis.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]).unwrap();
    let s = Sidecar::start("receive", &["--redis-url", &redis.url()]);
    eventually("Redis to answer", || s.post("/audit-webhook/lab", &batch).0 == 200);
    redis.cli(&["CONFIG", "SET", "maxmemory-policy", "volatile-lru"]).unwrap();
    redis.cli(&["CLIENT", "KILL", "TYPE", "normal"]).unwrap();
    eventually("the new policy to be read", || {
        s.metrics().contains(r#"gitopsreverser_attribution_redis_evicting_policy{policy="volatile-lru"} 1"#)
    });
    assert_eq!(s.post("/audit-webhook/lab", &batch).0, 503);
}

/// Issue 30 (7): `--redis-timeout` bounds every append of a stall, not
/// only the first (a reconnect's handshake waited a fixed 5 s).
#[test]
fn every_append_of_a_stall_is_bounded_by_the_redis_timeout() {
    let redis = RedisServer::start().unwrap();
    let s = Sidecar::start("receive", &["--redis-url", &redis.url(), "--redis-timeout", "500ms"]);
    let batch = |i: u32| event_list(vec![stamped("update", "alice", "cm", "u-1", &format!("{i}"), i)]);
    eventually("Redis to answer", || s.post("/audit-webhook/lab", &batch(1)).0 == 200);
    let pid = redis_pid(&redis);
    signal(&pid, "-STOP");
    let mut took = Vec::new();
    for i in 2..5 {
        let start = Instant::now();
        let (code, _) = s.post("/audit-webhook/lab", &batch(i));
        took.push((code, start.elapsed()));
    }
    signal(&pid, "-CONT");
    for (code, t) in &took {
        assert_eq!(*code, 503, "{took:?}");
        assert!(*t < Duration::from_millis(1_800), "an append outlasted --redis-timeout 500ms: {took:?}");
    }
}

/// Issue 30 (6): the no-flags default (the memory transport) says in its
/// startup log that a restart loses every acknowledged fact.
#[test]
fn the_memory_transport_says_a_restart_loses_its_facts() {
    let (s, log) = start_logging("serve", &[]);
    eventually("the startup log", || std::fs::read_to_string(&log).unwrap().contains("reverser-sidecar serving"));
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("memory transport") && logged.contains("a restart or kill loses every one of them"),
        "{logged}"
    );
    drop(s);
}
