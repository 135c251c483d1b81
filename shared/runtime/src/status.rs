//! Writes the status the rules computed (`rules::mirror::status`) on
//! gitops-reverser's CRs: server-side apply of `/status` under our own
//! field manager, forced (the mirror is the one owner of these statuses),
//! and a core/v1 Event on each persisted Ready transition, as the
//! reference's `record.EventRecorder` emits them (ref: gitops-reverser
//! `internal/controller/status.go:123-184`).
//!
//! Rate limits, so a flapping remote does not flood the API server: no
//! write when the status equals what the object holds or what was last
//! written; at most one write per object per `min_interval` (a change
//! inside it is deferred to the next report, the newest state winning).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::{Timestamp, Unit};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use rules::mirror::status::{Condition, ready_transition};
use serde_json::{Value, json};

/// The field manager of every status the mirror writes.
pub const FIELD_MANAGER: &str = "reverser-mirror";
/// `source.component` / `reportingComponent` of its Events.
pub const COMPONENT: &str = "reverser-mirror";

/// Writing a status or its Event failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StatusError {
    #[error(
        "writing the status of {what} failed: {source}; check that this identity may patch {plural}/status (RBAC) and that the CRD serves the status subresource"
    )]
    Write {
        what: String,
        plural: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error(
        "recording the Ready transition of {what} as an Event failed: {source}; check that this identity may create events"
    )]
    Event {
        what: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// The object a status is for.
#[derive(Debug, Clone)]
pub struct Object {
    pub resource: ApiResource,
    /// `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
}

impl Object {
    fn key(&self) -> String {
        format!("{}/{}/{}", self.resource.plural, self.namespace.as_deref().unwrap_or(""), self.name)
    }

    fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.resource.kind, self.name),
            None => format!("{} {}", self.resource.kind, self.name),
        }
    }
}

/// What a report did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Written; `event` when Ready changed and an Event was recorded.
    Written { event: bool },
    /// Nothing new to say.
    Unchanged,
    /// Changed, but the object was written less than `min_interval` ago.
    Deferred,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Outcome::Written { event: true } => "written, Ready changed (Event recorded)",
            Outcome::Written { event: false } => "written",
            Outcome::Unchanged => "unchanged",
            Outcome::Deferred => "deferred (written too recently)",
        })
    }
}

struct Slot {
    written: Value,
    at: Instant,
}

/// One per process: the last write of every object it reports on.
pub struct StatusWriter {
    client: kube::Client,
    min_interval: Duration,
    slots: HashMap<String, Slot>,
    writes: u64,
    events: u64,
}

impl std::fmt::Debug for StatusWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusWriter").field("min_interval", &self.min_interval).field("writes", &self.writes).finish()
    }
}

/// Now, to the second (metav1.Time's precision).
pub fn now() -> String {
    Timestamp::now().round(Unit::Second).map(|t| t.to_string()).unwrap_or_default()
}

/// The conditions of a status as the object holds it.
pub fn conditions(status: Option<&Value>) -> Vec<Condition> {
    status.and_then(|s| s.get("conditions")).and_then(|c| serde_json::from_value(c.clone()).ok()).unwrap_or_default()
}

impl StatusWriter {
    pub fn new(client: kube::Client, min_interval: Duration) -> Self {
        StatusWriter { client, min_interval, slots: HashMap::new(), writes: 0, events: 0 }
    }

    /// Status writes so far.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// Events recorded so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Lets the next write of `obj` through whatever the interval: the
    /// last one before the process stops.
    pub fn forget(&mut self, obj: &Object) {
        self.slots.remove(&obj.key());
    }

    /// Writes `next` as `obj`'s status unless it is what `current` (the
    /// status as read) or the last write holds, or the last write is too
    /// recent; records an Event when Ready changed from `current`'s.
    pub async fn report(&mut self, obj: &Object, current: Option<&Value>, next: Value) -> Result<Outcome, StatusError> {
        let key = obj.key();
        let slot = self.slots.get(&key);
        if current == Some(&next) {
            return Ok(Outcome::Unchanged);
        }
        if let Some(s) = slot.filter(|s| s.at.elapsed() < self.min_interval) {
            return Ok(if s.written == next { Outcome::Unchanged } else { Outcome::Deferred });
        }
        let api: Api<DynamicObject> = match &obj.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &obj.resource),
            None => Api::all_with(self.client.clone(), &obj.resource),
        };
        let mut metadata = json!({"name": obj.name});
        if let Some(ns) = &obj.namespace {
            metadata["namespace"] = json!(ns);
        }
        let patch = json!({
            "apiVersion": obj.resource.api_version,
            "kind": obj.resource.kind,
            "metadata": metadata,
            "status": next,
        });
        api.patch_status(&obj.name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch)).await.map_err(
            |e| StatusError::Write { what: obj.describe(), plural: obj.resource.plural.clone(), source: Box::new(e) },
        )?;
        self.writes += 1;
        self.slots.insert(key, Slot { written: next.clone(), at: Instant::now() });
        let before = conditions(current);
        let after = conditions(Some(&next));
        let Some((kind, ready)) = ready_transition(&before, &after) else {
            return Ok(Outcome::Written { event: false });
        };
        self.event(obj, kind, &ready.reason, &ready.message).await?;
        Ok(Outcome::Written { event: true })
    }

    async fn event(&mut self, obj: &Object, kind: &str, reason: &str, message: &str) -> Result<(), StatusError> {
        // client-go puts the Events of cluster-scoped objects in "default".
        let ns = obj.namespace.clone().unwrap_or_else(|| "default".into());
        let stamp = Timestamp::now();
        let time = Time(stamp);
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:x}", obj.name, stamp.as_nanosecond())),
                namespace: Some(ns.clone()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some(obj.resource.api_version.clone()),
                kind: Some(obj.resource.kind.clone()),
                name: Some(obj.name.clone()),
                namespace: obj.namespace.clone(),
                uid: Some(obj.uid.clone()).filter(|u| !u.is_empty()),
                ..ObjectReference::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some(kind.into()),
            source: Some(EventSource { component: Some(COMPONENT.into()), host: None }),
            first_timestamp: Some(time.clone()),
            last_timestamp: Some(time),
            count: Some(1),
            reporting_component: Some(COMPONENT.into()),
            reporting_instance: std::env::var("HOSTNAME").ok(),
            ..Event::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
        api.create(&PostParams::default(), &event)
            .await
            .map_err(|e| StatusError::Event { what: obj.describe(), source: Box::new(e) })?;
        self.events += 1;
        Ok(())
    }
}
