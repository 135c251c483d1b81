//! The executor: applies planned commits to a local bare clone with git2,
//! building trees directly in the object database (no checkout, no index).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use git2::{ObjectType, Oid, Repository, Signature, Time, Tree};

use rules::attribution::commit::commit_author;
use rules::attribution::commit::plan::{Applied, CommitGroup, Effect, plan_commits, plan_each};
use rules::attribution::commit::{Change, Identity};
use rules::mirror::bootstrap;
use rules::mirror::commit_request::{Carried, Requested, requested_group};
use rules::mirror::message::{CommitKind, untemplated_message};
use rules::mirror::reconcile::under;

use super::apply::{Context, Files, Outcome};
use super::config::WriterConfig;
use super::folders::entry_id;
use super::index::DocIndex;
use super::signing::{SIGNATURE_FIELD, SshSigner};
use super::window::{Blobs, WindowObjects, WindowPack};
use super::{GitError as Error, Result};
use crate::metrics::{CommitLabels, Metrics};

/// Windows of at least this many changes are written as one pack (git's
/// default `unpackLimit` is the same figure).
pub(super) const PACK_THRESHOLD: usize = 100;

/// What one [`GitWriter::commit`] did.
#[derive(Debug, Default)]
pub struct CommitOutcome {
    /// The commits made, oldest first.
    pub commits: Vec<CommitSummary>,
    /// Changes that left the tree identical: no commit for them.
    pub unchanged: usize,
    /// Changes refused (bad object or coordinates), with why. The rest of the
    /// window is still committed.
    pub rejected: Vec<RejectedChange>,
    /// Writes of a sensitive type skipped, never written in clear text:
    /// no encryption configured, or sealing failed (logged).
    pub sensitive_skipped: usize,
    /// The push, when a remote is configured.
    pub push: Option<PushOutcome>,
    /// Documents under the target's path that do not parse: left alone,
    /// never rewritten.
    pub unparsable: usize,
    /// What became of the CommitRequest the window carried, if any.
    pub requested: Option<Carried>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitSummary {
    pub id: String,
    pub author: Identity,
    /// Changes this commit records.
    pub changes: usize,
}

#[derive(Debug)]
pub struct RejectedChange {
    /// Index into the window's changes.
    pub index: usize,
    pub error: Error,
}

/// What a push did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushOutcome {
    /// Push attempts made (0 when there was nothing to push).
    pub attempts: u32,
    /// Commits re-created on top of what another writer pushed.
    pub replayed: usize,
    /// Our commits that turned out to change nothing on top of the remote.
    pub dropped: usize,
}

/// The Git writer. Blocking (git2); run it on a blocking thread from async
/// code. One per clone directory.
pub struct GitWriter {
    pub(super) repo: Repository,
    pub(super) config: WriterConfig,
    metrics: Option<Arc<Metrics>>,
    /// Every document under the prefix by identity.
    pub(super) index: DocIndex,
    /// (group, resource) → kind, learned from the objects seen.
    pub(super) kinds: HashMap<(String, String), String>,
    /// Live objects' document digests by uid and resourceVersion.
    pub(super) digests: super::digests::Digests,
    /// Merges the window packs in the background.
    pub(super) repack: super::packs::Maintainer,
    /// Merges done when `repo` was opened: once more are done, `repo` is
    /// reopened, letting go of the files of the packs they replaced.
    repack_seen: u64,
    /// The last window's pack, while the branch is where it left it: a
    /// push to a local remote sends it as it is.
    pub(super) window_pack: Option<WindowPack>,
    /// Merges a local remote's packs (one lands per push of a window).
    pub(super) remote_packs: super::packs::Maintainer,
}

impl std::fmt::Debug for GitWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitWriter").field("config", &self.config).finish_non_exhaustive()
    }
}

pub(super) fn git(context: impl Into<String>) -> impl FnOnce(git2::Error) -> Error {
    let context = context.into();
    move |source| Error::Git { context, source }
}

