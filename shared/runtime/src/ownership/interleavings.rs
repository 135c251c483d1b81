//! Property test: random ownership graphs and random interleavings of fold,
//! reap, repair and sweep (issue mints, pull-request adoptions and review
//! mints), each retried on conflict, against the fake API's
//! store (resourceVersion preconditions, two-controller refusal, GC). The
//! executor's discipline is modelled exactly: a decision is computed from a
//! fresh read, each write carries the version it was computed from, a 409
//! recomputes, and a delete is applied only from a read made in the same
//! step.

use proptest::prelude::*;
use serde_json::{Value, json};

use rules::ownership::decision::{Action, Snapshot};
use rules::ownership::types::{Issue, MergeRequest, Project, Task};
use rules::ownership::{fold, owners, reap, sweep};
use testkit::fakeapi::Store;

const NS: &str = "p";

fn snapshot(store: &Store) -> Snapshot {
    let parse = |plural: &str| store.all(plural, NS);
    Snapshot {
        tasks: parse("tasks").into_iter().map(|v| serde_json::from_value::<Task>(v).unwrap()).collect(),
        issues: parse("issues").into_iter().map(|v| serde_json::from_value::<Issue>(v).unwrap()).collect(),
        merge_requests: parse("mergerequests")
            .into_iter()
            .map(|v| serde_json::from_value::<MergeRequest>(v).unwrap())
            .collect(),
    }
}

/// A merge patch with the decision's resourceVersion as its precondition.
fn guarded(mut patch: Value, rv: &Option<String>) -> Value {
    if let Some(rv) = rv {
        patch["metadata"] = json!({"resourceVersion": rv});
    }
    patch
}

#[derive(Debug, PartialEq)]
enum Outcome {
    Applied,
    Conflict,
    Gone,
}

fn apply(store: &mut Store, action: &Action) -> Outcome {
    let res = match action {
        Action::SetOwners { kind, name, resource_version, owner_references, .. } => {
            let plural = kind.plural();
            match store.get(plural, NS, name) {
                Err(_) => return Outcome::Gone,
                Ok(mut o) => {
                    if let Some(rv) = resource_version {
                        o["metadata"]["resourceVersion"] = json!(rv);
                    }
                    o["metadata"]["ownerReferences"] = serde_json::to_value(owner_references).unwrap();
                    store.replace(plural, NS, name, o, false)
                }
            }
        }
        Action::SetFoldInFlight { task, resource_version, members, .. } => match store.get("tasks", NS, task) {
            Err(_) => return Outcome::Gone,
            Ok(mut o) => {
                if let Some(rv) = resource_version {
                    o["metadata"]["resourceVersion"] = json!(rv);
                }
                o["status"]["foldInFlight"] = json!(members);
                store.replace("tasks", NS, task, o, true)
            }
        },
        Action::FailTask { task, reason, .. } => store.patch(
            "tasks",
            NS,
            task,
            &json!({"status": {"parkReason": reason, "parkedAt": "2030-01-01T00:00:00Z"}}),
            true,
        ),
        Action::DeleteTask { task, uid, .. } => store.delete("tasks", NS, task, uid.as_deref(), None),
        Action::CreateTask { task, .. } => store.create("tasks", NS, serde_json::to_value(task).unwrap()),
        Action::CreateIssue { issue, .. } => store.create("issues", NS, serde_json::to_value(issue).unwrap()),
        Action::CreateMergeRequest { merge_request, .. } => {
            store.create("mergerequests", NS, serde_json::to_value(merge_request).unwrap())
        }
        Action::FillMergeRequest { name, resource_version, status, .. } => {
            store.patch("mergerequests", NS, name, &guarded(json!({"status": status}), resource_version), true)
        }
        Action::SetMrRefs { task, resource_version, mr_refs, .. } => {
            store.patch("tasks", NS, task, &guarded(json!({"status": {"mrRefs": mr_refs}}), resource_version), true)
        }
        Action::SetMergeRequestOwnership { .. } | Action::UnparkTask { .. } => {
            unreachable!("not generated here")
        }
        // Forge steps have no cluster effect.
        _ => return Outcome::Applied,
    };
    match res {
        Ok(_) => Outcome::Applied,
        Err(e) if e.code == 409 => Outcome::Conflict,
        Err(e) if e.code == 404 => Outcome::Gone,
        Err(e) => panic!("{action:?} was refused: {} {}", e.code, e.message),
    }
}

