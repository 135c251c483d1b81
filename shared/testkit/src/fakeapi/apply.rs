//! Server-side apply: `PATCH` with `application/apply-patch+yaml`, as
//! kube-apiserver's field manager does it (structured-merge-diff,
//! `k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager`, and the
//! "Server-Side Apply" page of the Kubernetes docs):
//!
//! - `?fieldManager=` is required (400 without it); `?force=true` takes the
//!   conflicting fields over instead of answering 409 `Conflict` with one
//!   `FieldManagerConflict` cause per field.
//! - Each manager's set is recorded in `metadata.managedFields` as
//!   `FieldsV1` (`f:` fields, `k:` keys of associative lists, `.` for an
//!   item owned itself), operation `Apply`, with `subresource: status` for
//!   `/status`.
//! - A field the manager applied before and no longer applies is removed,
//!   unless another manager still owns it.
//! - Maps merge, lists marked `x-kubernetes-list-type: map` in the CRD
//!   schema merge by their `x-kubernetes-list-map-keys`; every other list
//!   is atomic (the built-ins' strategic merge keys are not modelled).
//! - Applying to an object that does not exist creates it; `/status` of a
//!   missing object is 404.
//!
//! Not modelled: ownership taken by `Update` operations (PUT, merge and
//! JSON patches record no managedFields here), so conflicts arise only
//! between appliers.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::registry::ResourceType;

/// One element of a field path, in `FieldsV1` spelling (`f:name`,
/// `k:{"type":"Ready"}`).
type Path = Vec<String>;
type FieldSet = BTreeSet<Path>;

/// What the request asks for.
#[derive(Debug, Clone)]
pub(crate) struct ApplyOptions {
    pub manager: String,
    pub force: bool,
    pub status_only: bool,
}

impl ApplyOptions {
    /// `fieldManager` and `force` from the query string.
    pub(crate) fn from_query(query: &str, status_only: bool) -> Result<Self, ApiError> {
        let mut manager = None;
        let mut force = false;
        for (k, v) in super::select::query_pairs(query) {
            match k.as_str() {
                "fieldManager" => manager = Some(v),
                "force" => force = v == "true",
                _ => {}
            }
        }
        let manager = manager.filter(|m| !m.is_empty()).ok_or_else(|| {
            ApiError::bad_request("PATCH requests with apply content type require fieldManager to be set")
        })?;
        Ok(ApplyOptions { manager, force, status_only })
    }
}

/// The applied configuration: YAML (JSON is YAML), one object.
pub(crate) fn parse(body: &[u8]) -> Result<Value, ApiError> {
    let text = std::str::from_utf8(body).map_err(|_| ApiError::bad_request("the apply body is not UTF-8"))?;
    let v: Value =
        serde_norway::from_str(text).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::bad_request("the apply body is not an object"));
    }
    Ok(v)
}

/// The part of the config the request's endpoint owns: `status` on
/// `/status`; everything but `status` on a type with a status subresource;
/// and never the identity fields the server strips from field sets.
fn owned_part(t: &ResourceType, config: &Value, status_only: bool) -> Value {
    let mut out = Map::new();
    if let Some(o) = config.as_object() {
        for (k, v) in o {
            let keep = match k.as_str() {
                "apiVersion" | "kind" => false,
                "status" => status_only || !t.status_subresource,
                "metadata" => !status_only,
                _ => !status_only,
            };
            if keep {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(Value::Object(m)) = out.get_mut("metadata") {
        for f in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
            "selfLink",
        ] {
            m.remove(f);
        }
        if m.is_empty() {
            out.remove("metadata");
        }
    }
    Value::Object(out)
}

/// The schema node under `node` for field `name`.
fn child_schema<'a>(node: Option<&'a Value>, name: &str) -> Option<&'a Value> {
    let node = node?;
    node.pointer(&format!("/properties/{}", name.replace('~', "~0").replace('/', "~1")))
        .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))
}

