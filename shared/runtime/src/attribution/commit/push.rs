//! Pushing: to the configured remote, retrying a rejected push after
//! fetching and replaying our commits on top of what the remote has.
//!
//! Two ways to the remote, chosen by its URL:
//! - `file://` or a bare path: objects are written into the remote's object
//!   database as one pack, and the branch is moved with a compare-and-swap
//!   under the ref lock (`git_reference_create_matching`). libgit2's own
//!   local transport moves the ref without that check, so two writers racing
//!   could lose a commit; this does not.
//! - anything else (`https://`, `ssh://`, `user@host:path`): git2's push; the
//!   server's receive-pack checks the old value the same way, and a non-fast-
//!   forward is reported as a rejection.
//!
//! Replay re-applies what our commits changed (their tree diffs). A change
//! that was a no-op when committed (deleting a file our clone did not have)
//! left no commit, so it is not replayed if another writer adds that file
//! between our fetch and our push. The design keeps one writer per branch
//! (spec: "keeping commits to one (GitProvider, branch) serialized through a
//! single writer"), where this cannot happen.

use std::cell::{Cell, RefCell};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use git2::build::TreeUpdateBuilder;
use git2::{
    Cred, CredentialType, ErrorCode, FetchOptions, FileMode, Oid, PushOptions, RemoteCallbacks, Repository, Sort,
};

use super::config::RemoteAuth;
use super::folders::entry_id;
use super::writer::{GitWriter, PushOutcome, git, make_commit, signature};
use super::{GitError as Error, Result};
use crate::backoff::Backoff;

/// Pushes of fewer commits than this copy loose objects into a local
/// remote; larger ones send one pack.
const LOOSE_PUSH_LIMIT: usize = 16;

/// Copies the objects of `commit` the remote lacks into it, each after
/// everything it refers to, so an object the remote has is always whole.
/// Commits are copied parents first, so a tree entry the parent's tree
/// holds at the same name is on the remote already: only what the commit
/// changed is looked at (a window changes a few files in a tree of
/// thousands, and checking every entry cost a system call each).
fn copy_missing(
    repo: &Repository,
    from: &git2::Odb<'_>,
    to: &git2::Odb<'_>,
    commit: Oid,
) -> std::result::Result<(), git2::Error> {
    fn copy(from: &git2::Odb<'_>, to: &git2::Odb<'_>, id: Oid) -> std::result::Result<(), git2::Error> {
        if !to.exists(id) {
            let object = from.read(id)?;
            to.write(object.kind(), object.data())?;
        }
        Ok(())
    }
    fn copy_tree(
        repo: &Repository,
        from: &git2::Odb<'_>,
        to: &git2::Odb<'_>,
        id: Oid,
        before: Option<Oid>,
    ) -> std::result::Result<(), git2::Error> {
        if before == Some(id) || to.exists(id) {
            return Ok(());
        }
        let before = before.map(|b| repo.find_tree(b)).transpose()?;
        for entry in repo.find_tree(id)?.iter() {
            let was = before.as_ref().and_then(|t| t.get_name_bytes(entry.name_bytes())).map(|e| (e.id(), e.kind()));
            if was.map(|(id, _)| id) == Some(entry.id()) {
                continue;
            }
            match entry.kind() {
                Some(git2::ObjectType::Tree) => {
                    let was_tree = was.filter(|(_, kind)| *kind == Some(git2::ObjectType::Tree)).map(|(id, _)| id);
                    copy_tree(repo, from, to, entry.id(), was_tree)?
                }
                _ => copy(from, to, entry.id())?,
            }
        }
        copy(from, to, id)
    }
    if to.exists(commit) {
        return Ok(());
    }
    let commit = repo.find_commit(commit)?;
    // A commit is on the remote only once all it reaches is: its parent's
    // tree, when the parent is there, is whole there. (Otherwise, or with
    // more than one parent, every entry is checked.)
    let before = if commit.parent_count() == 1 && to.exists(commit.parent_id(0)?) {
        Some(commit.parent(0)?.tree_id())
    } else {
        None
    };
    copy_tree(repo, from, to, commit.tree_id(), before)?;
    copy(from, to, commit.id())
}