impl GitWriter {
    /// Opens (or initializes) the local bare clone, and when a remote is
    /// configured fetches the branch and starts from its tip (or
    /// fast-forwards to it). Local commits a previous run did not push are
    /// kept and pushed, replayed if need be, with the next commit.
    pub fn open(config: WriterConfig) -> Result<Self> {
        if !git2::Reference::is_valid_name(&format!("refs/heads/{}", config.branch)) {
            return Err(Error::Git {
                context: format!("branch {:?} is not a valid branch name; configure another", config.branch),
                source: git2::Error::from_str("invalid reference name"),
            });
        }
        // libgit2 checks that each object a new tree entry names is in the
        // object database; a packed window's blobs are not, until its pack
        // is installed (commit_local_inner). The writer names only objects
        // it hashed or read. (A libgit2 setting of the whole process.)
        git2::opts::strict_object_creation(false);
        let dir = &config.repo_dir;
        let repo = if dir.join("HEAD").exists() {
            Repository::open_bare(dir)
                .map_err(git(format!("opening the clone at {}; remove the directory to start afresh", dir.display())))?
        } else {
            std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                context: format!("creating the clone directory {}", dir.display()),
                source,
            })?;
            Repository::init_bare(dir).map_err(git(format!("initializing a bare clone at {}", dir.display())))?
        };
        let index = DocIndex::new(&config.prefix);
        let mut writer = Self {
            repo,
            config,
            metrics: None,
            index,
            kinds: HashMap::new(),
            digests: Default::default(),
            repack: Default::default(),
            repack_seen: 0,
            window_pack: None,
            remote_packs: Default::default(),
        };
        // Packs an earlier run left are merged as the rule says, too.
        writer.repack.request(&writer.config.repo_dir);
        if let Err(error) = writer.sync() {
            // An unreachable remote must not stop the mirror: windows are
            // committed in the clone and pushed once the remote answers.
            tracing::warn!(%error, "the remote cannot be reached now; commits stay in the clone until a push succeeds");
        }
        Ok(writer)
    }

    /// Brings the clone up to the remote: fetch, then start from its tip,
    /// fast-forward to it, or (when a previous run left unpushed commits)
    /// replay ours on top of it. No-op without a remote.
    pub fn sync(&mut self) -> Result<()> {
        if self.config.remote.is_none() {
            return Ok(());
        }
        let Some(tip) = self.fetch()? else {
            return Ok(());
        };
        match self.local_head()? {
            None => self.set_local_head(tip, "reverser: start from remote"),
            Some(local) if local == tip => Ok(()),
            Some(local) => {
                let compare = git("comparing the clone with the remote");
                if self.repo.graph_descendant_of(tip, local).map_err(compare)? {
                    self.set_local_head(tip, "reverser: fast-forward to remote")
                } else if self
                    .repo
                    .graph_descendant_of(local, tip)
                    .map_err(git("comparing the clone with the remote"))?
                {
                    Ok(())
                } else {
                    self.replay_onto(tip).map(|_| ())
                }
            }
        }
    }

    /// Counts commits on `gitopsreverser_commits_total{author_kind}`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    pub fn config(&self) -> &WriterConfig {
        &self.config
    }

    /// The clone's directory, for reading history back.
    pub fn repo_dir(&self) -> &Path {
        &self.config.repo_dir
    }

    /// Commits one commit window's changes (in event order) and pushes them
    /// when a remote is configured. With a remote it first fetches
    /// ([`GitWriter::sync`]), so a change is diffed against what the remote
    /// holds: a delete of a file only another writer had added still removes
    /// it. When the remote cannot be reached the window is still committed
    /// to the clone, and the push error is returned; the next call pushes
    /// the commits (replaying them if need be). Retrying a window is safe:
    /// a change already recorded leaves the tree identical and makes no
    /// commit.
    pub fn commit(&mut self, changes: &[Change]) -> Result<CommitOutcome> {
        self.commit_as(changes, &CommitKind::Window)
    }

    /// [`GitWriter::commit`] for a window of the given kind: the kind picks
    /// the GitProvider template that titles each commit, and a per-event
    /// window makes one commit per change.
    pub fn commit_as(&mut self, changes: &[Change], kind: &CommitKind) -> Result<CommitOutcome> {
        let (outcome, push_error) = self.commit_keeping(changes, kind, None)?;
        match push_error {
            Some(e) => Err(e),
            None => Ok(outcome),
        }
    }

    /// [`GitWriter::commit_as`], but a failed push is returned beside the
    /// outcome instead of as the error: the window is committed in the clone
    /// either way, and the next call (an empty window will do) pushes it.
    /// A CommitRequest riding the window (`requested`) puts its message on
    /// its author's commit; [`CommitOutcome::requested`] says what it got.
    pub fn commit_keeping(
        &mut self,
        changes: &[Change],
        kind: &CommitKind,
        requested: Option<&Requested>,
    ) -> Result<(CommitOutcome, Option<Error>)> {
        if let Err(error) = self.sync() {
            // Never drop a window because the remote is away: commit on what
            // we have, the push replays it later.
            tracing::warn!(%error, "fetch before commit failed; committing on the clone as it is");
        }
        let mut outcome = self.commit_local_as(changes, kind, requested)?;
        let mut push_error = None;
        if self.config.remote.is_some() {
            match self.push() {
                Ok(p) => outcome.push = Some(p),
                Err(e) => push_error = Some(e),
            }
        }
        Ok((outcome, push_error))
    }

    /// Commits one window on the clone as it is, without fetching or pushing.
    pub fn commit_local(&mut self, changes: &[Change]) -> Result<CommitOutcome> {
        self.commit_local_as(changes, &CommitKind::Window, None)
    }

    fn commit_local_as(
        &mut self,
        changes: &[Change],
        kind: &CommitKind,
        requested: Option<&Requested>,
    ) -> Result<CommitOutcome> {
        // Reopened after a merge, to let go of the files of the packs it
        // replaced, and before each packed window: libgit2 keeps every
        // page of a pack it has read mapped while a handle holds the pack,
        // so a long-lived handle came to hold the pages of each tier's
        // packs until the next merge (3 to 15 MiB of `serve` cycling, at
        // 500 changes/s); a fresh one holds what one window reads (2 MiB).
        let merges = self.repack.merges();
        if merges != self.repack_seen || changes.len() >= PACK_THRESHOLD {
            self.repo = Repository::open_bare(&self.config.repo_dir)
                .map_err(git(format!("reopening the clone at {}", self.config.repo_dir.display())))?;
            self.repack_seen = merges;
        }
        // The gate first, on the tree the window starts from: a refused
        // folder is refused before anything is edited, so the index stays.
        let head = self.local_head()?;
        {
            let base = tree_of(&self.repo, head)?;
            self.index.refresh(&self.repo, &base)?;
        }
        if let Some(refusal) = self.index.refusal() {
            return Err(Error::GitPathRefused(refusal));
        }
        let result = self.commit_local_inner(changes, kind, requested);
        if result.is_err() {
            // The index may describe edits that never became a commit.
            self.index.invalidate();
        }
        result
    }

    fn commit_local_inner(
        &mut self,
        changes: &[Change],
        kind: &CommitKind,
        requested: Option<&Requested>,
    ) -> Result<CommitOutcome> {
        let mut outcome = CommitOutcome::default();
        // A large window's objects are written in memory and land as one
        // pack: one file instead of one per blob and tree. A small one's are
        // written loose, as git itself does below `unpackLimit`, because
        // every pack is one more file each object lookup may search.
        // (The in-memory store is attached to a handle of its own: a
        // backend, once added, stays on its object database for good.)
        let packed = changes.len() >= PACK_THRESHOLD;
        let own_handle = if packed {
            Some(
                Repository::open_bare(&self.config.repo_dir)
                    .map_err(git(format!("opening the clone at {}", self.config.repo_dir.display())))?,
            )
        } else {
            None
        };
        let work: &Repository = own_handle.as_ref().unwrap_or(&self.repo);
        let work_odb = work.odb().map_err(git("opening the object database"))?;
        if packed {
            work_odb.add_new_mempack_backend(1000).map_err(git("adding the in-memory object store"))?;
        }
        let start = self.local_head()?;
        let mut head = start;
        // What the window writes, for its pack.
        let mut fresh = match (packed, start) {
            (false, _) => None,
            (true, None) => Some(WindowObjects::new(None)),
            (true, Some(_)) => Some(WindowObjects::new(Some(tree_of(work, start)?))),
        };
        // A packed window's blobs: hashed here and kept for its pack, never
        // handed to libgit2's object database, which rescans the pack
        // directory for every object it is asked to write (perf, issue 31:
        // 15-20% of the writer). (Empty for a window written loose.)
        let mut blobs = Blobs::default();
        // Its trees (built by commit/tree.rs) and unsigned commits go into
        // a store of its own, without libgit2's lookup of each in every pack
        // (commit/store.rs), and libgit2 reads them back from there as it
        // builds the next. The store hangs off the start's commit, so a
        // window on an empty branch, and a signed commit, go through
        // libgit2's own writes.
        let anchor = match (packed, start) {
            (true, Some(id)) => Some(work.find_commit(id).map_err(git("reading the window's start"))?),
            _ => None,
        };
        let store = anchor.as_ref().map(super::store::Store::attach).transpose()?;
        let bootstrap_files = self.bootstrap_files();
        let groups: Vec<CommitGroup> =
            if *kind == CommitKind::PerEvent { plan_each(changes) } else { plan_commits(changes) };
        let asked = requested.and_then(|r| requested_group(&groups, r));
        // Until the requester's group commits, its changes left the tree as it was.
        outcome.requested =
            requested.map(|_| if asked.is_some() { Carried::AlreadyPresent } else { Carried::NoOpenWindow });
        for (g, group) in groups.into_iter().enumerate() {
            let base_tree = tree_of(work, head)?;
            self.index.refresh(work, &base_tree)?;
            let mut files = Files::new(work, &base_tree, &blobs);
            let mut done: Vec<(Effect, String, usize)> = Vec::new();
            let mut shadowed = Vec::new();
            let mut cx = Context {
                prefix: &self.config.prefix,
                placement: &self.config.placement,
                encryptor: self.config.encryption.as_deref(),
                sensitive: &self.config.sensitive,
                index: &mut self.index,
                kinds: &mut self.kinds,
                digests: &mut self.digests,
            };
            for &i in &group.changes {
                match cx.apply(&mut files, &changes[i])? {
                    Outcome::Unchanged => outcome.unchanged += 1,
                    Outcome::Applied { effect, path } => done.push((effect, path, i)),
                    Outcome::SensitiveSkipped => {
                        outcome.sensitive_skipped += 1;
                        if let Some(metrics) = &self.metrics {
                            metrics.mirror_sensitive_skipped.inc();
                        }
                    }
                    Outcome::Rejected(error) => {
                        tracing::warn!(object = %changes[i].object.display(), %error, "change refused, not committed");
                        outcome.rejected.push(RejectedChange { index: i, error });
                    }
                    Outcome::Refused(issue) => shadowed.push(issue),
                }
            }
            // A write the folder's rules forbid refuses the whole window
            // (ref: the writer's preconditions): nothing is committed.
            if let Some(refusal) = rules::mirror::acceptance::Refusal::of(shadowed) {
                return Err(Error::GitPathRefused(refusal));
            }
            if done.is_empty() {
                continue;
            }
            let mut edits: Vec<super::tree::Edit<'_>> = Vec::new();
            let mut written: Vec<(Oid, Vec<u8>)> = Vec::new();
            for (path, state) in &files.overlay {
                match state {
                    Some(bytes) => {
                        let id = blob(work, packed, &mut written, path, bytes)?;
                        if entry_id(&base_tree, path) != Some(id) {
                            edits.push((path, Some(id)));
                        }
                    }
                    None if entry_id(&base_tree, path).is_some() => edits.push((path, None)),
                    None => {}
                }
            }
            if edits.is_empty() {
                // e.g. a create and a delete of one object in one window.
                outcome.unchanged += done.len();
                self.index.describe(base_tree.id());
                continue;
            }
            // The target's first write stages the bootstrap files; one that
            // exists is never overwritten.
            let mut staged = Vec::new();
            for (name, content) in &bootstrap_files {
                let path = under(&self.config.prefix, name);
                if !files.exists(&path) {
                    let id = blob(work, packed, &mut written, &path, content.as_bytes())?;
                    staged.push((path, id));
                }
            }
            edits.extend(staged.iter().map(|(path, id)| (path.as_str(), Some(*id))));
            let tree_id = match &store {
                Some(store) => {
                    super::tree::updated(work, &base_tree, &edits, &mut |bytes| store.write(ObjectType::Tree, bytes))?
                }
                None => super::tree::by_libgit2(work, &base_tree, &edits).map_err(git("building the manifest tree"))?,
            };
            let tree = work.find_tree(tree_id).map_err(git("reading the tree just built"))?;
            let applied: Vec<Applied<'_>> =
                done.iter().map(|(effect, path, i)| Applied { effect: *effect, path, change: &changes[*i] }).collect();
            let author = commit_author(self.config.author_mode, group.author.as_ref(), &self.config.committer);
            let observed = applied.iter().map(|a| a.change.observed_at).max().unwrap_or_else(SystemTime::now);
            let author_sig = signature(&author, Some(observed))?;
            let committer_sig = signature(&self.config.committer, None)?;
            let message = match requested.and_then(|r| r.message.clone()).filter(|_| asked == Some(g)) {
                Some(verbatim) => verbatim,
                None => self.message(kind, group.author.as_ref(), &applied),
            };
            let parent = match head {
                Some(id) => Some(work.find_commit(id).map_err(git("reading the parent commit"))?),
                None => None,
            };
            let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
            let made = match (&store, self.config.signer.as_deref()) {
                (Some(store), None) => work
                    .commit_create_buffer(&author_sig, &committer_sig, &message, &tree, &parents)
                    .map_err(git("building the commit"))
                    .and_then(|buffer| store.write(ObjectType::Commit, &buffer)),
                (_, signer) => make_commit(work, signer, &author_sig, &committer_sig, &message, &tree, &parents),
            };
            let id = made.map_err(|e| match e {
                Error::Git { source, .. } => git(format!("committing as {} <{}>", author.name, author.email))(source),
                other => other,
            })?;
            self.index.describe(tree_id);
            if let Some(fresh) = &mut fresh {
                fresh.commit(
                    id,
                    &tree,
                    files.overlay.keys().map(String::as_str).chain(staged.iter().map(|(path, _)| path.as_str())),
                );
            }
            blobs.extend(written);
            tracing::debug!(commit = %id, author = %author.name, changes = applied.len(), "committed");
            if let Some(metrics) = &self.metrics {
                let kind = group.author.as_ref().map_or("none", |a| a.actor_kind.label());
                metrics.commits.get_or_create(&CommitLabels { author_kind: kind.to_owned() }).inc();
            }
            if asked == Some(g) {
                outcome.requested = Some(Carried::Committed(id.to_string()));
            }
            outcome.commits.push(CommitSummary { id: id.to_string(), author, changes: applied.len() });
            head = Some(id);
        }
        outcome.unparsable = self.index.unparsable();
        if let Some(id) = head
            && head != start
        {
            // Objects first, as one pack, then the ref: the branch never
            // points at something not on disk.
            if let Some(fresh) = &fresh {
                let pack = fresh.pack(&work_odb, &blobs)?;
                super::window::install(&self.config.repo_dir, &pack)?;
                self.repack.request(&self.config.repo_dir);
                self.window_pack = Some(WindowPack { start, head: id, pack });
            } else {
                self.window_pack = None;
            }
            self.set_local_head(id, "reverser: commit")?;
        }
        Ok(outcome)
    }

    /// The files a target's first write stages (`.sops.yaml` only when
    /// encryption is on and names its recipients).
    fn bootstrap_files(&self) -> Vec<(&'static str, String)> {
        if !self.config.bootstrap {
            return Vec::new();
        }
        let recipients = (self.config.encryption.is_some() && !self.config.age_recipients.is_empty())
            .then_some(self.config.age_recipients.as_slice());
        if self.config.encryption.is_some() && recipients.is_none() {
            tracing::warn!("encryption is on but names no age recipient: no .sops.yaml is staged");
        }
        bootstrap::files(recipients).unwrap_or_else(|error| {
            tracing::warn!(%error, "the bootstrap .sops.yaml cannot be written; staging the other files");
            bootstrap::files(None).unwrap_or_default()
        })
    }

    /// The message of one commit: the provider's template for the window's
    /// kind when configured, else a title from what changed. A template that
    /// fails to render (a value it cannot format) never loses the commit: it
    /// falls back to the plain title, and says so.
    fn message(
        &self,
        kind: &CommitKind,
        author: Option<&rules::attribution::commit::ResolvedAuthor>,
        applied: &[Applied<'_>],
    ) -> String {
        match &self.config.messages {
            None => untemplated_message(kind, author, applied),
            Some(m) => m.message(kind, author, applied).unwrap_or_else(|error| {
                tracing::warn!(%error, "commit message template failed; titling the commit plainly");
                untemplated_message(kind, author, applied)
            }),
        }
    }

    pub(super) fn local_ref(&self) -> String {
        format!("refs/heads/{}", self.config.branch)
    }

    pub(super) fn tracking_ref(&self) -> String {
        format!("refs/remotes/origin/{}", self.config.branch)
    }

    /// The local branch tip; `None` before the first commit.
    pub fn local_head(&self) -> Result<Option<Oid>> {
        self.ref_target(&self.local_ref())
    }

    pub(super) fn ref_target(&self, name: &str) -> Result<Option<Oid>> {
        match self.repo.refname_to_id(name) {
            Ok(id) => Ok(Some(id)),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(git(format!("reading {name}"))(e)),
        }
    }

    pub(super) fn set_local_head(&self, id: Oid, why: &str) -> Result<()> {
        self.repo
            .reference(&self.local_ref(), id, true, why)
            .map_err(git(format!("moving {} to {id}", self.local_ref())))?;
        Ok(())
    }

    /// The tree of a commit, or the empty tree for no commit.
    pub(super) fn tree_of(&self, commit: Option<Oid>) -> Result<Tree<'_>> {
        tree_of(&self.repo, commit)
    }
}

