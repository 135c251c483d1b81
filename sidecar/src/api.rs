//! The Unix-socket gRPC API (`reverser.v1.Attribution`): Resolve, Explain,
//! Commit, Reconcile, Acquire and Release, served beside the standard
//! `grpc.health.v1`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rules::attribution::Tier;
use rules::attribution::commit::AuthorMode;
use rules::attribution::index::Query;
use rules::attribution::intent::Action;
use rules::attribution::render::{ObjectKey, is_logically_absent};
use rules::attribution::watch::{ObjectMeta, WatchEvent, WatchKind};
use rules::attribution::{GroupResource, Scope, ScopeHasher};
use rules::mirror::commit_request::{Carried, Requested};
use rules::mirror::config::PruneMode;
use rules::mirror::message::CommitKind;
use rules::mirror::reconcile::{self, Doc};
use rules::mirror::select::{SensitiveTypes, excluded_actor, last_field_manager};
use rules::mirror::watch_rules::WatchScope;
use runtime::attribution::commit::{
    Action as CommitAction, Change, CommitOutcome, GitError, GitWriter, ResolvedAuthor,
};
use runtime::attribution::transport::{AnyFollower, FactFollower};
use runtime::attribution::{Attributed, Attributor, Engine, Resolution};
use runtime::metrics::ReasonLabel;
use runtime::proto::{self, attribution_server::Attribution};

use crate::socket::Connection;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

/// The longest an Explain with `follow` waits for the follower to read the
/// type's stream (a client bounds it further with its own deadline).
const FOLLOW_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// What the sidecar authors for, when it runs for a GitTarget.
#[derive(Debug, Clone, Default)]
pub struct MirrorPolicy {
    /// The target's prune mode; without a GitTarget an observed deletion
    /// always removes and a reconcile removes when the watcher asks.
    pub prune: Option<PruneMode>,
}

impl MirrorPolicy {
    fn removes_on_event(&self) -> bool {
        self.prune.is_none_or(PruneMode::on_event)
    }

    fn removes_on_reconcile(&self, asked: bool) -> bool {
        asked && self.prune.is_none_or(PruneMode::on_reconcile)
    }
}

pub struct Api {
    /// Deletion intent, then the author: the one sequence replay runs too.
    attributor: Attributor,
    /// Git authoring, when the sidecar runs with --git-repo. Blocking: used
    /// from a blocking thread, one window at a time.
    git: Option<Arc<Mutex<GitWriter>>>,
    /// Replaced when the GitTarget or its GitProvider changes (`live`).
    policy: Mutex<MirrorPolicy>,
    /// The sensitive types, while the writer has no encryption: their writes
    /// are skipped (never written in clear text) before any attribution, so
    /// a skipped Secret neither waits the grace nor counts as unresolved.
    unsealed: Mutex<Option<SensitiveTypes>>,
    /// Why nothing is committed now (the GitTarget is gone, or its branch no
    /// longer allowed): Commit and Reconcile are refused with it, so the
    /// watcher keeps its window and retries.
    held: Mutex<Option<String>>,
    follower: AnyFollower,
    /// References held per scope by explicit Acquires (and --follow), and
    /// by which connection of the socket.
    refs: Mutex<Refs>,
    /// Scopes a Resolve made this process follow (a watcher asking about a
    /// type covers it), with when a Resolve last asked, on the engine's
    /// clock: released once nobody asked for a TTL, so routes that only
    /// junk ever named stop costing Redis reads.
    implicit: Mutex<HashMap<Scope, u64, ScopeHasher>>,
    /// Attribution on, or the configured committer authors everything.
    author_mode: AuthorMode,
    /// At most this many scopes followed at once (explicit and implicit).
    max_followed: usize,
}

/// Acquire references: per scope, and per connection that took them (so a
/// client that goes away releases what it held).
#[derive(Debug, Default)]
struct Refs {
    by_scope: HashMap<Scope, u32>,
    by_connection: HashMap<Connection, HashMap<Scope, u32>>,
}

