//! The one sequence every caller runs on a watch event: deletion intent
//! first (spec §1: the first observation of a removal deletes, later events
//! change nothing), then, for a write or a removal, the author. The socket
//! API's `Resolve` and `Commit`, the watcher's windows and `replay` all go
//! through [`Attributor`], so they cannot disagree about either step.

use std::sync::{Arc, Mutex};

use rules::attribution::Scope;
use rules::attribution::index::Query;
use rules::attribution::intent::{Action, IntentTracker};
use rules::attribution::watch::{ObjectMeta, WatchEvent, WatchKind};

use super::{Engine, Resolution};

/// What deletion intent decided about one event, and the index query that
/// finds its author when it has one to find.
#[derive(Debug, Clone, PartialEq)]
pub struct Intent {
    pub action: Action,
    /// `Some` for a write or a removal; `None` for noop / ignored.
    pub query: Option<Query>,
}

/// An event's intent and, for a write or a removal, its resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct Attributed {
    pub intent: Intent,
    pub resolution: Option<Resolution>,
}

/// The engine plus the deletion-intent memory of one stream of watch events.
#[derive(Debug)]
pub struct Attributor {
    engine: Arc<Engine>,
    intent: Mutex<IntentTracker>,
}

impl Attributor {
    pub fn new(engine: Arc<Engine>) -> Self {
        // A fully deleted object is remembered one TTL, to absorb a replayed DELETED.
        let ttl = engine.config().index.ttl_ms;
        Self { engine, intent: Mutex::new(IntentTracker::new(ttl)) }
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Deletion intent for an event of `kind` about the object `meta`
    /// describes, observed now. Synchronous, so callers observe events in
    /// the order the watch delivered them even when their resolutions then
    /// run concurrently.
    pub fn observe(&self, scope: &Scope, kind: WatchKind, meta: ObjectMeta) -> Intent {
        let now = self.engine.clock().now_ms();
        let action = self.intent.lock().unwrap_or_else(|e| e.into_inner()).observe(scope, kind, &meta, now);
        let query = matches!(action, Action::Write | Action::Delete).then(|| meta.query(action == Action::Delete, now));
        Intent { action, query }
    }

    /// [`Attributor::observe`] for a whole watch event.
    pub fn observe_event(&self, scope: &Scope, event: &WatchEvent) -> Intent {
        self.observe(scope, event.kind, event.meta())
    }

    /// The author of an observed event; `None` when it has none to find.
    pub async fn resolve(&self, scope: &Scope, version: &str, intent: &Intent) -> Option<Resolution> {
        let q = intent.query.as_ref()?;
        Some(self.engine.resolve(scope, version, q).await)
    }

    /// [`Attributor::observe`], then [`Attributor::resolve`]. `written_at_us`:
    /// when a relisted object's version was written (its managedFields), so
    /// its wait ends a grace after that write; `None` for a watch event.
    pub async fn attribute(
        &self,
        scope: &Scope,
        version: &str,
        kind: WatchKind,
        meta: ObjectMeta,
        written_at_us: Option<i64>,
    ) -> Attributed {
        let mut intent = self.observe(scope, kind, meta);
        if let Some(q) = &mut intent.query {
            q.written_at_us = written_at_us;
        }
        let resolution = self.resolve(scope, version, &intent).await;
        Attributed { intent, resolution }
    }
}
