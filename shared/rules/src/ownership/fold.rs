//! Fold: the refine fold of `spec/ownership.md` ("adopt, verify, then
//! delete"). An umbrella Task adopts its members' artifacts in one write per
//! artifact, re-lists and verifies, and only then deletes the members; a
//! mismatch fails the umbrella and deletes nothing.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::decision::{Action, Artifact, Snapshot};
use super::owners::swap_controller;
use super::types::{POST_APPROVED_STATES, Stage, Task, task_owner_ref};

/// "refused with 409 fold target has work in flight".
pub const WORK_IN_FLIGHT: &str = "fold target has work in flight";
/// The failure reason of an unverified adoption.
pub const ADOPTION_UNVERIFIED: &str = "fold-adoption-unverified";

/// Why `/outcome` refuses a fold before anything is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "refusal")]
pub enum FoldRefusal {
    /// "every named member exists"
    MemberMissing { member: String },
    /// "is in the same project"
    OtherProject { member: String, project: String },
    /// "is not live": 409 fold target has work in flight.
    WorkInFlight { member: String, why: String },
}

impl FoldRefusal {
    /// The HTTP status `/outcome` answers with. The spec fixes 409 for the
    /// liveness gate; the other two are our choice (404, 422).
    pub fn status(&self) -> u16 {
        match self {
            FoldRefusal::MemberMissing { .. } => 404,
            FoldRefusal::OtherProject { .. } => 422,
            FoldRefusal::WorkInFlight { .. } => 409,
        }
    }
    /// The response body.
    pub fn message(&self) -> String {
        match self {
            FoldRefusal::MemberMissing { member } => format!("fold target {member} does not exist"),
            FoldRefusal::OtherProject { member, project } => {
                format!("fold target {member} is in project {project}, not the umbrella's")
            }
            FoldRefusal::WorkInFlight { .. } => WORK_IN_FLIGHT.to_string(),
        }
    }
}

impl From<FoldRefusal> for crate::Error {
    fn from(r: FoldRefusal) -> Self {
        crate::Error::Refused { status: r.status(), message: r.message() }
    }
}

/// Whether a Task is live: "a member with a running pod (status.podName !=
/// "") or a live post-approved stage".
pub fn live_reason(task: &Task) -> Option<String> {
    let st = task.status.clone().unwrap_or_default();
    if let Some(pod) = st.pod_name.filter(|p| !p.is_empty()) {
        return Some(format!("{} has a running pod {pod}", task.name()));
    }
    // A Task that is itself mid-fold is work in flight too: folding it would
    // delete an umbrella whose adoptions are still landing, and a reference
    // appended to a deleted owner is removed by the GC, leaving its artifact
    // with plain owners and no controller (found by the interleaving test:
    // two Tasks folding each other).
    if !task.fold_in_flight().is_empty() {
        return Some(format!("{} is mid-fold of {}", task.name(), task.fold_in_flight().join(", ")));
    }
    if let Stage::Active(state) = task.stage()
        && POST_APPROVED_STATES.contains(&state.as_str())
    {
        return Some(format!("{} is live in post-approved state {state}", task.name()));
    }
    None
}

/// The liveness gate: every named member exists, is in the umbrella's
/// project, and is not live.
pub fn liveness_gate(umbrella: &Task, named: &[String], found: &[Task]) -> Result<(), FoldRefusal> {
    for member in named {
        let Some(t) = found.iter().find(|t| t.name() == member) else {
            return Err(FoldRefusal::MemberMissing { member: member.clone() });
        };
        if t.spec.project_ref != umbrella.spec.project_ref {
            return Err(FoldRefusal::OtherProject { member: member.clone(), project: t.spec.project_ref.clone() });
        }
        if let Some(why) = live_reason(t) {
            return Err(FoldRefusal::WorkInFlight { member: member.clone(), why });
        }
    }
    Ok(())
}

/// Step 1: `status.foldInFlight = [M1..Mn]` (one Status().Update).
pub fn begin(umbrella: &Task, members: &[String]) -> Action {
    Action::SetFoldInFlight {
        task: umbrella.name().to_string(),
        resource_version: umbrella.metadata.resource_version.clone(),
        members: members.to_vec(),
        why: format!(
            "fold step 1: mark {} as mid-adoption of {} so the reaper skips them",
            umbrella.name(),
            members.join(", ")
        ),
    }
}

/// Step 2: for each artifact owned by a member, ONE Update that appends the
/// umbrella, demotes the member and makes the umbrella the controller.
/// Artifacts the umbrella already controls are done (a re-run after a crash
/// is idempotent).
pub fn adopt(umbrella: &Task, members: &[Task], artifacts: &[Artifact]) -> Vec<Action> {
    let uid = umbrella.metadata.uid.clone().unwrap_or_default();
    let u_ref = task_owner_ref(umbrella.name(), &uid, true);
    let member_uids: BTreeSet<String> = members.iter().filter_map(|m| m.metadata.uid.clone()).collect();
    // "for each artifact A owned by Mi ... REWRITES Mi's ownerRef to
    // controller=false": the artifacts a member controls. One a member only
    // holds open with a plain reference stays with its own controller.
    artifacts
        .iter()
        .filter(|a| a.controller().is_some_and(|c| member_uids.contains(&c.uid)))
        .map(|a| Action::SetOwners {
            kind: a.kind,
            name: a.name.clone(),
            resource_version: a.resource_version.clone(),
            owner_references: swap_controller(&a.owner_references, &u_ref),
            why: format!(
                "fold step 2: {} adopts {} as controller in one write (members keep plain references)",
                umbrella.name(),
                a.name
            ),
        })
        .collect()
}

