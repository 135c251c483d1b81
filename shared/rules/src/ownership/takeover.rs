//! Takeover, as a client of the operator: a maintainer hands an external
//! merge request back to tatara by asking the operator's REST API
//! (`POST /projects/{p}/scm/mr-takeover`, `internal/restapi/takeover.go` at
//! d22349a), which checks, mints, hands over and stamps everything itself.
//! What is decided here is only what to ask, and when: the endpoint needs the
//! external id of the caller's take-over comment as the operator mirrored it
//! (takeover.go:176-185), and the Task that controls the mirror now
//! (takeover.go:144-163). [`next_step`] reuses the caller's latest such
//! comment, mirrored or still on its way, and posts one only when there is
//! none, so a retry never posts a second.

use serde::{Deserialize, Serialize};

use super::decision::is_controller;
use super::logins::is_maintainer;
use super::naming::merge_request_key;
use super::types::{MergeRequest, Project, Repository, Task};

/// The endpoint's 403 body (takeover.go:187-190).
pub const REFUSAL_BODY: &str =
    "author not in maintainer set: only a project maintainer may hand this merge request over";
/// "Annotation carrying a takeover Task's branch".
pub const HEAD_BRANCH_ANNOTATION: &str = "tatara.dev/takeover-head-branch";
/// The state a takeover Task is minted into.
pub const UNDER_IMPLEMENTATION: &str = "under-implementation";
/// The comment `kubectl tatara takeover` posts when the caller has none.
pub const DEFAULT_COMMENT: &str = "take over";

/// The request body: exactly the four keys `mrTakeoverReq` reads
/// (takeover.go:20-28); the handler refuses any other (`DisallowUnknownFields`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TakeoverRequest {
    /// The Repository CR's name.
    pub repo: String,
    pub number: i64,
    /// The take-over comment's id as mirrored in `status.comments[].externalId`.
    pub comment_external_id: String,
    /// The Task that controls the merge request mirror now (the endpoint
    /// answers 409 to any other).
    pub task: String,
}

/// One comment of a mirror's `status.comments`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MirroredComment {
    pub external_id: String,
    pub author: String,
    pub body: String,
    #[serde(default)]
    pub is_bot: bool,
}

/// A comment on the pull request as the forge lists it (`externalId` is its
/// id in decimal, `internal/scm/github_scan.go:304`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForgeComment {
    pub id: String,
    pub author: String,
    pub body: String,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "step")]
pub enum Step {
    /// The caller's comment is mirrored: ask the operator now.
    Ask(TakeoverRequest),
    /// The caller's comment is on the forge but not mirrored yet: wait for it.
    Wait { external_id: String },
    /// The caller has no take-over comment: post one, then wait for it.
    Post,
}

/// Why `kubectl tatara takeover` does not ask the operator at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The caller is the project's bot (or has no login): the operator never
    /// accepts a bot's comment (takeover.go:187).
    #[error(
        "{login:?} is the project's bot login (spec.scm.botLogin): the operator never takes a merge request over \
         on the bot's word; run with a maintainer's own GITHUB_TOKEN"
    )]
    BotIdentity { login: String },
    /// The caller is not a maintainer and has no comment to ask with: no
    /// comment is posted (the operator would answer this 403).
    #[error("refused with HTTP 403: {REFUSAL_BODY} (caller {login:?}, {key}); no comment was posted")]
    NotMaintainer { login: String, key: String },
    /// No Task controls the mirror, so there is no `task` to ask as.
    #[error(
        "{mr} has no controller owner, and the operator's endpoint acts only for the Task that controls it; \
         run `kubectl tatara repair` (or wait for the operator's own repair), then ask again"
    )]
    NoController { mr: String },
    /// The mirror says the merge request is not open.
    #[error("{mr} is {state:?}, not open: a merge request that is not open cannot be taken over")]
    NotOpen { mr: String, state: String },
}

/// Whether `body` asks for a take-over. The operator's review agent judges
/// intent from free text; this is the plugin's reading, and the operator
/// re-checks the author (never the wording) itself.
pub fn is_takeover_comment(body: &str) -> bool {
    let b = body.to_lowercase();
    ["take over", "take-over", "takeover"].iter().any(|w| b.contains(w))
}

/// The mirror's comments, in mirror order (oldest first).
pub fn mirrored_comments(mr: &MergeRequest) -> Vec<MirroredComment> {
    mr.status
        .as_ref()
        .and_then(|s| s.extra.get("comments"))
        .and_then(|c| c.as_array())
        .into_iter()
        .flatten()
        .filter_map(|c| serde_json::from_value(c.clone()).ok())
        .collect()
}

/// The caller's latest take-over comment in the mirror.
pub fn mirrored_caller_comment(mr: &MergeRequest, login: &str) -> Option<MirroredComment> {
    mirrored_comments(mr).into_iter().rev().find(|c| c.author == login && !c.is_bot && is_takeover_comment(&c.body))
}

/// The Task that controls `mr` (`own.ControllerOwner`: Task references only).
pub fn controller_task(mr: &MergeRequest) -> Option<String> {
    mr.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.kind == Task::KIND && r.api_version.starts_with("tatara.dev/") && is_controller(r))
        .map(|r| r.name.clone())
}

/// What to do next for `login`'s takeover of `mr`, given the pull request's
/// comments on the forge (read only when the mirror has none of the caller's).
pub fn next_step(
    project: &Project,
    repo: Option<&Repository>,
    mr: &MergeRequest,
    login: &str,
    forge_comments: &[ForgeComment],
) -> Result<Step, Refusal> {
    if login.is_empty() || login == project.spec.scm.bot_login {
        return Err(Refusal::BotIdentity { login: login.to_string() });
    }
    if let Some(c) = mirrored_caller_comment(mr, login) {
        let task = controller_task(mr).ok_or_else(|| Refusal::NoController { mr: mr.name().to_string() })?;
        return Ok(Step::Ask(TakeoverRequest {
            repo: mr.spec.repository_ref.clone(),
            number: mr.spec.number,
            comment_external_id: c.external_id,
            task,
        }));
    }
    if let Some(c) = forge_comments.iter().rev().find(|c| c.author == login && is_takeover_comment(&c.body)) {
        return Ok(Step::Wait { external_id: c.id.clone() });
    }
    if !is_maintainer(project, repo, login) {
        return Err(Refusal::NotMaintainer {
            login: login.to_string(),
            key: merge_request_key(&mr.spec.repository_ref, mr.spec.number),
        });
    }
    let state = mr.status.as_ref().and_then(|s| s.state.clone()).unwrap_or_default();
    if state != "open" {
        return Err(Refusal::NotOpen { mr: mr.name().to_string(), state });
    }
    Ok(Step::Post)
}

#[cfg(test)]
mod tests;