pub(super) fn tree_of(repo: &Repository, commit: Option<Oid>) -> Result<Tree<'_>> {
    match commit {
        Some(id) => repo.find_commit(id).and_then(|c| c.tree()).map_err(git(format!("reading the tree of {id}"))),
        None => {
            let id = repo.treebuilder(None).and_then(|b| b.write()).map_err(git("writing the empty tree"))?;
            repo.find_tree(id).map_err(git("reading the empty tree"))
        }
    }
}

/// A commit, signed when a signer is configured (the signature goes into
/// the `gpgsig` header, as `git commit -S` with `gpg.format=ssh` writes it).
pub(super) fn make_commit(
    repo: &Repository,
    signer: Option<&SshSigner>,
    author: &Signature<'_>,
    committer: &Signature<'_>,
    message: &str,
    tree: &Tree<'_>,
    parents: &[&git2::Commit<'_>],
) -> Result<Oid> {
    let Some(signer) = signer else {
        return repo.commit(None, author, committer, message, tree, parents).map_err(git("committing"));
    };
    let buffer =
        repo.commit_create_buffer(author, committer, message, tree, parents).map_err(git("building the commit"))?;
    let signature = signer.sign_commit(&buffer)?;
    // Names, emails and the message are all `&str`, so the buffer is UTF-8.
    let text = std::str::from_utf8(&buffer)
        .map_err(|_| git("reading the commit buffer")(git2::Error::from_str("the commit buffer is not UTF-8")))?;
    repo.commit_signed(text, &signature, Some(SIGNATURE_FIELD)).map_err(git("writing the signed commit"))
}

/// The blob of a file a window writes: in a packed window hashed here and
/// kept in `written` for the window's pack, else written loose.
fn blob(work: &Repository, packed: bool, written: &mut Vec<(Oid, Vec<u8>)>, path: &str, bytes: &[u8]) -> Result<Oid> {
    if !packed {
        return work.blob(bytes).map_err(git(format!("writing {path}")));
    }
    let id = Oid::hash_object(ObjectType::Blob, bytes).map_err(git(format!("hashing {path}")))?;
    written.push((id, bytes.to_vec()));
    Ok(id)
}

/// A signature at `at` (the observation time), or now.
pub(super) fn signature(who: &Identity, at: Option<SystemTime>) -> Result<Signature<'static>> {
    let result = match at {
        Some(at) => {
            let secs =
                at.duration_since(UNIX_EPOCH).map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)).unwrap_or(0);
            Signature::new(&who.name, &who.email, &Time::new(secs, 0))
        }
        None => Signature::now(&who.name, &who.email),
    };
    result.map_err(git(format!("making the signature {} <{}>; check the configured identity", who.name, who.email)))
}
