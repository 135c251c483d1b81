use serde_json::json;

use super::*;

fn cm_key() -> ObjectKey {
    ObjectKey {
        group: String::new(),
        version: "v1".into(),
        resource: "configmaps".into(),
        namespace: "shop".into(),
        name: "web".into(),
    }
}

fn key(group: &str, resource: &str, namespace: &str, name: &str) -> ObjectKey {
    ObjectKey {
        group: group.into(),
        version: "v1".into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

#[test]
fn sanitize_strips_server_owned_metadata_and_status_and_keeps_intent() {
    let obj = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": "web", "namespace": "shop",
            "uid": "u", "resourceVersion": "7", "generation": 3,
            "creationTimestamp": "t", "deletionTimestamp": "t",
            "deletionGracePeriodSeconds": 0, "selfLink": "/x",
            "managedFields": [{"manager": "m"}],
            "ownerReferences": [{"uid": "o"}],
            "labels": {"a": "b"}, "annotations": {"c": "d"},
            "finalizers": ["f"]
        },
        "data": {"k": "v"},
        "status": {"phase": "x"}
    });
    let out = sanitize(&cm_key(), &obj).unwrap();
    assert_eq!(
        out,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "web", "namespace": "shop",
                "labels": {"a": "b"}, "annotations": {"c": "d"},
                "finalizers": ["f"]
            },
            "data": {"k": "v"}
        })
    );
}

#[test]
fn an_object_that_only_differs_by_deletion_timestamp_renders_identically() {
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "1"},
        "data": {"k": "v"}});
    let mut terminating = live.clone();
    terminating["metadata"]["deletionTimestamp"] = json!("2026-06-25T12:00:00Z");
    terminating["metadata"]["deletionGracePeriodSeconds"] = json!(0);
    terminating["metadata"]["resourceVersion"] = json!("2");
    assert!(is_logically_absent(&terminating));
    assert!(!is_logically_absent(&live));
    assert_eq!(render_manifest(&cm_key(), &live).unwrap(), render_manifest(&cm_key(), &terminating).unwrap());
}

#[test]
fn service_allocations_are_stripped_but_headless_is_intent() {
    let k = key("", "services", "shop", "web");
    let allocated = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"],
                 "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                 "ports": [{"port": 80, "nodePort": 30080}]}});
    let out = sanitize(&k, &allocated).unwrap();
    assert_eq!(out["spec"], json!({"ipFamilyPolicy": "SingleStack", "ports": [{"port": 80, "nodePort": 30080}]}));

    let headless = json!({"metadata": {"name": "web"},
        "spec": {"clusterIP": "None", "clusterIPs": ["None"],
                 "ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "PreferDualStack"}});
    let out = sanitize(&k, &headless).unwrap();
    assert_eq!(out["spec"]["clusterIP"], json!("None"));
    assert_eq!(out["spec"]["clusterIPs"], json!(["None"]));
    assert_eq!(out["spec"]["ipFamilies"], json!(["IPv4", "IPv6"]));
}

#[test]
fn pod_node_name_and_pvc_volume_name_are_stripped_only_on_their_types() {
    let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": []}});
    assert_eq!(sanitize(&key("", "pods", "a", "p"), &pod).unwrap()["spec"], json!({"containers": []}));
    let pvc = json!({"metadata": {"name": "c"}, "spec": {"volumeName": "pv-1", "resources": {}}});
    assert_eq!(sanitize(&key("", "persistentvolumeclaims", "a", "c"), &pvc).unwrap()["spec"], json!({"resources": {}}));
    // The same field on another type (a CRD in another group) is its intent.
    let custom = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}});
    assert_eq!(sanitize(&key("example.com", "pods", "a", "p"), &custom).unwrap()["spec"], json!({"nodeName": "n1"}));
}

#[test]
fn sanitize_refuses_a_non_object_with_a_typed_error() {
    let err = sanitize(&cm_key(), &json!([1, 2])).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Render { .. }));
    assert!(msg.contains("core/v1/configmaps shop/web"), "{msg}");
    assert!(msg.contains("array"), "{msg}");
}

#[test]
fn stable_yaml_orders_keys_the_same_whatever_the_input_order() {
    let a: Value = serde_json::from_str(
        r#"{"data":{"z":"1","a":"2"},"metadata":{"namespace":"shop","labels":{"y":"1","b":"2"},"name":"web"},"kind":"ConfigMap","apiVersion":"v1"}"#,
    )
    .unwrap();
    let b: Value = serde_json::from_str(
        r#"{"apiVersion":"v1","metadata":{"labels":{"b":"2","y":"1"},"name":"web","namespace":"shop"},"kind":"ConfigMap","data":{"a":"2","z":"1"}}"#,
    )
    .unwrap();
    let ya = to_stable_yaml(&cm_key(), &a).unwrap();
    let yb = to_stable_yaml(&cm_key(), &b).unwrap();
    assert_eq!(ya, yb);
    assert_eq!(
        ya,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: shop\n  labels:\n    b: '2'\n    y: '1'\ndata:\n  a: '2'\n  z: '1'\n"
    );
    // And it reads back as the same object.
    let back: Value = serde_norway::from_str(&ya).unwrap();
    assert_eq!(back, a);
}

#[test]
fn layout_path_follows_the_spec_layout() {
    // gitops-reverser internal/types/identifier.go:96-112.
    assert_eq!(layout_path(&cm_key()).unwrap(), "shop/configmaps/web.yaml");
    assert_eq!(
        layout_path(&ObjectKey {
            group: "rbac.authorization.k8s.io".into(),
            version: "v1".into(),
            resource: "clusterroles".into(),
            namespace: String::new(),
            name: "system:controller:x".into(),
        })
        .unwrap(),
        "_cluster/rbac.authorization.k8s.io/clusterroles/system:controller:x.yaml"
    );
}

#[test]
fn layout_path_refuses_segments_that_escape_their_directory() {
    for (field, bad) in [
        ("name", "../etc"),
        ("name", ".."),
        ("name", ""),
        ("name", "a/b"),
        ("name", "a\nb"),
        ("namespace", ".git"),
        ("resource", ""),
        ("version", "."),
    ] {
        let mut k = cm_key();
        match field {
            "name" => k.name = bad.into(),
            "namespace" => k.namespace = bad.into(),
            "resource" => k.resource = bad.into(),
            _ => k.version = bad.into(),
        }
        let err = layout_path(&k).unwrap_err();
        assert!(matches!(err, Error::LayoutPath { component, .. } if component == field), "{field}={bad:?}: {err}");
    }
}

proptest::proptest! {
    /// Same object, same bytes: rendering is a function of the object's
    /// content, never of key insertion order.
    #[test]
    fn rendering_ignores_key_order(entries in proptest::collection::btree_map("[a-z]{1,6}", "[ -~]{0,12}", 0..12)) {
        let forward: serde_json::Map<String, Value> =
            entries.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        let backward: serde_json::Map<String, Value> =
            entries.iter().rev().map(|(k, v)| (k.clone(), json!(v))).collect();
        let a = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": forward});
        let b = json!({"data": backward, "metadata": {"name": "x"}, "kind": "ConfigMap", "apiVersion": "v1"});
        let ra = render_manifest(&cm_key(), &a).unwrap();
        proptest::prop_assert_eq!(&ra, &render_manifest(&cm_key(), &b).unwrap());
        let back: Value = serde_norway::from_slice(&ra).unwrap();
        proptest::prop_assert_eq!(back, a);
    }
}
