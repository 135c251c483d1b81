//! Live configuration (issue 27 item 3): a change to the GitTarget or its
//! GitProvider takes effect without restarting the sidecar or the watcher,
//! and a deleted GitTarget stops its mirror. The fake API serves the CRs
//! and their watches; the changes are made through the real `kubectl`, as a
//! user makes them.

use std::time::Duration;

use serde_json::json;
use testkit::kubectl::Kubectl;
use testkit::mirror::{Mirror, NS, cm_path, configmap, git};

fn kubectl(m: &Mirror) -> Kubectl {
    Kubectl::new(&[]).kubeconfig(&m.kubeconfig)
}

fn patch(k: &Kubectl, object: &str, patch: serde_json::Value) {
    let out = k.run(&["patch", object, "-n", NS, "--type=merge", "-p", &patch.to_string()]);
    assert!(out.status.success(), "kubectl patch {object}: {}", String::from_utf8_lossy(&out.stderr));
}

/// One of the sidecar's metrics, summed over its label sets.
fn sidecar_metric(m: &Mirror, name: &str) -> i64 {
    m.sidecar
        .metrics()
        .lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as i64)
        .sum()
}

#[test]
fn a_changed_template_and_commit_window_apply_without_a_restart() {
    let m = Mirror::start(|_| {});
    let k = kubectl(&m);
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("before", "1")).unwrap();
    });
    m.wait("the first change", || m.remote_has(&cm_path("before")));
    // A new message template (GitProvider spec.commit.message), through kubectl.
    patch(
        &k,
        "gitprovider/lab-git",
        json!({"spec": {"commit": {"message": {"eventTemplate": "live: {{.Operation}} {{.Name}}"}}}}),
    );
    m.wait("the sidecar to apply the change", || sidecar_metric(&m, "gitopsreverser_mirror_config_reloads_total") == 1);
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("after", "1")).unwrap();
    });
    m.wait("the second change", || m.remote_has(&cm_path("after")));
    let subject = git(&m.remote, &["log", "-1", "--format=%s", "main"]);
    assert_eq!(subject.trim(), "live: CREATE after", "the new template titles the commit");

    // A long commit window: the watcher follows it (a change waits in its window).
    patch(&k, "gitprovider/lab-git", json!({"spec": {"push": {"commitWindow": "1h"}}}));
    m.wait("the watcher to follow the window", || m.watcher_log().contains("the commit window and prune mode follow"));
    m.act("bob", true, |s| {
        s.create("configmaps", NS, configmap("held", "1")).unwrap();
    });
    std::thread::sleep(Duration::from_secs(2));
    assert!(!m.remote_has(&cm_path("held")), "a 1h window flushed within 2s");
}

#[test]
fn narrowing_allowed_branches_stops_pushes_and_says_why_until_it_is_allowed_again() {
    let m = Mirror::start(|_| {});
    let k = kubectl(&m);
    patch(&k, "gitprovider/lab-git", json!({"spec": {"allowedBranches": ["release"]}}));
    m.wait("the sidecar to hold", || sidecar_metric(&m, "gitopsreverser_mirror_held") == 1);
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("blocked", "1")).unwrap();
    });
    // The GitTarget says why: its branch is not allowed.
    let reason = "{.status.conditions[?(@.type==\"Ready\")].reason}";
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let out = k.run(&["get", "gittarget/lab", "-n", NS, "-o", &format!("jsonpath={reason}")]);
        if String::from_utf8_lossy(&out.stdout) == "BranchNotAllowed" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no BranchNotAllowed\n{}", m.watcher_log());
        std::thread::sleep(Duration::from_millis(150));
    }
    std::thread::sleep(Duration::from_secs(1));
    assert!(!m.remote_has(&cm_path("blocked")), "pushed to a branch no longer allowed");
    assert!(m.watcher_log().contains("is not in GitProvider"), "the watcher says why its window waits");

    // Allowed again: the held change lands, nothing lost, still alice's.
    patch(&k, "gitprovider/lab-git", json!({"spec": {"allowedBranches": ["main"]}}));
    m.wait("the held change", || m.remote_has(&cm_path("blocked")));
    assert_eq!(sidecar_metric(&m, "gitopsreverser_mirror_held"), 0);
    assert_eq!(m.authors(&cm_path("blocked")), ["alice"]);
}

#[test]
fn deleting_the_gittarget_stops_its_mirror() {
    let mut m = Mirror::start(|_| {});
    let k = kubectl(&m);
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("kept", "1")).unwrap();
    });
    m.wait("the first change", || m.remote_has(&cm_path("kept")));
    let out = k.run(&["delete", "gittarget/lab", "-n", NS]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut watcher = m.watcher.take().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = watcher.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the watcher kept running\n{}", m.watcher_log());
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "exit {status:?}\n{}", m.watcher_log());
    assert!(m.watcher_log().contains("the GitTarget was deleted: its mirror stops"), "{}", m.watcher_log());
    // Nothing is mirrored any more, by the sidecar either.
    m.wait("the sidecar to hold", || sidecar_metric(&m, "gitopsreverser_mirror_held") == 1);
    let before = m.commits();
    m.act("bob", true, |s| {
        s.create("configmaps", NS, configmap("after-delete", "1")).unwrap();
    });
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(m.commits(), before);
    assert!(!m.remote_has(&cm_path("after-delete")));
}

/// The GitProvider's signing Secret is watched by name: a rotated key signs
/// the next commit without a restart (issue 27 item 3, "and Secrets").
#[test]
fn a_rotated_signing_key_signs_the_next_commit_without_a_restart() {
    use base64::Engine as _;
    let b64 = |s: &[u8]| base64::engine::general_purpose::STANDARD.encode(s);
    let unb64 = |s: &str| base64::engine::general_purpose::STANDARD.decode(s).unwrap();
    let m = Mirror::start(|s| {
        s.provider["spec"]["commit"]["signing"] =
            json!({"secretRef": {"name": "lab-signing"}, "generateWhenMissing": true});
    });
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("first", "1")).unwrap();
    });
    m.wait("the first change", || m.remote_has(&cm_path("first")));
    let generated = m.api.store.lock().unwrap().get("secrets", NS, "lab-signing").unwrap();
    let old_pub = String::from_utf8(unb64(generated["data"]["signing.pub"].as_str().unwrap())).unwrap();

    // A new key, as a user rotates it: ssh-keygen, then kubectl apply.
    let key = m.dir.path().join("rotated");
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "rotated", "-f"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success());
    let private = std::fs::read(&key).unwrap();
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "lab-signing", "namespace": NS},
                        "data": {"signing.key": b64(&private), "signing.pub": b64(public.as_bytes())}});
    let out = kubectl(&m).run_with_stdin(&["apply", "-f", "-"], &secret.to_string());
    assert!(out.status.success(), "kubectl apply: {}", String::from_utf8_lossy(&out.stderr));
    m.wait("the sidecar to reload", || sidecar_metric(&m, "gitopsreverser_mirror_config_reloads_total") >= 1);
    m.act("bob", true, |s| {
        s.create("configmaps", NS, configmap("second", "1")).unwrap();
    });
    m.wait("the second change", || m.remote_has(&cm_path("second")));
    // The new commit verifies with the rotated key and not with the old one.
    m.verify_head(&public).expect("the rotated key signs the next commit");
    assert!(m.verify_head(&old_pub).is_err(), "the old key no longer does");
}
