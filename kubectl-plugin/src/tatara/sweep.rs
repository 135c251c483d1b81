//! `kubectl tatara sweep --project P [--apply]`: one sweep pass ("The
//! sweep"). Open issues and pull requests come from the forge; the orphan
//! predicate is answered by the `<repositoryRef>#<number>` index over the
//! Issue CRs; each orphan gets its mint stage (triaging, or
//! parked(backlog-sweep)); both creation budgets bound the pass; every pull
//! request gets one of the four dispositions. Every line says why. With
//! `--apply` each planned mint runs as `mintTaskForIssue`: create the Task,
//! then adopt the existing mirror or create it, recomputed from fresh reads.

use std::collections::BTreeSet;
use std::io::Write;

use rules::ownership::decision::Artifact;
use rules::ownership::naming::natural_key;
use rules::ownership::sweep::{
    CapHit, ForgeIssue, IssueKeyIndex, IssueLine, MintOutcome, MintStage, PrDisposition, decide, mint_outcome,
    mint_stage_for, orphan, plan_lines, plan_mints, pr_disposition,
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
    /// Mint the planned Tasks; without it the plan is only printed.
    #[arg(long)]
    pub apply: bool,
    #[command(flatten)]
    pub forge: ForgeArgs,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The disposition of one open pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PullLine {
    pub key: String,
    pub author: String,
    pub head_branch: String,
    pub disposition: PrDisposition,
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
            let decision = match l.decision.as_str() {
                "mint" => Cell::painted("mint", Paint::Green),
                "deferred" => Cell::painted("deferred", Paint::Yellow),
                other => Cell::from(other),
            };
            issues.row(vec![
                l.key.as_str().into(),
                decision,
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
            ("why", false),
        ]);
        for p in &r.pull_requests {
            let (d, why) = match &p.disposition {
                PrDisposition::Adopt { task, why } => (format!("adopt into {task}"), why),
                PrDisposition::IgnoreBot { why } => ("ignore (bot)".into(), why),
                PrDisposition::Review { why } => ("review".into(), why),
                PrDisposition::Ignore { why } => ("ignore".into(), why),
            };
            pulls.row(vec![
                p.key.as_str().into(),
                p.author.as_str().into(),
                p.head_branch.as_str().into(),
                d.into(),
                Cell::painted(why.clone(), Paint::Dim),
            ]);
        }
        if !pulls.is_empty() {
            out.write_all(pulls.render(style).as_bytes())?;
        }
        for c in &r.cap_hits {
            writeln!(out, "cap {} bound this pass: {}", c.cap, c.why)?;
        }
        if r.apply {
            writeln!(out, "minted {} Task(s):", r.minted.len())?;
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
        } else if style.headers && r.issues.iter().any(|l| l.decision == "mint") {
            writeln!(out, "(plan only: run again with --apply to mint these Tasks)")?;
        }
        Ok(())
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
    let task_names: BTreeSet<String> = snap.tasks.iter().map(|t| t.name().to_string()).collect();

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
    let mut orphans: Vec<(ForgeIssue, MintStage)> = Vec::new();
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
            orphans.push((issue, stage));
        }
        for pr in gh.open_pulls(repo.name(), &coords, &bot).await? {
            let disposition = pr_disposition(&pr, &project, Some(repo), &task_names);
            result.pull_requests.push(PullLine {
                key: natural_key(&pr.repository_ref, pr.number),
                author: pr.author.clone(),
                head_branch: pr.head_branch.clone(),
                disposition,
            });
        }
    }
    let plan = plan_mints(orphans, &project, result.active_tasks);
    for hit in &plan.cap_hits {
        tracing::warn!(project = %args.project, cap = %hit.cap, why = %hit.why, "sweep mint cap hit");
    }
    result.issues.extend(plan_lines(&plan));
    result.cap_hits = plan.cap_hits.clone();

    if args.apply {
        for (issue, stage) in &plan.mint {
            let repo = repos.iter().find(|r| r.name() == issue.repository_ref);
            let key = natural_key(&issue.repository_ref, issue.number);
            let report = exec
                .converge(&format!("mint for {key}"), Some(&gh), |snap| {
                    Ok(decide(snap, &project, repo, &ns, issue, *stage))
                })
                .await
                .map_err(|e| common::executor_failure(e, &ns))?;
            let steps = || report.applied.iter().map(|a| a.why().to_string()).collect();
            match mint_outcome(&report.applied) {
                MintOutcome::Minted { task } => result.minted.push(MintLine { key, task, steps: steps() }),
                MintOutcome::Completed { task } => result.completed.push(MintLine { key, task, steps: steps() }),
                MintOutcome::NothingToDo => result.not_minted.push(IssueLine {
                    key,
                    decision: "skip".into(),
                    stage: None,
                    why: MintOutcome::NOTHING_TO_DO_WHY.into(),
                }),
            }
        }
    }
    common::print(&args.output, colour, &result, out)
}