/// The artifacts a fold names: those a member controls (still to adopt)
/// and those the umbrella controls with a member's plain reference (adopted).
pub fn named_artifacts(umbrella: &Task, members: &[Task], artifacts: &[Artifact]) -> Vec<String> {
    let member_uids: BTreeSet<String> = members.iter().filter_map(|m| m.metadata.uid.clone()).collect();
    let uid = umbrella.metadata.uid.clone().unwrap_or_default();
    artifacts
        .iter()
        .filter(|a| match a.controller() {
            Some(c) if member_uids.contains(&c.uid) => true,
            Some(c) if c.uid == uid => a.owner_references.iter().any(|r| member_uids.contains(&r.uid)),
            _ => false,
        })
        .map(|a| a.name.clone())
        .collect()
}

/// The whole fold as one decision over a fresh snapshot: each call returns
/// the next step(s), so an executor that recomputes after every conflict or
/// crash resumes where the cluster stands. Empty when the fold is over.
pub fn decide(snap: &Snapshot, umbrella: &str, members: &[String]) -> Result<Vec<Action>, FoldRefusal> {
    let Some(u) = snap.task(umbrella) else {
        return Ok(vec![]);
    };
    if u.is_terminal() {
        return Ok(vec![]);
    }
    let present: Vec<Task> = members.iter().filter_map(|m| snap.task(m).cloned()).collect();
    let artifacts = snap.artifacts();
    if u.fold_in_flight().is_empty() {
        if present.is_empty() {
            return Ok(vec![]);
        }
        liveness_gate(u, members, &present)?;
        return Ok(vec![begin(u, members)]);
    }
    if present.is_empty() {
        return Ok(resume(u, &present).into_iter().collect());
    }
    let adopt_steps = adopt(u, &present, &artifacts);
    if !adopt_steps.is_empty() {
        return Ok(adopt_steps);
    }
    let named = named_artifacts(u, &present, &artifacts);
    Ok(match verify(u, &present, &named, &artifacts) {
        FoldVerdict::Verified { actions } | FoldVerdict::Unverified { actions, .. } => actions,
    })
}

/// The outcome of step 3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "verdict")]
pub enum FoldVerdict {
    /// Step 4 then 5: delete the members, then clear foldInFlight.
    Verified { actions: Vec<Action> },
    /// "stage -> failed(fold-adoption-unverified), foldInFlight cleared,
    /// members NOT deleted."
    Unverified { mismatches: Vec<String>, actions: Vec<Action> },
}

/// Step 3: "RE-LIST every named artifact; VERIFY U is a solid owner with
/// controller=true on each."
pub fn verify(umbrella: &Task, members: &[Task], named: &[String], relisted: &[Artifact]) -> FoldVerdict {
    let uid = umbrella.metadata.uid.clone().unwrap_or_default();
    // A member that became an umbrella after the gate (two folds racing
    // past each other's gate) must not be deleted.
    let mid_fold = members
        .iter()
        .filter(|m| !m.fold_in_flight().is_empty())
        .map(|m| format!("member {} is itself mid-fold", m.name()));
    let mismatches: Vec<String> = mid_fold
        .chain(named.iter().filter_map(|n| match relisted.iter().find(|a| &a.name == n) {
            None => Some(format!("{n} is gone")),
            Some(a) if a.controller().map(|c| c.uid.as_str()) != Some(uid.as_str()) => {
                Some(format!("{n} is not controlled by {}", umbrella.name()))
            }
            Some(_) => None,
        }))
        .collect();
    let clear = Action::SetFoldInFlight {
        task: umbrella.name().to_string(),
        resource_version: None,
        members: vec![],
        why: "fold step 5: foldInFlight = []".to_string(),
    };
    if !mismatches.is_empty() {
        return FoldVerdict::Unverified {
            actions: vec![
                Action::FailTask {
                    task: umbrella.name().to_string(),
                    reason: ADOPTION_UNVERIFIED.to_string(),
                    why: format!(
                        "fold step 3 failed ({}): umbrella fails, members are NOT deleted; nothing is lost",
                        mismatches.join("; ")
                    ),
                },
                Action::SetFoldInFlight {
                    task: umbrella.name().to_string(),
                    resource_version: None,
                    members: vec![],
                    why: "fold failed: foldInFlight cleared".to_string(),
                },
            ],
            mismatches,
        };
    }
    let mut actions: Vec<Action> = members
        .iter()
        .map(|m| Action::DeleteTask {
            task: m.name().to_string(),
            uid: m.metadata.uid.clone(),
            why: format!(
                "fold step 4: {} verified as controller of every artifact; delete member {}",
                umbrella.name(),
                m.name()
            ),
        })
        .collect();
    actions.push(clear);
    FoldVerdict::Verified { actions }
}

/// "A crash after step 4 leaves foldInFlight set, and the reconciler clears
/// it once the members are gone."
pub fn resume(umbrella: &Task, present_members: &[Task]) -> Option<Action> {
    let inflight = umbrella.fold_in_flight();
    if inflight.is_empty() || inflight.iter().any(|m| present_members.iter().any(|t| t.name() == m)) {
        return None;
    }
    Some(Action::SetFoldInFlight {
        task: umbrella.name().to_string(),
        resource_version: umbrella.metadata.resource_version.clone(),
        members: vec![],
        why: format!("fold members {} are gone; clear foldInFlight", inflight.join(", ")),
    })
}

#[cfg(test)]
mod tests;
