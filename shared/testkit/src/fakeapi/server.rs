//! The HTTP side: kube-apiserver's paths over a [`Store`], with the test
//! hooks (faults, 403s, a paused server, dropped watches, the pod proxy).

use std::collections::HashMap;
use std::io::{Read, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::error::ApiError;
use super::fields::FieldValidation;
use super::registry::ResourceType;
use super::select::ListOptions;
use super::store::{DEFAULT_USER, DeleteOptions, Store};
use super::watch::{WatchFilter, bookmark, watch_event};

/// How often a watch that allows bookmarks gets one, unless set.
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(1);

/// An injected failure: requests matching `method` (any when `None`) and
/// `path` (exact, or a prefix when it ends in `*`) answer `code` with the
/// API server's Status for it, `remaining` times (always when `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub method: Option<String>,
    pub path: String,
    pub code: u16,
    pub remaining: Option<u32>,
}

/// A verb refused with `403 Forbidden` on a resource (`plural`,
/// `plural.group`, `plural/subresource` or `*`), for one user or all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forbidden {
    pub user: Option<String>,
    pub verb: String,
    pub resource: String,
}

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    pub user: String,
    /// The groups `Impersonate-Group` headers named (kubectl's `--as-group`).
    pub groups: Vec<String>,
}

/// One resource request as the RBAC authorizer sees it (its request
/// attributes), so a test can hold what a binary did against a Role.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Authorization {
    pub user: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`.
    pub verb: String,
    pub group: String,
    /// The plural, with its subresource as `plural/sub` (`pods/proxy`).
    pub resource: String,
    /// `None` for a cluster-scoped or all-namespaces request.
    pub namespace: Option<String>,
    /// `None` when the request names no object (list, create, watch).
    pub name: Option<String>,
}

#[derive(Debug)]
struct Hooks {
    faults: Vec<Fault>,
    forbidden: Vec<Forbidden>,
    pods: HashMap<(String, String, u16), u16>,
    unavailable: Vec<(String, String)>,
    tokens: HashMap<String, String>,
    bookmark_interval: Duration,
    requests: Vec<Request>,
    authorizations: Vec<Authorization>,
}

#[derive(Debug)]
struct Shared {
    store: Arc<Mutex<Store>>,
    hooks: Mutex<Hooks>,
    drops: watch::Sender<u64>,
    paused: watch::Sender<bool>,
    open_watches: AtomicUsize,
}

/// Stops a background server's runtime when the last handle goes.
#[derive(Debug)]
struct Background(Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(stop) = self.0.take() {
            let _ = stop.send(());
        }
    }
}

/// A running fake API server.
#[derive(Debug, Clone)]
pub struct FakeApi {
    pub addr: SocketAddr,
    /// The store; tests read and write it directly (watches see the writes).
    pub store: Arc<Mutex<Store>>,
    shared: Arc<Shared>,
    _background: Option<Arc<Background>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A test that panicked while holding the lock has failed already; the
    // data is still what it was.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl FakeApi {
    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// A kube client pointed at this server, defaulting to `namespace`.
    pub fn client(&self, namespace: &str) -> Result<kube::Client, String> {
        let uri: axum::http::Uri = self.url().parse().map_err(|e| format!("bad url: {e}"))?;
        let mut config = kube::Config::new(uri);
        config.default_namespace = namespace.to_string();
        kube::Client::try_from(config).map_err(|e| format!("kube client: {e}"))
    }

    /// Writes a kubeconfig for this server to `path` (context `fake`,
    /// default namespace `namespace`, token `test-token`).
    pub fn write_kubeconfig(&self, path: &Path, namespace: &str) -> std::io::Result<PathBuf> {
        std::fs::write(path, kubeconfig(&self.url(), namespace))?;
        Ok(path.to_path_buf())
    }

    /// `dir/kubeconfig` for this server, namespace `default`.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        self.write_kubeconfig(&dir.join("kubeconfig"), "default").expect("write the kubeconfig")
    }

    /// Seed an object whose apiVersion, kind and namespace say where it
    /// goes (see [`Store::seed`]).
    pub fn seed_object(&self, obj: Value) -> Result<Value, ApiError> {
        lock(&self.store).seed_object(obj)
    }

    /// Requests with this bearer token act as `user` (otherwise
    /// `Impersonate-User` names the user, else [`DEFAULT_USER`]).
    pub fn token(&self, token: &str, user: &str) {
        lock(&self.shared.hooks).tokens.insert(token.into(), user.into());
    }

    /// The pod proxy reaches `pod:port` in `ns` at 127.0.0.1:`local`.
    pub fn pod(&self, ns: &str, pod: &str, port: u16, local: u16) {
        lock(&self.shared.hooks).pods.insert((ns.into(), pod.into(), port), local);
    }

    /// Lists `group/version` in `/apis` as an aggregated API whose server is
    /// down: its discovery (and every path under it) answers 503.
    pub fn unavailable_group(&self, group: &str, version: &str) {
        lock(&self.shared.hooks).unavailable.push((group.into(), version.into()));
    }

    /// Refuses `verb` on `resource` with `403 Forbidden` (for `user`, or
    /// everyone).
    pub fn forbid(&self, user: Option<&str>, verb: &str, resource: &str) {
        lock(&self.shared.hooks).forbidden.push(Forbidden {
            user: user.map(str::to_string),
            verb: verb.into(),
            resource: resource.into(),
        });
    }

    /// Answers matching requests with `code` (see [`Fault`]).
    pub fn fail(&self, method: Option<&str>, path: &str, code: u16, times: Option<u32>) {
        lock(&self.shared.hooks).faults.push(Fault {
            method: method.map(str::to_uppercase),
            path: path.into(),
            code,
            remaining: times,
        });
    }

    /// Removes every injected fault and 403.
    pub fn clear_faults(&self) {
        let mut h = lock(&self.shared.hooks);
        h.faults.clear();
        h.forbidden.clear();
    }

    /// From now on, requests are accepted and never answered (until
    /// [`FakeApi::resume`]); open watches go on.
    pub fn pause(&self) {
        self.shared.paused.send_replace(true);
    }

    /// Answers again, the held requests first.
    pub fn resume(&self) {
        self.shared.paused.send_replace(false);
    }

    /// Cuts every open watch connection mid-stream (no terminating chunk),
    /// as a dropped connection looks to the client.
    pub fn drop_watches(&self) {
        self.shared.drops.send_modify(|n| *n += 1);
    }

    /// etcd compaction (see [`Store::compact`]).
    pub fn compact(&self) {
        lock(&self.store).compact();
    }

    /// How often watches that allow bookmarks get one.
    pub fn set_bookmark_interval(&self, every: Duration) {
        lock(&self.shared.hooks).bookmark_interval = every;
    }

    /// How many watch streams are open now.
    pub fn open_watches(&self) -> usize {
        self.shared.open_watches.load(Ordering::SeqCst)
    }

    /// Waits (up to `timeout`) until at least `n` watches are open.
    pub async fn wait_for_watches(&self, n: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.open_watches() < n {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.shared.hooks).requests.clone()
    }

    /// Every resource request so far, as the RBAC authorizer saw it.
    pub fn authorizations(&self) -> Vec<Authorization> {
        lock(&self.shared.hooks).authorizations.clone()
    }
}

/// A kubeconfig for `server` (context `fake`, user `tester` with token
/// `test-token`).
pub fn kubeconfig(server: &str, namespace: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {server}\n\
         users:\n- name: tester\n  user:\n    token: test-token\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: tester\n    namespace: {namespace}\n\
         current-context: fake\n"
    )
}

/// Serves `store` on a free loopback port on the current runtime, until
/// the runtime stops.
pub async fn serve(store: Store) -> std::io::Result<FakeApi> {
    serve_on(store, SocketAddr::from(([127, 0, 0, 1], 0))).await
}

/// Serves `store` on `addr` on the current runtime.
pub async fn serve_on(store: Store, addr: SocketAddr) -> std::io::Result<FakeApi> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let store = Arc::new(Mutex::new(store));
    let shared = Arc::new(Shared {
        store: store.clone(),
        hooks: Mutex::new(Hooks {
            faults: Vec::new(),
            forbidden: Vec::new(),
            pods: HashMap::new(),
            unavailable: Vec::new(),
            tokens: HashMap::new(),
            bookmark_interval: DEFAULT_BOOKMARK_INTERVAL,
            requests: Vec::new(),
            authorizations: Vec::new(),
        }),
        drops: watch::Sender::new(0),
        paused: watch::Sender::new(false),
        open_watches: AtomicUsize::new(0),
    });
    let state = shared.clone();
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
        let state = state.clone();
        async move { handle(state, method, uri, headers, body).await }
    });
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "fake API server stopped");
        }
    });
    Ok(FakeApi { addr, store, shared, _background: None })
}

/// Serves `store` on a free loopback port from a runtime of its own (for
/// synchronous tests); it stops when the last handle is dropped.
pub fn spawn(store: Store) -> std::io::Result<FakeApi> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new().name("fake-api".into()).spawn(move || {
        let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
            Ok(r) => r,
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
        };
        runtime.block_on(async move {
            let served = serve(store).await;
            let ok = served.is_ok();
            let _ = ready_tx.send(served);
            if ok {
                let _ = stop_rx.await;
            }
        });
    })?;
    let mut api = ready_rx.recv().map_err(|_| std::io::Error::other("the fake API thread died"))??;
    api._background = Some(Arc::new(Background(Some(stop_tx))));
    Ok(api)
}

fn json_reply(code: u16, body: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

fn error_reply(e: &ApiError) -> Response {
    let mut r = json_reply(e.code, &e.status());
    if e.code == 429
        && let Ok(v) = "1".parse()
    {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// Where a request goes.
enum Route {
    Discovery(Value),
    Unavailable,
    Proxy { ns: String, pod: String, port: u16, rest: String },
    Resource { t: Box<ResourceType>, ns: Option<String>, name: Option<String>, sub: Option<String>, watch: bool },
}

impl Shared {
    fn user_of(&self, headers: &HeaderMap) -> String {
        if let Some(u) = headers.get("impersonate-user").and_then(|v| v.to_str().ok()) {
            return u.to_string();
        }
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        token.and_then(|t| lock(&self.hooks).tokens.get(t).cloned()).unwrap_or_else(|| DEFAULT_USER.to_string())
    }

    fn take_fault(&self, method: &Method, path: &str) -> Option<u16> {
        let mut h = lock(&self.hooks);
        let i = h.faults.iter().position(|f| {
            f.method.as_deref().is_none_or(|m| m == method.as_str())
                && match f.path.strip_suffix('*') {
                    Some(prefix) => path.starts_with(prefix),
                    None => f.path == path,
                }
                && f.remaining != Some(0)
        })?;
        let f = &mut h.faults[i];
        if let Some(n) = f.remaining.as_mut() {
            *n -= 1;
        }
        Some(f.code)
    }

    fn authorize(
        &self,
        user: &str,
        verb: &str,
        t: &ResourceType,
        sub: Option<&str>,
        namespace: Option<&str>,
        name: Option<&str>,
    ) {
        let resource = match sub {
            Some(sub) => format!("{}/{sub}", t.plural),
            None => t.plural.clone(),
        };
        lock(&self.hooks).authorizations.push(Authorization {
            user: user.to_owned(),
            verb: verb.to_owned(),
            group: t.group.clone(),
            resource,
            namespace: namespace.map(str::to_owned),
            name: name.map(str::to_owned),
        });
    }

    fn forbidden(&self, user: &str, verb: &str, t: &ResourceType, sub: Option<&str>) -> bool {
        let names = [
            t.plural.clone(),
            t.qualified(),
            sub.map(|s| format!("{}/{s}", t.plural)).unwrap_or_default(),
            "*".to_string(),
        ];
        lock(&self.hooks).forbidden.iter().any(|f| {
            f.user.as_deref().is_none_or(|u| u == user)
                && (f.verb == verb || f.verb == "*")
                && names.contains(&f.resource)
        })
    }

    fn route(&self, path: &str) -> Result<Route, ApiError> {
        let segs: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
        let store = lock(&self.store);
        let reg = store.registry();
        let unavailable = lock(&self.hooks).unavailable.clone();
        let (group, version, rest) = match segs.as_slice() {
            ["openapi", "v3"] => return Ok(Route::Discovery(reg.openapi_v3_index())),
            ["openapi", "v3", "api", v] => {
                return reg.openapi_v3("", v).map(Route::Discovery).ok_or_else(ApiError::no_resource);
            }
            ["openapi", "v3", "apis", g, v] => {
                return reg.openapi_v3(g, v).map(Route::Discovery).ok_or_else(ApiError::no_resource);
            }
            ["api"] => return Ok(Route::Discovery(reg.api_versions())),
            ["apis"] => return Ok(Route::Discovery(reg.api_group_list(&unavailable))),
            ["apis", g] if unavailable.iter().any(|(ug, _)| ug == g) => return Ok(Route::Unavailable),
            ["apis", g] => return reg.api_group(g).map(Route::Discovery).ok_or_else(ApiError::no_resource),
            ["api", v, rest @ ..] => ("", *v, rest),
            ["apis", g, v, rest @ ..] => (*g, *v, rest),
            _ => return Err(ApiError::no_resource()),
        };
        if unavailable.iter().any(|(ug, uv)| ug == group && uv == version) {
            return Ok(Route::Unavailable);
        }
        if rest.is_empty() {
            return reg.api_resource_list(group, version).map(Route::Discovery).ok_or_else(ApiError::no_resource);
        }
        let (watch, rest) = match rest {
            ["watch", tail @ ..] => (true, tail),
            _ => (false, rest),
        };
        let core = group.is_empty();
        let (ns, plural, tail): (Option<&str>, &str, &[&str]) = match rest {
            ["namespaces"] => (None, "namespaces", &[]),
            ["namespaces", _] => (None, "namespaces", &rest[1..]),
            ["namespaces", _, "status" | "finalize"] if core => (None, "namespaces", &rest[1..]),
            ["namespaces", ns, plural, tail @ ..] => (Some(*ns), *plural, tail),
            [plural, tail @ ..] => (None, *plural, tail),
            [] => return Err(ApiError::no_resource()),
        };
        let t = reg.find(group, version, plural).cloned().ok_or_else(ApiError::no_resource)?;
        if ns.is_some() != t.namespaced && (ns.is_some() || !tail.is_empty()) {
            return Err(ApiError::no_resource());
        }
        let name = tail.first().map(|n| n.to_string());
        let sub = tail.get(1).map(|s| s.to_string());
        if let (Some(name), Some("proxy")) = (&name, sub.as_deref())
            && core
            && plural == "pods"
        {
            let (pod, port) = name.split_once(':').unwrap_or((name, "80"));
            return Ok(Route::Proxy {
                ns: ns.unwrap_or_default().to_string(),
                pod: pod.to_string(),
                port: port.parse().map_err(|_| ApiError::bad_request(format!("invalid port {port:?}")))?,
                rest: tail[2..].join("/"),
            });
        }
        let sub_ok = match sub.as_deref() {
            None => tail.len() <= 1,
            Some("status") => t.status_subresource && tail.len() == 2,
            Some(_) => false,
        };
        if !sub_ok {
            return Err(ApiError::no_resource());
        }
        Ok(Route::Resource { t: Box::new(t), ns: ns.map(str::to_string), name, sub, watch })
    }

    fn bookmark_interval(&self) -> Duration {
        lock(&self.hooks).bookmark_interval
    }
}

async fn handle(shared: Arc<Shared>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_string();
    let query = uri.query().unwrap_or("").to_string();
    let user = shared.user_of(&headers);
    let groups = headers.get_all("impersonate-group").iter().filter_map(|v| v.to_str().ok()).map(str::to_string);
    lock(&shared.hooks).requests.push(Request {
        method: method.to_string(),
        path: path.clone(),
        query: query.clone(),
        user: user.clone(),
        groups: groups.collect(),
    });
    let mut paused = shared.paused.subscribe();
    while *paused.borrow_and_update() {
        if paused.changed().await.is_err() {
            break;
        }
    }
    if let Some(code) = shared.take_fault(&method, &path) {
        return error_reply(&ApiError::for_code(code, format!("injected fault: {code} for {method} {path}")));
    }
    match path.as_str() {
        "/version" => {
            return json_reply(
                200,
                &json!({"major": "1", "minor": "32", "gitVersion": "v1.32.0-fake", "platform": "linux/amd64"}),
            );
        }
        "/healthz" | "/readyz" | "/livez" => return (StatusCode::OK, "ok").into_response(),
        _ => {}
    }
    let served = path == "/api" || path == "/apis" || path.starts_with("/api/") || path.starts_with("/apis/");
    if !(served || path == "/openapi/v3" || path.starts_with("/openapi/v3/")) {
        return (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "404 page not found\n")
            .into_response();
    }
    let route = match shared.route(&path) {
        Ok(r) => r,
        Err(e) => return error_reply(&e),
    };
    match route {
        Route::Discovery(doc) => json_reply(200, &doc),
        Route::Unavailable => {
            error_reply(&ApiError::for_code(503, "the server is currently unable to handle the request"))
        }
        Route::Proxy { ns, pod, port, rest } => {
            let pods = ResourceType::builtin("", "v1", "pods", "Pod", true);
            let verb = match method {
                Method::POST => "create",
                Method::PUT => "update",
                Method::PATCH => "patch",
                Method::DELETE => "delete",
                _ => "get",
            };
            shared.authorize(&user, verb, &pods, Some("proxy"), Some(&ns), Some(&pod));
            if shared.forbidden(&user, verb, &pods, Some("proxy")) {
                return error_reply(&ApiError::forbidden(&pods, Some("proxy"), &pod, &ns, &user, verb));
            }
            proxy(&shared, &method, &ns, &pod, port, &rest, &query, &body).await
        }
        Route::Resource { t, ns, name, sub, watch } => {
            let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
            let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            let req = ResourceRequest {
                t: *t,
                ns,
                name,
                sub,
                watch,
                user,
                query,
                content_type: content_type.to_string(),
                accept,
            };
            resource(shared, method, req, body).await
        }
    }
}

struct ResourceRequest {
    t: ResourceType,
    ns: Option<String>,
    name: Option<String>,
    sub: Option<String>,
    watch: bool,
    user: String,
    query: String,
    content_type: String,
    accept: String,
}

fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("request body is not JSON: {e}")))
}

async fn resource(shared: Arc<Shared>, method: Method, mut req: ResourceRequest, body: Bytes) -> Response {
    let mut opts = match ListOptions::from_query(&req.query) {
        Ok(o) => o,
        Err(e) => return error_reply(&e),
    };
    // The deprecated `/watch/.../<name>` watches one object.
    if req.watch
        && method == Method::GET
        && req.sub.is_none()
        && let Some(name) = req.name.take()
    {
        opts.selectors.fields.push(("metadata.name".into(), true, name));
    }
    let verb = match (&method, req.name.is_some()) {
        (&Method::GET, true) => "get",
        (&Method::GET, false) if opts.watch || req.watch => "watch",
        (&Method::GET, false) => "list",
        (&Method::POST, false) => "create",
        (&Method::PUT, true) => "update",
        (&Method::PATCH, true) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        _ => return error_reply(&ApiError::method_not_allowed(method.as_str())),
    };
    let (t, name, ns) = (&req.t, req.name.as_deref().unwrap_or(""), req.ns.as_deref().unwrap_or(""));
    // A list or watch selecting one name is authorized as a request for
    // that name, so a Role's resourceNames covers it (apiserver
    // `requestinfo.go`: the metadata.name field selector sets Name).
    let selected = match verb {
        "list" | "watch" => {
            opts.selectors.fields.iter().find(|(f, eq, _)| f == "metadata.name" && *eq).map(|(_, _, v)| v.as_str())
        }
        _ => None,
    };
    shared.authorize(&req.user, verb, t, req.sub.as_deref(), req.ns.as_deref(), req.name.as_deref().or(selected));
    if shared.forbidden(&req.user, verb, t, req.sub.as_deref()) {
        return error_reply(&ApiError::forbidden(t, req.sub.as_deref(), name, ns, &req.user, verb));
    }
    if verb == "watch" {
        return watch(shared, req, opts).await;
    }
    // kubectl's typed generators (kubectl create configmap ...) send protobuf.
    let decoded = if !body.is_empty() && req.content_type.contains("protobuf") {
        match super::protobuf::decode(&body) {
            Ok(v) => Some(v),
            Err(e) => return error_reply(&e),
        }
    } else {
        None
    };
    let media = req.content_type.split(';').next().unwrap_or("").trim().to_string();
    let parsed = match decoded.map(Ok).unwrap_or_else(|| {
        if media == "application/apply-patch+yaml" { super::apply::parse(&body) } else { parse_body(&body) }
    }) {
        Ok(v) => v,
        Err(e) => return error_reply(&e),
    };
    // fieldValidation (Strict, Warn: the default, Ignore): what the write
    // does with the fields its type does not declare (see `fields`).
    let options = match verb {
        "create" => "CreateOptions",
        "update" => "UpdateOptions",
        _ => "PatchOptions",
    };
    let validation = match verb {
        "create" | "update" | "patch" => match FieldValidation::from_query(&req.query, options) {
            Ok(v) => v,
            Err(e) => return error_reply(&e),
        },
        _ => FieldValidation::default(),
    };
    let dry_run = req.query.split('&').any(|p| p == "dryRun=All");
    let status_only = req.sub.as_deref() == Some("status");
    let q = t.qualified();
    if t.namespaced && req.ns.is_none() && matches!(verb, "create" | "deletecollection") {
        return error_reply(&ApiError::method_not_allowed(method.as_str()));
    }
    let mut guard = lock(&shared.store);
    let mut store = guard.acting_as(&req.user, dry_run).with_field_validation(validation);
    store.take_warnings();
    let check_identity = |body: &Value| -> Result<(), ApiError> {
        let body_ns = body.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("");
        if t.namespaced && !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let body_name = body.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        if verb == "update" && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        Ok(())
    };
    let result = match verb {
        "get" => store.get(&q, ns, name).map(|o| (200, o)),
        "list" => store.list_with(&q, req.ns.as_deref(), &opts).map(|l| (200, l)),
        "create" => check_identity(&parsed).and_then(|_| store.create(&q, ns, parsed)).map(|o| (201, o)),
        "update" => {
            check_identity(&parsed).and_then(|_| store.replace(&q, ns, name, parsed, status_only)).map(|o| (200, o))
        }
        "patch" => {
            let ct = req.content_type.split(';').next().unwrap_or("").trim();
            match ct {
                "application/merge-patch+json" => store.patch(&q, ns, name, &parsed, status_only),
                "application/strategic-merge-patch+json" => {
                    store.merge_patch(&q, ns, name, &parsed, status_only, true)
                }
                "application/json-patch+json" => store.json_patch(&q, ns, name, &parsed, status_only),
                "application/apply-patch+yaml" => super::apply::ApplyOptions::from_query(&req.query, status_only)
                    .and_then(|opts| store.server_side_apply(&q, ns, name, &parsed, &opts)),
                other => Err(ApiError::new(
                    415,
                    "UnsupportedMediaType",
                    format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {other:?})"),
                )),
            }
            .map(|o| (200, o))
        }
        "delete" => store.delete_with(&q, ns, name, &DeleteOptions::from_body(&parsed)).map(|o| (200, o)),
        _ => store.delete_collection(&q, req.ns.as_deref(), &opts).map(|o| (200, o)),
    };
    let warnings = store.take_warnings();
    match result {
        Ok((code, obj)) if matches!(verb, "get" | "list") && super::table::wants_table(&req.accept) => {
            let (items, meta) = if verb == "list" {
                (obj["items"].as_array().cloned().unwrap_or_default(), obj["metadata"].clone())
            } else {
                let rv = obj.pointer("/metadata/resourceVersion").cloned().unwrap_or(json!(""));
                (vec![obj], json!({"resourceVersion": rv}))
            };
            match super::table::table(t, &items, meta.clone(), &req.query, store.now()) {
                Some(table) => json_reply(code, &table),
                None if verb == "list" => json_reply(
                    code,
                    &json!({"kind": format!("{}List", t.kind), "apiVersion": t.api_version(), "metadata": meta, "items": items}),
                ),
                None => json_reply(code, &store.present(t, items.into_iter().next().unwrap_or_default(), false)),
            }
        }
        Ok((code, obj)) => {
            let obj = if obj.get("kind") == Some(&json!("Status")) || verb == "list" || verb == "deletecollection" {
                obj
            } else {
                store.present(t, obj, false)
            };
            let mut reply = json_reply(code, &obj);
            // RFC 7234 warnings, as the API server sends them; kubectl prints
            // each as `Warning: ...`.
            for w in &warnings {
                if let Ok(v) = header::HeaderValue::from_str(&format!("299 - {:?}", w)) {
                    reply.headers_mut().append("warning", v);
                }
            }
            reply
        }
        Err(e) => error_reply(&e),
    }
}

/// Counts an open watch for as long as it lives.
struct OpenWatch(Arc<Shared>);

impl OpenWatch {
    fn new(shared: Arc<Shared>) -> Self {
        shared.open_watches.fetch_add(1, Ordering::SeqCst);
        OpenWatch(shared)
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.0.open_watches.fetch_sub(1, Ordering::SeqCst);
    }
}

fn line(v: &Value) -> Bytes {
    let mut b = v.to_string().into_bytes();
    b.push(b'\n');
    Bytes::from(b)
}

/// A chunked response of newline-delimited watch events, fed by a task.
async fn watch(shared: Arc<Shared>, req: ResourceRequest, opts: ListOptions) -> Response {
    if let Err(e) = opts.selectors.check_fields(&req.t.plural) {
        return error_reply(&e);
    }
    let filter = WatchFilter {
        resource_type: req.t.clone(),
        namespace: req.ns.clone().filter(|_| req.t.namespaced),
        selectors: opts.selectors.clone(),
    };
    let (changes, begin) = {
        let store = lock(&shared.store);
        (store.subscribe(), store.watch_begin(&filter, &opts))
    };
    if let Err(e) = &begin
        && e.code != 410
    {
        return error_reply(e);
    }
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(256);
    let open = OpenWatch::new(shared.clone());
    tokio::spawn(stream_events(open, filter, opts, begin, changes, tx));
    let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], Body::from_stream(stream)).into_response()
}

async fn stream_events(
    open: OpenWatch,
    filter: WatchFilter,
    opts: ListOptions,
    begin: Result<(Vec<Value>, u64), ApiError>,
    mut changes: watch::Receiver<u64>,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    let shared = open.0.clone();
    let expired = |e: &ApiError| line(&watch_event("ERROR", e.status()));
    let mut cursor = match begin {
        Ok((events, cursor)) => {
            for e in &events {
                if tx.send(Ok(line(e))).await.is_err() {
                    return;
                }
            }
            cursor
        }
        Err(e) => {
            let _ = tx.send(Ok(expired(&e))).await;
            return;
        }
    };
    let mut drops = shared.drops.subscribe();
    drops.borrow_and_update();
    let every = shared.bookmark_interval();
    let mut bookmarks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let deadline = opts.timeout_seconds.map(|s| tokio::time::Instant::now() + Duration::from_secs(s));
    loop {
        changes.borrow_and_update();
        let polled = lock(&shared.store).watch_poll(&filter, cursor);
        match polled {
            Ok((events, reached)) => {
                for e in &events {
                    if tx.send(Ok(line(e))).await.is_err() {
                        return;
                    }
                }
                cursor = reached;
            }
            Err(e) => {
                let _ = tx.send(Ok(expired(&e))).await;
                return;
            }
        }
        let timeout = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            _ = bookmarks.tick(), if opts.allow_bookmarks => {
                let b = watch_event("BOOKMARK", bookmark(&filter.resource_type, cursor, false));
                if tx.send(Ok(line(&b))).await.is_err() {
                    return;
                }
            }
            _ = timeout => return,
            _ = drops.changed() => {
                let _ = tx.send(Err(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "watch dropped by the test"))).await;
                return;
            }
            _ = tx.closed() => return,
        }
    }
}

/// Decodes a chunked HTTP/1.1 body.
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = body.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&body[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok());
        let Some(size) = size.filter(|s| *s > 0) else { break };
        let start = eol + 2;
        let end = (start + size).min(body.len());
        out.extend_from_slice(&body[start..end]);
        body = body.get(end + 2..).unwrap_or_default();
    }
    out
}

/// The API server's pod proxy: forwards to the local port registered for
/// the pod's port (plain HTTP/1.1), answers its status and body.
#[allow(clippy::too_many_arguments)] // the parts of one proxied request
async fn proxy(
    shared: &Shared,
    method: &Method,
    ns: &str,
    pod: &str,
    port: u16,
    rest: &str,
    query: &str,
    body: &Bytes,
) -> Response {
    let target = lock(&shared.hooks).pods.get(&(ns.to_string(), pod.to_string(), port)).copied();
    let pods = ResourceType::builtin("", "v1", "pods", "Pod", true);
    let Some(local) = target else {
        return error_reply(&ApiError::not_found(&pods, pod));
    };
    let path = if query.is_empty() { format!("/{rest}") } else { format!("/{rest}?{query}") };
    let (method, body) = (method.to_string(), body.to_vec());
    let answer = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", local)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .ok()?;
        s.write_all(&body).ok()?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).ok()?;
        Some(raw)
    })
    .await
    .ok()
    .flatten();
    let Some(raw) = answer else {
        return error_reply(&ApiError::for_code(
            503,
            format!("error trying to reach service: dial tcp {pod}:{port}: connect: connection refused"),
        ));
    };
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let payload = raw.get(split + 4..).unwrap_or_default();
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(502);
    let header_value = |name: &str| {
        head.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_string())
    };
    let payload = if header_value("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        dechunk(payload)
    } else {
        payload.to_vec()
    };
    let content_type = header_value("content-type").unwrap_or_else(|| "application/octet-stream".into());
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY);
    (status, [(header::CONTENT_TYPE, content_type)], payload).into_response()
}
