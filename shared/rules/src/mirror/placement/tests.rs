use super::*;

fn key(group: &str, version: &str, resource: &str, namespace: &str, name: &str) -> ObjectKey {
    ObjectKey {
        group: group.into(),
        version: version.into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

// gitops-reverser internal/types/identifier.go:96-112 and its
// identifier_test.go: namespace first, core group omitted, no version.
#[test]
fn the_canonical_path_is_gitops_reversers() {
    let p = Placement::default();
    assert_eq!(
        p.path_for(&key("", "v1", "configmaps", "shop", "web"), "ConfigMap", false).unwrap(),
        "shop/configmaps/web.yaml"
    );
    assert_eq!(
        p.path_for(&key("apps", "v1", "deployments", "shop", "api"), "Deployment", false).unwrap(),
        "shop/apps/deployments/api.yaml"
    );
    assert_eq!(
        p.path_for(&key("rbac.authorization.k8s.io", "v1", "clusterroles", "", "admin"), "ClusterRole", false).unwrap(),
        "_cluster/rbac.authorization.k8s.io/clusterroles/admin.yaml"
    );
    assert_eq!(
        p.path_for(&key("", "v1", "secrets", "shop", "db"), "Secret", true).unwrap(),
        "shop/secrets/db.sops.yaml"
    );
    // A version bump moves no file.
    assert_eq!(
        canonical_path(&key("apps", "v2", "deployments", "shop", "api"), false),
        canonical_path(&key("apps", "v1", "deployments", "shop", "api"), false)
    );
    assert!(is_sensitive_path("shop/secrets/db.sops.yaml"));
    assert!(!is_sensitive_path("shop/configmaps/web.yaml"));
}

#[test]
fn by_type_wins_over_default_and_core_group_segments_collapse() {
    let p = Placement {
        by_type: [("v1/configmaps".to_owned(), "config/{namespace}/{name}.yaml".to_owned())].into(),
        default: Some("{groupPath}/{version}/{resource}/{namespaceOrCluster}/{kind}-{name}{sensitiveSuffix}".into()),
    };
    p.validate().unwrap();
    assert_eq!(
        p.path_for(&key("", "v1", "configmaps", "shop", "web"), "ConfigMap", false).unwrap(),
        "config/shop/web.yaml"
    );
    assert_eq!(
        p.path_for(&key("", "v1", "services", "shop", "web"), "Service", false).unwrap(),
        "v1/services/shop/Service-web.yaml"
    );
    assert_eq!(
        p.path_for(&key("apps", "v1", "deployments", "", "x"), "Deployment", false).unwrap(),
        "apps/v1/deployments/_cluster/Deployment-x.yaml"
    );
    assert_eq!(
        p.path_for(&key("", "v1", "secrets", "shop", "db"), "Secret", true).unwrap(),
        "v1/secrets/shop/Secret-db.sops.yaml"
    );
    let vars = Placement {
        by_type: Default::default(),
        default: Some("{scope}/{apiVersion}/{group}/{resource}/{name}.yaml".into()),
    };
    // Every value is one segment, {apiVersion} too (placement.go:556-565).
    assert_eq!(
        vars.path_for(&key("apps", "v1", "deployments", "", "x"), "Deployment", false).unwrap(),
        "cluster/apps%2Fv1/apps/deployments/x.yaml"
    );
}

#[test]
fn the_legacy_layout_is_a_template() {
    let p = Placement { by_type: Default::default(), default: Some(LEGACY_TEMPLATE.into()) };
    p.validate().unwrap();
    assert_eq!(
        p.path_for(&key("apps", "v1", "deployments", "shop", "api"), "Deployment", false).unwrap(),
        "apps/v1/deployments/shop/api.yaml"
    );
}

#[test]
fn bad_templates_are_refused_naming_the_problem() {
    let with_default = |d: &str| Placement { by_type: Default::default(), default: Some(d.into()) };
    let err = with_default("{namespace}/{nmae}.yaml").validate().unwrap_err();
    assert!(matches!(&err, PlacementError::UnknownVariable { variable, .. } if variable == "nmae"), "{err}");
    assert!(err.to_string().contains("unknown variable {nmae}"), "{err}");
    assert!(err.to_string().contains("{namespaceOrCluster}"), "lists the variables: {err}");
    for (t, says) in [
        ("../{namespace}/{name}.yaml", "\"..\""),
        ("/abs/{namespace}/{name}.yaml", "relative"),
        ("{namespace}/{name}.json", ".yaml"),
        ("a\\{namespace}/{name}.yaml", "separators"),
    ] {
        let err = with_default(t).validate().unwrap_err();
        assert!(err.to_string().contains(says), "{t}: {err}");
    }
    let err = Placement { by_type: [("apps/v1/deployments ".to_owned(), "x.yaml".to_owned())].into(), default: None }
        .validate()
        .unwrap_err();
    assert!(matches!(err, PlacementError::BadTypeKey { .. }), "{err}");
    // Secrets never share a file.
    let err = Placement { by_type: [("v1/secrets".to_owned(), "secrets.yaml".to_owned())].into(), default: None }
        .validate()
        .unwrap_err();
    assert!(matches!(err, PlacementError::SharedSensitiveFile { .. }), "{err}");
    let err = with_default("all.yaml").validate().unwrap_err();
    assert!(matches!(err, PlacementError::SharedSensitiveFile { .. }), "{err}");
    Placement {
        by_type: [("v1/secrets".to_owned(), "{namespace}/{name}.sops.yaml".to_owned())].into(),
        default: Some("all.yaml".into()),
    }
    .validate()
    .unwrap();
}

#[test]
fn a_value_with_a_separator_stays_one_segment() {
    let p = Placement::default();
    assert_eq!(
        p.path_for(&key("", "v1", "configmaps", "shop", "a/b"), "ConfigMap", false).unwrap(),
        "shop/configmaps/a%2Fb.yaml"
    );
    let dir = Placement { by_type: Default::default(), default: Some("{namespace}/{name}/x.yaml".into()) };
    let err = dir.path_for(&key("", "v1", "configmaps", "shop", ".."), "ConfigMap", false).unwrap_err();
    assert!(matches!(err, PlacementError::BadPath { .. }), "{err}");
}
