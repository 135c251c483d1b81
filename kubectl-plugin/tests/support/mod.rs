//! Real parts for the `why` tests: a local HTTP server speaking the
//! Kubernetes API's JSON (discovery, GET, 404 Status, the pod proxy).
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use testkit::free_port;

/// Where the API keeps objects (by API path) and which pod ports its proxy
/// reaches (namespace, pod, port) -> a local port.
#[derive(Default)]
struct State {
    objects: HashMap<String, Value>,
    pods: HashMap<(String, String, u16), u16>,
}

/// The fake API server, on its own thread and runtime.
pub struct FakeApi {
    pub port: u16,
    state: Arc<Mutex<State>>,
    _runtime: tokio::runtime::Runtime,
}

fn status(code: u16, reason: &str, message: String) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    });
    (StatusCode::from_u16(code).unwrap(), [(header::CONTENT_TYPE, "application/json")], body.to_string())
        .into_response()
}

fn json_ok(v: Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
}

fn resource(name: &str, singular: &str, kind: &str, short: &[&str], namespaced: bool) -> Value {
    let mut r = json!({
        "name": name, "singularName": singular, "namespaced": namespaced, "kind": kind,
        "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
    });
    if !short.is_empty() {
        r["shortNames"] = json!(short);
    }
    r
}

fn discovery(path: &str) -> Option<Value> {
    Some(match path {
        "/api" => {
            json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]})
        }
        "/api/v1" => json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            resource("configmaps", "configmap", "ConfigMap", &["cm"], true),
            resource("namespaces", "namespace", "Namespace", &["ns"], false),
            resource("pods", "pod", "Pod", &["po"], true),
            {"name": "pods/proxy", "singularName": "", "namespaced": true, "kind": "PodProxyOptions", "verbs": ["get"]},
        ]}),
        "/apis" => json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}], "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}},
            // An aggregated API whose server is down: discovery must skip it.
            {"name": "wardle.example.com", "versions": [{"groupVersion": "wardle.example.com/v1alpha1", "version": "v1alpha1"}], "preferredVersion": {"groupVersion": "wardle.example.com/v1alpha1", "version": "v1alpha1"}},
        ]}),
        "/apis/apps/v1" => {
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "apps/v1", "resources": [
                resource("deployments", "deployment", "Deployment", &["deploy"], true),
                {"name": "deployments/scale", "singularName": "", "namespaced": true, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]},
            ]})
        }
        _ => return None,
    })
}

/// A bare HTTP/1.1 GET on loopback: (status, body).
pub fn http_get(port: u16, path_and_query: &str) -> (u16, String) {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return (0, String::new());
    };
    let _ = write!(s, "GET {path_and_query} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let code = out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (code, body)
}

fn handle(state: &Mutex<State>, uri: &Uri) -> Response {
    let path = uri.path();
    if let Some(v) = discovery(path) {
        return json_ok(v);
    }
    if path.starts_with("/apis/wardle.example.com/") {
        return status(503, "ServiceUnavailable", "the server is currently unable to handle the request".into());
    }
    // /api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy/{rest}
    let parts: Vec<&str> = path.split('/').collect();
    if let ["", "api", "v1", "namespaces", ns, "pods", pod_port, "proxy", rest @ ..] = parts.as_slice() {
        let (pod, port) = pod_port.split_once(':').unwrap_or((pod_port, "80"));
        let port: u16 = port.parse().unwrap_or(0);
        let target = state.lock().unwrap().pods.get(&(ns.to_string(), pod.to_string(), port)).copied();
        let Some(local) = target else {
            return status(404, "NotFound", format!("pods \"{pod}\" not found"));
        };
        let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
        let (code, body) = http_get(local, &format!("/{}{query}", rest.join("/")));
        if code == 0 {
            return status(
                503,
                "ServiceUnavailable",
                format!("error trying to reach service: dial tcp {pod}:{port}: connect: connection refused"),
            );
        }
        return (StatusCode::from_u16(code).unwrap(), [(header::CONTENT_TYPE, "application/json")], body)
            .into_response();
    }
    if let Some(obj) = state.lock().unwrap().objects.get(path) {
        return json_ok(obj.clone());
    }
    let name = parts.last().copied().unwrap_or_default();
    let resource = parts.get(parts.len().saturating_sub(2)).copied().unwrap_or_default();
    status(404, "NotFound", format!("{resource} \"{name}\" not found"))
}

impl FakeApi {
    pub fn start() -> FakeApi {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let port = free_port().unwrap();
        let s = state.clone();
        let app = Router::new().fallback(move |uri: Uri, _body: Bytes| {
            let s = s.clone();
            async move { handle(&s, &uri) }
        });
        let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", port))).unwrap();
        runtime.spawn(async move { axum::serve(listener, app).await });
        FakeApi { port, state, _runtime: runtime }
    }

    /// Serves `object` at its API path (from apiVersion, kind's plural).
    pub fn put(&self, plural: &str, object: Value) {
        let api_version = object["apiVersion"].as_str().unwrap();
        let base =
            if api_version.contains('/') { format!("/apis/{api_version}") } else { format!("/api/{api_version}") };
        let ns = object["metadata"]["namespace"].as_str().unwrap();
        let name = object["metadata"]["name"].as_str().unwrap();
        self.state.lock().unwrap().objects.insert(format!("{base}/namespaces/{ns}/{plural}/{name}"), object);
    }

    /// The pod proxy reaches `pod:port` in `ns` at 127.0.0.1:`local`.
    pub fn pod(&self, ns: &str, pod: &str, port: u16, local: u16) {
        self.state.lock().unwrap().pods.insert((ns.into(), pod.into(), port), local);
    }

    /// A kubeconfig file pointing at this server.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://127.0.0.1:{}\n\
                 users:\n- name: tester\n  user:\n    token: test-token\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: tester\n    namespace: default\n\
                 current-context: fake\n",
                self.port
            ),
        )
        .unwrap();
        path
    }
}

/// A ConfigMap as the API server returns it.
pub fn configmap(ns: &str, name: &str, uid: &str, rv: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "uid": uid, "resourceVersion": rv, "creationTimestamp": "2026-11-29T12:00:00Z", "labels": {"app": name}},
        "data": {"k": rv},
    })
}

pub use testkit::audit_event as audit;
pub use testkit::kubectl::Kubectl;
pub use testkit::sidecar::Sidecar;
