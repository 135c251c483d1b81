use serde_json::{Value, json};

use super::*;

fn key(group: &str, resource: &str, namespace: &str, name: &str) -> ObjectKey {
    ObjectKey {
        group: group.into(),
        version: "v1".into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

fn cm_key() -> ObjectKey {
    key("", "configmaps", "shop", "web")
}

/// The metadata `sanitize` leaves of `{name, <field>: entries}`.
fn meta_after(field: &str, entries: Value) -> Value {
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", field: entries}});
    sanitize(&cm_key(), &obj).unwrap()["metadata"].clone()
}

#[test]
fn server_owned_metadata_and_status_go_and_intent_stays() {
    // sanitize_test.go:383-441 (TestSanitize_RemoveAutoGenMetadata), plus
    // what metadata the reference never copies (sanitize.go:36-45).
    let obj = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": "web", "namespace": "shop",
            "uid": "u-1", "resourceVersion": "42", "generation": 3,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "deletionTimestamp": "2026-01-02T00:00:00Z", "deletionGracePeriodSeconds": 30,
            "selfLink": "/api/v1/namespaces/shop/configmaps/web",
            "managedFields": [{"manager": "kubectl"}],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs"}],
            "finalizers": ["example.com/guard"], "generateName": "web-",
            "labels": {"app": "web"}, "annotations": {"note": "hi"},
        },
        "data": {"color": "blue"},
        "status": {"phase": "x"},
    });
    assert_eq!(
        sanitize(&cm_key(), &obj).unwrap(),
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}, "annotations": {"note": "hi"}},
            "data": {"color": "blue"},
        })
    );
}

#[test]
fn operational_labels_go_user_labels_stay() {
    // types_test.go:123-209 (TestCleanLabels), case by case.
    let cases: [(&str, Value, Option<Value>); 7] = [
        ("empty labels", json!({}), None),
        (
            "remove flux kustomize labels",
            json!({"kustomize.toolkit.fluxcd.io/name": "r", "kustomize.toolkit.fluxcd.io/namespace": "r", "user-label": "kept"}),
            Some(json!({"user-label": "kept"})),
        ),
        ("all labels operational", json!({"kustomize.toolkit.fluxcd.io/name": "r"}), None),
        (
            "remove kro labels",
            json!({"kro.run/owned-by": "r", "user-label": "kept"}),
            Some(json!({"user-label": "kept"})),
        ),
        (
            "remove applyset labels",
            json!({"applyset.kubernetes.io/part-of": "r", "user-label": "kept"}),
            Some(json!({"user-label": "kept"})),
        ),
        (
            "keep user labels",
            json!({"app.kubernetes.io/name": "kept", "example.com/custom": "kept"}),
            Some(json!({"app.kubernetes.io/name": "kept", "example.com/custom": "kept"})),
        ),
        (
            "keep app.kubernetes.io/instance even though Argo CD may own it",
            json!({"app.kubernetes.io/instance": "kept"}),
            Some(json!({"app.kubernetes.io/instance": "kept"})),
        ),
    ];
    for (name, input, want) in cases {
        assert_eq!(meta_after("labels", input).get("labels").cloned(), want, "{name}");
    }
}

