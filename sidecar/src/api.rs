//! The Unix-socket gRPC API (`reverser.v1.Attribution`): Resolve, Explain,
//! Acquire and Release, served beside the standard `grpc.health.v1`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rules::attribution::index::Query;
use rules::attribution::intent::Action;
use rules::attribution::render::ObjectKey;
use rules::attribution::watch::{WatchEvent, WatchKind};
use rules::attribution::{GroupResource, Scope};
use runtime::attribution::commit::{Action as CommitAction, Change, GitWriter, ResolvedAuthor};
use runtime::attribution::transport::{AnyFollower, FactFollower};
use runtime::attribution::{Attributed, Attributor, Engine};
use runtime::proto::{self, attribution_server::Attribution};
use tonic::{Request, Response, Status};

pub struct Api {
    /// Deletion intent, then the author: the one sequence replay runs too.
    attributor: Attributor,
    /// Git authoring, when the sidecar runs with --git-repo. Blocking: used
    /// from a blocking thread, one window at a time.
    git: Option<Arc<Mutex<GitWriter>>>,
    follower: AnyFollower,
    /// References held per scope by explicit Acquires (and --follow).
    refs: Mutex<HashMap<Scope, u32>>,
    /// Scopes a Resolve made this process follow (a watcher asking about a
    /// type covers it), with when a Resolve last asked, on the engine's
    /// clock: released once nobody asked for a TTL, so routes that only
    /// junk ever named stop costing Redis reads.
    implicit: Mutex<HashMap<Scope, u64>>,
}

fn scope_of(t: Option<&proto::TypeRef>) -> Result<(Scope, String), Status> {
    let t = t.ok_or_else(|| Status::invalid_argument("type is required: route, group, version, resource"))?;
    if t.resource.is_empty() {
        return Err(Status::invalid_argument("type.resource is required (e.g. \"configmaps\")"));
    }
    Ok((Scope::new(&t.route, GroupResource::new(&t.group, &t.resource)), t.version.clone()))
}

fn watch_kind(s: &str) -> Result<WatchKind, Status> {
    serde_json::from_value(serde_json::Value::String(s.to_owned())).map_err(|_| {
        Status::invalid_argument(format!("event_type {s:?} is not ADDED, MODIFIED, DELETED, BOOKMARK or ERROR"))
    })
}

impl Api {
    pub fn new(engine: Arc<Engine>, follower: AnyFollower, git: Option<GitWriter>) -> Self {
        Self {
            attributor: Attributor::new(engine),
            git: git.map(|g| Arc::new(Mutex::new(g))),
            follower,
            refs: Mutex::new(HashMap::new()),
            implicit: Mutex::new(HashMap::new()),
        }
    }

    fn engine(&self) -> &Arc<Engine> {
        self.attributor.engine()
    }

    /// Deletion intent, then (for a write or a removal) the author. Returns
    /// the answer and, for a Git change, the parsed event.
    async fn resolve_event(
        &self,
        req: proto::ResolveRequest,
    ) -> Result<(proto::ResolveResponse, Option<Change>), Status> {
        let (scope, version) = scope_of(req.r#type.as_ref())?;
        let kind = watch_kind(&req.event_type)?;
        let object = if req.object_json.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_slice(&req.object_json)
                .map_err(|e| Status::invalid_argument(format!("object_json is not JSON: {e}")))?
        };
        let event = WatchEvent { kind, object };
        if let Some(why) = event.unusable() {
            return Err(Status::invalid_argument(format!(
                "object_json of a {} event must be the watched object: {why}",
                req.event_type
            )));
        }
        // A watcher asking about a type covers it: follow its stream.
        if event.is_change() {
            self.ensure_following(&scope);
        }
        let Attributed { intent, resolution } = self.attributor.attribute(&scope, &version, &event).await;
        let action = intent.action;
        let mut out = proto::ResolveResponse { action: action.label().into(), ..Default::default() };
        let (Some(r), Some(q)) = (resolution, intent.query) else {
            return Ok((out, None));
        };
        out.tier = r.tier.label().into();
        out.author = r.author().unwrap_or_default().into();
        out.actor_kind = r.actor_kind().label().into();
        out.waited_ms = r.waited.as_millis() as u64;
        out.fact = r.fact.as_deref().map(proto::Fact::from);
        let change = Change {
            object: ObjectKey {
                group: scope.group_resource.group.clone(),
                version,
                resource: scope.group_resource.resource.clone(),
                namespace: q.namespace.clone(),
                name: q.name.clone(),
            },
            action: if action == Action::Delete { CommitAction::Delete } else { CommitAction::Write(event.object) },
            author: r.fact.as_deref().map(|f| ResolvedAuthor::from_fact(&f.fact)),
            tier: r.tier,
            audit_id: r.fact.as_deref().map(|f| f.fact.audit_id.clone()).filter(|a| !a.is_empty()),
            observed_at: std::time::SystemTime::now(),
        };
        Ok((out, Some(change)))
    }