/// The request's type, taken (not copied) out of it.
fn scope_of(t: Option<proto::TypeRef>) -> Result<(Scope, String), Status> {
    let t = t.ok_or_else(|| Status::invalid_argument("type is required: route, group, version, resource"))?;
    if t.resource.is_empty() {
        return Err(Status::invalid_argument("type.resource is required (e.g. \"configmaps\")"));
    }
    Ok((Scope::new(t.route, GroupResource::new(t.group, t.resource)), t.version))
}

fn watch_kind(s: &str) -> Result<WatchKind, Status> {
    WatchKind::from_type(s).ok_or_else(|| {
        Status::invalid_argument(format!("event_type {s:?} is not ADDED, MODIFIED, DELETED, BOOKMARK or ERROR"))
    })
}

fn parse_object(bytes: &[u8]) -> Result<serde_json::Value, Status> {
    if bytes.is_empty() {
        return Ok(serde_json::Value::Null);
    }
    serde_json::from_slice(bytes).map_err(|e| Status::invalid_argument(format!("object_json is not JSON: {e}")))
}

/// A change must carry the watched object: refused, with what is wrong
/// with it, when it names none.
fn usable(event: &WatchEvent, event_type: &str) -> Result<(), Status> {
    match event.unusable() {
        Some(why) => Err(Status::invalid_argument(format!(
            "object_json of a {event_type} event must be the watched object: {why}"
        ))),
        None => Ok(()),
    }
}

/// What the caller needs of an event: the whole object and the Git change it
/// makes (`Commit`), or only the answer, for which metadata suffices
/// (`Resolve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Object {
    Whole,
    Metadata,
}

/// One attributed event: the answer for the watcher, and the Git change it
/// makes (none for noop / ignored).
type Attributed1 = (proto::ResolveResponse, Option<Change>);

/// The action of a write of a sensitive type the writer cannot seal: not
/// attributed, not committed, counted as skipped.
const SKIPPED: &str = "skipped";

/// The sensitive types whose writes `writer` skips: all of them when it
/// has no encryption, none otherwise.
fn unsealed(writer: &GitWriter) -> Option<SensitiveTypes> {
    let config = writer.config();
    config.encryption.is_none().then(|| config.sensitive.clone())
}

/// What a window's changes came to once exclusions and prune mode applied.
#[derive(Debug, Default)]
struct Filtered {
    changes: Vec<Change>,
    excluded: u32,
    kept: u32,
}

impl Api {
    pub fn new(engine: Arc<Engine>, follower: AnyFollower, git: Option<GitWriter>, policy: MirrorPolicy) -> Self {
        Self {
            attributor: Attributor::new(engine),
            unsealed: Mutex::new(git.as_ref().and_then(unsealed)),
            git: git.map(|g| Arc::new(Mutex::new(g))),
            policy: Mutex::new(policy),
            held: Mutex::new(None),
            follower,
            refs: Mutex::new(Refs::default()),
            implicit: Mutex::default(),
            author_mode: AuthorMode::Attributed,
            max_followed: usize::MAX,
        }
    }

    /// Follows at most `max` scopes at once (`--author-attribution-max-followed`).
    pub fn with_max_followed(mut self, max: usize) -> Self {
        self.max_followed = max;
        self
    }

    /// Whether `scope` may be followed: it already is, or the follower is
    /// under the cap. A refusal is counted.
    fn may_follow(&self, scope: &Scope) -> bool {
        let followed = self.follower.subscriptions();
        if followed.len() < self.max_followed || followed.contains(scope) {
            return true;
        }
        self.engine().metrics().follow_refusals.inc();
        false
    }

    /// Configured-author mode answers every Resolve at once, tier
    /// `configured`, without looking for a fact.
    pub fn with_author_mode(mut self, mode: AuthorMode) -> Self {
        self.author_mode = mode;
        self
    }

