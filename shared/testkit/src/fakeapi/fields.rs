//! Unknown fields and the `fieldValidation` parameter, as kube-apiserver
//! decodes a written object (`k8s.io/apiserver/pkg/endpoints/handlers`):
//! `Strict` refuses an object with a field its type does not declare,
//! `Warn` (the default) drops each with a `Warning` header, `Ignore` drops
//! them silently. Which fields a type declares:
//! - a built-in's: its Go type, here k8s-openapi's (generated from the
//!   same OpenAPI): a field it does not keep through a round trip is one
//!   the type does not have (`data`, `labels` and the like are maps of any
//!   key; `RawExtension`s keep anything);
//! - a custom resource's: its CRD's structural schema (`properties`,
//!   `additionalProperties`, `x-kubernetes-preserve-unknown-fields`), as
//!   pruning walks it; without a loaded schema, any field;
//! - `metadata` is `ObjectMeta` for every type.
//!
//! Not modelled: duplicate fields (`duplicate field "x"`), and a value of
//! the wrong type (`replicas: "2"`: the real server refuses it with 400;
//! the fake then checks only the object's metadata).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::error::ApiError;
use super::registry::ResourceType;
use super::schema::{FieldPath, Step};

/// The `fieldValidation` query parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Refuse an object with unknown fields.
    Strict,
    /// Drop unknown fields, with a warning each (the API server's default).
    #[default]
    Warn,
    /// Drop unknown fields silently.
    Ignore,
}