    fn refs(&self) -> std::sync::MutexGuard<'_, HashMap<Scope, u32>> {
        self.refs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes one reference on `scope`; returns the count after.
    pub fn acquire(&self, scope: &Scope) -> u32 {
        Self::take(&mut self.refs(), &self.follower, scope)
    }

    fn take(refs: &mut HashMap<Scope, u32>, follower: &AnyFollower, scope: &Scope) -> u32 {
        let n = refs.entry(scope.clone()).or_default();
        *n += 1;
        follower.acquire(scope);
        *n
    }

    /// The first Resolve of a type takes its one reference; the check and
    /// the take happen under one lock, so concurrent first Resolves take one.
    /// Every Resolve renews it.
    fn ensure_following(&self, scope: &Scope) {
        let now = self.engine().clock().now_ms();
        let mut implicit = self.implicit.lock().unwrap_or_else(|e| e.into_inner());
        if implicit.insert(scope.clone(), now).is_none() {
            self.follower.acquire(scope);
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

#[tonic::async_trait]
impl Attribution for Api {
    async fn resolve(&self, req: Request<proto::ResolveRequest>) -> Result<Response<proto::ResolveResponse>, Status> {
        Ok(Response::new(self.resolve_event(req.into_inner()).await?.0))
    }

    async fn commit(&self, req: Request<proto::CommitRequest>) -> Result<Response<proto::CommitResponse>, Status> {
        let Some(git) = self.git.clone() else {
            return Err(Status::failed_precondition("Git authoring is off: start the sidecar with --git-repo DIR"));
        };
        // Deletion intent in event order; then every resolution concurrently
        // (a removal waiting out its grace delays none of the others); the
        // Git changes keep event order.
        let events = req.into_inner().events;
        let resolved = futures::future::join_all(events.into_iter().map(|e| self.resolve_event(e))).await;
        let mut resolutions = Vec::with_capacity(resolved.len());
        let mut changes = Vec::new();
        for (i, r) in resolved.into_iter().enumerate() {
            let (answer, change) = r.map_err(|s| Status::new(s.code(), format!("event {i}: {}", s.message())))?;
            resolutions.push(answer);
            changes.extend(change);
        }
        let outcome = tokio::task::spawn_blocking(move || {
            let mut writer = git.lock().unwrap_or_else(|e| e.into_inner());
            writer.commit(&changes).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| Status::internal(format!("the Git writer stopped: {e}")))?
        .map_err(|e| Status::unavailable(format!("committing the window failed: {e}")))?;
        Ok(Response::new(proto::CommitResponse {
            resolutions,
            commits: outcome.commits.iter().map(|c| c.id.clone()).collect(),
            unchanged: outcome.unchanged as u32,
            rejected: outcome.rejected.iter().map(|r| format!("{}: {}", r.index, r.error)).collect(),
            push_attempts: outcome.push.map_or(0, |p| p.attempts),
        }))
    }

    async fn explain(&self, req: Request<proto::ExplainRequest>) -> Result<Response<proto::ExplainResponse>, Status> {
        let req = req.into_inner();
        let (scope, _) = scope_of(req.r#type.as_ref())?;
        let q = Query {
            uid: req.uid,
            resource_version: req.resource_version,
            namespace: req.namespace,
            name: req.name,
            labels: req.labels.into_iter().collect(),
            removal: req.removal,
            observed_at_ms: self.engine().clock().now_ms(),
        };
        let e = self.engine().explanation(&scope, &q, self.follower.subscriptions().contains(&scope));
        Ok(Response::new(proto::ExplainResponse::from(&e)))
    }

    async fn acquire(&self, req: Request<proto::FollowRequest>) -> Result<Response<proto::FollowResponse>, Status> {
        let r = req.into_inner();
        if r.resource.is_empty() {
            return Err(Status::invalid_argument("resource is required"));
        }
        let scope = Scope::new(r.route, GroupResource::new(r.group, r.resource));
        Ok(Response::new(proto::FollowResponse { refs: Api::acquire(self, &scope) }))
    }

    async fn release(&self, req: Request<proto::FollowRequest>) -> Result<Response<proto::FollowResponse>, Status> {
        let r = req.into_inner();
        let scope = Scope::new(r.route, GroupResource::new(r.group, r.resource));
        let mut refs = self.refs();
        let Some(n) = refs.get_mut(&scope) else {
            return Err(Status::failed_precondition(format!("{scope} is not acquired: nothing to release")));
        };
        *n -= 1;
        let left = *n;
        if left == 0 {
            refs.remove(&scope);
        }
        self.follower.release(&scope);
        Ok(Response::new(proto::FollowResponse { refs: left }))
    }
}