/// One push attempt's answer.
#[derive(Debug)]
pub(super) enum Attempt {
    Pushed,
    Rejected(String),
}

/// Where the remote is.
pub(super) enum Endpoint {
    Local(PathBuf),
    Transport(String),
}

pub(super) fn endpoint(url: &str) -> Endpoint {
    if let Some(path) = url.strip_prefix("file://") {
        Endpoint::Local(PathBuf::from(path))
    } else if url.starts_with('/') || url.starts_with("./") || url.starts_with("../") {
        Endpoint::Local(PathBuf::from(url))
    } else {
        Endpoint::Transport(url.to_owned())
    }
}

/// A local remote must exist: libgit2 takes a missing path for a URL and
/// answers "unsupported URL protocol", which names the wrong cause.
fn local_exists(path: &std::path::Path, branch: &str) -> std::result::Result<(), git2::Error> {
    if path.exists() {
        return Ok(());
    }
    Err(git2::Error::from_str(&format!(
        "no repository at {}; create it with `git init --bare --initial-branch={branch} {}`",
        path.display(),
        path.display()
    )))
}

/// Why the host key check refused the server, kept because libgit2's SSH
/// transport replaces the callback's message with a generic "invalid or
/// unknown remote ssh hostkey", which names no fix.
#[derive(Default)]
struct HostKeyRefusal(RefCell<Option<String>>);

impl HostKeyRefusal {
    /// `e`, or the refusal's own message when the host key check failed.
    fn explain(&self, e: git2::Error) -> git2::Error {
        match self.0.borrow_mut().take() {
            Some(why) => git2::Error::new(ErrorCode::Certificate, git2::ErrorClass::Ssh, why),
            None => e,
        }
    }
}

/// HTTP headers the credentials add to every request: a bearer token goes
/// in `Authorization`, which libgit2's credential callback cannot send.
fn auth_headers(auth: &RemoteAuth) -> Vec<String> {
    match auth {
        RemoteAuth::Bearer { token } => vec![format!("Authorization: Bearer {token}")],
        _ => Vec::new(),
    }
}

/// Credentials for git2, giving up after a few refusals (libgit2 asks again
/// on every failure and would otherwise loop).
fn callbacks<'a>(
    auth: &'a RemoteAuth,
    tries: &'a Cell<u32>,
    refusal: &'a HostKeyRefusal,
    url: &str,
) -> RemoteCallbacks<'a> {
    let mut cb = RemoteCallbacks::new();
    cb.credentials(move |url, username_from_url, allowed| {
        tries.set(tries.get() + 1);
        if tries.get() > 3 {
            return Err(git2::Error::from_str(&format!(
                "the remote {url} refused our credentials; check the configured token or key"
            )));
        }
        match auth {
            RemoteAuth::Token { username, token } if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) => {
                Cred::userpass_plaintext(username, token)
            }
            RemoteAuth::SshKey { username, private_key, passphrase } if allowed.contains(CredentialType::SSH_KEY) => {
                Cred::ssh_key(username_from_url.unwrap_or(username), None, private_key, passphrase.as_deref())
            }
            RemoteAuth::SshAgent { username } if allowed.contains(CredentialType::SSH_KEY) => {
                Cred::ssh_key_from_agent(username_from_url.unwrap_or(username))
            }
            RemoteAuth::SshKeyInMemory { username, private_key, passphrase, .. }
                if allowed.contains(CredentialType::SSH_KEY) =>
            {
                Cred::ssh_key_from_memory(
                    username_from_url.unwrap_or(username),
                    None,
                    private_key,
                    passphrase.as_deref(),
                )
            }
            _ if allowed.contains(CredentialType::USERNAME) => Cred::username(username_from_url.unwrap_or("git")),
            _ => Err(git2::Error::from_str(&format!(
                "the remote {url} wants credentials ({allowed:?}) the configuration does not provide"
            ))),
        }
    });
    if let RemoteAuth::SshKeyInMemory { known_hosts, .. } = auth {
        // Fail closed: a host key not in known_hosts is never trusted.
        let port = super::known_hosts::ssh_port(url);
        cb.certificate_check(move |cert, host| {
            let Some(hostkey) = cert.as_hostkey().and_then(|k| k.hostkey()) else {
                return Err(git2::Error::from_str(&format!("{host} presented no SSH host key")));
            };
            let name = host.rsplit_once(':').map_or(host, |(h, _)| h);
            if super::known_hosts::trusts(known_hosts, name, port, hostkey) {
                Ok(git2::CertificateCheckStatus::CertificateOk)
            } else {
                let keyscan = if port == 22 { format!("ssh-keyscan {name}") } else { format!("ssh-keyscan -p {port} {name}") };
                let why = format!(
                    "the SSH host key of {name} (port {port}) is not in the known_hosts given, so it is not trusted; \
                     add the host's key ({keyscan}) to the credentials Secret's known_hosts or the GitProvider's knownHostsRef"
                );
                *refusal.0.borrow_mut() = Some(why.clone());
                Err(git2::Error::from_str(&why))
            }
        });
    }
    cb
}

