//! End to end, through the real binary: mTLS audit receiver, the Unix-socket
//! API (Resolve, Explain, health), no head-of-line blocking, bad input, and
//! SIGTERM; once on the memory transport in one process, once on a real
//! redis-server with the receiver and the follower in two processes.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use runtime::proto::{ExplainRequest, ResolveRequest};
use support::*;
use testkit::RedisServer;

/// Where facts are posted, and where they are resolved.
struct Deployment {
    receiver: Sidecar,
    /// `None`: the receiver's own process serves the socket (memory).
    follower: Option<Sidecar>,
    _redis: Option<RedisServer>,
}

impl Deployment {
    fn memory() -> Self {
        Deployment { receiver: Sidecar::start("serve", &[]), follower: None, _redis: None }
    }

    fn redis() -> Self {
        let redis = RedisServer::start().expect("redis-server must be installed (apt-get install redis-server)");
        let url = redis.url();
        let receiver = Sidecar::start("receive", &["--redis-url", &url]);
        let follower = Sidecar::start_sharing_certs(
            "serve",
            &["--redis-url", &url, "--audit-listen", "off", "--follow", "lab:configmaps"],
            Some(&receiver.certs),
        );
        Deployment { receiver, follower: Some(follower), _redis: Some(redis) }
    }

    fn api(&self) -> &Sidecar {
        self.follower.as_ref().unwrap_or(&self.receiver)
    }
}

