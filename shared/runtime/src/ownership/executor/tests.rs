use std::sync::Mutex;

use serde_json::Value;

use super::*;
use rules::ownership::types::{Project, task_owner_ref};
use rules::ownership::{fold, reap, sweep};
use testkit::fakeapi::{FakeApi, Store, seed_world, serve};

const NS: &str = "tatara-system";

/// A fake API seeded with the world, its CRD schemas loaded so every write
/// the executor makes is also checked against the real CRDs.
async fn world() -> (FakeApi, Executor) {
    let mut store = Store::new();
    store.load_crd_schemas(&testkit::fixtures::tatara_crds()).unwrap();
    seed_world(&mut store, NS).unwrap();
    let api = serve(store).await.unwrap();
    let exec = Executor::new(api.client(NS).unwrap(), NS);
    (api, exec)
}

fn get(api: &FakeApi, plural: &str, name: &str) -> Option<Value> {
    api.store.lock().unwrap().get(plural, NS, name).ok()
}

fn controllers(obj: &Value) -> Vec<String> {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["controller"] == Value::Bool(true))
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

async fn project(exec: &Executor) -> Project {
    Api::<Project>::namespaced(exec.client.clone(), NS).get("tatara").await.unwrap()
}

#[tokio::test]
async fn fold_runs_end_to_end_over_http() {
    // "The sequence is adopt, verify, then delete."
    let (api, exec) = world().await;
    let members = vec!["member-a".to_string(), "member-b".to_string()];
    let report =
        exec.converge("fold umbrella", None, |snap| Ok(fold::decide(snap, "umbrella", &members)?)).await.unwrap();
    assert!(get(&api, "tasks", "member-a").is_none() && get(&api, "tasks", "member-b").is_none());
    for name in ["iss-tatara-operator-412", "iss-tatara-operator-413", "iss-tatara-operator-414"] {
        assert_eq!(controllers(&get(&api, "issues", name).unwrap()), vec!["umbrella"], "{name}");
    }
    assert_eq!(controllers(&get(&api, "mergerequests", "mr-tatara-operator-9").unwrap()), vec!["umbrella"]);
    let u = get(&api, "tasks", "umbrella").unwrap();
    assert_eq!(u["status"]["foldInFlight"], serde_json::json!([]));
    // Step order as applied: foldInFlight, adoptions, deletes, clear.
    let kinds: Vec<&str> = report
        .applied
        .iter()
        .map(|a| match a {
            Action::SetFoldInFlight { members, .. } if members.is_empty() => "clear",
            Action::SetFoldInFlight { .. } => "begin",
            Action::SetOwners { .. } => "adopt",
            Action::DeleteTask { .. } => "delete",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, vec!["begin", "adopt", "adopt", "adopt", "delete", "delete", "clear"]);
    assert_eq!(api.store.lock().unwrap().two_controller_rejections, 0);
}

#[tokio::test]
async fn fold_is_refused_with_409_when_a_member_has_a_pod() {
    // "refused with 409 fold target has work in flight"
    let (api, exec) = world().await;
    {
        let mut s = api.store.lock().unwrap();
        let mut t = s.get("tasks", NS, "member-a").unwrap();
        t["status"]["podName"] = "member-a-pod".into();
        s.replace("tasks", NS, "member-a", t, true).unwrap();
    }
    let members = vec!["member-a".to_string()];
    let err = exec.converge("fold", None, |snap| Ok(fold::decide(snap, "umbrella", &members)?)).await.unwrap_err();
    assert!(
        matches!(err, ExecutorError::Rules(rules::Error::Refused { status: 409, ref message }) if message == "fold target has work in flight"),
        "{err}"
    );
    assert!(get(&api, "tasks", "member-a").is_some());
}

#[tokio::test]
async fn stale_resource_version_is_409_and_the_decision_is_recomputed() {
    let (api, exec) = world().await;
    let snap = exec.snapshot().await.unwrap();
    let iss = snap.issue("iss-tatara-operator-413").unwrap().clone();
    let stale = Action::SetOwners {
        kind: ArtifactKind::Issue,
        name: iss.name().into(),
        resource_version: iss.metadata.resource_version.clone(),
        owner_references: iss.owner_refs().to_vec(),
        why: "test".into(),
    };
    // Another writer changes the object after our read.
    {
        let mut s = api.store.lock().unwrap();
        let mut o = s.get("issues", NS, "iss-tatara-operator-413").unwrap();
        o["metadata"]["labels"] = serde_json::json!({"touched": "yes"});
        s.replace("issues", NS, "iss-tatara-operator-413", o, false).unwrap();
    }
    assert_eq!(exec.apply(&stale, None).await.unwrap(), Step::Conflict);

    // converge: the first decision races another writer and 409s; the
    // recomputed one lands.
    let racer = Mutex::new(Some(api.store.clone()));
    let report = exec
        .converge("repair race", None, |snap| {
            if let Some(store) = racer.lock().unwrap().take() {
                let mut s = store.lock().unwrap();
                let mut o = s.get("issues", NS, "iss-tatara-operator-415").unwrap();
                o["metadata"]["labels"] = serde_json::json!({"raced": "yes"});
                s.replace("issues", NS, "iss-tatara-operator-415", o, false).unwrap();
            }
            let i = snap.issue("iss-tatara-operator-415").unwrap();
            if i.owner_refs().is_empty() {
                let t = snap.task("umbrella").unwrap();
                return Ok(vec![Action::SetOwners {
                    kind: ArtifactKind::Issue,
                    name: i.name().into(),
                    resource_version: i.metadata.resource_version.clone(),
                    owner_references: vec![task_owner_ref("umbrella", t.metadata.uid.as_deref().unwrap(), true)],
                    why: "adopt".into(),
                }]);
            }
            Ok(vec![])
        })
        .await
        .unwrap();
    assert_eq!(report.conflicts, 1);
    assert_eq!(controllers(&get(&api, "issues", "iss-tatara-operator-415").unwrap()), vec!["umbrella"]);
}

#[tokio::test]
async fn two_controller_references_are_refused_with_422() {
    let (api, exec) = world().await;
    let snap = exec.snapshot().await.unwrap();
    let uid = |n: &str| snap.task(n).unwrap().metadata.uid.clone().unwrap();
    let bad = Action::SetOwners {
        kind: ArtifactKind::Issue,
        name: "iss-tatara-operator-412".into(),
        resource_version: None,
        owner_references: vec![
            task_owner_ref("umbrella", &uid("umbrella"), true),
            task_owner_ref("member-a", &uid("member-a"), true),
        ],
        why: "illegal".into(),
    };
    let err = exec.apply(&bad, None).await.unwrap_err();
    assert!(matches!(err, ExecutorError::KubeRefused { code: 422, .. }), "{err}");
    assert_eq!(api.store.lock().unwrap().two_controller_rejections, 1);
}

#[tokio::test]
async fn missing_targets_are_404_gone() {
    let (_api, exec) = world().await;
    let gone = Action::SetOwners {
        kind: ArtifactKind::MergeRequest,
        name: "mr-nope-1".into(),
        resource_version: None,
        owner_references: vec![],
        why: "x".into(),
    };
    assert_eq!(exec.apply(&gone, None).await.unwrap(), Step::Gone);
    let del = Action::DeleteTask { task: "nope".into(), uid: None, why: "x".into() };
    assert_eq!(exec.apply(&del, None).await.unwrap(), Step::Gone);
}

#[tokio::test]
async fn reap_settles_ownership_before_deleting_over_http() {
    // "hand controller=true to the OLDEST surviving owner ... THEN delete the
    // Task. else: delete the Task; the artifact cascades with it."
    let (api, exec) = world().await;
    let p = project(&exec).await;
    exec.converge("reap umbrella", None, |snap| Ok(reap::decide(snap, &p, "umbrella"))).await.unwrap();
    assert!(get(&api, "tasks", "umbrella").is_none());
    assert_eq!(controllers(&get(&api, "issues", "iss-tatara-operator-412").unwrap()), vec!["member-a"]);
    exec.converge("reap member-b", None, |snap| Ok(reap::decide(snap, &p, "member-b"))).await.unwrap();
    assert!(get(&api, "issues", "iss-tatara-operator-414").is_none(), "cascaded with its only owner");
    assert!(get(&api, "mergerequests", "mr-tatara-operator-9").is_none());
}

#[tokio::test]
async fn sweep_adopts_the_ownerless_survivor_and_creates_missing_mirrors() {
    // "if iss EXISTS: APPEND task as its controller=true owner (an UPDATE)
    // else: CREATE it with task as controller owner"
    let (api, exec) = world().await;
    let p = project(&exec).await;
    for number in [415, 999] {
        let issue = sweep::ForgeIssue {
            repository_ref: "tatara-operator".into(),
            number,
            state: "open".into(),
            author: "alice".into(),
            url: format!("https://github.com/acme/tatara-operator/issues/{number}"),
            last_comment_human: false,
            labels: vec![],
        };
        let stage = sweep::mint_stage(false, issue.last_comment_human);
        exec.converge("sweep", None, |snap| Ok(sweep::decide(snap, &p, None, NS, &issue, stage))).await.unwrap();
        let task = rules::ownership::naming::intake_task_name("tatara", "", "tatara-operator", number);
        let iss = get(&api, "issues", &format!("iss-tatara-operator-{number}")).unwrap();
        assert_eq!(controllers(&iss), vec![task.clone()]);
        let t = get(&api, "tasks", &task).unwrap();
        assert_eq!(t["spec"]["initialParkReason"], "backlog-sweep");
    }
    // The predicate is stateless: a second pass finds no orphan.
    let issue = sweep::ForgeIssue {
        repository_ref: "tatara-operator".into(),
        number: 415,
        state: "open".into(),
        author: "alice".into(),
        url: String::new(),
        last_comment_human: false,
        labels: vec![],
    };
    let r = exec
        .converge("sweep again", None, |snap| Ok(sweep::decide(snap, &p, None, NS, &issue, sweep::MintStage::Triaging)))
        .await
        .unwrap();
    assert!(r.applied.is_empty());
}

#[tokio::test]
async fn an_adoption_that_raced_another_append_to_mr_refs_loses_nothing() {
    // A merge patch replaces status.mrRefs whole: only the resourceVersion
    // precondition keeps a concurrent append from being overwritten.
    let (api, exec) = world().await;
    let p = project(&exec).await;
    let pr = sweep::ForgePullRequest {
        repository_ref: "tatara-operator".into(),
        number: 30,
        author: "tatara-bot".into(),
        head_branch: "task/member-b".into(),
        head_sha: "c0ffee".into(),
        head_repo: Some("acme/tatara-operator".into()),
        base_repo: "acme/tatara-operator".into(),
        url: "https://github.com/acme/tatara-operator/pull/30".into(),
        ..Default::default()
    };
    let stale = sweep::decide_adopt(&exec.snapshot().await.unwrap(), &p, None, &pr).into_actions();
    assert!(matches!(&stale[0], Action::SetMrRefs { mr_refs, .. } if mr_refs.len() == 2), "{stale:?}");
    // Another writer appends to member-b's mrRefs after our read.
    api.store
        .lock()
        .unwrap()
        .patch(
            "tasks",
            NS,
            "member-b",
            &serde_json::json!({"status": {"mrRefs": ["tatara-operator#9", "tatara-operator#31"]}}),
            true,
        )
        .unwrap();
    assert_eq!(exec.apply(&stale[0], None).await.unwrap(), Step::Conflict);
    let report =
        exec.converge("adopt", None, |snap| Ok(sweep::decide_adopt(snap, &p, None, &pr).into_actions())).await.unwrap();
    assert_eq!(report.applied.len(), 3, "mrRefs, mirror, mirror status: {:?}", report.applied);
    let member_b = get(&api, "tasks", "member-b").unwrap();
    assert_eq!(
        member_b["status"]["mrRefs"],
        serde_json::json!(["tatara-operator#9", "tatara-operator#31", "tatara-operator#30"])
    );
    let mr = get(&api, "mergerequests", "mr-tatara-operator-30").unwrap();
    assert_eq!(controllers(&mr), vec!["member-b"]);
    assert_eq!(mr["status"]["ownership"], "tatara");
    assert_eq!(mr["status"]["lastBotHeadSHA"], "c0ffee");
    // Every write was valid under the real CRD schemas (the store checks them).
    assert_eq!(api.store.lock().unwrap().two_controller_rejections, 0);
}

struct RefusingForge {
    seen: Mutex<Vec<String>>,
}

impl Forge for RefusingForge {
    fn apply<'a>(&'a self, action: &'a Action) -> BoxFuture<'a, std::result::Result<(), String>> {
        Box::pin(async move {
            self.seen.lock().unwrap().push(action.why().to_string());
            Err("403 Forbidden".to_string())
        })
    }
}

#[tokio::test]
async fn a_refused_blocking_comment_stops_the_terminal_path_before_release() {
    // "post a bot comment ... (BLOCKING: a 403 requeues the reap)"; release
    // comes only after it.
    let (api, exec) = world().await;
    let p = project(&exec).await;
    let forge = RefusingForge { seen: Mutex::new(vec![]) };
    let err = exec
        .converge("terminal", Some(&forge), |snap| {
            let t = snap.task("member-a").unwrap();
            Ok(reap::terminal_release(t, &p, &snap.artifacts(), &snap.owner_infos()))
        })
        .await
        .unwrap_err();
    assert!(matches!(err, ExecutorError::ForgeRefused { .. }), "{err}");
    assert_eq!(forge.seen.lock().unwrap().len(), 1);
    assert_eq!(controllers(&get(&api, "issues", "iss-tatara-operator-413").unwrap()), vec!["member-a"], "not released");
    // Without a forge client, the plan is refused up front.
    let err = exec
        .converge("terminal", None, |snap| {
            let t = snap.task("member-a").unwrap();
            Ok(reap::terminal_release(t, &p, &snap.artifacts(), &snap.owner_infos()))
        })
        .await
        .unwrap_err();
    assert!(matches!(err, ExecutorError::ForgeUnavailable { .. }));
}

#[tokio::test]
async fn a_push_flip_is_one_guarded_status_patch_over_http() {
    // A human push flips an MR external ("external-push:<sha>") in one
    // status patch guarded by the version it was computed from. (Takeover,
    // the flip back, is the operator's: `kubectl tatara takeover` asks its
    // REST API and writes nothing itself.)
    let (api, exec) = world().await;
    let mr = Api::<MergeRequest>::namespaced(exec.client.clone(), NS).get("mr-tatara-operator-9").await.unwrap();
    let flip = rules::ownership::merge_request::flip_on_push(
        &mr,
        "def456",
        rules::ownership::merge_request::MrOrigin::HandedOver,
    )
    .unwrap();
    assert_eq!(exec.apply(&flip.action(&mr), None).await.unwrap(), Step::Applied);
    let flipped = get(&api, "mergerequests", "mr-tatara-operator-9").unwrap();
    assert_eq!(flipped["status"]["ownership"], "external");
    assert_eq!(flipped["status"]["ownershipReason"], "external-push:def456");
    // A stale flip (computed from the old version) is a 409.
    assert_eq!(exec.apply(&flip.action(&mr), None).await.unwrap(), Step::Conflict);
}

struct MemorySpill {
    ok: bool,
    calls: Mutex<Vec<usize>>,
}

impl Spill for MemorySpill {
    fn spill<'a>(&'a self, _task: &'a str, entries: &'a [Value]) -> BoxFuture<'a, std::result::Result<(), String>> {
        Box::pin(async move {
            self.calls.lock().unwrap().push(entries.len());
            if self.ok { Ok(()) } else { Err("tatara-memory unavailable".into()) }
        })
    }
}