impl GitWriter {
    fn remote_url(&self) -> Option<&str> {
        self.config.remote.as_ref().map(|r| r.url.as_str())
    }

    /// Fetches the branch into `refs/remotes/origin/<branch>` and returns
    /// the remote's tip (`None` when the remote has no such branch yet).
    pub fn fetch(&self) -> Result<Option<Oid>> {
        let Some(remote) = &self.config.remote else {
            return Ok(None);
        };
        let b = &self.config.branch;
        let url = match endpoint(&remote.url) {
            Endpoint::Local(path) => {
                local_exists(&path, b).map_err(git(format!("fetching {b} from {}", remote.url)))?;
                // A local remote's tip can be read directly: when it is what
                // we last saw, or a commit we already hold (ours, just
                // pushed), there is nothing to transfer.
                if let Some(tip) = self.local_remote_tip_if_known(&path)? {
                    return Ok(tip);
                }
                path.to_string_lossy().into_owned()
            }
            Endpoint::Transport(url) => url,
        };
        let tries = Cell::new(0);
        let refusal = HostKeyRefusal::default();
        let mut opts = FetchOptions::new();
        opts.remote_callbacks(callbacks(&remote.auth, &tries, &refusal, &url));
        opts.update_fetchhead(false);
        let headers = auth_headers(&remote.auth);
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        opts.custom_headers(&headers);
        self.repo
            .remote_anonymous(&url)
            .and_then(|mut r| r.fetch(&[format!("+refs/heads/{b}:refs/remotes/origin/{b}")], Some(&mut opts), None))
            .map_err(|e| refusal.explain(e))
            .map_err(git(format!("fetching {b} from {}", remote.url)))?;
        self.ref_target(&self.tracking_ref())
    }

    /// The local remote's tip when no transfer is needed to know it:
    /// `Some(tip)` (recorded as the tracking ref) or `None` when a fetch is.
    fn local_remote_tip_if_known(&self, path: &std::path::Path) -> Result<Option<Option<Oid>>> {
        let Ok(remote) = Repository::open_bare(path) else {
            return Ok(None); // let the fetch report it
        };
        let tip = match remote.refname_to_id(&format!("refs/heads/{}", self.config.branch)) {
            Ok(id) => Some(id),
            Err(e) if e.code() == ErrorCode::NotFound => None,
            Err(_) => return Ok(None),
        };
        let tracking = self.ref_target(&self.tracking_ref())?;
        if tip == tracking {
            return Ok(Some(tip));
        }
        match tip {
            Some(id) if self.repo.odb().is_ok_and(|odb| odb.exists(id)) => {
                self.repo
                    .reference(&self.tracking_ref(), id, true, "reverser: remote tip")
                    .map_err(git("recording the remote tip"))?;
                Ok(Some(Some(id)))
            }
            _ => Ok(None),
        }
    }

