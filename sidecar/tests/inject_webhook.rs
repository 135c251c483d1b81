//! `reverser-sidecar inject-webhook`, the real binary over real TLS
//! (certificates generated here with rcgen): an opted-in pod's JSONPatch,
//! applied, equals what `kubectl reverser inject` writes for the same pod
//! (`rules::inject::inject_manifests`, the function the plugin runs); an
//! opted-out pod is allowed with no patch; a malformed review gets a clear
//! error response and the server keeps serving.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use rules::inject::{InjectOptions, inject_manifests};
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const IMAGE: &str = "registry.example/reverser-sidecar:e2e";
const SIDECAR_ARGS: [&str; 2] = ["--author-attribution-transport=redis", "--author-attribution-grace=5s"];
/// The redis transport's URL, from a Secret (the sidecar refuses redis
/// without one, and so would the webhook).
const REDIS_URL_SECRET: &str = "reverser-redis/url";

/// A CA and a localhost serving certificate it signed, as PEM files in `dir`.
/// Returns the CA certificate (DER) a client trusts.
fn certificates(dir: &Path) -> CertificateDer<'static> {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name.push(DnType::CommonName, "inject-webhook e2e CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate().unwrap();
    let mut server = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    server.distinguished_name.push(DnType::CommonName, "rev-reverser-injector.reverser.svc");
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = server.signed_by(&key, &issuer).unwrap();
    std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
    ca_cert.der().clone()
}

/// The running binary; killed when dropped, so a failing test leaves nothing.
struct Webhook {
    child: Child,
    addr: String,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &Path) -> Webhook {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reverser-sidecar"));
    cmd.arg("inject-webhook")
        .arg("--listen=127.0.0.1:0")
        .arg(format!("--tls-cert={}", dir.join("tls.crt").display()))
        .arg(format!("--tls-key={}", dir.join("tls.key").display()))
        .arg(format!("--sidecar-image={IMAGE}"))
        .arg("--exclude-namespace=reverser")
        .arg(format!("--sidecar-redis-url-secret={REDIS_URL_SECRET}"));
    for a in SIDECAR_ARGS {
        cmd.arg(format!("--sidecar-arg={a}"));
    }
    let mut child = cmd.env("REVERSER_LOG", "info").stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    // Read the bound address off the log, then keep draining (and echoing)
    // the log so the child never blocks on a full pipe.
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[inject-webhook] {line}");
            if line.contains("inject-webhook listening")
                && let Some(addr) = line.split_whitespace().find_map(|w| w.strip_prefix("addr="))
            {
                let _ = tx.send(addr.to_string());
            }
        }
    });
    let addr = rx.recv_timeout(Duration::from_secs(60)).expect("inject-webhook never logged its listening address");
    Webhook { child, addr }
}

fn connector(ca: Option<&CertificateDer<'static>>) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = ca {
        roots.add(ca.clone()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// One HTTP/1.1 request over a fresh TLS connection: (status, body).
async fn request(
    tls: &TlsConnector,
    addr: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    let tcp = TcpStream::connect(addr).await?;
    let mut stream = tls.connect(ServerName::try_from("localhost").unwrap(), tcp).await?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    stream.flush().await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("no end of headers");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let status: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut body = raw[split + 4..].to_vec();
    if let Some(len) = head.lines().find_map(|l| {
        l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap())
    }) {
        assert_eq!(body.len(), len, "short body: {head}");
    } else {
        body = dechunk(&body);
    }
    Ok((status, body))
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = raw.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..eol]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[eol + 2..eol + 2 + size]);
        raw = &raw[eol + 2 + size + 2..];
    }
}

fn pod(name: &str, labels: Value, annotations: Value, host_network: bool) -> Value {
    let mut spec = json!({
        "containers": [
            {"name": "watcher", "image": "registry.example/watcher:1", "args": ["--repo", "/git"]},
            {"name": "helper", "image": "registry.example/helper:1"}
        ]
    });
    if host_network {
        spec["hostNetwork"] = json!(true);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "labels": labels, "annotations": annotations},
        "spec": spec
    })
}

fn review(uid: &str, namespace: &str, object: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": object["metadata"]["name"],
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": object,
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    }))
    .unwrap()
}

/// What `kubectl reverser inject --image IMAGE --sidecar-arg ...` writes for
/// `pod`: the plugin's own function over the pod as YAML.
fn plugin_inject(pod: &Value) -> Value {
    let options = InjectOptions {
        image: IMAGE.to_string(),
        extra_args: SIDECAR_ARGS.iter().map(|s| s.to_string()).collect(),
        redis_url_secret: Some(REDIS_URL_SECRET.parse().unwrap()),
        ..InjectOptions::default()
    };
    let yaml = serde_norway::to_string(pod).unwrap();
    let out = inject_manifests(&yaml, &options).unwrap();
    let injected: serde_norway::Value = serde_norway::from_str(&out.output).unwrap();
    serde_json::to_value(injected).unwrap()
}

