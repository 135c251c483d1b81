use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::*;
use crate::mirror::config::{GitProviderSpec, GitTargetSpec};
use crate::mirror::watch_rules::{Operations, Resolved, WatchScope, WatchedType};

fn watched(group: &str, resource: &str, scopes: &[WatchScope]) -> WatchedType {
    WatchedType {
        group: group.into(),
        version: "v1".into(),
        resource: resource.into(),
        kind: "K".into(),
        namespaced: true,
        scopes: scopes.iter().map(|s| (s.clone(), Operations::default())).collect(),
    }
}

fn settings() -> Settings {
    Settings {
        namespace: "reverser".into(),
        prefix: "reverser".into(),
        image: "ghcr.io/example/reverser:1".into(),
        pull_policy: "IfNotPresent".into(),
        sidecar_args: vec!["--author-attribution-grace=5s".into()],
        redis: Some(("redis".into(), "url".into())),
    }
}

fn spec(v: Value) -> GitTargetSpec {
    serde_json::from_value(v).unwrap()
}

fn find<'a>(objs: &'a [Value], kind: &str, ns: Option<&str>, name: &str) -> &'a Value {
    objs.iter()
        .find(|o| {
            o["kind"] == kind
                && o["metadata"]["name"] == name
                && o["metadata"].get("namespace").and_then(Value::as_str) == ns
        })
        .unwrap_or_else(|| panic!("no {kind} {ns:?}/{name} in {objs:#?}"))
}

fn rules(o: &Value) -> BTreeSet<String> {
    o["rules"].as_array().unwrap().iter().map(|r| r.to_string()).collect()
}

#[test]
fn the_rbac_follows_the_resolved_types_and_names_the_secrets() {
    let target = spec(json!({"providerRef": {"name": "git"}, "branch": "main", "path": "p",
        "allowedSourceNamespaces": {"selector": {"matchLabels": {"a": "b"}}}}));
    let provider: GitProviderSpec = serde_json::from_value(json!({"url": "ssh://x", "secretRef": {"name": "creds"},
        "knownHostsRef": {"kind": "ConfigMap", "name": "hosts"},
        "commit": {"signing": {"secretRef": {"name": "sign"}, "generateWhenMissing": true}}}))
    .unwrap();
    let resolved = Resolved {
        types: vec![
            watched("", "configmaps", &[WatchScope::Namespace("shop".into())]),
            watched(
                "apps",
                "deployments",
                &[WatchScope::Namespace("shop".into()), WatchScope::Namespace("web".into())],
            ),
            watched("example.com", "widgets", &[WatchScope::Everywhere]),
        ],
        ..Resolved::default()
    };
    let t = Target {
        namespace: "shop",
        name: "lab",
        uid: "u1",
        spec: &target,
        provider: Some(&provider),
        resolved: &resolved,
        remote: None,
    };
    let d = desired(&t, &settings());
    let m = mirror_name("reverser", "shop", "lab");

    // Every object is labelled with the GitTarget's uid, none owned (no
    // owner reference may cross a namespace).
    for o in &d {
        assert!(o["metadata"].get("ownerReferences").is_none(), "{o}");
        assert_eq!(o["metadata"]["labels"][TARGET_UID], "u1", "{o}");
        assert_eq!(o["metadata"]["annotations"][TARGET], "shop/lab");
    }
    // The pod and its account run in the operator's namespace.
    find(&d, "ServiceAccount", Some("reverser"), &m);
    let binding = find(&d, "RoleBinding", Some("shop"), &m);
    assert_eq!(binding["subjects"][0], json!({"kind": "ServiceAccount", "name": m, "namespace": "reverser"}));
    let own_watch = find(&d, "Role", Some("shop"), &format!("{m}-watch"));
    assert_eq!(
        rules(own_watch),
        BTreeSet::from([
            json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]}).to_string(),
            json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list", "watch"]}).to_string(),
        ])
    );
    let config = rules(find(&d, "Role", Some("shop"), &m));
    assert!(
        config.contains(
            &json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["creds", "sign"], "verbs": ["get", "list", "watch"]})
                .to_string()
        ),
        "{config:#?}"
    );
    assert!(
        config.contains(
            &json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["hosts"], "verbs": ["get"]})
                .to_string()
        )
    );
    assert!(
        config.contains(
            &json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["sign"], "verbs": ["patch"]})
                .to_string()
        )
    );
    let web = find(&d, "Role", Some("web"), &format!("{m}-watch"));
    assert_eq!(
        rules(web),
        BTreeSet::from([
            json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list", "watch"]}).to_string()
        ])
    );
    find(&d, "RoleBinding", Some("web"), &format!("{m}-watch"));
    let cluster = rules(find(&d, "ClusterRole", None, &m));
    assert!(cluster.contains(
        &json!({"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["list", "watch"]}).to_string()
    ));
    assert!(cluster.contains(&json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]}).to_string()));
    find(&d, "Role", Some("default"), &format!("{m}-event"));
}

