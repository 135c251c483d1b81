//! One list-then-watch of one type in one scope (spec/mirror.md, "The two
//! processes"): a list (paged), then a watch from the list's
//! resourceVersion with bookmarks on; a dropped connection resumes from the
//! last seen resourceVersion; `410 Gone` lists again. Every list goes to the
//! window as a reconcile; every event the rules and exclusions let through
//! goes to the window as an event.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, WatchEvent, WatchParams};
use rules::attribution::audit::meta_field;
use rules::attribution::watch::{WatchEvent as Event, WatchKind};
use rules::mirror::select::{excluded_field_manager, operation};
use rules::mirror::watch_rules::{WatchScope, WatchedType};
use runtime::backoff::Backoff;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::metrics::{EventLabels, WatchMetrics};
use super::readiness::{Outage, Readiness};
use crate::apiserver::Server;

/// What a watch hands the window.
#[derive(Debug)]
pub enum Item {
    /// One event to mirror, with when it arrived.
    Event { ty: Arc<WatchedType>, kind: WatchKind, object: Value, at: Instant },
    /// A complete list of the type in a scope: reconcile the tree with it.
    Listed(Listed),
    /// A CommitRequest for the window to carry.
    Request(super::commit_request::Pending),
}

/// A complete list of one type in one scope.
#[derive(Debug)]
pub struct Listed {
    pub ty: Arc<WatchedType>,
    pub scope: WatchScope,
    /// The listed objects, each already encoded as the JSON a reconcile
    /// sends: encoded here, beside the reconcile in flight, not after it.
    pub objects: Vec<Vec<u8>>,
    /// The list's resourceVersion.
    pub revision: String,
    pub at: Instant,
    /// One of [`Shared::lists`]: held until the window has reconciled this
    /// list, so at most that many types' objects are in memory at once.
    pub held: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// How many types' complete lists the watcher holds at once (listed, or
/// waiting for their reconcile): a start with 100 types listing together
/// would otherwise hold every object of the cluster at once.
pub const LISTS_HELD: usize = 4;

/// Page size of a list.
const PAGE: u32 = 500;
/// How long one watch request stays open before it is renewed (the API
/// server caps it; staying under its minimum keeps the renewal ours).
const WATCH_TIMEOUT_SECS: u32 = 290;

/// The things every watch shares.
#[derive(Clone)]
pub struct Shared {
    /// For lists (every call bounded by the connection's bounds).
    pub client: kube::Client,
    /// For watches: the same, but a longer silence is allowed (bookmarks).
    pub watch_client: kube::Client,
    pub server: Server,
    pub readiness: Arc<Readiness>,
    pub tx: mpsc::Sender<Item>,
    pub metrics: Arc<WatchMetrics>,
    pub exclude_field_managers: Arc<Vec<String>>,
    /// [`LISTS_HELD`] permits, one per list in memory.
    pub lists: Arc<tokio::sync::Semaphore>,
}

/// The readiness concern of one watch: `v1/configmaps in namespace shop`.
pub fn concern(key: &str, scope: &WatchScope) -> String {
    format!("{key} {scope}")
}

fn api(client: &kube::Client, ty: &WatchedType, scope: &WatchScope) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: ty.group.clone(),
        version: ty.version.clone(),
        api_version: ty.api_version(),
        kind: ty.kind.clone(),
        plural: ty.resource.clone(),
    };
    match scope {
        WatchScope::Namespace(ns) if ty.namespaced => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    }
}

/// A watched object as the API server would return it alone: list items
/// come without `apiVersion` and `kind`.
fn complete(mut object: Value, ty: &WatchedType) -> Value {
    if let Some(map) = object.as_object_mut() {
        map.entry("apiVersion").or_insert(Value::String(ty.api_version()));
        map.entry("kind").or_insert(Value::String(ty.kind.clone()));
    }
    object
}

/// Which of `apiVersion` and `kind` a JSON object names at its top level;
/// every value skipped unparsed.
struct Named {
    api_version: bool,
    kind: bool,
}

impl<'de> serde::Deserialize<'de> for Named {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Named;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Named, A::Error> {
                let mut named = Named { api_version: false, kind: false };
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match &*key {
                        "apiVersion" => named.api_version = true,
                        "kind" => named.kind = true,
                        _ => {}
                    }
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
                Ok(named)
            }
        }
        d.deserialize_map(V)
    }
}