async fn admit(tls: &TlsConnector, addr: &str, body: &[u8]) -> Value {
    let (status, body) = request(tls, addr, "POST", "/inject", body).await.unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let review: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    review["response"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_binary_serves_the_webhook_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let ca = certificates(dir.path());
    let webhook = start(dir.path());
    let tls = connector(Some(&ca));
    let addr = webhook.addr.as_str();

    // Real TLS: a client that does not trust the CA is refused the handshake.
    let untrusted = request(&connector(None), addr, "GET", "/healthz", b"").await;
    assert!(untrusted.is_err(), "an untrusted client got through: {untrusted:?}");
    let (status, body) = request(&tls, addr, "GET", "/healthz", b"").await.unwrap();
    assert_eq!((status, body.as_slice()), (200, b"ok\n".as_slice()));

    // An opted-in pod: the patch, applied, is exactly the plugin's output.
    let opted_in = pod("web-1", json!({"reverser.dev/inject": "enabled", "app": "web"}), json!({}), false);
    let response = admit(&tls, addr, &review("uid-opted-in", "shop", &opted_in)).await;
    assert_eq!(response["uid"], "uid-opted-in");
    assert_eq!(response["allowed"], true);
    assert_eq!(response["patchType"], "JSONPatch");
    let patch_bytes = base64::engine::general_purpose::STANDARD
        .decode(response["patch"].as_str().expect("no patch for an opted-in pod"))
        .unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&patch_bytes).unwrap();
    let mut patched = opted_in.clone();
    json_patch::patch(&mut patched, &patch).unwrap();
    let expected = plugin_inject(&opted_in);
    assert_eq!(patched, expected);
    // And it is a real injection, not two equal no-ops.
    assert_ne!(patched, opted_in);
    let init = patched["spec"]["initContainers"].as_array().unwrap();
    assert_eq!(init[0]["name"], "reverser-sidecar");
    assert_eq!(init[0]["image"], IMAGE);
    assert_eq!(init[0]["restartPolicy"], "Always");
    for a in SIDECAR_ARGS {
        assert!(init[0]["args"].as_array().unwrap().contains(&json!(a)));
    }

    // Opted out, four ways: each allowed, with no patch.
    let opted_out = [
        (
            "uid-annotation",
            "shop",
            pod("web-2", json!({"reverser.dev/inject": "enabled"}), json!({"reverser.dev/inject": "disabled"}), false),
        ),
        ("uid-host-network", "shop", pod("web-3", json!({"reverser.dev/inject": "enabled"}), json!({}), true)),
        ("uid-kube-system", "kube-system", pod("web-4", json!({"reverser.dev/inject": "enabled"}), json!({}), false)),
        ("uid-excluded", "reverser", pod("web-5", json!({"reverser.dev/inject": "enabled"}), json!({}), false)),
        ("uid-already", "shop", expected.clone()),
    ];
    for (uid, ns, object) in &opted_out {
        let response = admit(&tls, addr, &review(uid, ns, object)).await;
        assert_eq!(response["uid"], *uid);
        assert_eq!(response["allowed"], true, "{uid}");
        assert!(response.get("patch").is_none(), "{uid} was patched: {response}");
        assert!(response.get("patchType").is_none(), "{uid}");
    }

    // Malformed reviews: a clear error response each, and the server goes on.
    let not_json = admit(&tls, addr, b"{\"apiVersion\": \"admission.k8s.io/v1\", ").await;
    assert!(not_json.get("patch").is_none());
    let message = not_json["status"]["message"].as_str().unwrap();
    assert!(message.contains("not JSON"), "{message}");
    let wrong_kind = admit(
        &tls,
        addr,
        &serde_json::to_vec(
            &json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "x"}}),
        )
        .unwrap(),
    )
    .await;
    let message = wrong_kind["status"]["message"].as_str().unwrap();
    assert!(message.contains("admission.k8s.io/v1"), "{message}");
    let mut no_spec = opted_in.clone();
    no_spec["spec"] = json!("not a pod spec");
    let broken_pod = admit(&tls, addr, &review("uid-broken", "shop", &no_spec)).await;
    assert_eq!(broken_pod["uid"], "uid-broken");
    assert!(broken_pod.get("patch").is_none());
    assert!(!broken_pod["status"]["message"].as_str().unwrap_or("").is_empty(), "{broken_pod}");

    let again = admit(&tls, addr, &review("uid-again", "shop", &opted_in)).await;
    assert_eq!(again["uid"], "uid-again");
    assert_eq!(again["patch"], response["patch"]);
}

#[test]
fn a_missing_certificate_is_a_clear_startup_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_reverser-sidecar"))
        .arg("inject-webhook")
        .arg("--listen=127.0.0.1:0")
        .arg(format!("--tls-cert={}", dir.path().join("absent.crt").display()))
        .arg(format!("--tls-key={}", dir.path().join("absent.key").display()))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("absent.crt"), "{stderr}");
}

#[test]
fn sidecar_args_the_sidecar_would_refuse_stop_the_webhook_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let out = Command::new(env!("CARGO_BIN_EXE_reverser-sidecar"))
        .arg("inject-webhook")
        .arg("--listen=127.0.0.1:0")
        .arg(format!("--tls-cert={}", dir.path().join("tls.crt").display()))
        .arg(format!("--tls-key={}", dir.path().join("tls.key").display()))
        .args(["--sidecar-arg=--transport", "--sidecar-arg=redis"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("--sidecar-arg") && stderr.contains("unexpected argument '--transport'"), "{stderr}");
    assert!(stderr.contains("--author-attribution-transport"), "{stderr}");
    // The same arguments, refused by the sidecar itself.
    let own = Command::new(env!("CARGO_BIN_EXE_reverser-sidecar"))
        .args(["serve", "--audit-listen=off", "--transport", "redis"])
        .output()
        .unwrap();
    assert_eq!(own.status.code(), Some(2), "{own:?}");
}