#[derive(Debug, Clone)]
enum OpKind {
    Fold {
        umbrella: String,
        members: Vec<String>,
    },
    Reap {
        task: String,
    },
    Repair,
    Sweep {
        number: i64,
    },
    /// The sweep's pull-request writes: a bot PR on `task/t<task>` is
    /// adopted, a human one gets a review Task.
    SweepPr {
        number: i64,
        bot: bool,
        task: usize,
    },
}

struct Op {
    kind: OpKind,
    pending: Vec<Action>,
    done: bool,
    rounds: usize,
}

fn project() -> Project {
    let mut p = Project::new("proj");
    p.spec.scm.bot_login = "bot".into();
    p
}

fn now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_second(2_000_000_000).unwrap()
}

fn decide(kind: &OpKind, snap: &Snapshot) -> Vec<Action> {
    match kind {
        OpKind::Fold { umbrella, members } => fold::decide(snap, umbrella, members).unwrap_or_default(),
        OpKind::Reap { task } => {
            let Some(t) = snap.task(task) else {
                return vec![];
            };
            let uid = t.metadata.uid.clone().unwrap_or_default();
            let ctx = reap::ReapContext {
                live_fold_members: reap::live_fold_members(&snap.tasks),
                owned_issues: snap.artifacts().into_iter().filter(|a| a.owned_by(&uid)).collect(),
                merged_mrs: 0,
            };
            match reap::reap_verdict(t, now(), &ctx) {
                reap::ReapVerdict::Reap { .. } => reap::decide(snap, &project(), task),
                reap::ReapVerdict::Keep { .. } => vec![],
            }
        }
        OpKind::Repair => owners::decide_repairs(snap),
        OpKind::Sweep { number } => {
            let issue = sweep::ForgeIssue {
                repository_ref: "repo".into(),
                number: *number,
                state: "open".into(),
                author: "alice".into(),
                url: format!("https://forge/repo/{number}"),
                last_comment_human: number % 2 == 0,
                labels: vec![],
            };
            let stage = sweep::mint_stage(false, issue.last_comment_human);
            sweep::decide(snap, &project(), None, NS, &issue, stage)
        }
        OpKind::SweepPr { number, bot, task } => {
            let pr = sweep::ForgePullRequest {
                repository_ref: "repo".into(),
                number: *number,
                author: if *bot { "bot" } else { "alice" }.into(),
                head_branch: format!("task/t{task}"),
                head_sha: "abc".into(),
                head_repo: Some("o/repo".into()),
                base_repo: "o/repo".into(),
                url: format!("https://forge/repo/pull/{number}"),
                ..Default::default()
            };
            if *bot {
                sweep::decide_adopt(snap, &project(), None, &pr).into_actions()
            } else {
                let stage = sweep::MintSource::Review(pr.clone()).stage();
                sweep::decide_review(snap, &project(), None, NS, &pr, stage).into_actions()
            }
        }
    }
}

/// One scheduler tick of one operation: either a fresh read and decision,
/// or one write of the pending decision.
fn tick(op: &mut Op, store: &mut Store) {
    op.rounds += 1;
    assert!(op.rounds < 500, "{:?} did not converge", op.kind);
    if op.pending.is_empty() {
        let actions = decide(&op.kind, &snapshot(store));
        if actions.is_empty() {
            op.done = true;
        }
        op.pending = actions;
        return;
    }
    let action = op.pending.remove(0);
    if matches!(action, Action::DeleteTask { .. }) {
        // Deletes only from a fresh read: re-decide now, delete only if the
        // fresh decision starts with the same delete.
        let fresh = decide(&op.kind, &snapshot(store));
        if fresh.first() != Some(&action) {
            op.pending = fresh;
            return;
        }
    }
    match apply(store, &action) {
        Outcome::Conflict => op.pending.clear(),
        Outcome::Applied | Outcome::Gone => {}
    }
}

