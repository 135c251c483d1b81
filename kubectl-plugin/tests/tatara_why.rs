//! `kubectl tatara why` through the real `kubectl`, against the fake API
//! seeded with objects valid under the operator's CRD schemas
//! (`shared/testkit/fixtures/crds/tatara/`). What it answers follows the
//! operator's code at d22349a; the rules are unit-tested in
//! `rules::ownership::why`, this checks the command a user runs: the
//! lookups, the reads (Projects, QueuedEvents), the text, JSON and the
//! errors, and that nothing is written.

use std::process::Output;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use testkit::fakeapi::{self, FakeApi, Store};
use testkit::kubectl::Kubectl;

const NS: &str = "tatara";

struct World {
    _rt: tokio::runtime::Runtime,
    api: FakeApi,
    kubectl: Kubectl,
}

fn task_ref(task: &Value) -> Value {
    json!({"apiVersion": "tatara.dev/v1alpha1", "kind": "Task", "name": task["metadata"]["name"],
           "uid": task["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true})
}

fn issue(n: i64, owner: Option<&Value>, state: &str) -> Value {
    let refs: Vec<Value> = owner.map(task_ref).into_iter().collect();
    json!({"metadata": {"name": format!("iss-tatara-operator-{n}"), "ownerReferences": refs},
        "spec": {"number": n, "projectRef": "tatara", "repositoryRef": "tatara-operator",
                 "url": format!("https://github.com/acme/tatara-operator/issues/{n}")},
        "status": {"state": state, "author": "alice"}})
}

fn at(from_now_secs: i64) -> String {
    // metav1.Time: whole seconds.
    Timestamp::from_second(Timestamp::now().as_second() + from_now_secs).unwrap().to_string()
}

/// The operator's world plus:
/// - `ci-wait`, parked `ci-failed` (UnparkRetry) on its second lap, its next
///   re-read ten minutes away, controlling Issue 420;
/// - Issue 421 controlled by a `done` Task;
/// - project `busy` with one normal slot (`maxConcurrentAgents: 1`), held
///   by `runner`'s admitted implement ticket, and `queued`, whose ticket
///   waits behind it.
fn world() -> World {
    let mut store = Store::new();
    store.load_crd_schemas(&testkit::fixtures::tatara_crds()).unwrap();
    fakeapi::seed_world(&mut store, NS).unwrap();
    let ci_wait = store
        .seed(
            "tasks",
            NS,
            json!({"metadata": {"name": "ci-wait"}, "spec": {"projectRef": "tatara", "goal": "Fix it", "kind": "implement"},
            "status": {"state": "awaiting-review", "parkReason": "ci-failed", "parkedAt": at(-120),
                "retryBlocker": "ci-failed", "retryAttempts": 2, "retryNextAt": at(630),
                "issueRefs": ["iss-tatara-operator-420"]}}),
        )
        .unwrap();
    store.seed("issues", NS, issue(420, Some(&ci_wait), "open")).unwrap();
    let finished = store
        .seed(
            "tasks",
            NS,
            json!({"metadata": {"name": "finished"}, "spec": {"projectRef": "tatara", "goal": "Done", "kind": "implement"},
            "status": {"state": "done"}}),
        )
        .unwrap();
    store.seed("issues", NS, issue(421, Some(&finished), "open")).unwrap();
    store
        .seed(
            "projects",
            NS,
            json!({"metadata": {"name": "busy"}, "spec": {"scmSecretRef": "s", "maxConcurrentAgents": 1,
                "scm": {"botLogin": "tatara-bot", "owner": "acme", "provider": "github"}}}),
        )
        .unwrap();
    for (name, seq, state) in [("runner", 1, "Admitted"), ("queued", 2, "Queued")] {
        store
            .seed(
                "tasks",
                NS,
                json!({"metadata": {"name": name}, "spec": {"projectRef": "busy", "goal": "Work", "kind": "implement"},
                "status": {"state": "under-implementation"}}),
            )
            .unwrap();
        let mut status = json!({"state": state});
        if state == "Admitted" {
            status["taskRef"] = json!(name);
            status["admittedAt"] = json!(at(-60));
        }
        store
            .seed(
                "queuedevents",
                NS,
                json!({"metadata": {"name": format!("qe-{name}")}, "spec": {"seq": seq, "class": "normal",
                    "kind": "implement", "projectRef": "busy",
                    "payload": {"kind": "implement", "agentKind": "implement", "taskRef": name}},
                "status": status}),
            )
            .unwrap();
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let api = rt.block_on(fakeapi::serve(store)).unwrap();
    let kubectl = Kubectl::new(&[env!("CARGO_BIN_EXE_kubectl-tatara")]);
    let path = api.write_kubeconfig(&kubectl.dir.path().join("kubeconfig"), NS).unwrap();
    World { _rt: rt, api, kubectl: kubectl.kubeconfig(path) }
}

impl World {
    fn why(&self, args: &[&str]) -> Output {
        let mut v = vec!["tatara", "why"];
        v.extend_from_slice(args);
        self.kubectl.command(&v).output().unwrap()
    }

    fn json(&self, target: &str) -> Value {
        let out = self.why(&[target, "-o", "json"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

#[test]
fn why_explains_a_retry_park_through_the_issue_it_owns() {
    let w = world();
    let v = w.json("tatara-operator#420");
    assert_eq!(v["kind"], "Issue");
    assert_eq!(v["owner"]["kind"], "Task");
    assert_eq!(v["owner"]["taskKind"], "implement");
    assert_eq!(v["liveOwner"], "ci-wait");
    let park = &v["owner"]["park"];
    assert_eq!(park["reason"], "ci-failed");
    assert_eq!(park["class"], "retry");
    assert_eq!(park["heldBy"], json!([]));
    let clock = &park["clocks"][0];
    assert!(clock["what"].as_str().unwrap().contains("lap 2 of 5"), "{clock}");
    let secs = clock["inSeconds"].as_i64().unwrap();
    assert!((600..=630).contains(&secs), "the retry re-read is ~10m away: {secs}");

    let out = w.why(&["tatara-operator#420"]);
    let text = String::from_utf8(out.stdout).unwrap();
    println!("{text}");
    assert!(out.status.success());
    assert!(text.starts_with("Issue/iss-tatara-operator-420 tatara-operator#420 (open)\n"), "{text}");
    assert!(text.contains("  Task/ci-wait (project tatara, kind implement)\n"), "{text}");
    assert!(text.contains("parked:     ci-failed (unpark: retry) since "), "{text}");
    assert!(text.contains("(in 10m)"), "{text}");
    assert!(
        text.contains("why:        parked(ci-failed, unpark: retry) at awaiting-review; next: the retry lane"),
        "{text}"
    );
    assert!(text.contains("owns:       Issue/iss-tatara-operator-420 tatara-operator#420 open, controller"), "{text}");
    assert!(!text.contains('\u{1b}'), "piped output has no colour");
}

#[test]
fn why_says_a_done_controller_is_released_by_the_next_sweep() {
    let w = world();
    let v = w.json("issue/iss-tatara-operator-421");
    assert_eq!(v["controller"], "finished");
    assert_eq!(v["liveOwner"], Value::Null);
    assert!(v["summary"].as_str().unwrap().contains("the next sweep releases it"), "{v}");
    // A never-classified park reason from the seed (object-too-large) reads
    // as UnparkNever with its retention clock.
    let v = w.json("task/old-failed");
    assert_eq!(v["park"]["class"], "never");
    assert!(v["park"]["clocks"][0]["what"].as_str().unwrap().contains("ParkRetention"), "{v}");
}

#[test]
fn why_shows_the_admission_a_task_waits_on() {
    let w = world();
    let v = w.json("queued");
    let a = &v["admission"][0];
    assert_eq!(a["queuedEvent"], "qe-queued");
    assert_eq!((a["inflight"].as_i64(), a["capacity"].as_i64()), (Some(1), Some(1)), "{a}");
    assert!(a["why"].as_str().unwrap().contains("pool is full (1 of 1 slots held)"), "{a}");
    assert!(v["summary"].as_str().unwrap().contains("waiting for admission"), "{v}");
    let v = w.json("task/runner");
    assert_eq!(v["admission"][0]["state"], "Admitted");
    assert!(v["admission"][0]["why"].as_str().unwrap().contains("holds one of the normal pool's 1 slots"), "{v}");
}

#[test]
fn why_reads_only_and_refuses_what_it_cannot_answer() {
    let w = world();
    for target in ["tatara-operator#420", "task/old-failed", "queued", "tatara-operator!9"] {
        assert!(w.why(&[target]).status.success(), "{target}");
    }
    let writes: Vec<_> = w.api.requests().into_iter().filter(|r| r.method != "GET").collect();
    assert!(writes.is_empty(), "why wrote: {writes:?}");

    let out = w.why(&["nope"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\"nope\" not found; list them with `kubectl get issues,mergerequests,tasks -n tatara`"),
        "{stderr}"
    );
    // Only the formats it prints.
    let out = w.why(&["queued", "-o", "wide"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = w.why(&["queued", "-o", "jsonpath={.admission[0].queuedEvent}"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "qe-queued");
}
