//! A whole cluster's worth of objects for the scale benchmarks (`scale`,
//! `steady`): ConfigMaps with data, Deployments, and custom resources (the
//! rest of the types), spread over the namespaces, at realistic sizes; the
//! fake API store seeded with them, the real watcher over every type, and
//! what the benchmarks read of the remote and the processes.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use testkit::fakeapi::{ResourceType, Store};
use testkit::mirror::git;

/// `objects` objects over `types` types in `namespaces` namespaces: object
/// `i` is of type `i % types`, named `obj-<i>`, in namespace
/// `ns-<(i / types) % namespaces>`.
#[derive(Debug, Clone, Copy)]
pub struct Cluster {
    pub objects: usize,
    pub types: usize,
    pub namespaces: usize,
}

/// Type `t`: (group, version, plural, kind); 0 and 1 are built-ins.
pub fn type_of(t: usize) -> (String, String, String, String) {
    match t {
        0 => ("".into(), "v1".into(), "configmaps".into(), "ConfigMap".into()),
        1 => ("apps".into(), "v1".into(), "deployments".into(), "Deployment".into()),
        _ => ("bench.example.com".into(), "v1".into(), format!("widget{t}s"), format!("Widget{t}")),
    }
}

/// The `--resource` name of type `t` (also the fake API store's name of it).
pub fn resource_arg(t: usize) -> String {
    let (group, _, plural, _) = type_of(t);
    if group.is_empty() { plural } else { format!("{plural}.{group}") }
}

/// The URL path of type `t` across all namespaces: what its lists and its
/// watch request.
pub fn api_path(t: usize) -> String {
    let (group, version, plural, _) = type_of(t);
    if group.is_empty() { format!("/api/{version}/{plural}") } else { format!("/apis/{group}/{version}/{plural}") }
}

/// RFC 3339 for `ago` before now.
pub fn stamp(ago: Duration) -> String {
    let now = SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    rules::attribution::why::history::rfc3339(now - ago.as_secs() as i64)
}

impl Cluster {
    /// Object `i` (generation `g`): a realistic size for its type.
    /// Generation 1 was created a week ago, later ones just now; the managed
    /// fields say when, as an API server records every write.
    pub fn object(&self, i: usize, g: u32) -> (usize, Value) {
        let t = i % self.types;
        let ns = format!("ns-{}", (i / self.types) % self.namespaces);
        let name = format!("obj-{i}");
        let (group, version, _, kind) = type_of(t);
        let api_version = if group.is_empty() { version } else { format!("{group}/{version}") };
        let week = Duration::from_secs(7 * 24 * 3600);
        let written = if g == 1 { stamp(week) } else { stamp(Duration::ZERO) };
        let meta = json!({"name": name, "namespace": ns, "creationTimestamp": stamp(week),
            "labels": {"app": format!("app-{}", i % 97), "tier": "bench"},
            "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
                "apiVersion": api_version, "time": written, "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]});
        let value = match t {
            0 => json!({"apiVersion": api_version, "kind": kind, "metadata": meta, "data": {
                "settings.yaml": format!("replicas: {g}\nregion: eu-west-{}\nfeatures:\n  - a\n  - b\n", i % 3),
                "endpoint": format!("https://svc-{i}.example.internal:8443/api/v{g}"),
                "notes": "x".repeat(400),
            }}),
            1 => json!({"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": {
                "replicas": 2 + g,
                "selector": {"matchLabels": {"app": format!("app-{}", i % 97)}},
                "template": {"metadata": {"labels": {"app": format!("app-{}", i % 97)}}, "spec": {"containers": [{
                    "name": "main", "image": format!("registry.example.com/app:{g}.{}", i % 10),
                    "ports": [{"containerPort": 8080}],
                    "env": [{"name": "MODE", "value": "production"}, {"name": "SHARD", "value": format!("{}", i % 16)}],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                }]}},
            }}),
            _ => json!({"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": {
                "size": i, "generation": g, "owner": format!("team-{}", i % 12), "enabled": i.is_multiple_of(2),
            }}),
        };
        (t, value)
    }

    /// The generation [`Cluster::object`] wrote into `value`, an object of
    /// type `t` (as the fake API or a document in Git has it).
    pub fn generation(t: usize, value: &Value) -> Option<u32> {
        let g = match t {
            0 => value.pointer("/data/endpoint")?.as_str()?.rsplit_once("/api/v")?.1.parse().ok()?,
            1 => value.pointer("/spec/replicas")?.as_u64()?.checked_sub(2)?,
            _ => value.pointer("/spec/generation")?.as_u64()?,
        };
        u32::try_from(g).ok()
    }

    /// The fake API's store: every type registered, the namespaces, and
    /// every object at generation 1.
    pub fn store(&self) -> Store {
        let mut store = Store::new();
        for t in 2..self.types {
            let (group, version, plural, kind) = type_of(t);
            store.register(ResourceType::builtin(&group, &version, &plural, &kind, true));
        }
        for n in 0..self.namespaces {
            store
                .seed_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("ns-{n}")}}))
                .unwrap();
        }
        for i in 0..self.objects {
            store.seed_object(self.object(i, 1).1).unwrap();
        }
        store
    }

    /// `reverser-sidecar watch` over every type, with this commit window,
    /// sending to the `serve` at `socket`; its log appended to `log`.
    pub fn watcher(&self, kubeconfig: &Path, socket: &Path, metrics: u16, log: &Path, window: &str) -> Child {
        let mut cmd = Command::new(testkit::sidecar::binary());
        cmd.arg("watch");
        for t in 0..self.types {
            cmd.args(["--resource", &resource_arg(t)]);
        }
        cmd.args(["--commit-window", window, "--kubeconfig"])
            .arg(kubeconfig)
            .arg("--socket")
            .arg(socket)
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
            .env("REVERSER_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap())
            .spawn()
            .expect("watch starts")
    }
}