impl FieldValidation {
    /// The parameter of a query string (`Warn` without one); `options` is
    /// the kind of the request's options (`CreateOptions`, `UpdateOptions`,
    /// `PatchOptions`) for the 422 on a value the server does not know.
    pub fn from_query(query: &str, options: &str) -> Result<Self, ApiError> {
        let value = super::select::query_pairs(query)
            .into_iter()
            .find(|(k, _)| k == "fieldValidation")
            .map(|(_, v)| v)
            .unwrap_or_default();
        match value.as_str() {
            "" | "Warn" => Ok(FieldValidation::Warn),
            "Strict" => Ok(FieldValidation::Strict),
            "Ignore" => Ok(FieldValidation::Ignore),
            other => {
                let what =
                    format!("Unsupported value: {other:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"");
                Err(ApiError::new(
                    422,
                    "Invalid",
                    format!("{options}.meta.k8s.io \"\" is invalid: fieldValidation: {what}"),
                )
                .with_details(json!({"group": "meta.k8s.io", "kind": options, "causes": [
                    {"reason": "FieldValueNotSupported", "message": what, "field": "fieldValidation"}
                ]})))
            }
        }
    }
}

/// `T` as its serde impls keep `v`: what they drop is what `T` does not
/// declare. `None` when `v` is not a `T` at all.
fn round_trip<T: DeserializeOwned + Serialize>(v: &Value) -> Option<Value> {
    let typed: T = serde_json::from_value(v.clone()).ok()?;
    serde_json::to_value(typed).ok()
}

/// The keys of `input` (at any depth) its round trip `output` lost.
fn lost(input: &Value, output: &Value, path: &FieldPath, out: &mut Vec<FieldPath>) {
    match (input, output) {
        (Value::Object(i), Value::Object(o)) => {
            for (k, v) in i {
                match o.get(k) {
                    Some(w) => lost(v, w, &path.key(k), out),
                    None if !v.is_null() => out.push(path.key(k)),
                    None => {}
                }
            }
        }
        (Value::Array(i), Value::Array(o)) if i.len() == o.len() => {
            for (n, (v, w)) in i.iter().zip(o).enumerate() {
                lost(v, w, &path.index(n), out);
            }
        }
        _ => {}
    }
}

fn lost_in<T: DeserializeOwned + Serialize>(v: &Value, prefix: &FieldPath) -> Option<Vec<FieldPath>> {
    let back = round_trip::<T>(v)?;
    let mut out = Vec::new();
    lost(v, &back, prefix, &mut out);
    Some(out)
}

/// The fields of a built-in object its k8s-openapi type does not declare;
/// `None` for a type the fake does not know the Go type of.
fn builtin_unknown(t: &ResourceType, obj: &Value) -> Option<Vec<FieldPath>> {
    use k8s_openapi::api::{
        admissionregistration, apps, batch, coordination, core, discovery, events, flowcontrol, networking, policy,
        rbac,
    };
    if !obj.is_object() {
        return None;
    }
    let mut obj = obj.clone();
    obj["apiVersion"] = json!(t.api_version());
    obj["kind"] = json!(t.kind);
    let root = FieldPath::default();
    macro_rules! typed {
        ($($ty:ty),* $(,)?) => {
            $(
                if <$ty as k8s_openapi::Resource>::GROUP == t.group
                    && <$ty as k8s_openapi::Resource>::VERSION == t.version
                    && <$ty as k8s_openapi::Resource>::KIND == t.kind
                {
                    return lost_in::<$ty>(&obj, &root);
                }
            )*
        };
    }
    typed!(
        core::v1::ConfigMap,
        core::v1::Secret,
        core::v1::Namespace,
        core::v1::Pod,
        core::v1::ServiceAccount,
        core::v1::Service,
        core::v1::Endpoints,
        core::v1::Event,
        core::v1::PersistentVolumeClaim,
        apps::v1::Deployment,
        apps::v1::StatefulSet,
        apps::v1::DaemonSet,
        apps::v1::ReplicaSet,
        apps::v1::ControllerRevision,
        batch::v1::Job,
        batch::v1::CronJob,
        events::v1::Event,
        coordination::v1::Lease,
        discovery::v1::EndpointSlice,
        flowcontrol::v1::FlowSchema,
        flowcontrol::v1::PriorityLevelConfiguration,
        policy::v1::PodDisruptionBudget,
        rbac::v1::Role,
        rbac::v1::RoleBinding,
        rbac::v1::ClusterRole,
        rbac::v1::ClusterRoleBinding,
        networking::v1::Ingress,
        networking::v1::NetworkPolicy,
        admissionregistration::v1::MutatingWebhookConfiguration,
        admissionregistration::v1::ValidatingWebhookConfiguration,
    );
    None
}

/// The fields of `obj`, written as type `t`, that `t` does not declare, in
/// the order the API server reports them (a built-in's in the body's
/// order; a custom resource's sorted, metadata's among them).
pub(crate) fn unknown_fields(t: &ResourceType, obj: &Value) -> Vec<FieldPath> {
    if let Some(found) = builtin_unknown(t, obj) {
        return found;
    }
    let mut found = Vec::new();
    if let Some(meta) = obj.get("metadata") {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        found.extend(lost_in::<ObjectMeta>(meta, &FieldPath::default().key("metadata")).unwrap_or_default());
    }
    if let Some(schema) = &t.schema {
        found.extend(super::schema::unknown_fields(schema, obj));
    }
    found.sort_by_key(|p| p.to_string());
    found
}

/// Removes the field at each of `paths` from `obj`.
pub(crate) fn prune(obj: &mut Value, paths: &[FieldPath]) {
    for path in paths {
        let Some((Step::Key(last), parents)) = path.0.split_last() else { continue };
        let parent = parents.iter().try_fold(&mut *obj, |at, step| match step {
            Step::Key(k) => at.get_mut(k.as_str()),
            Step::Index(i) => at.get_mut(*i),
        });
        if let Some(o) = parent.and_then(Value::as_object_mut) {
            o.remove(last);
        }
    }
}

/// `unknown field "spec.x"`, as the strict decoder words each.
pub(crate) fn messages(paths: &[FieldPath]) -> Vec<String> {
    paths.iter().map(|p| format!("unknown field {:?}", p.to_string())).collect()
}

/// The 400 a create or update with unknown fields gets under `Strict`
/// (`transformDecodeError`).
pub(crate) fn decode_error(t: &ResourceType, paths: &[FieldPath]) -> ApiError {
    ApiError::bad_request(format!(
        "{} in version {:?} cannot be handled as a {}: strict decoding error: {}",
        t.kind,
        t.version,
        t.kind,
        messages(paths).join(", ")
    ))
}

/// The 422 a patch whose result has unknown fields gets under `Strict`
/// (patch.go): `shown` is the value the cause quotes, the patched object
/// for a JSON or merge patch, the patch as a Go map for a strategic one.
pub(crate) fn patch_error(shown: &str, paths: &[FieldPath]) -> ApiError {
    let cause = format!("Invalid value: {shown:?}: strict decoding error: {}", messages(paths).join(", "));
    ApiError::new(422, "Invalid", format!(" \"\" is invalid: patch: {cause}"))
        .with_details(json!({"causes": [{"reason": "FieldValueInvalid", "message": cause, "field": "patch"}]}))
}

/// The 500 a server-side apply of a field the type does not declare gets
/// (structured-merge-diff's typed patch), whatever `fieldValidation` says.
pub(crate) fn apply_error(t: &ResourceType, ns: &str, name: &str, paths: &[FieldPath]) -> ApiError {
    let errors: Vec<String> = paths.iter().map(|p| format!(".{p}: field not declared in schema")).collect();
    let errors = match errors.as_slice() {
        [one] => one.clone(),
        many => format!("errors:\n  {}", many.join("\n  ")),
    };
    ApiError::new(
        500,
        "",
        format!(
            "failed to create typed patch object ({ns}/{name}; {}/{}, Kind={}): {errors}",
            t.group, t.version, t.kind
        ),
    )
}

/// A JSON value as Go's `%+v` prints it once decoded into
/// `map[string]interface{}` (ints kept, keys sorted).
pub(crate) fn go_format(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) => format!("[{}]", items.iter().map(go_format).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let entries: Vec<String> = keys.iter().map(|k| format!("{k}:{}", go_format(&m[k.as_str()]))).collect();
            format!("map[{}]", entries.join(" "))
        }
    }
}
