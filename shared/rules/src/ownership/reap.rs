//! Reap: terminal Tasks age out (the retention table), ownership is settled
//! before any Task is deleted, and failed / rejected / reaped-from-parked
//! Tasks run the ordered terminal path that releases their Issues
//! immediately and closes only the merge requests the platform created.

use std::collections::BTreeSet;

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::decision::{Action, Artifact, OwnerInfo, Snapshot};
use super::owners::{oldest_surviving, swap_controller};
use super::types::{ArtifactKind, BACKLOG_SWEEP, Project, Stage, Task};

/// "Label stamped on a parked SCM issue: `tatara-parked`."
pub const PARKED_LABEL: &str = "tatara-parked";

const HOUR: i64 = 3600;
/// "delivered is reaped at 48h, not 24h".
pub const DELIVERED_RETENTION_SECS: i64 = 48 * HOUR;
/// rejected 24 h.
pub const REJECTED_RETENTION_SECS: i64 = 24 * HOUR;
/// failed 7 days.
pub const FAILED_RETENTION_SECS: i64 = 7 * 24 * HOUR;
/// parked 7 days (parkRetention), except parked(backlog-sweep).
pub const PARKED_RETENTION_SECS: i64 = 7 * 24 * HOUR;

/// Whether the reaper may delete a Task now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "verdict")]
pub enum ReapVerdict {
    Reap { why: String },
    Keep { why: String },
}

/// What the reaper knows besides the Task itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReapContext {
    /// Names in a live Task's `status.foldInFlight` ([`live_fold_members`]).
    pub live_fold_members: BTreeSet<String>,
    /// The Issue CRs this Task owns (any reference).
    pub owned_issues: Vec<Artifact>,
    /// How many of its merge requests were merged.
    pub merged_mrs: usize,
}

/// The names held by a live fold: "The reaper skips any Task named in a live
/// Task's status.foldInFlight." A live umbrella is one that is neither
/// terminal nor being deleted.
pub fn live_fold_members(tasks: &[Task]) -> BTreeSet<String> {
    tasks
        .iter()
        .filter(|t| !t.is_terminal() && t.metadata.deletion_timestamp.is_none())
        .flat_map(|t| t.fold_in_flight().iter().cloned())
        .collect()
}

fn parse(ts: Option<&String>) -> Option<Timestamp> {
    ts.and_then(|s| s.parse::<Timestamp>().ok())
}

/// The retention table of "Every terminal stage ages out".
pub fn reap_verdict(task: &Task, now: Timestamp, ctx: &ReapContext) -> ReapVerdict {
    let name = task.name();
    if ctx.live_fold_members.contains(name) {
        return ReapVerdict::Keep {
            why: format!("{name} is named in a live Task's foldInFlight; the reaper skips it"),
        };
    }
    // The umbrella itself, while its foldInFlight is set, is mid-adoption:
    // deleting it lets a landing adoption append a reference to a gone
    // owner, which the GC removes, leaving plain owners and no controller
    // (found by the interleaving test). Same reason the spec skips members.
    if !task.fold_in_flight().is_empty() {
        return ReapVerdict::Keep {
            why: format!(
                "{name} is mid-fold of {}; the reaper waits for the fold to finish",
                task.fold_in_flight().join(", ")
            ),
        };
    }
    let st = task.status.clone().unwrap_or_default();
    let entered = parse(st.state_entered_at.as_ref());
    let aged = |anchor: Option<Timestamp>, secs: i64, label: &str| -> ReapVerdict {
        match anchor {
            Some(a) if now.as_second() - a.as_second() >= secs => {
                ReapVerdict::Reap { why: format!("{name} is {label} for longer than {}h", secs / HOUR) }
            }
            Some(_) => ReapVerdict::Keep { why: format!("{name} is {label} for less than {}h", secs / HOUR) },
            None => ReapVerdict::Keep { why: format!("{name} is {label} but carries no timestamp to age it by") },
        }
    };
    match task.stage() {
        Stage::Active(state) => ReapVerdict::Keep { why: format!("{name} is not terminal (state {state})") },
        Stage::Delivered => {
            let documented = st.documented_by.as_deref().is_some_and(|d| !d.is_empty());
            if !documented && ctx.merged_mrs > 0 {
                return ReapVerdict::Keep {
                    why: format!(
                        "{name} is delivered with {} merged MRs and no documentedBy; it is reaped only once documentedBy is stamped or it had zero merged MRs",
                        ctx.merged_mrs
                    ),
                };
            }
            aged(parse(st.delivered_at.as_ref()).or(entered), DELIVERED_RETENTION_SECS, "delivered")
        }
        Stage::Rejected => aged(entered, REJECTED_RETENTION_SECS, "rejected"),
        Stage::Failed(reason) => {
            aged(parse(st.parked_at.as_ref()).or(entered), FAILED_RETENTION_SECS, &format!("failed({reason})"))
        }
        Stage::Parked(reason) if reason == BACKLOG_SWEEP => {
            // "never reaped on age ... reaped only when every Issue it owns
            // has state == closed".
            let open: Vec<&str> = ctx
                .owned_issues
                .iter()
                .filter(|i| i.state.as_deref() != Some("closed"))
                .map(|i| i.name.as_str())
                .collect();
            if open.is_empty() {
                ReapVerdict::Reap { why: format!("{name} is parked(backlog-sweep) and every Issue it owns is closed") }
            } else {
                ReapVerdict::Keep {
                    why: format!(
                        "{name} is parked(backlog-sweep), never reaped on age, and still owns unclosed {}",
                        open.join(", ")
                    ),
                }
            }
        }
        Stage::Parked(reason) => {
            aged(parse(st.parked_at.as_ref()).or(entered), PARKED_RETENTION_SECS, &format!("parked({reason})"))
        }
    }
}

