//! `kubectl tatara sweep --project P [--apply]`: one sweep pass ("The
//! sweep"). Open issues and pull requests come from the forge; the orphan
//! predicate is answered by the `<repositoryRef>#<number>` index over the
//! Issue CRs; each orphan gets its mint stage (triaging, or
//! parked(backlog-sweep)); both creation budgets bound the pass; every pull
//! request gets one of the four dispositions. Every line says why. With
//! `--apply` each planned mint runs as `mintTaskForIssue`: create the Task,
//! then adopt the existing mirror or create it, recomputed from fresh reads.
//! The pull-request dispositions are applied the same way: an adoption
//! appends to the owning Task's `mrRefs` and mirrors the pull request owned
//! by it; a review mint goes through the issue mints' budget.

use std::io::Write;

use rules::ownership::decision::Artifact;
use rules::ownership::naming::review_task_name;
use rules::ownership::sweep::{
    CapHit, DispositionCounts, ForgeIssue, ForgePullRequest, IssueKeyIndex, IssueLine, MintOutcome, MintSource,
    MintStage, PrDecision, PrDisposition, decide, decide_adopt, decide_review, live_task_names, mint_outcome,
    mint_stage_for, orphan, plan_lines, plan_mints, pr_disposition, review_lines, review_verdict,
};
use runtime::ownership::executor::Executor;
use serde::Serialize;

use crate::common::{self, Cell, CliError, Human, KubeArgs, Offers, OutputArgs, Paint, Style, Table};
use runtime::ownership::forge::{ForgeArgs, GitHub, repo_coords};

/// The flags of `kubectl tatara sweep`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Examples:\n  GITHUB_TOKEN=... kubectl tatara sweep --project tatara -n tatara\n  \
                  kubectl tatara sweep --project tatara --apply -o json --forge-url https://ghe.example.com/api/v3")]
pub struct Args {
    /// The Project whose Repositories are swept.
    #[arg(long, value_name = "PROJECT")]
    pub project: String,
    /// Mint the planned Tasks and adopt the adoptable pull requests;
    /// without it the plan is only printed.
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
    /// With `--apply`: `adopted`, `minted`, `completed` (another writer
    /// minted the review Task; this pass finished its mirror), or
    /// `nothingToDo` (`why` says what a fresh read found).
    pub outcome: Option<String>,
    /// With `--apply`: the writes, each with its why.
    pub writes: Vec<String>,
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
            outcome: None,
            writes: vec![],
        }
    }
}

/// One mint `--apply` carried out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MintLine {
    pub key: String,
    pub task: String,
    /// The writes, each with its why.
    pub steps: Vec<String>,
}