/// The map keys of an associative list, when the schema says it is one.
fn list_keys(schema: Option<&Value>) -> Option<Vec<String>> {
    let s = schema?;
    if s.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map") {
        return None;
    }
    let keys: Vec<String> =
        s.get("x-kubernetes-list-map-keys")?.as_array()?.iter().filter_map(Value::as_str).map(str::to_string).collect();
    (!keys.is_empty()).then_some(keys)
}

/// `k:{"type":"Ready"}` for an item of a list keyed by `keys`.
fn item_key(item: &Value, keys: &[String]) -> Option<String> {
    let mut m = Map::new();
    for k in keys {
        m.insert(k.clone(), item.get(k)?.clone());
    }
    Some(format!("k:{}", Value::Object(m)))
}

/// Every field path `value` sets: leaves, atomic lists, empty maps, and
/// each item of an associative list (itself and its fields).
fn field_set(value: &Value, schema: Option<&Value>, at: &mut Path, out: &mut FieldSet) {
    let Some(o) = value.as_object() else { return };
    for (k, v) in o {
        at.push(format!("f:{k}"));
        let s = child_schema(schema, k);
        match v {
            Value::Object(m) if !m.is_empty() => field_set(v, s, at, out),
            Value::Array(items) => match list_keys(s) {
                Some(keys) => {
                    out.insert(at.clone());
                    for item in items {
                        if let Some(key) = item_key(item, &keys) {
                            at.push(key);
                            out.insert(at.clone());
                            field_set(item, s.and_then(|s| s.get("items")), at, out);
                            at.pop();
                        }
                    }
                }
                None => {
                    out.insert(at.clone());
                }
            },
            _ => {
                out.insert(at.clone());
            }
        }
        at.pop();
    }
}

/// The value at a field path, when there is one.
fn lookup<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = value;
    for el in path {
        cur = if let Some(f) = el.strip_prefix("f:") {
            cur.get(f)?
        } else if let Some(k) = el.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).ok()?;
            cur.as_array()?.iter().find(|item| key.iter().all(|(kk, kv)| item.get(kk) == Some(kv)))?
        } else {
            return None;
        };
    }
    Some(cur)
}

/// Removes the field (or list item) at `path`.
fn remove(value: &mut Value, path: &[String]) {
    let Some((last, parent)) = path.split_last() else { return };
    let mut cur = value;
    for el in parent {
        let next = if let Some(f) = el.strip_prefix("f:") {
            cur.get_mut(f)
        } else if let Some(k) = el.strip_prefix("k:") {
            let Ok(key) = serde_json::from_str::<Map<String, Value>>(k) else { return };
            cur.as_array_mut()
                .and_then(|a| a.iter_mut().find(|item| key.iter().all(|(kk, kv)| item.get(kk) == Some(kv))))
        } else {
            None
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(o) = cur.as_object_mut() {
            o.remove(f);
        }
    } else if let Some(k) = last.strip_prefix("k:")
        && let Ok(key) = serde_json::from_str::<Map<String, Value>>(k)
        && let Some(a) = cur.as_array_mut()
    {
        a.retain(|item| !key.iter().all(|(kk, kv)| item.get(kk) == Some(kv)));
    }
}

/// Merges the applied `config` into `target`: maps recursively,
/// associative lists by key, the rest replaced.
fn merge(target: &mut Value, config: &Value, schema: Option<&Value>) {
    let (Some(t), Some(c)) = (target.as_object_mut(), config.as_object()) else {
        *target = config.clone();
        return;
    };
    for (k, v) in c {
        let s = child_schema(schema, k);
        match (t.get_mut(k), v) {
            (Some(existing @ Value::Object(_)), Value::Object(_)) => merge(existing, v, s),
            (Some(Value::Array(existing)), Value::Array(items)) if list_keys(s).is_some() => {
                let keys = list_keys(s).unwrap_or_default();
                let item_schema = s.and_then(|s| s.get("items"));
                for item in items {
                    let key = item_key(item, &keys);
                    match existing.iter_mut().find(|e| key.is_some() && item_key(e, &keys) == key) {
                        Some(e) => merge(e, item, item_schema),
                        None => existing.push(item.clone()),
                    }
                }
            }
            _ => {
                t.insert(k.clone(), v.clone());
            }
        }
    }
}

/// A field set as `FieldsV1`.
fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for el in path {
            let child = node.entry(el.clone()).or_insert_with(|| json!({}));
            if !child.is_object() {
                *child = json!({});
            }
            let Value::Object(m) = child else { break };
            node = m;
        }
    }
    let mut root = Value::Object(root);
    // A path that is a member and has members below it is marked ".".
    fn mark(node: &mut Value, at: &mut Path, set: &FieldSet) {
        let Some(o) = node.as_object_mut() else { return };
        for (k, child) in o.iter_mut() {
            at.push(k.clone());
            let has_children = child.as_object().is_some_and(|c| !c.is_empty());
            if has_children {
                mark(child, at, set);
                if set.contains(at)
                    && let Some(c) = child.as_object_mut()
                {
                    c.insert(".".into(), json!({}));
                }
            }
            at.pop();
        }
    }
    mark(&mut root, &mut Vec::new(), set);
    root
}

