//! The sidecar tests' side of `testkit::sidecar`: the harness itself is
//! shared; what is here needs the runtime crate (the generated gRPC client
//! and request types), which testkit does not depend on.
#![allow(dead_code)]

use runtime::proto::attribution_client::AttributionClient;
use tonic::transport::Channel;

pub use testkit::sidecar::Sidecar;
#[allow(unused_imports)] // not every test binary reads the ops port or opens a bare channel
pub use testkit::sidecar::{http_get, unix_channel as channel};
#[allow(unused_imports)] // not every test binary posts audit events
pub use testkit::{audit_event, event_list};

pub const BIN: &str = env!("CARGO_BIN_EXE_reverser-sidecar");

/// The generated `Attribution` client over a sidecar's socket.
#[allow(async_fn_in_trait)] // used only in these tests, never across a Send bound
pub trait AttributionExt {
    async fn client(&self) -> AttributionClient<Channel>;
}

impl AttributionExt for Sidecar {
    async fn client(&self) -> AttributionClient<Channel> {
        AttributionClient::new(self.channel().await)
    }
}

/// A ConfigMap as a watch event carries it, `deleting` with a
/// deletionTimestamp.
pub fn watch_object(ns: &str, name: &str, uid: &str, rv: &str, deleting: bool) -> Vec<u8> {
    let mut meta = serde_json::json!({"name": name, "namespace": ns, "uid": uid, "resourceVersion": rv});
    if deleting {
        meta["deletionTimestamp"] = "2026-11-29T12:00:00Z".into();
    }
    serde_json::to_vec(&serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})).unwrap()
}

pub fn configmaps(route: &str) -> Option<runtime::proto::TypeRef> {
    Some(runtime::proto::TypeRef {
        route: route.into(),
        group: String::new(),
        version: "v1".into(),
        resource: "configmaps".into(),
    })
}
