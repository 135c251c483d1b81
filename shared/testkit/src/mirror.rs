//! A whole mirror for tests and benchmarks: the fake Kubernetes API holding
//! the configbutler.ai CRs (validated against the vendored schemas), a bare
//! Git remote, the real `reverser-sidecar serve --git-target` and `watch`
//! processes, and the actors' audit events posted over mTLS as the API
//! server would post them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fakeapi::{self, FakeApi, Store};
use crate::sidecar::{self, Sidecar};
use crate::{audit, free_port};

/// The namespace of the CRs and of the watched objects.
pub const NS: &str = "shop";
/// The GitTarget's `spec.path`.
pub const PREFIX: &str = "clusters/lab";
/// The author of a commit whose change has no fact.
pub const UNRESOLVED: &str = "unknown (attribution unresolved)";

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).env("GIT_CONFIG_NOSYSTEM", "1").output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// An empty bare repository at `path` whose HEAD is `main` (a plain
/// `git init --bare` would name `master`, which the mirror never pushes).
pub fn init_bare(path: &Path) {
    std::fs::create_dir_all(path).unwrap();
    git(path, &["init", "--quiet", "--bare", "--initial-branch=main"]);
}

pub fn cm_path(name: &str) -> String {
    format!("{PREFIX}/{NS}/configmaps/{name}.yaml")
}

pub fn configmap(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}, "data": {"k": value}})
}

/// Commits `files` to the remote's `main` from a work tree at `work`, as
/// another tool (gitops-reverser) would have.
fn prefill(work: &Path, remote: &Path, files: &[(String, String)]) {
    git(remote.parent().unwrap(), &["clone", "--quiet", &remote.display().to_string(), &work.display().to_string()]);
    for (path, content) in files {
        let file = work.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, content).unwrap();
    }
    git(work, &["add", "--all"]);
    git(
        work,
        &[
            "-c",
            "user.name=GitOps Reverser",
            "-c",
            "user.email=noreply@configbutler.ai",
            "commit",
            "--quiet",
            "-m",
            "filled by gitops-reverser",
        ],
    );
    git(work, &["push", "--quiet", "origin", "HEAD:main"]);
}

/// What the CRs say, with a few knobs the scenarios turn.
pub struct Setup {
    pub provider: Value,
    pub target: Value,
    pub rules: Vec<Value>,
    /// Types the fake API serves besides its built-ins and the vendored CRDs.
    pub types: Vec<fakeapi::ResourceType>,
    /// Files the remote's `main` holds before the mirror starts (path from
    /// the repository root, content), committed by another tool.
    pub prefill: Vec<(String, String)>,
    /// Objects the cluster holds before the mirror starts.
    pub seed: Vec<Value>,
}

impl Setup {
    pub fn new(remote: &Path) -> Self {
        Setup {
            provider: json!({
                "apiVersion": "configbutler.ai/v1alpha3", "kind": "GitProvider",
                "metadata": {"name": "lab-git", "namespace": NS},
                "spec": {"url": format!("file://{}", remote.display()), "allowedBranches": ["main"],
                         "commit": {"committer": {"name": "Lab Mirror", "email": "mirror@lab.invalid"}},
                         "push": {"commitWindow": "300ms"}}
            }),
            target: json!({
                "apiVersion": "configbutler.ai/v1alpha3", "kind": "GitTarget",
                "metadata": {"name": "lab", "namespace": NS},
                "spec": {"providerRef": {"name": "lab-git"}, "branch": "main", "path": PREFIX}
            }),
            rules: vec![json!({
                "apiVersion": "configbutler.ai/v1alpha3", "kind": "WatchRule",
                "metadata": {"name": "lab-rules", "namespace": NS},
                "spec": {"targetRef": {"name": "lab"},
                         "rules": [{"resources": ["configmaps", "secrets"]}, {"apiGroups": ["apps"], "resources": ["deployments"]}]}
            })],
            types: Vec::new(),
            prefill: Vec::new(),
            seed: Vec::new(),
        }
    }
}

/// One mirror: the fake API, the bare remote, the sidecar, the watcher.
pub struct Mirror {
    pub api: FakeApi,
    pub dir: tempfile::TempDir,
    pub remote: PathBuf,
    pub kubeconfig: PathBuf,
    pub sidecar: Sidecar,
    pub watcher: Option<Child>,
    pub watcher_metrics: u16,
}

impl Mirror {
    pub fn start(setup: impl FnOnce(&mut Setup)) -> Mirror {
        Self::start_with(setup, &[], &[])
    }

    pub fn start_with(setup: impl FnOnce(&mut Setup), serve_args: &[&str], watch_args: &[&str]) -> Mirror {
        let mut m = Self::start_held(setup, serve_args);
        m.start_watcher(watch_args);
        m
    }