async fn resolve(d: &Deployment, event_type: &str, object: Vec<u8>) -> runtime::proto::ResolveResponse {
    let mut c = d.api().client().await;
    c.resolve(ResolveRequest { r#type: configmaps("lab"), event_type: event_type.into(), object_json: object })
        .await
        .unwrap()
        .into_inner()
}

async fn posted_event_list_resolves_and_explains(d: Deployment) {
    let batch = event_list(vec![
        audit_event("create", "alice", "ns", "cm", "u-1", "10"),
        // A removal and the finalizer clearing that follows it, under one rv.
        audit_event("delete", "carol", "ns", "gone", "u-2", "20"),
        audit_event("patch", "system:serviceaccount:kube-system:cleaner", "ns", "gone", "u-2", "20"),
    ]);
    let (code, body) = d.receiver.post("/audit-webhook/lab", &batch);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"facts\":3"), "{body}");

    let r = resolve(&d, "ADDED", watch_object("ns", "cm", "u-1", "10", false)).await;
    assert_eq!(
        (r.action.as_str(), r.tier.as_str(), r.author.as_str(), r.actor_kind.as_str()),
        ("write", "exact", "alice", "user")
    );
    assert_eq!(r.fact.unwrap().audit_id, "audit-create-cm-10");

    let r = resolve(&d, "MODIFIED", watch_object("ns", "gone", "u-2", "20", true)).await;
    assert_eq!((r.action.as_str(), r.tier.as_str(), r.author.as_str()), ("delete", "delete_sticky", "carol"));
    // The eventual DELETED is runtime cleanup.
    let r = resolve(&d, "DELETED", watch_object("ns", "gone", "u-2", "21", true)).await;
    assert_eq!((r.action.as_str(), r.tier.as_str()), ("noop", ""));

    // Explain shows the competing facts and why the cleaner's loses.
    let mut c = d.api().client().await;
    let e = c
        .explain(ExplainRequest {
            r#type: configmaps("lab"),
            namespace: "ns".into(),
            name: "gone".into(),
            uid: "u-2".into(),
            resource_version: "20".into(),
            removal: true,
            labels: Default::default(),
            follow: false,
            creation_timestamp: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(e.winner_tier, "delete_sticky");
    let authors: Vec<(String, String, bool)> =
        e.candidates.iter().map(|c| (c.tier.clone(), c.fact.as_ref().unwrap().author.clone(), c.wins)).collect();
    assert!(authors.contains(&("delete_sticky".into(), "carol".into(), true)), "{authors:?}");
    assert!(
        authors.contains(&("exact".into(), "system:serviceaccount:kube-system:cleaner".into(), false)),
        "{authors:?}"
    );
    assert!(e.following, "the type is followed");

    // The standard health service answers SERVING.
    let mut h = tonic_health::pb::health_client::HealthClient::new(channel(&d.api().socket).await);
    let s = h.check(tonic_health::pb::HealthCheckRequest { service: "reverser.v1.Attribution".into() }).await.unwrap();
    assert_eq!(s.into_inner().status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);
}

/// One removal waiting out a 3 s grace and 100 writes whose facts are
/// present, sent together: every write returns without waiting for it.
async fn no_head_of_line_blocking(d: Deployment) {
    let items =
        (0..100).map(|i| audit_event("update", "alice", "hol", &format!("w{i}"), &format!("hw-{i}"), "5")).collect();
    assert_eq!(d.receiver.post("/audit-webhook/lab", &event_list(items)).0, 200);
    // Wait until the follower has the facts (redis: one block period).
    let probe = resolve(&d, "MODIFIED", watch_object("hol", "w99", "hw-99", "5", false)).await;
    assert_eq!(probe.tier, "exact");

    let d = Arc::new(d);
    let finished = Arc::new(AtomicUsize::new(0));
    let removal = {
        let (d, finished) = (d.clone(), finished.clone());
        tokio::spawn(async move {
            let r = resolve(&d, "DELETED", watch_object("hol", "nobody", "hw-none", "9", false)).await;
            (r, finished.fetch_add(1, Ordering::SeqCst))
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let writes: Vec<_> = (0..100)
        .map(|i| {
            let (d, finished) = (d.clone(), finished.clone());
            tokio::spawn(async move {
                let r = resolve(&d, "MODIFIED", watch_object("hol", &format!("w{i}"), &format!("hw-{i}"), "5", false))
                    .await;
                (r, finished.fetch_add(1, Ordering::SeqCst))
            })
        })
        .collect();
    for w in writes {
        let (r, order) = w.await.unwrap();
        assert_eq!((r.tier.as_str(), r.author.as_str()), ("exact", "alice"));
        assert!(r.waited_ms < 100, "a write waited {} ms", r.waited_ms);
        assert!(order < 100, "a write finished after the removal");
    }
    let (r, order) = removal.await.unwrap();
    assert_eq!((r.action.as_str(), r.tier.as_str(), order), ("delete", "absent", 100));
    assert!(r.waited_ms >= 2900, "the removal waited out its grace: {} ms", r.waited_ms);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_resolve_explain_health() {
    posted_event_list_resolves_and_explains(Deployment::memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_two_processes_resolve_explain_health() {
    posted_event_list_resolves_and_explains(Deployment::redis()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_no_head_of_line_blocking() {
    no_head_of_line_blocking(Deployment::memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_no_head_of_line_blocking() {
    no_head_of_line_blocking(Deployment::redis()).await;
}

#[test]
fn mtls_refuses_clients_without_a_certificate_or_from_another_ca() {
    let s = Sidecar::start("serve", &[]);
    let batch = event_list(vec![audit_event("create", "alice", "ns", "cm", "u-1", "1")]);
    // No client certificate: the handshake fails, no HTTP status at all.
    assert_eq!(s.post_with("/audit-webhook/lab", &batch, &[]).0, 0);
    // A certificate from another CA.
    let other = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::new(vec!["intruder".to_string()]).unwrap();
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = p.self_signed(&key).unwrap();
    let issuer = rcgen::Issuer::new(p, key);
    let ck = rcgen::KeyPair::generate().unwrap();
    let client = rcgen::CertificateParams::new(vec!["intruder".to_string()]).unwrap().signed_by(&ck, &issuer).unwrap();
    std::fs::write(other.path().join("c.pem"), client.pem() + &ca_cert.pem()).unwrap();
    std::fs::write(other.path().join("k.pem"), ck.serialize_pem()).unwrap();
    let (c, k) = (other.path().join("c.pem"), other.path().join("k.pem"));
    let auth = ["--cert", c.to_str().unwrap(), "--key", k.to_str().unwrap()];
    assert_eq!(s.post_with("/audit-webhook/lab", &batch, &auth).0, 0);
    // The audit CA's client is accepted.
    assert_eq!(s.post("/audit-webhook/lab", &batch).0, 200);
    assert!(s.metrics().contains(
        r#"gitopsreverser_audit_events_total{group="",resource="configmaps",verb="create",result="fact",reason=""} 1"#
    ));
}

#[test]
fn receiver_answers_bad_requests_clearly() {
    let s = Sidecar::start("serve", &["--audit-body-limit", "4096"]);
    let (code, body) = s.post("/audit-webhook/lab", &vec![b' '; 10_000]);
    assert_eq!(code, 413, "{body}");
    assert!(body.contains("4096 byte limit"), "{body}");
    let (code, body) = s.post("/audit-webhook/lab", br#"{"kind":"EventList","items":[{"verb": "create""#);
    assert_eq!(code, 400);
    assert!(body.contains("malformed audit batch"), "{body}");
    let (code, body) = s.post("/audit-webhook", &event_list(vec![]));
    assert_eq!(code, 400, "no annotation key configured: {body}");
    assert!(body.contains("--author-attribution-audit-route-annotation-key"), "{body}");
    let out = std::process::Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", s.ca().to_str().unwrap()])
        .args([
            "--cert",
            s.certs.join("client.pem").to_str().unwrap(),
            "--key",
            s.certs.join("client-key.pem").to_str().unwrap(),
        ])
        .arg(format!("https://localhost:{}/audit-webhook/lab", s.audit_port))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "405");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotation_routed_bare_path_never_credits_a_fallback_route() {
    let s = Sidecar::start("serve", &["--author-attribution-audit-route-annotation-key", "example.com/route"]);
    let mut routed = audit_event("create", "alice", "ns", "a", "u-a", "1");
    routed["annotations"] = serde_json::json!({"example.com/route": "lab"});
    let unrouted = audit_event("create", "mallory", "ns", "b", "u-b", "1");
    let (code, body) = s.post("/audit-webhook", &event_list(vec![routed, unrouted]));
    assert_eq!(code, 200);
    assert!(body.contains("\"facts\":1") && body.contains("\"rejected\":1,\"reasons\":{\"no_route\":1}"), "{body}");
    let d = Deployment { receiver: s, follower: None, _redis: None };
    let r = resolve(&d, "ADDED", watch_object("ns", "a", "u-a", "1", false)).await;
    assert_eq!(r.author, "alice");
    assert!(d.receiver.metrics().contains(r#"reason="no_route"} 1"#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_zero_and_removes_the_socket() {
    let mut s = Sidecar::start("serve", &[]);
    // A resolution in flight returns its best answer at shutdown.
    let mut c = s.client().await;
    let pending = tokio::spawn(async move {
        c.resolve(ResolveRequest {
            r#type: configmaps("lab"),
            event_type: "DELETED".into(),
            object_json: watch_object("ns", "x", "u-x", "1", false),
        })
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = tokio::task::spawn_blocking(move || {
        let st = s.sigterm();
        (st, s.socket.exists())
    })
    .await
    .unwrap();
    assert!(status.0.success(), "exit status {:?}", status.0);
    assert!(!status.1, "the socket file is removed at shutdown");
    let r = pending.await.unwrap().expect("the in-flight resolution is answered").into_inner();
    assert_eq!((r.action.as_str(), r.tier.as_str()), ("delete", "absent"));
    assert!(r.waited_ms < 2500, "it did not wait out the grace: {}", r.waited_ms);
}

#[test]
fn a_stale_socket_file_is_replaced_and_a_live_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap()); // stale: nobody listens
    let s = Sidecar::start("serve", &["--socket", sock.to_str().unwrap()]);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777, 0o660);
    let out = std::process::Command::new(BIN)
        .args(["serve", "--audit-listen", "off", "--metrics-listen", "127.0.0.1:0", "--socket"])
        .arg(&sock)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use by a running process"));
    drop(s);
}

#[test]
fn memory_transport_is_refused_with_more_than_one_replica() {
    let out = std::process::Command::new(BIN).args(["serve", "--replica-count", "2"]).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("memory transport is refused"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Entries a running gitops-reverser writes (`redis-cli XADD <stream> *
/// facts <JSON array>`, the reference format) are followed and resolved,
/// with no receiver of ours involved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_format_entries_written_with_redis_cli_resolve() {
    let redis = RedisServer::start().expect("redis-server must be installed");
    let stream = "gitops-reverser:author:v2:audit:route:prod%3Aeu:apps/deployments";
    let facts = r#"[{"author":"system:serviceaccount:flux-system:kustomize-controller","namespace":"shop","name":"web","uid":"d-1","resourceVersion":"812","verb":"patch","auditID":"ref-1","stageTimestamp":"2026-11-29T12:00:00.123456Z"}]"#;
    redis.cli(&["XADD", stream, "*", "facts", facts]).unwrap();
    let s = Sidecar::start("serve", &["--redis-url", &redis.url(), "--audit-listen", "off"]);
    let mut c = s.client().await;
    let object = serde_json::to_vec(&serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "uid": "d-1", "resourceVersion": "812"}
    }))
    .unwrap();
    let r = c
        .resolve(ResolveRequest {
            r#type: Some(runtime::proto::TypeRef {
                route: "prod:eu".into(),
                group: "apps".into(),
                version: "v1".into(),
                resource: "deployments".into(),
            }),
            event_type: "MODIFIED".into(),
            object_json: object,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.tier.as_str(), r.author.as_str(), r.actor_kind.as_str()),
        ("exact", "system:serviceaccount:flux-system:kustomize-controller", "serviceaccount")
    );
    assert_eq!(r.fact.unwrap().audit_id, "ref-1");
}

/// `--author-attribution-adaptive-grace`, through the real binary: after two
/// misses with no fact of the type, the third event does not wait; Explain
/// and /metrics say so; the type's first fact restores the full grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adaptive_grace_stops_waiting_for_a_type_with_no_facts_and_a_fact_restores_it() {
    let d = Deployment {
        receiver: Sidecar::start(
            "serve",
            &[
                "--author-attribution-grace",
                "1s",
                "--author-attribution-adaptive-grace",
                "--author-attribution-adaptive-grace-misses",
                "2",
            ],
        ),
        follower: None,
        _redis: None,
    };
    for i in 0..2 {
        let r = resolve(&d, "ADDED", watch_object("ns", &format!("m{i}"), &format!("u-m{i}"), "1", false)).await;
        assert_eq!(r.tier, "absent");
        assert!(r.waited_ms >= 900, "miss {i} waited the full grace: {} ms", r.waited_ms);
    }
    let r = resolve(&d, "ADDED", watch_object("ns", "m2", "u-m2", "1", false)).await;
    assert_eq!(r.tier, "absent");
    assert!(r.waited_ms < 500, "the third miss did not wait: {} ms", r.waited_ms);

    let mut c = d.api().client().await;
    let explain = ExplainRequest {
        r#type: configmaps("lab"),
        namespace: "ns".into(),
        name: "m2".into(),
        uid: "u-m2".into(),
        resource_version: "1".into(),
        removal: false,
        labels: Default::default(),
        follow: false,
        creation_timestamp: String::new(),
    };
    let g = c.explain(explain.clone()).await.unwrap().into_inner().grace.expect("the grace state is explained");
    assert_eq!((g.misses_in_a_row, g.after_misses, g.skipping), (3, 2, true));
    let metrics = d.receiver.metrics();
    assert!(
        metrics.contains(
            r#"gitopsreverser_attribution_grace_skipped_total{group="",version="v1",resource="configmaps"} 1"#
        ),
        "{metrics}"
    );

    // The type's first fact restores the full grace.
    let (code, body) = d
        .receiver
        .post("/audit-webhook/lab", &event_list(vec![audit_event("create", "alice", "ns", "cm", "u-1", "10")]));
    assert_eq!(code, 200, "{body}");
    let g = c.explain(explain).await.unwrap().into_inner().grace.unwrap();
    assert_eq!((g.misses_in_a_row, g.skipping), (0, false));
    let r = resolve(&d, "ADDED", watch_object("ns", "late", "u-late", "1", false)).await;
    assert!(r.waited_ms >= 900, "the full grace is back: {} ms", r.waited_ms);
}

/// Clusters sharing one audit CA: `--audit-route-binding` binds a client
/// certificate's name (CN or subjectAltName) to the routes it may post to,
/// so one cluster's API server cannot post facts under another's route
/// (issue 30 item 12). Real TLS, real curl, certificates from a CA of the
/// test's own.
#[test]
fn a_client_certificate_bound_to_a_route_posts_only_there() {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name.push(DnType::CommonName, "shared audit CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let write = |name: &str, pem: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, pem).unwrap();
        p
    };
    let ca_pem = write("ca.pem", ca_cert.pem());
    let server_key = KeyPair::generate().unwrap();
    let mut server = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_pem = write("server.pem", server.signed_by(&server_key, &issuer).unwrap().pem());
    let server_key_pem = write("server-key.pem", server_key.serialize_pem());
    // cluster-a named by a subjectAltName, cluster-b by its CommonName only.
    let client = |file: &str, sans: Vec<String>, cn: &str| {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(sans).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = write(&format!("{file}.pem"), p.signed_by(&key, &issuer).unwrap().pem());
        (cert, write(&format!("{file}-key.pem"), key.serialize_pem()))
    };
    let a = client("a", vec!["cluster-a".into()], "kube-apiserver");
    let b = client("b", vec![], "cluster-b");
    let s = Sidecar::start(
        "serve",
        &[
            "--tls-cert",
            server_pem.to_str().unwrap(),
            "--tls-key",
            server_key_pem.to_str().unwrap(),
            "--audit-client-ca",
            ca_pem.to_str().unwrap(),
            "--audit-route-binding",
            "cluster-a=prod-a",
        ],
    );
    let batch = dir.path().join("batch.json");
    std::fs::write(&batch, event_list(vec![audit_event("create", "alice", "ns", "cm", "u-1", "1")])).unwrap();
    let post = |(cert, key): &(std::path::PathBuf, std::path::PathBuf), route: &str| {
        let out = std::process::Command::new("curl")
            .args(["-sS", "-o", "-", "-w", "\n%{http_code}", "--cacert", ca_pem.to_str().unwrap()])
            .args(["--cert", cert.to_str().unwrap(), "--key", key.to_str().unwrap()])
            .args(["-H", "Content-Type: application/json", "--data-binary"])
            .arg(format!("@{}", batch.display()))
            .arg(format!("https://localhost:{}/audit-webhook/{route}", s.audit_port))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse::<u16>().unwrap_or(0), body.to_owned())
    };
    assert_eq!(post(&a, "prod-a").0, 200, "cluster-a posts to its route");
    let (code, body) = post(&a, "prod-b");
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("may not post to route \"prod-b\": it may post to prod-a"), "{body}");
    let (code, body) = post(&b, "prod-a");
    assert_eq!(code, 403, "an unbound certificate posts nowhere: {body}");
    assert!(body.contains("(cluster-b)") && body.contains("no route"), "{body}");
}
