//! `kubectl tatara takeover REPO!NUMBER`: a maintainer hands an external
//! merge request back to tatara by asking the operator, which does the whole
//! takeover itself (`POST /projects/{p}/scm/mr-takeover`,
//! `internal/restapi/takeover.go` at d22349a: its checks, the takeover Task's
//! mint or un-park, the controller hand-over, the ownership stamp). The
//! plugin writes nothing to the cluster: it reads the Repository, Project and
//! MergeRequest mirror, finds (or, only when there is none, posts) the
//! caller's take-over comment, waits for the operator to mirror it, and sends
//! the four keys the endpoint reads. The operator's answer is printed as it
//! gave it.

use std::io::Write;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Api;
use rules::ownership::naming::{merge_request_key, parse_key};
use rules::ownership::takeover::{
    DEFAULT_COMMENT, ForgeComment, Refusal, Step, TakeoverRequest, is_takeover_comment, mirrored_comments, next_step,
};
use rules::ownership::types::{MergeRequest, Project, Repository};
use runtime::ownership::forge::{ForgeArgs, GitHub, RepoCoords, repo_coords};
use runtime::ownership::operator::{self, Operator, OperatorArgs};
use serde::Serialize;

use crate::common::{self, Call, CliError, Human, KubeArgs, Offers, OutputArgs, Style, exit_code};

/// How long a call to the operator may take when `--request-timeout` is
/// not given.
const OPERATOR_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the mirror is read while waiting for the comment.
const MIRROR_POLL: Duration = Duration::from_millis(250);

/// The flags of `kubectl tatara takeover`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Examples:\n  GITHUB_TOKEN=... TATARA_TOKEN=... \\\n    \
                  TATARA_OPERATOR_URL=https://tatara.example.com/api/v1/operator \\\n    \
                  kubectl tatara takeover 'tatara-operator!9' -n tatara\n\n\
                  TATARA_TOKEN is an OIDC access token for the operator (else the one `tatara login` stored). \
                  Quote REPO!NUMBER: an unquoted ! is history expansion in an interactive shell.\n\n\
                  The operator does the takeover; this command writes nothing to the cluster. It asks with your \
                  latest take-over comment on the pull request as the operator mirrored it, and posts one (as \
                  you, through GITHUB_TOKEN) only when you have none; a retry never posts another.\n\n\
                  Exit status: 0 when the operator accepted (or had nothing to do), 4 when it (or the caller's \
                  token) was refused, 1 for its other refusals (409: the reason is printed), 5 when it did not \
                  answer or did not mirror the comment in time; see kubectl tatara --help for every code.")]
pub struct Args {
    /// The merge request, by its natural key: the Repository CR's name, !,
    /// and the pull request number (tatara-operator!9; REPO#NUMBER is
    /// accepted too).
    #[arg(value_name = "REPO!NUMBER")]
    pub target: String,
    /// The Project the merge request belongs to; default: the Repository's
    /// spec.projectRef.
    #[arg(long, value_name = "PROJECT")]
    pub project: Option<String>,
    /// The take-over comment to post when you have none on the pull request
    /// (it must ask to take over: "take over" in its words).
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    /// How long to wait for the operator to mirror the comment before asking.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = common::connection::parse_request_timeout)]
    pub mirror_timeout: Duration,
    #[command(flatten)]
    pub operator: OperatorArgs,
    #[command(flatten)]
    pub forge: ForgeArgs,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub output: OutputArgs<false, false>,
}

/// The comment the request names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommentUsed {
    pub external_id: String,
    /// Posted by this run (else found on the pull request).
    pub posted: bool,
}

/// What `takeover` prints.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TakeoverResult {
    /// `REPO!NUMBER`.
    pub key: String,
    pub merge_request: String,
    pub project: String,
    /// The caller's forge login.
    pub caller: String,
    pub comment: CommentUsed,
    /// The operator's REST base the request went to.
    pub operator: String,
    /// The body sent: the four keys the endpoint reads.
    pub request: Option<TakeoverRequest>,
    /// The operator's HTTP status and JSON answer, as it gave them.
    pub status: u16,
    pub answer: serde_json::Value,
    /// The Task the operator named: the takeover Task, or the caller Task
    /// when the merge request was already tatara's and nothing changed.
    pub task: String,
}