/// A listed object's JSON as [`complete`] would make it, from the text the
/// API server sent: `apiVersion` and `kind` put first when the object does
/// not name them (list items do not), everything else as it came. Not a JSON
/// object: read whole and completed.
fn complete_json(item: &str, ty: &WatchedType) -> Vec<u8> {
    let Ok(named) = serde_json::from_str::<Named>(item) else {
        let object = serde_json::from_str(item).unwrap_or(Value::Null);
        return serde_json::to_vec(&complete(object, ty)).unwrap_or_default();
    };
    let body = item.trim_start().strip_prefix('{').unwrap_or_default();
    let mut out = Vec::with_capacity(item.len() + 64);
    out.push(b'{');
    let mut field = |name: &str, value: &str| {
        out.extend_from_slice(serde_json::to_string(name).unwrap_or_default().as_bytes());
        out.push(b':');
        out.extend_from_slice(serde_json::to_string(value).unwrap_or_default().as_bytes());
        out.push(b',');
    };
    if !named.api_version {
        field("apiVersion", &ty.api_version());
    }
    if !named.kind {
        field("kind", &ty.kind);
    }
    if body.trim_start().starts_with('}') && out.last() == Some(&b',') {
        out.pop();
    }
    out.extend_from_slice(body.as_bytes());
    out
}

fn to_value(object: &DynamicObject) -> Value {
    // A DynamicObject is plain JSON data: it always serializes.
    serde_json::to_value(object).unwrap_or(Value::Null)
}

/// A 403: RBAC refuses this identity the type.
fn is_forbidden(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403)
}

fn is_gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 410)
}

/// One page of a list, its items as the API server sent them.
#[derive(serde::Deserialize)]
struct RawPage {
    #[serde(default)]
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta,
    #[serde(default)]
    items: Vec<Box<serde_json::value::RawValue>>,
}

/// Lists every object (all pages); returns each as the JSON a reconcile
/// sends ([`complete_json`]) and the list's resourceVersion. The items are
/// not decoded into typed objects and encoded again: that was most of the
/// watcher's time in a first start (issue 31).
async fn list_all(client: &kube::Client, url: &str, ty: &WatchedType) -> kube::Result<(Vec<Vec<u8>>, String)> {
    let mut objects = Vec::new();
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let mut request = kube::core::Request::new(url).list(&params).map_err(kube::Error::BuildRequest)?;
        request.extensions_mut().insert("list");
        let page: RawPage = client.request(request).await?;
        let revision = page.metadata.resource_version.clone().unwrap_or_default();
        objects.extend(page.items.iter().map(|item| complete_json(item.get(), ty)));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok((objects, revision)),
        }
    }
}

