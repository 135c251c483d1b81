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
