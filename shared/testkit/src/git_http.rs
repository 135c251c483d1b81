//! A smart-HTTP git server for tests: real `git http-backend` (the CGI git
//! itself ships) behind a minimal HTTP/1.1 listener that demands HTTP basic
//! auth with a token, as a forge does for `https://` remotes.

use std::io::{BufRead, BufReader, Read, Write};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;

pub struct GitHttpServer {
    pub url: String,
    pub refused: Arc<AtomicUsize>,
    pub served: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl GitHttpServer {
    /// Serves the repositories under `root` to `username:token`.
    pub fn start(root: &Path, username: &str, token: &str) -> Self {
        Self::start_expecting(root, format!("Basic {}", STANDARD.encode(format!("{username}:{token}"))))
    }

    /// Serves the repositories under `root` to `Authorization: Bearer
    /// <token>` only (a forge's token auth, Flux's and Argo CD's
    /// `bearerToken`).
    pub fn start_bearer(root: &Path, token: &str) -> Self {
        Self::start_expecting(root, format!("Bearer {token}"))
    }

    fn start_expecting(root: &Path, expected: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(AtomicUsize::new(0));
        let served = Arc::new(AtomicUsize::new(0));
        let (root, s, r, v) = (root.to_path_buf(), stop.clone(), refused.clone(), served.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(conn) = conn {
                    serve(conn, &root, &expected, &r, &v);
                }
            }
        });
        Self { url: format!("http://{addr}"), refused, served, stop, addr, thread: Some(thread) }
    }
}

impl Drop for GitHttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(conn: TcpStream, root: &PathBuf, expected: &str, refused: &AtomicUsize, served: &AtomicUsize) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let mut headers: Vec<(String, String)> = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).unwrap();
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if let Some(len) = header("content-length") {
        body.resize(len.parse().unwrap(), 0);
        reader.read_exact(&mut body).unwrap();
    } else if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).unwrap();
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap(), 16).unwrap();
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).unwrap();
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    let mut conn = conn;
    if header("authorization").as_deref() != Some(expected) {
        refused.fetch_add(1, Ordering::SeqCst);
        let _ = conn.write_all(
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        return;
    }
    served.fetch_add(1, Ordering::SeqCst);
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut cgi = Command::new("git")
        .arg("http-backend")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_TYPE", header("content-type").unwrap_or_default())
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", header("content-encoding").unwrap_or_default())
        .env("GIT_PROTOCOL", header("git-protocol").unwrap_or_default())
        .env("REMOTE_USER", "token-user")
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = cgi.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let out = cgi.wait_with_output().unwrap();
    writer.join().unwrap();
    let raw = out.stdout;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| (p, 4))
        .or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|p| (p, 2)))
        .unwrap_or((raw.len(), 0));
    let head = String::from_utf8_lossy(&raw[..split.0]).to_string();
    let payload = &raw[split.0 + split.1..];
    let mut status = "200 OK".to_owned();
    let mut response = String::new();
    for h in head.lines() {
        if let Some(s) = h.strip_prefix("Status:") {
            status = s.trim().to_owned();
        } else if !h.trim().is_empty() {
            response.push_str(h.trim_end());
            response.push_str("\r\n");
        }
    }
    let _ = conn.write_all(
        format!("HTTP/1.1 {status}\r\n{response}Content-Length: {}\r\nConnection: close\r\n\r\n", payload.len())
            .as_bytes(),
    );
    let _ = conn.write_all(payload);
}