    fn policy(&self) -> MirrorPolicy {
        self.policy.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A changed configuration takes effect: the next window is committed
    /// by `writer` under `policy`, and a hold is lifted. Waits for a
    /// window being committed to finish.
    pub async fn reconfigure(&self, writer: GitWriter, policy: MirrorPolicy) -> Result<(), Status> {
        let git = self.writer_unheld()?;
        let skipped = unsealed(&writer);
        tokio::task::spawn_blocking(move || *git.lock().unwrap_or_else(|e| e.into_inner()) = writer)
            .await
            .map_err(|e| Status::internal(format!("the Git writer stopped: {e}")))?;
        *self.policy.lock().unwrap_or_else(|e| e.into_inner()) = policy;
        *self.unsealed.lock().unwrap_or_else(|e| e.into_inner()) = skipped;
        *self.held.lock().unwrap_or_else(|e| e.into_inner()) = None;
        Ok(())
    }

    /// Nothing is committed (or pushed) until [`Api::reconfigure`]: `why`
    /// says what to fix.
    pub fn hold(&self, why: String) {
        *self.held.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    }

    fn engine(&self) -> &Arc<Engine> {
        self.attributor.engine()
    }

    /// Deletion intent, then (for a write or a removal) the author.
    async fn resolve_event(&self, mut req: proto::ResolveRequest, keep: Object) -> Result<Attributed1, Status> {
        let (scope, version) = scope_of(req.r#type.take())?;
        let kind = watch_kind(&req.event_type)?;
        // `Resolve` reads the object's metadata alone, parsed without
        // building the object (a ConfigMap's or Secret's data, or
        // managedFields, can be most of the bytes); an object of another
        // shape takes the whole parse, which also says what is wrong with it.
        if keep == Object::Metadata
            && let Some(meta) = ObjectMeta::parse(&req.object_json)
        {
            if kind.is_change() && !meta.names_an_object() {
                let event = WatchEvent { kind, object: parse_object(&req.object_json)? };
                usable(&event, &req.event_type)?;
            }
            return Ok(self.attribute(&scope, version, kind, meta, None, None).await);
        }
        let event = WatchEvent { kind, object: parse_object(&req.object_json)? };
        usable(&event, &req.event_type)?;
        if keep == Object::Whole && self.skips_write(&scope, kind, &event.object) {
            return Ok((proto::ResolveResponse { action: SKIPPED.into(), ..Default::default() }, None));
        }
        let meta = event.meta();
        let object = (keep == Object::Whole).then_some(event.object);
        Ok(self.attribute(&scope, version, kind, meta, object, None).await)
    }

    /// Whether the event writes a sensitive type the writer cannot seal (a
    /// terminating object is a removal, which goes ahead). Counted.
    fn skips_write(&self, scope: &Scope, kind: WatchKind, object: &serde_json::Value) -> bool {
        let gr = &scope.group_resource;
        let skips = kind.is_change()
            && !is_logically_absent(object)
            && self
                .unsealed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_some_and(|t| t.contains(&gr.group, &gr.resource));
        if skips {
            self.engine().metrics().mirror_sensitive_skipped.inc();
        }
        skips
    }

    /// `object`: the whole object, when the caller commits the change it makes.
    async fn attribute(
        &self,
        scope: &Scope,
        version: String,
        kind: WatchKind,
        meta: ObjectMeta,
        object: Option<serde_json::Value>,
        written_at_us: Option<i64>,
    ) -> Attributed1 {
        // A watcher asking about a type covers it: follow its stream.
        if kind.is_change() {
            self.ensure_following(scope);
        }
        let Attributed { intent, resolution } = match self.author_mode {
            AuthorMode::Attributed => self.attributor.attribute(scope, &version, kind, meta, written_at_us).await,
            AuthorMode::Configured => {
                let intent = self.attributor.observe(scope, kind, meta);
                let resolution = intent.query.is_some().then_some(Resolution {
                    tier: Tier::Configured,
                    fact: None,
                    waited: std::time::Duration::ZERO,
                });
                Attributed { intent, resolution }
            }
        };
        let action = intent.action;
        let mut out = proto::ResolveResponse { action: action.label().into(), ..Default::default() };
        let (Some(r), Some(q)) = (resolution, intent.query) else {
            return (out, None);
        };
        out.tier = r.tier.label().into();
        out.author = r.author().unwrap_or_default().into();
        out.actor_kind = r.actor_kind().label().into();
        out.waited_ms = r.waited.as_millis() as u64;
        let Some(object) = object else {
            // The answer alone: it takes the fact the index handed out.
            out.fact = r.fact.map(|f| Arc::try_unwrap(f).map_or_else(|f| proto::Fact::from(&*f), proto::Fact::from));
            return (out, None);
        };
        out.fact = r.fact.as_deref().map(proto::Fact::from);
        let change = Change {
            object: ObjectKey {
                group: scope.group_resource.group.clone(),
                version,
                resource: scope.group_resource.resource.clone(),
                namespace: q.namespace.clone(),
                name: q.name.clone(),
            },
            action: if action == Action::Delete { CommitAction::Delete } else { CommitAction::Write(object) },
            author: r.fact.as_deref().map(|f| ResolvedAuthor::from_fact(&f.fact)),
            tier: r.tier,
            audit_id: r.fact.as_deref().map(|f| f.fact.audit_id.clone()).filter(|a| !a.is_empty()),
            observed_at: std::time::SystemTime::now(),
        };
        (out, Some(change))
    }

    /// Drops the changes of excluded actors (counted) and, when the target's
    /// prune mode forbids it, observed removals (kept).
    fn filter(&self, changes: Vec<Change>, exclude_users: &[String]) -> Filtered {
        let mut f = Filtered::default();
        let removes = self.policy().removes_on_event();
        for c in changes {
            if excluded_actor(c.author.as_ref().map(|a| a.username.as_str()), exclude_users) {
                f.excluded += 1;
                self.engine().metrics().mirror_excluded.get_or_create(&ReasonLabel { reason: "actor".into() }).inc();
            } else if matches!(c.action, CommitAction::Delete) && !removes {
                f.kept += 1;
            } else {
                f.changes.push(c);
            }
        }
        f
    }

    fn writer(&self) -> Result<Arc<Mutex<GitWriter>>, Status> {
        if let Some(why) = self.held.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Err(Status::failed_precondition(format!("nothing is committed: {why}")));
        }
        self.writer_unheld()
    }

    fn writer_unheld(&self) -> Result<Arc<Mutex<GitWriter>>, Status> {
        self.git.clone().ok_or_else(|| {
            Status::failed_precondition(
                "Git authoring is off: start the sidecar with --git-repo DIR or --git-target NS/NAME",
            )
        })
    }

    /// Commits on a blocking thread. A failed push is reported beside the
    /// outcome: the window is in the clone and the next call pushes it.
    async fn commit_blocking(
        &self,
        changes: Vec<Change>,
        kind: CommitKind,
        requested: Option<Requested>,
    ) -> Result<(CommitOutcome, String), Status> {
        let git = self.writer()?;
        let (outcome, push_error) = tokio::task::spawn_blocking(move || {
            let mut writer = git.lock().unwrap_or_else(|e| e.into_inner());
            writer.commit_keeping(&changes, &kind, requested.as_ref())
        })
        .await
        .map_err(|e| Status::internal(format!("the Git writer stopped: {e}")))?
        .map_err(|e| match e {
            GitError::GitPathRefused(refusal) => git_path_refused(&refusal),
            e => Status::unavailable(format!("committing the window failed: {e}")),
        })?;
        let push_error = push_error.map(|e| {
            self.engine().metrics().mirror_push_failures.inc();
            tracing::warn!(error = %e, "push failed; the commits stay in the clone and go with the next push");
            e.to_string()
        });
        Ok((outcome, push_error.unwrap_or_default()))
    }

    /// Reconcile's first half, on the clone: the live objects' documents,
    /// and the type's documents anywhere under the target's path in the
    /// listed scopes, found by identity. The objects are handed back, not
    /// copied.
    async fn reconcile_docs(
        &self,
        (group, resource): (String, String),
        scopes: Vec<WatchScope>,
        live: Vec<(ObjectKey, serde_json::Value)>,
    ) -> Result<(Vec<Doc>, Vec<Doc>, Vec<(ObjectKey, serde_json::Value)>), Status> {
        let git = self.writer()?;
        tokio::task::spawn_blocking(move || {
            let mut writer = git.lock().unwrap_or_else(|e| e.into_inner());
            let kind = live.iter().find_map(|(_, o)| o.get("kind").and_then(|k| k.as_str())).map(str::to_owned);
            let (tree, docs) = writer.reconcile_documents(&group, &resource, kind.as_deref(), &scopes, &live)?;
            Ok::<_, runtime::attribution::commit::GitError>((tree, docs, live))
        })
        .await
        .map_err(|e| Status::internal(format!("the Git writer stopped: {e}")))?
        .map_err(|e| Status::unavailable(format!("reading the mirror for the reconcile failed: {e}")))
    }

    fn refs(&self) -> std::sync::MutexGuard<'_, Refs> {
        self.refs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes one reference on `scope` (for the process itself: `--follow`);
    /// returns the count after.
    pub fn acquire(&self, scope: &Scope) -> Result<u32, Status> {
        self.acquire_for(None, scope)
    }

    fn acquire_for(&self, connection: Option<Connection>, scope: &Scope) -> Result<u32, Status> {
        if !self.may_follow(scope) {
            return Err(Status::resource_exhausted(format!(
                "{scope}: {} types are followed already, the most --author-attribution-max-followed allows; \
                 release one, or raise the flag",
                self.max_followed
            )));
        }
        let mut refs = self.refs();
        if let Some(c) = connection {
            *refs.by_connection.entry(c).or_default().entry(scope.clone()).or_default() += 1;
        }
        let n = refs.by_scope.entry(scope.clone()).or_default();
        *n += 1;
        self.follower.acquire(scope);
        Ok(*n)
    }

    /// Drops one reference on `scope`, the caller's own first; returns the
    /// count left, `None` when nobody holds one.
    fn release_for(&self, connection: Option<Connection>, scope: &Scope) -> Option<u32> {
        let mut refs = self.refs();
        let n = refs.by_scope.get_mut(scope)?;
        *n -= 1;
        let left = *n;
        if left == 0 {
            refs.by_scope.remove(scope);
        }
        // The caller's reference if it holds one, else another connection's
        // (a reference is not owned: any client may release it).
        let holder = connection
            .filter(|c| refs.by_connection.get(c).is_some_and(|h| h.contains_key(scope)))
            .or_else(|| refs.by_connection.iter().find(|(_, h)| h.contains_key(scope)).map(|(c, _)| *c));
        if let Some(c) = holder
            && let Some(held) = refs.by_connection.get_mut(&c)
        {
            if let Some(k) = held.get_mut(scope) {
                *k -= 1;
                if *k == 0 {
                    held.remove(scope);
                }
            }
            if held.is_empty() {
                refs.by_connection.remove(&c);
            }
        }
        self.follower.release(scope);
        Some(left)
    }

    /// The connection went away: the references it still held are dropped.
    pub fn connection_closed(&self, connection: Connection) {
        let mut refs = self.refs();
        let Some(held) = refs.by_connection.remove(&connection) else { return };
        for (scope, k) in held {
            if let Some(n) = refs.by_scope.get_mut(&scope) {
                *n = n.saturating_sub(k);
                if *n == 0 {
                    refs.by_scope.remove(&scope);
                }
            }
            for _ in 0..k {
                self.follower.release(&scope);
            }
            tracing::debug!(%scope, references = k, "the client that acquired it went away: its references are released");
        }
    }

    /// Follows `scope` as a Resolve would (the implicit reference, renewed
    /// here) and waits, at most [`FOLLOW_WAIT`], until the follower has read
    /// its stream to the tail: an Explain asked with `follow` (`kubectl
    /// reverser why`) counts facts that arrived before anyone followed the
    /// type. Past the bound it answers from what the index holds.
    async fn follow_and_read(&self, scope: &Scope) {
        self.ensure_following(scope);
        let mut caught_up = self.follower.caught_up();
        let read = async {
            self.follower.settled().await;
            let _ = caught_up.wait_for(|c| *c).await;
        };
        if tokio::time::timeout(FOLLOW_WAIT, read).await.is_err() {
            tracing::warn!(%scope, wait = %runtime::kubeconfig::bounds::humanize(FOLLOW_WAIT), "Explain asked to follow the type, and the follower has not read its stream yet; answering from what the index holds");
        }
    }

    /// The first Resolve of a type takes its one reference; the check and
    /// the take happen under one lock, so concurrent first Resolves take one.
    /// Every Resolve renews it.
    fn ensure_following(&self, scope: &Scope) {
        let now = self.engine().clock().now_ms();
        let mut implicit = self.implicit.lock().unwrap_or_else(|e| e.into_inner());
        // No copy of the scope on the per-call path once it is followed.
        if let Some(last) = implicit.get_mut(scope) {
            *last = now;
        } else if self.may_follow(scope) {
            implicit.insert(scope.clone(), now);
            self.follower.acquire(scope);
        } else {
            // Answered from what the index holds (facts of it never arrive).
            tracing::debug!(%scope, max = self.max_followed, "a Resolve of a type not followed, past --author-attribution-max-followed: not followed");
        }
    }

    /// Drops the follow of every scope no Resolve asked about within `idle_ms`
    /// (explicit Acquires are untouched). Returns how many were released.
    pub fn release_idle(&self, idle_ms: u64) -> usize {
        let now = self.engine().clock().now_ms();
        let mut implicit = self.implicit.lock().unwrap_or_else(|e| e.into_inner());
        let before = implicit.len();
        implicit.retain(|scope, last| {
            let keep = now.saturating_sub(*last) < idle_ms;
            if !keep {
                tracing::debug!(%scope, "no Resolve asked about this type for a TTL: no longer following it");
                self.follower.release(scope);
            }
            keep
        });
        before - implicit.len()
    }
}

/// A refused folder as the watcher reads it: FAILED_PRECONDITION (the
/// window is kept and retried), the reason in [`GIT_PATH_REFUSED`] for the
/// GitTarget's `GitPathAccepted`, the sentence as the message.
fn git_path_refused(refusal: &rules::mirror::acceptance::Refusal) -> Status {
    let sentence = refusal.to_string();
    tracing::warn!(
        reason = refusal.reason,
        issues = refusal.issues.len(),
        "{sentence}; nothing is committed until the folder is fixed"
    );
    let mut status = Status::failed_precondition(sentence);
    status
        .metadata_mut()
        .insert(runtime::proto::GIT_PATH_REFUSED, tonic::metadata::MetadataValue::from_static(refusal.reason));
    status
}

fn response(
    resolutions: Vec<proto::ResolveResponse>,
    (outcome, push_error): (CommitOutcome, String),
    f: &Filtered,
) -> proto::CommitResponse {
    proto::CommitResponse {
        push_error,
        resolutions,
        commits: outcome.commits.iter().map(|c| c.id.clone()).collect(),
        unchanged: outcome.unchanged as u32,
        rejected: outcome.rejected.iter().map(|r| format!("{}: {}", r.index, r.error)).collect(),
        push_attempts: outcome.push.map_or(0, |p| p.attempts),
        excluded: f.excluded,
        sensitive_skipped: outcome.sensitive_skipped as u32,
        kept: f.kept,
        requested: outcome.requested.map(|r| proto::RequestedCommit {
            outcome: r.label().into(),
            commit: match r {
                Carried::Committed(id) => id,
                _ => String::new(),
            },
        }),
    }
}

#[tonic::async_trait]
impl Attribution for Api {
    async fn resolve(&self, req: Request<proto::ResolveRequest>) -> Result<Response<proto::ResolveResponse>, Status> {
        Ok(Response::new(self.resolve_event(req.into_inner(), Object::Metadata).await?.0))
    }

