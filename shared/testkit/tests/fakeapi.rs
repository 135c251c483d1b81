//! The fake Kubernetes API over HTTP, through kube-rs (the client the
//! product uses) and raw requests where the exact wire form matters:
//! discovery, paging, watch resume, 410 Expired, bookmarks, finalizers,
//! schema validation of configbutler.ai objects, the hooks, and kube's own
//! watcher (list, watch, resume after a dropped connection, re-list after
//! 410).

use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher;
use serde_json::{Value, json};
use testkit::fakeapi::{self, FakeApi, Store};
use testkit::sidecar::http_get;

const NS: &str = "default";
const WAIT: Duration = Duration::from_secs(10);

async fn fake() -> FakeApi {
    fakeapi::serve(Store::new()).await.unwrap()
}

fn cm(name: &str, labels: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "data": {"k": name}})).unwrap()
}

fn configmaps(api: &FakeApi) -> Api<ConfigMap> {
    Api::namespaced(api.client(NS).unwrap(), NS)
}

fn name_of(cm: &ConfigMap) -> String {
    cm.metadata.name.clone().unwrap_or_default()
}

fn rv_of(cm: &ConfigMap) -> String {
    cm.metadata.resource_version.clone().unwrap_or_default()
}

/// The next item of a stream, failing the test after [`WAIT`].
async fn next<S: Stream + Unpin>(s: &mut S) -> S::Item {
    tokio::time::timeout(WAIT, s.next()).await.expect("no event within 10 s").expect("the stream ended")
}

