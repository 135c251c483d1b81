use super::*;
use crate::ownership::testkit::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

fn rules(f: &[Finding]) -> Vec<u8> {
    let mut r: Vec<u8> = f.iter().map(|f| f.rule).collect();
    r.sort();
    r
}

#[test]
fn a_healthy_artifact_has_no_findings() {
    // The spec's diagram: umbrella controller=true, member controller=false,
    // both blockOwnerDeletion=true.
    let refs = vec![oref("umbrella", true), oref("member", false)];
    assert!(check("iss-x-1", Owned::Artifact, &refs).is_empty());
}

#[test]
fn two_controllers_are_named() {
    // Rule 1: "Exactly one owner carries controller=true."
    let f = check("iss", Owned::Artifact, &[oref("a", true), oref("b", true)]);
    assert_eq!(rules(&f), vec![1]);
    assert_eq!(f[0].violation, Violation::TwoControllers { owners: vec!["a".into(), "b".into()] });
}

#[test]
fn owners_but_no_controller_is_named() {
    // Rule 5: "An artifact with plain owners and no controller owner is worked
    // by nobody and re-minted by nobody".
    let f = check("iss", Owned::Artifact, &[oref("a", false)]);
    assert_eq!(rules(&f), vec![5]);
    // Zero owners is a different, deliberate state (released by failed).
    assert!(check("iss", Owned::Artifact, &[]).is_empty());
}

#[test]
fn a_plain_reference_without_block_owner_deletion_is_named() {
    // Rule 3: "Non-controller owners are plain references. controller unset or
    // false, blockOwnerDeletion still true."
    let mut plain = oref("m", false);
    plain.block_owner_deletion = None;
    let f = check("iss", Owned::Artifact, &[oref("u", true), plain]);
    assert_eq!(rules(&f), vec![3]);
    // Rule 2: "Every owner reference sets blockOwnerDeletion: true" - the
    // controller too.
    let mut ctl = oref("u", true);
    ctl.block_owner_deletion = Some(false);
    assert_eq!(rules(&check("iss", Owned::Artifact, &[ctl])), vec![2]);
}

#[test]
fn a_task_owning_a_task_is_named() {
    // Rule 4: "A Task never owns a Task."
    let f = check("member", Owned::Task, &[oref("umbrella", false)]);
    assert_eq!(rules(&f), vec![4]);
    let mut t = task("member", 0);
    t.metadata.owner_references = Some(vec![oref("umbrella", true)]);
    assert_eq!(repair_task(&t), Some(vec![]));
}

#[test]
fn every_violation_on_one_object_is_named() {
    let mut bad = oref("c", false);
    bad.block_owner_deletion = None;
    let f = check("iss", Owned::Artifact, &[oref("a", true), oref("b", true), bad]);
    assert_eq!(rules(&f), vec![1, 3]);
}

// The repair is the operator's `RepairZeroController` (internal/own/own.go);
// the cases below port `own_test.go`'s (TestOldestSurvivingOwner,
// TestTaskOwnersIgnoresForeignRefs, TestDropOwner, TestHandOverController*)
// onto the whole repair.

fn controllers(a: &Action) -> Vec<String> {
    let Action::SetOwners { owner_references, .. } = a else { panic!("not a repair: {a:?}") };
    owner_references.iter().filter(|r| r.controller == Some(true)).map(|r| r.name.clone()).collect()
}

fn refs_of(a: &Action) -> Vec<OwnerReference> {
    let Action::SetOwners { owner_references, .. } = a else { panic!("not a repair: {a:?}") };
    owner_references.clone()
}

#[test]
fn the_first_live_owner_in_reference_order_is_promoted_not_the_oldest_by_timestamp() {
    // TestOldestSurvivingOwner "first owner alive wins": ownerRef order is
    // creation order, whatever creationTimestamp says.
    let a = issue("iss", vec![oref("young", false), oref("old", false)]);
    let tasks = [task("young", 50), task("old", 10)];
    let r = repair(&a, &tasks).expect("a repair");
    assert_eq!(controllers(&r), vec!["young"]);
    let Action::SetOwners { resource_version, .. } = &r else { unreachable!() };
    assert_eq!(resource_version.as_deref(), Some("7"), "guarded by the version it was computed from");
    assert!(refs_of(&r).iter().all(|x| x.block_owner_deletion == Some(true)));
    assert_eq!(refs_of(&r).len(), 2, "the repair drops no live reference");
}