/// `FieldsV1` back to a field set.
fn from_fields_v1(v: &Value) -> FieldSet {
    fn walk(node: &Value, at: &mut Path, out: &mut FieldSet) {
        let Some(o) = node.as_object() else { return };
        for (k, child) in o {
            if k == "." {
                out.insert(at.clone());
                continue;
            }
            at.push(k.clone());
            if child.as_object().is_none_or(Map::is_empty) {
                out.insert(at.clone());
            } else {
                walk(child, at, out);
            }
            at.pop();
        }
    }
    let mut out = FieldSet::new();
    walk(v, &mut Vec::new(), &mut out);
    out
}

/// `.status.conditions[type="Ready"].status`, as the API server names a
/// field in a conflict.
fn display(path: &[String]) -> String {
    let mut s = String::new();
    for el in path {
        if let Some(f) = el.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = el.strip_prefix("k:")
            && let Ok(key) = serde_json::from_str::<Map<String, Value>>(k)
        {
            let inner: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            s.push_str(&format!("[{}]", inner.join(",")));
        }
    }
    s
}

/// One managedFields entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    subresource: Option<String>,
    raw: Value,
    fields: FieldSet,
}

fn entries(obj: &Value) -> Vec<Entry> {
    let Some(list) = obj.pointer("/metadata/managedFields").and_then(Value::as_array) else { return Vec::new() };
    list.iter()
        .map(|e| Entry {
            manager: e.get("manager").and_then(Value::as_str).unwrap_or_default().to_string(),
            operation: e.get("operation").and_then(Value::as_str).unwrap_or_default().to_string(),
            subresource: e.get("subresource").and_then(Value::as_str).map(str::to_string),
            raw: e.clone(),
            fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
        })
        .collect()
}