fn note(at: &str, len: usize) -> Value {
    serde_json::json!({"agent": "implement", "at": at, "kind": "note", "body": "n".repeat(len)})
}

/// A store without schemas (notes here exceed the CRD's 4096-byte body cap
/// to reach the byte budget with few entries) holding a Task near the budget.
async fn heavy_task() -> (FakeApi, Executor) {
    let mut store = Store::new();
    let notes: Vec<Value> = (0..7).map(|i| note(&format!("2026-11-0{}T00:00:00Z", i + 1), 100_000)).collect();
    store
        .seed(
            "tasks",
            NS,
            serde_json::json!({"metadata": {"name": "heavy"}, "spec": {"projectRef": "tatara", "goal": "g"},
            "status": {"state": "under-implementation", "notes": notes}}),
        )
        .unwrap();
    let api = serve(store).await.unwrap();
    let exec = Executor::new(api.client(NS).unwrap(), NS);
    (api, exec)
}

fn add_note(t: &mut Task) {
    let notes = t.status_mut().extra.entry("notes").or_insert(serde_json::json!([]));
    notes.as_array_mut().unwrap().push(note("2026-11-29T00:00:00Z", 150_000));
}

#[tokio::test]
async fn budget_spills_oldest_once_then_writes_even_across_a_conflict() {
    // "spilled to tatara-memory first, and dropped from the CR only on spill
    // success - and the spill runs outside the retry closure, so a conflict
    // cannot re-fire it"
    let (api, exec) = heavy_task().await;
    let spill = MemorySpill { ok: true, calls: Mutex::new(vec![]) };
    let raced = Mutex::new(false);
    let store = api.store.clone();
    let out = exec
        .update_task_within_budget("heavy", true, &spill, |t| {
            add_note(t);
            // Another writer lands once, after our first read: the first PUT 409s.
            let mut r = raced.lock().unwrap();
            if !*r {
                *r = true;
                let mut s = store.lock().unwrap();
                s.patch("tasks", NS, "heavy", &serde_json::json!({"status": {"shortDescription": "x"}}), true).unwrap();
            }
        })
        .await
        .unwrap();
    assert_eq!(out, BudgetOutcome::Written { spilled: 1, conflicts: 1 });
    assert_eq!(*spill.calls.lock().unwrap(), vec![1], "spilled once, not per attempt");
    let t = get(&api, "tasks", "heavy").unwrap();
    let notes = t["status"]["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 7);
    assert_eq!(notes[0]["at"], "2026-11-02T00:00:00Z", "the oldest went");
    assert_eq!(t["status"]["shortDescription"], "x", "the other writer's change survives");
    assert!(serde_json::to_vec(&t).unwrap().len() <= rules::ownership::budget::OBJECT_BUDGET_BYTES);
}

#[tokio::test]
async fn budget_drops_nothing_when_the_spill_fails() {
    let (api, exec) = heavy_task().await;
    let before = get(&api, "tasks", "heavy").unwrap();
    let spill = MemorySpill { ok: false, calls: Mutex::new(vec![]) };
    let out = exec.update_task_within_budget("heavy", true, &spill, add_note).await.unwrap();
    assert!(matches!(out, BudgetOutcome::SpillFailed { .. }));
    assert_eq!(get(&api, "tasks", "heavy").unwrap(), before);
}

#[tokio::test]
async fn budget_fails_the_task_with_a_two_field_patch_when_nothing_is_left() {
    // "When even that cannot win ... the Task fails loudly ... a minimal JSON
    // merge patch that carries only the two status fields, so the escape hatch
    // itself cannot 413" - here the object would exceed etcd's ceiling.
    let (api, exec) = heavy_task().await;
    let spill = MemorySpill { ok: true, calls: Mutex::new(vec![]) };
    let out = exec
        .update_task_within_budget("heavy", false, &spill, |t| {
            t.metadata.annotations = Some([("huge".to_string(), "h".repeat(1_600_000))].into());
        })
        .await
        .unwrap();
    assert!(matches!(out, BudgetOutcome::FailedTooLarge { .. }));
    let t = get(&api, "tasks", "heavy").unwrap();
    assert_eq!(t["status"]["parkReason"], "object-too-large");
    assert!(t["metadata"].get("annotations").is_none(), "the oversized write never landed");
    // Unguarded, the same write is refused by the API server (413).
    let mut big: Task = serde_json::from_value(t).unwrap();
    big.metadata.annotations = Some([("huge".to_string(), "h".repeat(1_600_000))].into());
    let err = Api::<Task>::namespaced(exec.client.clone(), NS)
        .replace("heavy", &PostParams::default(), &big)
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 413), "{err}");
}