#[test]
fn dead_and_finished_owners_are_skipped() {
    // "skips dead owners, picks oldest survivor"; a TaskDone owner is no
    // heir (own.go:198-205), nor is a Task being deleted.
    let a = issue(
        "iss",
        vec![
            oref("gone", false),
            oref("done", false),
            oref("rejected", false),
            oref("deleting", false),
            oref("b", false),
        ],
    );
    let mut deleting = task("deleting", 3);
    deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts(9)));
    let tasks = [
        with_state(task("done", 1), "done", None),
        with_state(task("rejected", 2), "rejected", None),
        deleting,
        task("b", 4),
    ];
    assert_eq!(controllers(&repair(&a, &tasks).unwrap()), vec!["b"]);
    // A parked Task can still work: it is an heir.
    let a = issue("iss", vec![oref("parked", false)]);
    let tasks = [with_state(task("parked", 1), "under-implementation", Some("awaiting-human"))];
    assert_eq!(controllers(&repair(&a, &tasks).unwrap()), vec!["parked"]);
}

#[test]
fn no_live_heir_leaves_the_artifact_alone() {
    // "no survivors": every owner finished is the sweep's; no owner that
    // exists is the garbage collector's; no owners is not this guard's.
    let a = issue("iss", vec![oref("d1", false), oref("d2", false)]);
    let tasks = [with_state(task("d1", 1), "done", None), with_state(task("d2", 2), "rejected", None)];
    assert_eq!(repair(&a, &tasks), None);
    assert_eq!(repair(&issue("iss", vec![oref("m", false)]), &[]), None);
    assert_eq!(repair(&issue("iss", vec![]), &[]), None);
}

#[test]
fn only_task_references_are_read_or_rewritten() {
    // TestTaskOwnersIgnoresForeignRefs: a Project reference is never
    // promoted, and the repair leaves it exactly as it was.
    let project = OwnerReference {
        api_version: "tatara.dev/v1alpha1".into(),
        kind: "Project".into(),
        name: "p-1".into(),
        uid: "uid-p-1".into(),
        controller: None,
        block_owner_deletion: None,
    };
    let a = issue("iss", vec![project.clone(), oref("t-a", false)]);
    let r = repair(&a, &[task("p-1", 0), task("t-a", 1)]).unwrap();
    assert_eq!(controllers(&r), vec!["t-a"]);
    assert_eq!(refs_of(&r)[0], project);
}

#[test]
fn a_dangling_controller_reference_is_dropped_and_the_next_live_owner_promoted_in_one_write() {
    // TestDropOwner: a reference to a Task that does not exist is removed,
    // not read past; then the zero-controller rule promotes, in the same write.
    let a = issue("iss", vec![oref("dead", true), oref("alive", false)]);
    let r = repair(&a, &[task("alive", 5)]).unwrap();
    assert_eq!(refs_of(&r).iter().map(|x| x.name.as_str()).collect::<Vec<_>>(), ["alive"]);
    assert_eq!(controllers(&r), vec!["alive"]);
}

#[test]
fn a_controller_that_exists_is_kept_even_when_finished() {
    // RepairZeroController returns at once when a controller exists; only
    // a missing blockOwnerDeletion is written (rules 2 and 3).
    let healthy = issue("iss", vec![oref("u", true), oref("m", false)]);
    assert_eq!(repair(&healthy, &[task("u", 1), task("m", 2)]), None);
    let finished = issue("iss", vec![oref("u", true), oref("m", false)]);
    assert_eq!(repair(&finished, &[with_state(task("u", 1), "done", None), task("m", 2)]), None);
    let mut plain = oref("m", false);
    plain.block_owner_deletion = None;
    let r = repair(&issue("iss", vec![oref("u", true), plain]), &[task("u", 1), task("m", 2)]).unwrap();
    assert_eq!(controllers(&r), vec!["u"]);
    assert!(refs_of(&r).iter().all(|x| x.block_owner_deletion == Some(true)));
}

#[test]
fn the_hand_over_is_idempotent() {
    // TestHandOverControllerIsIdempotent: the repaired list needs no repair.
    let a = issue("iss", vec![oref("a", false), oref("b", false)]);
    let tasks = [task("a", 1), task("b", 2)];
    let first = repair(&a, &tasks).unwrap();
    let again = issue("iss", refs_of(&first));
    assert_eq!(repair(&again, &tasks), None);
}

#[test]
fn swap_appends_and_demotes_in_one_list() {
    // "APPENDS U's ownerRef (controller=false, blockOwnerDeletion=true) -
    // REWRITES Mi's ownerRef to controller=false - REWRITES U's ownerRef to
    // controller=true"
    let out = swap_controller(&[oref("m", true)], &oref("u", false));
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].name, "m");
    assert_eq!(out[0].controller, Some(false));
    assert_eq!(out[1].name, "u");
    assert_eq!(out[1].controller, Some(true));
    assert!(out.iter().all(|r| r.block_owner_deletion == Some(true)));
}
