//! Pull requests: adopt, ignore, or review. "An open pull request the sweep
//! finds gets exactly one of four dispositions" ([`pr_disposition`]). The two
//! that write are decisions over a fresh snapshot, recomputed after every
//! conflict and empty once done, so a second sweep adds nothing:
//!
//! - [`decide_adopt`]: append the pull request to the owning Task's
//!   `status.mrRefs`, then mirror it as a MergeRequest that Task
//!   controller-owns (adopting an ownerless mirror, creating a missing one),
//!   then fill in the mirror's status with the ownership `ownershipForAuthor`
//!   gives.
//! - [`decide_review`]: mint the review-kind Task (the issue mint's stage,
//!   budget and `IntakeTaskName`, kind `review`), then mirror the pull
//!   request owned by it, the same way.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::{Deserialize, Serialize};

use super::{MintStage, OrphanVerdict, effective_maintainers, minted_task, with_controller};
use crate::ownership::budget::{OBJECT_BUDGET_BYTES, object_bytes};
use crate::ownership::decision::{Action, Snapshot, is_controller};
use crate::ownership::merge_request::{TATARA, ownership_for_author};
use crate::ownership::naming::{REVIEW_KIND, merge_request_cr_name, merge_request_key, natural_key, review_task_name};
use crate::ownership::types::{
    ArtifactKind, IssueSpec, MR_REFS_MAX_ITEMS, MergeRequest, MergeRequestStatus, Project, Repository, Task,
    task_owner_ref,
};

/// An open pull request the sweep found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForgePullRequest {
    pub repository_ref: String,
    pub number: i64,
    pub author: String,
    pub head_branch: String,
    /// The head commit (the mirror's `status.headSHA`).
    #[serde(default)]
    pub head_sha: String,
    /// `None` when the forge did not say: fails closed.
    pub head_repo: Option<String>,
    pub base_repo: String,
    pub labels: Vec<String>,
    pub mentions_bot: bool,
    /// The pull request's web page (the mirror's `spec.url`).
    #[serde(default)]
    pub url: String,
    /// The thread's last comment is human-authored. Read from the forge
    /// only for a review mint, whose mint stage it decides.
    #[serde(default)]
    pub last_comment_human: bool,
}

impl ForgePullRequest {
    /// Natural key `<repositoryRef>!<number>` (the `mrKey` index).
    pub fn key(&self) -> String {
        merge_request_key(&self.repository_ref, self.number)
    }
}

/// "exactly one of four dispositions".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "disposition")]
pub enum PrDisposition {
    /// 1. ADOPT into an existing Task's mrRefs.
    Adopt { task: String, why: String },
    /// 2. BOT-AUTHORED and NOT ADOPTABLE -> IGNORE. FULL STOP.
    IgnoreBot { why: String },
    /// 3. HUMAN-AUTHORED in reaction scope -> mint a review-kind Task.
    Review { why: String },
    /// 4. Everything else is IGNORED.
    Ignore { why: String },
}

impl PrDisposition {
    /// Why this disposition.
    pub fn why(&self) -> &str {
        match self {
            PrDisposition::Adopt { why, .. }
            | PrDisposition::IgnoreBot { why }
            | PrDisposition::Review { why }
            | PrDisposition::Ignore { why } => why,
        }
    }
}

/// The Tasks a pull request can be adopted into: the project's Tasks that
/// are neither terminal nor being deleted. A terminal Task "survives 7 days
/// as a DEBUGGING ARTIFACT - owning nothing, blocking nothing", so a bot
/// pull request on its branch is an orphaned agent PR, which is "closed by
/// the four-clause rule above rather than adopted".
pub fn live_task_names(snap: &Snapshot, project: &str) -> BTreeSet<String> {
    snap.tasks
        .iter()
        .filter(|t| t.spec.project_ref == project && !t.is_terminal() && t.metadata.deletion_timestamp.is_none())
        .map(|t| t.name().to_string())
        .collect()
}

