//! What of a watched object is its intent, as gitops-reverser sanitizes it
//! (`internal/sanitize/sanitize.go`, `types.go` at f0f7b42): the server's
//! bookkeeping goes, so a manifest committed from the cluster is one a person
//! could have written and a re-apply would not fight over.
//!
//! - `status` goes.
//! - `metadata` keeps only `name`, `namespace`, `labels` and `annotations`
//!   (sanitize.go:36-45, types.go:11-18): uid, resourceVersion, generation,
//!   timestamps, managedFields, ownerReferences, finalizers and generateName
//!   go.
//! - Operational labels and annotations go ([`is_operational_label`],
//!   [`is_operational_annotation`]); a map left empty goes with them.
//! - Per type, what the API server allocates or defaults: Service cluster
//!   IPs, IP families, `healthCheckNodePort`, `internalTrafficPolicy`; Pod
//!   `nodeName`; PVC `volumeName` and `volumeMode` (sanitize.go:94-130).
//!
//! Two deliberate differences, both keeping intent the reference loses:
//! a headless Service's `clusterIP: None` stays (dropping it turns a headless
//! Service into a normal one on re-apply), and so do `ipFamilyPolicy` and
//! `ipFamilies` when the policy asks for dual stack. And the top level keeps
//! every field but `status`, where the reference keeps a fixed list
//! (sanitize.go:21,57-72) and so drops e.g. a StorageClass's `provisioner`
//! or a PriorityClass's `value`.

use serde_json::{Map, Value};

use super::render::ObjectKey;
use crate::{Error, Result};

/// `metadata` fields a committed manifest keeps (sanitize.go:36-45).
pub const KEPT_METADATA: [&str; 4] = ["name", "namespace", "labels", "annotations"];

/// Label prefixes that are controller bookkeeping (types.go:76-80). Argo CD's
/// `app.kubernetes.io/instance` is not among them: it is also the standard
/// recommended label, and cannot be told apart.
pub const OPERATIONAL_LABEL_PREFIXES: [&str; 3] =
    ["kustomize.toolkit.fluxcd.io/", "kro.run/", "applyset.kubernetes.io/"];

/// Annotation prefixes that are controller bookkeeping (types.go:112-117):
/// `kubectl.kubernetes.io/last-applied-configuration` and
/// `deployment.kubernetes.io/revision` are the common ones.
pub const OPERATIONAL_ANNOTATION_PREFIXES: [&str; 6] = [
    "kubectl.kubernetes.io/",
    "control-plane.alpha.kubernetes.io/",
    "deployment.kubernetes.io/",
    "autoscaling.alpha.kubernetes.io/",
    "kustomize.toolkit.fluxcd.io/",
    "applyset.kubernetes.io/",
];

/// Annotations that are bookkeeping by exact key (types.go:107-110). Exact,
/// not by prefix: Argo CD's sibling keys (`sync-wave`, `sync-options`,
/// `hook`, …) are user intent, and so may other `kcp.io/` keys be.
pub const OPERATIONAL_ANNOTATIONS: [&str; 3] =
    ["argocd.argoproj.io/tracking-id", "argocd.argoproj.io/installation-id", "kcp.io/cluster"];

/// Whether a label is controller bookkeeping, never committed.
pub fn is_operational_label(key: &str) -> bool {
    OPERATIONAL_LABEL_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// Whether an annotation is controller bookkeeping, never committed.
pub fn is_operational_annotation(key: &str) -> bool {
    OPERATIONAL_ANNOTATIONS.contains(&key) || OPERATIONAL_ANNOTATION_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// The object's intent (see the module doc). Errs when the object is not a
/// JSON object.
pub fn sanitize(key: &ObjectKey, object: &Value) -> Result<Value> {
    let Value::Object(map) = object else {
        return Err(Error::Render {
            object: key.display(),
            message: format!(
                "the object is a JSON {}, not an object; pass the watch event's `object`",
                json_kind(object)
            ),
        });
    };
    let mut map = map.clone();
    map.remove("status");
    if let Some(Value::Object(meta)) = map.get_mut("metadata") {
        meta.retain(|k, _| KEPT_METADATA.contains(&k.as_str()));
        clean(meta, "labels", is_operational_label);
        clean(meta, "annotations", is_operational_annotation);
    }
    if key.group.is_empty()
        && let Some(Value::Object(spec)) = map.get_mut("spec")
    {
        match key.resource.as_str() {
            "services" => clean_service(spec),
            "pods" => {
                spec.remove("nodeName");
            }
            "persistentvolumeclaims" => {
                spec.remove("volumeName");
                spec.remove("volumeMode");
            }
            _ => {}
        }
    }
    Ok(Value::Object(map))
}

/// Drops the operational keys of `metadata.<field>`, and the map when
/// nothing is left (the reference omits an empty one, types.go:42-45).
fn clean(meta: &mut Map<String, Value>, field: &str, operational: fn(&str) -> bool) {
    let Some(Value::Object(entries)) = meta.get_mut(field) else {
        return;
    };
    entries.retain(|k, _| !operational(k));
    if entries.is_empty() {
        meta.remove(field);
    }
}

/// What the API server allocates or defaults on a Service (sanitize.go:110-117),
/// except a headless `None` and a dual-stack request (the module doc says why).
fn clean_service(spec: &mut Map<String, Value>) {
    let headless = |v: Option<&Value>| match v {
        Some(Value::String(s)) => s == "None",
        Some(Value::Array(a)) => !a.is_empty() && a.iter().all(|x| x.as_str() == Some("None")),
        _ => false,
    };
    for field in ["clusterIP", "clusterIPs"] {
        if !headless(spec.get(field)) {
            spec.remove(field);
        }
    }
    let dual_stack =
        matches!(spec.get("ipFamilyPolicy").and_then(Value::as_str), Some("PreferDualStack" | "RequireDualStack"));
    if !dual_stack {
        spec.remove("ipFamilyPolicy");
        spec.remove("ipFamilies");
    }
    spec.remove("healthCheckNodePort");
    spec.remove("internalTrafficPolicy");
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests;