/// The object after `config` is applied to `current` (`None`: it does not
/// exist yet) by `opts.manager`, with its managedFields, or the 409 of
/// the fields another manager owns with other values.
pub(crate) fn apply(
    t: &ResourceType,
    current: Option<&Value>,
    config: &Value,
    opts: &ApplyOptions,
    now: &str,
) -> Result<Value, ApiError> {
    let schema = t.schema.as_ref();
    let part = owned_part(t, config, opts.status_only);
    let mut applied = FieldSet::new();
    field_set(&part, schema, &mut Vec::new(), &mut applied);
    let subresource = opts.status_only.then(|| "status".to_string());

    let mut next = current.cloned().unwrap_or_else(|| {
        let mut o = json!({"metadata": config.get("metadata").cloned().unwrap_or_else(|| json!({}))});
        if let Some(m) = o["metadata"].as_object_mut() {
            m.remove("managedFields");
        }
        o
    });
    let mut others: Vec<Entry> = Vec::new();
    let mut previous = FieldSet::new();
    for e in entries(&next) {
        if e.manager == opts.manager && e.operation == "Apply" && e.subresource == subresource {
            previous = e.fields;
        } else {
            others.push(e);
        }
    }

    let mut conflicts: BTreeMap<Path, Vec<String>> = BTreeMap::new();
    // Only leaves conflict (scalars, atomic lists): a map or an associative
    // list is compared through its members.
    let container = |path: &Path| {
        lookup(&part, path).is_some_and(Value::is_object)
            || applied.iter().any(|q| {
                q.len() == path.len() + 1 && q.starts_with(path) && q.last().is_some_and(|l| l.starts_with("k:"))
            })
    };
    for path in &applied {
        if container(path) || lookup(&part, path) == lookup(&next, path) {
            continue;
        }
        for o in &others {
            if o.fields.contains(path) {
                conflicts.entry(path.clone()).or_default().push(o.manager.clone());
            }
        }
    }
    if !conflicts.is_empty() {
        if !opts.force {
            return Err(conflict_error(t, config, &conflicts));
        }
        for o in &mut others {
            o.fields.retain(|p| !conflicts.contains_key(p));
        }
    }

    let owned_elsewhere = |p: &Path| others.iter().any(|o| o.fields.contains(p));
    for path in previous.difference(&applied) {
        if !owned_elsewhere(path) {
            remove(&mut next, path);
        }
    }
    merge(&mut next, &part, schema);

    let mut managed: Vec<Value> = Vec::new();
    for o in others.into_iter().filter(|o| !o.fields.is_empty()) {
        let mut raw = o.raw;
        raw["fieldsV1"] = to_fields_v1(&o.fields);
        managed.push(raw);
    }
    if !applied.is_empty() {
        let mut entry = json!({
            "manager": opts.manager,
            "operation": "Apply",
            "apiVersion": t.api_version(),
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(&applied),
        });
        if let Some(s) = &subresource {
            entry["subresource"] = json!(s);
        }
        managed.push(entry);
    }
    next["metadata"]["managedFields"] = Value::Array(managed);
    if current.is_none() {
        next["metadata"]["name"] = config.pointer("/metadata/name").cloned().unwrap_or(Value::Null);
    }
    Ok(next)
}