/// The four pull-request dispositions. `task_names` are the Tasks a pull
/// request may be adopted into ([`live_task_names`]).
pub fn pr_disposition(
    pr: &ForgePullRequest,
    project: &Project,
    repo: Option<&Repository>,
    task_names: &BTreeSet<String>,
) -> PrDisposition {
    let bot = &project.spec.scm.bot_login;
    let is_bot = !bot.is_empty() && &pr.author == bot;
    if is_bot {
        let owning = pr.head_branch.strip_prefix("task/").filter(|t| task_names.contains(*t));
        // c. "head.repo == base.repo (NO forks, ever)"; unknown fails closed.
        let same_repo = pr.head_repo.as_deref() == Some(pr.base_repo.as_str());
        return match (owning, same_repo) {
            (Some(task), true) => PrDisposition::Adopt {
                task: task.to_string(),
                why: format!("bot-authored, on task/{task}, from the base repository: adopt into {task}'s mrRefs"),
            },
            (None, _) => PrDisposition::IgnoreBot {
                why: format!(
                    "bot-authored and head branch {:?} names no live Task of this project: ignore, full stop",
                    pr.head_branch
                ),
            },
            (Some(_), false) => PrDisposition::IgnoreBot {
                why: format!(
                    "bot-authored but head repo {} is not the base repo: no forks, ever",
                    crate::ownership::merge_request::head_repo_named(pr.head_repo.as_deref())
                ),
            },
        };
    }
    let trusted = effective_maintainers(project, repo).contains(&pr.author);
    let scope_all = project.spec.scm.pr_reaction_scope.as_deref() != Some("labeledOrMentioned");
    let labeled = pr.labels.iter().any(|l| l == project.spec.trigger_label());
    if !pr.author.is_empty() && (trusted || scope_all || labeled || pr.mentions_bot) {
        let reason = if trusted {
            "the author is a trusted insider"
        } else if scope_all {
            "the PR reaction scope is not labeledOrMentioned"
        } else if labeled {
            "it carries the trigger label"
        } else {
            "it @-mentions the bot"
        };
        return PrDisposition::Review {
            why: format!("human-authored and in reaction scope ({reason}): mint a review Task"),
        };
    }
    PrDisposition::Ignore { why: "human-authored but out of reaction scope".to_string() }
}

/// How many open pull requests got each disposition: the ignored ones are
/// written nowhere else, so this is where they are counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DispositionCounts {
    pub adopt: usize,
    pub ignore_bot: usize,
    pub review: usize,
    pub ignore: usize,
}

impl DispositionCounts {
    /// Count one disposition.
    pub fn count(&mut self, d: &PrDisposition) {
        match d {
            PrDisposition::Adopt { .. } => self.adopt += 1,
            PrDisposition::IgnoreBot { .. } => self.ignore_bot += 1,
            PrDisposition::Review { .. } => self.review += 1,
            PrDisposition::Ignore { .. } => self.ignore += 1,
        }
    }
}

/// What a pull request's disposition asks to write, on one snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "decision")]
pub enum PrDecision {
    /// These steps, in order.
    Write { actions: Vec<Action>, why: String },
    /// Nothing (done already, or refused), and why.
    Nothing { why: String },
}

impl PrDecision {
    /// Why this decision.
    pub fn why(&self) -> &str {
        match self {
            PrDecision::Write { why, .. } | PrDecision::Nothing { why } => why,
        }
    }
    /// The steps (none for [`PrDecision::Nothing`]).
    pub fn into_actions(self) -> Vec<Action> {
        match self {
            PrDecision::Write { actions, .. } => actions,
            PrDecision::Nothing { .. } => vec![],
        }
    }
}