fn task_json(name: &str, stage: u8) -> Value {
    let status = match stage {
        0 => json!({"state": "new"}),
        1 => {
            json!({"state": "rejected", "stateReason": "declined", "stateEnteredAt": "2026-01-01T00:00:00Z"})
        }
        2 => json!({"state": "done", "documentedBy": "doc", "deliveredAt": "2026-01-01T00:00:00Z"}),
        _ => {
            json!({"state": "new", "parkReason": "awaiting-human", "parkedAt": "2026-01-01T00:00:00Z"})
        }
    };
    json!({"metadata": {"name": name}, "spec": {"projectRef": "proj", "goal": "g"}, "status": status})
}

fn oref(task: &Value, controller: bool) -> Value {
    json!({"apiVersion": "tatara.dev/v1alpha1", "kind": "Task", "name": task["metadata"]["name"],
           "uid": task["metadata"]["uid"], "controller": controller, "blockOwnerDeletion": true})
}

#[derive(Debug, Clone)]
struct World {
    stages: Vec<u8>,
    /// Per artifact: owner bitmask and the controller's index among owners.
    artifacts: Vec<(u8, u8)>,
    ops: Vec<(u8, u8, u8)>,
    schedule: Vec<u8>,
}

fn world() -> impl Strategy<Value = World> {
    (
        prop::collection::vec(0u8..4, 2..6),
        prop::collection::vec((any::<u8>(), any::<u8>()), 1..7),
        prop::collection::vec((0u8..5, any::<u8>(), any::<u8>()), 1..7),
        prop::collection::vec(any::<u8>(), 0..200),
    )
        .prop_map(|(stages, artifacts, ops, schedule)| World { stages, artifacts, ops, schedule })
}

fn build(w: &World) -> (Store, Vec<Op>) {
    let mut store = Store::new();
    let n = w.stages.len();
    let tasks: Vec<Value> = w
        .stages
        .iter()
        .enumerate()
        .map(|(i, s)| store.seed("tasks", NS, task_json(&format!("t{i}"), *s)).unwrap())
        .collect();
    for (k, (mask, ctl)) in w.artifacts.iter().enumerate() {
        let owners: Vec<usize> = (0..n).filter(|i| mask & (1 << i) != 0).collect();
        let refs: Vec<Value> =
            owners.iter().enumerate().map(|(j, i)| oref(&tasks[*i], j == (*ctl as usize) % owners.len())).collect();
        let number = k as i64 + 1;
        let (plural, extra) = if k % 3 == 2 {
            (
                "mergerequests",
                json!({"state": "open", "author": "bot", "headBranch": format!("task/t{}", owners.first().copied().unwrap_or(0))}),
            )
        } else {
            ("issues", json!({"state": "open"}))
        };
        let prefix = if plural == "issues" { "iss" } else { "mr" };
        store
            .seed(plural, NS, json!({"metadata": {"name": format!("{prefix}-repo-{number}"), "ownerReferences": refs},
                "spec": {"number": number, "projectRef": "proj", "repositoryRef": "repo", "url": "u"}, "status": extra}))
            .unwrap();
    }
    let ops = w
        .ops
        .iter()
        .filter_map(|(kind, a, b)| {
            let kind = match kind {
                0 => {
                    let umbrella = *a as usize % n;
                    let members: Vec<String> =
                        (0..n).filter(|i| *i != umbrella && b & (1 << i) != 0).map(|i| format!("t{i}")).collect();
                    if members.is_empty() {
                        return None;
                    }
                    OpKind::Fold { umbrella: format!("t{umbrella}"), members }
                }
                1 => OpKind::Reap { task: format!("t{}", *a as usize % n) },
                2 => OpKind::Repair,
                3 => OpKind::Sweep { number: (*a % 8) as i64 + 1 },
                _ => OpKind::SweepPr { number: (*a % 8) as i64 + 1, bot: b % 2 == 0, task: (*b / 2) as usize % n },
            };
            Some(Op { kind, pending: vec![], done: false, rounds: 0 })
        })
        .collect();
    (store, ops)
}

fn controllers(obj: &Value) -> usize {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["controller"] == json!(true))
        .count()
}

