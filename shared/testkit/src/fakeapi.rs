//! Fake API: an in-memory Kubernetes API server for the tatara CRs, speaking
//! the real wire format over HTTP (`/apis/tatara.dev/v1alpha1/namespaces/
//! {ns}/{plural}[/{name}[/status]]`: GET, LIST, POST, PUT, DELETE, merge
//! PATCH). It keeps the API server's rules that the ownership spec leans on:
//! resourceVersion bumped on every write, 409 Conflict on a stale
//! resourceVersion, 422 Invalid for two controller owner references (and,
//! when CRD schemas are loaded, for objects the schema rejects), 404 NotFound,
//! the status subresource split, and a synchronous garbage collector with the
//! GC's two halves. Test support only (`test-support` feature).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};

use rules::ownership::types::{API_VERSION, GROUP, VERSION};

/// An API error, rendered as a `Status` object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
}

impl ApiError {
    fn new(code: u16, reason: &str, message: String) -> Self {
        ApiError { code, reason: reason.to_string(), message }
    }
    /// The `Status` body the real API server answers with.
    pub fn status(&self, plural: &str, name: &str) -> Value {
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": self.message, "reason": self.reason,
            "details": {"name": name, "group": GROUP, "kind": plural}, "code": self.code
        })
    }
}

/// Kinds served, by URL plural.
pub fn kind_of(plural: &str) -> Option<&'static str> {
    Some(match plural {
        "projects" => "Project",
        "repositories" => "Repository",
        "tasks" => "Task",
        "issues" => "Issue",
        "mergerequests" => "MergeRequest",
        "queuedevents" => "QueuedEvent",
        _ => return None,
    })
}

fn plural_of(kind: &str) -> Option<&'static str> {
    ["projects", "repositories", "tasks", "issues", "mergerequests", "queuedevents"]
        .into_iter()
        .find(|p| kind_of(p) == Some(kind))
}

type Key = (String, String, String);

/// etcd's default object ceiling (1.5 MiB): the spec's budget is half of it.
pub const ETCD_OBJECT_LIMIT: usize = 1_572_864;

/// Equality selectors of a LIST: `fieldSelector` (`metadata.name`,
/// `metadata.namespace`, `=`/`==`/`!=`) and `labelSelector` (`k=v`, `k!=v`,
/// `k`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selectors {
    pub fields: Vec<(String, bool, String)>,
    pub labels: Vec<(String, Option<(bool, String)>)>,
}

impl Selectors {
    /// Parse the query string of a LIST request.
    pub fn from_query(query: &str) -> Result<Self, ApiError> {
        let mut sel = Selectors::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = percent_encoding::percent_decode_str(v).decode_utf8_lossy().replace('+', " ");
            match k {
                "fieldSelector" => {
                    for term in v.split(',').filter(|t| !t.is_empty()) {
                        let (f, eq, val) = split_term(term);
                        if !matches!(f.as_str(), "metadata.name" | "metadata.namespace") {
                            return Err(ApiError::new(400, "BadRequest", format!("field label not supported: {f}")));
                        }
                        sel.fields.push((f, eq, val.unwrap_or_default()));
                    }
                }
                "labelSelector" => {
                    for term in v.split(',').filter(|t| !t.is_empty()) {
                        let (l, eq, val) = split_term(term);
                        sel.labels.push((l, val.map(|v| (eq, v))));
                    }
                }
                _ => {}
            }
        }
        Ok(sel)
    }

    fn matches(&self, obj: &Value) -> bool {
        let fields_ok = self.fields.iter().all(|(f, eq, val)| {
            let got = obj.pointer(&format!("/{}", f.replace('.', "/"))).and_then(Value::as_str).unwrap_or("");
            (got == val) == *eq
        });
        let labels_ok = self.labels.iter().all(|(l, want)| {
            let got = obj.pointer("/metadata/labels").and_then(|m| m.get(l)).and_then(Value::as_str);
            match want {
                None => got.is_some(),
                Some((eq, v)) => (got == Some(v.as_str())) == *eq,
            }
        });
        fields_ok && labels_ok
    }
}