/// The status fields a sweep fills in on a mirror, where they are unset:
/// what the ownership rules read of the pull request (state, author, head
/// branch and SHA: the four-clause close reads the author and branch), and
/// the ownership
/// `ownershipForAuthor` gives "a never-seen MR" (`tatara` for an author the
/// project owns, else `external` with reason `initial`). Fields already set
/// are left alone: flips, takeovers and the operator's mirror sync own them.
/// `bot_pushed_head`: an adopted bot PR's head is the bot's push, so a
/// `tatara` classification also records it as `lastBotHeadSHA`; without it
/// the flip rule would read the first reconcile as a foreign push.
pub fn mirror_fill(
    current: Option<&MergeRequestStatus>,
    pr: &ForgePullRequest,
    project: &Project,
    bot_pushed_head: bool,
) -> Option<(MergeRequestStatus, String)> {
    let cur = current.cloned().unwrap_or_default();
    let mut fill = MergeRequestStatus::default();
    let mut what: Vec<String> = Vec::new();
    let unset = |v: &Option<String>| v.as_deref().is_none_or(str::is_empty);
    let mut set = |field: &mut Option<String>, name: &str, current: &Option<String>, value: &str| {
        if unset(current) && !value.is_empty() {
            *field = Some(value.to_string());
            what.push(name.to_string());
        }
    };
    set(&mut fill.state, "state", &cur.state, "open");
    set(&mut fill.author, "author", &cur.author, &pr.author);
    set(&mut fill.head_branch, "headBranch", &cur.head_branch, &pr.head_branch);
    set(&mut fill.head_sha, "headSHA", &cur.head_sha, &pr.head_sha);
    if unset(&cur.ownership) {
        let w = ownership_for_author(project, &pr.author);
        if bot_pushed_head && w.ownership == TATARA && unset(&cur.last_bot_head_sha) && !pr.head_sha.is_empty() {
            fill.last_bot_head_sha = Some(pr.head_sha.clone());
            what.push("lastBotHeadSHA".into());
        }
        what.push(match &w.reason {
            Some(r) => format!("ownership {} ({r}: {})", w.ownership, w.why),
            None => format!("ownership {} ({})", w.ownership, w.why),
        });
        fill.ownership = Some(w.ownership);
        fill.ownership_reason = w.reason;
    }
    (!what.is_empty()).then(|| (fill, what.join(", ")))
}

/// The mirror steps once `task` is the pull request's Task: create the
/// mirror it controller-owns, or append it as controller of an ownerless
/// one (one PUT), or fill in the status of the one it controls. Stops after
/// a create or an owner write: the next step needs the new resourceVersion,
/// which the recomputation reads.
fn mirror_steps(
    snap: &Snapshot,
    project: &Project,
    pr: &ForgePullRequest,
    task: &Task,
    bot_pushed_head: bool,
) -> Vec<Action> {
    let uid = task.metadata.uid.as_deref().unwrap_or("");
    let controller = task_owner_ref(task.name(), uid, true);
    let mirrors = snap.merge_requests_for(&pr.repository_ref, pr.number);
    let name = merge_request_cr_name(&pr.repository_ref, pr.number);
    // By the natural key; the deterministic name only breaks a tie.
    let target = mirrors.iter().find(|m| m.name() == name).or(mirrors.first());
    match target {
        None => {
            let mut mr = MergeRequest::new(&name);
            mr.metadata.owner_references = Some(vec![controller]);
            mr.spec = IssueSpec {
                number: pr.number,
                project_ref: project.name().to_string(),
                repository_ref: pr.repository_ref.clone(),
                url: pr.url.clone(),
                ..Default::default()
            };
            vec![Action::CreateMergeRequest {
                why: format!("no mirror for {}: create {name} controlled by {}", pr.key(), task.name()),
                merge_request: Box::new(mr),
            }]
        }
        Some(m) if !m.owner_refs().iter().any(|r| r.uid == uid && is_controller(r)) => vec![Action::SetOwners {
            kind: ArtifactKind::MergeRequest,
            name: m.name().to_string(),
            resource_version: m.metadata.resource_version.clone(),
            owner_references: with_controller(m.owner_refs(), &controller),
            why: format!("{} exists without a controller: append {} as its controller owner", m.name(), task.name()),
        }],
        Some(m) => match mirror_fill(m.status.as_ref(), pr, project, bot_pushed_head) {
            Some((status, what)) => vec![Action::FillMergeRequest {
                name: m.name().to_string(),
                resource_version: m.metadata.resource_version.clone(),
                status: Box::new(status),
                why: format!("mirror {} on {}: {what}", pr.key(), m.name()),
            }],
            None => vec![],
        },
    }
}