#[test]
fn the_deployment_runs_watcher_and_sidecar_for_the_target() {
    let target = spec(json!({"providerRef": {"name": "git"}, "branch": "main", "path": "p"}));
    let resolved = Resolved::default();
    let t = Target {
        namespace: "shop",
        name: "lab",
        uid: "u1",
        spec: &target,
        provider: None,
        resolved: &resolved,
        remote: None,
    };
    let d = desired(&t, &settings());
    let m = mirror_name("reverser", "shop", "lab");
    let dep = find(&d, "Deployment", Some("reverser"), &m);
    let pod = &dep["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], m);
    let sidecar = &pod["initContainers"][0];
    assert_eq!(sidecar["restartPolicy"], "Always");
    let args: Vec<&str> = sidecar["args"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(args.contains(&"--git-target=shop/lab") && args.contains(&"--author-attribution-grace=5s"), "{args:?}");
    assert_eq!(sidecar["env"][0]["valueFrom"]["secretKeyRef"]["name"], "redis");
    let watcher = &pod["containers"][0];
    assert_eq!(watcher["args"][1], "--git-target=shop/lab");
    assert_eq!(dep["spec"]["strategy"]["type"], "Recreate");
    assert_eq!(dep["spec"]["selector"]["matchLabels"], dep["spec"]["template"]["metadata"]["labels"]);
    // No Secret is readable without a provider naming one.
    let config = rules(find(&d, "Role", Some("shop"), &m));
    assert!(!config.iter().any(|r| r.contains("\"secrets\"")), "{config:#?}");
}

#[test]
fn a_remote_source_grants_no_watch_here_and_reads_its_kubeconfig() {
    let target = spec(json!({"providerRef": {"name": "git"}, "branch": "main", "path": "p"}));
    let resolved = Resolved {
        types: vec![watched("", "configmaps", &[WatchScope::Namespace("shop".into())])],
        ..Resolved::default()
    };
    let remote = Some(("reverser", "prod-eu-kubeconfig"));
    let t = Target {
        namespace: "shop",
        name: "lab",
        uid: "u1",
        spec: &target,
        provider: None,
        resolved: &resolved,
        remote,
    };
    let d = desired(&t, &settings());
    let m = mirror_name("reverser", "shop", "lab");
    assert!(!d.iter().any(|o| o["metadata"]["name"] == format!("{m}-watch")));
    let read = find(&d, "Role", Some("reverser"), &format!("{m}-kubeconfig"));
    assert_eq!(rules(read), BTreeSet::from([json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["prod-eu-kubeconfig"], "verbs": ["get"]}).to_string()]));
    let dep = find(&d, "Deployment", Some("reverser"), &m);
    assert_eq!(dep["spec"]["template"]["spec"]["containers"][0]["args"][4], "--operator-namespace=reverser");
}

#[test]
fn names_are_the_charts_dns_labels() {
    // charts/reverser/templates/_helpers.tpl reverser.mirrorName, for
    // release "reverser": sha256("team-a/audit.main")[:8].
    let n = mirror_name("reverser", "team-a", "audit.main");
    assert_eq!(n, "reverser-mirror-team-a-audit-main-a6549029");
    let long = mirror_name("reverser", "shop", &"a".repeat(70));
    assert!(long.len() <= 57, "{long}");
    assert_ne!(mirror_name("reverser", "shop", &"a".repeat(71)), long, "unique per name");
}

#[test]
fn stale_objects_are_those_of_gone_targets_or_no_longer_wanted() {
    let a = |kind: &str, ns: Option<&str>, name: &str, uid: &str| Applied {
        kind: kind.into(),
        namespace: ns.map(str::to_owned),
        name: name.into(),
        uid: uid.into(),
    };
    let applied = vec![
        a("ClusterRole", None, "reverser-mirror:shop:lab", "u1"),
        a("Role", Some("web"), "lab-mirror-watch", "u1"),
        a("ClusterRole", None, "reverser-mirror:shop:old", "u2"),
        a("Role", Some("x"), "new-mirror-watch", "u3"),
    ];
    let live = BTreeSet::from(["u1".to_owned(), "u3".to_owned()]);
    let wanted = BTreeMap::from([(
        "u1".to_owned(),
        BTreeSet::from([("ClusterRole".to_owned(), None, "reverser-mirror:shop:lab".to_owned())]),
    )]);
    let gone: Vec<&str> = stale(&applied, &live, &wanted).iter().map(|a| a.name.as_str()).collect();
    // u1 no longer watches web; u2 is gone; u3 is not reconciled yet.
    assert_eq!(gone, vec!["lab-mirror-watch", "reverser-mirror:shop:old"]);
}
