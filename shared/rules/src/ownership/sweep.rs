//! Sweep: the one function that keeps "no SCM artifact without a Task" true.
//! The orphan predicate (answered through the `<repositoryRef>#<number>`
//! issueKey index), the reporter intake gate, the mint stage, adopt-or-create,
//! the two creation budgets, and the four pull-request dispositions
//! ([`pull_requests`]: adopt, ignore, or review, and the writes of the two
//! that write).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::{Deserialize, Serialize};

use super::decision::{Action, Artifact, Snapshot, is_controller};
use super::naming::{intake_task_name, issue_cr_name, natural_key};
use super::types::{BACKLOG_SWEEP, Issue, IssueSpec, Project, Repository, Task};

mod pull_requests;
pub mod trigger;
pub use pull_requests::*;

/// An issue as the forge reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForgeIssue {
    pub repository_ref: String,
    pub number: i64,
    pub state: String,
    pub author: String,
    pub url: String,
    /// The thread's last comment is human-authored.
    pub last_comment_human: bool,
    /// Forge labels on the issue (the mint stage reads `tatara-parked`).
    #[serde(default)]
    pub labels: Vec<String>,
}

/// The `issueKey` field index: `<repositoryRef>#<number>` -> Issue CRs.
/// "Clause b is answered by the issueKey field index, never by a hashed
/// name and never by a label selector."
#[derive(Debug, Clone, Default)]
pub struct IssueKeyIndex {
    by_key: BTreeMap<String, Vec<Artifact>>,
}

impl IssueKeyIndex {
    /// Index every Issue CR by its natural key.
    pub fn build(issues: &[Artifact]) -> Self {
        let mut by_key: BTreeMap<String, Vec<Artifact>> = BTreeMap::new();
        for i in issues {
            by_key.entry(i.key()).or_default().push(i.clone());
        }
        IssueKeyIndex { by_key }
    }
    /// The Issue CRs under one key.
    pub fn get(&self, repository_ref: &str, number: i64) -> &[Artifact] {
        self.by_key.get(&natural_key(repository_ref, number)).map_or(&[], Vec::as_slice)
    }
}

pub use super::logins::{effective_maintainers, is_allowed_reporter};

/// The orphan predicate with the clause that decided it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrphanVerdict {
    pub orphan: bool,
    pub why: String,
}

/// "ISSUE ORPHAN (mint a Task) iff ALL of: a. issue.state == "open" b. no
/// Issue CR for (repo, number) has a controller=true owner c.
/// IsAllowedReporter(project, repo, issue.author)".
pub fn orphan(
    issue: &ForgeIssue,
    index: &IssueKeyIndex,
    project: &Project,
    repo: Option<&Repository>,
) -> OrphanVerdict {
    let key = natural_key(&issue.repository_ref, issue.number);
    if issue.state != "open" {
        return OrphanVerdict { orphan: false, why: format!("{key} is {} on the forge (clause a)", issue.state) };
    }
    if let Some(owned) =
        index.get(&issue.repository_ref, issue.number).iter().find(|a| a.owner_references.iter().any(is_controller))
    {
        return OrphanVerdict {
            orphan: false,
            why: format!("{key} has a controller owner on {} (clause b)", owned.name),
        };
    }
    if !is_allowed_reporter(project, repo, &issue.author) {
        return OrphanVerdict {
            orphan: false,
            why: format!("{key}: reporter {:?} is not allowed by the intake gate (clause c)", issue.author),
        };
    }
    OrphanVerdict { orphan: true, why: format!("{key} is open, controlled by no Task, and from an allowed reporter") }
}

/// The two mint stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MintStage {
    /// Active: spawns a pod.
    Triaging,
    /// parked(backlog-sweep): spawns zero pods.
    ParkedBacklogSweep,
}

/// "stage = triaging ... when the Task is webhook-originated, or the
/// thread's last comment is human-authored ... stage = parked, stageReason =
/// backlog-sweep ... otherwise."
pub fn mint_stage(webhook_originated: bool, last_comment_human: bool) -> MintStage {
    if webhook_originated || last_comment_human { MintStage::Triaging } else { MintStage::ParkedBacklogSweep }
}