#[test]
fn operational_annotations_go_user_annotations_stay() {
    // types_test.go:212-362 (TestCleanAnnotations), case by case.
    let kept = || Some(json!({"user-annotation": "kept"}));
    let cases: [(&str, Value, Option<Value>); 11] = [
        ("empty annotations", json!({}), None),
        (
            "remove kubectl annotations",
            json!({"kubectl.kubernetes.io/last-applied-configuration": "{}", "user-annotation": "kept"}),
            kept(),
        ),
        (
            "remove control-plane annotations",
            json!({"control-plane.alpha.kubernetes.io/leader": "r", "user-annotation": "kept"}),
            kept(),
        ),
        (
            "remove deployment annotations",
            json!({"deployment.kubernetes.io/revision": "3", "user-annotation": "kept"}),
            kept(),
        ),
        (
            "remove autoscaling annotations",
            json!({"autoscaling.alpha.kubernetes.io/conditions": "r",
                   "autoscaling.alpha.kubernetes.io/current-metrics": "r", "user-annotation": "kept"}),
            kept(),
        ),
        (
            "remove applyset annotations",
            json!({"applyset.kubernetes.io/tooling": "kubectl/v1", "user-annotation": "kept"}),
            kept(),
        ),
        (
            "remove Argo CD resource-tracking bookkeeping",
            json!({"argocd.argoproj.io/tracking-id": "my-app:example.com/IceCreamOrder:ns/order-1",
                   "argocd.argoproj.io/installation-id": "r", "user-annotation": "kept"}),
            kept(),
        ),
        (
            "keep Argo CD annotations that are user intent",
            json!({"argocd.argoproj.io/sync-wave": "kept", "argocd.argoproj.io/sync-options": "kept",
                   "argocd.argoproj.io/compare-options": "kept", "argocd.argoproj.io/hook": "kept"}),
            Some(json!({"argocd.argoproj.io/sync-wave": "kept", "argocd.argoproj.io/sync-options": "kept",
                        "argocd.argoproj.io/compare-options": "kept", "argocd.argoproj.io/hook": "kept"})),
        ),
        (
            "remove kcp logical-cluster annotation",
            json!({"kcp.io/cluster": "root:org:team", "user-annotation": "kept"}),
            kept(),
        ),
        ("keep other kcp annotations", json!({"kcp.io/path": "kept"}), Some(json!({"kcp.io/path": "kept"}))),
        (
            "all annotations operational",
            json!({"kubectl.kubernetes.io/last-applied-configuration": "r",
                   "control-plane.alpha.kubernetes.io/leader": "r",
                   "argocd.argoproj.io/tracking-id": "r", "kcp.io/cluster": "r"}),
            None,
        ),
    ];
    for (name, input, want) in cases {
        assert_eq!(meta_after("annotations", input).get("annotations").cloned(), want, "{name}");
    }
    // A kustomize-controller annotation, which the reference strips by prefix too (types.go:116).
    assert_eq!(
        meta_after("annotations", json!({"kustomize.toolkit.fluxcd.io/checksum": "x"})).get("annotations"),
        None
    );
}

#[test]
fn service_allocations_and_defaults_go() {
    // sanitize_test.go:443-489 (TestSanitize_Service_RemoveClusterIPFields).
    let k = key("", "services", "shop", "web");
    let allocated = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080, "nodePort": 30080}],
                 "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"], "healthCheckNodePort": 30000,
                 "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster"}});
    let out = sanitize(&k, &allocated).unwrap();
    assert_eq!(
        out["spec"],
        json!({"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080, "nodePort": 30080}]})
    );
}

#[test]
fn a_headless_service_and_a_dual_stack_request_are_intent() {
    // The two places this sanitizer keeps what the reference drops (module doc).
    let k = key("", "services", "shop", "web");
    let headless = json!({"metadata": {"name": "web"},
        "spec": {"clusterIP": "None", "clusterIPs": ["None"],
                 "ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "PreferDualStack",
                 "internalTrafficPolicy": "Local"}});
    let out = sanitize(&k, &headless).unwrap();
    assert_eq!(
        out["spec"],
        json!({"clusterIP": "None", "clusterIPs": ["None"], "ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "PreferDualStack"})
    );
}

#[test]
fn pod_node_name_and_pvc_volume_fields_go_only_on_their_types() {
    // sanitize_test.go:491-560.
    let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "worker-1", "containers": []}});
    assert_eq!(sanitize(&key("", "pods", "a", "p"), &pod).unwrap()["spec"], json!({"containers": []}));
    let pvc = json!({"metadata": {"name": "c"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
                 "volumeName": "pvc-abc123", "volumeMode": "Filesystem"}});
    assert_eq!(
        sanitize(&key("", "persistentvolumeclaims", "a", "c"), &pvc).unwrap()["spec"],
        json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}})
    );
    // The same field on a type of another group is that type's intent.
    let custom = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "volumeMode": "Block"}});
    assert_eq!(
        sanitize(&key("example.com", "pods", "a", "p"), &custom).unwrap()["spec"],
        json!({"nodeName": "n1", "volumeMode": "Block"})
    );
}

#[test]
fn a_kubectl_applied_deployment_keeps_only_what_was_applied() {
    // What `kubectl apply` and the Deployment controller leave on an object.
    let k = key("apps", "deployments", "shop", "api");
    let live = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "shop", "generation": 2, "uid": "u",
            "annotations": {"deployment.kubernetes.io/revision": "2",
                            "kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"apps/v1\"}\n"},
            "labels": {"app": "api"}},
        "spec": {"replicas": 1},
        "status": {"replicas": 1}});
    assert_eq!(
        sanitize(&k, &live).unwrap(),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "api", "namespace": "shop", "labels": {"app": "api"}},
            "spec": {"replicas": 1}})
    );
}

#[test]
fn a_non_object_is_refused_with_a_typed_error() {
    let err = sanitize(&cm_key(), &json!([1, 2])).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Render { .. }));
    assert!(msg.contains("core/v1/configmaps shop/web"), "{msg}");
    assert!(msg.contains("array"), "{msg}");
}
