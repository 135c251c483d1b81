//! `kubectl tatara takeover REPO#NUMBER --project P`: a maintainer hands an
//! external merge request back to tatara ("Flipping ownership back:
//! maintainer comment"). The caller's forge identity (the token's owner) is
//! checked against the effective maintainer set (Project/Repository
//! `maintainerLogins`, closed by default). A non-maintainer gets the spec's
//! 403 text and nothing changes on either side. A maintainer's takeover posts
//! the take-over comment on the pull request, stamps the MergeRequest's
//! `ownership: tatara` / `takeover-requested-by:<login>` with
//! `lastBotHeadSHA` = the live head, and mints or un-parks the one takeover
//! Task (`MintOrUnparkTakeoverTask`).

use std::io::Write;

use rules::Error;
use rules::ownership::decision::{Action, Snapshot};
use rules::ownership::merge_request::{TAKEOVER_REQUESTED_BY, TATARA};
use rules::ownership::naming::{natural_key, takeover_task_name};
use rules::ownership::takeover::{TakeoverPlan, TakeoverTask, takeover};
use rules::ownership::types::{MergeRequest, Project, Repository};
use runtime::ownership::executor::Executor;
use serde::Serialize;

use crate::common::{self, CliError, Human, KubeArgs, Offers, OutputArgs, Style};
use runtime::ownership::forge::{ForgeArgs, GitHub, repo_coords};

/// Exit code of a refused takeover (the caller is not a maintainer).
pub const EXIT_REFUSED: u8 = common::exit_code::FORBIDDEN;

/// The flags of `kubectl tatara takeover`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Examples:\n  GITHUB_TOKEN=... kubectl tatara takeover tatara-operator#9 --project tatara -n tatara\n\n\
                  Exit status: 0 on success (or when already taken over at the live head), 4 when the caller \
                  is not a maintainer (nothing changed); see kubectl tatara --help for every code."
)]
pub struct Args {
    /// The merge request, by its natural key: the Repository CR's name, #,
    /// and the pull request number (e.g. tatara-operator#9).
    #[arg(value_name = "REPO#NUMBER")]
    pub target: String,
    /// The Project the merge request belongs to (its maintainer set decides).
    #[arg(long, value_name = "PROJECT")]
    pub project: String,
    /// The take-over comment posted on the pull request as the caller.
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    #[command(flatten)]
    pub forge: ForgeArgs,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub output: OutputArgs<false, false>,
}

/// What `takeover` prints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TakeoverResult {
    pub key: String,
    pub merge_request: String,
    /// The caller's forge login.
    pub caller: String,
    pub live_head_sha: String,
    /// The comment posted on the pull request (none when already taken over).
    pub comment: Option<String>,
    pub ownership: String,
    pub ownership_reason: String,
    /// The takeover Task and what happened to it (`mint`, `unpark`, `leave`).
    pub task: String,
    pub task_step: String,
    /// The writes, each with its why.
    pub steps: Vec<String>,
}

/// Parse `REPO#NUMBER`.
pub fn parse_target(target: &str) -> Result<(String, i64), String> {
    let (repo, number) =
        target.rsplit_once('#').ok_or_else(|| format!("{target:?} is not REPO#NUMBER (e.g. tatara-operator#9)"))?;
    let number: i64 =
        number.parse().ok().filter(|n| *n > 0).ok_or_else(|| format!("{target:?}: {number:?} is not a PR number"))?;
    if repo.is_empty() {
        return Err(format!("{target:?}: the repository (a Repository CR's name) is missing before #"));
    }
    Ok((repo.to_string(), number))
}

fn find_mr<'a>(snap: &'a Snapshot, repo: &str, number: i64) -> Option<&'a MergeRequest> {
    // By natural key, never by a hashed name.
    snap.merge_requests.iter().find(|m| m.spec.repository_ref == repo && m.spec.number == number)
}

/// The takeover as remaining steps over a fresh snapshot: the ownership
/// stamp unless it already says exactly this, then the task step. Empty
/// once both hold, so the executor's recompute-on-409 loop ends.
pub fn remaining(
    snap: &Snapshot,
    project: &Project,
    repo: &Repository,
    number: i64,
    login: &str,
    live_head: &str,
) -> Result<(TakeoverPlan, Vec<Action>), Error> {
    let mr = find_mr(snap, repo.name(), number).ok_or_else(|| Error::Refused {
        status: 404,
        message: format!(
            "no MergeRequest mirror with key {}; the operator has not mirrored this pull request yet",
            natural_key(repo.name(), number)
        ),
    })?;
    let existing = snap.task(&takeover_task_name(project.name(), repo.name(), number));
    let plan = takeover(project, Some(repo), mr, login, live_head, existing)
        .map_err(|r| Error::Refused { status: r.status, message: r.body })?;
    let st = mr.status.clone().unwrap_or_default();
    let stamped = st.ownership.as_deref() == Some(TATARA)
        && st.ownership_reason == plan.ownership.reason
        && st.last_bot_head_sha.as_deref() == Some(live_head);
    let actions =
        plan.actions(mr).into_iter().filter(|a| !(stamped && matches!(a, Action::SetMergeRequestOwnership { .. })));
    Ok((plan.clone(), actions.collect()))
}