/// The label stamped on a parked SCM issue, which the mint stage reads.
pub use super::reap::PARKED_LABEL;

/// The `kind` argument of `IntakeTaskName` for a sweep mint. Neither the
/// spec nor `facts/` says which kind the sweep passes; we pass none (the
/// name then has no kind letter). Change it here if the operator differs.
pub const SWEEP_MINT_KIND: &str = "";

/// The mint stage of one forge issue. The terminal path stamps
/// `tatara-parked` because "the sweep's mint-stage predicate READS this
/// label": an issue whose previous Task was parked or failed is a backlog
/// re-mint, parked(backlog-sweep), whatever its thread's last comment - only a
/// webhook (a human acting now) mints it active. Without the label the rule
/// is [`mint_stage`]'s.
pub fn mint_stage_for(issue: &ForgeIssue, webhook_originated: bool) -> MintStage {
    mint_stage_of(&issue.labels, issue.last_comment_human, webhook_originated)
}

/// [`mint_stage_for`] over the parts it reads, for any thread (an issue's, or
/// a pull request's when the sweep mints its review Task).
pub fn mint_stage_of(labels: &[String], last_comment_human: bool, webhook_originated: bool) -> MintStage {
    if webhook_originated {
        return MintStage::Triaging;
    }
    if labels.iter().any(|l| l == PARKED_LABEL) {
        return MintStage::ParkedBacklogSweep;
    }
    mint_stage(false, last_comment_human)
}

/// What one sweep mint is for. Both kinds go "through the same mint stage,
/// budget and naming": one [`plan_mints`] over both, in forge order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "source")]
pub enum MintSource {
    /// An orphan issue: the Task controller-owns its Issue mirror.
    Issue(ForgeIssue),
    /// A human-authored pull request in reaction scope: a review-kind Task
    /// controller-owns its MergeRequest mirror.
    Review(ForgePullRequest),
}

impl MintSource {
    /// Natural key `<repositoryRef>#<number>` of the issue or pull request.
    pub fn key(&self) -> String {
        match self {
            MintSource::Issue(i) => natural_key(&i.repository_ref, i.number),
            MintSource::Review(p) => p.key(),
        }
    }
    /// The Repository CR it belongs to.
    pub fn repository_ref(&self) -> &str {
        match self {
            MintSource::Issue(i) => &i.repository_ref,
            MintSource::Review(p) => &p.repository_ref,
        }
    }
    /// Its mint stage. A sweep is cron-discovered, never webhook-originated.
    pub fn stage(&self) -> MintStage {
        match self {
            MintSource::Issue(i) => mint_stage_for(i, false),
            MintSource::Review(p) => mint_stage_of(&p.labels, p.last_comment_human, false),
        }
    }
}

/// Every orphan of one sweep pass, in forge order, with its mint stage, cut
/// to the two creation budgets. `active_now` is counted from the snapshot:
/// "ACTIVE = stage NOT IN (parked, delivered, rejected, failed)".
pub fn plan_pass(snap: &Snapshot, project: &Project, repo: Option<&Repository>, issues: &[ForgeIssue]) -> MintPlan {
    let index = IssueKeyIndex::build(&snap.issues.iter().map(Artifact::from).collect::<Vec<_>>());
    let orphans = issues
        .iter()
        .filter(|i| orphan(i, &index, project, repo).orphan)
        .map(|i| (MintSource::Issue(i.clone()), mint_stage_for(i, false)))
        .collect();
    let active = snap.tasks.iter().filter(|t| t.spec.project_ref == project.name() && t.is_active()).count();
    plan_mints(orphans, project, active)
}

/// The Task a sweep mint creates, deterministically named. The stage is
/// carried in the immutable spec (`initialParkReason`), as the CRD does.
pub fn mint_task(project: &Project, namespace: &str, issue: &ForgeIssue, stage: MintStage) -> Task {
    let name = intake_task_name(project.name(), SWEEP_MINT_KIND, &issue.repository_ref, issue.number);
    let goal = format!("Triage {}", natural_key(&issue.repository_ref, issue.number));
    minted_task(project, namespace, &name, &issue.repository_ref, goal, stage)
}

