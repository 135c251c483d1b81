//! CommitRequest, "save now" (issue 27 item 2), end to end: the fake API
//! with gitops-reverser's CRDs, the real `reverser-sidecar serve` and
//! `watch`, a bare Git remote, and the real `kubectl` reading what the
//! watcher wrote. The behaviour follows gitops-reverser
//! (`internal/controller/commitrequest_controller.go`,
//! `commitrequest_finalize.go`, `internal/git/commit_request_attach_loop.go`):
//! the request finalizes its author's open window with its message
//! verbatim; with nothing of the author's pending it ends Ready with
//! NoWindowInGrace (nothing pending) or WindowMismatch (someone else's).

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::kubectl::Kubectl;
use testkit::mirror::{Mirror, NS, cm_path, configmap, git};

/// A commit window the test never waits out: only a CommitRequest (or the
/// end of the test) flushes it.
const LONG_WINDOW: &str = "60s";

fn start() -> Mirror {
    Mirror::start(|s| {
        s.provider["spec"]["push"]["commitWindow"] = json!(LONG_WINDOW);
    })
}

fn request(name: &str, message: Option<&str>, close_delay: Option<u64>) -> Value {
    let mut spec = json!({"targetRef": {"name": "lab"}});
    if let Some(m) = message {
        spec["message"] = json!(m);
    }
    if let Some(d) = close_delay {
        spec["closeDelaySeconds"] = json!(d);
    }
    json!({"apiVersion": "configbutler.ai/v1alpha3", "kind": "CommitRequest",
           "metadata": {"name": name, "namespace": NS}, "spec": spec})
}

fn get(k: &Kubectl, name: &str, path: &str) -> String {
    let out = k.run(&["get", &format!("commitrequest/{name}"), "-n", NS, "-o", &format!("jsonpath={path}")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn condition(k: &Kubectl, name: &str, ty: &str, field: &str) -> String {
    get(k, name, &format!("{{.status.conditions[?(@.type==\"{ty}\")].{field}}}"))
}

fn wait_ready(m: &Mirror, k: &Kubectl, name: &str) {
    let out = k.run(&["wait", "--for=condition=Ready", &format!("commitrequest/{name}"), "-n", NS, "--timeout=30s"]);
    assert!(
        out.status.success(),
        "kubectl wait: {}\nwatcher log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        m.watcher_log()
    );
}

#[test]
fn a_commit_request_commits_its_authors_window_with_its_message_verbatim() {
    let m = start();
    let k = Kubectl::new(&[]).kubeconfig(&m.kubeconfig);
    let before = m.commits();
    let started = Instant::now();
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    let message = "Rotate the web settings\n\nAsked for by the release checklist.";
    m.act("alice", true, |s| {
        s.create("commitrequests", NS, request("save-web", Some(message), None)).unwrap();
    });
    wait_ready(&m, &k, "save-web");
    assert!(started.elapsed() < Duration::from_secs(30), "the window was finalized by the request, not its 60s timer");
    assert!(m.remote_has(&cm_path("web")), "the change is in the remote");
    assert_eq!(m.commits(), before + 1);
    let head = git(&m.remote, &["rev-parse", "main"]).trim().to_string();
    assert_eq!(git(&m.remote, &["log", "-1", "--format=%B", "main"]).trim_end(), message, "the message, verbatim");
    assert_eq!(git(&m.remote, &["log", "-1", "--format=%an", "main"]).trim(), "alice");

    assert_eq!(get(&k, "save-web", "{.status.sha}"), head);
    assert_eq!(get(&k, "save-web", "{.status.branch}"), "main");
    assert_eq!(condition(&k, "save-web", "Ready", "reason"), "Committed");
    assert_eq!(condition(&k, "save-web", "Pushed", "status"), "True");
    assert_eq!(condition(&k, "save-web", "Stalled", "status"), "False");
    assert_eq!(condition(&k, "save-web", "AuthorAttributed", "status"), "True");
    assert_eq!(condition(&k, "save-web", "AuthorAttributed", "reason"), "AttributedFromAudit");
    // The CRD's printer columns: NAME GITTARGET READY REASON SHA AGE.
    let table = String::from_utf8_lossy(&k.run(&["get", "commitrequests", "-n", NS]).stdout).into_owned();
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..5], ["save-web", "lab", "True", "Committed", head.as_str()], "{table}");
}

#[test]
fn with_nothing_of_its_author_pending_a_request_ends_without_a_commit() {
    let m = start();
    let k = Kubectl::new(&[]).kubeconfig(&m.kubeconfig);
    let before = m.commits();
    // Nothing pending at all.
    m.act("bob", true, |s| {
        s.create("commitrequests", NS, request("save-nothing", Some("Nothing to save"), None)).unwrap();
    });
    wait_ready(&m, &k, "save-nothing");
    assert_eq!(condition(&k, "save-nothing", "Ready", "reason"), "NoWindowInGrace");
    assert_eq!(condition(&k, "save-nothing", "Pushed", "status"), "False");
    assert_eq!(get(&k, "save-nothing", "{.status.sha}"), "");
    assert_eq!(m.commits(), before);

    // Carol's change is pending; bob asks (after a one-second close delay).
    // His request ends WindowMismatch, and carol's change is committed as
    // hers, with the generated message, never bob's.
    m.act("carol", true, |s| {
        s.create("configmaps", NS, configmap("carols", "1")).unwrap();
    });
    m.act("bob", true, |s| {
        s.create("commitrequests", NS, request("save-mismatch", Some("Bob's save"), Some(1))).unwrap();
    });
    wait_ready(&m, &k, "save-mismatch");
    assert_eq!(condition(&k, "save-mismatch", "Ready", "reason"), "WindowMismatch");
    assert!(m.remote_has(&cm_path("carols")));
    assert_eq!(m.authors(&cm_path("carols")), ["carol"]);
    let subject = git(&m.remote, &["log", "-1", "--format=%s", "main"]);
    assert!(!subject.contains("Bob's save"), "{subject}");

    // A request the watcher already finished is left alone after a restart.
    let sha_before = get(&k, "save-mismatch", "{.status.conditions[?(@.type==\"Ready\")].lastTransitionTime}");
    let mut m = m;
    m.stop_watcher();
    m.start_watcher(&[]);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(get(&k, "save-mismatch", "{.status.conditions[?(@.type==\"Ready\")].lastTransitionTime}"), sha_before);
    assert_eq!(condition(&k, "save-mismatch", "Ready", "reason"), "WindowMismatch");
}