/// Status line and JSON body of a raw GET (blocking, off the runtime).
async fn raw_get(api: &FakeApi, path: &str) -> (u16, Value) {
    let (port, path) = (api.port(), path.to_string());
    let text = tokio::task::spawn_blocking(move || http_get(port, &path)).await.unwrap();
    let code = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    (code, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn api_status(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_lists_every_registered_type_and_the_down_aggregated_api() {
    let api = fake().await;
    api.unavailable_group("wardle.example.com", "v1alpha1");
    let (code, core) = raw_get(&api, "/api").await;
    assert_eq!((code, core["kind"].as_str(), core["versions"].clone()), (200, Some("APIVersions"), json!(["v1"])));
    let (_, v1) = raw_get(&api, "/api/v1").await;
    let cm = v1["resources"].as_array().unwrap().iter().find(|r| r["name"] == "configmaps").unwrap().clone();
    assert_eq!(cm["shortNames"], json!(["cm"]));
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["namespaced"], true);
    assert!(cm["verbs"].as_array().unwrap().contains(&json!("watch")), "{cm}");
    assert!(v1["resources"].as_array().unwrap().iter().any(|r| r["name"] == "pods/proxy"), "{v1}");
    let (_, groups) = raw_get(&api, "/apis").await;
    let names: Vec<&str> = groups["groups"].as_array().unwrap().iter().filter_map(|g| g["name"].as_str()).collect();
    for g in ["apps", "tatara.dev", "configbutler.ai", "wardle.example.com"] {
        assert!(names.contains(&g), "{g} missing from {names:?}");
    }
    let cb = groups["groups"].as_array().unwrap().iter().find(|g| g["name"] == "configbutler.ai").unwrap().clone();
    assert_eq!(cb["preferredVersion"], json!({"groupVersion": "configbutler.ai/v1alpha3", "version": "v1alpha3"}));
    let (code, rl) = raw_get(&api, "/apis/configbutler.ai/v1alpha3").await;
    assert_eq!(code, 200);
    let gt = rl["resources"].as_array().unwrap().iter().find(|r| r["name"] == "gittargets").unwrap().clone();
    assert_eq!((gt["kind"].as_str(), gt["namespaced"].as_bool()), (Some("GitTarget"), Some(true)));
    assert!(rl["resources"].as_array().unwrap().iter().any(|r| r["name"] == "gittargets/status"));
    let (_, issues) = raw_get(&api, "/apis/tatara.dev/v1alpha1").await;
    assert!(
        issues["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "issues" && r["shortNames"] == json!(["iss"]))
    );
    let (code, down) = raw_get(&api, "/apis/wardle.example.com/v1alpha1").await;
    assert_eq!((code, down["reason"].as_str()), (503, Some("ServiceUnavailable")));
    // kube's own discovery sees the served groups.
    let client = api.client(NS).unwrap();
    let served = client.list_api_group_resources("apps/v1").await.unwrap();
    assert!(served.resources.iter().any(|r| r.name == "deployments" && r.short_names == Some(vec!["deploy".into()])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_the_api_servers_status_bodies() {
    let api = fake().await;
    let (code, body) = raw_get(&api, "/api/v1/namespaces/default/configmaps/nope").await;
    assert_eq!(code, 404);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "configmaps \"nope\" not found", "reason": "NotFound",
            "details": {"name": "nope", "kind": "configmaps"}, "code": 404})
    );
    let (_, body) = raw_get(&api, "/apis/tatara.dev/v1alpha1/namespaces/default/tasks/t").await;
    assert_eq!(body["message"], "tasks.tatara.dev \"t\" not found");
    assert_eq!(body["details"], json!({"name": "t", "group": "tatara.dev", "kind": "tasks"}));
    let (code, body) = raw_get(&api, "/api/v1/namespaces/default/widgets").await;
    assert_eq!((code, body["message"].as_str()), (404, Some("the server could not find the requested resource")));

    api.forbid(None, "list", "configmaps");
    let (code, body) = raw_get(&api, "/api/v1/namespaces/default/configmaps").await;
    assert_eq!(code, 403);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "configmaps is forbidden: User \"system:admin\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\"",
            "reason": "Forbidden", "details": {"kind": "configmaps"}, "code": 403})
    );
    // A forbidden verb is per user, and only that verb.
    api.clear_faults();
    api.token("alice-token", "alice");
    api.forbid(Some("alice"), "get", "deployments.apps");
    api.seed_object(
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"}}),
    )
    .unwrap();
    let mut config = kube::Config::new(api.url().parse().unwrap());
    config.auth_info.token = Some("alice-token".to_string().into());
    let alice = kube::Client::try_from(config).unwrap();
    let deploys: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(alice, "shop");
    let s = api_status(deploys.get("web").await.unwrap_err());
    assert_eq!(s.code, 403);
    assert_eq!(
        s.message,
        "deployments.apps \"web\" is forbidden: User \"alice\" cannot get resource \"deployments\" in API group \"apps\" in the namespace \"shop\""
    );
    assert_eq!(deploys.list(&ListParams::default()).await.unwrap().items.len(), 1);
    let admin: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(api.client(NS).unwrap(), "shop");
    assert!(admin.get("web").await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_pages_are_a_consistent_snapshot_with_continue_tokens() {
    let api = fake().await;
    let cms = configmaps(&api);
    for i in 0..7 {
        cms.create(&PostParams::default(), &cm(&format!("cm-{i}"), json!({"n": i.to_string()}))).await.unwrap();
    }
    let first = cms.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(first.items.iter().map(name_of).collect::<Vec<_>>(), ["cm-0", "cm-1", "cm-2"]);
    assert_eq!(first.metadata.remaining_item_count, Some(4));
    let token = first.metadata.continue_.clone().expect("a continue token");
    let list_rv = first.metadata.resource_version.clone().unwrap();
    // Writes between pages do not show: the pages are the first page's snapshot.
    cms.delete("cm-4", &DeleteParams::default()).await.unwrap();
    cms.patch("cm-5", &PatchParams::default(), &Patch::Merge(json!({"data": {"k": "changed"}}))).await.unwrap();
    cms.create(&PostParams::default(), &cm("cm-3a", json!({}))).await.unwrap();
    let second = cms.list(&ListParams::default().limit(3).continue_token(&token)).await.unwrap();
    assert_eq!(second.items.iter().map(name_of).collect::<Vec<_>>(), ["cm-3", "cm-4", "cm-5"]);
    assert_eq!(second.items[2].data.as_ref().unwrap()["k"], "cm-5", "the old version of cm-5");
    assert_eq!(second.metadata.resource_version.as_deref(), Some(list_rv.as_str()));
    let token = second.metadata.continue_.clone().expect("a continue token");
    let last = cms.list(&ListParams::default().limit(3).continue_token(&token)).await.unwrap();
    assert_eq!(last.items.iter().map(name_of).collect::<Vec<_>>(), ["cm-6"]);
    assert!(last.metadata.continue_.is_none());
    // A fresh list sees now, across namespaces too; selectors filter.
    let now = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(now.items.len(), 7);
    assert!(now.metadata.resource_version.unwrap().parse::<u64>().unwrap() > list_rv.parse::<u64>().unwrap());
    let all: Api<ConfigMap> = Api::all(api.client(NS).unwrap());
    let picked = all.list(&ListParams::default().labels("n in (1,2),n!=2")).await.unwrap();
    assert_eq!(picked.items.iter().map(name_of).collect::<Vec<_>>(), ["cm-1"]);
    // Built-in list items come without apiVersion and kind, as the real server sends them.
    let (_, raw) = raw_get(&api, "/api/v1/namespaces/default/configmaps?limit=1").await;
    assert_eq!((raw["kind"].as_str(), raw["apiVersion"].as_str()), (Some("ConfigMapList"), Some("v1")));
    assert!(raw["items"][0].get("kind").is_none(), "{raw}");
}

/// Lists come in etcd's key order, `<namespace>/<name>` as bytes: `a-b`
/// and `a.c` before `a` (`-` and `.` sort before `/`). Paging follows that
/// order, so a namespace that another's name begins with loses nothing
/// between pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_pages_follow_the_key_order_across_namespaces() {
    let api = fake().await;
    for (ns, name) in [("a", "y"), ("a", "x"), ("a-b", "x"), ("a.c", "x"), ("b", "x")] {
        let cms: Api<ConfigMap> = Api::namespaced(api.client(NS).unwrap(), ns);
        cms.create(&PostParams::default(), &cm(name, json!({}))).await.unwrap();
    }
    let all: Api<ConfigMap> = Api::all(api.client(NS).unwrap());
    let key = |c: &ConfigMap| format!("{}/{}", c.metadata.namespace.as_deref().unwrap_or_default(), name_of(c));
    let whole: Vec<String> = all.list(&ListParams::default()).await.unwrap().items.iter().map(key).collect();
    assert_eq!(whole, ["a-b/x", "a.c/x", "a/x", "a/y", "b/x"]);
    let mut paged = Vec::new();
    let mut params = ListParams::default().limit(1);
    loop {
        let page = all.list(&params).await.unwrap();
        paged.extend(page.items.iter().map(key));
        match page.metadata.continue_ {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    assert_eq!(paged, whole);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continue_token_older_than_the_event_log_is_410_expired() {
    let api = fake().await;
    let cms = configmaps(&api);
    for i in 0..4 {
        cms.create(&PostParams::default(), &cm(&format!("cm-{i}"), json!({}))).await.unwrap();
    }
    let first = cms.list(&ListParams::default().limit(2)).await.unwrap();
    let token = first.metadata.continue_.unwrap();
    cms.delete("cm-3", &DeleteParams::default()).await.unwrap();
    api.compact();
    let s = api_status(cms.list(&ListParams::default().limit(2).continue_token(&token)).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    assert!(s.message.contains("continue parameter is too old"), "{}", s.message);
    // So is an exact LIST at a compacted resourceVersion.
    let rv = first.metadata.resource_version.unwrap();
    let (code, body) = raw_get(
        &api,
        &format!("/api/v1/namespaces/default/configmaps?resourceVersion={rv}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!((code, body["reason"].as_str()), (410, Some("Expired")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumes_from_a_resource_version_and_410s_once_compacted() {
    let api = fake().await;
    let cms = configmaps(&api);
    let a = cms.create(&PostParams::default(), &cm("a", json!({}))).await.unwrap();
    let from = rv_of(&a);
    let b = cms.create(&PostParams::default(), &cm("b", json!({}))).await.unwrap();
    let a2 = cms.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"k": "2"}}))).await.unwrap();
    cms.delete("b", &DeleteParams::default()).await.unwrap();
    // Another type's writes share the resourceVersion sequence but not the stream.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(api.client(NS).unwrap(), NS);
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"p": "w"}})).unwrap(),
        )
        .await
        .unwrap();

    let mut events = cms.watch(&WatchParams::default().timeout(30), &from).await.unwrap().boxed();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(match next(&mut events).await.unwrap() {
            WatchEvent::Added(o) => ("ADDED", name_of(&o), rv_of(&o)),
            WatchEvent::Modified(o) => ("MODIFIED", name_of(&o), rv_of(&o)),
            WatchEvent::Deleted(o) => ("DELETED", name_of(&o), rv_of(&o)),
            other => panic!("unexpected {other:?}"),
        });
    }
    let deleted_rv = (rv_of(&a2).parse::<u64>().unwrap() + 1).to_string();
    assert_eq!(
        seen,
        [("ADDED", "b".into(), rv_of(&b)), ("MODIFIED", "a".into(), rv_of(&a2)), ("DELETED", "b".into(), deleted_rv)]
    );
    // Live events follow on the same stream.
    cms.create(&PostParams::default(), &cm("c", json!({}))).await.unwrap();
    match next(&mut events).await.unwrap() {
        WatchEvent::Added(o) => assert_eq!(name_of(&o), "c"),
        other => panic!("unexpected {other:?}"),
    }
    // Compaction: a watch from before it gets one ERROR event, 410 Expired.
    api.compact();
    let mut stale = cms.watch(&WatchParams::default(), &from).await.unwrap().boxed();
    match next(&mut stale).await.unwrap() {
        WatchEvent::Error(s) => assert_eq!((s.code, s.reason.as_str()), (410, "Expired"), "{s:?}"),
        other => panic!("expected 410, got {other:?}"),
    }
    assert!(tokio::time::timeout(WAIT, stale.next()).await.unwrap().is_none(), "the stream ends after the error");
    // A small window compacts by itself.
    api.store.lock().unwrap().set_event_window(1);
    let before = rv_of(&cms.create(&PostParams::default(), &cm("d", json!({}))).await.unwrap());
    cms.create(&PostParams::default(), &cm("e", json!({}))).await.unwrap();
    let mut old =
        cms.watch(&WatchParams::default(), &(before.parse::<u64>().unwrap() - 1).to_string()).await.unwrap().boxed();
    assert!(matches!(next(&mut old).await.unwrap(), WatchEvent::Error(s) if s.code == 410));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_carry_the_resource_version_a_watch_has_reached() {
    let api = fake().await;
    api.set_bookmark_interval(Duration::from_millis(100));
    let cms = configmaps(&api);
    let a = cms.create(&PostParams::default(), &cm("a", json!({}))).await.unwrap();
    let mut events = cms.watch(&WatchParams::default(), &rv_of(&a)).await.unwrap().boxed();
    match next(&mut events).await.unwrap() {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, rv_of(&a)),
        other => panic!("expected a bookmark, got {other:?}"),
    }
    // Writes to another type move the global resourceVersion; the bookmark follows.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(api.client(NS).unwrap(), NS);
    let s = secrets
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "s"}})).unwrap())
        .await
        .unwrap();
    let want = s.metadata.resource_version.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        assert!(tokio::time::Instant::now() < deadline, "no bookmark at {want}");
        if let WatchEvent::Bookmark(b) = next(&mut events).await.unwrap()
            && b.metadata.resource_version == want
        {
            break;
        }
    }
    // Without allowWatchBookmarks there are none.
    let mut quiet = cms.watch(&WatchParams::default().disable_bookmarks(), &want).await.unwrap().boxed();
    assert!(tokio::time::timeout(Duration::from_millis(500), quiet.next()).await.is_err(), "no event expected");
    // timeoutSeconds ends the stream cleanly.
    let mut short = cms.watch(&WatchParams::default().disable_bookmarks().timeout(1), &want).await.unwrap().boxed();
    assert!(tokio::time::timeout(WAIT, short.next()).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizers_hold_a_deletion_until_the_last_one_goes() {
    let api = fake().await;
    let cms = configmaps(&api);
    let mut held = cm("held", json!({}));
    held.metadata.finalizers = Some(vec!["example.com/a".into(), "example.com/b".into()]);
    let created = cms.create(&PostParams::default(), &held).await.unwrap();
    let mut events = cms.watch(&WatchParams::default().disable_bookmarks(), &rv_of(&created)).await.unwrap().boxed();

    let marked = cms.delete("held", &DeleteParams::default()).await.unwrap().left().expect("the object, not a Status");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(0));
    match next(&mut events).await.unwrap() {
        WatchEvent::Modified(o) => assert!(o.metadata.deletion_timestamp.is_some()),
        other => panic!("expected MODIFIED, got {other:?}"),
    }
    assert!(cms.get("held").await.is_ok(), "still there, terminating");
    // A new finalizer on an object being deleted is refused.
    let s = api_status(
        cms.patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/a", "example.com/b", "example.com/c"]}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
    // Removing one finalizer keeps it; the last one deletes it.
    cms.patch("held", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/b"]}})))
        .await
        .unwrap();
    assert!(matches!(next(&mut events).await.unwrap(), WatchEvent::Modified(_)));
    let last = cms
        .patch("held", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .unwrap();
    match next(&mut events).await.unwrap() {
        WatchEvent::Deleted(o) => assert_eq!(rv_of(&o), rv_of(&last)),
        other => panic!("expected DELETED, got {other:?}"),
    }
    assert_eq!(api_status(cms.get("held").await.unwrap_err()).code, 404);
    // Without finalizers a DELETE answers a Status and the object is gone.
    cms.create(&PostParams::default(), &cm("plain", json!({}))).await.unwrap();
    let gone = cms.delete("plain", &DeleteParams::default()).await.unwrap();
    assert!(gone.is_right(), "a Status");
    assert!(matches!(next(&mut events).await.unwrap(), WatchEvent::Added(_)));
    assert!(matches!(next(&mut events).await.unwrap(), WatchEvent::Deleted(_)));
}

fn gittargets(api: &FakeApi) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("configbutler.ai", "v1alpha3", "GitTarget"),
        "gittargets",
    );
    Api::namespaced_with(api.client(NS).unwrap(), NS, &ar)
}

fn gittarget(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitTarget",
        "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gittarget_writes_are_checked_against_the_configbutler_schema() {
    let api = fakeapi::serve(Store::validated()).await.unwrap();
    let targets = gittargets(&api);
    // Required fields.
    let s = api_status(
        targets
            .create(&PostParams::default(), &gittarget("t", json!({"branch": "main", "path": "clusters/a"})))
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert!(
        s.message.starts_with("GitTarget \"t\" is invalid: ")
            && s.message.contains(".spec.providerRef: Required value"),
        "{}",
        s.message
    );
    // An enum and a minLength.
    let bad = json!({"branch": "", "path": "p", "providerRef": {"name": "gh"}, "prune": {"mode": "Sometimes"}});
    let s = api_status(targets.create(&PostParams::default(), &gittarget("t", bad)).await.unwrap_err());
    assert!(
        s.message.contains(".spec.prune.mode") && s.message.contains(".spec.branch: shorter than 1"),
        "{}",
        s.message
    );
    // A valid one: defaults filled and unknown fields pruned, as the API server does.
    let ok =
        json!({"branch": "main", "path": "clusters/a", "providerRef": {"name": "gh"}, "prune": {}, "unknownField": 1});
    let made = targets.create(&PostParams::default(), &gittarget("t", ok)).await.unwrap();
    let spec = &made.data["spec"];
    assert_eq!(spec["providerRef"], json!({"name": "gh", "group": "configbutler.ai", "kind": "GitProvider"}));
    assert_eq!(spec["prune"]["mode"], "OnEvent");
    assert_eq!(spec["clusterProviderRef"]["name"], "default");
    assert!(spec.get("unknownField").is_none(), "{spec}");
    assert_eq!(made.metadata.generation, Some(1));
    // Status goes through the status subresource only.
    let patched = targets
        .patch("t", &PatchParams::default(), &Patch::Merge(json!({"spec": {"path": "clusters/b"}, "status": {"x": 1}})))
        .await
        .unwrap();
    assert_eq!(patched.metadata.generation, Some(2));
    assert!(patched.data.get("status").is_none_or(|s| s.get("x").is_none()));
}

/// Polls `stream` on a task of its own (kube's watcher only opens its
/// watch while polled), handing its items over a channel.
fn forward<S>(stream: S) -> tokio_stream_shim::Receiver<S::Item>
where
    S: Stream + Send + 'static,
    S::Item: Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            if tx.send(item).is_err() {
                return;
            }
        }
    });
    tokio_stream_shim::Receiver(rx)
}