fn operator_failure(e: operator::OperatorError) -> CliError {
    use operator::OperatorError as E;
    let code = match &e {
        E::NoBaseUrl { .. } | E::BadUrl { .. } | E::NoToken { .. } => exit_code::USAGE,
        E::Expired { .. } | E::BadStore { .. } | E::Refused { status: 401 | 403, .. } => exit_code::FORBIDDEN,
        E::Refused { status: 404, .. } => exit_code::NOT_FOUND,
        E::Unreachable { .. } => exit_code::UNREACHABLE,
        E::Refused { .. } | E::Answer { .. } => exit_code::FAILURE,
    };
    CliError::new(e.to_string()).with_code(code)
}

fn refusal(r: Refusal) -> CliError {
    let code = match r {
        Refusal::BotIdentity { .. } | Refusal::NotMaintainer { .. } => exit_code::FORBIDDEN,
        Refusal::NoController { .. } | Refusal::NotOpen { .. } => exit_code::FAILURE,
    };
    CliError::new(r.to_string()).with_code(code)
}

/// The MergeRequest mirror of `repo!number`, found by its natural key.
async fn read_mirror(client: &kube::Client, ns: &str, repo: &str, number: i64) -> Result<MergeRequest, CliError> {
    let list = Api::<MergeRequest>::namespaced(client.clone(), ns).list(&Default::default()).await.map_err(|e| {
        common::api_failure(Call { verb: "list", resource: "mergerequests.tatara.dev", name: "", namespace: ns }, &e)
    })?;
    list.items.into_iter().find(|m| m.spec.repository_ref == repo && m.spec.number == number).ok_or_else(|| {
        CliError::new(format!(
            "no MergeRequest mirror of {} in namespace {ns:?}: the operator has not mirrored this pull request \
             (yet); check REPO (a Repository CR's name) and the number",
            merge_request_key(repo, number)
        ))
        .with_code(exit_code::NOT_FOUND)
    })
}

/// Reads the mirror until it holds comment `id`, for at most `timeout`.
async fn wait_for_mirror(
    client: &kube::Client,
    ns: &str,
    mr: &MergeRequest,
    id: &str,
    timeout: Duration,
) -> Result<MergeRequest, CliError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let fresh = read_mirror(client, ns, &mr.spec.repository_ref, mr.spec.number).await?;
        if mirrored_comments(&fresh).iter().any(|c| c.external_id == id) {
            return Ok(fresh);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(CliError::new(format!(
                "the operator has not mirrored your take-over comment {id} on {} into {} within {}, so \
                 the operator was not asked; run the same command again later (it reuses this comment and posts \
                 no other), or give it longer with --mirror-timeout",
                mr.key(),
                mr.name(),
                common::connection::humanize(timeout)
            ))
            .with_code(exit_code::UNREACHABLE));
        }
        tokio::time::sleep(MIRROR_POLL).await;
    }
}