/// "A stuck documentation batch cannot pin its parents either: it is
/// force-moved to delivered at docStageBudget and stamps documentedBy on
/// every Task in its spec.documentsTasks on the way out - unless it never ran
/// a pod at all, in which case it stamps nothing and the next night's batch
/// picks the same Tasks up." Returns the Tasks to stamp with the batch's name.
pub fn documented_by_on_forced_exit(batch: &Task) -> Vec<String> {
    let st = batch.status.clone().unwrap_or_default();
    let started = st.extra.get("podStartedAt").and_then(|v| v.as_str()).is_some_and(|s| !s.is_empty());
    let runs = st.extra.get("stats").and_then(|s| s.get("podRuns")).and_then(|v| v.as_i64()).unwrap_or(0);
    if !started && runs == 0 {
        return vec![];
    }
    batch.spec.documents_tasks.clone().unwrap_or_default()
}

/// "Before the reaper deletes any Task, it settles that Task's controller
/// ownership": hand controller=true to the oldest surviving owner where one
/// exists (the fold's single-PUT swap), THEN delete the Task; without a
/// survivor the artifact cascades with it.
pub fn settle_and_delete(task: &Task, artifacts: &[Artifact], owners: &[OwnerInfo]) -> Vec<Action> {
    let uid = task.metadata.uid.clone().unwrap_or_default();
    let mut actions: Vec<Action> = artifacts
        .iter()
        .filter(|a| a.controlled_by(&uid))
        .filter_map(|a| {
            let heir = oldest_surviving(&a.owner_references, owners, Some(&uid))?;
            Some(Action::SetOwners {
                kind: a.kind,
                name: a.name.clone(),
                resource_version: a.resource_version.clone(),
                owner_references: swap_controller(&a.owner_references, heir),
                why: format!(
                    "reap {}: hand controller of {} to the oldest surviving owner {} before deleting",
                    task.name(),
                    a.name,
                    heir.name
                ),
            })
        })
        .collect();
    actions.push(Action::DeleteTask {
        task: task.name().to_string(),
        uid: task.metadata.uid.clone(),
        why: format!("reap {}: ownership settled; artifacts with no survivor cascade with it", task.name()),
    });
    actions
}

/// Reaping one Task as a decision over a fresh snapshot (retention already
/// judged by [`reap_verdict`]): nothing while a live fold names it, else
/// settle-then-delete (or, from parked, the terminal path then delete).
pub fn decide(snap: &Snapshot, project: &Project, task: &str) -> Vec<Action> {
    decide_in_pass(snap, project, task, &BTreeSet::new())
}

/// [`decide`] for one Task of a reap pass that collects `reaping`: a Task
/// the same pass is about to delete is not a SURVIVING owner, so controller
/// is never handed to it.
pub fn decide_in_pass(snap: &Snapshot, project: &Project, task: &str, reaping: &BTreeSet<String>) -> Vec<Action> {
    let Some(t) = snap.task(task) else {
        return vec![];
    };
    if live_fold_members(&snap.tasks).contains(task) {
        return vec![];
    }
    let artifacts = snap.artifacts();
    let owners: Vec<OwnerInfo> = snap
        .owner_infos()
        .into_iter()
        .map(|mut o| {
            if reaping.contains(&o.name) && o.name != task {
                o.surviving = false;
            }
            o
        })
        .collect();
    if matches!(t.stage(), Stage::Parked(_)) {
        let mut actions = terminal_release(t, project, &artifacts, &owners);
        actions.push(Action::DeleteTask {
            task: t.name().to_string(),
            uid: t.metadata.uid.clone(),
            why: format!("reap {} from parked after its terminal path", t.name()),
        });
        return actions;
    }
    settle_and_delete(t, &artifacts, &owners)
}

