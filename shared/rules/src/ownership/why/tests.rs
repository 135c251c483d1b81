use serde_json::json;

use super::*;
use crate::ownership::testkit::{oref, task, ts, with_state};
use crate::ownership::types::{Issue, MergeRequest};

const NOW: i64 = 10 * 86400;

fn project(extra: serde_json::Value) -> Project {
    let mut v = json!({"metadata": {"name": "proj"}, "spec": {"scm": {"botLogin": "tatara-bot"}}});
    if let Some(spec) = extra.as_object() {
        for (k, val) in spec {
            v["spec"][k] = val.clone();
        }
    }
    serde_json::from_value(v).unwrap()
}

fn issue(name: &str, state: &str, controller: Option<&str>) -> Issue {
    let refs: Vec<_> = controller.map(|c| oref(c, true)).into_iter().collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": refs},
        "spec": {"number": 7, "projectRef": "proj", "repositoryRef": "repo", "url": "u"},
        "status": {"state": state},
    }))
    .unwrap()
}

fn mr(name: &str, state: &str, controller: &str) -> MergeRequest {
    serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": [oref(controller, true)]},
        "spec": {"number": 9, "projectRef": "proj", "repositoryRef": "repo", "url": "u"},
        "status": {"state": state},
    }))
    .unwrap()
}

fn qe(name: &str, seq: i64, class: &str, state: &str, task_ref: &str, priority: Option<i64>) -> QueuedEvent {
    let mut v = json!({
        "metadata": {"name": name},
        "spec": {"seq": seq, "class": class, "kind": "implement", "projectRef": "proj",
                 "payload": {"kind": "implement", "agentKind": "implement", "taskRef": task_ref}},
        "status": {"state": state},
    });
    if state == "Admitted" {
        v["status"]["taskRef"] = json!(task_ref);
        v["status"]["admittedAt"] = json!("2027-01-01T00:00:00Z");
    }
    if let Some(p) = priority {
        v["spec"]["priority"] = json!(p);
    }
    serde_json::from_value(v).unwrap()
}

fn parked(name: &str, reason: &str, parked_secs_ago: i64) -> Task {
    let mut t = with_state(task(name, 0), "under-implementation", Some(reason));
    t.spec.kind = Some("implement".into());
    t.status_mut().parked_at = Some(ts(NOW - parked_secs_ago).to_string());
    t
}

fn explain(tasks: Vec<Task>, issues: Vec<Issue>, mrs: Vec<MergeRequest>, queued: Vec<QueuedEvent>) -> Vec<TaskWhy> {
    let snap = Snapshot { tasks, issues, merge_requests: mrs };
    let projects = [project(json!({}))];
    let inputs = Inputs { snap: &snap, projects: &projects, queued: &queued, now: ts(NOW) };
    snap.tasks.iter().map(|t| super::task(&inputs, t)).collect()
}

fn one(t: Task) -> TaskWhy {
    explain(vec![t], vec![], vec![], vec![]).remove(0)
}

#[test]
fn retry_wait_doubles_from_a_minute_to_thirty() {
    // stage.RetryWait: 1m, 2m, 4m, 8m, 16m, then the 30m cap.
    let waits: Vec<i64> = (0..7).map(retry_wait_secs).collect();
    assert_eq!(waits, [60, 120, 240, 480, 960, 1800, 1800]);
    assert_eq!(retry_wait_secs(-3), 60);
    assert_eq!(retry_wait_secs(i64::MAX), 1800);
}

#[test]
fn a_never_park_names_its_retention_clock() {
    let w = one(parked("t", "stage-deadline", 3 * 86400));
    let p = w.park.unwrap();
    assert_eq!(p.class, Some(UnparkClass::Never));
    assert!(p.releases.contains("resumeNoReentryParks"), "{}", p.releases);
    assert_eq!(p.clocks.len(), 1);
    assert_eq!(p.clocks[0].in_seconds, 4 * 86400, "parked 3d ago, ParkRetention 7d");
    assert!(w.summary.starts_with("parked(stage-deadline, unpark: never)"), "{}", w.summary);
}

#[test]
fn a_retry_park_shows_its_next_lap_or_that_it_is_unarmed_or_spent() {
    let mut t = parked("t", "ci-failed", 600);
    t.status_mut().retry_blocker = Some("ci-failed".into());
    t.status_mut().retry_attempts = Some(2);
    t.status_mut().retry_next_at = Some(ts(NOW + 240).to_string());
    let p = one(t.clone()).park.unwrap();
    assert!(p.held_by.is_empty(), "{:?}", p.held_by);
    assert_eq!(p.clocks[0].in_seconds, 240);
    assert!(p.clocks[0].what.contains("lap 2 of 5"), "{}", p.clocks[0].what);

    t.status_mut().retry_next_at = None;
    let p = one(t.clone()).park.unwrap();
    assert!(p.held_by[0].contains("not armed yet") && p.held_by[0].contains("4m"), "{:?}", p.held_by);

    t.status_mut().retry_attempts = Some(5);
    let p = one(t.clone()).park.unwrap();
    assert!(p.held_by[0].contains("retry-exhausted"), "{:?}", p.held_by);

    // A different blocker starts from zero (ArmRetry): laps of ci-pending
    // are not charged against ci-failed.
    t.status_mut().retry_blocker = Some("ci-pending".into());
    let p = one(t).park.unwrap();
    assert!(p.held_by[0].contains("not armed yet") && p.held_by[0].contains("60s"), "{:?}", p.held_by);
}

