//! Every GitTarget served (issue 27 item 5): `reverser-sidecar controller`
//! turns a GitTarget created through the real `kubectl` into its mirror's
//! Deployment, ServiceAccount and RBAC derived from its rules, follows a
//! rule change, and removes everything with the GitTarget (through its
//! finalizer, which the fake API honours as the real one does). The
//! Deployment's own container arguments are run as the mirror in between.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rules::mirror::controller::mirror_name;
use serde_json::{Value, json};
use testkit::fakeapi::{self, FakeApi, Store};
use testkit::kubectl::Kubectl;
use testkit::mirror::{NS, configmap, git};
use testkit::{fixtures, free_port, sidecar};

/// Where the controller and the mirrors' Deployments run.
const OPERATOR_NS: &str = "reverser-system";

struct Cluster {
    api: FakeApi,
    dir: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
    remote: std::path::PathBuf,
    children: Vec<Child>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let remote = dir.path().join("remote.git");
        std::fs::create_dir_all(&remote).unwrap();
        git(&remote, &["init", "--quiet", "--bare", "--initial-branch=main"]);
        let mut store = Store::new();
        store.load_crd_schemas(&fixtures::gitops_reverser_crds()).unwrap();
        for ns in [NS, OPERATOR_NS] {
            store.seed_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})).unwrap();
        }
        let api = fakeapi::spawn(store).unwrap();
        let kubeconfig = api.write_kubeconfig(&dir.path().join("kubeconfig"), NS).unwrap();
        Cluster { api, dir, kubeconfig, remote, children: Vec::new() }
    }

    fn log(&self, name: &str) -> std::fs::File {
        std::fs::File::create(self.dir.path().join(format!("{name}.log"))).unwrap()
    }

    fn read_log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{name}.log"))).unwrap_or_default()
    }

    fn kubectl(&self) -> Kubectl {
        Kubectl::new(&[]).kubeconfig(&self.kubeconfig)
    }

    fn apply(&self, objects: &[Value]) {
        let yaml: String = objects.iter().map(|o| format!("---\n{}", serde_norway::to_string(o).unwrap())).collect();
        let out = self.kubectl().run_with_stdin(&["apply", "-f", "-"], &yaml);
        assert!(out.status.success(), "kubectl apply: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn get(&self, args: &[&str]) -> Option<Value> {
        let mut all = vec!["get"];
        all.extend(args);
        all.extend(["-o", "json"]);
        let out = self.kubectl().run(&all);
        out.status.success().then(|| serde_json::from_slice(&out.stdout).unwrap())
    }

    fn wait(&self, what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\ncontroller log:\n{}",
                self.read_log("controller")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn target_objects(remote: &std::path::Path) -> Vec<Value> {
    vec![
        json!({"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitProvider", "metadata": {"name": "lab-git", "namespace": NS},
               "spec": {"url": format!("file://{}", remote.display()), "allowedBranches": ["main"],
                        "push": {"commitWindow": "200ms"}}}),
        json!({"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitTarget", "metadata": {"name": "lab", "namespace": NS},
               "spec": {"providerRef": {"name": "lab-git"}, "branch": "main", "path": "clusters/lab"}}),
        json!({"apiVersion": "configbutler.ai/v1alpha3", "kind": "WatchRule", "metadata": {"name": "lab-rules", "namespace": NS},
               "spec": {"targetRef": {"name": "lab"}, "rules": [{"resources": ["configmaps"]}]}}),
    ]
}

fn rules_of(role: &Value) -> Vec<(Vec<String>, Vec<String>, Vec<String>)> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array().map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect()).unwrap_or_default()
    };
    role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (strings(&r["apiGroups"]), strings(&r["resources"]), strings(&r["verbs"])))
        .collect()
}

/// The container's arguments with the pod's paths and ports made local.
fn local_args(container: &Value, local: &[(&str, String)]) -> Vec<String> {
    container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| local.iter().fold(a.as_str().unwrap().to_owned(), |arg, (from, to)| arg.replace(from, to)))
        .collect()
}

