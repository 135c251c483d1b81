use super::*;
use crate::ownership::testkit::*;

fn members() -> Vec<Task> {
    vec![task("m1", 10), task("m2", 20)]
}

#[test]
fn gate_refuses_a_member_with_a_running_pod_with_409() {
    // "a member with a running pod (status.podName != "") ... is refused with
    // 409 fold target has work in flight"
    let u = task("u", 30);
    let mut ms = members();
    ms[1].status_mut().pod_name = Some("pod-1".into());
    let err = liveness_gate(&u, &["m1".into(), "m2".into()], &ms).unwrap_err();
    assert_eq!(err.status(), 409);
    assert_eq!(err.message(), "fold target has work in flight");
    // An empty podName is not a running pod.
    ms[1].status_mut().pod_name = Some(String::new());
    assert!(liveness_gate(&u, &["m1".into(), "m2".into()], &ms).is_ok());
}

#[test]
fn gate_refuses_a_live_post_approved_stage() {
    // "or a live post-approved stage"
    let u = task("u", 30);
    let ms = vec![with_state(task("m1", 1), "under-implementation", None)];
    assert_eq!(liveness_gate(&u, &["m1".into()], &ms).unwrap_err().status(), 409);
    // Parked where it is: not live.
    let ms = vec![with_state(task("m1", 1), "under-implementation", Some("awaiting-human"))];
    assert!(liveness_gate(&u, &["m1".into()], &ms).is_ok());
}

#[test]
fn gate_refuses_missing_members_and_other_projects() {
    // "every named member exists, is in the same project"
    let u = task("u", 30);
    assert!(matches!(liveness_gate(&u, &["ghost".into()], &members()), Err(FoldRefusal::MemberMissing { .. })));
    let mut other = task("m1", 1);
    other.spec.project_ref = "elsewhere".into();
    assert!(matches!(liveness_gate(&u, &["m1".into()], &[other]), Err(FoldRefusal::OtherProject { .. })));
}

#[test]
fn step_1_sets_fold_in_flight_in_one_status_update() {
    // "status.foldInFlight = [M1..Mn] (one Status().Update)"
    let a = begin(&task("u", 30), &["m1".into(), "m2".into()]);
    let Action::SetFoldInFlight { members, resource_version, .. } = a else { panic!() };
    assert_eq!(members, vec!["m1", "m2"]);
    assert_eq!(resource_version.as_deref(), Some("3"));
}

#[test]
fn step_2_is_one_write_per_artifact_with_the_swap() {
    // "for each artifact A owned by Mi: ONE Update on A that atomically ..."
    let u = task("u", 30);
    let arts = vec![
        issue("iss-1", vec![oref("m1", true)]),
        mr("mr-2", vec![oref("m2", true)], "bot", "task/m2"),
        issue("iss-other", vec![oref("x", true)]),
    ];
    let actions = adopt(&u, &members(), &arts);
    assert_eq!(actions.len(), 2, "one write per member artifact, none for others");
    for a in &actions {
        let Action::SetOwners { owner_references, .. } = a else { panic!() };
        let ctl: Vec<_> = owner_references.iter().filter(|r| r.controller == Some(true)).collect();
        assert_eq!(ctl.len(), 1);
        assert_eq!(ctl[0].name, "u");
        assert!(owner_references.iter().any(|r| r.name.starts_with('m') && r.controller == Some(false)));
    }
}

#[test]
fn step_2_rerun_after_a_crash_is_idempotent() {
    // "A crash between steps 2 and 4 is safe and idempotent"
    let u = task("u", 30);
    let done = issue("iss-1", vec![oref("m1", false), oref("u", true)]);
    assert!(adopt(&u, &members(), &[done]).is_empty());
}

#[test]
fn step_3_verified_deletes_members_then_clears() {
    // "only then: delete M1..Mn" then "foldInFlight = []"
    let u = task("u", 30);
    let relisted = vec![issue("iss-1", vec![oref("m1", false), oref("u", true)])];
    let FoldVerdict::Verified { actions } = verify(&u, &members(), &["iss-1".into()], &relisted) else { panic!() };
    assert!(matches!(actions[0], Action::DeleteTask { ref task, .. } if task == "m1"));
    assert!(matches!(actions[1], Action::DeleteTask { ref task, .. } if task == "m2"));
    assert!(matches!(actions[2], Action::SetFoldInFlight { ref members, .. } if members.is_empty()));
}

#[test]
fn step_3_mismatch_fails_the_umbrella_and_deletes_nothing() {
    // "On ANY mismatch: stage -> failed(fold-adoption-unverified),
    // foldInFlight cleared, members NOT deleted."
    let u = task("u", 30);
    let relisted = vec![
        issue("iss-1", vec![oref("m1", false), oref("u", true)]),
        issue("iss-2", vec![oref("m2", true), oref("u", false)]),
    ];
    let v = verify(&u, &members(), &["iss-1".into(), "iss-2".into(), "iss-3".into()], &relisted);
    let FoldVerdict::Unverified { actions, mismatches } = v else { panic!() };
    assert_eq!(mismatches.len(), 2, "{mismatches:?}");
    assert!(matches!(actions[0], Action::FailTask { ref reason, .. } if reason == "fold-adoption-unverified"));
    assert!(matches!(actions[1], Action::SetFoldInFlight { ref members, .. } if members.is_empty()));
    assert!(!actions.iter().any(|a| matches!(a, Action::DeleteTask { .. })));
}

#[test]
fn resume_clears_fold_in_flight_once_members_are_gone() {
    // "A crash after step 4 leaves foldInFlight set, and the reconciler clears
    // it once the members are gone."
    let mut u = task("u", 30);
    u.status_mut().fold_in_flight = Some(vec!["m1".into(), "m2".into()]);
    assert!(resume(&u, &members()[..1]).is_none());
    assert!(matches!(resume(&u, &[]), Some(Action::SetFoldInFlight { ref members, .. }) if members.is_empty()));
}

#[test]
fn a_member_that_is_itself_mid_fold_is_work_in_flight() {
    // A fold in flight is work in flight: "fold target has work in flight".
    // Without this two Tasks folding each other delete each other's umbrella
    // (found by the interleaving property test).
    let u = task("u", 30);
    let mut m = task("m1", 10);
    m.status_mut().fold_in_flight = Some(vec!["x".into()]);
    assert_eq!(liveness_gate(&u, &["m1".into()], std::slice::from_ref(&m)).unwrap_err().status(), 409);
    // Raced past the gate: verification fails the fold and deletes nothing.
    let v = verify(&u, &[m], &[], &[]);
    let FoldVerdict::Unverified { actions, .. } = v else { panic!() };
    assert!(!actions.iter().any(|a| matches!(a, Action::DeleteTask { .. })));
}

#[test]
fn an_artifact_a_member_only_holds_open_keeps_its_controller() {
    // "for each artifact A owned by Mi ... REWRITES Mi's ownerRef to
    // controller=false": only artifacts a member controls are swapped.
    let u = task("u", 30);
    let held = issue("iss-held", vec![oref("x", true), oref("m1", false)]);
    assert!(adopt(&u, &members(), std::slice::from_ref(&held)).is_empty());
    assert!(named_artifacts(&u, &members(), &[held]).is_empty());
}