fn split_term(term: &str) -> (String, bool, Option<String>) {
    if let Some((k, v)) = term.split_once("!=") {
        return (k.trim().into(), false, Some(v.trim().into()));
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return (k.trim().into(), true, Some(v.trim().into()));
    }
    (term.trim().into(), true, None)
}

/// The store behind the server; usable directly (synchronously) by tests.
#[derive(Debug)]
pub struct Store {
    objects: BTreeMap<Key, Value>,
    resource_version: u64,
    clock: i64,
    schemas: BTreeMap<String, Value>,
    /// Run the garbage collector after every delete (the real GC is
    /// asynchronous; tests want the settled state).
    pub auto_gc: bool,
    /// Writes refused for carrying two controller references.
    pub two_controller_rejections: u64,
    /// Writes refused for a stale resourceVersion.
    pub conflicts: u64,
}

impl Default for Store {
    fn default() -> Self {
        Store {
            objects: BTreeMap::new(),
            resource_version: 1000,
            clock: 1_800_000_000,
            schemas: BTreeMap::new(),
            auto_gc: true,
            two_controller_rejections: 0,
            conflicts: 0,
        }
    }
}

/// The error a schema walk reports.
pub fn validate_schema(schema: &Value, value: &Value, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
        && schema.get("properties").is_none()
    {
        return out;
    }
    let ty = schema.get("type").and_then(Value::as_str);
    let ok = match (ty, value) {
        (None, _) => true,
        (Some("object"), Value::Object(_))
        | (Some("array"), Value::Array(_))
        | (Some("string"), Value::String(_))
        | (Some("boolean"), Value::Bool(_)) => true,
        (Some("integer"), Value::Number(n)) => n.is_i64() || n.is_u64(),
        (Some("number"), Value::Number(_)) => true,
        _ => false,
    };
    if !ok {
        out.push(format!("{path}: expected {}, got {value}", ty.unwrap_or("?")));
        return out;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        out.push(format!("{path}: {value} is not one of {}", Value::Array(allowed.clone())));
    }
    if let (Some(max), Value::String(s)) = (schema.get("maxLength").and_then(Value::as_u64), value)
        && s.chars().count() as u64 > max
    {
        out.push(format!("{path}: longer than {max}"));
    }
    match value {
        Value::Object(obj) => {
            for req in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
                if let Some(r) = req.as_str()
                    && !obj.contains_key(r)
                {
                    out.push(format!("{path}.{r}: Required value"));
                }
            }
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            for (k, v) in obj {
                let sub = format!("{path}.{k}");
                match (props.and_then(|p| p.get(k)), additional) {
                    (Some(s), _) => out.extend(validate_schema(s, v, &sub)),
                    (None, Some(a)) if a.is_object() => out.extend(validate_schema(a, v, &sub)),
                    // Unknown fields are pruned by a structural schema, not
                    // refused; metadata is the API server's own.
                    (None, _) => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    out.extend(validate_schema(s, v, &format!("{path}[{i}]")));
                }
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && items.len() as u64 > max
            {
                out.push(format!("{path}: must have at most {max} items"));
            }
        }
        _ => {}
    }
    out
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(t) = target {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

impl Store {
    /// An empty store with no schemas.
    pub fn new() -> Self {
        Self::default()
    }

    /// Load `openAPIV3Schema` of every CRD YAML in `dir` (e.g.
    /// `compat/tatara-crds/`); from then on writes are validated.
    pub fn load_crd_schemas(&mut self, dir: &Path) -> Result<usize, String> {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("read {}: {e}", dir.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
            let crd: Value = serde_norway::from_str(&text).map_err(|e| format!("parse {}: {e}", path.display()))?;
            let plural = crd.pointer("/spec/names/plural").and_then(Value::as_str).unwrap_or_default().to_string();
            let versions = crd.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default();
            if let Some(schema) = versions
                .iter()
                .find(|v| v.get("name").and_then(Value::as_str) == Some(VERSION))
                .and_then(|v| v.pointer("/schema/openAPIV3Schema"))
            {
                self.schemas.insert(plural, schema.clone());
            }
        }
        Ok(self.schemas.len())
    }

    /// The schema of a plural, when loaded.
    pub fn schema(&self, plural: &str) -> Option<&Value> {
        self.schemas.get(plural)
    }

    fn bump(&mut self) -> String {
        self.resource_version += 1;
        self.resource_version.to_string()
    }

    fn check(&mut self, plural: &str, name: &str, obj: &Value) -> Result<(), ApiError> {
        let size = serde_json::to_vec(obj).map_or(usize::MAX, |b| b.len());
        if size > ETCD_OBJECT_LIMIT {
            return Err(ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("etcdserver: request is too large ({size} bytes for {plural} {name:?})"),
            ));
        }
        let controllers: Vec<String> = obj
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|r| r.get("controller") == Some(&Value::Bool(true)))
            .map(|r| format!("{}/{}", r["kind"].as_str().unwrap_or(""), r["name"].as_str().unwrap_or("")))
            .collect();
        if controllers.len() > 1 {
            self.two_controller_rejections += 1;
            return Err(ApiError::new(
                422,
                "Invalid",
                format!(
                    "{} {name:?} is invalid: metadata.ownerReferences: Invalid value: Only one reference can have Controller set to true. Found \"true\" in references for {}",
                    kind_of(plural).unwrap_or(plural),
                    controllers.join(" and ")
                ),
            ));
        }
        if let Some(schema) = self.schemas.get(plural) {
            let errs = validate_schema(schema, obj, "");
            if !errs.is_empty() {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    format!("{} {name:?} is invalid: {}", kind_of(plural).unwrap_or(plural), errs.join(", ")),
                ));
            }
        }
        Ok(())
    }

    fn not_found(plural: &str, name: &str) -> ApiError {
        ApiError::new(404, "NotFound", format!("{plural}.{GROUP} {name:?} not found"))
    }

    fn known(plural: &str) -> Result<&'static str, ApiError> {
        kind_of(plural).ok_or_else(|| {
            ApiError::new(404, "NotFound", format!("the server could not find the requested resource ({plural})"))
        })
    }

    /// Checks a written body is an object with object metadata on a known
    /// kind, and returns its name (empty when it has none).
    fn body_name(plural: &str, obj: &Value) -> Result<String, ApiError> {
        Self::known(plural)?;
        if !obj.is_object() || !obj.get("metadata").is_none_or(Value::is_object) {
            return Err(ApiError::new(
                400,
                "BadRequest",
                format!("{plural}: the body is not an object with object metadata"),
            ));
        }
        Ok(obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string())
    }

    /// Insert an object as-is (seeding): uid, resourceVersion and
    /// creationTimestamp are filled when missing; status is kept.
    pub fn seed(&mut self, plural: &str, ns: &str, mut obj: Value) -> Result<Value, ApiError> {
        let name = Self::body_name(plural, &obj)?;
        self.check(plural, &name, &obj)?;
        self.stamp_new(plural, ns, &mut obj);
        self.objects.insert((plural.into(), ns.into(), name), obj.clone());
        Ok(obj)
    }

    fn stamp_new(&mut self, plural: &str, ns: &str, obj: &mut Value) {
        let rv = self.bump();
        self.clock += 1;
        let created = Timestamp::from_second(self.clock).map(|t| t.to_string()).unwrap_or_default();
        let uid = format!("{:08x}-0000-4000-8000-{:012x}", self.resource_version, self.resource_version);
        let kind = kind_of(plural).unwrap_or_default();
        let o = obj.as_object_mut();
        if let Some(o) = o {
            o.insert("apiVersion".into(), json!(API_VERSION));
            o.insert("kind".into(), json!(kind));
            let meta = o.entry("metadata").or_insert_with(|| json!({}));
            if let Some(m) = meta.as_object_mut() {
                m.insert("namespace".into(), json!(ns));
                m.entry("uid").or_insert(json!(uid));
                m.entry("creationTimestamp").or_insert(json!(created));
                m.insert("resourceVersion".into(), json!(rv));
                m.entry("generation").or_insert(json!(1));
            }
        }
    }

    /// GET.
    pub fn get(&self, plural: &str, ns: &str, name: &str) -> Result<Value, ApiError> {
        Self::known(plural)?;
        self.objects.get(&(plural.into(), ns.into(), name.into())).cloned().ok_or_else(|| Self::not_found(plural, name))
    }

    /// LIST, as a `<Kind>List`.
    pub fn list(&self, plural: &str, ns: &str) -> Result<Value, ApiError> {
        self.list_selected(plural, Some(ns), &Selectors::default())
    }

    /// LIST in one namespace (or all, with `None`), filtered by the
    /// equality-based field and label selectors the API server supports.
    pub fn list_selected(&self, plural: &str, ns: Option<&str>, sel: &Selectors) -> Result<Value, ApiError> {
        let kind = Self::known(plural)?;
        let items: Vec<Value> = self
            .objects
            .iter()
            .filter(|((p, n, _), _)| p == plural && ns.is_none_or(|ns| n == ns))
            .filter(|(_, v)| sel.matches(v))
            .map(|(_, v)| v.clone())
            .collect();
        Ok(json!({
            "apiVersion": API_VERSION, "kind": format!("{kind}List"),
            "metadata": {"resourceVersion": self.resource_version.to_string()},
            "items": items
        }))
    }

    /// POST. As for any CRD with a status subresource, status is dropped.
    pub fn create(&mut self, plural: &str, ns: &str, mut obj: Value) -> Result<Value, ApiError> {
        let name = Self::body_name(plural, &obj)?;
        if name.is_empty() {
            return Err(ApiError::new(
                422,
                "Invalid",
                "metadata.name: Required value: name or generateName is required".into(),
            ));
        }
        if self.objects.contains_key(&(plural.into(), ns.into(), name.clone())) {
            return Err(ApiError::new(409, "AlreadyExists", format!("{plural}.{GROUP} {name:?} already exists")));
        }
        if let Some(o) = obj.as_object_mut() {
            o.remove("status");
            if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
                m.remove("uid");
                m.remove("creationTimestamp");
            }
        }
        self.check(plural, &name, &obj)?;
        self.stamp_new(plural, ns, &mut obj);
        self.objects.insert((plural.into(), ns.into(), name), obj.clone());
        Ok(obj)
    }

    fn write(
        &mut self,
        plural: &str,
        ns: &str,
        name: &str,
        incoming_rv: Option<String>,
        next: Value,
    ) -> Result<Value, ApiError> {
        let key = (plural.to_string(), ns.to_string(), name.to_string());
        let current = self.objects.get(&key).cloned().ok_or_else(|| Self::not_found(plural, name))?;
        let current_rv =
            current.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default().to_string();
        if let Some(rv) = incoming_rv.filter(|r| !r.is_empty())
            && rv != current_rv
        {
            self.conflicts += 1;
            return Err(ApiError::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {plural}.{GROUP} {name:?}: the object has been modified; please apply your changes to the latest version and try again"
                ),
            ));
        }
        let mut next = next;
        if !next.is_object() || !next.get("metadata").is_none_or(Value::is_object) {
            return Err(ApiError::new(
                400,
                "BadRequest",
                format!("{plural} {name:?}: the body is not an object with object metadata"),
            ));
        }
        if next.get("metadata").is_none() {
            next["metadata"] = json!({});
        }
        // Identity fields are the server's.
        for f in ["uid", "creationTimestamp", "namespace", "name", "generation", "deletionTimestamp"] {
            if let Some(v) = current.pointer(&format!("/metadata/{f}")) {
                next["metadata"][f] = v.clone();
            }
        }
        next["apiVersion"] = current["apiVersion"].clone();
        next["kind"] = current["kind"].clone();
        self.check(plural, name, &next)?;
        if next.get("spec") != current.get("spec") {
            let g = current.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
            next["metadata"]["generation"] = json!(g + 1);
        }
        let rv = self.bump();
        next["metadata"]["resourceVersion"] = json!(rv);
        self.objects.insert(key, next.clone());
        Ok(next)
    }

    fn split(current: &Value, proposed: Value, status_only: bool) -> Value {
        let mut next = if status_only { current.clone() } else { proposed.clone() };
        if status_only {
            match proposed.get("status") {
                Some(s) => next["status"] = s.clone(),
                None => {
                    if let Some(o) = next.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
        } else if let Some(o) = next.as_object_mut() {
            // The main resource ignores status; the status subresource owns it.
            match current.get("status") {
                Some(s) => {
                    o.insert("status".into(), s.clone());
                }
                None => {
                    o.remove("status");
                }
            }
        }
        next
    }

    /// PUT (whole object or `/status`), guarded by the body's resourceVersion.
    pub fn replace(
        &mut self,
        plural: &str,
        ns: &str,
        name: &str,
        obj: Value,
        status_only: bool,
    ) -> Result<Value, ApiError> {
        let current = self.get(plural, ns, name)?;
        let rv = obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).map(str::to_string);
        if rv.is_none() {
            // A PUT without resourceVersion is an unconditional update for
            // most types; CRDs accept it too. Kept, but callers should not.
        }
        let next = Self::split(&current, obj, status_only);
        self.write(plural, ns, name, rv, next)
    }

    /// PATCH with `application/merge-patch+json`; a resourceVersion in the
    /// patch is a precondition.
    pub fn patch(
        &mut self,
        plural: &str,
        ns: &str,
        name: &str,
        patch: &Value,
        status_only: bool,
    ) -> Result<Value, ApiError> {
        let current = self.get(plural, ns, name)?;
        let rv = patch.pointer("/metadata/resourceVersion").and_then(Value::as_str).map(str::to_string);
        let mut proposed = current.clone();
        merge_patch(&mut proposed, patch);
        let next = Self::split(&current, proposed, status_only);
        self.write(plural, ns, name, rv, next)
    }

    /// DELETE with optional uid / resourceVersion preconditions.
    pub fn delete(
        &mut self,
        plural: &str,
        ns: &str,
        name: &str,
        uid: Option<&str>,
        rv: Option<&str>,
    ) -> Result<Value, ApiError> {
        let current = self.get(plural, ns, name)?;
        let meta = |f: &str| current.pointer(&format!("/metadata/{f}")).and_then(Value::as_str).map(str::to_string);
        if let Some(u) = uid
            && meta("uid").as_deref() != Some(u)
        {
            self.conflicts += 1;
            return Err(ApiError::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {plural}.{GROUP} {name:?}: Precondition failed: UID in precondition: {u}, UID in object meta: {}",
                    meta("uid").unwrap_or_default()
                ),
            ));
        }
        if let Some(r) = rv
            && meta("resourceVersion").as_deref() != Some(r)
        {
            self.conflicts += 1;
            return Err(ApiError::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {plural}.{GROUP} {name:?}: Precondition failed: ResourceVersion in precondition: {r}, ResourceVersion in object meta: {}",
                    meta("resourceVersion").unwrap_or_default()
                ),
            ));
        }
        self.objects.remove(&(plural.into(), ns.into(), name.into()));
        self.bump();
        if self.auto_gc {
            self.collect_garbage();
        }
        Ok(json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": name, "group": GROUP, "kind": plural, "uid": meta("uid").unwrap_or_default()}
        }))
    }

    fn exists_uid(&self, ns: &str, kind: &str, name: &str, uid: &str) -> bool {
        plural_of(kind)
            .and_then(|p| self.objects.get(&(p.to_string(), ns.to_string(), name.to_string())))
            .and_then(|o| o.pointer("/metadata/uid").and_then(Value::as_str).map(|u| u == uid))
            .unwrap_or(false)
    }

    /// The garbage collector's two halves: an object whose every owner
    /// reference resolves to gone is deleted; one with some solid owners has
    /// its dangling references removed. Zero owner references: never
    /// collected. Runs to a fixpoint (cascades).
    pub fn collect_garbage(&mut self) {
        loop {
            let mut changed = false;
            let keys: Vec<Key> = self.objects.keys().cloned().collect();
            for key in keys {
                let Some(obj) = self.objects.get(&key).cloned() else {
                    continue;
                };
                let refs =
                    obj.pointer("/metadata/ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default();
                if refs.is_empty() {
                    continue;
                }
                let solid: Vec<Value> = refs
                    .iter()
                    .filter(|r| {
                        self.exists_uid(
                            &key.1,
                            r["kind"].as_str().unwrap_or(""),
                            r["name"].as_str().unwrap_or(""),
                            r["uid"].as_str().unwrap_or(""),
                        )
                    })
                    .cloned()
                    .collect();
                if solid.is_empty() {
                    self.objects.remove(&key);
                    changed = true;
                } else if solid.len() != refs.len() {
                    let mut next = obj.clone();
                    next["metadata"]["ownerReferences"] = Value::Array(solid);
                    let rv = self.bump();
                    next["metadata"]["resourceVersion"] = json!(rv);
                    self.objects.insert(key, next);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// Every stored object of a plural in a namespace.
    pub fn all(&self, plural: &str, ns: &str) -> Vec<Value> {
        self.list(plural, ns).ok().and_then(|l| l["items"].as_array().cloned()).unwrap_or_default()
    }
}

/// An owner reference to a seeded Task.
fn task_ref(task: &Value, controller: bool) -> Value {
    json!({
        "apiVersion": API_VERSION, "kind": "Task",
        "name": task.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
        "uid": task.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
        "controller": controller, "blockOwnerDeletion": true
    })
}

/// Seed a small tatara world, every object valid under the CRD schemas in
/// `compat/tatara-crds/`: project `tatara`, repository `tatara-operator`, a
/// refine umbrella with two brainstorm members, a failed Task, three Issues
/// in the spec's shapes (umbrella-controlled with a member's plain
/// reference, member-controlled, ownerless after a failed Task's release) and
/// a bot-authored MergeRequest on `task/member-b`. Returns the objects in
/// seeding order as `(plural, object)`.
pub fn seed_world(store: &mut Store, ns: &str) -> Result<Vec<(String, Value)>, ApiError> {
    let mut out = Vec::new();
    let mut put = |store: &mut Store, plural: &str, obj: Value| -> Result<Value, ApiError> {
        let v = store.seed(plural, ns, obj)?;
        out.push((plural.to_string(), v.clone()));
        Ok(v)
    };
    put(
        store,
        "projects",
        json!({"metadata": {"name": "tatara"}, "spec": {
            "scmSecretRef": "tatara-scm", "maxNewTasksPerSweep": 5, "maxOpenTasks": 6,
            "triggerLabel": "tatara",
            "scm": {"botLogin": "tatara-bot", "owner": "acme", "provider": "github",
                    "maintainerLogins": ["maint"], "reporterLogins": ["alice"]},
            "upgradePolicy": {"adoptBranchPrefix": "renovate/", "upgradeEngineLogins": ["renovate[bot]"]}
        }}),
    )?;
    put(
        store,
        "repositories",
        json!({"metadata": {"name": "tatara-operator"}, "spec": {
            "projectRef": "tatara", "url": "https://github.com/acme/tatara-operator",
            "reingestSchedule": "0 3 * * *"
        }}),
    )?;
    let umbrella = put(
        store,
        "tasks",
        json!({"metadata": {"name": "umbrella"}, "spec": {
        "projectRef": "tatara", "goal": "Refine the ownership work", "kind": "refine"
    }, "status": {"state": "new"}}),
    )?;
    let member_a = put(
        store,
        "tasks",
        json!({"metadata": {"name": "member-a"}, "spec": {
        "projectRef": "tatara", "goal": "Brainstorm A", "kind": "brainstorm", "repositoryRef": "tatara-operator"
    }, "status": {"state": "new", "issueRefs": ["tatara-operator#412", "tatara-operator#413"],
        "notes": [{"agent": "brainstorm", "at": "2026-11-01T10:00:00Z", "kind": "note", "body": "first thoughts"}]}}),
    )?;
    let member_b = put(
        store,
        "tasks",
        json!({"metadata": {"name": "member-b"}, "spec": {
        "projectRef": "tatara", "goal": "Brainstorm B", "kind": "brainstorm", "repositoryRef": "tatara-operator"
    }, "status": {"state": "new", "issueRefs": ["tatara-operator#414"], "mrRefs": ["tatara-operator#9"]}}),
    )?;
    put(
        store,
        "tasks",
        json!({"metadata": {"name": "old-failed"}, "spec": {
        "projectRef": "tatara", "goal": "Too big", "kind": "implement"
    }, "status": {"state": "under-implementation", "parkReason": "object-too-large",
        "parkedAt": "2026-11-20T00:00:00Z", "stateEnteredAt": "2026-11-19T00:00:00Z"}}),
    )?;
    let issue = |n: i64, refs: Vec<Value>, state: &str| {
        json!({"metadata": {"name": format!("iss-tatara-operator-{n}"), "ownerReferences": refs},
            "spec": {"number": n, "projectRef": "tatara", "repositoryRef": "tatara-operator",
                     "url": format!("https://github.com/acme/tatara-operator/issues/{n}")},
            "status": {"state": state, "author": "alice", "title": format!("Issue {n}"),
                "comments": [{"author": "alice", "body": "please look", "createdAt": "2026-11-01T09:00:00Z", "externalId": format!("c{n}")}]}})
    };
    put(store, "issues", issue(412, vec![task_ref(&umbrella, true), task_ref(&member_a, false)], "open"))?;
    put(store, "issues", issue(413, vec![task_ref(&member_a, true)], "open"))?;
    put(store, "issues", issue(414, vec![task_ref(&member_b, true)], "open"))?;
    put(store, "issues", issue(415, vec![], "open"))?;
    put(
        store,
        "mergerequests",
        json!({"metadata": {"name": "mr-tatara-operator-9",
            "ownerReferences": [task_ref(&member_b, true)]},
        "spec": {"number": 9, "projectRef": "tatara", "repositoryRef": "tatara-operator",
                 "url": "https://github.com/acme/tatara-operator/pull/9"},
        "status": {"state": "open", "author": "tatara-bot", "headBranch": "task/member-b",
            "headSHA": "abc123", "lastBotHeadSHA": "abc123", "ownership": "tatara", "ciStatus": "green"}}),
    )?;
    Ok(out)
}

/// A running fake API server.
#[derive(Debug, Clone)]
pub struct FakeApi {
    pub addr: SocketAddr,
    pub store: Arc<Mutex<Store>>,
}

impl FakeApi {
    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kube client pointed at this server, defaulting to `namespace`.
    pub fn client(&self, namespace: &str) -> Result<kube::Client, String> {
        let uri: axum::http::Uri = self.url().parse().map_err(|e| format!("bad url: {e}"))?;
        let mut config = kube::Config::new(uri);
        config.default_namespace = namespace.to_string();
        kube::Client::try_from(config).map_err(|e| format!("kube client: {e}"))
    }
}

/// Serve `store` on a free loopback port until the runtime stops.
pub async fn serve(store: Store) -> std::io::Result<FakeApi> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Mutex::new(store));
    let state = shared.clone();
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
        let state = state.clone();
        async move { handle(&state, method, uri, body) }
    });
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "fake API server stopped");
        }
    });
    Ok(FakeApi { addr, store: shared })
}

