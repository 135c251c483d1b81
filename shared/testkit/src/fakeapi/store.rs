//! The store behind the fake API, usable directly (synchronously) by
//! tests. Like etcd behind kube-apiserver it keeps one global, monotonically
//! increasing resourceVersion across every type and an event log (a window
//! of the latest writes) that watches resume from and that paged LISTs read
//! their snapshot from; older history is gone (`410 Expired`).

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::path::Path;

use base64::Engine;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::apply::ApplyOptions;
use super::error::ApiError;
use super::fields::{self, FieldValidation};
use super::registry::{Registry, ResourceType, documents};
use super::schema::{FieldPath, default_and_prune, validate_schema};
use super::select::{Continue, ListOptions, Selectors};
use super::watch::{WatchFilter, bookmark, watch_event};

/// etcd's default object ceiling (1.5 MiB).
pub const ETCD_OBJECT_LIMIT: usize = 1_572_864;

/// How many events the log keeps unless told otherwise.
pub const DEFAULT_EVENT_WINDOW: usize = 100_000;

/// The user every write is attributed to unless a test says otherwise.
pub const DEFAULT_USER: &str = "system:admin";

/// The garbage collector's user, as the real API server's audit log names it.
pub const GC_USER: &str = "system:serviceaccount:kube-system:generic-garbage-collector";

/// (store key of the type, namespace or `""`, name)
type Key = (String, String, String);

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    /// `ADDED`, `MODIFIED`, `DELETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// An object's place in a list: etcd's key order, `<namespace>/<name>`
/// compared as bytes (so `a-b/x` lists before `a/x`, as on a real API
/// server), which is also the order a continue token's start names.
#[derive(Debug, Clone, Copy)]
struct ListKey<'a> {
    ns: &'a str,
    name: &'a str,
}

impl<'a> ListKey<'a> {
    /// The key a continue token's start (`<namespace>/<name>\0`) names;
    /// neither part can hold a `/`.
    fn of_start(start: &'a str) -> Self {
        match start.split_once('/') {
            Some((ns, name)) => ListKey { ns, name },
            None => ListKey { ns: start, name: "" },
        }
    }

    fn bytes(&self) -> impl Iterator<Item = u8> + 'a {
        self.ns.bytes().chain(std::iter::once(b'/')).chain(self.name.bytes())
    }
}

impl PartialEq for ListKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for ListKey<'_> {}

impl Ord for ListKey<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.bytes().cmp(other.bytes())
    }
}

impl PartialOrd for ListKey<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// One entry of the event log: a write, at its resourceVersion.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub resource_version: u64,
    pub event_type: EventType,
    /// The type's store key ([`ResourceType::qualified`]).
    pub resource: String,
    pub namespace: String,
    pub name: String,
    /// The object after the write (for DELETED: its last state, at the
    /// deletion's resourceVersion).
    pub object: Value,
    /// The object before the write (none for ADDED).
    pub previous: Option<Value>,
}

/// One write as the API server's audit log would name it: who, which verb,
/// on what, and the objects of the request and the response.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub user: String,
    /// `create`, `update`, `patch`, `delete`.
    pub verb: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    /// `status` for a status write.
    pub subresource: Option<String>,
    pub namespace: String,
    pub name: String,
    /// The request body (the object, the patch or the DeleteOptions).
    pub request: Option<Value>,
    /// The object as stored after the write (deleted: its last state).
    pub response: Value,
    /// The resourceVersion the write produced.
    pub resource_version: u64,
}

/// Options of a DELETE (the `DeleteOptions` body).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// `Orphan` keeps dependents (their owner references to the deleted
    /// object removed); `Background` and `Foreground` collect them.
    pub propagation_policy: Option<String>,
}

impl DeleteOptions {
    /// From a DELETE body (`preconditions`, `propagationPolicy`).
    pub fn from_body(body: &Value) -> Self {
        let s = |p: &str| body.pointer(p).and_then(Value::as_str).map(str::to_string);
        DeleteOptions {
            uid: s("/preconditions/uid"),
            resource_version: s("/preconditions/resourceVersion"),
            propagation_policy: s("/propagationPolicy").or_else(|| {
                body.get("orphanDependents").and_then(Value::as_bool).filter(|o| *o).map(|_| "Orphan".to_string())
            }),
        }
    }
}

/// The store.
#[derive(Debug)]
pub struct Store {
    registry: Registry,
    objects: BTreeMap<Key, Value>,
    resource_version: u64,
    /// The latest timestamp stamped (seconds): stamps follow the wall
    /// clock, and never go back when it does.
    clock: i64,
    events: VecDeque<Event>,
    event_window: usize,
    /// Every event with a resourceVersion at or below this is gone.
    compacted: u64,
    notify: tokio::sync::watch::Sender<u64>,
    writes: Vec<Write>,
    user: String,
    dry_run: bool,
    /// What a write does with fields its type does not declare.
    field_validation: FieldValidation,
    /// The warnings of the writes so far (`unknown field "spec.x"`), until
    /// taken.
    warnings: Vec<String>,
    /// Run the garbage collector after every delete (the real GC is
    /// asynchronous; tests want the settled state).
    pub auto_gc: bool,
    /// Writes refused for carrying two controller references.
    pub two_controller_rejections: u64,
    /// Writes refused for a stale resourceVersion or a failed precondition.
    pub conflicts: u64,
}

impl Default for Store {
    fn default() -> Self {
        Store::with_registry(Registry::standard())
    }
}

/// The wall clock, in whole seconds since the epoch.
fn wall_clock() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Stamps `rv` into an object.
fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), json!(rv.to_string()));
    }
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str)
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
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

/// How a write's body became the object, for the error `Strict` answers
/// when the object has unknown fields.
enum Decoded {
    /// The body is the object (PUT, server-side apply).
    Body,
    /// A JSON or merge patch of the current object.
    Patched,
    /// A strategic merge patch (this body).
    Strategic(Value),
}

