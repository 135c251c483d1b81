//! Watch events as kube-apiserver streams them: one JSON object per line,
//! `{"type": "ADDED|MODIFIED|DELETED|BOOKMARK|ERROR", "object": {...}}`.

use serde_json::{Value, json};

use super::registry::ResourceType;
use super::select::Selectors;
use super::store::{Event, EventType};

/// What one watch asks for: a type, a namespace (or all), selectors.
#[derive(Debug, Clone)]
pub struct WatchFilter {
    pub resource_type: ResourceType,
    pub namespace: Option<String>,
    pub selectors: Selectors,
}

impl WatchFilter {
    /// The event this watch sees for a logged event, if any. With
    /// selectors, an object that starts matching is ADDED and one that
    /// stops matching is DELETED, as the API server's watch filter does.
    pub fn translate(&self, e: &Event) -> Option<(EventType, Value)> {
        if e.resource != self.resource_type.qualified() || self.namespace.as_ref().is_some_and(|ns| *ns != e.namespace)
        {
            return None;
        }
        let now = self.selectors.matches(&e.object);
        let before = e.previous.as_ref().is_some_and(|p| self.selectors.matches(p));
        let ty = match (e.event_type, before, now) {
            (EventType::Added, _, true) => EventType::Added,
            (EventType::Modified, true, true) => EventType::Modified,
            (EventType::Modified, false, true) => EventType::Added,
            (EventType::Modified, true, false) => EventType::Deleted,
            (EventType::Deleted, b, n) if b || n => EventType::Deleted,
            _ => return None,
        };
        Some((ty, e.object.clone()))
    }
}

/// `{"type": ..., "object": ...}`.
pub fn watch_event(ty: &str, object: Value) -> Value {
    json!({"type": ty, "object": object})
}

/// A BOOKMARK's object: only the kind and the resourceVersion (and, ending
/// the initial events of `sendInitialEvents`, the annotation saying so).
pub fn bookmark(t: &ResourceType, rv: u64, initial_events_end: bool) -> Value {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_events_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"kind": t.kind, "apiVersion": t.api_version(), "metadata": meta})
}
