//! `kubectl tatara sweep --project P [--apply]`: one sweep pass ("The
//! sweep"). Open issues and pull requests come from the forge; the orphan
//! predicate is answered by the `<repositoryRef>#<number>` index over the
//! Issue CRs; each orphan gets its mint stage (triaging, or
//! parked(backlog-sweep)); both creation budgets bound the pass; every pull
//! request gets one of the four dispositions. Every line says why. The plan
//! is this plugin's model of the operator's sweep; `--apply` does not carry
//! it out. The operator mints and adopts itself, and a Task minted by anyone
//! else is reaped or stranded by it, so `--apply` asks the operator to run
//! its own sweep now: it clears `status.lastIssueScan`, the stamp the
//! operator's scheduler anchors the next sweep on
//! ([`rules::ownership::sweep::trigger`]), on the status subresource.

use std::io::Write;

use kube::Api;
use kube::api::{Patch, PatchParams};
use rules::ownership::decision::Artifact;
use rules::ownership::naming::review_task_name;
use rules::ownership::sweep::trigger::{self, Decision, Kind, STAMP};
use rules::ownership::sweep::{
    CapHit, DispositionCounts, ForgeIssue, ForgePullRequest, IssueKeyIndex, IssueLine, MintSource, MintStage,
    PrDecision, PrDisposition, decide_adopt, live_task_names, mint_stage_for, orphan, plan_lines, plan_mints,
    pr_disposition, review_lines, review_verdict,
};
use rules::ownership::types::{Project, Repository};
use runtime::ownership::executor::Executor;
use serde::Serialize;

use crate::common::{self, Call, Cell, CliError, Human, KubeArgs, Offers, OutputArgs, Paint, Style, Table};
use runtime::ownership::forge::{ForgeArgs, GitHub, repo_coords};

/// The flags of `kubectl tatara sweep`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Examples:\n  GITHUB_TOKEN=... kubectl tatara sweep --project tatara -n tatara\n  \
                  kubectl tatara sweep --project tatara --apply -o json --forge-url https://ghe.example.com/api/v3")]
pub struct Args {
    /// The Project whose Repositories are swept.
    #[arg(long, value_name = "PROJECT")]
    pub project: String,
    /// Ask the tatara operator to run its own sweep now (clears
    /// status.lastIssueScan on the Project and its Repositories; the
    /// operator mints and adopts). Without it the plan is only printed.
    #[arg(long)]
    pub apply: bool,
    #[command(flatten)]
    pub forge: ForgeArgs,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub output: OutputArgs<true, false>,
}

/// The disposition of one open pull request, and what the pass did about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PullLine {
    pub key: String,
    pub author: String,
    pub head_branch: String,
    pub disposition: PrDisposition,
    /// What this pass does: `adopt`, `mint` (a review Task), `deferred` (a
    /// creation budget bound), `skip` (nothing left to write), or `ignore`.
    pub decision: String,
    /// A review mint's stage: `triaging` or `parked(backlog-sweep)`.
    pub stage: Option<String>,
    /// The Task it is adopted into, or its review Task.
    pub task: Option<String>,
    /// Why this decision.
    pub why: String,
}

impl PullLine {
    /// The line of a pull request with its disposition; ignored until a
    /// decision says otherwise.
    fn new(pr: &ForgePullRequest, disposition: PrDisposition) -> Self {
        PullLine {
            key: pr.key(),
            author: pr.author.clone(),
            head_branch: pr.head_branch.clone(),
            decision: "ignore".into(),
            stage: None,
            task: None,
            why: disposition.why().to_string(),
            disposition,
        }
    }
}

/// What `sweep` prints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepResult {
    pub project: String,
    pub namespace: String,
    pub max_new_tasks_per_sweep: u64,
    pub max_open_tasks: u64,
    /// ACTIVE Tasks of the project before the pass.
    pub active_tasks: usize,
    pub issues: Vec<IssueLine>,
    pub pull_requests: Vec<PullLine>,
    /// How many open pull requests got each disposition.
    pub pull_request_counts: DispositionCounts,
    pub cap_hits: Vec<CapHit>,
}

