//! A real `redis-server` on a free loopback port, which a test can kill and
//! restart on the same port.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Debian location; `PATH` is tried when it is absent.
const REDIS_SERVER: &str = "/usr/bin/redis-server";

/// A free loopback TCP port (bound, then released for the caller to use).
pub fn free_port() -> std::io::Result<u16> {
    // The kernel may hand the same ephemeral port to two parallel tests of
    // one process between the probe and the child's bind ("Address already
    // in use" once in CI): a port is handed out once per process.
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    loop {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let port = listener.local_addr()?.port();
        if GIVEN.lock().unwrap_or_else(|e| e.into_inner()).insert(port) {
            return Ok(port);
        }
    }
}

/// TLS material for a `redis-server --tls-port`, as files.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

/// A `redis-server` child process: no persistence (`--save '' --appendonly
/// no`), loopback only, killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    tls_port: Option<u16>,
    args: Vec<String>,
    child: Option<Child>,
    log: PathBuf,
}

impl RedisServer {
    /// Starts a plain server on a free port.
    pub fn start() -> std::io::Result<Self> {
        Self::start_with(&[], None)
    }

    /// Starts a server with extra `redis-server` arguments (e.g.
    /// `["--requirepass", "pw"]`) and, optionally, a TLS port as well.
    pub fn start_with(extra: &[&str], tls: Option<&TlsFiles>) -> std::io::Result<Self> {
        let port = free_port()?;
        let tls_port = tls.map(|_| free_port()).transpose()?;
        let log = std::env::temp_dir().join(format!("reverser-redis-{port}.log"));
        let mut args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--logfile",
            &log.to_string_lossy(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let (Some(files), Some(tp)) = (tls, tls_port) {
            for (k, v) in [
                ("--tls-port", tp.to_string()),
                ("--tls-cert-file", path_str(&files.cert)),
                ("--tls-key-file", path_str(&files.key)),
                ("--tls-ca-cert-file", path_str(&files.ca)),
                ("--tls-auth-clients", "no".to_owned()),
            ] {
                args.push(k.to_owned());
                args.push(v);
            }
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut server = Self { port, tls_port, args, child: None, log };
        server.spawn()?;
        Ok(server)
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let bin = if Path::new(REDIS_SERVER).exists() { REDIS_SERVER } else { "redis-server" };
        let child = Command::new(bin)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("starting {bin}: {e} (install the redis-server package; scripts/test does)"),
                )
            })?;
        self.child = Some(child);
        self.wait_ready()
    }

    /// Waits until the plain port answers `PING` with `PONG`.
    fn wait_ready(&mut self) -> std::io::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                return Err(std::io::Error::other(format!(
                    "redis-server exited with {status} before answering PING; its log:\n{log}"
                )));
            }
            if self.ping().unwrap_or(false) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(std::io::Error::other(format!(
                    "redis-server on port {} did not answer PING within 10s",
                    self.port
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn ping(&self) -> std::io::Result<bool> {
        let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], self.port).into(), Duration::from_millis(200))?;
        s.set_read_timeout(Some(Duration::from_millis(500)))?;
        s.write_all(b"PING\r\n")?;
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf)?;
        // `-NOAUTH` also proves the server is up (a password is configured).
        Ok(buf[..n].starts_with(b"+PONG") || buf[..n].starts_with(b"-NOAUTH"))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn tls_port(&self) -> Option<u16> {
        self.tls_port
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port (empty: there is no persistence).
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.spawn() {
                Ok(()) => return Ok(()),
                // The port may linger briefly after the kill.
                Err(e) if Instant::now() < deadline => {
                    tracing::debug!(error = %e, "redis-server restart retry");
                    self.kill();
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs `redis-cli -p <port> <args>` and returns its stdout. Fails when
    /// redis-cli fails or prints an error reply.
    pub fn cli(&self, args: &[&str]) -> std::io::Result<String> {
        let out = Command::new("redis-cli")
            .arg("-p")
            .arg(self.port.to_string())
            .args(args)
            .output()
            .map_err(|e| std::io::Error::new(e.kind(), format!("running redis-cli: {e} (install redis-tools)")))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() || stdout.starts_with("ERR") || stdout.starts_with("(error)") {
            return Err(std::io::Error::other(format!(
                "redis-cli {args:?} failed: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(stdout)
    }
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.log);
    }
}
