//! Which watch events the mirror sends on, and which changes reach Git:
//! the rule's operations, the GitOps forward leg's field managers and
//! actors (so a Flux or Argo CD apply never ping-pongs with the mirror), and
//! types never written in clear text.

use serde_json::Value;

use super::watch_rules::Operation;
use crate::attribution::watch::{WatchEvent, WatchKind};

/// The operation a watch event is: ADDED creates, MODIFIED updates, and a
/// DELETED event or a set deletionTimestamp deletes (spec §1: deletion is
/// attributed at intent time). `None` for BOOKMARK and ERROR.
pub fn operation(event: &WatchEvent) -> Option<Operation> {
    if !event.is_change() {
        return None;
    }
    Some(if event.is_removal() {
        Operation::Delete
    } else if event.kind == WatchKind::Added {
        Operation::Create
    } else {
        Operation::Update
    })
}

/// The field manager of the object's most recent write: the `managedFields`
/// entry with the latest `time` (RFC 3339, so it sorts as text); among equal
/// times the last listed. `None` when the object carries no managedFields.
pub fn last_field_manager(object: &Value) -> Option<&str> {
    let entries = crate::attribution::audit::metadata(object, "managedFields")?.as_array()?;
    let mut best: Option<(&str, &str)> = None;
    for e in entries {
        let Some(manager) = e.get("manager").and_then(Value::as_str) else {
            continue;
        };
        let time = e.get("time").and_then(Value::as_str).unwrap_or("");
        if best.is_none_or(|(t, _)| time >= t) {
            best = Some((time, manager));
        }
    }
    best.map(|(_, m)| m)
}

/// Why an event is not mirrored because of who made it, if it is not.
///
/// A write whose most recent field manager is excluded is the forward leg
/// applying what Git already says. A removal carries the last writer's
/// managedFields, not the deleter's, so it is never excluded here; the
/// sidecar excludes by the resolved actor ([`excluded_actor`]).
pub fn excluded_field_manager(event: &WatchEvent, excluded: &[String]) -> Option<String> {
    if excluded.is_empty() || event.is_removal() {
        return None;
    }
    let manager = last_field_manager(&event.object)?;
    excluded.iter().any(|m| m == manager).then(|| manager.to_owned())
}

/// Whether a resolved author is one of the excluded actors (exact username,
/// `system:serviceaccount:<ns>:<name>` for a service account).
pub fn excluded_actor(author: Option<&str>, excluded: &[String]) -> bool {
    author.is_some_and(|a| excluded.iter().any(|x| x == a))
}

/// Types whose documents are never written in clear text: core Secrets.
/// Without encryption they are skipped, and counted.
pub fn is_sensitive(group: &str, resource: &str) -> bool {
    group.is_empty() && resource == "secrets"
}

/// The sensitive types: core Secrets always, and those named by
/// `--additional-sensitive-resources` (gitops-reverser's
/// `SensitiveResourcePolicy`, internal/types/sensitive_resource.go).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SensitiveTypes {
    /// (group, resource), lower-cased; never core Secrets (always in).
    additional: std::collections::BTreeSet<(String, String)>,
}

impl SensitiveTypes {
    /// Parses the flag's comma-separated `resource` or `group/resource`
    /// entries (a bare resource is the core group). An empty string adds
    /// nothing; an empty entry or one with a version is refused.
    pub fn parse(additional: &str) -> Result<Self, String> {
        let mut out = SensitiveTypes::default();
        if additional.trim().is_empty() {
            return Ok(out);
        }
        for entry in additional.split(',') {
            let bad = |why: &str| {
                format!(
                    "invalid additional sensitive resource {entry:?}: {why}; use resource or group/resource, e.g. credentials,example.com/tokens"
                )
            };
            let parts: Vec<String> = entry.trim().split('/').map(|p| p.trim().to_lowercase()).collect();
            let key = match parts.as_slice() {
                [r] if r.is_empty() => return Err(bad("entry is empty")),
                [r] => (String::new(), r.clone()),
                [g, _] if g.is_empty() => return Err(bad("group is empty")),
                [_, r] if r.is_empty() => return Err(bad("resource is empty")),
                [g, r] => (g.clone(), r.clone()),
                _ => return Err(bad("expected resource or group/resource")),
            };
            if !(key.0.is_empty() && key.1 == "secrets") {
                out.additional.insert(key);
            }
        }
        Ok(out)
    }

