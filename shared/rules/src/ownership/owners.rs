//! Owners: the five owner-reference rules of `spec/ownership.md` ("Who owns
//! what"), as a checker that names every violation on an object, and the
//! repair decision: the operator's zero-controller rule (`internal/own/own.go`,
//! live heirs in owner-reference order, in one write). Also the single-write
//! controller swap the fold and the reaper share.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::{Deserialize, Serialize};

use super::decision::{Action, Artifact, OwnerInfo, Snapshot, is_controller};
use super::types::{API_VERSION, Task};

/// One broken rule on one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "violation")]
pub enum Violation {
    /// Rule 1: "Exactly one owner carries controller=true."
    TwoControllers { owners: Vec<String> },
    /// Rule 5: "An Issue or MergeRequest must never have zero controller owners."
    OwnersButNoController { owners: Vec<String> },
    /// Rules 2 and 3: "Every owner reference sets blockOwnerDeletion: true."
    MissingBlockOwnerDeletion { owner: String, controller: bool },
    /// Rule 4: "A Task never owns a Task."
    TaskOwnsTask { owner: String },
}

/// A violation with its human-readable reason. `why` does not repeat the
/// rule's number: whoever prints it names the rule once (`! rule 5: why`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub object: String,
    pub rule: u8,
    pub violation: Violation,
    pub why: String,
}

/// The object a checked owner list belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owned {
    /// An Issue or MergeRequest CR: rules 1, 2, 3, 5 apply.
    Artifact,
    /// A Task: rule 4 (and 2, 3 for whatever it carries) apply.
    Task,
}

/// Names every violation of the five rules on one object's owner references.
pub fn check(object: &str, owned: Owned, refs: &[OwnerReference]) -> Vec<Finding> {
    let mut out = Vec::new();
    let controllers: Vec<String> = refs.iter().filter(|r| is_controller(r)).map(|r| r.name.clone()).collect();
    if controllers.len() > 1 {
        out.push(Finding {
            object: object.to_string(),
            rule: 1,
            why: format!(
                "{object} has {} controller owners ({}), where exactly one owner carries controller=true",
                controllers.len(),
                controllers.join(", ")
            ),
            violation: Violation::TwoControllers { owners: controllers.clone() },
        });
    }
    if owned == Owned::Artifact && !refs.is_empty() && controllers.is_empty() {
        let owners: Vec<String> = refs.iter().map(|r| r.name.clone()).collect();
        out.push(Finding {
            object: object.to_string(),
            rule: 5,
            why: format!(
                "{object} has owners ({}) but no controller owner, so it is worked by nobody and re-minted by nobody",
                owners.join(", ")
            ),
            violation: Violation::OwnersButNoController { owners },
        });
    }
    for r in refs {
        if r.block_owner_deletion != Some(true) {
            let controller = is_controller(r);
            out.push(Finding {
                object: object.to_string(),
                rule: if controller { 2 } else { 3 },
                why: format!(
                    "{object}: owner reference to {} lacks blockOwnerDeletion: true, which every owner reference sets, including the plain ones",
                    r.name,
                ),
                violation: Violation::MissingBlockOwnerDeletion {
                    owner: r.name.clone(),
                    controller,
                },
            });
        }
        if owned == Owned::Task && r.kind == Task::KIND {
            out.push(Finding {
                object: object.to_string(),
                rule: 4,
                why: format!(
                    "{object} is owned by Task {}: a Task-owns-Task edge would cascade-delete the artifacts a fold preserves",
                    r.name
                ),
                violation: Violation::TaskOwnsTask {
                    owner: r.name.clone(),
                },
            });
        }
    }
    out
}

/// The oldest surviving owner among `refs`: earliest creationTimestamp, then
/// name (an unknown creation time sorts last).
pub fn oldest_surviving<'a>(
    refs: &'a [OwnerReference],
    owners: &[OwnerInfo],
    excluding: Option<&str>,
) -> Option<&'a OwnerReference> {
    refs.iter()
        .filter(|r| Some(r.uid.as_str()) != excluding)
        .filter_map(|r| {
            let info = owners.iter().find(|o| o.uid == r.uid)?;
            info.surviving.then_some((info, r))
        })
        .min_by(|(a, _), (b, _)| {
            let ka = (a.created.is_none(), a.created, &a.name);
            let kb = (b.created.is_none(), b.created, &b.name);
            ka.cmp(&kb)
        })
        .map(|(_, r)| r)
}

