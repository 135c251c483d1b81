//! The forge (GitHub, or GitHub Enterprise with `--forge-url`) through
//! octocrab: the reads `sweep` and `takeover` need (open issues and pull
//! requests with their authors and head/base repositories, an issue thread's
//! last comment, a pull request's live head, the caller's login) and the
//! executor's [`Forge`] steps (comments, labels, closing a pull request,
//! deleting a head branch).

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use octocrab::Octocrab;
use octocrab::models::issues::Issue as GhIssue;
use octocrab::models::pulls::PullRequest as GhPull;
use octocrab::params;
use rules::ownership::decision::Action;
use rules::ownership::sweep::{ForgeIssue, ForgePullRequest};
use rules::ownership::types::{Project, Repository};

use super::executor::Forge;

/// A forge (GitHub) request failed or answered something unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgeError {
    pub op: String,
    pub target: String,
    pub message: String,
    pub hint: String,
    /// Why, for a caller choosing an exit code.
    pub kind: ForgeFailure,
}

impl std::fmt::Display for ForgeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            // One sentence of its own: what is missing, then what to set.
            ForgeFailure::Setup => write!(f, "{}: {}", self.message, self.hint),
            // It names the forge and the bound first; which request it was
            // is detail.
            ForgeFailure::TimedOut => write!(f, "{}: {} on {}; {}", self.message, self.op, self.target, self.hint),
            _ => write!(f, "forge request {} on {} failed: {}; {}", self.op, self.target, self.message, self.hint),
        }
    }
}

impl std::error::Error for ForgeError {}

/// What kind of failure a [`ForgeError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForgeFailure {
    /// The request could not be made (no token, a bad URL).
    Setup,
    /// The forge answered with this HTTP status.
    Refused(u16),
    /// The forge could not be reached.
    Unreachable,
    /// The forge did not answer within the bound ([`Timeouts`]).
    TimedOut,
    /// The forge answered something unusable.
    Answer,
}

/// The flags that reach the forge.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ForgeArgs {
    /// Token for the forge API; the caller's forge identity is the token's
    /// owner.
    #[arg(long, env = "GITHUB_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    pub github_token: Option<String>,

    /// Base URL of the forge API, for GitHub Enterprise (e.g.
    /// https://ghe.example.com/api/v3).
    #[arg(long, value_name = "URL", default_value = "https://api.github.com")]
    pub forge_url: String,
}

/// Where a Repository CR lives on the forge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoCoords {
    pub owner: String,
    pub repo: String,
}

impl RepoCoords {
    /// `owner/repo`, what head/base repositories are compared by.
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.owner, self.repo)
    }
}

/// The forge coordinates of Repository `repo`: the last two path segments of
/// its `spec.url` (`https://github.com/acme/tatara-operator`), else the
/// project's `spec.scm.owner` and the Repository's name.
pub fn repo_coords(project: &Project, repo: &Repository) -> Option<RepoCoords> {
    let url = repo.spec.extra.get("url").and_then(|v| v.as_str()).unwrap_or("");
    let path = url.split_once("://").map_or(url, |(_, rest)| rest.split_once('/').map_or("", |(_, p)| p));
    let segs: Vec<&str> = path.trim_end_matches(".git").split('/').filter(|s| !s.is_empty()).collect();
    if let [.., owner, name] = segs.as_slice() {
        return Some(RepoCoords { owner: (*owner).to_string(), repo: (*name).to_string() });
    }
    let owner = project.spec.scm.extra.get("owner").and_then(|v| v.as_str()).filter(|o| !o.is_empty())?;
    Some(RepoCoords { owner: owner.to_string(), repo: repo.name().to_string() })
}

/// `d` as a flag takes it: `1s`, `1m30s`, `500ms`.
fn shown(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let (m, s) = (ms / 60_000, ms / 1000 % 60);
    match (m, s) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

/// Whether `e` is a timeout: an I/O error of kind `TimedOut` (what the
/// client's connect and read timeouts raise) anywhere in its chain.
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut) {
            return true;
        }
        cur = err.source();
    }
    crate::error_chain(e).contains("timed out")
}