impl Human for SweepResult {
    /// The budgets, a table of issues (ISSUE, DECISION, STAGE, WHY), one of
    /// pull requests (-o wide adds their head branch), and what --apply did.
    fn render(&self, style: &Style, out: &mut dyn Write) -> std::io::Result<()> {
        let r = self;
        if style.headers {
            writeln!(
                out,
                "sweep of project {} in {}: {} active Task(s); budgets maxNewTasksPerSweep={} maxOpenTasks={}",
                r.project, r.namespace, r.active_tasks, r.max_new_tasks_per_sweep, r.max_open_tasks
            )?;
        }
        let mut issues = Table::new(&[("issue", false), ("decision", false), ("stage", false), ("why", false)]);
        for l in &r.issues {
            issues.row(vec![
                l.key.as_str().into(),
                decision_cell(&l.decision),
                l.stage.as_deref().unwrap_or("-").into(),
                Cell::painted(l.why.clone(), Paint::Dim),
            ]);
        }
        if issues.is_empty() {
            if style.headers {
                writeln!(out, "no open issues")?;
            }
        } else {
            out.write_all(issues.render(style).as_bytes())?;
        }
        let mut pulls = Table::new(&[
            ("pull request", false),
            ("author", false),
            ("head branch", true),
            ("disposition", false),
            ("decision", false),
            ("why", false),
        ]);
        for p in &r.pull_requests {
            let d = match &p.disposition {
                PrDisposition::Adopt { task, .. } => format!("adopt into {task}"),
                PrDisposition::IgnoreBot { .. } => "ignore (bot)".into(),
                PrDisposition::Review { .. } => "review".into(),
                PrDisposition::Ignore { .. } => "ignore".into(),
            };
            let decision = match &p.stage {
                Some(stage) => decision_painted(format!("{} {stage}", p.decision), &p.decision),
                None => decision_cell(&p.decision),
            };
            pulls.row(vec![
                p.key.as_str().into(),
                p.author.as_str().into(),
                p.head_branch.as_str().into(),
                d.into(),
                decision,
                Cell::painted(p.why.clone(), Paint::Dim),
            ]);
        }
        if !pulls.is_empty() {
            out.write_all(pulls.render(style).as_bytes())?;
            if style.headers {
                let c = &r.pull_request_counts;
                writeln!(
                    out,
                    "pull requests: {} adopt, {} ignore (bot), {} review, {} ignore",
                    c.adopt, c.ignore_bot, c.review, c.ignore
                )?;
            }
        }
        for c in &r.cap_hits {
            writeln!(out, "cap {} bound this pass: {}", c.cap, c.why)?;
        }
        Ok(())
    }

    /// Mints and adoptions were planned, not made: who makes them, on
    /// stderr.
    fn note(&self, style: &Style) -> Option<String> {
        let r = self;
        (style.headers
            && (r.issues.iter().any(|l| l.decision == "mint")
                || r.pull_requests.iter().any(|p| p.decision == "mint" || p.decision == "adopt")))
        .then(|| "(plan only: the operator mints and adopts; --apply asks it to run its own sweep now)".into())
    }
}

/// Mints green, deferrals yellow, the rest plain.
fn decision_paint(decision: &str) -> Option<Paint> {
    match decision {
        "mint" | "adopt" => Some(Paint::Green),
        "deferred" => Some(Paint::Yellow),
        _ => None,
    }
}

fn decision_cell(decision: &str) -> Cell {
    decision_painted(decision.to_string(), decision)
}

fn decision_painted(text: String, decision: &str) -> Cell {
    match decision_paint(decision) {
        Some(paint) => Cell::painted(text, paint),
        None => text.into(),
    }
}