#[tokio::test]
async fn repair_promotes_the_oldest_surviving_owner_over_http() {
    // Rule 5: "A reconcile guard detects the state, logs at ERROR, increments
    // operator_orphan_no_controller_total, and repairs it by promoting the
    // oldest surviving owner."
    use rules::ownership::owners;
    let (api, exec) = world().await;
    {
        let mut s = api.store.lock().unwrap();
        let mut o = s.get("issues", NS, "iss-tatara-operator-412").unwrap();
        o["metadata"]["ownerReferences"][0]["controller"] = Value::Bool(false);
        s.replace("issues", NS, "iss-tatara-operator-412", o, false).unwrap();
    }
    let before = exec.snapshot().await.unwrap();
    let findings: Vec<_> = before
        .artifacts()
        .iter()
        .flat_map(|a| owners::check(&a.name, owners::Owned::Artifact, &a.owner_references))
        .collect();
    assert_eq!(findings.len(), 1);
    let report = exec.converge("repair", None, |snap| Ok(owners::decide_repairs(snap))).await.unwrap();
    assert_eq!(report.applied.len(), 1, "one write");
    // umbrella was created before member-a: it is the oldest.
    assert_eq!(controllers(&get(&api, "issues", "iss-tatara-operator-412").unwrap()), vec!["umbrella"]);
}
