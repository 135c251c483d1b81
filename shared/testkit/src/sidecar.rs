//! Runs the real `reverser-sidecar` binary and talks to it the way its
//! clients do: curl over mTLS for the audit webhook, plain HTTP for the ops
//! port (metrics, health, explain), and a tonic [`Channel`] over the Unix
//! socket. The channel is returned bare: callers wrap it in the generated
//! client they need (`runtime::proto`), which keeps testkit free of the
//! runtime crate.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::free_port;

/// The binary's file name in a cargo target directory.
pub const BINARY: &str = "reverser-sidecar";

/// `reverser-sidecar` in the target directory of the running test (see
/// [`crate::process::binary`]); pass another with [`SidecarBuilder::binary`].
pub fn binary() -> PathBuf {
    crate::process::binary(BINARY, "reverser-sidecar")
}

/// How to start a sidecar; [`Sidecar::start`] covers the common case.
#[derive(Debug, Clone)]
pub struct SidecarBuilder {
    mode: String,
    binary: Option<PathBuf>,
    args: Vec<String>,
    certs: Option<PathBuf>,
    log: String,
}

impl SidecarBuilder {
    /// Run this binary instead of the one next to the test executable
    /// (e.g. `env!("CARGO_BIN_EXE_reverser-sidecar")`).
    pub fn binary(mut self, path: impl Into<PathBuf>) -> Self {
        self.binary = Some(path.into());
        self
    }

    /// Extra arguments after the harness's own. `--audit-listen` and
    /// `--socket` given here replace the harness's.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// Use (and create, when absent) development certificates in `dir`, so
    /// two sidecars trust the same CA.
    pub fn certs(mut self, dir: &Path) -> Self {
        self.certs = Some(dir.to_path_buf());
        self
    }

    /// `REVERSER_LOG` for the child (default `warn`).
    pub fn log(mut self, filter: &str) -> Self {
        self.log = filter.into();
        self
    }

    /// Starts the process with its own ports, socket and development
    /// certificates, and waits until its ops port answers (and, for
    /// `serve`, its socket exists); panics after 20 s.
    pub fn start(self) -> Sidecar {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (audit_port, metrics_port) = (free_port().expect("a free port"), free_port().expect("a free port"));
        let certs = self.certs.clone().unwrap_or_else(|| dir.path().join("certs"));
        let has = |flag: &str| self.args.iter().any(|a| a == flag);
        let socket = match self.args.iter().position(|a| a == "--socket") {
            Some(i) => PathBuf::from(self.args.get(i + 1).cloned().unwrap_or_default()),
            None => dir.path().join("reverser.sock"),
        };
        let binary = self.binary.clone().unwrap_or_else(binary);
        let mut cmd = Command::new(&binary);
        cmd.arg(&self.mode)
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
            .arg("--dev-certs-dir")
            .arg(&certs);
        if !has("--audit-listen") {
            cmd.args(["--audit-listen", &format!("127.0.0.1:{audit_port}")]);
        }
        let serve = self.mode == "serve";
        if serve && !has("--socket") {
            cmd.arg("--socket").arg(&socket);
        }
        cmd.args(&self.args).stdout(Stdio::null()).stderr(Stdio::inherit()).env("REVERSER_LOG", &self.log);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        let s = Sidecar { child: Some(child), dir, socket, audit_port, metrics_port, certs };
        s.wait_ready(serve);
        s
    }
}

/// A running `reverser-sidecar`; killed when dropped.
#[derive(Debug)]
pub struct Sidecar {
    pub child: Option<Child>,
    /// The sidecar's scratch directory (socket, certificates, bodies).
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub audit_port: u16,
    pub metrics_port: u16,
    /// The development certificates: `ca.pem`, `client.pem`,
    /// `client-key.pem`, ...
    pub certs: PathBuf,
}

impl Sidecar {
    /// A builder for `reverser-sidecar <mode>` (`serve`, `receive`, ...).
    pub fn builder(mode: &str) -> SidecarBuilder {
        SidecarBuilder { mode: mode.into(), binary: None, args: Vec::new(), certs: None, log: "warn".into() }
    }

    /// `reverser-sidecar <mode> <extra>` from the test's target directory,
    /// ready to answer.
    pub fn start(mode: &str, extra: &[&str]) -> Sidecar {
        Self::builder(mode).args(extra).start()
    }

    /// Like [`Sidecar::start`], with the development certificates in
    /// `certs` when given (shared with another sidecar).
    pub fn start_sharing_certs(mode: &str, extra: &[&str], certs: Option<&Path>) -> Sidecar {
        let b = Self::builder(mode).args(extra);
        match certs {
            Some(dir) => b.certs(dir).start(),
            None => b.start(),
        }
    }

    fn wait_ready(&self, socket: bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let http = std::net::TcpStream::connect(("127.0.0.1", self.metrics_port)).is_ok();
            if http && (!socket || self.socket.exists()) {
                return;
            }
            assert!(Instant::now() < deadline, "the sidecar did not come up within 20 s");
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The development CA certificate.
    pub fn ca(&self) -> PathBuf {
        self.certs.join("ca.pem")
    }

    /// POSTs `body` to `path` on the audit port with the development client
    /// certificate; returns (HTTP status, body). Status 0: no HTTP answer.
    pub fn post(&self, path: &str, body: &[u8]) -> (u16, String) {
        let cert = self.certs.join("client.pem");
        let key = self.certs.join("client-key.pem");
        self.post_with(path, body, &["--cert", &cert.to_string_lossy(), "--key", &key.to_string_lossy()])
    }

    /// POSTs `body` with the given curl authentication arguments (none: no
    /// client certificate).
    pub fn post_with(&self, path: &str, body: &[u8], auth: &[&str]) -> (u16, String) {
        let file = self.dir.path().join(format!("body-{}", free_port().unwrap_or_default()));
        std::fs::write(&file, body).expect("write the request body");
        let out = Command::new("curl")
            .args(["-sS", "-o", "-", "-w", "\n%{http_code}", "--cacert"])
            .arg(self.ca())
            .args(auth)
            .args(["-H", "Content-Type: application/json", "--data-binary"])
            .arg(format!("@{}", file.display()))
            .arg(format!("https://localhost:{}{path}", self.audit_port))
            .output()
            .expect("run curl");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }

    /// POSTs `events` as one `EventList` to `/audit-webhook/<route>`;
    /// returns the HTTP status.
    pub fn post_events(&self, route: &str, events: &[serde_json::Value]) -> u16 {
        self.post(&format!("/audit-webhook/{route}"), &crate::event_list(events.to_vec())).0
    }

    /// A gRPC channel over the sidecar's Unix socket.
    pub async fn channel(&self) -> Channel {
        unix_channel(&self.socket).await
    }

    /// `GET /metrics` on the ops port: the whole HTTP response.
    pub fn metrics(&self) -> String {
        http_get(self.metrics_port, "/metrics")
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn sigterm(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("the sidecar is running");
        let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("run kill");
        assert!(status.success(), "kill -TERM {} failed", child.id());
        child.wait().expect("wait for the sidecar")
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

/// A gRPC channel over the Unix socket at `socket`; panics when nothing
/// listens there.
pub async fn unix_channel(socket: &Path) -> Channel {
    let path = socket.to_path_buf();
    Endpoint::try_from("http://localhost")
        .expect("a static URI")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let p = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(p).await?)) }
        }))
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}", socket.display()))
}

/// A bare HTTP/1.1 GET on loopback: the whole response (status line,
/// headers, body); empty when nothing answers.
pub fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}
