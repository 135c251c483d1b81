//! Kubernetes' protobuf wire format for the bodies kubectl's typed
//! generators send (`kubectl create configmap|secret|namespace|
//! serviceaccount`): the `k8s\0` magic, then a `runtime.Unknown` whose
//! `raw` holds the object (apimachinery `runtime/serializer/protobuf`). The
//! messages below carry the fields of `k8s.io/api/core/v1/generated.proto`
//! those generators set, under the same field numbers; other kinds are
//! refused with 415, naming the way around.

use std::collections::BTreeMap;

use prost::Message;
use serde_json::{Value, json};

use super::error::ApiError;

const MAGIC: &[u8] = b"k8s\0";

#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMeta>,
    #[prost(bytes = "vec", optional, tag = "2")]
    raw: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
struct TypeMeta {
    #[prost(string, optional, tag = "1")]
    api_version: Option<String>,
    #[prost(string, optional, tag = "2")]
    kind: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ObjectMeta {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    generate_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    namespace: Option<String>,
    #[prost(btree_map = "string, string", tag = "11")]
    labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    annotations: BTreeMap<String, String>,
}

/// The shape of the four kinds: metadata at 1; ConfigMap `data` (2,
/// string map), `binaryData` (3), `immutable` (4); Secret `data` (2, bytes
/// map), `type` (3), `stringData` (4), `immutable` (5); ServiceAccount
/// `automountServiceAccountToken` (4); Namespace nothing more.
#[derive(Clone, PartialEq, Message)]
struct ConfigMap {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(btree_map = "string, string", tag = "2")]
    data: BTreeMap<String, String>,
    #[prost(btree_map = "string, bytes", tag = "3")]
    binary_data: BTreeMap<String, Vec<u8>>,
    #[prost(bool, optional, tag = "4")]
    immutable: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
struct Secret {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(btree_map = "string, bytes", tag = "2")]
    data: BTreeMap<String, Vec<u8>>,
    #[prost(string, optional, tag = "3")]
    type_: Option<String>,
    #[prost(btree_map = "string, string", tag = "4")]
    string_data: BTreeMap<String, String>,
    #[prost(bool, optional, tag = "5")]
    immutable: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
struct ServiceAccount {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(bool, optional, tag = "4")]
    automount_service_account_token: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
struct Namespace {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
}

fn refused(message: String) -> ApiError {
    ApiError::new(415, "UnsupportedMediaType", message)
}

fn metadata(m: Option<ObjectMeta>) -> Value {
    let m = m.unwrap_or_default();
    let mut out = json!({});
    for (key, v) in [("name", m.name), ("generateName", m.generate_name), ("namespace", m.namespace)] {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            out[key] = json!(v);
        }
    }
    if !m.labels.is_empty() {
        out["labels"] = json!(m.labels);
    }
    if !m.annotations.is_empty() {
        out["annotations"] = json!(m.annotations);
    }
    out
}

fn b64(map: BTreeMap<String, Vec<u8>>) -> Value {
    use base64::Engine as _;
    json!(
        map.into_iter()
            .map(|(k, v)| (k, base64::engine::general_purpose::STANDARD.encode(v)))
            .collect::<BTreeMap<_, _>>()
    )
}

/// The JSON object a protobuf body holds.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let bad = |e: prost::DecodeError| ApiError::bad_request(format!("the protobuf body does not decode: {e}"));
    let rest = body.strip_prefix(MAGIC).ok_or_else(|| {
        ApiError::bad_request("the protobuf body lacks the k8s\\0 prefix of Kubernetes' protobuf encoding")
    })?;
    let unknown = Unknown::decode(rest).map_err(bad)?;
    let tm = unknown.type_meta.unwrap_or_default();
    let (api_version, kind) = (tm.api_version.unwrap_or_default(), tm.kind.unwrap_or_default());
    let raw = unknown.raw.unwrap_or_default();
    let mut obj = json!({"apiVersion": api_version, "kind": kind});
    match (api_version.as_str(), kind.as_str()) {
        ("v1", "ConfigMap") => {
            let m = ConfigMap::decode(raw.as_slice()).map_err(bad)?;
            obj["metadata"] = metadata(m.metadata);
            if !m.data.is_empty() {
                obj["data"] = json!(m.data);
            }
            if !m.binary_data.is_empty() {
                obj["binaryData"] = b64(m.binary_data);
            }
            if let Some(i) = m.immutable {
                obj["immutable"] = json!(i);
            }
        }
        ("v1", "Secret") => {
            let m = Secret::decode(raw.as_slice()).map_err(bad)?;
            obj["metadata"] = metadata(m.metadata);
            if !m.data.is_empty() {
                obj["data"] = b64(m.data);
            }
            if !m.string_data.is_empty() {
                obj["stringData"] = json!(m.string_data);
            }
            if let Some(t) = m.type_.filter(|t| !t.is_empty()) {
                obj["type"] = json!(t);
            }
            if let Some(i) = m.immutable {
                obj["immutable"] = json!(i);
            }
        }
        ("v1", "ServiceAccount") => {
            let m = ServiceAccount::decode(raw.as_slice()).map_err(bad)?;
            obj["metadata"] = metadata(m.metadata);
            if let Some(a) = m.automount_service_account_token {
                obj["automountServiceAccountToken"] = json!(a);
            }
        }
        ("v1", "Namespace") => {
            let m = Namespace::decode(raw.as_slice()).map_err(bad)?;
            obj["metadata"] = metadata(m.metadata);
        }
        _ => {
            return Err(refused(format!(
                "the fake API decodes protobuf bodies of v1 ConfigMap, Secret, ServiceAccount and Namespace only, \
                 not {api_version} {kind}: write the object as YAML and use kubectl create -f"
            )));
        }
    }
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta { api_version: Some("v1".into()), kind: Some(kind.into()) }),
            raw: Some(raw),
        };
        let mut out = MAGIC.to_vec();
        out.extend(unknown.encode_to_vec());
        out
    }

    #[test]
    fn a_configmap_and_a_secret_decode_to_their_json() {
        let meta = ObjectMeta { name: Some("web".into()), namespace: Some("shop".into()), ..ObjectMeta::default() };
        let cm = ConfigMap {
            metadata: Some(meta.clone()),
            data: BTreeMap::from([("k".into(), "v".into())]),
            ..ConfigMap::default()
        };
        let obj = decode(&envelope("ConfigMap", cm.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "shop"}, "data": {"k": "v"}})
        );
        let secret = Secret {
            metadata: Some(meta),
            data: BTreeMap::from([("p".into(), b"hi".to_vec())]),
            type_: Some("Opaque".into()),
            ..Secret::default()
        };
        let obj = decode(&envelope("Secret", secret.encode_to_vec())).unwrap();
        assert_eq!(obj["data"]["p"], "aGk=");
        assert_eq!(obj["type"], "Opaque");
    }

    #[test]
    fn other_kinds_and_garbage_are_refused_clearly() {
        let e = decode(&envelope("Deployment", Vec::new())).unwrap_err();
        assert_eq!(e.code, 415);
        assert!(e.message.contains("kubectl create -f"), "{}", e.message);
        assert_eq!(decode(b"{}").unwrap_err().code, 400);
    }
}