fn conflict_error(t: &ResourceType, config: &Value, conflicts: &BTreeMap<Path, Vec<String>>) -> ApiError {
    let name = config.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let mut causes = Vec::new();
    let mut lines = Vec::new();
    for (path, managers) in conflicts {
        for m in managers {
            let msg = format!("conflict with \"{m}\"");
            lines.push(format!("{msg}: {}", display(path)));
            causes.push(json!({"type": "FieldManagerConflict", "message": msg, "field": display(path)}));
        }
    }
    let message = format!(
        "Apply failed with {} conflict{}: {}",
        lines.len(),
        if lines.len() == 1 { "" } else { "s" },
        lines.join("\n")
    );
    ApiError::new(409, "Conflict", message)
        .with_details(json!({"name": name, "group": t.group, "kind": t.plural, "causes": causes}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gittargets() -> ResourceType {
        let mut t = ResourceType::builtin("configbutler.ai", "v1alpha3", "gittargets", "GitTarget", true);
        t.status_subresource = true;
        t.schema = Some(json!({"properties": {"status": {"properties": {"conditions": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": {"properties": {"type": {}, "status": {}}}
        }}}}}));
        t
    }

    fn status(manager: &str, force: bool) -> ApplyOptions {
        ApplyOptions { manager: manager.into(), force, status_only: true }
    }

    fn cond(ty: &str, s: &str) -> Value {
        json!({"type": ty, "status": s})
    }

    fn config(conds: Vec<Value>) -> Value {
        json!({"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitTarget", "metadata": {"name": "x"}, "status": {"conditions": conds}})
    }

    #[test]
    fn field_sets_round_trip_through_fields_v1_with_keyed_items() {
        let t = gittargets();
        let next = apply(
            &t,
            Some(&json!({"metadata": {"name": "x"}})),
            &config(vec![cond("Ready", "True")]),
            &status("a", false),
            "t",
        )
        .unwrap();
        let fv1 = &next["metadata"]["managedFields"][0]["fieldsV1"];
        assert_eq!(
            fv1,
            &json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}, ".": {}}}})
        );
        assert_eq!(next["metadata"]["managedFields"][0]["subresource"], "status");
        let set = from_fields_v1(fv1);
        assert_eq!(to_fields_v1(&set), *fv1);
    }

    #[test]
    fn another_managers_differing_value_conflicts_unless_forced_and_equal_values_share() {
        let t = gittargets();
        let base = json!({"metadata": {"name": "x"}});
        let a = apply(&t, Some(&base), &config(vec![cond("Ready", "True")]), &status("a", false), "t").unwrap();
        // Same value: shared, no conflict.
        let shared = apply(&t, Some(&a), &config(vec![cond("Ready", "True")]), &status("b", false), "t").unwrap();
        assert_eq!(shared["metadata"]["managedFields"].as_array().unwrap().len(), 2);
        let e = apply(&t, Some(&a), &config(vec![cond("Ready", "False")]), &status("b", false), "t").unwrap_err();
        assert_eq!(e.code, 409);
        assert!(e.message.contains("conflict with \"a\": .status.conditions[type=\"Ready\"].status"), "{}", e.message);
        let forced = apply(&t, Some(&a), &config(vec![cond("Ready", "False")]), &status("b", true), "t").unwrap();
        assert_eq!(forced["status"]["conditions"][0]["status"], "False");
        let a_entry = &forced["metadata"]["managedFields"][0];
        assert_eq!(a_entry["manager"], "a");
        assert!(a_entry["fieldsV1"].to_string().contains("f:type"));
        assert!(!a_entry["fieldsV1"].to_string().contains("f:status\":{}"), "{a_entry}");
    }

    #[test]
    fn a_field_no_longer_applied_is_removed_unless_another_manager_owns_it() {
        let t = gittargets();
        let base = json!({"metadata": {"name": "x"}});
        let two = apply(
            &t,
            Some(&base),
            &config(vec![cond("Ready", "True"), cond("Stalled", "False")]),
            &status("a", false),
            "t",
        )
        .unwrap();
        let one = apply(&t, Some(&two), &config(vec![cond("Ready", "True")]), &status("a", false), "t").unwrap();
        assert_eq!(one["status"]["conditions"], json!([cond("Ready", "True")]));
        // Kept when b also applied it.
        let b = apply(&t, Some(&two), &config(vec![cond("Stalled", "False")]), &status("b", false), "t").unwrap();
        let kept = apply(&t, Some(&b), &config(vec![cond("Ready", "True")]), &status("a", false), "t").unwrap();
        assert_eq!(kept["status"]["conditions"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn the_main_resource_ignores_status_and_status_ignores_spec() {
        let t = gittargets();
        let cfg = json!({"metadata": {"name": "x"}, "spec": {"branch": "main"}, "status": {"lastPushTime": "t"}});
        let main = apply(&t, None, &cfg, &ApplyOptions { manager: "a".into(), force: false, status_only: false }, "t")
            .unwrap();
        assert!(main.get("status").is_none());
        assert_eq!(main["spec"]["branch"], "main");
        let st = apply(&t, Some(&main), &cfg, &status("a", false), "t").unwrap();
        assert_eq!(st["status"]["lastPushTime"], "t");
        assert_eq!(st["metadata"]["managedFields"].as_array().unwrap().len(), 2);
    }
}