/// Runs `kubectl tatara sweep`.
pub async fn run(args: &Args, colour: bool, out: &mut dyn Write) -> Result<(), CliError> {
    args.output.check("sweep", Offers { wide: true, name: false })?;
    let target = args.kube.client().await?;
    let ns = target.namespace.clone();
    let project = super::get_project(&target.client, &ns, &args.project).await?;
    let repos = super::project_repositories(&target.client, &ns, &args.project).await?;
    if repos.is_empty() {
        return Err(CliError::new(format!(
            "project {:?} has no Repository in namespace {ns:?} (spec.projectRef); nothing to sweep",
            args.project
        )));
    }
    if args.apply {
        // No forge read: the operator's own pass lists the forge.
        return apply(&target.client, &ns, &project, &repos, args, colour, out).await;
    }
    let mut gh = GitHub::with_timeouts(&args.forge, args.kube.forge_timeouts())?;
    let exec = Executor::new(target.client.clone(), &ns);
    let snap = exec.snapshot().await.map_err(|e| common::executor_failure(e, &ns))?;
    let index = IssueKeyIndex::build(&snap.issues.iter().map(Artifact::from).collect::<Vec<_>>());
    let bot = project.spec.scm.bot_login.clone();
    // The Tasks a pull request can be adopted into: live ones of this project.
    let live = live_task_names(&snap, &args.project);

    let mut result = SweepResult {
        project: args.project.clone(),
        namespace: ns.clone(),
        max_new_tasks_per_sweep: project.spec.max_new_tasks_per_sweep(),
        max_open_tasks: project.spec.max_open_tasks(),
        // "ACTIVE = stage NOT IN (parked, delivered, rejected, failed)"
        active_tasks: snap.tasks.iter().filter(|t| t.spec.project_ref == args.project && t.is_active()).count(),
        ..Default::default()
    };
    // Issue orphans and review mints share the budgets, in forge order:
    // per repository, its issues, then its pull requests.
    let mut orphans: Vec<(MintSource, MintStage)> = Vec::new();
    for repo in &repos {
        let Some(coords) = repo_coords(&project, repo) else {
            return Err(CliError::new(format!(
                "Repository {ns}/{} has no forge coordinates: set its spec.url to the repository's URL",
                repo.name()
            )));
        };
        gh.register(repo.name(), coords.clone());
        for (gh_issue, issue) in gh.open_issues(repo.name(), &coords).await? {
            let verdict = orphan(&issue, &index, &project, Some(repo));
            if !verdict.orphan {
                result.issues.push(IssueLine::skip(&issue, verdict.why));
                continue;
            }
            // Only orphans need their thread's last comment: it decides what
            // the mint costs, and each read is a forge request.
            let human = gh.last_comment_human(&coords, &gh_issue, &bot).await?;
            let issue = ForgeIssue { last_comment_human: human, ..issue };
            // A sweep is cron-discovered, never webhook-originated.
            let stage = mint_stage_for(&issue, false);
            orphans.push((MintSource::Issue(issue), stage));
        }
        for pr in gh.open_pulls(repo.name(), &coords, &bot).await? {
            let disposition = pr_disposition(&pr, &project, Some(repo), &live);
            result.pull_request_counts.count(&disposition);
            let mut line = PullLine::new(&pr, disposition.clone());
            match &disposition {
                PrDisposition::Adopt { task, .. } => {
                    line.task = Some(task.clone());
                    match decide_adopt(&snap, &project, Some(repo), &pr) {
                        PrDecision::Write { .. } => {
                            line.decision = "adopt".into();
                        }
                        PrDecision::Nothing { why } => (line.decision, line.why) = ("skip".into(), why),
                    }
                }
                PrDisposition::Review { .. } => {
                    line.task = Some(review_task_name(&args.project, &pr.repository_ref, pr.number));
                    let verdict = review_verdict(&snap, &project, Some(repo), &pr);
                    if verdict.orphan {
                        // As for an issue: only a mint reads the thread's last comment.
                        let human = gh.last_pull_comment_human(&coords, pr.number, &bot).await?;
                        let source = MintSource::Review(ForgePullRequest { last_comment_human: human, ..pr });
                        let stage = source.stage();
                        orphans.push((source, stage));
                    } else {
                        (line.decision, line.why) = ("skip".into(), verdict.why);
                    }
                }
                PrDisposition::IgnoreBot { .. } | PrDisposition::Ignore { .. } => {}
            }
            result.pull_requests.push(line);
        }
    }
    let plan = plan_mints(orphans, &project, result.active_tasks);
    for hit in &plan.cap_hits {
        // The output says it (a `cap` line, `capHits`); a warning would say it twice.
        tracing::debug!(project = %args.project, cap = %hit.cap, why = %hit.why, "sweep mint cap hit");
    }
    result.issues.extend(plan_lines(&plan));
    for l in review_lines(&plan) {
        if let Some(p) = result.pull_requests.iter_mut().find(|p| p.key == l.key) {
            (p.decision, p.stage, p.why) = (l.decision, l.stage, l.why);
        }
    }
    result.cap_hits = plan.cap_hits.clone();

    common::print(&args.output, colour, &result, out)
}

/// One object `--apply` asked about, and what came of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerLine {
    #[serde(flatten)]
    pub line: trigger::Line,
    /// `cleared` (the status patch landed), `alreadyClear` (no stamp to
    /// clear), `refused` (the operator would not sweep it), or `failed`.
    pub outcome: String,
    /// Why a write failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What `sweep --apply` prints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerResult {
    pub project: String,
    pub namespace: String,
    pub apply: bool,
    /// Repositories first, the Project last: the order of the writes.
    pub triggers: Vec<TriggerLine>,
    /// What the operator does next, one sentence per swept Repository.
    pub next: Vec<String>,
}

impl Human for TriggerResult {
    /// A table of KIND, NAME, ASKED, WHY, then what the operator does next.
    fn render(&self, style: &Style, out: &mut dyn Write) -> std::io::Result<()> {
        if style.headers {
            writeln!(
                out,
                "sweep of project {} in {}: asking the operator to run its own sweep (it mints and adopts, this plugin does not)",
                self.project, self.namespace
            )?;
        }
        let mut table = Table::new(&[("kind", false), ("name", false), ("asked", false), ("why", false)]);
        for t in &self.triggers {
            let (asked, paint, why) = match (&t.line.decision, t.outcome.as_str()) {
                (Decision::Refuse { cause, fix }, _) => {
                    ("refused".to_string(), Paint::Yellow, format!("{cause}; {fix}"))
                }
                (Decision::Trigger { why, .. }, "failed") => {
                    (format!("NOT cleared: status.{STAMP}"), Paint::Yellow, t.error.clone().unwrap_or(why.clone()))
                }
                (Decision::Trigger { was: Some(was), why, .. }, _) => {
                    (format!("cleared status.{STAMP} (was {was})"), Paint::Green, why.clone())
                }
                (Decision::Trigger { why, .. }, _) => {
                    (format!("nothing: status.{STAMP} unset"), Paint::Green, why.clone())
                }
            };
            table.row(vec![
                t.line.kind.as_str().into(),
                t.line.name.as_str().into(),
                Cell::painted(asked, paint),
                Cell::painted(why, Paint::Dim),
            ]);
        }
        out.write_all(table.render(style).as_bytes())?;
        for n in &self.next {
            writeln!(out, "{n}")?;
        }
        Ok(())
    }
}

