use super::*;

#[test]
fn unknown_fields_survive_a_round_trip() {
    // Types "round-trip objects valid under the real CRD schemas without
    // losing fields we do not model".
    let raw = serde_json::json!({
        "apiVersion": "tatara.dev/v1alpha1", "kind": "MergeRequest",
        "metadata": {"name": "mr-r-1", "namespace": "ns", "resourceVersion": "4",
            "ownerReferences": [{"apiVersion": "tatara.dev/v1alpha1", "kind": "Task",
                "name": "t", "uid": "u", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"number": 1, "projectRef": "p", "repositoryRef": "r", "url": "https://x/1"},
        "status": {"author": "bot", "headSHA": "abc", "lastBotHeadSHA": "abc",
            "lastMirroredCommentID": "c9", "ciStatus": "green",
            "pendingReview": {"body": "b", "round": 1, "sha": "abc"}},
        "futureTopLevel": {"x": 1}
    });
    let mr: MergeRequest = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(mr.status.as_ref().unwrap().last_bot_head_sha.as_deref(), Some("abc"));
    assert_eq!(serde_json::to_value(&mr).unwrap(), raw);
}

fn task_with(state: Option<&str>, park: Option<&str>) -> Task {
    let mut t = Task::default();
    t.status_mut().state = state.map(str::to_string);
    t.status_mut().park_reason = park.map(str::to_string);
    t
}

#[test]
fn stage_reads_state_and_the_park_flag() {
    // CRD: parkReason "Empty means NOT PARKED, and that is the whole test".
    assert_eq!(task_with(Some("new"), Some("")).stage(), Stage::Active("new".into()));
    assert_eq!(task_with(Some("new"), Some("backlog-sweep")).stage(), Stage::Parked("backlog-sweep".into()));
    assert_eq!(task_with(Some("new"), Some("object-too-large")).stage(), Stage::Failed("object-too-large".into()));
    assert_eq!(task_with(Some("done"), None).stage(), Stage::Delivered);
    assert_eq!(task_with(Some("rejected"), None).stage(), Stage::Rejected);
    // "ACTIVE = stage NOT IN (parked, delivered, rejected, failed)"
    assert!(task_with(Some("under-implementation"), None).is_active());
    assert!(!task_with(Some("new"), Some("backlog-sweep")).is_active());
    assert!(!task_with(Some("done"), None).is_active());
}

#[test]
fn task_owner_refs_always_block_owner_deletion() {
    // Rule 2: "Every owner reference sets blockOwnerDeletion: true ...
    // including the plain ones."
    assert_eq!(task_owner_ref("t", "u", false).block_owner_deletion, Some(true));
    assert_eq!(task_owner_ref("t", "u", true).controller, Some(true));
}

#[test]
fn an_unreconciled_task_stands_at_its_create_edge() {
    // CRD: a sweep-minted backlog owner "is `new` AND parked(backlog-sweep)"
    // from the Create edge, with no post-create status write.
    let mut t = Task::new("mt-r-1-x");
    t.spec.initial_park_reason = Some(BACKLOG_SWEEP.into());
    assert_eq!(t.stage(), Stage::Parked(BACKLOG_SWEEP.into()));
    assert!(!t.is_active());
    let mut t = Task::new("mt-t-r-1-x");
    t.spec.initial_state = Some("under-implementation".into());
    assert_eq!(t.stage(), Stage::Active("under-implementation".into()));
    assert_eq!(Task::new("plain").stage(), Stage::Active("new".into()));
    // Once the reconciler wrote a state, the status wins.
    t.status_mut().state = Some("done".into());
    assert_eq!(t.stage(), Stage::Delivered);
}
