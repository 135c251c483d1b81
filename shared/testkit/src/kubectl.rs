//! The real `kubectl` running our plugins: a directory holding only links to
//! the plugin binaries is put first on the child's PATH. Cargo's own output
//! directory also holds `kubectl-*.d` dep-info files, which kubectl would
//! list as broken plugins, hence a directory of our own.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// Where the tests expect kubectl (v1.32; `scripts/test` installs it).
pub const KUBECTL: &str = "/usr/bin/kubectl";

/// A kubectl runner: plugin links, a kubeconfig, and an environment that
/// never reaches the developer's own cluster.
#[derive(Debug)]
pub struct Kubectl {
    /// A scratch directory the test may use too (`bin/` holds the links).
    pub dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    env: Vec<(String, String)>,
    env_remove: Vec<String>,
}

impl Kubectl {
    /// kubectl with each of `plugins` (paths to `kubectl-<name>` binaries,
    /// e.g. `env!("CARGO_BIN_EXE_kubectl-reverser")`) found on its PATH.
    /// `KUBECONFIG` points at a file that does not exist until
    /// [`Kubectl::kubeconfig`] names one, so only `--kubeconfig` reaches a
    /// cluster.
    pub fn new(plugins: &[&str]) -> Kubectl {
        assert!(Path::new(KUBECTL).exists(), "{KUBECTL} is missing: install kubectl (scripts/test does)");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("create the plugin directory");
        for plugin in plugins {
            let plugin = Path::new(plugin);
            assert!(plugin.exists(), "the plugin binary {} is missing: build it first", plugin.display());
            let name = plugin.file_name().expect("a plugin path names a file");
            std::os::unix::fs::symlink(plugin, bin.join(name)).expect("link the plugin");
        }
        let kubeconfig = dir.path().join("absent-kubeconfig");
        Kubectl { dir, kubeconfig, env: Vec::new(), env_remove: Vec::new() }
    }

    /// Use `path` as `KUBECONFIG` for every run.
    pub fn kubeconfig(mut self, path: impl Into<PathBuf>) -> Self {
        self.kubeconfig = path.into();
        self
    }

    /// Set `key=value` in every child's environment.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Remove `key` from every child's environment (a token or URL the
    /// developer's shell may carry).
    pub fn env_remove(mut self, key: &str) -> Self {
        self.env_remove.push(key.into());
        self
    }

    /// The directory holding the plugin links.
    pub fn bin_dir(&self) -> PathBuf {
        self.dir.path().join("bin")
    }

    /// `kubectl <args>` ready to run: PATH, KUBECONFIG and the environment
    /// set, stdin closed, stdout and stderr piped. Add to it before running.
    pub fn command(&self, args: &[&str]) -> Command {
        let path = format!("{}:{}", self.bin_dir().display(), std::env::var("PATH").unwrap_or_default());
        let mut c = Command::new(KUBECTL);
        c.args(args)
            .env("PATH", path)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for k in &self.env_remove {
            c.env_remove(k);
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// Runs `kubectl <args>` to completion.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run kubectl")
    }

    /// Runs `kubectl <args>` with `stdin` written to its standard input.
    pub fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = self.command(args).stdin(Stdio::piped()).spawn().expect("run kubectl");
        if let Some(mut input) = child.stdin.take() {
            input.write_all(stdin.as_bytes()).expect("write kubectl's stdin");
        }
        child.wait_with_output().expect("wait for kubectl")
    }

    /// Starts `kubectl <args>` without waiting (racing processes).
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args).spawn().expect("run kubectl")
    }
}