fn forge_err(op: &str, target: &str, e: octocrab::Error, url: &str, timeouts: Timeouts) -> ForgeError {
    if timed_out(&e) {
        // --request-timeout sets both bounds alike; without it, the one
        // reached: the connect bound when connecting timed out, else the
        // read's.
        let bound = if crate::error_chain(&e).contains("(Connect)") { timeouts.connect } else { timeouts.read };
        return ForgeError {
            op: op.to_string(),
            target: target.to_string(),
            message: format!("the forge at {url} did not answer within {} (--request-timeout)", shown(bound)),
            hint: "check --forge-url and that the forge is reachable, or give it longer with --request-timeout".into(),
            kind: ForgeFailure::TimedOut,
        };
    }
    let kind = match &e {
        octocrab::Error::GitHub { source, .. } => ForgeFailure::Refused(source.status_code.as_u16()),
        octocrab::Error::Hyper { .. } | octocrab::Error::Service { .. } | octocrab::Error::Http { .. } => {
            ForgeFailure::Unreachable
        }
        _ => ForgeFailure::Answer,
    };
    let (message, hint) = match &e {
        octocrab::Error::GitHub { source, .. } => {
            let hint = match source.status_code.as_u16() {
                401 => "the token was refused: pass a valid one with --github-token or GITHUB_TOKEN",
                403 => "the token's owner may not do this here: check its scopes and the repository's permissions",
                404 => "check the repository coordinates (Repository spec.url) and --forge-url",
                _ => "retry; if it persists, check the forge's status",
            };
            (format!("HTTP {}: {}", source.status_code, source.message), hint)
        }
        // octocrab's own message names only the outermost wrapper
        // ("client error (SendRequest)"); the cause (a timeout, a refused
        // connection) is further down.
        _ => (crate::error_chain(&e), "check --forge-url and that the forge is reachable"),
    };
    ForgeError { op: op.to_string(), target: target.to_string(), message, hint: hint.to_string(), kind }
}

/// A forge issue or pull request number (the CRDs carry it as a signed
/// integer; a negative one names nothing and maps to 0, which the forge 404s).
fn forge_number(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A user is a bot when GitHub says so (`type: Bot`) or it is the project's bot.
fn is_human(login: &str, user_type: &str, bot_login: &str) -> bool {
    !login.is_empty() && login != bot_login && user_type != "Bot"
}

/// The forge client of one command run.
#[derive(Debug, Clone)]
pub struct GitHub {
    crab: Octocrab,
    /// `--forge-url`, as given, for messages.
    url: String,
    timeouts: Timeouts,
    /// repositoryRef -> forge coordinates, for the executor's forge steps.
    repos: BTreeMap<String, RepoCoords>,
}

/// How long a forge request may take: to connect, and for each answer (a
/// forge that accepts and never answers must not hang a command).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: std::time::Duration,
    pub read: std::time::Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self { connect: std::time::Duration::from_secs(10), read: std::time::Duration::from_secs(60) }
    }
}

impl GitHub {
    /// A client from the flags with the default [`Timeouts`].
    pub fn new(args: &ForgeArgs) -> Result<Self, ForgeError> {
        Self::with_timeouts(args, Timeouts::default())
    }

    /// A client from the flags; a token is required (every command that
    /// reaches the forge acts as, or reads, the caller's identity).
    pub fn with_timeouts(args: &ForgeArgs, timeouts: Timeouts) -> Result<Self, ForgeError> {
        let token = args.github_token.clone().filter(|t| !t.is_empty()).ok_or_else(|| ForgeError {
            op: "authenticate".into(),
            target: args.forge_url.clone(),
            message: format!("no token for the forge at {}", args.forge_url),
            hint: "set GITHUB_TOKEN, or pass --github-token".into(),
            kind: ForgeFailure::Setup,
        })?;
        let crab = Octocrab::builder()
            .personal_token(token)
            // No retries: octocrab's default retries a timed-out request, so
            // one call took several times its timeout (`--request-timeout 1s`
            // took 4 s). A call is one request, bounded by its timeouts.
            .add_retry_config(octocrab::service::middleware::retry::RetryConfig::None)
            .set_connect_timeout(Some(timeouts.connect))
            .set_read_timeout(Some(timeouts.read))
            .set_write_timeout(Some(timeouts.read))
            .base_uri(args.forge_url.as_str())
            .and_then(|b| b.build())
            .map_err(|e| forge_err("connect", &args.forge_url, e, &args.forge_url, timeouts))?;
        Ok(GitHub { crab, url: args.forge_url.clone(), timeouts, repos: BTreeMap::new() })
    }

    fn fail(&self, op: &str, target: &str, e: octocrab::Error) -> ForgeError {
        forge_err(op, target, e, &self.url, self.timeouts)
    }

    /// Remember where `repository_ref` lives, for forge steps naming it.
    pub fn register(&mut self, repository_ref: &str, coords: RepoCoords) {
        self.repos.insert(repository_ref.to_string(), coords);
    }

