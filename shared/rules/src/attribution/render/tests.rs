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