    /// Pushes the branch, fetching and replaying on every rejection, up to
    /// the configured number of attempts.
    pub fn push(&mut self) -> Result<PushOutcome> {
        let Some(remote) = self.config.remote.clone() else {
            return Ok(PushOutcome::default());
        };
        let mut outcome = PushOutcome::default();
        let mut last_reason = String::new();
        let mut backoff = push_backoff();
        for attempt in 1..=remote.max_push_attempts.max(1) {
            let tracking = self.ref_target(&self.tracking_ref())?;
            // Our commits must sit on top of what the remote has.
            if let (Some(head), Some(tip)) = (self.local_head()?, tracking)
                && head != tip
                && !self.repo.graph_descendant_of(head, tip).map_err(git("comparing the clone with the remote"))?
            {
                let (replayed, dropped) = self.replay_onto(tip)?;
                outcome.replayed += replayed;
                outcome.dropped += dropped;
            }
            let Some(head) = self.local_head()? else {
                return Ok(outcome);
            };
            if Some(head) == tracking {
                return Ok(outcome);
            }
            outcome.attempts = attempt;
            let answer = match endpoint(&remote.url) {
                Endpoint::Local(path) => {
                    let b = &self.config.branch;
                    local_exists(&path, b).map_err(git(format!("pushing {b} to {}", remote.url)))?;
                    self.push_local(&path, tracking, head)?
                }
                Endpoint::Transport(url) => self.push_transport(&url)?,
            };
            match answer {
                Attempt::Pushed => {
                    self.repo
                        .reference(&self.tracking_ref(), head, true, "reverser: pushed")
                        .map_err(git("recording the pushed tip"))?;
                    tracing::debug!(%head, attempt, "pushed");
                    return Ok(outcome);
                }
                Attempt::Rejected(why) => {
                    tracing::info!(attempt, %why, remote = %remote.url, "push rejected; fetching and replaying");
                    std::thread::sleep(backoff.next_delay());
                    self.fetch()?;
                    last_reason = why;
                }
            }
        }
        Err(Error::PushExhausted {
            remote: remote.url.clone(),
            branch: self.config.branch.clone(),
            attempts: remote.max_push_attempts.max(1),
            last_reason,
        })
    }