    fn coords(&self, repository_ref: &str) -> Result<&RepoCoords, String> {
        self.repos.get(repository_ref).ok_or_else(|| {
            format!("no forge coordinates for repository {repository_ref:?}: its Repository CR has no usable spec.url")
        })
    }

    /// The caller's login: the token's owner (`GET /user`).
    pub async fn current_login(&self) -> Result<String, ForgeError> {
        let me = self.crab.current().user().await.map_err(|e| self.fail("GET /user", "the token's owner", e))?;
        Ok(me.login)
    }

    /// Every open issue (not pull request) of a repository, following the
    /// Link header's pages.
    pub async fn open_issues(
        &self,
        repository_ref: &str,
        c: &RepoCoords,
    ) -> Result<Vec<(GhIssue, ForgeIssue)>, ForgeError> {
        let target = c.full_name();
        let first = self
            .crab
            .issues(&c.owner, &c.repo)
            .list()
            .state(params::State::Open)
            .per_page(100)
            .send()
            .await
            .map_err(|e| self.fail("list open issues", &target, e))?;
        let all = self.crab.all_pages(first).await.map_err(|e| self.fail("list open issues", &target, e))?;
        Ok(all
            .into_iter()
            // The issues endpoint lists pull requests too; they get their own
            // dispositions.
            .filter(|i| i.pull_request.is_none())
            .map(|i| {
                let f = ForgeIssue {
                    repository_ref: repository_ref.to_string(),
                    number: i.number as i64,
                    state: match i.state {
                        octocrab::models::IssueState::Open => "open".into(),
                        _ => "closed".into(),
                    },
                    author: i.user.login.clone(),
                    url: i.html_url.to_string(),
                    last_comment_human: false,
                    labels: i.labels.iter().map(|l| l.name.clone()).collect(),
                };
                (i, f)
            })
            .collect())
    }

