//! Deletion intent (spec §1): the first observation of deletionTimestamp,
//! or a DELETED event, removes the object from Git, attributed to whoever
//! asked for the deletion; later events about it (finalizer updates, the
//! eventual DELETED) are runtime cleanup and change nothing.

use std::collections::HashMap;

use super::Scope;
use super::watch::WatchEvent;

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
#[derive(Debug)]
pub struct IntentTracker {
    removed: HashMap<(Scope, String), Removed>,
    forget_after_ms: u64,
    last_prune_ms: u64,
}

impl IntentTracker {
    /// `forget_after_ms`: how long a fully deleted object is remembered, to
    /// absorb a replayed DELETED (one TTL is plenty).
    pub fn new(forget_after_ms: u64) -> Self {
        Self { removed: HashMap::new(), forget_after_ms, last_prune_ms: 0 }
    }

    pub fn observe(&mut self, scope: &Scope, ev: &WatchEvent, now_ms: u64) -> Action {
        if !ev.is_change() {
            return Action::Ignored;
        }
        self.prune(now_ms);
        let uid = ev.uid();
        let id = if uid.is_empty() { format!("{}/{}", ev.namespace(), ev.name()) } else { uid };
        let key = (scope.clone(), id);
        let deleted = ev.kind == super::watch::WatchKind::Deleted;
        if let Some(r) = self.removed.get_mut(&key) {
            if deleted && r.gone_at_ms.is_none() {
                r.gone_at_ms = Some(now_ms);
            }
            return Action::Noop;
        }
        if ev.is_removal() {
            self.removed.insert(key, Removed { gone_at_ms: deleted.then_some(now_ms) });
            return Action::Delete;
        }
        Action::Write
    }

    /// Objects currently remembered as removed.
    pub fn len(&self) -> usize {
        self.removed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.removed.is_empty()
    }

    fn prune(&mut self, now_ms: u64) {
        if now_ms.saturating_sub(self.last_prune_ms) < self.forget_after_ms.max(1) {
            return;
        }
        self.last_prune_ms = now_ms;
        let horizon = self.forget_after_ms;
        self.removed.retain(|_, r| r.gone_at_ms.is_none_or(|t| now_ms.saturating_sub(t) < horizon));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::attribution::GroupResource;

    fn ev(kind: &str, uid: &str, deletion: bool) -> WatchEvent {
        let mut meta = json!({"uid": uid, "name": "cm", "namespace": "ns"});
        if deletion {
            meta["deletionTimestamp"] = json!("2026-06-25T12:00:00Z");
        }
        serde_json::from_value(json!({"type": kind, "object": {"metadata": meta}})).unwrap()
    }

    #[test]
    fn first_removal_deletes_later_events_are_noops() {
        let s = Scope::new("lab", GroupResource::new("", "configmaps"));
        let mut t = IntentTracker::new(600_000);
        assert_eq!(t.observe(&s, &ev("ADDED", "u1", false), 0), Action::Write);
        // The first observation of deletionTimestamp is the removal ...
        assert_eq!(t.observe(&s, &ev("MODIFIED", "u1", true), 1), Action::Delete);
        // ... finalizer updates and the eventual DELETED change nothing.
        assert_eq!(t.observe(&s, &ev("MODIFIED", "u1", true), 2), Action::Noop);
        assert_eq!(t.observe(&s, &ev("DELETED", "u1", true), 3), Action::Noop);
        // A recreated object (new uid) under the same name is a new object.
        assert_eq!(t.observe(&s, &ev("ADDED", "u2", false), 4), Action::Write);
        assert_eq!(t.observe(&s, &ev("DELETED", "u2", false), 5), Action::Delete);
        assert_eq!(t.observe(&s, &ev("BOOKMARK", "", false), 6), Action::Ignored);
        // Fully deleted objects are forgotten after the horizon.
        assert_eq!(t.len(), 2);
        t.observe(&s, &ev("ADDED", "u3", false), 700_000);
        assert_eq!(t.len(), 0);
    }
}