/// Runs `kubectl tatara takeover`.
pub async fn run(args: &Args, colour: bool, out: &mut dyn Write) -> Result<(), CliError> {
    args.output.check("takeover", Offers::default())?;
    let (repo_ref, number) = parse_target(&args.target).map_err(CliError::usage)?;
    let key = natural_key(&repo_ref, number);
    let target = args.kube.client().await?;
    let ns = target.namespace.clone();
    let project = super::get_project(&target.client, &ns, &args.project).await?;
    let repo = super::project_repositories(&target.client, &ns, &args.project)
        .await?
        .into_iter()
        .find(|r| r.name() == repo_ref)
        .ok_or_else(|| {
            CliError::new(format!(
                "no Repository {repo_ref:?} of project {:?} in namespace {ns:?}; REPO is the Repository CR's name",
                args.project
            ))
        })?;
    let coords = repo_coords(&project, &repo).ok_or_else(|| {
        CliError::new(format!("Repository {ns}/{repo_ref} has no forge coordinates: set its spec.url"))
    })?;
    let mut gh = GitHub::with_timeouts(&args.forge, args.kube.forge_timeouts())?;
    gh.register(&repo_ref, coords.clone());
    let login = gh.current_login().await?;
    let exec = Executor::new(target.client.clone(), &ns);
    let snap = exec.snapshot().await.map_err(|e| common::executor_failure(e, &ns))?;

    // The maintainer check comes before any other forge read or any write:
    // "If the author is not a maintainer, the endpoint answers HTTP 403 ...
    // and nothing changes. No comment is posted".
    let maintainers = rules::ownership::sweep::effective_maintainers(&project, Some(&repo));
    if login.is_empty() || !maintainers.contains(&login) {
        let refusal = Error::Refused { status: 403, message: rules::ownership::takeover::REFUSAL_BODY.into() };
        return Err(CliError::new(format!("{refusal} (caller {login:?}, {key})")).with_code(EXIT_REFUSED));
    }
    let (live_head, open) = gh.pull_head(&coords, number).await?;
    if !open {
        return Err(CliError::new(format!(
            "{key} ({}#{number}) is not open on the forge; a closed pull request cannot be taken over",
            coords.full_name()
        )));
    }
    let (plan, actions) = remaining(&snap, &project, &repo, number, &login, &live_head).map_err(|e| match e {
        Error::Refused { status: 403, .. } => CliError::new(e.to_string()).with_code(EXIT_REFUSED),
        e => CliError::from(e),
    })?;
    let mr_name = find_mr(&snap, &repo_ref, number).map(|m| m.name().to_string()).unwrap_or_default();
    let (task, task_step) = match &plan.task {
        TakeoverTask::Mint { task, .. } => (task.name().to_string(), "mint"),
        TakeoverTask::Unpark { task, .. } => (task.clone(), "unpark"),
        TakeoverTask::Leave { task, .. } => (task.clone(), "leave"),
    };
    let mut result = TakeoverResult {
        key: key.clone(),
        merge_request: mr_name,
        caller: login.clone(),
        live_head_sha: live_head.clone(),
        comment: None,
        ownership: TATARA.into(),
        ownership_reason: format!("{TAKEOVER_REQUESTED_BY}{login}"),
        task,
        task_step: task_step.into(),
        steps: vec![],
    };
    if !actions.is_empty() {
        let body = args.message.clone().unwrap_or_else(|| {
            format!("Please take over this merge request: handing it back to tatara (requested by @{login}).")
        });
        gh.comment(&repo_ref, number, &body).await.map_err(|e| {
            CliError::new(format!("cannot post the take-over comment on {key}: {e}; nothing in the cluster changed"))
        })?;
        result.comment = Some(body);
        let report = exec
            .converge(&format!("takeover of {key}"), None, |snap| {
                remaining(snap, &project, &repo, number, &login, &live_head).map(|(_, a)| a).map_err(Into::into)
            })
            .await
            .map_err(|e| common::executor_failure(e, &ns))?;
        result.steps = report.applied.iter().map(|a| a.why().to_string()).collect();
    }
    common::print(&args.output, colour, &result, out)
}

impl Human for TakeoverResult {
    fn render(&self, _style: &Style, out: &mut dyn Write) -> std::io::Result<()> {
        let r = self;
        writeln!(out, "takeover of {} ({}) by {}", r.key, r.merge_request, r.caller)?;
        match &r.comment {
            Some(c) => writeln!(out, "  commented on the pull request: {c}")?,
            None => writeln!(out, "  already taken over by {} at the live head; nothing to do", r.caller)?,
        }
        writeln!(out, "  ownership: {} ({}), lastBotHeadSHA {}", r.ownership, r.ownership_reason, r.live_head_sha)?;
        writeln!(out, "  takeover Task {}: {}", r.task, r.task_step)?;
        for s in &r.steps {
            writeln!(out, "  applied: {s}")?;
        }
        Ok(())
    }
}