/// The controller owner of any mirror of the pull request.
fn mirror_controller(snap: &Snapshot, pr: &ForgePullRequest) -> Option<(String, OwnerReference)> {
    snap.merge_requests_for(&pr.repository_ref, pr.number)
        .into_iter()
        .find_map(|m| m.owner_refs().iter().find(|r| is_controller(r)).map(|r| (m.name().to_string(), r.clone())))
}

/// The `mrRefs` append of an adoption, inside the CRD's `maxItems` and the
/// object byte budget; `Ok(None)` when the key is listed already.
fn append_mr_ref(task: &Task, key: &str) -> Result<Option<Action>, String> {
    let refs = task.mr_refs();
    if refs.iter().any(|r| r == key) {
        return Ok(None);
    }
    if refs.len() >= MR_REFS_MAX_ITEMS {
        return Err(format!(
            "{}'s status.mrRefs already lists {} merge requests (the CRD's maxItems is {MR_REFS_MAX_ITEMS}): {key} is not adopted, nothing is written",
            task.name(),
            refs.len()
        ));
    }
    let mr_refs: Vec<String> = refs.iter().cloned().chain([key.to_string()]).collect();
    let mut after = task.clone();
    after.status_mut().mr_refs = Some(mr_refs.clone());
    let bytes = serde_json::to_value(&after).map_or(usize::MAX, |v| object_bytes(&v));
    if bytes > OBJECT_BUDGET_BYTES {
        return Err(format!(
            "{} would be {bytes} bytes with {key} in its mrRefs, past the {OBJECT_BUDGET_BYTES}-byte object budget: not adopted until the operator's guard spills it",
            task.name()
        ));
    }
    Ok(Some(Action::SetMrRefs {
        task: task.name().to_string(),
        resource_version: task.metadata.resource_version.clone(),
        why: format!("append {key} to {}'s status.mrRefs", task.name()),
        mr_refs,
    }))
}

/// ADOPT, as a decision over a fresh snapshot: the disposition is
/// recomputed first (the Task may have gone terminal or been deleted).
/// Then, in order: the `mrRefs` append (it goes first because it is the one
/// that can be refused, by the CRD's `maxItems` or the byte budget, and a
/// refused adoption writes nothing), then the mirror controller-owned by
/// the Task, then its status. A mirror another Task controls is left alone:
/// one controller (rule 1), and a fold may have moved it on purpose.
pub fn decide_adopt(
    snap: &Snapshot,
    project: &Project,
    repo: Option<&Repository>,
    pr: &ForgePullRequest,
) -> PrDecision {
    let live = live_task_names(snap, project.name());
    let task_name = match pr_disposition(pr, project, repo, &live) {
        PrDisposition::Adopt { task, .. } => task,
        other => return PrDecision::Nothing { why: other.why().to_string() },
    };
    let Some(task) = snap.task(&task_name) else {
        return PrDecision::Nothing { why: format!("Task {task_name} is gone") };
    };
    // mrRefs keeps the `#` key it always held here: the operator stores CR
    // names (`mr-<repo>-<n>`, sweep.go:2209-2221), which is issue 28's sweep
    // item, not the key vocabulary.
    let key = natural_key(&pr.repository_ref, pr.number);
    let uid = task.metadata.uid.as_deref().unwrap_or("");
    if let Some((mirror, c)) = mirror_controller(snap, pr).filter(|(_, c)| c.uid != uid) {
        return PrDecision::Nothing {
            why: format!("{mirror} is controlled by {}, not {task_name}: left alone (one controller owner)", c.name),
        };
    }
    let mut actions = match append_mr_ref(task, &key) {
        Err(why) => return PrDecision::Nothing { why },
        Ok(append) => append.into_iter().collect::<Vec<_>>(),
    };
    actions.extend(mirror_steps(snap, project, pr, task, true));
    if actions.is_empty() {
        return PrDecision::Nothing {
            why: format!("already adopted: {key} is in {task_name}'s mrRefs and {task_name} controls its mirror"),
        };
    }
    PrDecision::Write { actions, why: format!("adopt {key} into {task_name}") }
}