/// A strategic merge patch without its directives (`$setElementOrder/...`,
/// `$retainKeys`, `$patch`, `$deleteFromPrimitiveList/...`): instructions
/// to the merge, never fields of the object.
fn without_directives(patch: &Value) -> Value {
    match patch {
        Value::Object(m) => Value::Object(
            m.iter().filter(|(k, _)| !k.starts_with('$')).map(|(k, v)| (k.clone(), without_directives(v))).collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_directives).collect()),
        other => other.clone(),
    }
}

/// What an update or patch is, for its precondition and the write log.
struct Change {
    verb: &'static str,
    decoded: Decoded,
    status_only: bool,
    /// The resourceVersion precondition, when the body carries one.
    rv: Option<String>,
    request: Value,
    /// Server-side apply's managedFields, kept through the status split.
    managed_fields: Option<Value>,
}

/// Restores the user (and the dry-run flag and field validation) a guard
/// replaced.
#[derive(Debug)]
pub struct AsUser<'a> {
    store: &'a mut Store,
    previous: (String, bool, FieldValidation),
}

impl AsUser<'_> {
    /// Writes through this guard treat unknown fields as `fieldValidation`
    /// says (`Warn` unless set).
    pub fn with_field_validation(self, v: FieldValidation) -> Self {
        self.store.field_validation = v;
        self
    }
}

impl std::ops::Deref for AsUser<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        self.store
    }
}

impl std::ops::DerefMut for AsUser<'_> {
    fn deref_mut(&mut self) -> &mut Store {
        self.store
    }
}

impl Drop for AsUser<'_> {
    fn drop(&mut self) {
        (self.store.user, self.store.dry_run, self.store.field_validation) = std::mem::take(&mut self.previous);
    }
}

impl Store {
    /// Serves the built-in types and the vendored CRDs' types (tatara.dev,
    /// configbutler.ai), with no schema: writes are not validated until
    /// [`Store::load_crd_schemas`] loads the CRDs (or use
    /// [`Store::validated`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Like [`Store::new`], every vendored CRD's writes validated against
    /// its schema (pruned and defaulted first, as the API server does).
    pub fn validated() -> Self {
        Self::with_registry(Registry::vendored())
    }

    /// A store serving exactly `registry`'s types.
    pub fn with_registry(registry: Registry) -> Self {
        Store {
            registry,
            objects: BTreeMap::new(),
            resource_version: 1000,
            clock: wall_clock(),
            events: VecDeque::new(),
            event_window: DEFAULT_EVENT_WINDOW,
            compacted: 1000,
            notify: tokio::sync::watch::Sender::new(1000),
            writes: Vec::new(),
            user: DEFAULT_USER.into(),
            dry_run: false,
            field_validation: FieldValidation::default(),
            warnings: Vec::new(),
            auto_gc: true,
            two_controller_rejections: 0,
            conflicts: 0,
        }
    }

    /// The served types.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Register (or replace) a type.
    pub fn register(&mut self, t: ResourceType) {
        self.registry.register(t);
    }

    /// Load every CRD in `dir` (e.g. `testkit::fixtures::tatara_crds()`):
    /// its types are served and their writes validated. Returns how many
    /// CRDs were loaded.
    pub fn load_crd_schemas(&mut self, dir: &Path) -> Result<usize, String> {
        self.registry.load_crds(dir)
    }

    /// The schema of a resource, when its CRD is loaded.
    pub fn schema(&self, resource: &str) -> Option<&Value> {
        self.registry.resolve(resource).and_then(|t| t.schema.as_ref())
    }

    /// The type a resource name (`plural`, `plural.group`, a short name)
    /// names, or the API server's 404.
    pub fn resource_type(&self, resource: &str) -> Result<ResourceType, ApiError> {
        self.registry.resolve(resource).cloned().ok_or_else(ApiError::no_resource)
    }