    async fn commit(&self, req: Request<proto::CommitRequest>) -> Result<Response<proto::CommitResponse>, Status> {
        self.writer()?;
        let req = req.into_inner();
        // Deletion intent in event order; then every resolution concurrently
        // (a removal waiting out its grace delays none of the others); the
        // Git changes keep event order.
        let resolved =
            futures::future::join_all(req.events.into_iter().map(|e| self.resolve_event(e, Object::Whole))).await;
        let mut resolutions = Vec::with_capacity(resolved.len());
        let mut changes = Vec::new();
        for (i, r) in resolved.into_iter().enumerate() {
            let (answer, change) = r.map_err(|s| Status::new(s.code(), format!("event {i}: {}", s.message())))?;
            resolutions.push(answer);
            changes.extend(change);
        }
        let mut filtered = self.filter(changes, &req.exclude_users);
        let skipped = resolutions.iter().filter(|r| r.action == SKIPPED).count();
        let kind = if req.per_event { CommitKind::PerEvent } else { CommitKind::Window };
        // A CommitRequest riding the window (the watcher attributed it).
        let requested =
            req.requested.map(|r| Requested { author: r.author, message: Some(r.message).filter(|m| !m.is_empty()) });
        // The changes go to the writer; the response reads only the counts.
        let mut outcome = self.commit_blocking(std::mem::take(&mut filtered.changes), kind, requested).await?;
        outcome.0.sensitive_skipped += skipped;
        Ok(Response::new(response(resolutions, outcome, &filtered)))
    }