mod tokio_stream_shim {
    /// An unbounded receiver as a `Stream`.
    pub struct Receiver<T>(pub tokio::sync::mpsc::UnboundedReceiver<T>);

    impl<T> futures::Stream for Receiver<T> {
        type Item = T;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<T>> {
            self.0.poll_recv(cx)
        }
    }
}

/// The names a watcher's initial list (or initial events) delivers.
async fn initial_objects<S>(stream: &mut S) -> Vec<String>
where
    S: Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>> + Unpin,
{
    let mut init = Vec::new();
    loop {
        match next(stream).await.unwrap() {
            watcher::Event::Init => {}
            watcher::Event::InitApply(o) => init.push(name_of(&o)),
            watcher::Event::InitDone => return init,
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_runtime_watcher_lists_watches_resumes_and_relists() {
    let api = fake().await;
    let cms = configmaps(&api);
    for i in 0..5 {
        cms.create(&PostParams::default(), &cm(&format!("cm-{i}"), json!({}))).await.unwrap();
    }
    let mut stream = forward(watcher(cms.clone(), watcher::Config::default().page_size(2)));
    let init = initial_objects(&mut stream).await;
    assert_eq!(init, ["cm-0", "cm-1", "cm-2", "cm-3", "cm-4"], "three pages of two");
    assert!(api.wait_for_watches(1, WAIT).await, "the watcher opened its watch");

    cms.create(&PostParams::default(), &cm("new", json!({}))).await.unwrap();
    cms.patch("cm-0", &PatchParams::default(), &Patch::Merge(json!({"data": {"k": "x"}}))).await.unwrap();
    cms.delete("cm-1", &DeleteParams::default()).await.unwrap();
    let mut live = Vec::new();
    while live.len() < 3 {
        match next(&mut stream).await.unwrap() {
            watcher::Event::Apply(o) => live.push(format!("apply {}", name_of(&o))),
            watcher::Event::Delete(o) => live.push(format!("delete {}", name_of(&o))),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(live, ["apply new", "apply cm-0", "delete cm-1"]);

    // A dropped connection: the watcher resumes from the last resourceVersion
    // it saw, with no new LIST, and misses nothing written meanwhile.
    let lists = |api: &FakeApi| {
        api.requests()
            .iter()
            .filter(|r| r.method == "GET" && r.path.ends_with("/configmaps") && !r.query.contains("watch="))
            .count()
    };
    let lists_before = lists(&api);
    let seen_rv = rv_of(&cms.get("cm-0").await.unwrap()).parse::<u64>().unwrap() + 1;
    api.drop_watches();
    cms.create(&PostParams::default(), &cm("while-down", json!({}))).await.unwrap();
    let mut resumed = None;
    while resumed.is_none() {
        match next(&mut stream).await {
            Ok(watcher::Event::Apply(o)) => resumed = Some(name_of(&o)),
            Ok(other) => panic!("unexpected {other:?}"),
            Err(_) => {} // the dropped connection surfaces as one error
        }
    }
    assert_eq!(resumed.as_deref(), Some("while-down"));
    assert_eq!(lists(&api), lists_before, "resumed without listing again");
    let resume = api.requests().into_iter().rev().find(|r| r.query.contains("watch=true")).unwrap();
    assert!(resume.query.contains(&format!("resourceVersion={seen_rv}")), "{resume:?}");

    // The connection drops and the log is compacted past the watcher's
    // resourceVersion before it sees the next write (one critical
    // section): its resume (or its live watch, had it reconnected first)
    // gets 410, and it lists again.
    assert!(api.wait_for_watches(1, WAIT).await);
    api.drop_watches();
    {
        let mut store = api.store.lock().unwrap();
        store.create("configmaps", NS, json!({"metadata": {"name": "after-compaction"}})).unwrap();
        store.compact();
    }
    let mut relisted = Vec::new();
    loop {
        match next(&mut stream).await {
            Ok(watcher::Event::Init) => relisted.clear(),
            Ok(watcher::Event::InitApply(o)) => relisted.push(name_of(&o)),
            Ok(watcher::Event::InitDone) => break,
            Ok(watcher::Event::Apply(o)) if name_of(&o) == "after-compaction" => {
                panic!("the resume should have been refused: the log was compacted past it")
            }
            Ok(_) | Err(_) => {}
        }
    }
    assert_eq!(relisted, ["after-compaction", "cm-0", "cm-2", "cm-3", "cm-4", "new", "while-down"]);
    assert!(lists(&api) > lists_before, "listed again after 410");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_runtime_watcher_with_streaming_lists() {
    let api = fake().await;
    let cms = configmaps(&api);
    for i in 0..3 {
        cms.create(&PostParams::default(), &cm(&format!("cm-{i}"), json!({}))).await.unwrap();
    }
    let mut stream = forward(watcher(cms.clone(), watcher::Config::default().streaming_lists()));
    let init = initial_objects(&mut stream).await;
    assert_eq!(init, ["cm-0", "cm-1", "cm-2"]);
    cms.create(&PostParams::default(), &cm("cm-3", json!({}))).await.unwrap();
    assert!(matches!(next(&mut stream).await.unwrap(), watcher::Event::Apply(o) if name_of(&o) == "cm-3"));
    assert!(api.requests().iter().filter(|r| r.method == "GET").all(|r| r.query.contains("watch=")), "no LIST at all");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_watch_sees_objects_enter_and_leave() {
    let api = fake().await;
    let cms = configmaps(&api);
    let start = rv_of(&cms.create(&PostParams::default(), &cm("x", json!({"team": "a"}))).await.unwrap());
    let mut events =
        cms.watch(&WatchParams::default().labels("team=b").disable_bookmarks(), &start).await.unwrap().boxed();
    cms.patch("x", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"team": "b"}}})))
        .await
        .unwrap();
    cms.patch("x", &PatchParams::default(), &Patch::Merge(json!({"data": {"k": "1"}}))).await.unwrap();
    cms.patch("x", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"team": "c"}}})))
        .await
        .unwrap();
    assert!(matches!(next(&mut events).await.unwrap(), WatchEvent::Added(_)));
    assert!(matches!(next(&mut events).await.unwrap(), WatchEvent::Modified(_)));
    assert!(matches!(next(&mut events).await.unwrap(), WatchEvent::Deleted(_)));
    // Field selectors on the name, as kube's watch_object uses them.
    let one = cms.watch(&WatchParams::default().fields("metadata.name=x").disable_bookmarks(), "0").await.unwrap();
    let first: Vec<_> = one.take(1).try_collect().await.unwrap();
    assert!(matches!(&first[0], WatchEvent::Added(o) if name_of(o) == "x"), "RV 0 starts with the current state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_record_their_user_and_the_hooks_work() {
    let api = fake().await;
    api.token("bob-token", "bob");
    let mut config = kube::Config::new(api.url().parse().unwrap());
    config.auth_info.token = Some("bob-token".to_string().into());
    let bob: Api<ConfigMap> = Api::namespaced(kube::Client::try_from(config).unwrap(), NS);
    bob.create(&PostParams::default(), &cm("by-bob", json!({}))).await.unwrap();
    api.store
        .lock()
        .unwrap()
        .as_user("carol")
        .create("configmaps", NS, json!({"metadata": {"name": "by-carol"}}))
        .unwrap();
    // generateName, a JSON patch, a dry run: the dry run writes nothing.
    let mut generated = cm("", json!({}));
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let made = bob.create(&PostParams::default(), &generated).await.unwrap();
    assert!(name_of(&made).starts_with("gen-") && name_of(&made).len() == 9, "{}", name_of(&made));
    let patched = bob
        .patch(
            &name_of(&made),
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(json!([{"op": "add", "path": "/data/j", "value": "v"}])).unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["j"], "v");
    let before = api.store.lock().unwrap().resource_version();
    bob.create(&PostParams { dry_run: true, ..Default::default() }, &cm("dry", json!({}))).await.unwrap();
    assert_eq!(api.store.lock().unwrap().resource_version(), before);
    assert_eq!(api_status(bob.get("dry").await.unwrap_err()).code, 404);
    let writes: Vec<(String, String, String)> =
        api.store.lock().unwrap().writes().iter().map(|w| (w.user.clone(), w.verb.clone(), w.name.clone())).collect();
    assert_eq!(writes[0], ("bob".into(), "create".into(), "by-bob".into()));
    assert_eq!(writes[1], ("carol".into(), "create".into(), "by-carol".into()));
    assert_eq!(writes[3].1, "patch");
    assert_eq!(writes.len(), 4, "{writes:?}");

    // An injected fault: a 500 fails the call; kube's client retries a
    // 503, so two of them cost two more requests and no error.
    let path = "/api/v1/namespaces/default/configmaps/by-bob";
    api.fail(Some("GET"), path, 500, Some(1));
    let s = api_status(bob.get("by-bob").await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (500, "InternalError"));
    assert!(bob.get("by-bob").await.is_ok());
    let gets = |api: &FakeApi| api.requests().iter().filter(|r| r.path == path).count();
    let before = gets(&api);
    api.fail(Some("GET"), path, 503, Some(2));
    assert!(bob.get("by-bob").await.is_ok());
    assert_eq!(gets(&api), before + 3);

    // Paused: a request is accepted and held; resumed, it is answered.
    api.pause();
    let held = tokio::spawn({
        let bob = bob.clone();
        async move { bob.get("by-bob").await.map(|o| name_of(&o)) }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!held.is_finished(), "a paused server answers nothing");
    api.resume();
    assert_eq!(tokio::time::timeout(WAIT, held).await.unwrap().unwrap().unwrap(), "by-bob");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_garbage_collector_is_generic_and_writes_as_the_collector() {
    let api = fake().await;
    let cms = configmaps(&api);
    let owner = cms.create(&PostParams::default(), &cm("owner", json!({}))).await.unwrap();
    let mut dep = cm("dep", json!({}));
    dep.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "name": "owner", "uid": owner.metadata.uid.clone().unwrap()}))
        .unwrap(),
    ]);
    cms.create(&PostParams::default(), &dep).await.unwrap();
    cms.delete("owner", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_status(cms.get("dep").await.unwrap_err()).code, 404, "collected");
    let last = api.store.lock().unwrap().writes().last().cloned().unwrap();
    assert_eq!((last.user.as_str(), last.verb.as_str(), last.name.as_str()), (fakeapi::GC_USER, "delete", "dep"));
}
