//! Watch events as the API server streams them, and what the join side
//! reads of them: the object's identity, labels, and whether it is a removal.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::audit::meta_field;
use super::index::Query;

/// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum WatchKind {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

/// One watch event: `{"type": ..., "object": {...}}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WatchEvent {
    #[serde(rename = "type")]
    pub kind: WatchKind,
    #[serde(default)]
    pub object: Value,
}

impl WatchEvent {
    /// Why this event's object cannot be attributed, if it cannot: a change
    /// (ADDED, MODIFIED, DELETED) carries an object with `metadata` naming it
    /// by a name or a uid. Anything else (`null`, `123`, `[]`, `{}`) names no
    /// object, and waiting a grace for its fact could only end `absent`.
    pub fn unusable(&self) -> Option<&'static str> {
        if !self.is_change() {
            return None;
        }
        let Some(object) = self.object.as_object() else {
            return Some("the object is not a JSON object");
        };
        let Some(meta) = object.get("metadata").and_then(Value::as_object) else {
            return Some("the object has no metadata");
        };
        let named = |f: &str| meta.get(f).and_then(Value::as_str).is_some_and(|s| !s.is_empty());
        if !named("name") && !named("uid") {
            return Some("the object's metadata has neither a name nor a uid");
        }
        None
    }

    /// BOOKMARK and ERROR carry no change.
    pub fn is_change(&self) -> bool {
        !matches!(self.kind, WatchKind::Bookmark | WatchKind::Error)
    }

    /// A DELETED event, or an object carrying deletionTimestamp: logically
    /// absent from the intent tree (spec §1).
    pub fn is_removal(&self) -> bool {
        self.kind == WatchKind::Deleted
            || self.object.get("metadata").and_then(|m| m.get("deletionTimestamp")).is_some_and(|v| !v.is_null())
    }

    pub fn uid(&self) -> String {
        meta_field(&self.object, "uid")
    }

    pub fn namespace(&self) -> String {
        meta_field(&self.object, "namespace")
    }

    pub fn name(&self) -> String {
        meta_field(&self.object, "name")
    }

    pub fn labels(&self) -> BTreeMap<String, String> {
        self.object
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .map(|l| l.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
            .unwrap_or_default()
    }

    /// The index query for this event, observed at `observed_at_ms`.
    pub fn query(&self, removal: bool, observed_at_ms: u64) -> Query {
        Query {
            uid: self.uid(),
            resource_version: meta_field(&self.object, "resourceVersion"),
            namespace: self.namespace(),
            name: self.name(),
            labels: self.labels(),
            removal,
            observed_at_ms,
        }
    }
}
