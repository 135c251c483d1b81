//! Status-write benchmark (issue 27, "status writes measured"), on the real
//! watcher against the fake API. It counts the API writes (status PATCHes
//! and Events) per minute that one GitTarget and its GitProvider cost:
//! - healthy: nothing changes;
//! - flapping: the GitProvider's remote alternates between reachable and
//!   unreachable every 250 ms, once with the default `--status-interval`
//!   (10s) and once with `0s`, the unlimited baseline measured in the same
//!   run. The ratio is what the rate limit saves.
//!
//! Run: `cargo bench -p reverser-sidecar --bench status` (`-- SECONDS` for
//! another phase length, default 20).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::fakeapi::{self, FakeApi, Store};
use testkit::kubectl::Kubectl;
use testkit::mirror::NS;
use testkit::{free_port, sidecar};

fn api(remote: &str) -> FakeApi {
    let mut store = Store::new();
    store.load_crd_schemas(&testkit::fixtures::gitops_reverser_crds()).unwrap();
    store.seed_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})).unwrap();
    store
        .seed_object(json!({"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitProvider",
            "metadata": {"name": "lab-git", "namespace": NS}, "spec": {"url": remote, "allowedBranches": ["main"]}}))
        .unwrap();
    store
        .seed_object(json!({"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitTarget",
            "metadata": {"name": "lab", "namespace": NS},
            "spec": {"providerRef": {"name": "lab-git"}, "branch": "main", "path": "clusters/lab"}}))
        .unwrap();
    fakeapi::spawn(store).unwrap()
}

fn watcher(kubeconfig: &std::path::Path, dir: &std::path::Path, interval: &str) -> Child {
    Command::new(sidecar::binary())
        .args(["watch", "--git-target", &format!("{NS}/lab"), "--rescan", "100ms", "--status-interval", interval])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--socket")
        .arg(dir.join("absent.sock"))
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port().unwrap())])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the watcher starts")
}

/// Status writes and Events the API server received so far.
fn writes(api: &FakeApi) -> usize {
    api.requests()
        .iter()
        .filter(|r| {
            (r.method == "PATCH" && r.path.ends_with("/status")) || (r.method == "POST" && r.path.ends_with("/events"))
        })
        .count()
}

fn ready(k: &Kubectl) -> bool {
    let out = k.run(&[
        "get",
        "gitprovider/lab-git",
        "-n",
        NS,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
    ]);
    String::from_utf8_lossy(&out.stdout) == "True"
}

/// Writes per minute over `phase` with `interval`, flapping or not.
fn measure(remote: &std::path::Path, interval: &str, flap: bool, phase: Duration) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let good = format!("file://{}", remote.display());
    let api = api(&good);
    let kc = api.write_kubeconfig(&dir.path().join("kubeconfig"), NS).unwrap();
    let k = Kubectl::new(&[]).kubeconfig(&kc);
    let mut w = watcher(&kc, dir.path(), interval);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready(&k) {
        assert!(Instant::now() < deadline, "the GitProvider never became Ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Settled: the first reports are written.
    std::thread::sleep(Duration::from_secs(2));
    let start = writes(&api);
    let began = Instant::now();
    let mut up = false;
    while began.elapsed() < phase {
        if flap {
            let url = if up { good.clone() } else { "http://127.0.0.1:1/lab.git".into() };
            let patch: Value = json!({"spec": {"url": url}});
            let out = k.run(&["patch", "gitprovider/lab-git", "-n", NS, "--type=merge", "-p", &patch.to_string()]);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            up = !up;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let n = writes(&api) - start;
    let _ = w.kill();
    let _ = w.wait();
    n as f64 * 60.0 / began.elapsed().as_secs_f64()
}

fn main() {
    let secs: u64 = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(20);
    let phase = Duration::from_secs(secs);
    let tmp = tempfile::tempdir().unwrap();
    let remote = tmp.path().join("remote.git");
    testkit::mirror::init_bare(&remote);

    let healthy = measure(&remote, "10s", false, phase);
    let limited = measure(&remote, "10s", true, phase);
    let unlimited = measure(&remote, "0s", true, phase);
    println!("status writes per minute (GitTarget + GitProvider, status PATCHes and Events), {secs}s per phase:");
    println!("  healthy, --status-interval 10s:             {healthy:>7.1}/min");
    println!("  remote flapping every 250ms, 10s (default): {limited:>7.1}/min");
    println!("  remote flapping every 250ms, 0s (baseline): {unlimited:>7.1}/min");
    if limited > 0.0 {
        println!(
            "  the rate limit writes {:.2}x the baseline's writes ({:.1}x fewer)",
            limited / unlimited,
            unlimited / limited
        );
    }
}