/// A Task a sweep mints, at its mint stage.
fn minted_task(
    project: &Project,
    namespace: &str,
    name: &str,
    repository_ref: &str,
    goal: String,
    stage: MintStage,
) -> Task {
    let mut t = Task::new(name);
    t.metadata.namespace = Some(namespace.to_string());
    t.spec.project_ref = project.name().to_string();
    t.spec.repository_ref = Some(repository_ref.to_string());
    t.spec.goal = goal;
    if stage == MintStage::ParkedBacklogSweep {
        t.spec.initial_park_reason = Some(BACKLOG_SWEEP.to_string());
    }
    t
}

/// The Issue write of "The mint adopts, it never blindly creates".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "write")]
pub enum IssueWrite {
    /// "APPEND task as its controller=true owner (an UPDATE)".
    Adopt { issue: Box<Issue>, why: String },
    /// "CREATE it with task as controller owner".
    Create { issue: Box<Issue>, why: String },
    /// Someone took it between the predicate and the write: not an orphan
    /// any more (recomputing after a conflict lands here).
    Skip { why: String },
}

/// `mintTaskForIssue`: adopt the ownerless survivor of a failed Task, or
/// create the mirror, with the new Task as controller owner.
pub fn adopt_or_create(
    task_ref: &OwnerReference,
    existing: Option<&Issue>,
    project: &str,
    issue: &ForgeIssue,
) -> IssueWrite {
    let controller = OwnerReference { controller: Some(true), block_owner_deletion: Some(true), ..task_ref.clone() };
    match existing {
        Some(iss) => {
            if let Some(c) = iss.owner_refs().iter().find(|r| is_controller(r)) {
                return IssueWrite::Skip { why: format!("{} is already controlled by {}", iss.name(), c.name) };
            }
            let mut updated = iss.clone();
            updated.metadata.owner_references = Some(with_controller(iss.owner_refs(), &controller));
            IssueWrite::Adopt {
                why: format!(
                    "{} exists without a controller: append {} as its controller owner",
                    iss.name(),
                    controller.name
                ),
                issue: Box::new(updated),
            }
        }
        None => {
            let mut iss = Issue::new(&issue_cr_name(&issue.repository_ref, issue.number));
            iss.metadata.owner_references = Some(vec![controller.clone()]);
            iss.spec = IssueSpec {
                number: issue.number,
                project_ref: project.to_string(),
                repository_ref: issue.repository_ref.clone(),
                url: issue.url.clone(),
                ..Default::default()
            };
            IssueWrite::Create {
                why: format!(
                    "no mirror for {}: create it owned by {}",
                    issue_cr_name(&issue.repository_ref, issue.number),
                    controller.name
                ),
                issue: Box::new(iss),
            }
        }
    }
}

/// `refs` with `controller` appended as the controller owner: the others
/// stay plain references, every one with blockOwnerDeletion (rules 2 and 3).
/// Only for an artifact with no controller owner: one PUT, never two
/// controllers.
fn with_controller(refs: &[OwnerReference], controller: &OwnerReference) -> Vec<OwnerReference> {
    let controller = OwnerReference { controller: Some(true), block_owner_deletion: Some(true), ..controller.clone() };
    let mut out: Vec<OwnerReference> = refs
        .iter()
        .filter(|r| r.uid != controller.uid)
        .map(|r| OwnerReference { block_owner_deletion: Some(true), ..r.clone() })
        .collect();
    out.push(controller);
    out
}

/// A cap that bound this pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapHit {
    /// `maxNewTasksPerSweep` or `maxOpenTasks` (the metric's `cap` label).
    pub cap: String,
    pub why: String,
}

/// One pass's mint plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MintPlan {
    /// Orphans (and review mints) to mint this pass, with their stage.
    pub mint: Vec<(MintSource, MintStage)>,
    /// Orphans left for the next pass ("Remaining orphans are minted on the
    /// next pass. The predicate is stateless, so nothing is lost.").
    pub deferred: Vec<MintSource>,
    pub cap_hits: Vec<CapHit>,
}