    /// The current (latest) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.resource_version
    }

    /// A receiver that sees the resourceVersion after every write.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.notify.subscribe()
    }

    /// Writes made through this guard are attributed to `user` (see
    /// [`Store::writes`]).
    pub fn as_user(&mut self, user: &str) -> AsUser<'_> {
        let dry_run = self.dry_run;
        self.acting_as(user, dry_run)
    }

    /// Writes through this guard run every check and answer as the API
    /// server does for `dryRun=All`, but store nothing.
    pub fn dry_run(&mut self) -> AsUser<'_> {
        let user = self.user.clone();
        self.acting_as(&user, true)
    }

    /// Writes through this guard are `user`'s, and dry runs when `dry_run`.
    pub fn acting_as(&mut self, user: &str, dry_run: bool) -> AsUser<'_> {
        let previous = (
            std::mem::replace(&mut self.user, user.into()),
            std::mem::replace(&mut self.dry_run, dry_run),
            self.field_validation,
        );
        AsUser { store: self, previous }
    }

    /// The warnings of the writes since the last call (`unknown field
    /// "spec.x"` for each field a `Warn` write dropped), leaving none.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// The fields of `obj` its type does not declare, as the request's
    /// `fieldValidation` has them: `Strict` refuses the write (with the
    /// error `refuse` makes of them and the object), `Warn` and `Ignore`
    /// drop them (`Warn` with a warning each).
    fn check_fields(
        &mut self,
        t: &ResourceType,
        obj: &mut Value,
        refuse: impl FnOnce(&[FieldPath], &Value) -> ApiError,
    ) -> Result<(), ApiError> {
        let unknown = fields::unknown_fields(t, obj);
        if unknown.is_empty() {
            return Ok(());
        }
        match self.field_validation {
            FieldValidation::Strict => return Err(refuse(&unknown, obj)),
            FieldValidation::Warn => self.warnings.extend(fields::messages(&unknown)),
            FieldValidation::Ignore => {}
        }
        fields::prune(obj, &unknown);
        Ok(())
    }

    /// Every write so far, in order (seeds are not writes).
    pub fn writes(&self) -> &[Write] {
        &self.writes
    }

    /// The writes so far, leaving none.
    pub fn take_writes(&mut self) -> Vec<Write> {
        std::mem::take(&mut self.writes)
    }

    /// The event log (oldest first).
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.events.iter()
    }

    /// The events after `rv`, or `410 Expired` when the log no longer
    /// reaches back to `rv`.
    pub fn events_after(&self, rv: u64) -> Result<Vec<Event>, ApiError> {
        self.check_not_compacted(rv)?;
        let first = self.events.partition_point(|e| e.resource_version <= rv);
        Ok(self.events.range(first..).cloned().collect())
    }

    /// What a watch sees first: with a resourceVersion, every event after
    /// it (`410 Expired` once compacted away); without one (or `0`, or with
    /// `sendInitialEvents`), an ADDED event per current object, then, for
    /// `sendInitialEvents` with bookmarks, the `k8s.io/initial-events-end`
    /// bookmark. Returns the event bodies and the resourceVersion they
    /// reach.
    pub fn watch_begin(&self, filter: &WatchFilter, opts: &ListOptions) -> Result<(Vec<Value>, u64), ApiError> {
        match opts.exact_version()? {
            Some(rv) if !opts.send_initial_events => {
                let (events, reached) = self.watch_poll(filter, rv)?;
                Ok((events, reached.max(rv)))
            }
            _ => {
                let t = &filter.resource_type;
                let q = t.qualified();
                let mut out: Vec<Value> = self
                    .of_type(&q)
                    .filter(|((_, n, _), v)| {
                        filter.namespace.as_ref().is_none_or(|ns| ns == n) && filter.selectors.matches(v)
                    })
                    .map(|(_, v)| watch_event(EventType::Added.as_str(), self.present(t, v.clone(), false)))
                    .collect();
                if opts.send_initial_events && opts.allow_bookmarks {
                    out.push(watch_event("BOOKMARK", bookmark(t, self.resource_version, true)));
                }
                Ok((out, self.resource_version))
            }
        }
    }

    /// The events a watch sees after `cursor` and the resourceVersion they
    /// reach, or `410 Expired` when the log no longer reaches back.
    pub fn watch_poll(&self, filter: &WatchFilter, cursor: u64) -> Result<(Vec<Value>, u64), ApiError> {
        let events = self.events_after(cursor)?;
        let t = &filter.resource_type;
        let out = events
            .iter()
            .filter_map(|e| filter.translate(e))
            .map(|(ty, obj)| watch_event(ty.as_str(), self.present(t, obj, false)))
            .collect();
        Ok((out, self.resource_version.max(cursor)))
    }

    /// The oldest resourceVersion a watch can still resume from.
    pub fn oldest_resumable(&self) -> u64 {
        self.compacted
    }

    fn check_not_compacted(&self, rv: u64) -> Result<(), ApiError> {
        if rv < self.compacted {
            return Err(ApiError::expired(format!("too old resource version: {rv} ({})", self.compacted)));
        }
        Ok(())
    }

    /// etcd compaction: forget every event so far. Watches and paged LISTs
    /// from any older resourceVersion get `410 Expired`.
    pub fn compact(&mut self) {
        self.events.clear();
        self.compacted = self.resource_version;
    }

    /// Keep at most `n` events (older ones are compacted away).
    pub fn set_event_window(&mut self, n: usize) {
        self.event_window = n;
        self.trim_events();
    }

    fn trim_events(&mut self) {
        while self.events.len() > self.event_window {
            if let Some(e) = self.events.pop_front() {
                self.compacted = e.resource_version;
            }
        }
    }

    fn bump(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    /// The store's clock (what creationTimestamps are read against): the
    /// wall clock, or the latest stamp should the wall clock have gone
    /// back since.
    pub(crate) fn now(&self) -> Timestamp {
        Timestamp::from_second(self.clock.max(wall_clock())).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    /// A timestamp for a write, as kube-apiserver stamps them: the wall
    /// clock at second resolution (writes in one second share it), never
    /// before an earlier stamp.
    fn tick(&mut self) -> String {
        self.clock = self.clock.max(wall_clock());
        Timestamp::from_second(self.clock).map(|t| t.to_string()).unwrap_or_default()
    }

    fn scope(t: &ResourceType, ns: &str) -> String {
        if t.namespaced { ns.to_string() } else { String::new() }
    }

    /// Puts `obj` at `key` (or removes it) at a new resourceVersion, logs
    /// the event and wakes the watches. Dry runs only stamp.
    fn commit(&mut self, key: Key, mut obj: Value, event_type: EventType, previous: Option<Value>) -> Value {
        if self.dry_run {
            return obj;
        }
        let rv = self.bump();
        set_rv(&mut obj, rv);
        match event_type {
            EventType::Deleted => {
                self.objects.remove(&key);
            }
            _ => {
                self.objects.insert(key.clone(), obj.clone());
            }
        }
        let (resource, namespace, name) = key;
        self.events.push_back(Event {
            resource_version: rv,
            event_type,
            resource,
            namespace,
            name,
            object: obj.clone(),
            previous,
        });
        self.trim_events();
        self.notify.send_replace(rv);
        obj
    }

    fn record(&mut self, t: &ResourceType, verb: &str, status: bool, request: Option<Value>, response: &Value) {
        if self.dry_run {
            return;
        }
        self.writes.push(Write {
            user: self.user.clone(),
            verb: verb.into(),
            group: t.group.clone(),
            version: t.version.clone(),
            resource: t.plural.clone(),
            subresource: status.then(|| "status".to_string()),
            namespace: meta_str(response, "namespace").unwrap_or_default().into(),
            name: meta_str(response, "name").unwrap_or_default().into(),
            request,
            response: response.clone(),
            resource_version: self.resource_version,
        });
    }

    /// The checks every write passes: size, one controller, no new
    /// finalizer on an object being deleted, the CRD schema (after
    /// pruning and defaulting, which change `obj` as the API server does).
    fn check(
        &mut self,
        t: &ResourceType,
        name: &str,
        obj: &mut Value,
        current: Option<&Value>,
    ) -> Result<(), ApiError> {
        let size = serde_json::to_vec(&*obj).map_or(usize::MAX, |b| b.len());
        if size > ETCD_OBJECT_LIMIT {
            return Err(ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("etcdserver: request is too large ({size} bytes for {} {name:?})", t.plural),
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
            return Err(ApiError::invalid(
                t,
                name,
                &[(
                    "metadata.ownerReferences".into(),
                    format!(
                        "Invalid value: Only one reference can have Controller set to true. Found \"true\" in references for {}",
                        controllers.join(" and ")
                    ),
                )],
            ));
        }
        if let Some(cur) = current
            && meta_str(cur, "deletionTimestamp").is_some()
        {
            let old = finalizers(cur);
            let added: Vec<String> = finalizers(obj).into_iter().filter(|f| !old.contains(f)).collect();
            if !added.is_empty() {
                return Err(ApiError::invalid(
                    t,
                    name,
                    &[(
                        "metadata.finalizers".into(),
                        format!(
                            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                        ),
                    )],
                ));
            }
        }
        if let Some(schema) = &t.schema {
            default_and_prune(schema, obj);
            let errs = validate_schema(schema, obj, "");
            if !errs.is_empty() {
                let causes: Vec<(String, String)> = errs
                    .iter()
                    .map(|e| match e.split_once(": ") {
                        Some((f, m)) => (f.to_string(), m.to_string()),
                        None => (String::new(), e.clone()),
                    })
                    .collect();
                return Err(ApiError::invalid(t, name, &causes));
            }
        }
        Ok(())
    }

    /// Checks a written body is an object with object metadata, and returns
    /// its name (empty when it has none).
    fn body_name(t: &ResourceType, obj: &Value) -> Result<String, ApiError> {
        if !obj.is_object() || !obj.get("metadata").is_none_or(Value::is_object) {
            return Err(ApiError::bad_request(format!("{}: the body is not an object with object metadata", t.plural)));
        }
        Ok(meta_str(obj, "name").unwrap_or_default().to_string())
    }

    /// What the API server's type strategies do to every written object.
    fn normalize(t: &ResourceType, obj: &mut Value) {
        if t.group.is_empty() && t.plural == "secrets" {
            // stringData is write-only: merged into data, base64-encoded.
            if let Some(string_data) = obj.as_object_mut().and_then(|o| o.remove("stringData"))
                && let Some(sd) = string_data.as_object()
            {
                let data = obj.as_object_mut().map(|o| o.entry("data").or_insert_with(|| json!({})));
                if let Some(Value::Object(data)) = data {
                    for (k, v) in sd {
                        let text = v.as_str().unwrap_or_default();
                        data.insert(k.clone(), json!(base64::engine::general_purpose::STANDARD.encode(text)));
                    }
                }
            }
            if obj.get("type").is_none() {
                obj["type"] = json!("Opaque");
            }
        }
        if t.group.is_empty() && t.plural == "namespaces" {
            if obj.pointer("/spec/finalizers").is_none() {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
            }
            if obj.pointer("/status/phase").is_none() {
                obj["status"] = json!({"phase": "Active"});
            }
        }
    }

    /// Fills what the server owns on a new object.
    fn stamp_new(&mut self, t: &ResourceType, ns: &str, obj: &mut Value) {
        let created = self.tick();
        let n = self.resource_version + 1;
        let uid = format!("{n:08x}-0000-4000-8000-{n:012x}");
        if let Some(o) = obj.as_object_mut() {
            o.insert("apiVersion".into(), json!(t.api_version()));
            o.insert("kind".into(), json!(t.kind));
            let meta = o.entry("metadata").or_insert_with(|| json!({}));
            if let Some(m) = meta.as_object_mut() {
                if t.namespaced {
                    m.insert("namespace".into(), json!(ns));
                } else {
                    m.remove("namespace");
                }
                m.entry("uid").or_insert(json!(uid));
                m.entry("creationTimestamp").or_insert(json!(created));
                if t.generation {
                    m.entry("generation").or_insert(json!(1));
                }
            }
        }
    }

    /// Insert an object as it already is (seeding, not a write): uid and
    /// creationTimestamp are filled when missing, a given resourceVersion
    /// is kept (the global one moves past it), status is kept. Logged as an
    /// ADDED event.
    pub fn seed(&mut self, resource: &str, ns: &str, mut obj: Value) -> Result<Value, ApiError> {
        let t = self.resource_type(resource)?;
        let ns = Self::scope(&t, ns);
        let name = Self::body_name(&t, &obj)?;
        if name.is_empty() {
            return Err(ApiError::invalid(
                &t,
                "",
                &[("metadata.name".into(), "Required value: name is required".into())],
            ));
        }
        let given_rv = meta_str(&obj, "resourceVersion").map(str::to_string);
        // Stored objects have only the fields of their type.
        let unknown = fields::unknown_fields(&t, &obj);
        fields::prune(&mut obj, &unknown);
        Self::normalize(&t, &mut obj);
        self.check(&t, &name, &mut obj, None)?;
        self.stamp_new(&t, &ns, &mut obj);
        let key = (t.qualified(), ns, name);
        let previous = self.objects.get(&key).cloned();
        let event = if previous.is_some() { EventType::Modified } else { EventType::Added };
        let mut stored = self.commit(key.clone(), obj, event, previous);
        if let Some(rv) = given_rv {
            if let Ok(n) = rv.parse::<u64>()
                && n > self.resource_version
            {
                self.resource_version = n;
                self.notify.send_replace(n);
            }
            stored["metadata"]["resourceVersion"] = json!(rv);
            self.objects.insert(key, stored.clone());
        }
        Ok(stored)
    }

    /// Seed an object whose `apiVersion`, `kind` and `metadata.namespace`
    /// say where it goes.
    pub fn seed_object(&mut self, obj: Value) -> Result<Value, ApiError> {
        let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
        let t = self.registry.by_kind(api_version, kind).cloned().ok_or_else(|| {
            ApiError::bad_request(format!("no kind {kind:?} is registered for version {api_version:?}"))
        })?;
        let ns = meta_str(&obj, "namespace").unwrap_or("default").to_string();
        self.seed(&t.qualified(), &ns, obj)
    }

    /// Seed every object of a YAML (or JSON) text: multi-document, or a
    /// `List`.
    pub fn seed_yaml(&mut self, text: &str) -> Result<Vec<Value>, ApiError> {
        let docs = documents(text).map_err(|e| ApiError::bad_request(format!("seed is not YAML: {e}")))?;
        docs.into_iter().map(|d| self.seed_object(d)).collect()
    }

    /// GET.
    pub fn get(&self, resource: &str, ns: &str, name: &str) -> Result<Value, ApiError> {
        let t = self.resource_type(resource)?;
        self.objects
            .get(&(t.qualified(), Self::scope(&t, ns), name.into()))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&t, name))
    }

    /// The objects of one type (its qualified name), in key order: a range
    /// of the map, so a list costs the type's objects, not the store's.
    fn of_type<'s>(&'s self, q: &str) -> impl Iterator<Item = (&'s Key, &'s Value)> + 's {
        let q = q.to_owned();
        self.objects.range((q.clone(), String::new(), String::new())..).take_while(move |((r, _, _), _)| *r == q)
    }

    /// LIST in one namespace, as a `<Kind>List`.
    pub fn list(&self, resource: &str, ns: &str) -> Result<Value, ApiError> {
        self.list_selected(resource, Some(ns), &Selectors::default())
    }

    /// LIST in one namespace (or all, with `None`), filtered by selectors.
    pub fn list_selected(&self, resource: &str, ns: Option<&str>, sel: &Selectors) -> Result<Value, ApiError> {
        self.list_with(resource, ns, &ListOptions { selectors: sel.clone(), ..Default::default() })
    }

    /// The objects of type `t` as they were at `rv` (the current ones when
    /// `rv` is now), in the API server's list order, or `410 Expired` when
    /// the log no longer reaches back. Borrowed: a page clones only its own
    /// items (cloning the whole type for each page was most of this fake's
    /// time serving a large cluster's lists, issue 31).
    fn snapshot(&self, t: &ResourceType, rv: u64) -> Result<BTreeMap<ListKey<'_>, &Value>, ApiError> {
        let q = t.qualified();
        let mut objects: BTreeMap<ListKey<'_>, &Value> =
            self.of_type(&q).map(|((_, ns, name), v)| (ListKey { ns, name }, v)).collect();
        if rv >= self.resource_version {
            return Ok(objects);
        }
        self.check_not_compacted(rv)?;
        // Newest first: the oldest write after `rv` says last what was there.
        for e in self.events.iter().rev().take_while(|e| e.resource_version > rv) {
            if e.resource != q {
                continue;
            }
            let key = ListKey { ns: &e.namespace, name: &e.name };
            match &e.previous {
                Some(p) => objects.insert(key, p),
                None => objects.remove(&key),
            };
        }
        Ok(objects)
    }

    /// LIST with the full query: selectors, `limit` + `continue` paging (a
    /// consistent snapshot at the first page's resourceVersion, `410
    /// Expired` once compacted away), `resourceVersion` with
    /// `resourceVersionMatch=Exact`.
    pub fn list_with(&self, resource: &str, ns: Option<&str>, opts: &ListOptions) -> Result<Value, ApiError> {
        let t = self.resource_type(resource)?;
        opts.selectors.check_fields(&t.plural)?;
        let ns = ns.filter(|n| t.namespaced && !n.is_empty());
        let (rv, start) = match &opts.continue_token {
            Some(token) => {
                let c = Continue::decode(token)?;
                if c.resource_version < self.compacted {
                    return Err(ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. \
                         You can start a new list without the continue parameter, or use the continue token \
                         in this response to retrieve the remainder of the results. Continuing with the provided \
                         token results in an inconsistent list - objects that were created, modified, or deleted \
                         between the time the first chunk was returned and now may show up in the list.",
                    ));
                }
                (c.resource_version, Some(c.start))
            }
            None => match (opts.exact_version()?, opts.resource_version_match.as_deref()) {
                (Some(rv), Some("Exact")) => (rv, None),
                _ => (self.resource_version, None),
            },
        };
        let snapshot = self.snapshot(&t, rv)?;
        let from = start.as_deref().map_or(Bound::Unbounded, |s| Bound::Included(ListKey::of_start(s)));
        let mut matching = snapshot
            .range((from, Bound::Unbounded))
            .filter(|(k, _)| ns.is_none_or(|ns| k.ns == ns))
            .filter(|(_, v)| opts.selectors.matches(v));
        let mut items = Vec::new();
        let mut last = None;
        for (k, v) in matching.by_ref() {
            items.push(self.present(&t, (*v).clone(), true));
            last = Some(k);
            if opts.limit.is_some_and(|l| items.len() >= l) {
                break;
            }
        }
        let remaining = matching.count();
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if remaining > 0
            && let Some(last) = last
        {
            let start = format!("{}/{}\u{0}", last.ns, last.name);
            metadata["continue"] = json!(Continue { resource_version: rv, start }.encode());
            if opts.selectors.is_empty() {
                metadata["remainingItemCount"] = json!(remaining);
            }
        }
        Ok(
            json!({"apiVersion": t.api_version(), "kind": format!("{}List", t.kind), "metadata": metadata, "items": items}),
        )
    }

    /// An object as served for type `t`: its apiVersion is the requested
    /// version; a built-in's LIST items carry no apiVersion and kind.
    pub(crate) fn present(&self, t: &ResourceType, mut obj: Value, list_item: bool) -> Value {
        if let Some(o) = obj.as_object_mut() {
            if list_item && !t.custom {
                o.remove("apiVersion");
                o.remove("kind");
            } else {
                o.insert("apiVersion".into(), json!(t.api_version()));
            }
        }
        obj
    }

    /// POST. With a status subresource, status is dropped. `generateName`
    /// makes the name when none is given.
    pub fn create(&mut self, resource: &str, ns: &str, mut obj: Value) -> Result<Value, ApiError> {
        let t = self.resource_type(resource)?;
        let ns = Self::scope(&t, ns);
        let request = obj.clone();
        let mut name = Self::body_name(&t, &obj)?;
        self.check_fields(&t, &mut obj, |unknown, _| fields::decode_error(&t, unknown))?;
        if name.is_empty()
            && let Some(prefix) = meta_str(&obj, "generateName").map(str::to_string)
        {
            name = self.generate_name(&t, &ns, &prefix);
            obj["metadata"]["name"] = json!(name);
        }
        if name.is_empty() {
            return Err(ApiError::invalid(
                &t,
                "",
                &[("metadata.name".into(), "Required value: name or generateName is required".into())],
            ));
        }
        let key = (t.qualified(), ns.clone(), name.clone());
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(&t, &name));
        }
        if let Some(o) = obj.as_object_mut() {
            if t.status_subresource {
                o.remove("status");
            }
            if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                for f in [
                    "resourceVersion",
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                ] {
                    m.remove(f);
                }
            }
        }
        Self::normalize(&t, &mut obj);
        self.check(&t, &name, &mut obj, None)?;
        self.stamp_new(&t, &ns, &mut obj);
        let stored = self.commit(key, obj, EventType::Added, None);
        self.record(&t, "create", false, Some(request), &stored);
        Ok(stored)
    }

    /// A name `generateName` + 5 characters from the API server's alphabet,
    /// not yet taken.
    fn generate_name(&self, t: &ResourceType, ns: &str, prefix: &str) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut seed = self.resource_version.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        loop {
            let suffix: String = (0..5)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    ALPHABET[((seed >> 33) % ALPHABET.len() as u64) as usize] as char
                })
                .collect();
            let name = format!("{prefix}{suffix}");
            if !self.objects.contains_key(&(t.qualified(), ns.into(), name.clone())) {
                return name;
            }
        }
    }

    fn write(
        &mut self,
        t: &ResourceType,
        ns: &str,
        name: &str,
        next: Value,
        change: Change,
    ) -> Result<Value, ApiError> {
        let key = (t.qualified(), ns.to_string(), name.to_string());
        let current = self.objects.get(&key).cloned().ok_or_else(|| ApiError::not_found(t, name))?;
        let current_rv = meta_str(&current, "resourceVersion").unwrap_or_default().to_string();
        if let Some(rv) = change.rv.filter(|r| !r.is_empty())
            && rv != current_rv
        {
            self.conflicts += 1;
            return Err(ApiError::conflict(t, name));
        }
        let mut next = next;
        if !next.is_object() || !next.get("metadata").is_none_or(Value::is_object) {
            return Err(ApiError::bad_request(format!(
                "{} {name:?}: the body is not an object with object metadata",
                t.plural
            )));
        }
        if next.get("metadata").is_none() {
            next["metadata"] = json!({});
        }
        // Identity and deletion state are the server's.
        for f in [
            "uid",
            "creationTimestamp",
            "namespace",
            "name",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            match current.pointer(&format!("/metadata/{f}")) {
                Some(v) => next["metadata"][f] = v.clone(),
                None => {
                    if let Some(m) = next["metadata"].as_object_mut() {
                        m.remove(f);
                    }
                }
            }
        }
        next["apiVersion"] = current["apiVersion"].clone();
        next["kind"] = current["kind"].clone();
        Self::normalize(t, &mut next);
        self.check(t, name, &mut next, Some(&current))?;
        if t.generation
            && (next.get("spec") != current.get("spec")
                || (!t.status_subresource && Self::non_meta_changed(&current, &next)))
        {
            let g = current.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
            next["metadata"]["generation"] = json!(g + 1);
        }
        next["metadata"]["resourceVersion"] = json!(current_rv);
        let stored = if meta_str(&next, "deletionTimestamp").is_some() && finalizers(&next).is_empty() {
            // The last finalizer is gone: the deletion completes.
            let stored = self.commit(key, next, EventType::Deleted, Some(current));
            if self.auto_gc && !self.dry_run {
                self.collect_garbage();
            }
            stored
        } else if next == current {
            // A no-op write changes nothing: no new resourceVersion, no event.
            return Ok(current);
        } else {
            self.commit(key, next, EventType::Modified, Some(current))
        };
        self.record(t, change.verb, change.status_only, Some(change.request), &stored);
        Ok(stored)
    }

    fn non_meta_changed(a: &Value, b: &Value) -> bool {
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(o) = v.as_object_mut() {
                o.remove("metadata");
                o.remove("status");
            }
            v
        };
        strip(a) != strip(b)
    }

    fn split(t: &ResourceType, current: &Value, proposed: Value, status_only: bool) -> Value {
        if !t.status_subresource {
            return proposed;
        }
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

    /// Resolves, reads the current object, lets `propose` make the next
    /// one, splits status, and writes.
    fn update_with(
        &mut self,
        resource: &str,
        ns: &str,
        name: &str,
        change: Change,
        propose: impl FnOnce(&ResourceType, &Value) -> Result<Value, ApiError>,
    ) -> Result<Value, ApiError> {
        let t = self.resource_type(resource)?;
        let ns = Self::scope(&t, ns);
        let current = self.get(resource, &ns, name)?;
        let mut proposed = propose(&t, &current)?;
        self.check_fields(&t, &mut proposed, |unknown, obj| match &change.decoded {
            Decoded::Body => fields::decode_error(&t, unknown),
            Decoded::Patched => fields::patch_error(&obj.to_string(), unknown),
            Decoded::Strategic(patch) => fields::patch_error(&fields::go_format(patch), unknown),
        })?;
        let mut next = Self::split(&t, &current, proposed, change.status_only);
        if let Some(mf) = &change.managed_fields {
            next["metadata"]["managedFields"] = mf.clone();
        }
        self.write(&t, &ns, name, next, change)
    }

    /// PATCH with `application/apply-patch+yaml` (see [`super::apply`]):
    /// creates the object when it does not exist (not through `/status`);
    /// an apply that changes nothing but managedFields times is a no-op.
    pub(crate) fn server_side_apply(
        &mut self,
        resource: &str,
        ns: &str,
        name: &str,
        config: &Value,
        opts: &ApplyOptions,
    ) -> Result<Value, ApiError> {
        let t = self.resource_type(resource)?;
        let ns = Self::scope(&t, ns);
        let body_name = meta_str(config, "name").unwrap_or_default();
        if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        // An applied field the type does not declare has no place in the
        // typed patch, whatever fieldValidation says.
        let unknown = fields::unknown_fields(&t, config);
        if !unknown.is_empty() {
            return Err(fields::apply_error(&t, &ns, name, &unknown));
        }
        let now = self.tick();
        let current = match self.get(resource, &ns, name) {
            Ok(c) => c,
            Err(e) if e.code == 404 && !opts.status_only => {
                let obj = super::apply::apply(&t, None, config, opts, &now)?;
                return self.create(resource, &ns, obj);
            }
            Err(e) => return Err(e),
        };
        let next = super::apply::apply(&t, Some(&current), config, opts, &now)?;
        let untimed = |v: &Value| {
            let mut v = v.clone();
            for e in v.pointer_mut("/metadata/managedFields").and_then(Value::as_array_mut).into_iter().flatten() {
                if let Some(o) = e.as_object_mut() {
                    o.remove("time");
                }
            }
            v
        };
        if untimed(&Self::split(&t, &current, next.clone(), opts.status_only)) == untimed(&current)
            && untimed(&next).pointer("/metadata/managedFields") == untimed(&current).pointer("/metadata/managedFields")
        {
            return Ok(current);
        }
        let rv = meta_str(config, "resourceVersion").map(str::to_string);
        let change = Change {
            verb: "patch",
            decoded: Decoded::Body,
            status_only: opts.status_only,
            rv,
            request: config.clone(),
            managed_fields: next.pointer("/metadata/managedFields").cloned(),
        };
        self.update_with(resource, &ns, name, change, |_, _| Ok(next))
    }

    /// PUT (whole object or `/status`), guarded by the body's
    /// resourceVersion when it carries one.
    pub fn replace(
        &mut self,
        resource: &str,
        ns: &str,
        name: &str,
        obj: Value,
        status_only: bool,
    ) -> Result<Value, ApiError> {
        let rv = meta_str(&obj, "resourceVersion").map(str::to_string);
        let change = Change {
            verb: "update",
            decoded: Decoded::Body,
            status_only,
            rv,
            request: obj.clone(),
            managed_fields: None,
        };
        self.update_with(resource, ns, name, change, |_, _| Ok(obj))
    }

    /// PATCH with `application/merge-patch+json`; a resourceVersion in the
    /// patch is a precondition.
    pub fn patch(
        &mut self,
        resource: &str,
        ns: &str,
        name: &str,
        patch: &Value,
        status_only: bool,
    ) -> Result<Value, ApiError> {
        self.merge_patch(resource, ns, name, patch, status_only, false)
    }

    /// A merge patch, or a strategic merge patch (`strategic`: merged as a
    /// merge patch here, its `$` directives dropped; lists are not merged
    /// by their keys).
    pub(crate) fn merge_patch(
        &mut self,
        resource: &str,
        ns: &str,
        name: &str,
        patch: &Value,
        status_only: bool,
        strategic: bool,
    ) -> Result<Value, ApiError> {
        let rv = patch.pointer("/metadata/resourceVersion").and_then(Value::as_str).map(str::to_string);
        let (decoded, merged) = if strategic {
            (Decoded::Strategic(patch.clone()), without_directives(patch))
        } else {
            (Decoded::Patched, patch.clone())
        };
        let change = Change { verb: "patch", decoded, status_only, rv, request: patch.clone(), managed_fields: None };
        self.update_with(resource, ns, name, change, |_, current| {
            let mut proposed = current.clone();
            merge_patch(&mut proposed, &merged);
            Ok(proposed)
        })
    }

    /// PATCH with `application/json-patch+json` (RFC 6902); a failed `test`
    /// or a bad path is `422`, as the API server answers.
    pub fn json_patch(
        &mut self,
        resource: &str,
        ns: &str,
        name: &str,
        ops: &Value,
        status_only: bool,
    ) -> Result<Value, ApiError> {
        let patch: json_patch::Patch = serde_json::from_value(ops.clone())
            .map_err(|e| ApiError::bad_request(format!("the body is not a JSON patch: {e}")))?;
        let change = Change {
            verb: "patch",
            decoded: Decoded::Patched,
            status_only,
            rv: None,
            request: ops.clone(),
            managed_fields: None,
        };
        self.update_with(resource, ns, name, change, |t, current| {
            let mut proposed = current.clone();
            // The API server's json-patch (evanphx/json-patch, patch.go
            // `test`) passes a test for null on a missing path: kube-rs's
            // finalizer helper adds the first finalizer that way.
            let ops: Vec<json_patch::PatchOperation> = patch
                .0
                .iter()
                .filter(|op| match op {
                    json_patch::PatchOperation::Test(t) => {
                        !(t.value.is_null() && current.pointer(t.path.as_str()).is_none())
                    }
                    _ => true,
                })
                .cloned()
                .collect();
            json_patch::patch(&mut proposed, &ops).map_err(|e| {
                ApiError::new(
                    422,
                    "Invalid",
                    format!("the JSON patch does not apply to {} {name:?}: {e}", t.qualified()),
                )
            })?;
            Ok(proposed)
        })
    }

    /// DELETE with optional uid / resourceVersion preconditions.
    pub fn delete(
        &mut self,
        resource: &str,
        ns: &str,
        name: &str,
        uid: Option<&str>,
        rv: Option<&str>,
    ) -> Result<Value, ApiError> {
        let opts = DeleteOptions {
            uid: uid.map(str::to_string),
            resource_version: rv.map(str::to_string),
            propagation_policy: None,
        };
        self.delete_with(resource, ns, name, &opts)
    }

    /// DELETE. An object with finalizers is only marked (deletionTimestamp,
    /// deletionGracePeriodSeconds 0; a MODIFIED event) and answered with
    /// itself; it goes when an update removes its last finalizer. Otherwise
    /// it is removed (a DELETED event) and answered with a `Status`.
    pub fn delete_with(
        &mut self,
        resource: &str,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let t = self.resource_type(resource)?;
        let ns = Self::scope(&t, ns);
        let current = self.get(resource, &ns, name)?;
        let meta = |f: &str| meta_str(&current, f).map(str::to_string);
        let preconditions = [("UID", "uid", &opts.uid), ("ResourceVersion", "resourceVersion", &opts.resource_version)];
        for (label, field, want) in preconditions {
            if let Some(want) = want
                && meta(field).as_ref() != Some(want)
            {
                self.conflicts += 1;
                let got = meta(field).unwrap_or_default();
                return Err(ApiError::conflict_because(
                    &t,
                    name,
                    &format!("Precondition failed: {label} in precondition: {want}, {label} in object meta: {got}"),
                ));
            }
        }
        let request = json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"});
        let key = (t.qualified(), ns.clone(), name.to_string());
        let orphan = opts.propagation_policy.as_deref() == Some("Orphan");
        if !finalizers(&current).is_empty() {
            if meta("deletionTimestamp").is_some() {
                return Ok(current);
            }
            let mut next = current.clone();
            next["metadata"]["deletionTimestamp"] = json!(self.tick());
            next["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            let stored = self.commit(key, next, EventType::Modified, Some(current));
            self.record(&t, "delete", false, Some(request), &stored);
            return Ok(stored);
        }
        let uid = meta("uid").unwrap_or_default();
        let stored = self.commit(key, current.clone(), EventType::Deleted, Some(current));
        self.record(&t, "delete", false, Some(request), &stored);
        if !self.dry_run {
            if orphan {
                self.orphan_dependents(&uid);
            } else if self.auto_gc {
                self.collect_garbage();
            }
        }
        let mut details = json!({"name": name, "kind": t.plural, "uid": uid});
        if !t.group.is_empty() {
            details["group"] = json!(t.group);
        }
        Ok(json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}))
    }

    /// DELETE on a collection: every selected object, each as a DELETE;
    /// answered with the list of what was deleted or marked.
    pub fn delete_collection(
        &mut self,
        resource: &str,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<Value, ApiError> {
        let t = self.resource_type(resource)?;
        let list =
            self.list_with(resource, ns, &ListOptions { selectors: opts.selectors.clone(), ..Default::default() })?;
        let mut items = Vec::new();
        for item in list["items"].as_array().into_iter().flatten() {
            let (n, name) =
                (meta_str(item, "namespace").unwrap_or_default(), meta_str(item, "name").unwrap_or_default());
            let gone = self.get(resource, n, name)?;
            let before = self.writes.len();
            self.delete_with(resource, n, name, &DeleteOptions::default())?;
            if let Some(w) = self.writes.get_mut(before) {
                w.verb = "deletecollection".into();
            }
            items.push(self.get(resource, n, name).unwrap_or(gone));
        }
        Ok(json!({"apiVersion": t.api_version(), "kind": format!("{}List", t.kind),
            "metadata": {"resourceVersion": self.resource_version.to_string()}, "items": items}))
    }

    /// Removes the owner references to `uid` from every dependent.
    fn orphan_dependents(&mut self, uid: &str) {
        let keys: Vec<Key> = self.objects.keys().cloned().collect();
        for key in keys {
            let Some(obj) = self.objects.get(&key).cloned() else { continue };
            let refs = obj.pointer("/metadata/ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default();
            let kept: Vec<Value> = refs.iter().filter(|r| r["uid"].as_str() != Some(uid)).cloned().collect();
            if kept.len() != refs.len() {
                let mut next = obj.clone();
                next["metadata"]["ownerReferences"] = Value::Array(kept);
                self.commit(key, next, EventType::Modified, Some(obj));
            }
        }
    }

    /// Whether the owner a reference names exists (same namespace for a
    /// namespaced owner). Owners of kinds no type serves count as present:
    /// the real collector cannot resolve them and leaves the dependent.
    fn owner_exists(&self, dependent_ns: &str, r: &Value) -> bool {
        let s = |f: &str| r.get(f).and_then(Value::as_str).unwrap_or("");
        let Some(t) = self.registry.by_kind(s("apiVersion"), s("kind")) else {
            return true;
        };
        let ns = if t.namespaced { dependent_ns } else { "" };
        self.objects
            .get(&(t.qualified(), ns.to_string(), s("name").to_string()))
            .is_some_and(|o| meta_str(o, "uid") == Some(s("uid")))
    }

    /// The garbage collector's two halves: an object whose every owner
    /// reference resolves to gone is deleted (finalizers honoured); one
    /// with some solid owners has its dangling references removed. Zero
    /// owner references: never collected. Runs to a fixpoint (cascades).
    /// Its writes are the collector's ([`GC_USER`]).
    pub fn collect_garbage(&mut self) {
        // The collector's own deletes do not start another collection.
        let user = std::mem::replace(&mut self.user, GC_USER.into());
        let auto_gc = std::mem::replace(&mut self.auto_gc, false);
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
                let solid: Vec<Value> = refs.iter().filter(|r| self.owner_exists(&key.1, r)).cloned().collect();
                if solid.is_empty() {
                    if meta_str(&obj, "deletionTimestamp").is_some() {
                        continue;
                    }
                    let Some(t) = self.registry.resolve(&key.0).cloned() else { continue };
                    if self.delete_with(&t.qualified(), &key.1, &key.2, &DeleteOptions::default()).is_ok() {
                        changed = true;
                    }
                } else if solid.len() != refs.len() {
                    let mut next = obj.clone();
                    next["metadata"]["ownerReferences"] = Value::Array(solid);
                    let stored = self.commit(key.clone(), next, EventType::Modified, Some(obj));
                    if let Some(t) = self.registry.resolve(&key.0).cloned() {
                        self.record(&t, "patch", false, None, &stored);
                    }
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        self.user = user;
        self.auto_gc = auto_gc;
    }

    /// Every stored object of a resource in a namespace.
    pub fn all(&self, resource: &str, ns: &str) -> Vec<Value> {
        let Ok(t) = self.resource_type(resource) else { return Vec::new() };
        let (q, ns) = (t.qualified(), Self::scope(&t, ns));
        self.of_type(&q).filter(|((_, n, _), _)| *n == ns).map(|(_, v)| v.clone()).collect()
    }
}