    /// A local bare remote: write our objects as one pack into its object
    /// database, then move its branch only if it still points where we last
    /// saw it.
    fn push_local(&self, path: &std::path::Path, expected: Option<Oid>, head: Oid) -> Result<Attempt> {
        let context = || format!("pushing to the local remote {}", path.display());
        let remote =
            Repository::open_bare(path).map_err(git(format!("{}: it must be a bare repository", context())))?;
        let remote_odb = remote.odb().map_err(git(context()))?;
        let write_pack = |pack: &[u8]| -> Result<()> {
            let mut writer = remote_odb.packwriter().map_err(git(context()))?;
            writer.write_all(pack).map_err(|source| Error::Io { context: context(), source })?;
            writer.commit().map_err(git(context()))?;
            Ok(())
        };
        match &self.window_pack {
            // The window just packed is exactly what the remote lacks: its
            // pack and index go as they are, with no walk, no copy, no
            // second pack.
            Some(window) if window.head == head && window.start == expected => {
                super::window::install(path, &window.pack)?;
                // One pack a push: merged as the clone's are.
                self.remote_packs.request(path);
            }
            _ => {
                let ours: Vec<Oid> = {
                    let mut walk = self.repo.revwalk().map_err(git(context()))?;
                    // Parents first: each commit is then compared with a
                    // parent the remote already holds whole.
                    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE).map_err(git(context()))?;
                    walk.push(head).map_err(git(context()))?;
                    if let Some(old) = expected {
                        walk.hide(old).map_err(git(context()))?;
                    }
                    walk.collect::<std::result::Result<_, _>>().map_err(git(context()))?
                };
                if ours.len() < LOOSE_PUSH_LIMIT {
                    // A few commits: copy the objects the remote lacks,
                    // loose, as receive-pack does below unpackLimit.
                    let local_odb = self.repo.odb().map_err(git(context()))?;
                    for id in ours {
                        copy_missing(&self.repo, &local_odb, &remote_odb, id).map_err(git(context()))?;
                    }
                } else {
                    write_pack(&super::window::walked_pack(&self.repo, expected, head)?)?;
                    self.remote_packs.request(path);
                }
            }
        }
        let name = format!("refs/heads/{}", self.config.branch);
        let moved = match expected {
            Some(old) => remote.reference_matching(&name, head, true, old, "reverser: push"),
            None => remote.reference(&name, head, false, "reverser: push"),
        };
        match moved {
            Ok(_) => Ok(Attempt::Pushed),
            Err(e)
                if matches!(
                    e.code(),
                    ErrorCode::Modified | ErrorCode::Exists | ErrorCode::Locked | ErrorCode::NotFound
                ) =>
            {
                Ok(Attempt::Rejected(e.message().to_owned()))
            }
            Err(e) => Err(git(context())(e)),
        }
    }

    /// Any other remote: git2's push of the branch (never forced).
    pub(super) fn push_transport(&self, url: &str) -> Result<Attempt> {
        let Some(config) = &self.config.remote else {
            return Ok(Attempt::Pushed);
        };
        let rejected: RefCell<Option<String>> = RefCell::new(None);
        let tries = Cell::new(0);
        let refusal = HostKeyRefusal::default();
        let b = &self.config.branch;
        let result = {
            let mut cb = callbacks(&config.auth, &tries, &refusal, url);
            cb.push_update_reference(|_refname, status| {
                if let Some(why) = status {
                    *rejected.borrow_mut() = Some(why.to_owned());
                }
                Ok(())
            });
            let mut opts = PushOptions::new();
            opts.remote_callbacks(cb);
            let headers = auth_headers(&config.auth);
            let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
            opts.custom_headers(&headers);
            self.repo
                .remote_anonymous(url)
                .and_then(|mut r| r.push(&[format!("refs/heads/{b}:refs/heads/{b}")], Some(&mut opts)))
        };
        match result {
            Ok(()) => Ok(match rejected.into_inner() {
                Some(why) => Attempt::Rejected(why),
                None => Attempt::Pushed,
            }),
            Err(e) if e.code() == ErrorCode::NotFastForward => Ok(Attempt::Rejected(e.message().to_owned())),
            Err(e) => Err(git(format!("pushing {b} to {}", self.remote_url().unwrap_or(url)))(refusal.explain(e))),
        }
    }

    /// Re-creates our commits not yet on the remote on top of `onto`, each
    /// as the same file changes (upserts and removals) with its original
    /// author and message. Our version of a file wins: it is the later
    /// observation. A commit that changes nothing on top of `onto` (the other
    /// writer made the same change) is dropped. Returns (replayed, dropped).
    pub(super) fn replay_onto(&mut self, onto: Oid) -> Result<(usize, usize)> {
        let Some(head) = self.local_head()? else {
            return Ok((0, 0));
        };
        let ours: Vec<Oid> = {
            let mut walk = self.repo.revwalk().map_err(git("listing our commits"))?;
            walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE).map_err(git("listing our commits"))?;
            walk.push(head).map_err(git("listing our commits"))?;
            walk.hide(onto).map_err(git("listing our commits"))?;
            walk.collect::<std::result::Result<_, _>>().map_err(git("listing our commits"))?
        };
        let (mut replayed, mut dropped) = (0, 0);
        let mut base = onto;
        for id in ours {
            let commit = self.repo.find_commit(id).map_err(git(format!("reading {id}")))?;
            let parent_tree = self.tree_of(commit.parent_id(0).ok())?;
            let tree = commit.tree().map_err(git(format!("reading {id}")))?;
            let base_tree = self.tree_of(Some(base))?;
            let diff = self
                .repo
                .diff_tree_to_tree(Some(&parent_tree), Some(&tree), None)
                .map_err(git(format!("diffing {id}")))?;
            let mut update = TreeUpdateBuilder::new();
            for delta in diff.deltas() {
                let new = delta.new_file();
                let old = delta.old_file();
                if !new.id().is_zero() {
                    if let Some(path) = new.path().and_then(|p| p.to_str()) {
                        update.upsert(path, new.id(), FileMode::Blob);
                    }
                } else if let Some(path) = old.path().and_then(|p| p.to_str())
                    && entry_id(&base_tree, path).is_some()
                {
                    update.remove(path);
                }
            }
            let new_tree = update.create_updated(&self.repo, &base_tree).map_err(git(format!("replaying {id}")))?;
            if new_tree == base_tree.id() {
                dropped += 1;
                continue;
            }
            let new_tree = self.repo.find_tree(new_tree).map_err(git(format!("replaying {id}")))?;
            let parent = self.repo.find_commit(base).map_err(git(format!("reading {base}")))?;
            let committer = signature(&self.config.committer, None)?;
            base = make_commit(
                &self.repo,
                self.config.signer.as_deref(),
                &commit.author(),
                &committer,
                commit.message_raw().unwrap_or_default(),
                &new_tree,
                &[&parent],
            )?;
            replayed += 1;
        }
        self.set_local_head(base, "reverser: replay onto remote")?;
        tracing::info!(replayed, dropped, onto = %onto, "replayed our commits on top of the remote");
        Ok((replayed, dropped))
    }
}