    async fn reconcile(
        &self,
        req: Request<Streaming<proto::ReconcileChunk>>,
    ) -> Result<Response<proto::CommitResponse>, Status> {
        self.writer()?;
        let mut stream = req.into_inner();
        let mut header: Option<proto::ReconcileHeader> = None;
        let mut objects: Vec<serde_json::Value> = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            if let Some(h) = chunk.header {
                if header.is_some() {
                    return Err(Status::invalid_argument("a reconcile carries one header, in its first message"));
                }
                header = Some(h);
            }
            for bytes in &chunk.objects_json {
                // Named by its place in the whole list: the objects before it.
                let object = parse_object(bytes)
                    .map_err(|s| Status::invalid_argument(format!("object {}: {}", objects.len(), s.message())))?;
                objects.push(object);
            }
        }
        let mut header =
            header.ok_or_else(|| Status::invalid_argument("the first reconcile message carries no header"))?;
        let (scope, version) = scope_of(header.r#type.take())?;
        let gr = &scope.group_resource;
        let scopes: Vec<WatchScope> = if header.namespaces.is_empty() {
            vec![WatchScope::Everywhere]
        } else {
            header.namespaces.iter().cloned().map(WatchScope::Namespace).collect()
        };

        // A terminating object is logically absent (spec §1): not live.
        let (dying, live): (Vec<serde_json::Value>, Vec<serde_json::Value>) =
            objects.into_iter().partition(is_logically_absent);
        let key = |o: &serde_json::Value| ObjectKey {
            group: gr.group.clone(),
            version: version.clone(),
            resource: gr.resource.clone(),
            namespace: rules::attribution::audit::meta_field(o, "namespace"),
            name: rules::attribution::audit::meta_field(o, "name"),
        };
        let keyed: Vec<(ObjectKey, serde_json::Value)> = live.into_iter().map(|o| (key(&o), o)).collect();
        let (mut tree, docs, mut keyed) =
            self.reconcile_docs((gr.group.clone(), gr.resource.clone()), scopes, keyed).await?;
        // A terminating object's document goes as an observed deletion
        // (prune mode OnEvent suffices), not as a vanished object.
        let dying: Vec<serde_json::Value> = dying
            .into_iter()
            .filter(|o| {
                let k = key(o);
                let path = format!("{}/{}", k.namespace, k.name);
                let held = tree.iter().any(|d| d.path == path);
                tree.retain(|d| d.path != path);
                held
            })
            .collect();
        let mut plan = reconcile::plan(&docs, &tree, self.policy().removes_on_reconcile(header.prune));
        // What the forward leg last wrote stays as Git has it (no managed
        // fields read when no manager is excluded).
        if !header.exclude_field_managers.is_empty() {
            plan.write.retain(|&i| {
                let manager = last_field_manager(&keyed[i].1);
                !manager.is_some_and(|m| header.exclude_field_managers.iter().any(|x| x == m))
            });
        }

        // Every event of the reconcile is attributed as the engine resolves
        // it; most are unresolved (the change predates the facts held).
        // Each object moves into its event (a plan writes an object once).
        let mut events: Vec<WatchEvent> = plan
            .write
            .iter()
            .map(|&i| WatchEvent { kind: WatchKind::Modified, object: std::mem::take(&mut keyed[i].1) })
            .collect();
        let before = events.len();
        events.retain(|e| !self.skips_write(&scope, e.kind, &e.object));
        let skipped = before - events.len();
        events.extend(dying.into_iter().map(|object| WatchEvent { kind: WatchKind::Modified, object }));
        // A document is named `<namespace>/<name>` (documents_of_type).
        events.extend(plan.remove.iter().filter_map(|p| object_of_document(p)).map(|(namespace, name)| WatchEvent {
            kind: WatchKind::Deleted,
            object: serde_json::json!({"metadata": {"name": name, "namespace": namespace}}),
        }));
        let attributed = futures::future::join_all(
            // A relisted object's wait ends a grace after its own write (its
            // managedFields time): a first start on a populated cluster does
            // not wait a grace per type for facts long since filed.
            events.into_iter().map(|e| {
                let written = rules::attribution::grace::written_at_us(&e.object);
                self.attribute(&scope, version.clone(), e.kind, e.meta(), Some(e.object), written)
            }),
        )
        .await;
        let mut resolutions = Vec::with_capacity(attributed.len());
        let mut changes = Vec::new();
        for (answer, change) in attributed {
            resolutions.push(answer);
            changes.extend(change);
        }
        let mut filtered = self.filter(changes, &header.exclude_users);
        filtered.kept += plan.kept as u32;
        let kind = CommitKind::Reconcile {
            group: gr.group.clone(),
            version: version.clone(),
            resource: gr.resource.clone(),
            revision: header.revision.clone(),
        };
        tracing::info!(
            // The watcher's form of the type (`v1/configmaps`, no leading slash
            // for the core group), so both logs name it alike.
            r#type = %rules::mirror::placement::type_key(&gr.group, &version, &gr.resource),
            write = plan.write.len() - skipped,
            secrets_skipped = skipped,
            remove = plan.remove.len(),
            unchanged = plan.unchanged,
            kept = filtered.kept,
            "reconcile"
        );
        let mut outcome = self.commit_blocking(std::mem::take(&mut filtered.changes), kind, None).await?;
        outcome.0.unchanged += plan.unchanged;
        outcome.0.sensitive_skipped += skipped;
        Ok(Response::new(response(resolutions, outcome, &filtered)))
    }