#[test]
fn a_gittarget_created_and_deleted_through_kubectl_starts_and_stops_its_mirror() {
    let mut c = Cluster::start();
    let controller = Command::new(sidecar::binary())
        .args(["controller", "--image", "ghcr.io/example/reverser:test", "--sweep", "300ms"])
        .args(["--operator-namespace", OPERATOR_NS, "--sidecar-arg=--author-attribution-grace=1s"])
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .env("REVERSER_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::from(c.log("controller")))
        .spawn()
        .unwrap();
    c.children.push(controller);

    c.apply(&target_objects(&c.remote));
    let m = mirror_name("reverser", NS, "lab");
    let watch = format!("{m}-watch");
    c.wait("the mirror's Deployment", || c.get(&["deployment", &m, "-n", OPERATOR_NS]).is_some());
    let dep = c.get(&["deployment", &m, "-n", OPERATOR_NS]).unwrap();
    assert_eq!(dep["metadata"]["annotations"]["reverser.dev/git-target"], "shop/lab");
    let target = c.get(&["gittarget", "lab", "-n", NS]).unwrap();
    assert_eq!(target["metadata"]["finalizers"], json!(["reverser.dev/mirror"]));
    let pod = &dep["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], m.as_str());
    assert!(c.get(&["serviceaccount", &m, "-n", OPERATOR_NS]).is_some());
    let binding = c.get(&["rolebinding", &m, "-n", NS]).unwrap();
    assert_eq!(binding["subjects"][0]["namespace"], OPERATOR_NS);
    let watch_role = c.get(&["role", &watch, "-n", NS]).unwrap();
    assert_eq!(
        rules_of(&watch_role),
        vec![(vec!["".to_owned()], vec!["configmaps".to_owned()], vec!["list".to_owned(), "watch".to_owned()])]
    );
    assert!(c.get(&["clusterrole", &m]).is_some());
    let shown = c.get(&["deployment", &m, "-n", OPERATOR_NS, "--show-managed-fields"]).unwrap();
    let managed = shown["metadata"]["managedFields"][0]["manager"].as_str().map(str::to_owned);
    assert_eq!(managed.as_deref(), Some("reverser-controller"));

    // A rule that also names deployments: the Role follows.
    let mut rule = target_objects(&c.remote)[2].clone();
    rule["spec"]["rules"] =
        json!([{"resources": ["configmaps"]}, {"apiGroups": ["apps"], "resources": ["deployments"]}]);
    c.apply(&[rule]);
    c.wait("the Role to grant deployments", || {
        c.get(&["role", &watch, "-n", NS])
            .is_some_and(|r| rules_of(&r).iter().any(|(_, res, _)| res == &["deployments"]))
    });

    // The Deployment's containers, run here as they run in the pod, mirror the GitTarget.
    let socket = c.dir.path().join("reverser.sock").display().to_string();
    let (sidecar_port, watcher_port) = (free_port().unwrap(), free_port().unwrap());
    let local = [
        ("/var/run/reverser/reverser.sock", socket),
        ("/var/lib/reverser/clone", c.dir.path().join("clone").display().to_string()),
        ("0.0.0.0:9090", format!("127.0.0.1:{sidecar_port}")),
        ("0.0.0.0:9091", format!("127.0.0.1:{watcher_port}")),
    ];
    for (container, log) in [(&pod["initContainers"][0], "serve"), (&pod["containers"][0], "watch")] {
        let child = Command::new(sidecar::binary())
            .args(local_args(container, &local))
            .arg("--kubeconfig")
            .arg(&c.kubeconfig)
            .args(if log == "watch" { &["--rescan", "200ms"][..] } else { &[][..] })
            .env("REVERSER_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(c.log(log)))
            .spawn()
            .unwrap();
        c.children.push(child);
    }
    c.api.store.lock().unwrap().create("configmaps", NS, configmap("web", "1")).unwrap();
    c.wait("the ConfigMap in the remote", || {
        Command::new("git")
            .arg("-C")
            .arg(&c.remote)
            .args(["cat-file", "-e", &format!("main:clusters/lab/{NS}/configmaps/web.yaml")])
            .status()
            .is_ok_and(|s| s.success())
    });

    // Deleted through kubectl (which waits for the finalizer): everything goes with it.
    let out = c.kubectl().run(&["delete", "gittarget", "lab", "-n", NS, "--timeout=30s"]);
    assert!(out.status.success(), "kubectl delete: {}", String::from_utf8_lossy(&out.stderr));
    c.wait("the GitTarget gone", || c.get(&["gittarget", "lab", "-n", NS]).is_none());
    assert!(c.get(&["deployment", &m, "-n", OPERATOR_NS]).is_none());
    assert!(c.get(&["serviceaccount", &m, "-n", OPERATOR_NS]).is_none());
    let event = format!("{m}-event");
    for (kind, ns, name) in [("role", NS, &watch), ("rolebinding", NS, &m), ("role", "default", &event)] {
        assert!(c.get(&[kind, name, "-n", ns]).is_none(), "{kind} {ns}/{name} left");
    }
    assert!(c.get(&["clusterrole", &m]).is_none() && c.get(&["clusterrolebinding", &m]).is_none());
    // And the watcher, its GitTarget gone, stops by itself.
    let watcher = c.children.last_mut().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while watcher.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the watcher kept running:\n{}", c.read_log("watch"));
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = c.read_log("controller");
    assert!(log.contains("serving GitTarget shop/lab"), "{log}");
    assert!(log.contains("GitTarget shop/lab deleted: its mirror and RBAC are removed"), "{log}");
}