    /// Whether the thread's last comment is human-authored: one request for
    /// the last page of one comment per page.
    pub async fn last_comment_human(
        &self,
        c: &RepoCoords,
        issue: &GhIssue,
        bot_login: &str,
    ) -> Result<bool, ForgeError> {
        if issue.comments == 0 {
            return Ok(false);
        }
        let page = self
            .crab
            .issues(&c.owner, &c.repo)
            .list_comments(issue.number)
            .per_page(1)
            .page(issue.comments)
            .send()
            .await
            .map_err(|e| self.fail("list comments", &format!("{}#{}", c.full_name(), issue.number), e))?;
        Ok(page.items.last().is_some_and(|cm| is_human(&cm.user.login, &cm.user.r#type, bot_login)))
    }

    /// Whether a pull request's conversation ends with a human comment (its
    /// review mint's stage). The pulls listing carries no comment count, so
    /// this lists the comments, following pages: one request for most threads.
    pub async fn last_pull_comment_human(
        &self,
        c: &RepoCoords,
        number: i64,
        bot_login: &str,
    ) -> Result<bool, ForgeError> {
        let all = self.all_comments(c, number).await?;
        Ok(all.last().is_some_and(|cm| is_human(&cm.user.login, &cm.user.r#type, bot_login)))
    }

    /// Every comment on issue or pull request `number`, oldest first,
    /// following pages.
    async fn all_comments(
        &self,
        c: &RepoCoords,
        number: i64,
    ) -> Result<Vec<octocrab::models::issues::Comment>, ForgeError> {
        let target = format!("{}#{number}", c.full_name());
        let first = self
            .crab
            .issues(&c.owner, &c.repo)
            .list_comments(forge_number(number))
            .per_page(100)
            .send()
            .await
            .map_err(|e| self.fail("list comments", &target, e))?;
        self.crab.all_pages(first).await.map_err(|e| self.fail("list comments", &target, e))
    }

    /// Every open pull request of a repository, following pages.
    pub async fn open_pulls(
        &self,
        repository_ref: &str,
        c: &RepoCoords,
        bot_login: &str,
    ) -> Result<Vec<ForgePullRequest>, ForgeError> {
        let target = c.full_name();
        let first = self
            .crab
            .pulls(&c.owner, &c.repo)
            .list()
            .state(params::State::Open)
            .per_page(100)
            .send()
            .await
            .map_err(|e| self.fail("list open pull requests", &target, e))?;
        let all = self.crab.all_pages(first).await.map_err(|e| self.fail("list open pull requests", &target, e))?;
        Ok(all.iter().map(|p| pull(repository_ref, c, p, bot_login)).collect())
    }

    /// A pull request's live head SHA and whether it is open.
    pub async fn pull_head(&self, c: &RepoCoords, number: i64) -> Result<(String, bool), ForgeError> {
        let target = format!("{}#{number}", c.full_name());
        let p = self
            .crab
            .pulls(&c.owner, &c.repo)
            .get(forge_number(number))
            .await
            .map_err(|e| self.fail("get pull request", &target, e))?;
        let open = matches!(p.state, Some(octocrab::models::IssueState::Open));
        Ok((p.head.sha.clone(), open))
    }

    /// Every comment on issue or pull request `number`, oldest first,
    /// following pages: the id (as the operator mirrors it, in decimal), the
    /// author's login and the body.
    pub async fn comments(&self, c: &RepoCoords, number: i64) -> Result<Vec<(String, String, String)>, ForgeError> {
        let all = self.all_comments(c, number).await?;
        Ok(all.into_iter().map(|cm| (cm.id.to_string(), cm.user.login, cm.body.unwrap_or_default())).collect())
    }

    /// Post `body` as a comment on issue or pull request `number`; the new
    /// comment's id.
    pub async fn post_comment(&self, c: &RepoCoords, number: i64, body: &str) -> Result<String, ForgeError> {
        let target = format!("{}#{number}", c.full_name());
        let cm = self
            .crab
            .issues(&c.owner, &c.repo)
            .create_comment(forge_number(number), body)
            .await
            .map_err(|e| self.fail("post comment", &target, e))?;
        Ok(cm.id.to_string())
    }

    /// Post `body` as a comment on issue or pull request `number`.
    pub async fn comment(&self, repository_ref: &str, number: i64, body: &str) -> Result<(), String> {
        let c = self.coords(repository_ref)?;
        self.crab
            .issues(&c.owner, &c.repo)
            .create_comment(forge_number(number), body)
            .await
            .map(drop)
            .map_err(|e| self.fail("post comment", &format!("{}#{number}", c.full_name()), e).to_string())
    }
}

/// A pull request as the sweep's dispositions see it.
fn pull(repository_ref: &str, c: &RepoCoords, p: &GhPull, bot_login: &str) -> ForgePullRequest {
    let author = p.user.as_ref().map(|u| u.login.clone()).unwrap_or_default();
    let body = p.body.clone().unwrap_or_default();
    ForgePullRequest {
        repository_ref: repository_ref.to_string(),
        number: p.number as i64,
        author,
        head_branch: p.head.ref_field.clone(),
        head_sha: p.head.sha.clone(),
        // Unknown head repo (a deleted fork) stays None: fails closed.
        head_repo: p.head.repo.as_ref().and_then(|r| r.full_name.clone()),
        base_repo: p.base.repo.as_ref().and_then(|r| r.full_name.clone()).unwrap_or_else(|| c.full_name()),
        labels: p.labels.iter().flatten().map(|l| l.name.clone()).collect(),
        mentions_bot: !bot_login.is_empty() && body.contains(&format!("@{bot_login}")),
        url: p.html_url.as_ref().map(|u| u.to_string()).unwrap_or_default(),
        // Read only for the pull requests a review is minted for.
        last_comment_human: false,
    }
}

impl Forge for GitHub {
    fn apply<'a>(&'a self, action: &'a Action) -> BoxFuture<'a, std::result::Result<(), String>> {
        Box::pin(async move {
            match action {
                Action::PostIssueComment { repository_ref, number, body, .. } => {
                    self.comment(repository_ref, *number, body).await
                }
                Action::StampLabel { repository_ref, number, label, .. } => {
                    let c = self.coords(repository_ref)?;
                    self.crab
                        .issues(&c.owner, &c.repo)
                        .add_labels(forge_number(*number), std::slice::from_ref(label))
                        .await
                        .map(drop)
                        .map_err(|e| self.fail("add label", &format!("{}#{number}", c.full_name()), e).to_string())
                }
                Action::CloseMergeRequest { repository_ref, number, .. } => {
                    let c = self.coords(repository_ref)?;
                    self.crab
                        .pulls(&c.owner, &c.repo)
                        .update(forge_number(*number))
                        .state(params::pulls::State::Closed)
                        .send()
                        .await
                        .map(drop)
                        .map_err(|e| {
                            self.fail("close pull request", &format!("{}#{number}", c.full_name()), e).to_string()
                        })
                }
                Action::DeleteBranch { repository_ref, branch, .. } => {
                    let c = self.coords(repository_ref)?;
                    self.crab
                        .git(&c.owner, &c.repo)
                        .delete_ref(&params::repos::Reference::Branch(branch.clone()))
                        .await
                        .map_err(|e| self.fail("delete branch", &format!("{}:{branch}", c.full_name()), e).to_string())
                }
                other => Err(format!("not a forge step: {}", other.why())),
            }
        })
    }
}
