//! What the sidecar benchmarks share: an API server's keep-alive mTLS
//! connection to an audit webhook, reading a process's resident memory, and
//! the scale benchmarks' cluster ([`cluster`]).
#![allow(dead_code)]

pub mod cluster;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Walks the bench's own arguments (those after the executable):
/// `on(flag, next)` says whether the flag took `next` as its value. A flag
/// it does not know (cargo bench's `--bench`) takes none and is passed over.
pub fn each_flag(mut on: impl FnMut(&str, &str) -> bool) {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let next = argv.get(i + 1).map(String::as_str).unwrap_or_default();
        i += if on(&argv[i], next) { 2 } else { 1 };
    }
}

/// The number `value` after `flag`; says which flag when it is not one.
pub fn number<T: std::str::FromStr>(flag: &str, value: &str) -> T {
    value.parse().unwrap_or_else(|_| panic!("{flag} takes a number, not {value:?}"))
}

/// A Git writer committing into `dir/clone` and pushing `main` to a new
/// bare remote at `dir/remote.git` (returned), under `prefix`: the Git-only
/// baselines.
pub fn pushing_writer(dir: &Path, prefix: &str) -> (runtime::attribution::commit::GitWriter, std::path::PathBuf) {
    use runtime::attribution::commit::{GitWriter, Identity, RemoteConfig, WriterConfig};
    let remote = dir.join("remote.git");
    testkit::mirror::init_bare(&remote);
    let writer = GitWriter::open(WriterConfig {
        remote: Some(RemoteConfig::new(format!("file://{}", remote.display()))),
        prefix: prefix.into(),
        ..WriterConfig::new(dir.join("clone"), "main", Identity::new("Bench", "bench@reverser.invalid"))
    })
    .expect("a Git writer on a new bare remote");
    (writer, remote)
}

pub type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// The client side of the development certificates in `certs` (`ca.pem`,
/// `client.pem`, `client-key.pem`), speaking HTTP/1.1 as the API server does.
pub fn client_config(certs: &Path) -> std::io::Result<Arc<rustls::ClientConfig>> {
    let pem = |name: &str| std::fs::read(certs.join(name));
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut pem("ca.pem")?.as_slice()) {
        roots.add(c?).map_err(std::io::Error::other)?;
    }
    let chain = rustls_pemfile::certs(&mut pem("client.pem")?.as_slice()).collect::<Result<Vec<_>, _>>()?;
    let key =
        rustls_pemfile::private_key(&mut pem("client-key.pem")?.as_slice())?.ok_or(std::io::ErrorKind::NotFound)?;
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(std::io::Error::other)?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(std::io::Error::other)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// One mTLS connection to `127.0.0.1:port`.
pub async fn connect(port: u16, config: Arc<rustls::ClientConfig>) -> std::io::Result<Tls> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").map_err(std::io::Error::other)?;
    tokio_rustls::TlsConnector::from(config).connect(name, tcp).await
}

/// One HTTP/1.1 keep-alive POST of `body` to `path`; the status code.
pub async fn post(conn: &mut Tls, path: &str, body: &[u8]) -> std::io::Result<u16> {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await?;
    conn.write_all(body).await?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_lowercase();
    let status: u16 = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let len: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    while buf.len() < header_end + len {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(status)
}

/// Resident memory of `pid`, KiB (0 once the process is gone).
pub fn rss_kib(pid: u32) -> u64 {
    testkit::process::rss_kib(pid).unwrap_or(0)
}

/// CPU time and context switches of every thread of `pid` so far: (on-CPU
/// nanoseconds from `schedstat`, voluntary + involuntary switches).
pub fn cpu_and_switches(pid: u32) -> (u64, u64) {
    let (mut ns, mut switches) = (0, 0);
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return (0, 0) };
    for task in tasks.flatten() {
        let read = |f: &str| std::fs::read_to_string(task.path().join(f)).unwrap_or_default();
        ns += read("schedstat").split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        switches += read("status")
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    (ns, switches)
}

/// The `p` quantile of sorted durations.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}
