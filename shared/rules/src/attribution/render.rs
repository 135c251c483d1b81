//! The render layer (`spec/attribution.md` §1): what a watched object looks
//! like in the Git mirror. [`sanitize`] (its own module,
//! [`super::sanitize`]) keeps the object's intent and drops what the server
//! owns; [`to_stable_yaml`] gives the same object the same bytes;
//! [`layout_path`] gives a new object its default file,
//! gitops-reverser's `<namespace or _cluster>/[<group>/]<resource>/<name>.yaml`
//! (`crate::mirror::placement`).
//!
//! Every function here is pure: plain data in, bytes or a path out.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

pub use super::sanitize::sanitize;
use crate::{Error, Result};

/// Which object a change is about: the layout's five coordinates.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ObjectKey {
    /// API group; empty for the core group.
    pub group: String,
    pub version: String,
    /// Plural resource name, as in the API path (`configmaps`).
    pub resource: String,
    /// Empty for a cluster-scoped object.
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    /// `group/version/resource namespace/name`, for messages and logs.
    pub fn display(&self) -> String {
        let group = if self.group.is_empty() { "core" } else { &self.group };
        let ns = if self.namespace.is_empty() { "_cluster" } else { &self.namespace };
        format!("{group}/{}/{} {ns}/{}", self.version, self.resource, self.name)
    }
}

/// Whether the object carries `metadata.deletionTimestamp`: by §1 it is then
/// logically absent from the intent tree. Offered for the caller routing
/// events (the routing decision itself arrives here already made).
pub fn is_logically_absent(object: &Value) -> bool {
    crate::attribution::audit::metadata(object, "deletionTimestamp").is_some_and(|v| !v.is_null())
}

/// Stable YAML: the same object gives the same bytes, whatever order its keys
/// arrived in. `apiVersion`, `kind`, `metadata` lead at the top and `name`,
/// `namespace` lead in `metadata` (the order people read manifests in); every
/// other map is sorted by key.
pub fn to_stable_yaml(key: &ObjectKey, object: &Value) -> Result<String> {
    serde_norway::to_string(&Canonical { value: object, level: Level::Top })
        .map_err(|e| Error::Render { object: key.display(), message: format!("YAML serialization failed: {e}") })
}

/// [`sanitize`] then [`to_stable_yaml`]: the manifest bytes committed for a
/// write.
pub fn render_manifest(key: &ObjectKey, object: &Value) -> Result<Vec<u8>> {
    let clean = sanitize(key, object)?;
    Ok(to_stable_yaml(key, &clean)?.into_bytes())
}

/// The default layout, gitops-reverser's canonical path
/// `<namespace or _cluster>/[<group>/]<resource>/<name>.yaml` (core group and
/// version omitted: a preferred-version bump moves no file). Where a file
/// already holds the object, the mirror edits it there instead
/// (`crate::mirror::document`); `spec.placement` may choose other paths.
///
/// Every coordinate must be one safe path segment: non-empty, no `/`, `\`,
/// NUL or control character, not `.`, `..` or `.git`. Kubernetes names never
/// are, so a refusal means corrupt input, and it is refused rather than
/// allowed to write outside its directory. `_cluster` cannot collide with a
/// namespace, which is a DNS label (no `_`).
pub fn layout_path(key: &ObjectKey) -> Result<String> {
    let group = if key.group.is_empty() { "core" } else { key.group.as_str() };
    let namespace = if key.namespace.is_empty() { "_cluster" } else { key.namespace.as_str() };
    for (what, value) in [
        ("group", group),
        ("version", key.version.as_str()),
        ("resource", key.resource.as_str()),
        ("namespace", namespace),
        ("name", key.name.as_str()),
    ] {
        check_segment(key, what, value)?;
    }
    Ok(crate::mirror::placement::canonical_path(key, false))
}

fn check_segment(key: &ObjectKey, what: &'static str, value: &str) -> Result<()> {
    let problem = if value.is_empty() {
        Some("is empty")
    } else if value == "." || value == ".." {
        Some("is a relative path segment")
    } else if value.eq_ignore_ascii_case(".git") {
        Some("is `.git`, which Git refuses as a path segment")
    } else if value.chars().any(|c| c == '/' || c == '\\' || c.is_control()) {
        Some("contains a path separator or control character")
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => {
            Err(Error::LayoutPath { object: key.display(), component: what, value: value.to_owned(), problem })
        }
    }
}

#[derive(Clone, Copy)]
enum Level {
    Top,
    Metadata,
    Other,
}

impl Level {
    fn leading(self) -> &'static [&'static str] {
        match self {
            Level::Top => &["apiVersion", "kind", "metadata"],
            Level::Metadata => &["name", "namespace"],
            Level::Other => &[],
        }
    }
}

/// Serializes a JSON value with a fixed key order, independent of whether
/// serde_json preserves insertion order in this build.
struct Canonical<'a> {
    value: &'a Value,
    level: Level,
}

impl Serialize for Canonical<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.value {
            Value::Object(map) => {
                let leading = self.level.leading();
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort_by(|a, b| {
                    let rank = |k: &str| leading.iter().position(|l| *l == k).unwrap_or(leading.len());
                    rank(a).cmp(&rank(b)).then_with(|| a.cmp(b))
                });
                let mut out = serializer.serialize_map(Some(keys.len()))?;
                for k in keys {
                    let level = match (self.level, k.as_str()) {
                        (Level::Top, "metadata") => Level::Metadata,
                        _ => Level::Other,
                    };
                    out.serialize_entry(k, &Canonical { value: &map[k.as_str()], level })?;
                }
                out.end()
            }
            Value::Array(items) => {
                let mut out = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    out.serialize_element(&Canonical { value: item, level: Level::Other })?;
                }
                out.end()
            }
            other => other.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests;
