use super::*;
use crate::ownership::testkit::*;
use crate::ownership::types::{Project, Task};

const DAY: i64 = 86_400;

fn at(t: Task, field: &str, secs_ago: i64, now: Timestamp) -> Task {
    let mut t = t;
    let stamp = Timestamp::from_second(now.as_second() - secs_ago).unwrap().to_string();
    let st = t.status_mut();
    match field {
        "stateEnteredAt" => st.state_entered_at = Some(stamp),
        "parkedAt" => st.parked_at = Some(stamp),
        "deliveredAt" => st.delivered_at = Some(stamp),
        _ => unreachable!(),
    }
    t
}

fn reaps(v: ReapVerdict) -> bool {
    matches!(v, ReapVerdict::Reap { .. })
}

#[test]
fn delivered_is_reaped_at_48h_not_24h() {
    // "delivered is reaped at 48h, not 24h, and only once status.documentedBy
    // is stamped or the Task provably had zero merged MRs."
    let now = ts(10 * DAY);
    let ctx = ReapContext::default();
    let d = with_state(task("t", 0), "done", None);
    assert!(!reaps(reap_verdict(&at(d.clone(), "deliveredAt", 30 * 3600, now), now, &ctx)));
    assert!(reaps(reap_verdict(&at(d.clone(), "deliveredAt", 49 * 3600, now), now, &ctx)));
    let merged = ReapContext { merged_mrs: 1, ..Default::default() };
    let old = at(d, "deliveredAt", 5 * DAY, now);
    assert!(!reaps(reap_verdict(&old, now, &merged)), "merged MRs and no documentedBy");
    let mut documented = old.clone();
    documented.status_mut().documented_by = Some("doc-batch".into());
    assert!(reaps(reap_verdict(&documented, now, &merged)));
}

#[test]
fn rejected_24h_failed_and_parked_7_days() {
    // Retention: "rejected 24 h, failed 7 days, parked 7 days"
    let now = ts(30 * DAY);
    let ctx = ReapContext::default();
    let r = with_state(task("t", 0), "rejected", None);
    assert!(!reaps(reap_verdict(&at(r.clone(), "stateEnteredAt", 23 * 3600, now), now, &ctx)));
    assert!(reaps(reap_verdict(&at(r, "stateEnteredAt", 25 * 3600, now), now, &ctx)));
    let f = with_state(task("t", 0), "new", Some("object-too-large"));
    assert!(!reaps(reap_verdict(&at(f.clone(), "parkedAt", 6 * DAY, now), now, &ctx)));
    assert!(reaps(reap_verdict(&at(f, "parkedAt", 8 * DAY, now), now, &ctx)));
    let p = with_state(task("t", 0), "new", Some("awaiting-human"));
    assert!(!reaps(reap_verdict(&at(p.clone(), "parkedAt", 6 * DAY, now), now, &ctx)));
    assert!(reaps(reap_verdict(&at(p, "parkedAt", 8 * DAY, now), now, &ctx)));
    let active = with_state(task("t", 0), "under-implementation", None);
    assert!(!reaps(reap_verdict(&at(active, "stateEnteredAt", 90 * DAY, now), now, &ctx)));
}

#[test]
fn backlog_sweep_is_never_reaped_on_age_only_when_its_issues_close() {
    // "parked(backlog-sweep) is never reaped on age. It is exempt from
    // parkRetention and is reaped only when every Issue it owns has state ==
    // closed."
    let now = ts(400 * DAY);
    let b = at(with_state(task("t", 0), "new", Some("backlog-sweep")), "parkedAt", 300 * DAY, now);
    let open = ReapContext { owned_issues: vec![issue("iss", vec![oref("t", true)])], ..Default::default() };
    assert!(!reaps(reap_verdict(&b, now, &open)));
    let mut closed_issue = issue("iss", vec![oref("t", true)]);
    closed_issue.state = Some("closed".into());
    let closed = ReapContext { owned_issues: vec![closed_issue], ..Default::default() };
    assert!(reaps(reap_verdict(&b, now, &closed)));
}

#[test]
fn reaper_skips_tasks_in_a_live_fold_in_flight() {
    // "The reaper skips any Task named in a live Task's status.foldInFlight."
    let now = ts(30 * DAY);
    let mut umbrella = task("u", 0);
    umbrella.status_mut().fold_in_flight = Some(vec!["m".into()]);
    let m = at(with_state(task("m", 0), "rejected", None), "stateEnteredAt", 5 * DAY, now);
    let ctx =
        ReapContext { live_fold_members: live_fold_members(&[umbrella.clone(), m.clone()]), ..Default::default() };
    assert!(!reaps(reap_verdict(&m, now, &ctx)));
    // A terminal umbrella's marker is not live.
    let dead = with_state(umbrella, "rejected", None);
    assert!(live_fold_members(&[dead]).is_empty());
}