#[test]
fn timer_parks_follow_their_reentry_budgets_and_the_parked_from_gate() {
    let mut t = parked("t", "merge-timeout", 60);
    t.status_mut().merge_reentries = Some(1);
    let p = one(t.clone()).park.unwrap();
    assert!(p.held_by.is_empty() && p.releases.contains("re-entry 2 of 3"), "{p:?}");
    t.status_mut().merge_reentries = Some(3);
    let p = one(t).park.unwrap();
    assert!(p.held_by[0].contains("merge-blocked"), "{:?}", p.held_by);

    // no-outcome re-drives only from under-implementation or awaiting-review (#406).
    let mut t = parked("t", "no-outcome", 60);
    t.status_mut().parked_from_state = Some("new".into());
    let p = one(t.clone()).park.unwrap();
    assert!(p.held_by[0].contains("#406"), "{:?}", p.held_by);
    t.status_mut().parked_from_state = Some("awaiting-review".into());
    assert!(one(t).park.unwrap().held_by.is_empty());
}

#[test]
fn a_human_park_waits_for_a_non_bot_comment_and_names_what_would_decline() {
    let mut t = parked("t", "awaiting-human", 60);
    t.status_mut().issue_refs = Some(vec!["iss-repo-7".into()]);
    let open = issue("iss-repo-7", "open", Some("t"));
    let w = explain(vec![t.clone()], vec![open.clone()], vec![], vec![]).remove(0);
    let p = w.park.unwrap();
    assert!(p.releases.starts_with("the next non-bot comment"), "{}", p.releases);
    assert!(p.held_by.is_empty());

    // The bot's own comment releases nothing; a human's does.
    let bot = serde_json::from_value(json!({"kind": "comment", "repo": "repo", "number": 7, "author": "tatara-bot"}));
    t.status_mut().pending_events = Some(vec![bot.unwrap()]);
    let p = explain(vec![t.clone()], vec![open.clone()], vec![], vec![]).remove(0).park.unwrap();
    assert!(p.releases.starts_with("the next non-bot comment"), "{}", p.releases);
    let alice = serde_json::from_value(json!({"kind": "comment", "repo": "repo", "number": 7, "author": "alice"}));
    t.status_mut().pending_events.as_mut().unwrap().push(alice.unwrap());
    let p = explain(vec![t.clone()], vec![open], vec![], vec![]).remove(0).park.unwrap();
    assert!(p.releases.contains("by alice on repo#7"), "{}", p.releases);

    // "THE EMPTY SET IS NOT A LICENCE": nothing open left to talk about.
    let closed = issue("iss-repo-7", "closed", Some("t"));
    let p = explain(vec![t], vec![closed], vec![], vec![]).remove(0).park.unwrap();
    assert!(p.held_by.iter().any(|h| h.contains("no open Issue")), "{:?}", p.held_by);
}

#[test]
fn a_review_task_with_a_merged_mr_or_spent_rounds_stays_parked() {
    let mut t = parked("t", "awaiting-human", 60);
    t.spec.kind = Some("review".into());
    t.status_mut().human_review_rounds = Some(5);
    let merged = mr("mr-repo-9", "merged", "t");
    let p = explain(vec![t], vec![], vec![merged], vec![]).remove(0).park.unwrap();
    assert!(p.held_by.iter().any(|h| h.contains("#393")), "{:?}", p.held_by);
    assert!(p.held_by.iter().any(|h| h.contains("5 of 5")), "{:?}", p.held_by);
}

#[test]
fn a_backlog_sweep_park_never_ages_and_is_reaped_when_its_issues_close() {
    let t = parked("t", BACKLOG_SWEEP, 30 * 86400);
    let open = issue("iss-repo-7", "open", Some("t"));
    let p = explain(vec![t.clone()], vec![open], vec![], vec![]).remove(0).park.unwrap();
    assert!(p.clocks.is_empty(), "backlog-sweep has no age clock: {:?}", p.clocks);
    assert!(p.held_by.is_empty());
    let closed = issue("iss-repo-7", "closed", Some("t"));
    let p = explain(vec![t], vec![closed], vec![], vec![]).remove(0).park.unwrap();
    assert!(p.held_by[0].contains("reaper collects it"), "{:?}", p.held_by);
}