    /// Whether `group`/`resource` is written only encrypted.
    pub fn contains(&self, group: &str, resource: &str) -> bool {
        is_sensitive(group, resource) || self.additional.contains(&(group.to_lowercase(), resource.to_lowercase()))
    }

    /// Every sensitive type in flag form, sorted.
    pub fn entries(&self) -> Vec<String> {
        let mut out: Vec<String> = std::iter::once("secrets".to_owned())
            .chain(self.additional.iter().map(|(g, r)| if g.is_empty() { r.clone() } else { format!("{g}/{r}") }))
            .collect();
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ev(kind: &str, object: Value) -> WatchEvent {
        serde_json::from_value(json!({"type": kind, "object": object})).unwrap()
    }

    #[test]
    fn operations_follow_deletion_intent() {
        let live = json!({"metadata": {"name": "a"}});
        let dying = json!({"metadata": {"name": "a", "deletionTimestamp": "2026-01-01T00:00:00Z"}});
        assert_eq!(operation(&ev("ADDED", live.clone())), Some(Operation::Create));
        assert_eq!(operation(&ev("MODIFIED", live.clone())), Some(Operation::Update));
        assert_eq!(operation(&ev("MODIFIED", dying)), Some(Operation::Delete));
        assert_eq!(operation(&ev("DELETED", live)), Some(Operation::Delete));
        assert_eq!(operation(&ev("BOOKMARK", json!({}))), None);
    }

    #[test]
    fn the_latest_field_manager_decides_and_removals_are_never_excluded_by_it() {
        let obj = |entries: Value| json!({"metadata": {"name": "a", "managedFields": entries}});
        let flux_last = obj(json!([
            {"manager": "kubectl", "operation": "Update", "time": "2026-01-01T00:00:00Z"},
            {"manager": "kustomize-controller", "operation": "Apply", "time": "2026-01-01T00:00:05Z"},
        ]));
        let human_last = obj(json!([
            {"manager": "kustomize-controller", "operation": "Apply", "time": "2026-01-01T00:00:05Z"},
            {"manager": "kubectl-edit", "operation": "Update", "time": "2026-01-01T00:00:09Z"},
        ]));
        let excluded = vec!["kustomize-controller".to_owned()];
        assert_eq!(last_field_manager(&flux_last), Some("kustomize-controller"));
        assert_eq!(
            excluded_field_manager(&ev("MODIFIED", flux_last.clone()), &excluded).as_deref(),
            Some("kustomize-controller")
        );
        assert_eq!(excluded_field_manager(&ev("MODIFIED", human_last), &excluded), None);
        assert_eq!(excluded_field_manager(&ev("DELETED", flux_last.clone()), &excluded), None);
        assert_eq!(excluded_field_manager(&ev("MODIFIED", flux_last), &[]), None);
        assert_eq!(last_field_manager(&json!({"metadata": {}})), None);
    }

    #[test]
    fn actors_and_sensitive_types() {
        let excluded = vec!["system:serviceaccount:flux-system:kustomize-controller".to_owned()];
        assert!(excluded_actor(Some("system:serviceaccount:flux-system:kustomize-controller"), &excluded));
        assert!(!excluded_actor(Some("alice"), &excluded));
        assert!(!excluded_actor(None, &excluded));
        assert!(is_sensitive("", "secrets"));
        assert!(!is_sensitive("", "configmaps"));
        assert!(!is_sensitive("example.com", "secrets"));
    }

    #[test]
    fn additional_sensitive_types_parse_as_the_reference_parses_them() {
        // gitops-reverser cmd/main_audit_server_test.go:192.
        let t = SensitiveTypes::parse("core.cozystack.io/tenantsecrets,credentials").unwrap();
        assert_eq!(t.entries(), ["core.cozystack.io/tenantsecrets", "credentials", "secrets"]);
        assert!(t.contains("core.cozystack.io", "TenantSecrets"));
        assert!(t.contains("", "credentials") && t.contains("", "secrets"));
        assert!(!t.contains("example.com", "credentials"));
        assert_eq!(
            SensitiveTypes::parse("secrets, ").unwrap_err().split(':').next(),
            Some("invalid additional sensitive resource \" \"")
        );
        assert_eq!(SensitiveTypes::parse("").unwrap().entries(), ["secrets"]);
        assert_eq!(SensitiveTypes::parse("secrets").unwrap().entries(), ["secrets"]);
        for bad in ["example.io/v1/credentials", "/x", "x/", ","] {
            assert!(SensitiveTypes::parse(bad).unwrap_err().contains("invalid additional sensitive resource"), "{bad}");
        }
    }
}