/// "mint at most Project.spec.maxNewTasksPerSweep (default 5) Tasks AND never
/// let ACTIVE Tasks exceed Project.spec.maxOpenTasks (default 6)";
/// "parked(backlog-sweep) Tasks are NOT active and do not count".
pub fn plan_mints(orphans: Vec<(MintSource, MintStage)>, project: &Project, active_now: usize) -> MintPlan {
    let max_new = project.spec.max_new_tasks_per_sweep() as usize;
    let max_open = project.spec.max_open_tasks() as usize;
    let mut plan = MintPlan { mint: vec![], deferred: vec![], cap_hits: vec![] };
    let mut active = active_now;
    let hit = |plan: &mut MintPlan, cap: &str, why: String| {
        if !plan.cap_hits.iter().any(|h| h.cap == cap) {
            plan.cap_hits.push(CapHit { cap: cap.to_string(), why });
        }
    };
    for (source, stage) in orphans {
        if plan.mint.len() >= max_new {
            hit(&mut plan, "maxNewTasksPerSweep", format!("minted {max_new} Tasks this pass (maxNewTasksPerSweep)"));
            plan.deferred.push(source);
            continue;
        }
        if stage == MintStage::Triaging {
            if active >= max_open {
                hit(&mut plan, "maxOpenTasks", format!("{active} active Tasks reach maxOpenTasks {max_open}"));
                plan.deferred.push(source);
                continue;
            }
            active += 1;
        }
        plan.mint.push((source, stage));
    }
    plan
}

// --- What a sweep pass reports (the plugin prints it; it decides nothing) ---

impl MintStage {
    /// The stage as the report names it.
    pub fn label(self) -> &'static str {
        match self {
            MintStage::Triaging => "triaging",
            MintStage::ParkedBacklogSweep => "parked(backlog-sweep)",
        }
    }

    /// What a mint at this stage costs, and why it is this stage ("The
    /// mint stage says what it costs").
    pub fn cost(self) -> &'static str {
        match self {
            MintStage::Triaging => "the thread's last comment is human-authored: a human is waiting",
            MintStage::ParkedBacklogSweep => "cron-discovered backlog with no human waiting: parked, spawns zero pods",
        }
    }
}

/// What the pass decided for one open forge issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueLine {
    pub key: String,
    /// `mint`, `deferred` or `skip`.
    pub decision: String,
    /// The mint stage of an orphan: `triaging` or `parked(backlog-sweep)`.
    pub stage: Option<String>,
    pub why: String,
}

impl IssueLine {
    /// An issue the orphan predicate passes by, with the predicate's why.
    pub fn skip(issue: &ForgeIssue, why: String) -> Self {
        IssueLine { key: natural_key(&issue.repository_ref, issue.number), decision: "skip".into(), stage: None, why }
    }
}

/// The plan's issues as report lines: each orphan minted this pass with its
/// stage and why, then each one deferred with the caps that bound the pass.
pub fn plan_lines(plan: &MintPlan) -> Vec<IssueLine> {
    lines_of(plan, false)
}

/// The plan's review mints as report lines, shaped as [`plan_lines`].
pub fn review_lines(plan: &MintPlan) -> Vec<IssueLine> {
    lines_of(plan, true)
}

fn lines_of(plan: &MintPlan, reviews: bool) -> Vec<IssueLine> {
    let caps = plan.cap_hits.iter().map(|c| c.why.as_str()).collect::<Vec<_>>().join("; ");
    let what = |s: &MintSource| match s {
        MintSource::Issue(_) => "orphan",
        MintSource::Review(_) => "human pull request in reaction scope that no Task reviews",
    };
    let wanted = |s: &MintSource| matches!(s, MintSource::Review(_)) == reviews;
    let minted = plan.mint.iter().filter(|(s, _)| wanted(s)).map(|(source, stage)| IssueLine {
        key: source.key(),
        decision: "mint".into(),
        stage: Some(stage.label().into()),
        why: format!("{}; {}", what(source), stage.cost()),
    });
    let deferred = plan.deferred.iter().filter(|s| wanted(s)).map(|source| IssueLine {
        key: source.key(),
        decision: "deferred".into(),
        stage: None,
        why: format!("{}, left for the next pass: {caps}", what(source)),
    });
    minted.chain(deferred).collect()
}