#[test]
fn a_retired_park_is_released_once_inside_its_window() {
    let t = parked("t", "turn-budget-exhausted", 3600);
    let p = one(t).park.unwrap();
    assert!(p.held_by.is_empty());
    assert_eq!(p.clocks.iter().find(|c| c.what.contains("migration")).unwrap().in_seconds, 47 * 3600);
    let p = one(parked("t", "turn-budget-exhausted", 3 * 86400)).park.unwrap();
    assert!(p.held_by[0].contains("48h"), "{:?}", p.held_by);
    let mut t = parked("t", "turn-budget-exhausted", 3600);
    t.metadata.annotations = Some([(RETIRED_PARK_MIGRATED.to_string(), "x".to_string())].into());
    assert!(one(t).park.unwrap().held_by[0].contains("already ran"));
}

#[test]
fn admission_counts_the_pool_the_way_the_dispatcher_does() {
    // Three normal slots (maxConcurrentAgents' default). Two held by admitted
    // tickets whose Tasks are live in the ticket's stage; a third admitted
    // ticket is spent (its Task moved on to awaiting-review, a review pod).
    let mut running = Vec::new();
    let mut queued = Vec::new();
    for (i, state) in ["under-implementation", "under-implementation", "awaiting-review"].iter().enumerate() {
        let name = format!("run-{i}");
        let mut t = with_state(task(&name, 0), state, None);
        t.spec.kind = Some("implement".into());
        running.push(t);
        queued.push(qe(&format!("qe-run-{i}"), i as i64 + 1, "normal", "Admitted", &name, None));
    }
    let mut waiting = with_state(task("waiting", 0), "under-implementation", None);
    waiting.spec.kind = Some("implement".into());
    let mut ahead = with_state(task("ahead", 0), "under-implementation", None);
    ahead.spec.kind = Some("implement".into());
    queued.push(qe("qe-waiting", 20, "normal", "Queued", "waiting", None));
    // Priority 1 sorts before priority 2 whatever the seq.
    queued.push(qe("qe-ahead", 30, "normal", "Queued", "ahead", Some(1)));
    let mut tasks = running;
    tasks.push(waiting);
    tasks.push(ahead);
    let all = explain(tasks, vec![], vec![], queued);
    let w = all.iter().find(|w| w.name == "waiting").unwrap();
    let a = &w.admission[0];
    assert_eq!((a.inflight, a.capacity, a.ahead), (2, 3, 1), "{a:?}");
    assert!(a.why.contains("1 event(s) ahead"), "{}", a.why);
    assert!(w.summary.contains("waiting for admission"), "{}", w.summary);
    let first = &all.iter().find(|w| w.name == "ahead").unwrap().admission[0];
    assert_eq!(first.ahead, 0);
    assert!(first.why.contains("free slot"), "{}", first.why);
}

#[test]
fn a_paused_project_admits_nothing() {
    let snap = Snapshot { tasks: vec![with_state(task("t", 0), "under-implementation", None)], ..Default::default() };
    let projects = [project(json!({"maxConcurrentAgents": 0}))];
    let queued = [qe("qe", 1, "normal", "Queued", "t", None)];
    let inputs = Inputs { snap: &snap, projects: &projects, queued: &queued, now: ts(NOW) };
    let w = super::task(&inputs, &snap.tasks[0]);
    assert!(w.admission[0].why.contains("kill switch"), "{}", w.admission[0].why);
}

#[test]
fn the_live_owner_is_resolved_as_the_sweep_resolves_it() {
    let live = with_state(task("live", 0), "under-implementation", None);
    let done = with_state(task("done", 0), "done", None);
    let snap = Snapshot {
        tasks: vec![live, done],
        issues: vec![
            issue("iss-a", "open", Some("live")),
            issue("iss-b", "open", Some("done")),
            issue("iss-c", "closed", Some("done")),
            issue("iss-d", "open", Some("gone")),
            issue("iss-e", "open", None),
        ],
        merge_requests: vec![mr("mr-f", "open", "done")],
    };
    let inputs = Inputs { snap: &snap, projects: &[], queued: &[], now: ts(NOW) };
    let by = |name: &str| {
        let a = snap.artifacts().into_iter().find(|a| a.name == name).unwrap();
        artifact(&inputs, &a)
    };
    let a = by("iss-a");
    assert_eq!(a.live_owner.as_deref(), Some("live"));
    assert_eq!(a.owner.unwrap().name, "live");
    // A done controller on an Issue that is not closed is released (sweep.go
    // terminalOwnerReleasable); on a closed Issue or a merge request it stays.
    assert_eq!(by("iss-b").live_owner, None);
    assert!(by("iss-b").summary.contains("releases it"), "{}", by("iss-b").summary);
    assert_eq!(by("iss-c").live_owner.as_deref(), Some("done"));
    assert_eq!(by("mr-f").live_owner.as_deref(), Some("done"));
    assert!(by("iss-d").summary.contains("does not exist"), "{}", by("iss-d").summary);
    assert!(by("iss-e").summary.contains("next sweep mints"), "{}", by("iss-e").summary);
}