    /// The fake API, the remote and the sidecar, with no watcher yet
    /// ([`Mirror::spawn_watcher`] starts one that need not reconcile).
    pub fn start_held(setup: impl FnOnce(&mut Setup), serve_args: &[&str]) -> Mirror {
        let dir = tempfile::tempdir().unwrap();
        let remote = dir.path().join("remote.git");
        init_bare(&remote);
        let mut s = Setup::new(&remote);
        setup(&mut s);
        if !s.prefill.is_empty() {
            prefill(&dir.path().join("prefill"), &remote, &s.prefill);
        }
        let mut store = Store::new();
        store.load_crd_schemas(&crate::fixtures::gitops_reverser_crds()).unwrap();
        for t in std::mem::take(&mut s.types) {
            store.register(t);
        }
        store.seed_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})).unwrap();
        for o in [s.provider, s.target].into_iter().chain(s.rules).chain(s.seed) {
            store.seed_object(o).unwrap();
        }
        let api = fakeapi::spawn(store).unwrap();
        let kubeconfig = api.write_kubeconfig(&dir.path().join("kubeconfig"), NS).unwrap();
        let mut args = vec![
            "--git-target".to_owned(),
            format!("{NS}/lab"),
            "--kubeconfig".to_owned(),
            kubeconfig.display().to_string(),
            "--git-repo".to_owned(),
            dir.path().join("clone").display().to_string(),
        ];
        if !serve_args.contains(&"--author-attribution-grace") {
            args.extend(["--author-attribution-grace".to_owned(), "1s".to_owned()]);
        }
        args.extend(serve_args.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let sidecar = Sidecar::builder("serve").args(&args).start();
        Mirror { api, dir, remote, kubeconfig, sidecar, watcher: None, watcher_metrics: free_port().unwrap() }
    }

    /// Starts the watcher and waits for its first reconcile.
    pub fn start_watcher(&mut self, extra: &[&str]) {
        self.spawn_watcher(extra);
        // Up once its first lists went to the sidecar.
        self.wait("the watcher's first reconcile", || {
            self.watcher_metric("gitopsreverser_mirror_reconciles_total") >= 1
        });
    }

    /// Starts the watcher without waiting for it.
    pub fn spawn_watcher(&mut self, extra: &[&str]) {
        // A short rescan unless the test picks its own.
        let rescan: &[&str] = if extra.contains(&"--rescan") { &[] } else { &["--rescan", "200ms"] };
        let child = Command::new(sidecar::binary())
            .args(["watch", "--git-target", &format!("{NS}/lab")])
            .args(rescan)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--socket")
            .arg(&self.sidecar.socket)
            .args(["--metrics-listen", &format!("127.0.0.1:{}", self.watcher_metrics)])
            .args(extra)
            .env("REVERSER_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(self.dir.path().join("watcher.log")).unwrap()))
            .spawn()
            .unwrap();
        self.watcher = Some(child);
    }

    pub fn stop_watcher(&mut self) {
        if let Some(mut c) = self.watcher.take() {
            Command::new("kill").args(["-TERM", &c.id().to_string()]).status().unwrap();
            c.wait().unwrap();
        }
    }

    pub fn watcher_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("watcher.log")).unwrap_or_default()
    }

    pub fn watcher_metric(&self, name: &str) -> u64 {
        let text = sidecar::http_get(self.watcher_metrics, "/metrics");
        text.lines()
            .filter(|l| l.starts_with(name) && !l.starts_with('#'))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .map(|v| v as u64)
            .sum()
    }

    /// Runs `f` on the store as `user`, then posts the audit events of its
    /// writes to the sidecar (unless `audited` is false).
    pub fn act(&self, user: &str, audited: bool, f: impl FnOnce(&mut Store)) {
        let writes = {
            let mut store = self.api.store.lock().unwrap();
            f(&mut store.as_user(user));
            store.take_writes()
        };
        if audited {
            let events: Vec<Value> = writes.iter().map(audit::from_write).collect();
            for batch in events.chunks(400) {
                assert_eq!(self.sidecar.post_events("default", batch), 200);
            }
        }
    }

    pub fn wait(&self, what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}\nwatcher log:\n{}", self.watcher_log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn remote_has(&self, path: &str) -> bool {
        let out = Command::new("git")
            .arg("-C")
            .arg(&self.remote)
            .args(["cat-file", "-e", &format!("main:{path}")])
            .output()
            .unwrap();
        out.status.success()
    }

    pub fn commits(&self) -> usize {
        let out =
            Command::new("git").arg("-C").arg(&self.remote).args(["rev-list", "--count", "main"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0)
    }

    /// Authors of the commits touching `path`, newest first.
    pub fn authors(&self, path: &str) -> Vec<String> {
        git(&self.remote, &["log", "--format=%an", "main", "--", path]).lines().map(str::to_owned).collect()
    }

    pub fn show(&self, path: &str) -> String {
        git(&self.remote, &["show", &format!("main:{path}")])
    }

    /// `git verify-commit` of the remote's `main` with `public` (an
    /// authorized_keys line) as the only allowed signer: git's output, `Ok`
    /// when the signature is good.
    pub fn verify_head(&self, public: &str) -> Result<String, String> {
        let allowed = self.dir.path().join("allowed_signers");
        std::fs::write(&allowed, format!("mirror@lab.invalid {}\n", public.trim())).unwrap();
        let out = Command::new("git")
            .arg("-C")
            .arg(&self.remote)
            .args(["-c", "gpg.format=ssh", "-c"])
            .arg(format!("gpg.ssh.allowedSignersFile={}", allowed.display()))
            .args(["verify-commit", "main"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() { Ok(text) } else { Err(text) }
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        if let Some(mut c) = self.watcher.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