/// The ordered terminal path "on entering failed / rejected, or being reaped
/// from parked" (steps 1-4; step 5, the Task surviving as a debugging
/// artifact, is the absence of a delete).
pub fn terminal_release(task: &Task, project: &Project, artifacts: &[Artifact], owners: &[OwnerInfo]) -> Vec<Action> {
    let uid = task.metadata.uid.clone().unwrap_or_default();
    let name = task.name();
    let controlled: Vec<&Artifact> = artifacts.iter().filter(|a| a.controlled_by(&uid)).collect();
    let open_issues: Vec<&&Artifact> =
        controlled.iter().filter(|a| a.kind == ArtifactKind::Issue && a.is_open()).collect();
    let reason = task.stage_reason();
    let mut actions = Vec::new();
    // 1. "post a bot comment on every owned OPEN Issue naming stageReason
    //    (BLOCKING: a 403 requeues the reap)"
    for a in &open_issues {
        actions.push(Action::PostIssueComment {
            repository_ref: a.repository_ref.clone(),
            number: a.number,
            body: format!(
                "Task {name} stopped working on this issue ({reason}). It is released so a new Task can pick it up."
            ),
            blocking: true,
            why: format!("terminal step 1: name stageReason {reason:?} on {} before releasing it", a.name),
        });
    }
    // 2. "stamp the tatara-parked label on the SCM issue (BLOCKING TOO - the
    //    sweep's mint-stage predicate READS this label)"
    for a in &open_issues {
        actions.push(Action::StampLabel {
            repository_ref: a.repository_ref.clone(),
            number: a.number,
            label: PARKED_LABEL.to_string(),
            blocking: true,
            why: format!("terminal step 2: label {} {PARKED_LABEL} for the sweep's mint stage", a.name),
        });
    }
    // 3. "RELEASE controller-ownership FIRST"
    let mut no_survivor = BTreeSet::new();
    for a in &controlled {
        match oldest_surviving(&a.owner_references, owners, Some(&uid)) {
            Some(heir) => actions.push(Action::SetOwners {
                kind: a.kind,
                name: a.name.clone(),
                resource_version: a.resource_version.clone(),
                owner_references: swap_controller(&a.owner_references, heir),
                why: format!(
                    "terminal step 3: hand controller of {} to the oldest surviving owner {}",
                    a.name, heir.name
                ),
            }),
            None => {
                no_survivor.insert(a.name.clone());
                // Drop our reference, and any dangling one: a reference to a
                // gone owner would let the GC collect the CR the next sweep
                // is meant to adopt.
                let kept = a
                    .owner_references
                    .iter()
                    .filter(|r| r.uid != uid && owners.iter().any(|o| o.uid == r.uid && o.surviving))
                    .cloned()
                    .collect();
                actions.push(Action::SetOwners {
                    kind: a.kind,
                    name: a.name.clone(),
                    resource_version: a.resource_version.clone(),
                    owner_references: kept,
                    why: format!(
                        "terminal step 3: no surviving owner of {}; DROP the ownerRef so the next sweep re-mints and adopts it",
                        a.name
                    ),
                });
            }
        }
    }
    // 4. "ONLY NOW, and ONLY for MRs WE CREATED"
    for a in &controlled {
        if a.kind != ArtifactKind::MergeRequest || !a.is_open() {
            continue;
        }
        if let MrCloseVerdict::Close { why } = mr_close_verdict(task, project, a, no_survivor.contains(&a.name), true) {
            let branch = a.head_branch.clone().unwrap_or_default();
            actions.push(Action::CloseMergeRequest {
                repository_ref: a.repository_ref.clone(),
                number: a.number,
                why: format!("terminal step 4: {why}"),
            });
            actions.push(Action::DeleteBranch {
                repository_ref: a.repository_ref.clone(),
                branch,
                why: format!("terminal step 4: {why}"),
            });
        }
    }
    actions
}

/// Whether to close an owned open merge request and delete its branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "verdict")]
pub enum MrCloseVerdict {
    Close {
        why: String,
    },
    /// "Otherwise it is left completely alone. No close, no branch delete,
    /// no comment."
    LeaveAlone {
        why: String,
    },
}

/// The four clauses of "Closing what the platform created".
pub fn mr_close_verdict(
    task: &Task,
    project: &Project,
    mr: &Artifact,
    no_surviving_plain_owner: bool,
    was_controller: bool,
) -> MrCloseVerdict {
    let bot = &project.spec.scm.bot_login;
    let author = mr.author.as_deref().unwrap_or("");
    let want_branch = format!("task/{}", task.name());
    let branch = mr.head_branch.as_deref().unwrap_or("");
    let mut failed = Vec::new();
    // 1. "mr.status.author equals Project.spec.scm.botLogin"
    if bot.is_empty() || author != bot {
        failed.push(format!("author {author:?} is not the bot {bot:?}"));
    }
    // 2. "its head branch (mr.status.headBranch) is task/<this-task-name>"
    if branch != want_branch {
        failed.push(format!("head branch {branch:?} is not {want_branch:?}"));
    }
    // 3. "this Task is (or was) the controller owner"
    if !was_controller {
        failed.push(format!("{} was never its controller owner", task.name()));
    }
    // 4. "no surviving plain owner remains"
    if !no_surviving_plain_owner {
        failed.push("a surviving plain owner remains".to_string());
    }
    if failed.is_empty() {
        MrCloseVerdict::Close {
            why: format!(
                "{} is bot-authored on {want_branch}, controlled by {} and owned by nobody else: close it and delete its branch",
                mr.name,
                task.name()
            ),
        }
    } else {
        MrCloseVerdict::LeaveAlone { why: format!("leave {} alone: {}", mr.name, failed.join("; ")) }
    }
}

#[cfg(test)]
mod tests;