    async fn explain(&self, req: Request<proto::ExplainRequest>) -> Result<Response<proto::ExplainResponse>, Status> {
        let mut req = req.into_inner();
        let (scope, _) = scope_of(req.r#type.take())?;
        if req.follow {
            self.follow_and_read(&scope).await;
        }
        let q = Query {
            uid: req.uid,
            resource_version: req.resource_version,
            namespace: req.namespace,
            name: req.name,
            labels: req.labels.into_iter().collect(),
            removal: req.removal,
            observed_at_ms: self.engine().clock().now_ms(),
            created_at_us: rules::attribution::index::order::stage_time_us(&req.creation_timestamp),
            written_at_us: None,
            previous: None,
        };
        let e = self.engine().explanation(&scope, &q, self.follower.subscriptions().contains(&scope));
        Ok(Response::new(proto::ExplainResponse::from(&e)))
    }

    async fn acquire(&self, req: Request<proto::FollowRequest>) -> Result<Response<proto::FollowResponse>, Status> {
        let connection = req.extensions().get::<Connection>().copied();
        let r = req.into_inner();
        if r.resource.is_empty() {
            return Err(Status::invalid_argument("resource is required"));
        }
        let scope = Scope::new(r.route, GroupResource::new(r.group, r.resource));
        Ok(Response::new(proto::FollowResponse { refs: self.acquire_for(connection, &scope)? }))
    }

    async fn release(&self, req: Request<proto::FollowRequest>) -> Result<Response<proto::FollowResponse>, Status> {
        let connection = req.extensions().get::<Connection>().copied();
        let r = req.into_inner();
        let scope = Scope::new(r.route, GroupResource::new(r.group, r.resource));
        let left = self
            .release_for(connection, &scope)
            .ok_or_else(|| Status::failed_precondition(format!("{scope} is not acquired: nothing to release")))?;
        Ok(Response::new(proto::FollowResponse { refs: left }))
    }
}

/// The namespace and name a reconcile's document is named by
/// (`GitWriter::documents_of_type`: `<namespace>/<name>`, the namespace
/// empty for a cluster-scoped object).
fn object_of_document(doc: &str) -> Option<(&str, &str)> {
    doc.split_once('/').filter(|(_, name)| !name.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_documents_name_their_object() {
        assert_eq!(object_of_document("shop/web"), Some(("shop", "web")));
        assert_eq!(object_of_document("/shop"), Some(("", "shop")));
        assert_eq!(object_of_document("shop/"), None);
    }
}