/// The single-write swap of the fold ("ONE Update on A that atomically:
/// APPENDS U's ownerRef, REWRITES Mi's ownerRef to controller=false,
/// REWRITES U's ownerRef to controller=true"). Every other reference is
/// demoted, and every reference sets blockOwnerDeletion (rule 2).
pub fn swap_controller(refs: &[OwnerReference], new_controller: &OwnerReference) -> Vec<OwnerReference> {
    let mut out: Vec<OwnerReference> = refs
        .iter()
        .map(|r| OwnerReference {
            controller: Some(r.uid == new_controller.uid),
            block_owner_deletion: Some(true),
            ..r.clone()
        })
        .collect();
    if !out.iter().any(|r| r.uid == new_controller.uid) {
        out.push(OwnerReference { controller: Some(true), block_owner_deletion: Some(true), ..new_controller.clone() });
    }
    out
}

/// Whether `r` references a tatara Task (`isTaskRef`, `internal/own/own.go`
/// at d22349a): the only references the repair reads or rewrites.
pub fn is_task_ref(r: &OwnerReference) -> bool {
    r.kind == Task::KIND && r.api_version == API_VERSION
}

/// Whether a Task can inherit an artifact: it exists (the caller found it),
/// it has not finished (`TaskDone`: state `done` or `rejected`; "A TERMINAL
/// OWNER IS NOT AN HEIR", own.go:198-205), and it is not being deleted.
pub fn is_live_heir(task: &Task) -> bool {
    let state = task.status.as_ref().and_then(|s| s.state.as_deref()).unwrap_or("");
    state != "done" && state != "rejected" && task.metadata.deletion_timestamp.is_none()
}

/// The operator's zero-controller repair (`RepairZeroController`,
/// own.go:173-259), as one guarded write of the artifact:
///
/// - a controller reference to a Task that no longer exists is dropped
///   (`DropOwner`: a dangling controller is a string, not ownership);
/// - with no controller left, the first live heir in owner-reference order
///   ("ownerRef order IS creation order", `OldestSurvivingOwner`) becomes the
///   controller (`HandOverController`: every other Task reference plain);
/// - every Task reference carries `blockOwnerDeletion: true` (rules 2, 3);
/// - references that are not to Tasks are left exactly as they are.
///
/// `None` when nothing is wrong, or nothing the operator would do: a live
/// controller (finished or not) stays, an artifact none of whose Task
/// owners exists is the garbage collector's, and one whose owners have all
/// finished is the sweep's to re-mint.
pub fn repair(artifact: &Artifact, tasks: &[Task]) -> Option<Action> {
    let refs = &artifact.owner_references;
    let find = |name: &str| tasks.iter().find(|t| t.name() == name);
    if !refs.iter().any(|r| is_task_ref(r) && find(&r.name).is_some()) {
        return None;
    }
    let mut whys: Vec<String> = Vec::new();
    let mut out: Vec<OwnerReference> = Vec::with_capacity(refs.len());
    for r in refs {
        if is_task_ref(r) && is_controller(r) && find(&r.name).is_none() {
            whys.push(format!("drop the controller reference to Task {}, which no longer exists", r.name));
            continue;
        }
        out.push(r.clone());
    }
    let has_controller = out.iter().any(|r| is_task_ref(r) && is_controller(r));
    let heir = (!has_controller)
        .then(|| out.iter().find(|r| is_task_ref(r) && find(&r.name).is_some_and(is_live_heir)))
        .flatten()
        .map(|r| r.name.clone());
    if !has_controller && heir.is_none() {
        // Every owner has finished: the operator leaves it for the sweep.
        return None;
    }
    for r in out.iter_mut().filter(|r| is_task_ref(r)) {
        if r.block_owner_deletion != Some(true) {
            whys.push(format!("set blockOwnerDeletion on the reference to {}", r.name));
            r.block_owner_deletion = Some(true);
        }
        if let Some(h) = &heir {
            r.controller = Some(&r.name == h);
        }
    }
    if let Some(h) = &heir {
        whys.push(format!("promote {h}, its first live owner in owner-reference order, to controller"));
    }
    if &out == refs {
        return None;
    }
    Some(Action::SetOwners {
        kind: artifact.kind,
        name: artifact.name.clone(),
        resource_version: artifact.resource_version.clone(),
        why: format!("repair {}: {}, in one write", artifact.name, whys.join("; ")),
        owner_references: out,
    })
}

/// Rule 5's reconcile guard over a snapshot: one repair per artifact that
/// needs one. (Where the guard detects a violation it logs it at ERROR and
/// counts it, `runtime::ownership::metrics::Metrics::record_findings`.)
pub fn decide_repairs(snap: &Snapshot) -> Vec<Action> {
    snap.artifacts().iter().filter_map(|a| repair(a, &snap.tasks)).collect()
}

/// Rule 4's repair on a Task: drop every Task owner reference.
pub fn repair_task(task: &Task) -> Option<Vec<OwnerReference>> {
    let refs = task.owner_refs();
    if !refs.iter().any(|r| r.kind == Task::KIND) {
        return None;
    }
    Some(refs.iter().filter(|r| r.kind != Task::KIND).cloned().collect())
}

#[cfg(test)]
mod tests;