/// What `sweep` prints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepResult {
    pub project: String,
    pub namespace: String,
    pub apply: bool,
    pub max_new_tasks_per_sweep: u64,
    pub max_open_tasks: u64,
    /// ACTIVE Tasks of the project before the pass.
    pub active_tasks: usize,
    pub issues: Vec<IssueLine>,
    pub pull_requests: Vec<PullLine>,
    /// How many open pull requests got each disposition.
    pub pull_request_counts: DispositionCounts,
    pub cap_hits: Vec<CapHit>,
    /// Planned mints this pass carried out (it created the Task).
    pub minted: Vec<MintLine>,
    /// Planned mints another writer had started (the Task existed) that this
    /// pass finished, e.g. by creating or adopting the Issue mirror.
    pub completed: Vec<MintLine>,
    /// Planned mints `--apply` found nothing to do for, with why.
    pub not_minted: Vec<IssueLine>,
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
        if r.apply {
            let reviews = r.pull_requests.iter().filter(|p| p.outcome.as_deref() == Some("minted")).count();
            writeln!(out, "minted {} Task(s):", r.minted.len() + reviews)?;
            for l in &r.not_minted {
                writeln!(out, "  {} not minted: {}", l.key, l.why)?;
            }
            let finished = ": another writer minted the Task; this pass finished it";
            for (m, note) in r.minted.iter().map(|m| (m, "")).chain(r.completed.iter().map(|m| (m, finished))) {
                writeln!(out, "  {} -> {}{note}", m.key, m.task)?;
                for s in &m.steps {
                    writeln!(out, "      {s}")?;
                }
            }
            for p in r.pull_requests.iter().filter(|p| p.outcome.is_some()) {
                let outcome = p.outcome.as_deref().unwrap_or_default();
                if p.writes.is_empty() {
                    writeln!(out, "  {} not written: {}", p.key, p.why)?;
                    continue;
                }
                writeln!(out, "  {} -> {}: {outcome}", p.key, p.task.as_deref().unwrap_or_default())?;
                for s in &p.writes {
                    writeln!(out, "      {s}")?;
                }
            }
        } else if style.headers
            && (r.issues.iter().any(|l| l.decision == "mint")
                || r.pull_requests.iter().any(|p| p.decision == "mint" || p.decision == "adopt"))
        {
            writeln!(out, "(plan only: run again with --apply to mint these Tasks and adopt these pull requests)")?;
        }
        Ok(())
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
        apply: args.apply,
        max_new_tasks_per_sweep: project.spec.max_new_tasks_per_sweep(),
        max_open_tasks: project.spec.max_open_tasks(),
        // "ACTIVE = stage NOT IN (parked, delivered, rejected, failed)"
        active_tasks: snap.tasks.iter().filter(|t| t.spec.project_ref == args.project && t.is_active()).count(),
        ..Default::default()
    };
    // Issue orphans and review mints share the budgets, in forge order:
    // per repository, its issues, then its pull requests.
    let mut orphans: Vec<(MintSource, MintStage)> = Vec::new();
    // Pull requests to adopt: (index in result.pull_requests, the PR).
    let mut adopts: Vec<(usize, ForgePullRequest)> = Vec::new();
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
                            adopts.push((result.pull_requests.len(), pr));
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
        tracing::warn!(project = %args.project, cap = %hit.cap, why = %hit.why, "sweep mint cap hit");
    }
    result.issues.extend(plan_lines(&plan));
    for l in review_lines(&plan) {
        if let Some(p) = result.pull_requests.iter_mut().find(|p| p.key == l.key) {
            (p.decision, p.stage, p.why) = (l.decision, l.stage, l.why);
        }
    }
    result.cap_hits = plan.cap_hits.clone();

    if args.apply {
        for (source, stage) in &plan.mint {
            let repo = repos.iter().find(|r| r.name() == source.repository_ref());
            let key = source.key();
            // The last decision's why: what the final fresh read found.
            let mut why = String::new();
            let report = exec
                .converge(&format!("mint for {key}"), Some(&gh), |snap| {
                    Ok(match source {
                        MintSource::Issue(issue) => decide(snap, &project, repo, &ns, issue, *stage),
                        MintSource::Review(pr) => {
                            let d = decide_review(snap, &project, repo, &ns, pr, *stage);
                            why = d.why().to_string();
                            d.into_actions()
                        }
                    })
                })
                .await
                .map_err(|e| common::executor_failure(e, &ns))?;
            let steps: Vec<String> = report.applied.iter().map(|a| a.why().to_string()).collect();
            let outcome = mint_outcome(&report.applied);
            if let MintSource::Review(_) = source {
                if let Some(p) = result.pull_requests.iter_mut().find(|p| p.key == key) {
                    let label = match &outcome {
                        MintOutcome::Minted { .. } => "minted",
                        MintOutcome::Completed { .. } => "completed",
                        MintOutcome::NothingToDo => {
                            p.why = why;
                            "nothingToDo"
                        }
                    };
                    p.outcome = Some(label.into());
                    p.writes = steps;
                }
                continue;
            }
            match outcome {
                MintOutcome::Minted { task } => result.minted.push(MintLine { key, task, steps }),
                MintOutcome::Completed { task } => result.completed.push(MintLine { key, task, steps }),
                MintOutcome::NothingToDo => result.not_minted.push(IssueLine {
                    key,
                    decision: "skip".into(),
                    stage: None,
                    why: MintOutcome::NOTHING_TO_DO_WHY.into(),
                }),
            }
        }
        for (i, pr) in &adopts {
            let repo = repos.iter().find(|r| r.name() == pr.repository_ref);
            let mut why = String::new();
            let report = exec
                .converge(&format!("adoption of {}", pr.key()), Some(&gh), |snap| {
                    let d = decide_adopt(snap, &project, repo, pr);
                    why = d.why().to_string();
                    Ok(d.into_actions())
                })
                .await
                .map_err(|e| common::executor_failure(e, &ns))?;
            let line = &mut result.pull_requests[*i];
            line.writes = report.applied.iter().map(|a| a.why().to_string()).collect();
            line.outcome = Some(if report.applied.is_empty() { "nothingToDo" } else { "adopted" }.into());
            if report.applied.is_empty() {
                line.why = why;
            }
        }
    }
    common::print(&args.output, colour, &result, out)
}