#[test]
fn settle_hands_controller_to_the_oldest_survivor_then_deletes() {
    // "if the artifact has >= 1 SURVIVING plain owner: hand controller=true to
    // the OLDEST surviving owner ... THEN delete the Task."
    let t = task("t", 0);
    let arts = vec![
        issue("iss-shared", vec![oref("t", true), oref("young", false), oref("old", false)]),
        issue("iss-alone", vec![oref("t", true)]),
    ];
    let owners = [owner("t", 0, true), owner("young", 9, true), owner("old", 3, true)];
    let actions = settle_and_delete(&t, &arts, &owners);
    assert_eq!(actions.len(), 2, "{actions:?}");
    let Action::SetOwners { name, owner_references, .. } = &actions[0] else { panic!() };
    assert_eq!(name, "iss-shared");
    assert!(owner_references.iter().any(|r| r.name == "old" && r.controller == Some(true)));
    // "else: delete the Task; the artifact cascades with it."
    assert!(matches!(&actions[1], Action::DeleteTask { task, .. } if task == "t"));
}

fn project() -> Project {
    let mut p = Project::default();
    p.spec.scm.bot_login = "tatara-bot".into();
    p
}

#[test]
fn terminal_path_runs_in_its_fixed_order() {
    // "1. post a bot comment ... 2. stamp the tatara-parked label ... 3.
    // RELEASE controller-ownership FIRST ... 4. ONLY NOW ... MRs WE CREATED"
    let mut t = with_state(task("t", 0), "rejected", None);
    t.status_mut().state_reason = Some("triage-declined".into());
    let arts = vec![issue("iss-1", vec![oref("t", true)]), mr("mr-1", vec![oref("t", true)], "tatara-bot", "task/t")];
    let actions = terminal_release(&t, &project(), &arts, &[owner("t", 0, true)]);
    let kinds: Vec<&str> = actions
        .iter()
        .map(|a| match a {
            Action::PostIssueComment { .. } => "comment",
            Action::StampLabel { .. } => "label",
            Action::SetOwners { .. } => "release",
            Action::CloseMergeRequest { .. } => "close",
            Action::DeleteBranch { .. } => "branch",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, vec!["comment", "label", "release", "release", "close", "branch"]);
    let Action::PostIssueComment { body, blocking, .. } = &actions[0] else { panic!() };
    assert!(body.contains("triage-declined") && *blocking, "names stageReason, blocking");
    let Action::StampLabel { label, blocking, .. } = &actions[1] else { panic!() };
    assert_eq!(label, "tatara-parked");
    assert!(*blocking);
    // "else DROP the ownerRef entirely"
    let Action::SetOwners { owner_references, .. } = &actions[2] else { panic!() };
    assert!(owner_references.is_empty());
    // Step 5: the Task survives.
    assert!(!actions.iter().any(|a| matches!(a, Action::DeleteTask { .. })));
}

#[test]
fn terminal_release_hands_to_the_oldest_surviving_plain_owner() {
    // "hand it to the oldest SURVIVING plain owner, if any"
    let t = with_state(task("t", 0), "rejected", None);
    let arts = vec![issue("iss-1", vec![oref("t", true), oref("s", false)])];
    let actions = terminal_release(&t, &project(), &arts, &[owner("t", 0, true), owner("s", 1, true)]);
    let Some(Action::SetOwners { owner_references, .. }) =
        actions.iter().find(|a| matches!(a, Action::SetOwners { .. }))
    else {
        panic!()
    };
    assert!(owner_references.iter().any(|r| r.name == "s" && r.controller == Some(true)));
    assert!(owner_references.iter().any(|r| r.name == "t" && r.controller == Some(false)));
}

#[test]
fn comments_only_on_open_issues() {
    // "post a bot comment on every owned OPEN Issue"
    let t = with_state(task("t", 0), "rejected", None);
    let mut closed = issue("iss-1", vec![oref("t", true)]);
    closed.state = Some("closed".into());
    let actions = terminal_release(&t, &project(), &[closed], &[owner("t", 0, true)]);
    assert!(!actions.iter().any(|a| matches!(a, Action::PostIssueComment { .. } | Action::StampLabel { .. })));
}

#[test]
fn mr_close_needs_all_four_clauses() {
    let t = task("t", 0);
    let p = project();
    let good = mr("mr", vec![], "tatara-bot", "task/t");
    assert!(matches!(mr_close_verdict(&t, &p, &good, true, true), MrCloseVerdict::Close { .. }));
    // 1. "the merge request is bot-authored"
    let human = mr("mr", vec![], "alice", "task/t");
    assert!(matches!(mr_close_verdict(&t, &p, &human, true, true), MrCloseVerdict::LeaveAlone { .. }));
    // 2. "its head branch (mr.status.headBranch) is task/<this-task-name>"
    let other_branch = mr("mr", vec![], "tatara-bot", "task/other");
    assert!(matches!(mr_close_verdict(&t, &p, &other_branch, true, true), MrCloseVerdict::LeaveAlone { .. }));
    // 3. "this Task is (or was) the controller owner"
    assert!(matches!(mr_close_verdict(&t, &p, &good, true, false), MrCloseVerdict::LeaveAlone { .. }));
    // 4. "no surviving plain owner remains"
    assert!(matches!(mr_close_verdict(&t, &p, &good, false, true), MrCloseVerdict::LeaveAlone { .. }));
}

#[test]
fn a_shared_mr_is_left_completely_alone() {
    // "Otherwise it is left completely alone. No close, no branch delete, no comment."
    let t = with_state(task("t", 0), "rejected", None);
    let arts = vec![mr("mr-1", vec![oref("t", true), oref("s", false)], "tatara-bot", "task/t")];
    let actions = terminal_release(&t, &project(), &arts, &[owner("t", 0, true), owner("s", 1, true)]);
    assert!(!actions.iter().any(|a| matches!(
        a,
        Action::CloseMergeRequest { .. } | Action::DeleteBranch { .. } | Action::PostIssueComment { .. }
    )));
}

#[test]
fn reaper_skips_an_umbrella_mid_fold() {
    // Extends "The reaper skips any Task named in a live Task's
    // status.foldInFlight" to the umbrella carrying the marker: deleting it
    // mid-adoption leaves an artifact with plain owners and no controller.
    let now = ts(30 * DAY);
    let mut u = at(with_state(task("u", 0), "rejected", None), "stateEnteredAt", 5 * DAY, now);
    assert!(reaps(reap_verdict(&u, now, &ReapContext::default())));
    u.status_mut().fold_in_flight = Some(vec!["m".into()]);
    assert!(!reaps(reap_verdict(&u, now, &ReapContext::default())));
}

#[test]
fn a_forced_doc_batch_stamps_documented_by_only_if_it_ran_a_pod() {
    // "stamps documentedBy on every Task in its spec.documentsTasks on the way
    // out - unless it never ran a pod at all, in which case it stamps nothing"
    let mut batch = task("doc-batch", 0);
    batch.spec.documents_tasks = Some(vec!["a".into(), "b".into()]);
    assert!(documented_by_on_forced_exit(&batch).is_empty());
    batch.status_mut().extra.insert("podStartedAt".into(), "2026-11-01T00:00:00Z".into());
    assert_eq!(documented_by_on_forced_exit(&batch), vec!["a", "b"]);
}

#[test]
fn a_task_reaped_in_the_same_pass_is_not_a_survivor() {
    // "hand controller=true to the OLDEST SURVIVING owner": an owner the same
    // pass deletes does not survive.
    use crate::ownership::decision::{Artifact, Snapshot};
    use crate::ownership::types::{ArtifactKind, Issue};
    let t1 = with_state(task("t1", 5), "rejected", None);
    let t2 = with_state(task("t2", 1), "rejected", None);
    let s = task("s", 9);
    let mut iss = Issue::new("iss-repo-1");
    iss.spec.repository_ref = "repo".into();
    iss.spec.number = 1;
    iss.metadata.owner_references = Some(vec![oref("t1", true), oref("t2", false), oref("s", false)]);
    let snap = Snapshot { tasks: vec![t1, t2, s], issues: vec![iss], merge_requests: vec![] };
    assert_eq!(Artifact::from(&snap.issues[0]).kind, ArtifactKind::Issue);
    let heir = |actions: Vec<Action>| match &actions[0] {
        Action::SetOwners { owner_references, .. } => {
            owner_references.iter().find(|r| r.controller == Some(true)).unwrap().name.clone()
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(heir(decide(&snap, &project(), "t1")), "t2", "alone, t2 is the oldest survivor");
    let pass: BTreeSet<String> = ["t1".to_string(), "t2".to_string()].into();
    assert_eq!(heir(decide_in_pass(&snap, &project(), "t1", &pass)), "s");
}
