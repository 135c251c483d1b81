use super::*;
use crate::ownership::testkit::*;

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

#[test]
fn repair_promotes_the_oldest_surviving_owner_in_one_write() {
    // "repairs it by promoting the oldest surviving owner"
    let a = issue("iss", vec![oref("young", false), oref("old", false), oref("gone", false)]);
    let owners = [owner("young", 50, true), owner("old", 10, true), owner("gone", 1, false)];
    let Some(Action::SetOwners { owner_references, resource_version, .. }) = repair(&a, &owners) else {
        panic!("expected a repair");
    };
    assert_eq!(resource_version.as_deref(), Some("7"));
    let ctl: Vec<_> = owner_references.iter().filter(|r| r.controller == Some(true)).collect();
    assert_eq!(ctl.len(), 1);
    assert_eq!(ctl[0].name, "old");
    assert!(owner_references.iter().all(|r| r.block_owner_deletion == Some(true)));
    assert_eq!(owner_references.len(), 3, "the repair drops no reference");
}

#[test]
fn repair_replaces_a_controller_that_is_gone() {
    // Every path that removes a controller "hands the flag to a survivor first";
    // when one did not, the guard does it.
    let a = issue("iss", vec![oref("dead", true), oref("alive", false)]);
    let owners = [owner("dead", 0, false), owner("alive", 5, true)];
    let Some(Action::SetOwners { owner_references, .. }) = repair(&a, &owners) else { panic!() };
    assert!(owner_references.iter().any(|r| r.name == "alive" && r.controller == Some(true)));
    assert!(owner_references.iter().any(|r| r.name == "dead" && r.controller == Some(false)));
}

#[test]
fn repair_keeps_one_of_two_controllers() {
    let a = issue("iss", vec![oref("b", true), oref("a", true)]);
    let owners = [owner("a", 1, true), owner("b", 2, true)];
    let Some(Action::SetOwners { owner_references, .. }) = repair(&a, &owners) else { panic!() };
    let ctl: Vec<_> = owner_references.iter().filter(|r| r.controller == Some(true)).map(|r| r.name.clone()).collect();
    assert_eq!(ctl, vec!["a".to_string()]);
}

#[test]
fn repair_does_nothing_on_a_healthy_or_unrepairable_artifact() {
    let healthy = issue("iss", vec![oref("u", true), oref("m", false)]);
    assert_eq!(repair(&healthy, &[owner("u", 1, true), owner("m", 2, true)]), None);
    // No survivor: nothing to promote; the GC collects it.
    let dead = issue("iss", vec![oref("m", false)]);
    assert_eq!(repair(&dead, &[owner("m", 2, false)]), None);
    assert_eq!(repair(&issue("iss", vec![]), &[]), None);
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
