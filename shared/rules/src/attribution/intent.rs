//! Deletion intent (spec §1): the first observation of deletionTimestamp,
//! or a DELETED event, removes the object from Git, attributed to whoever
//! asked for the deletion; later events about it (finalizer updates, the
//! eventual DELETED) are runtime cleanup and change nothing.

use std::collections::HashMap;

use super::Scope;
use super::watch::{ObjectMeta, WatchKind};

/// What a watch event does to the Git tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Write,
    /// The first observation of a removal.
    Delete,
    /// A later event about an already-removed object.
    Noop,
    /// BOOKMARK, ERROR.
    Ignored,
}

impl Action {
    pub fn label(self) -> &'static str {
        match self {
            Action::Write => "write",
            Action::Delete => "delete",
            Action::Noop => "noop",
            Action::Ignored => "ignored",
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Removed {
    /// The final DELETED was seen: nothing more will come, so the entry can
    /// be forgotten after `forget_after_ms`.
    gone_at_ms: Option<u64>,
}

/// Remembers which objects are already logically absent. An object is keyed
/// by uid (unique across space and time), by namespace/name when it has none.
/// Per scope, so that observing an event that is no removal (nearly all of
/// them) looks its object up without building a key.
#[derive(Debug)]
pub struct IntentTracker {
    removed: HashMap<Scope, HashMap<String, Removed>>,
    forget_after_ms: u64,
    last_prune_ms: u64,
}

impl IntentTracker {
    /// `forget_after_ms`: how long a fully deleted object is remembered, to
    /// absorb a replayed DELETED (one TTL is plenty).
    pub fn new(forget_after_ms: u64) -> Self {
        Self { removed: HashMap::new(), forget_after_ms, last_prune_ms: 0 }
    }

    pub fn observe(&mut self, scope: &Scope, kind: WatchKind, meta: &ObjectMeta, now_ms: u64) -> Action {
        if !kind.is_change() {
            return Action::Ignored;
        }
        self.prune(now_ms);
        let named;
        let id = if meta.uid.is_empty() {
            named = format!("{}/{}", meta.namespace, meta.name);
            &named
        } else {
            &meta.uid
        };
        let deleted = kind == WatchKind::Deleted;
        if let Some(r) = self.removed.get_mut(scope).and_then(|s| s.get_mut(id.as_str())) {
            if deleted && r.gone_at_ms.is_none() {
                r.gone_at_ms = Some(now_ms);
            }
            return Action::Noop;
        }
        if meta.is_removal(kind) {
            let removed = Removed { gone_at_ms: deleted.then_some(now_ms) };
            self.removed.entry(scope.clone()).or_default().insert(id.clone(), removed);
            return Action::Delete;
        }
        Action::Write
    }

    /// Objects currently remembered as removed.
    pub fn len(&self) -> usize {
        self.removed.values().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn prune(&mut self, now_ms: u64) {
        if now_ms.saturating_sub(self.last_prune_ms) < self.forget_after_ms.max(1) {
            return;
        }
        self.last_prune_ms = now_ms;
        let horizon = self.forget_after_ms;
        for objects in self.removed.values_mut() {
            objects.retain(|_, r| r.gone_at_ms.is_none_or(|t| now_ms.saturating_sub(t) < horizon));
        }
        self.removed.retain(|_, objects| !objects.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::attribution::GroupResource;
    use crate::attribution::watch::WatchEvent;

    fn ev(kind: &str, uid: &str, deletion: bool) -> (WatchKind, ObjectMeta) {
        let mut meta = json!({"uid": uid, "name": "cm", "namespace": "ns"});
        if deletion {
            meta["deletionTimestamp"] = json!("2026-06-25T12:00:00Z");
        }
        let e: WatchEvent = serde_json::from_value(json!({"type": kind, "object": {"metadata": meta}})).unwrap();
        (e.kind, e.meta())
    }

    impl IntentTracker {
        fn saw(&mut self, s: &Scope, (kind, meta): (WatchKind, ObjectMeta), now_ms: u64) -> Action {
            self.observe(s, kind, &meta, now_ms)
        }
    }

    #[test]
    fn first_removal_deletes_later_events_are_noops() {
        let s = Scope::new("lab", GroupResource::new("", "configmaps"));
        let mut t = IntentTracker::new(600_000);
        assert_eq!(t.saw(&s, ev("ADDED", "u1", false), 0), Action::Write);
        // The first observation of deletionTimestamp is the removal ...
        assert_eq!(t.saw(&s, ev("MODIFIED", "u1", true), 1), Action::Delete);
        // ... finalizer updates and the eventual DELETED change nothing.
        assert_eq!(t.saw(&s, ev("MODIFIED", "u1", true), 2), Action::Noop);
        assert_eq!(t.saw(&s, ev("DELETED", "u1", true), 3), Action::Noop);
        // A recreated object (new uid) under the same name is a new object.
        assert_eq!(t.saw(&s, ev("ADDED", "u2", false), 4), Action::Write);
        assert_eq!(t.saw(&s, ev("DELETED", "u2", false), 5), Action::Delete);
        assert_eq!(t.saw(&s, ev("BOOKMARK", "", false), 6), Action::Ignored);
        // Fully deleted objects are forgotten after the horizon.
        assert_eq!(t.len(), 2);
        t.saw(&s, ev("ADDED", "u3", false), 700_000);
        assert_eq!(t.len(), 0);
    }
}