fn reply(code: u16, body: Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [("content-type", "application/json")], body.to_string()).into_response()
}

fn handle(store: &Mutex<Store>, method: Method, uri: Uri, body: Bytes) -> Response {
    let segs: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    // Cluster-wide LIST: /apis/tatara.dev/v1alpha1/{plural}
    if segs.len() == 4 && segs[..3] == ["apis", GROUP, VERSION] && method == Method::GET {
        let plural = segs[3];
        let Ok(s) = store.lock() else {
            return reply(
                500,
                json!({"kind": "Status", "status": "Failure", "message": "store poisoned", "code": 500}),
            );
        };
        return match Selectors::from_query(uri.query().unwrap_or(""))
            .and_then(|sel| s.list_selected(plural, None, &sel))
        {
            Ok(v) => reply(200, v),
            Err(e) => reply(e.code, e.status(plural, "")),
        };
    }
    let prefix = ["apis", GROUP, VERSION, "namespaces"];
    if segs.len() < 6 || segs[..4] != prefix {
        return reply(
            404,
            ApiError::new(404, "NotFound", format!("the server could not find the requested resource {}", uri.path()))
                .status("", ""),
        );
    }
    let (ns, plural) = (segs[4], segs[5]);
    let name = segs.get(6).copied();
    let status_only = segs.get(7) == Some(&"status");
    if segs.len() > 8 || (segs.len() == 8 && !status_only) {
        return reply(
            404,
            ApiError::new(404, "NotFound", format!("no such subresource {}", uri.path()))
                .status(plural, name.unwrap_or("")),
        );
    }
    let parsed: Result<Value, ApiError> = if body.is_empty() {
        Ok(Value::Null)
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::new(400, "BadRequest", format!("request body is not JSON: {e}")))
    };
    let Ok(mut s) = store.lock() else {
        return reply(500, json!({"kind": "Status", "status": "Failure", "message": "store poisoned", "code": 500}));
    };
    let result = parsed.and_then(|body| match (method.clone(), name) {
        (Method::GET, None) => {
            Selectors::from_query(uri.query().unwrap_or("")).and_then(|sel| s.list_selected(plural, Some(ns), &sel))
        }
        (Method::POST, None) => s.create(plural, ns, body),
        (Method::GET, Some(n)) => s.get(plural, ns, n),
        (Method::PUT, Some(n)) => s.replace(plural, ns, n, body, status_only),
        (Method::PATCH, Some(n)) => s.patch(plural, ns, n, &body, status_only),
        (Method::DELETE, Some(n)) => {
            let uid = body.pointer("/preconditions/uid").and_then(Value::as_str).map(str::to_string);
            let rv = body.pointer("/preconditions/resourceVersion").and_then(Value::as_str).map(str::to_string);
            s.delete(plural, ns, n, uid.as_deref(), rv.as_deref())
        }
        _ => Err(ApiError::new(405, "MethodNotAllowed", format!("{method} is not supported on {}", uri.path()))),
    });
    match result {
        Ok(v) => reply(if method == Method::POST { 201 } else { 200 }, v),
        Err(e) => reply(e.code, e.status(plural, name.unwrap_or(""))),
    }
}

#[cfg(test)]
mod tests;
