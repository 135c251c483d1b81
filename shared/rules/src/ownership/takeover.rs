//! Takeover: a maintainer hands an external merge request back to tatara.
//! The comment author is re-checked server-side against the effective
//! maintainer set (closed by default); on success ownership is stamped and
//! `MintOrUnparkTakeoverTask` mints, un-parks, or leaves the one
//! deterministically named takeover Task; otherwise 403 with the exact text.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::decision::Action;

use super::merge_request::{OwnershipWrite, TAKEOVER_REQUESTED_BY, TATARA};
use super::naming::takeover_task_name;
use super::sweep::effective_maintainers;
use super::types::{MergeRequest, Project, Repository, Stage, Task};

/// "HTTP 403 with the body ...".
pub const REFUSAL_BODY: &str =
    "author not in maintainer set: only a project maintainer may hand this merge request over";
/// "Annotation carrying a takeover Task's branch".
pub const HEAD_BRANCH_ANNOTATION: &str = "tatara.dev/takeover-head-branch";
/// The park reason a takeover Task is un-parked from.
pub const OWNERSHIP_LOST: &str = "ownership-lost";
/// "mints it straight into under-implementation".
pub const UNDER_IMPLEMENTATION: &str = "under-implementation";

/// The endpoint's refusal. "nothing changes. No comment is posted".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TakeoverRefusal {
    pub status: u16,
    pub body: String,
}

/// What `MintOrUnparkTakeoverTask` does with the takeover Task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "step")]
pub enum TakeoverTask {
    /// "mints it straight into under-implementation if none exists".
    Mint { task: Box<Task>, why: String },
    /// "un-parks it back into under-implementation if it already exists and
    /// is parked(ownership-lost)": status `parkReason: ""`, `state:
    /// under-implementation`, guarded by resourceVersion.
    Unpark { task: String, resource_version: Option<String>, why: String },
    /// "returns it unchanged in any other live state".
    Leave { task: String, why: String },
}

/// A takeover the operator accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TakeoverPlan {
    /// `status.ownership = tatara`, reason `takeover-requested-by:<user>`.
    pub ownership: OwnershipWrite,
    /// "bumps lastBotHeadSHA to the live head".
    pub last_bot_head_sha: String,
    pub task: TakeoverTask,
}

/// The author of comment `external_id`, read from the MergeRequest mirror:
/// the server-side fact the operator re-checks, never the agent's say-so.
pub fn comment_author(mr: &MergeRequest, external_id: &str) -> Option<String> {
    mr.status
        .as_ref()?
        .extra
        .get("comments")?
        .as_array()?
        .iter()
        .find(|c| c.get("externalId").and_then(|v| v.as_str()) == Some(external_id))?
        .get("author")?
        .as_str()
        .map(str::to_string)
}

/// `mr_takeover_request`, as the operator answers it.
pub fn takeover(
    project: &Project,
    repo: Option<&Repository>,
    mr: &MergeRequest,
    comment_author: &str,
    live_head_sha: &str,
    existing: Option<&Task>,
) -> Result<TakeoverPlan, TakeoverRefusal> {
    // "re-checks the comment author server-side against the effective
    // maintainer set": the agent's judgment alone never changes ownership.
    let maintainers = effective_maintainers(project, repo);
    if comment_author.is_empty() || !maintainers.contains(comment_author) {
        return Err(TakeoverRefusal { status: 403, body: REFUSAL_BODY.to_string() });
    }
    Ok(TakeoverPlan {
        ownership: OwnershipWrite {
            ownership: TATARA.into(),
            reason: Some(format!("{TAKEOVER_REQUESTED_BY}{comment_author}")),
            why: format!("maintainer {comment_author} requested takeover of {}", mr.name()),
        },
        last_bot_head_sha: live_head_sha.to_string(),
        task: mint_or_unpark(project, mr, existing),
    })
}

impl TakeoverPlan {
    /// The plan as ordered steps: stamp ownership first (with the MR's
    /// resourceVersion), then mint or un-park the takeover Task.
    pub fn actions(&self, mr: &MergeRequest) -> Vec<Action> {
        let mut out = vec![Action::SetMergeRequestOwnership {
            name: mr.name().to_string(),
            resource_version: mr.metadata.resource_version.clone(),
            ownership: self.ownership.ownership.clone(),
            reason: self.ownership.reason.clone(),
            last_bot_head_sha: Some(self.last_bot_head_sha.clone()),
            why: self.ownership.why.clone(),
        }];
        match &self.task {
            TakeoverTask::Mint { task, why } => out.push(Action::CreateTask { task: task.clone(), why: why.clone() }),
            TakeoverTask::Unpark { task, resource_version, why } => out.push(Action::UnparkTask {
                task: task.clone(),
                resource_version: resource_version.clone(),
                state: UNDER_IMPLEMENTATION.to_string(),
                why: why.clone(),
            }),
            TakeoverTask::Leave { .. } => {}
        }
        out
    }
}

/// `MintOrUnparkTakeoverTask`: the one takeover Task per MR, reused across
/// every round.
pub fn mint_or_unpark(project: &Project, mr: &MergeRequest, existing: Option<&Task>) -> TakeoverTask {
    let name = takeover_task_name(project.name(), &mr.spec.repository_ref, mr.spec.number);
    match existing {
        None => {
            let branch = mr.status.as_ref().and_then(|s| s.head_branch.clone()).unwrap_or_default();
            let mut t = Task::new(&name);
            t.metadata.namespace = mr.metadata.namespace.clone();
            // "bound to the MR's existing head branch, so the implement pod
            // pushes there rather than to a derived tatara/* branch"
            t.metadata.annotations = Some(BTreeMap::from([(HEAD_BRANCH_ANNOTATION.to_string(), branch)]));
            t.spec.project_ref = project.name().to_string();
            t.spec.kind = Some("takeover".into());
            t.spec.repository_ref = Some(mr.spec.repository_ref.clone());
            t.spec.goal = format!("Take over {}", mr.key());
            // "not refined: a takeover's source is always a PR"
            t.spec.initial_state = Some(UNDER_IMPLEMENTATION.into());
            TakeoverTask::Mint {
                why: format!("no takeover Task for {}: mint {name} into under-implementation", mr.key()),
                task: Box::new(t),
            }
        }
        Some(t) if t.stage() == Stage::Parked(OWNERSHIP_LOST.into()) => TakeoverTask::Unpark {
            task: t.name().to_string(),
            resource_version: t.metadata.resource_version.clone(),
            why: format!("{} is parked(ownership-lost): un-park into under-implementation", t.name()),
        },
        Some(t) => TakeoverTask::Leave {
            task: t.name().to_string(),
            why: format!("{} is in {:?}: returned unchanged", t.name(), t.stage()),
        },
    }
}

#[cfg(test)]
mod tests;