/// `sweep --apply`: clear the stamps [`trigger::decide`] says to, through
/// the status subresource, Repositories before the Project.
async fn apply(
    client: &kube::Client,
    ns: &str,
    project: &Project,
    repos: &[Repository],
    args: &Args,
    colour: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut result = TriggerResult {
        project: project.name().to_string(),
        namespace: ns.to_string(),
        apply: true,
        ..Default::default()
    };
    let mut failures: Vec<CliError> = Vec::new();
    // The operator's gates, each (cause; fix) once: a Project gate refuses every line.
    let mut refusals: Vec<String> = Vec::new();
    for line in trigger::decide(project, repos) {
        let (outcome, error) = match &line.decision {
            Decision::Refuse { cause, fix } => {
                let refusal = format!("{cause}; {fix}");
                if !refusals.contains(&refusal) {
                    refusals.push(refusal);
                }
                ("refused", None)
            }
            Decision::Trigger { clear, .. } if clear.is_empty() => ("alreadyClear", None),
            Decision::Trigger { .. } => match clear_stamp(client, ns, line.kind, &line.name).await {
                Ok(()) => ("cleared", None),
                Err(e) => {
                    let message = e.message().to_string();
                    failures.push(e);
                    ("failed", Some(message))
                }
            },
        };
        result.triggers.push(TriggerLine { line, outcome: outcome.into(), error });
    }
    // A Repository is due once its own stamp is gone and the Project's is
    // too (its base falls back to the Project's creation); the Project's
    // write wakes the reconcile, and the Project requeues itself every 30 s
    // anyway (project_controller.go:56).
    let project_done = result.triggers.last().is_some_and(|t| matches!(t.outcome.as_str(), "cleared" | "alreadyClear"));
    if project_done {
        for t in result.triggers.iter().filter(|t| t.line.kind == Kind::Repository) {
            if matches!(t.outcome.as_str(), "cleared" | "alreadyClear") {
                result.next.push(format!(
                    "the operator sweeps repository {} of project {} on its next scan tick (within about 30 s), \
                     minting and adopting under its own budgets; kubectl get project {} -o \
                     jsonpath='{{.status.{STAMP}}}' shows the pass's new stamp",
                    t.line.name,
                    project.name(),
                    project.name()
                ));
            }
        }
    }
    common::print(&args.output, colour, &result, out)?;
    if !refusals.is_empty() {
        return Err(CliError::new(format!(
            "the tatara operator will not sweep project {:?}, so nothing was asked of it: {}",
            project.name(),
            refusals.join("; ")
        )));
    }
    if let Some(first) = failures.first() {
        let not: Vec<String> = result
            .triggers
            .iter()
            .filter(|t| t.outcome == "failed")
            .map(|t| format!("{}/{}", t.line.kind.as_str().to_lowercase(), t.line.name))
            .collect();
        return Err(CliError::new(format!(
            "could not clear status.{STAMP} on {}, so the operator may not sweep those on its next tick; the first \
             failure: {}",
            not.join(", "),
            first.message()
        ))
        .with_code(first.code()));
    }
    Ok(())
}

/// A merge patch of the status subresource that removes the stamp (a JSON
/// merge patch deletes a key set to null).
async fn clear_stamp(client: &kube::Client, ns: &str, kind: Kind, name: &str) -> Result<(), CliError> {
    let patch = Patch::Merge(serde_json::json!({"status": {STAMP: null}}));
    let pp = PatchParams::default();
    let (resource, r) = match kind {
        Kind::Project => (
            "projects.tatara.dev",
            Api::<Project>::namespaced(client.clone(), ns).patch_status(name, &pp, &patch).await.map(|_| ()),
        ),
        Kind::Repository => (
            "repositories.tatara.dev",
            Api::<Repository>::namespaced(client.clone(), ns).patch_status(name, &pp, &patch).await.map(|_| ()),
        ),
    };
    r.map_err(|e| common::api_failure(Call { verb: "patch status", resource, name, namespace: ns }, &e))
}