/// Files in the remote's `main` (0 before the first push).
pub fn files(remote: &Path) -> usize {
    let out = Command::new("git")
        .arg("-C")
        .arg(remote)
        .args(["ls-tree", "-r", "--name-only", "main"])
        .stderr(Stdio::null())
        .output()
        .expect("git runs");
    out.stdout.iter().filter(|b| **b == b'\n').count()
}

/// Commits on the remote's `main`.
pub fn commits(remote: &Path) -> usize {
    git(remote, &["rev-list", "--count", "main"]).trim().parse().unwrap_or(0)
}

/// The sum of the samples of a Prometheus metric on `port` whose lines
/// start with `name` (a name, or a name with its first labels).
pub fn metric(port: u16, name: &str) -> u64 {
    testkit::sidecar::http_get(port, "/metrics")
        .lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// SIGTERM, and waits for the exit.
pub fn stop(mut child: Child) {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();
}

/// The last `n` lines of a log file.
pub fn tail(log: &Path, n: usize) -> String {
    let bytes = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().rev().take(n).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// Waits until `done`, or panics naming `what` after `within`.
pub fn until(what: &str, within: Duration, log: &Path, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        if Instant::now() > deadline {
            panic!("timed out waiting for {what}; the watcher's last lines:\n{}", tail(log, 30));
        }
        // Each poll is one HTTP GET of the watcher's metrics: cheap enough to
        // ask often, so the figure is not rounded up by a long sleep.
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Where a process's resident memory is: (anonymous, file-backed) MiB,
/// from `/proc/<pid>/status` (file-backed: mapped pack files and binaries).
pub fn rss_split(pid: u32) -> (f64, f64) {
    let mib = |field| testkit::process::status_kib(pid, field).unwrap_or(0) as f64 / 1024.0;
    (mib("RssAnon"), mib("RssFile"))
}

/// Resident memory of `pid`, MiB.
pub fn rss_mib(pid: u32) -> f64 {
    super::rss_kib(pid) as f64 / 1024.0
}