/// The review-kind Task a sweep mints for a human pull request: named by
/// `IntakeTaskName` with kind `review`, at the mint stage, like an issue
/// mint. It carries no `spec.source`, as an issue mint carries none: the
/// pull request is the MergeRequest it controller-owns.
pub fn review_task(project: &Project, namespace: &str, pr: &ForgePullRequest, stage: MintStage) -> Task {
    let name = review_task_name(project.name(), &pr.repository_ref, pr.number);
    let mut t = minted_task(project, namespace, &name, &pr.repository_ref, format!("Review {}", pr.key()), stage);
    t.spec.kind = Some(REVIEW_KIND.to_string());
    t
}

/// Where a review mint stands on one snapshot.
enum Review<'a> {
    /// Nothing to write, and why.
    Done(String),
    /// No review Task yet: mint it.
    Mint,
    /// The live review Task's mirror steps (not empty).
    Mirror(&'a Task, Vec<Action>),
}

fn review_state<'a>(
    snap: &'a Snapshot,
    project: &Project,
    repo: Option<&Repository>,
    pr: &ForgePullRequest,
) -> Review<'a> {
    if let d @ (PrDisposition::Adopt { .. } | PrDisposition::IgnoreBot { .. } | PrDisposition::Ignore { .. }) =
        pr_disposition(pr, project, repo, &BTreeSet::new())
    {
        return Review::Done(d.why().to_string());
    }
    let name = review_task_name(project.name(), &pr.repository_ref, pr.number);
    let existing = snap.task(&name);
    let own_uid = existing.and_then(|t| t.metadata.uid.as_deref());
    // The orphan predicate's clause b, over the mrKey index: a pull request
    // whose mirror has a controller owner is somebody's already.
    if let Some((mirror, c)) = mirror_controller(snap, pr).filter(|(_, c)| Some(c.uid.as_str()) != own_uid) {
        return Review::Done(format!("{mirror} is controlled by {}: a Task already answers for {}", c.name, pr.key()));
    }
    let Some(task) = existing else {
        return Review::Mint;
    };
    if task.is_terminal() || task.metadata.deletion_timestamp.is_some() {
        return Review::Done(format!("the review Task {name} is terminal; it must be reaped before a re-mint"));
    }
    let steps = mirror_steps(snap, project, pr, task, false);
    if steps.is_empty() {
        return Review::Done(format!("{name} reviews {} and controls its mirror", pr.key()));
    }
    Review::Mirror(task, steps)
}

/// Whether a review mint has anything to write (the plan's question; the
/// mint then goes through the budget with the issue mints).
pub fn review_verdict(
    snap: &Snapshot,
    project: &Project,
    repo: Option<&Repository>,
    pr: &ForgePullRequest,
) -> OrphanVerdict {
    match review_state(snap, project, repo, pr) {
        Review::Done(why) => OrphanVerdict { orphan: false, why },
        Review::Mint => {
            OrphanVerdict { orphan: true, why: format!("no Task answers for {}: mint its review Task", pr.key()) }
        }
        Review::Mirror(task, _) => OrphanVerdict {
            orphan: true,
            why: format!("{} exists and its mirror of {} is unfinished", task.name(), pr.key()),
        },
    }
}

/// REVIEW, as a decision over a fresh snapshot: create the review Task,
/// then its mirror (adopt-or-create, as the issue mint), then the mirror's
/// status. Nothing once another Task controls the mirror, or once done.
pub fn decide_review(
    snap: &Snapshot,
    project: &Project,
    repo: Option<&Repository>,
    namespace: &str,
    pr: &ForgePullRequest,
    stage: MintStage,
) -> PrDecision {
    match review_state(snap, project, repo, pr) {
        Review::Done(why) => PrDecision::Nothing { why },
        Review::Mint => {
            let task = review_task(project, namespace, pr, stage);
            let why = format!("{} needs a review: mint {} ({})", pr.key(), task.name(), stage.label());
            PrDecision::Write { actions: vec![Action::CreateTask { task: Box::new(task), why: why.clone() }], why }
        }
        Review::Mirror(task, actions) => {
            PrDecision::Write { why: format!("mirror {} owned by {}", pr.key(), task.name()), actions }
        }
    }
}

#[cfg(test)]
mod tests;