/// The pause before retrying a rejected push doubles from `RETRY_MIN` to
/// `RETRY_MAX`, jittered. A fixed short pause let a writer that pushes
/// continuously starve the other for all ten attempts under load; a growing
/// one lets the busy writer's burst end.
pub(super) const RETRY_MIN: Duration = Duration::from_millis(10);
pub(super) const RETRY_MAX: Duration = Duration::from_millis(640);

pub(super) fn push_backoff() -> Backoff {
    Backoff::new(RETRY_MIN, RETRY_MAX).expect("RETRY_MIN is above zero and below RETRY_MAX")
}

/// Connects to `remote` with its credentials, as `git ls-remote` does
/// (the connection reads the ref advertisement), transferring nothing: the
/// GitProvider connectivity check (ref: gitops-reverser
/// `internal/controller/gitprovider_controller.go` `checkRemoteConnectivity`).
pub fn probe(remote: &super::RemoteConfig) -> Result<()> {
    let url = match endpoint(&remote.url) {
        Endpoint::Local(path) => {
            local_exists(&path, "main").map_err(git(format!("connecting to {}", remote.url)))?;
            path.to_string_lossy().into_owned()
        }
        Endpoint::Transport(url) => url,
    };
    let redacted = crate::redact::redact_url(&url);
    let mut r =
        git2::Remote::create_detached(url.as_str()).map_err(git(format!("reading the remote URL {redacted}")))?;
    let (tries, refusal) = (Cell::new(0), HostKeyRefusal::default());
    let cb = callbacks(&remote.auth, &tries, &refusal, &url);
    // Not `list()`: git2 0.20 builds its slice from a null pointer when the
    // remote has no refs (an empty repository), which aborts.
    let conn = r
        .connect_auth(git2::Direction::Fetch, Some(cb), None)
        .map_err(|e| git(format!("connecting to {redacted}"))(refusal.explain(e)))?;
    drop(conn);
    Ok(())
}