/// Runs until `stop` fires or the window is gone. `ty` carries the type's
/// current rules (operations per namespace), updated without a restart.
pub async fn run(shared: Shared, mut ty: watch::Receiver<Arc<WatchedType>>, scope: WatchScope) {
    let current = ty.borrow_and_update().clone();
    let key = current.key();
    let concern = concern(&key, &scope);
    let lister = api(&shared.client, &current, &scope);
    let watcher = api(&shared.watch_client, &current, &scope);
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10)).expect("valid bounds");
    let mut outage = Outage::default();
    'relist: loop {
        // Closed never (the semaphore lives as long as `shared`).
        let held = shared.lists.clone().acquire_owned().await.ok();
        let listed_as = ty.borrow().clone();
        let (objects, revision) = match list_all(&shared.client, lister.resource_url(), &listed_as).await {
            Ok(x) => x,
            Err(e) => {
                let pause = backoff.next_delay();
                let why = shared.server.failure(&e);
                shared.readiness.failing(&concern, &format!("list failed: {why}"), is_forbidden(&e));
                outage.failed(&format!("listing {concern} failed"), &why, pause);
                shared.metrics.restart(&current.resource, "error");
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        outage.recovered(&format!("listing {concern}"));
        shared.readiness.ok(&concern);
        let ty_now = ty.borrow().clone();
        tracing::debug!(r#type = %key, %scope, objects = objects.len(), %revision, "listed");
        let listed = Item::Listed(Listed {
            ty: ty_now,
            scope: scope.clone(),
            objects,
            revision: revision.clone(),
            at: Instant::now(),
            held,
        });
        if shared.tx.send(listed).await.is_err() {
            return;
        }
        let mut rv = revision;
        loop {
            // Bookmarks are on by default: they keep `rv` fresh on a quiet
            // type, and keep bytes coming within WATCH_SILENCE.
            let params = WatchParams::default().timeout(WATCH_TIMEOUT_SECS);
            let stream = match watcher.watch(&params, &rv).await {
                Ok(s) => s,
                Err(e) if is_gone(&e) => {
                    tracing::info!(r#type = %key, %scope, "resourceVersion expired (410 Gone); listing again");
                    shared.metrics.restart(&current.resource, "gone");
                    continue 'relist;
                }
                Err(e) => {
                    let pause = backoff.next_delay();
                    let why = shared.server.failure(&e);
                    shared.readiness.failing(&concern, &format!("watch failed: {why}"), is_forbidden(&e));
                    outage.failed(&format!("watching {concern} failed"), &why, pause);
                    shared.metrics.restart(&current.resource, "error");
                    tokio::time::sleep(pause).await;
                    continue;
                }
            };
            outage.recovered(&format!("watching {concern}"));
            shared.readiness.ok(&concern);
            futures::pin_mut!(stream);
            let mut ended_by_error = false;
            while let Some(event) = stream.next().await {
                let (kind, object) = match event {
                    Ok(WatchEvent::Added(o)) => (WatchKind::Added, o),
                    Ok(WatchEvent::Modified(o)) => (WatchKind::Modified, o),
                    Ok(WatchEvent::Deleted(o)) => (WatchKind::Deleted, o),
                    Ok(WatchEvent::Bookmark(b)) => {
                        rv = b.metadata.resource_version;
                        continue;
                    }
                    Ok(WatchEvent::Error(status)) if status.code == 410 => {
                        tracing::info!(r#type = %key, %scope, "watch expired (410 Gone); listing again");
                        shared.metrics.restart(&current.resource, "gone");
                        continue 'relist;
                    }
                    Ok(WatchEvent::Error(status)) => {
                        tracing::warn!(r#type = %key, %scope, code = status.code, message = %status.message, "watch error; resuming");
                        ended_by_error = true;
                        break;
                    }
                    Err(e) => {
                        // A silent stream ends here too (WATCH_SILENCE).
                        tracing::info!(r#type = %key, %scope, "watch connection dropped ({}); resuming", shared.server.failure(&e));
                        ended_by_error = true;
                        break;
                    }
                };
                backoff.reset();
                if let Some(v) = object.metadata.resource_version.clone() {
                    rv = v;
                }
                let ty_now = ty.borrow_and_update().clone();
                let object = complete(to_value(&object), &ty_now);
                if let Some(item) = admit(&shared, &ty_now, kind, object)
                    && shared.tx.send(item).await.is_err()
                {
                    return;
                }
            }
            if ended_by_error {
                shared.metrics.restart(&current.resource, "dropped");
                tokio::time::sleep(backoff.next_delay()).await;
            }
        }
    }
}

/// The event as a window item, or `None` (counted) when the rules'
/// operations or the excluded field managers keep it out.
fn admit(shared: &Shared, ty: &Arc<WatchedType>, kind: WatchKind, object: Value) -> Option<Item> {
    let label = match kind {
        WatchKind::Added => "ADDED",
        WatchKind::Modified => "MODIFIED",
        _ => "DELETED",
    };
    shared
        .metrics
        .events
        .get_or_create(&EventLabels {
            group: ty.group.clone(),
            version: ty.version.clone(),
            resource: ty.resource.clone(),
            r#type: label.into(),
        })
        .inc();
    let event = Event { kind, object };
    let op = operation(&event)?;
    if !ty.operations_for(&meta_field(&event.object, "namespace")).allows(op) {
        shared.metrics.skip("operation");
        return None;
    }
    if let Some(manager) = excluded_field_manager(&event, &shared.exclude_field_managers) {
        tracing::debug!(r#type = %ty.key(), name = %meta_field(&event.object, "name"), %manager, "excluded field manager; not mirrored");
        shared.metrics.skip("field_manager");
        return None;
    }
    Some(Item::Event { ty: ty.clone(), kind, object: event.object, at: Instant::now() })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn deployments() -> WatchedType {
        WatchedType {
            group: "apps".into(),
            version: "v1".into(),
            resource: "deployments".into(),
            kind: "Deployment".into(),
            namespaced: true,
            scopes: BTreeMap::new(),
        }
    }

    /// A listed item's text, completed, reads as the object `complete`
    /// makes of it, for every shape: items without `apiVersion` and `kind`
    /// (as list items come), with one, with both, with them null or spelt
    /// with escapes, an empty object, and JSON that is no object.
    #[test]
    fn a_listed_item_is_completed_as_the_object_would_be() {
        let ty = deployments();
        for item in [
            r#"{"metadata":{"name":"web","namespace":"shop"},"spec":{"replicas":2}}"#,
            r#"{"apiVersion":"apps/v1beta1","metadata":{"name":"web"}}"#,
            r#"{"kind":"Other","metadata":{"name":"web"}}"#,
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"}}"#,
            r#"{"apiVersion":null,"kind":"Deployment"}"#,
            r#"{"api\u0056ersion":"x/v1","metadata":{"name":"web"}}"#,
            r#"{}"#,
            "  {  }  ",
            " {\n \"metadata\": {\"name\": \"web\"}\n}",
            r#"[1,2]"#,
            r#""text""#,
        ] {
            let completed = complete_json(item, &ty);
            let read: Value = serde_json::from_slice(&completed)
                .unwrap_or_else(|e| panic!("{item}: {e}: {}", String::from_utf8_lossy(&completed)));
            let expected = complete(serde_json::from_str(item).unwrap(), &ty);
            assert_eq!(read, expected, "{item} → {}", String::from_utf8_lossy(&completed));
        }
        // An item that names both is passed on byte for byte.
        let both = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"}}"#;
        assert_eq!(complete_json(both, &ty), both.as_bytes());
    }
}
