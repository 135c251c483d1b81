//! The mirror end to end (spec/mirror.md): the real `reverser-sidecar watch`
//! and `serve --git-target` processes, configured by configbutler.ai CRs in
//! the fake Kubernetes API (validated against the vendored CRD schemas),
//! audit events posted over real mTLS as the API server would, and a real
//! bare Git repository read back with the `git` CLI.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::fakeapi::{self, FakeApi, Store};
use testkit::sidecar::{self, Sidecar};
use testkit::{audit, free_port};

const NS: &str = "shop";
const PREFIX: &str = "clusters/lab";
const UNRESOLVED: &str = "unknown (attribution unresolved)";

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).env("GIT_CONFIG_NOSYSTEM", "1").output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn cm_path(name: &str) -> String {
    format!("{PREFIX}/core/v1/configmaps/{NS}/{name}.yaml")
}

fn configmap(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}, "data": {"k": value}})
}

/// What the CRs say, with a few knobs the scenarios turn.
struct Setup {
    provider: Value,
    target: Value,
    rules: Vec<Value>,
}

impl Setup {
    fn new(remote: &Path) -> Self {
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
        }
    }
}

/// One mirror: the fake API, the bare remote, the sidecar, the watcher.
struct Mirror {
    api: FakeApi,
    dir: tempfile::TempDir,
    remote: PathBuf,
    kubeconfig: PathBuf,
    sidecar: Sidecar,
    watcher: Option<Child>,
    watcher_metrics: u16,
}

impl Mirror {
    fn start(setup: impl FnOnce(&mut Setup)) -> Mirror {
        Self::start_with(setup, &[], &[])
    }

    fn start_with(setup: impl FnOnce(&mut Setup), serve_args: &[&str], watch_args: &[&str]) -> Mirror {
        let dir = tempfile::tempdir().unwrap();
        let remote = dir.path().join("remote.git");
        std::fs::create_dir_all(&remote).unwrap();
        git(&remote, &["init", "--quiet", "--bare", "--initial-branch=main"]);
        let mut s = Setup::new(&remote);
        setup(&mut s);
        let mut store = Store::new();
        store.load_crd_schemas(&testkit::fixtures::gitops_reverser_crds()).unwrap();
        store.seed_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})).unwrap();
        for o in [s.provider, s.target].into_iter().chain(s.rules) {
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
            "--author-attribution-grace".to_owned(),
            "1s".to_owned(),
        ];
        args.extend(serve_args.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let sidecar = Sidecar::builder("serve").args(&args).start();
        let mut m =
            Mirror { api, dir, remote, kubeconfig, sidecar, watcher: None, watcher_metrics: free_port().unwrap() };
        m.start_watcher(watch_args);
        m
    }

    fn start_watcher(&mut self, extra: &[&str]) {
        let child = Command::new(sidecar::binary())
            .args(["watch", "--git-target", &format!("{NS}/lab"), "--rescan", "200ms", "--kubeconfig"])
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
        // Up once its first lists went to the sidecar.
        self.wait("the watcher's first reconcile", || {
            self.watcher_metric("gitopsreverser_mirror_reconciles_total") >= 1
        });
    }

    fn stop_watcher(&mut self) {
        if let Some(mut c) = self.watcher.take() {
            Command::new("kill").args(["-TERM", &c.id().to_string()]).status().unwrap();
            c.wait().unwrap();
        }
    }

    fn watcher_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("watcher.log")).unwrap_or_default()
    }

    fn watcher_metric(&self, name: &str) -> u64 {
        let text = sidecar::http_get(self.watcher_metrics, "/metrics");
        text.lines()
            .filter(|l| l.starts_with(name) && !l.starts_with('#'))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .map(|v| v as u64)
            .sum()
    }

    /// Runs `f` on the store as `user`, then posts the audit events of its
    /// writes to the sidecar (unless `audited` is false).
    fn act(&self, user: &str, audited: bool, f: impl FnOnce(&mut Store)) {
        let writes = {
            let mut store = self.api.store.lock().unwrap();
            f(&mut store.as_user(user));
            store.take_writes()
        };
        if audited {
            let events: Vec<Value> = writes.iter().map(audit::from_write).collect();
            assert_eq!(self.sidecar.post_events("default", &events), 200);
        }
    }

    fn wait(&self, what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}\nwatcher log:\n{}", self.watcher_log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn remote_has(&self, path: &str) -> bool {
        let out = Command::new("git")
            .arg("-C")
            .arg(&self.remote)
            .args(["cat-file", "-e", &format!("main:{path}")])
            .output()
            .unwrap();
        out.status.success()
    }

    fn commits(&self) -> usize {
        let out =
            Command::new("git").arg("-C").arg(&self.remote).args(["rev-list", "--count", "main"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0)
    }

    /// Authors of the commits touching `path`, newest first.
    fn authors(&self, path: &str) -> Vec<String> {
        git(&self.remote, &["log", "--format=%an", "main", "--", path]).lines().map(str::to_owned).collect()
    }

    fn show(&self, path: &str) -> String {
        git(&self.remote, &["show", &format!("main:{path}")])
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

#[test]
fn creates_updates_and_a_finalized_deletion_are_authored_by_their_actors() {
    let m = Mirror::start(|_| {});
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's create", || m.remote_has(&cm_path("web")));
    m.act("bob", true, |s| {
        s.patch("configmaps", NS, "web", &json!({"data": {"k": "2"}}), false).unwrap();
    });
    m.wait("bob's update", || m.authors(&cm_path("web")).len() == 2);
    assert_eq!(m.authors(&cm_path("web")), ["bob", "alice"]);
    assert!(m.show(&cm_path("web")).contains("k: '2'"), "{}", m.show(&cm_path("web")));

    // Deleted while a finalizer holds it; another identity clears the
    // finalizer. The deleter is the author of the removal; the finalizer's
    // controller makes no commit.
    let mut guarded = configmap("guarded", "1");
    guarded["metadata"]["finalizers"] = json!(["example.com/keep"]);
    m.act("carol", true, |s| {
        s.create("configmaps", NS, guarded).unwrap();
    });
    m.wait("carol's create", || m.remote_has(&cm_path("guarded")));
    m.act("dave", true, |s| {
        s.delete("configmaps", NS, "guarded", None, None).unwrap();
    });
    m.wait("dave's deletion", || !m.remote_has(&cm_path("guarded")));
    let before_cleanup = m.commits();
    m.act("system:serviceaccount:kube-system:cleaner", true, |s| {
        s.patch("configmaps", NS, "guarded", &json!({"metadata": {"finalizers": null}}), false).unwrap();
    });
    m.act("erin", false, |s| {
        s.create("configmaps", NS, configmap("quiet", "1")).unwrap();
    });
    m.wait("erin's unaudited create", || m.remote_has(&cm_path("quiet")));
    assert_eq!(m.authors(&cm_path("guarded")), ["dave", "carol"]);
    assert_eq!(m.commits(), before_cleanup + 1, "the finalizer's clearing made no commit");
    // No audit event: exactly the unresolved author, never a guess.
    assert_eq!(m.authors(&cm_path("quiet")), [UNRESOLVED]);
    // The committer is the provider's, never the author.
    let committers = git(&m.remote, &["log", "--format=%cn <%ce>", "main"]);
    assert!(committers.lines().all(|l| l == "Lab Mirror <mirror@lab.invalid>"), "{committers}");
}