/// Runs `kubectl tatara takeover`.
pub async fn run(args: &Args, colour: bool, out: &mut dyn Write) -> Result<(), CliError> {
    args.output.check("takeover", Offers::default())?;
    let (repo_ref, number) = parse_key(&args.target).map_err(CliError::usage)?;
    let key = merge_request_key(&repo_ref, number);
    if let Some(m) = args.message.as_deref().filter(|m| !is_takeover_comment(m)) {
        return Err(CliError::usage(format!(
            "--message {m:?} does not ask to take over: word it with \"take over\", so the operator's agent \
             reads it as one and a retry finds it"
        )));
    }
    // Where and as whom to ask, before anything else is read or written.
    let base = operator::resolve_base_url(&args.operator).map_err(operator_failure)?;
    let token = operator::resolve_token(Timestamp::now()).map_err(operator_failure)?;
    let timeout = Some(args.kube.request_timeout).filter(|t| !t.is_zero()).unwrap_or(OPERATOR_TIMEOUT);
    let operator = Operator::new(base, token, timeout).map_err(operator_failure)?;

    let target = args.kube.client().await?;
    let (client, ns) = (target.client.clone(), target.namespace.clone());
    let repo: Repository = Api::namespaced(client.clone(), &ns).get(&repo_ref).await.map_err(|e| match e {
        kube::Error::Api(s) if s.code == 404 => CliError::new(format!(
            "no Repository {repo_ref:?} in namespace {ns:?}; REPO in REPO!NUMBER is the Repository CR's name \
             (`kubectl get repositories -n {ns}`)"
        ))
        .with_code(exit_code::NOT_FOUND),
        e => common::api_failure(
            Call { verb: "get", resource: "repositories.tatara.dev", name: &repo_ref, namespace: &ns },
            &e,
        ),
    })?;
    let project_name = args.project.clone().unwrap_or_else(|| repo.spec.project_ref.clone());
    if repo.spec.project_ref != project_name {
        return Err(CliError::usage(format!(
            "Repository {repo_ref:?} belongs to project {:?}, not {project_name:?}; drop --project or name its own",
            repo.spec.project_ref
        )));
    }
    let project: Project = super::get_project(&client, &ns, &project_name).await?;
    let mut mr = read_mirror(&client, &ns, &repo_ref, number).await?;

    let mut gh = GitHub::with_timeouts(&args.forge, args.kube.forge_timeouts())?;
    let coords: RepoCoords = repo_coords(&project, &repo).ok_or_else(|| {
        CliError::new(format!("Repository {ns}/{repo_ref} has no forge coordinates: set its spec.url"))
    })?;
    gh.register(&repo_ref, coords.clone());
    let login = gh.current_login().await?;

    let mut comment = CommentUsed::default();
    let mut step = next_step(&project, Some(&repo), &mr, &login, &[]).map_err(refusal)?;
    if !matches!(step, Step::Ask(_)) {
        // Not mirrored: the caller's comment may still be on its way (a run
        // that posted and then failed), so the pull request is read first.
        let forge_comments: Vec<ForgeComment> = gh
            .comments(&coords, number)
            .await?
            .into_iter()
            .map(|(id, author, body)| ForgeComment { id, author, body })
            .collect();
        step = next_step(&project, Some(&repo), &mr, &login, &forge_comments).map_err(refusal)?;
    }
    let wait_for = match &step {
        Step::Ask(r) => {
            comment.external_id = r.comment_external_id.clone();
            None
        }
        Step::Wait { external_id } => Some(external_id.clone()),
        Step::Post => {
            let body = args.message.clone().unwrap_or_else(|| DEFAULT_COMMENT.to_string());
            let id = gh.post_comment(&coords, number, &body).await?;
            comment.posted = true;
            Some(id)
        }
    };
    if let Some(id) = wait_for {
        mr = wait_for_mirror(&client, &ns, &mr, &id, args.mirror_timeout).await?;
        comment.external_id = id.clone();
        step = next_step(&project, Some(&repo), &mr, &login, &[]).map_err(refusal)?;
    }
    let Step::Ask(mut request) = step else {
        return Err(CliError::new(format!("{key}: the mirror holds the comment but the takeover cannot be asked")));
    };
    // Ask with the comment just found or posted, not an older one.
    request.comment_external_id = comment.external_id.clone();
    let answer = operator.mr_takeover(&project_name, &request).await.map_err(operator_failure)?;
    let task = answer.body.get("task").and_then(|t| t.as_str()).unwrap_or_default().to_string();
    let result = TakeoverResult {
        key,
        merge_request: mr.name().to_string(),
        project: project_name,
        caller: login,
        comment,
        operator: operator.base().to_string(),
        request: Some(request),
        status: answer.status,
        answer: answer.body,
        task,
    };
    common::print(&args.output, colour, &result, out)
}

impl Human for TakeoverResult {
    fn render(&self, _style: &Style, out: &mut dyn Write) -> std::io::Result<()> {
        let r = self;
        writeln!(out, "takeover of {} ({}) asked of the tatara operator by {}", r.key, r.merge_request, r.caller)?;
        let how = if r.comment.posted { "posted now, mirrored by the operator" } else { "yours, already posted" };
        writeln!(out, "  take-over comment {}: {how}", r.comment.external_id)?;
        let asked_as = r.request.as_ref().map(|q| q.task.as_str()).unwrap_or("-");
        writeln!(out, "  asked {} as {asked_as} (the mirror's controller): HTTP {}", r.operator, r.status)?;
        if r.task == asked_as {
            writeln!(out, "  already tatara's: the operator changed nothing")?;
        } else {
            writeln!(out, "  takeover Task: {}", r.task)?;
        }
        Ok(())
    }
}
