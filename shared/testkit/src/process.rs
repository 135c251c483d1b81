//! The workspace's binaries as processes: found in the running test's
//! target directory, killed when dropped. [`Hang`] runs `testkit hang`, a
//! server that accepts connections and never answers (timeout tests).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The binary `name` in the target directory of the running test: test and
/// bench executables live in `<target>/<profile>/deps/`, binaries one level
/// up. `cargo test --workspace` builds every binary before any test runs;
/// `package` is the cargo package that builds it, for the message when it
/// is missing.
pub fn binary(name: &str, package: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe.parent().and_then(Path::parent).map(Path::to_path_buf).unwrap_or_default();
    let bin = profile_dir.join(name);
    assert!(
        bin.exists(),
        "{} is missing: these tests run the real binary from the test's target directory; build it first with \
         `cargo build -p {package}` (or run `cargo test --workspace`)",
        bin.display()
    );
    bin
}

/// The resident memory of process `pid` in KiB (`VmRSS` of
/// `/proc/<pid>/status`), measured from outside it; `None` when it cannot
/// be read (the process is gone).
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS")
}

/// A memory field of `/proc/<pid>/status` in KiB (`VmRSS`, `RssAnon`,
/// `RssFile`, ...); `None` when it cannot be read.
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// A child process, killed when dropped, with the first line it printed.
#[derive(Debug)]
pub struct Running {
    child: Child,
    /// The first line of its stdout (the fakes print where they listen).
    pub first_line: String,
}

impl Running {
    /// Starts `program args` and waits for its first line of stdout.
    pub fn start(program: &Path, args: &[&str]) -> Running {
        let mut child = Command::new(program)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", program.display()));
        let mut line = String::new();
        let stdout = child.stdout.take().expect("a piped stdout");
        BufReader::new(stdout).read_line(&mut line).expect("read the first line");
        Running { child, first_line: line.trim().to_string() }
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits for it to exit (after a signal sent to [`Running::id`]).
    pub fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `testkit hang`: accepts TCP connections on loopback and never answers.
#[derive(Debug)]
pub struct Hang {
    _process: Running,
    pub addr: SocketAddr,
}

impl Hang {
    /// Starts it on a free port.
    pub fn start() -> Hang {
        let process = Running::start(&binary("testkit", "testkit"), &["hang"]);
        let addr =
            process.first_line.parse().unwrap_or_else(|_| panic!("testkit hang printed {:?}", process.first_line));
        Hang { _process: process, addr }
    }

    /// `http://ADDR`, for a kubeconfig's server.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_read_by_their_whole_name() {
        let me = std::process::id();
        let (rss, anon, file) = (rss_kib(me).unwrap(), status_kib(me, "RssAnon").unwrap(), status_kib(me, "RssFile"));
        assert!(anon > 0 && anon <= rss, "RssAnon {anon} KiB within VmRSS {rss} KiB");
        assert!(file.is_some_and(|f| f <= rss));
        // A prefix of a field's name is no field.
        assert_eq!(status_kib(me, "Rss"), None);
        assert_eq!(status_kib(u32::MAX, "VmRSS"), None, "no such process");
    }
}