fn check_invariants(store: &Store) -> Result<(), String> {
    for plural in ["issues", "mergerequests"] {
        for obj in store.all(plural, NS) {
            let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
            let refs = obj["metadata"]["ownerReferences"].as_array().cloned().unwrap_or_default();
            let c = controllers(&obj);
            if c > 1 {
                return Err(format!("{name} has {c} controllers"));
            }
            if !refs.is_empty() && c == 0 {
                return Err(format!("{name} has owners but no controller: {refs:?}"));
            }
            if refs.iter().any(|r| r["blockOwnerDeletion"] != json!(true)) {
                return Err(format!("{name} has a reference without blockOwnerDeletion"));
            }
        }
    }
    for t in store.all("tasks", NS) {
        let refs: Vec<&Value> = t["status"]["mrRefs"].as_array().into_iter().flatten().collect();
        if refs.iter().enumerate().any(|(i, r)| refs[..i].contains(r)) {
            return Err(format!("{} lists a merge request twice in mrRefs: {refs:?}", t["metadata"]["name"]));
        }
        if t["metadata"]["ownerReferences"].as_array().is_some_and(|r| r.iter().any(|r| r["kind"] == "Task")) {
            return Err("a Task owns a Task".into());
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn interleaved_fold_reap_repair_sweep_keep_one_controller(w in world()) {
        let (mut store, mut ops) = build(&w);
        prop_assert!(check_invariants(&store).is_ok());
        let mut schedule = w.schedule.iter();
        loop {
            let live: Vec<usize> = (0..ops.len()).filter(|i| !ops[*i].done).collect();
            if live.is_empty() {
                break;
            }
            let pick = match schedule.next() {
                Some(s) => live[*s as usize % live.len()],
                None => live[0],
            };
            tick(&mut ops[pick], &mut store);
            // No decision ever asks the API server for two controllers.
            prop_assert_eq!(store.two_controller_rejections, 0);
        }
        store.collect_garbage();
        prop_assert_eq!(store.two_controller_rejections, 0);
        if let Err(e) = check_invariants(&store) {
            prop_assert!(false, "{}", e);
        }
    }
}

#[test]
fn the_invariant_check_can_fail() {
    // Guard against a vacuous property: a repair-less world with an
    // owners-but-no-controller artifact is caught.
    let mut store = Store::new();
    let t = store.seed("tasks", NS, task_json("t0", 0)).unwrap();
    store
        .seed(
            "issues",
            NS,
            json!({"metadata": {"name": "iss-repo-1", "ownerReferences": [oref(&t, false)]},
            "spec": {"number": 1, "projectRef": "proj", "repositoryRef": "repo", "url": "u"}}),
        )
        .unwrap();
    assert!(check_invariants(&store).is_err());
    // And repair fixes it.
    let mut op = Op { kind: OpKind::Repair, pending: vec![], done: false, rounds: 0 };
    while !op.done {
        tick(&mut op, &mut store);
    }
    assert!(check_invariants(&store).is_ok());
}

#[test]
fn the_pull_request_ops_write_what_the_property_checks() {
    // Guard against a vacuous op: two adoptions of the same PR and two
    // review mints, interleaved step by step, adopt once and mint once.
    let mut store = Store::new();
    store.seed("tasks", NS, task_json("t0", 0)).unwrap();
    let mut ops: Vec<Op> = [(5, true), (5, true), (6, false), (6, false)]
        .into_iter()
        .map(|(number, bot)| Op {
            kind: OpKind::SweepPr { number, bot, task: 0 },
            pending: vec![],
            done: false,
            rounds: 0,
        })
        .collect();
    while ops.iter().any(|o| !o.done) {
        for op in ops.iter_mut().filter(|o| !o.done) {
            tick(op, &mut store);
        }
    }
    let t0 = store.get("tasks", NS, "t0").unwrap();
    assert_eq!(t0["status"]["mrRefs"], json!(["repo#5"]));
    let adopted = store.get("mergerequests", NS, "mr-repo-5").unwrap();
    assert_eq!(adopted["metadata"]["ownerReferences"][0]["name"], "t0");
    assert_eq!(adopted["status"]["ownership"], "tatara");
    let review = rules::ownership::naming::review_task_name("proj", "repo", 6);
    let reviewed = store.get("mergerequests", NS, "mr-repo-6").unwrap();
    assert_eq!(reviewed["metadata"]["ownerReferences"][0]["name"], review.as_str());
    assert_eq!(reviewed["status"]["ownershipReason"], "initial");
    assert_eq!(store.all("tasks", NS).len(), 2, "one review Task");
    assert!(check_invariants(&store).is_ok());
}
