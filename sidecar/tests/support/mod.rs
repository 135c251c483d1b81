//! Runs the real `reverser-sidecar` binary and talks to it the way its
//! clients do: curl over mTLS for the audit webhook, tonic over the Unix
//! socket for the API.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use runtime::proto::attribution_client::AttributionClient;
use testkit::free_port;
use tonic::transport::{Channel, Endpoint, Uri};

pub const BIN: &str = env!("CARGO_BIN_EXE_reverser-sidecar");

pub struct Sidecar {
    pub child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub audit_port: u16,
    pub metrics_port: u16,
    pub certs: PathBuf,
}

impl Sidecar {
    /// `serve` (or `receive` when `mode` is "receive") with its own ports,
    /// socket and development certificates; waits until it answers.
    pub fn start(mode: &str, extra: &[&str]) -> Sidecar {
        Self::start_sharing_certs(mode, extra, None)
    }

    pub fn start_sharing_certs(mode: &str, extra: &[&str], certs: Option<&Path>) -> Sidecar {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("reverser.sock");
        let (audit_port, metrics_port) = (free_port().unwrap(), free_port().unwrap());
        let certs = certs.map(Path::to_path_buf).unwrap_or_else(|| dir.path().join("certs"));
        let mut cmd = Command::new(BIN);
        cmd.arg(mode)
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
            .arg("--dev-certs-dir")
            .arg(&certs);
        if !extra.contains(&"--audit-listen") {
            cmd.args(["--audit-listen", &format!("127.0.0.1:{audit_port}")]);
        }
        let socket = match extra.iter().position(|a| *a == "--socket") {
            Some(i) => PathBuf::from(extra[i + 1]),
            None => socket,
        };
        if mode == "serve" && !extra.contains(&"--socket") {
            cmd.arg("--socket").arg(&socket);
        }
        cmd.args(extra).stdout(Stdio::piped()).stderr(Stdio::inherit()).env("REVERSER_LOG", "warn");
        let child = cmd.spawn().unwrap();
        let s = Sidecar { child: Some(child), dir, socket, audit_port, metrics_port, certs };
        s.wait_ready(mode == "serve");
        s
    }

    fn wait_ready(&self, socket: bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let http = std::net::TcpStream::connect(("127.0.0.1", self.metrics_port)).is_ok();
            if http && (!socket || self.socket.exists()) {
                return;
            }
            assert!(Instant::now() < deadline, "the sidecar did not come up");
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    pub fn ca(&self) -> PathBuf {
        self.certs.join("ca.pem")
    }

    /// POSTs `body` to the audit webhook with the development client
    /// certificate; returns (HTTP status, body).
    pub fn post(&self, path: &str, body: &[u8]) -> (u16, String) {
        self.post_with(
            path,
            body,
            &[
                "--cert",
                self.certs.join("client.pem").to_str().unwrap(),
                "--key",
                self.certs.join("client-key.pem").to_str().unwrap(),
            ],
        )
    }

    pub fn post_with(&self, path: &str, body: &[u8], auth: &[&str]) -> (u16, String) {
        let file = self.dir.path().join(format!("body-{}", free_port().unwrap()));
        std::fs::write(&file, body).unwrap();
        let out = Command::new("curl")
            .args(["-sS", "-o", "-", "-w", "\n%{http_code}", "--cacert", self.ca().to_str().unwrap()])
            .args(auth)
            .args(["-H", "Content-Type: application/json", "--data-binary"])
            .arg(format!("@{}", file.display()))
            .arg(format!("https://localhost:{}{path}", self.audit_port))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }

    pub async fn client(&self) -> AttributionClient<Channel> {
        AttributionClient::new(channel(&self.socket).await)
    }

    pub fn metrics(&self) -> String {
        http_get(self.metrics_port, "/metrics")
    }

    pub fn sigterm(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().unwrap();
        Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
        child.wait().unwrap()
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub async fn channel(socket: &Path) -> Channel {
    let path = socket.to_path_buf();
    Endpoint::try_from("http://localhost")
        .unwrap()
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let p = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(p).await?)) }
        }))
        .await
        .unwrap()
}

/// A bare HTTP/1.1 GET on loopback.
pub fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[allow(unused_imports)] // not every test binary posts audit events
pub use testkit::{audit_event, event_list};

pub fn watch_object(ns: &str, name: &str, uid: &str, rv: &str, deleting: bool) -> Vec<u8> {
    let mut meta = serde_json::json!({"name": name, "namespace": ns, "uid": uid, "resourceVersion": rv});
    if deleting {
        meta["deletionTimestamp"] = "2026-11-29T12:00:00Z".into();
    }
    serde_json::to_vec(&serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})).unwrap()
}

pub fn configmaps(route: &str) -> Option<runtime::proto::TypeRef> {
    Some(runtime::proto::TypeRef {
        route: route.into(),
        group: String::new(),
        version: "v1".into(),
        resource: "configmaps".into(),
    })
}