/// What carrying out one planned mint came to, read off the writes the
/// executor applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MintOutcome {
    /// This pass created the Task `task` (and its mirror).
    Minted { task: String },
    /// Another writer had created the Task `task`; this pass finished the
    /// mint (created or adopted the Issue mirror). Racing passes thus report
    /// each mint once as minted, never twice.
    Completed { task: String },
    /// A fresh read found nothing to do.
    NothingToDo,
}

impl MintOutcome {
    /// Why a planned mint found nothing to do on a fresh read.
    pub const NOTHING_TO_DO_WHY: &'static str = "on a fresh read it is no longer an orphan (another writer minted it), \
         or a same-named Task is terminal and must be reaped first";
}

/// The outcome of a mint whose converged decision applied `applied`. The
/// Task another writer may have created is found through the controller
/// reference this pass wrote.
pub fn mint_outcome(applied: &[Action]) -> MintOutcome {
    let task = applied.iter().find_map(|a| {
        let refs = match a {
            Action::CreateTask { task, .. } => return Some(task.name().to_string()),
            Action::SetOwners { owner_references, .. } => owner_references.as_slice(),
            Action::CreateIssue { issue, .. } => issue.owner_refs(),
            Action::CreateMergeRequest { merge_request, .. } => merge_request.owner_refs(),
            _ => return None,
        };
        refs.iter().find(|r| is_controller(r)).map(|r| r.name.clone())
    });
    match task {
        _ if applied.is_empty() => MintOutcome::NothingToDo,
        task if applied.iter().any(|a| matches!(a, Action::CreateTask { .. })) => {
            MintOutcome::Minted { task: task.unwrap_or_default() }
        }
        task => MintOutcome::Completed { task: task.unwrap_or_default() },
    }
}

#[cfg(test)]
mod tests;

/// One orphan's mint as a decision over a fresh snapshot: create the Task,
/// then adopt-or-create its Issue. Empty once the issue is no longer an
/// orphan. A same-named Task that is terminal (a failed Task survives 7 days)
/// blocks the re-mint until it is reaped.
pub fn decide(
    snap: &Snapshot,
    project: &Project,
    repo: Option<&Repository>,
    namespace: &str,
    issue: &ForgeIssue,
    stage: MintStage,
) -> Vec<Action> {
    let index = IssueKeyIndex::build(&snap.issues.iter().map(Artifact::from).collect::<Vec<_>>());
    if !orphan(issue, &index, project, repo).orphan {
        return vec![];
    }
    let task = mint_task(project, namespace, issue, stage);
    let Some(existing) = snap.task(task.name()) else {
        return vec![Action::CreateTask {
            why: format!(
                "{} is an orphan: mint {} ({})",
                natural_key(&issue.repository_ref, issue.number),
                task.name(),
                stage.label()
            ),
            task: Box::new(task),
        }];
    };
    if existing.is_terminal() || existing.metadata.deletion_timestamp.is_some() {
        return vec![];
    }
    let task_ref = super::types::task_owner_ref(existing.name(), existing.metadata.uid.as_deref().unwrap_or(""), true);
    let mirror = snap.issue(&issue_cr_name(&issue.repository_ref, issue.number));
    match adopt_or_create(&task_ref, mirror, project.name(), issue) {
        IssueWrite::Adopt { issue, why } => vec![Action::SetOwners {
            kind: super::types::ArtifactKind::Issue,
            name: issue.name().to_string(),
            resource_version: issue.metadata.resource_version.clone(),
            owner_references: issue.owner_refs().to_vec(),
            why,
        }],
        IssueWrite::Create { issue, why } => vec![Action::CreateIssue { issue, why }],
        IssueWrite::Skip { .. } => vec![],
    }
}
