use serde_json::json;

use super::*;
use crate::mirror::config::{AllowedSourceNamespaces, ClusterProviderSpec, GitTargetSpec, LabelSelector};
use crate::mirror::source_namespace::Provider;

fn served(group: &str, version: &str, resource: &str, namespaced: bool, preferred: bool) -> Served {
    Served {
        group: group.into(),
        version: version.into(),
        resource: resource.into(),
        kind: resource.trim_end_matches('s').into(),
        namespaced,
        preferred,
        verbs: ["get", "list", "watch", "create"].map(String::from).to_vec(),
    }
}

fn discovery() -> Vec<Served> {
    vec![
        served("", "v1", "configmaps", true, true),
        served("", "v1", "secrets", true, true),
        served("", "v1", "namespaces", false, true),
        served("apps", "v1", "deployments", true, true),
        served("widgets.example.com", "v1", "widgets", true, true),
        served("widgets.example.com", "v1beta1", "widgets", true, false),
        served("other.example.com", "v1", "widgets", true, true),
        Served { verbs: vec!["get".into()], ..served("", "v1", "componentstatuses", false, true) },
        served("", "v1", "pods/log", true, true),
    ]
}

fn target() -> GitTargetSpec {
    serde_json::from_value(json!({"providerRef": {"name": "p"}, "branch": "main", "path": "x"})).unwrap()
}

fn wr(ns: &str, rules: serde_json::Value) -> WatchRule {
    serde_json::from_value(json!({"metadata": {"name": "r", "namespace": ns},
        "spec": {"targetRef": {"name": "prod"}, "rules": rules}}))
    .unwrap()
}

fn ns(name: &str, labels: &[(&str, &str)]) -> Namespace {
    Namespace { name: name.into(), labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() }
}

/// A ClusterProvider that admits the target's namespace and delegates the
/// choice of source namespace to it.
fn delegating() -> ClusterProviderSpec {
    ClusterProviderSpec {
        allowed_namespaces: Some(AllowedSourceNamespaces { names: vec!["mirror".into()], selector: None }),
        allow_source_namespace_override: true,
        ..ClusterProviderSpec::default()
    }
}

fn resolve_with(
    target: &GitTargetSpec,
    provider: Option<&ClusterProviderSpec>,
    rules: &[WatchRule],
    cluster: &[ClusterWatchRule],
    served: &[Served],
) -> Resolved {
    let labels = Default::default();
    let namespaces = [ns("shop", &[("mirror", "yes")]), ns("ops", &[])];
    let gate = Gate {
        target_namespace: "mirror",
        target_name: "prod",
        target,
        provider: Provider { name: "default", spec: provider, target_namespace_labels: &labels },
        namespaces: &namespaces,
    };
    resolve(&gate, rules, cluster, served)
}

fn run(target: &GitTargetSpec, rules: &[WatchRule], cluster: &[ClusterWatchRule]) -> Resolved {
    resolve_with(target, Some(&delegating()), rules, cluster, &discovery())
}

#[test]
fn a_rule_watches_its_own_namespace_at_the_preferred_version_for_every_operation() {
    let r = run(&target(), &[wr("mirror", json!([{"resources": ["configmaps", "deployments"]}]))], &[]);
    assert_eq!(r.problems, vec![]);
    let keys: Vec<String> = r.types.iter().map(WatchedType::key).collect();
    assert_eq!(keys, ["v1/configmaps", "apps/v1/deployments"]);
    let cm = r.get("", "v1", "configmaps").unwrap();
    assert_eq!(cm.watches(), vec![WatchScope::Namespace("mirror".into())]);
    assert_eq!(cm.operations_for("mirror"), Operations::ALL);
    assert_eq!(cm.operations_for("elsewhere"), Operations::default());
}

#[test]
fn groups_versions_and_operations_narrow_what_is_watched() {
    let r = run(
        &target(),
        &[wr(
            "mirror",
            json!([{"apiGroups": ["widgets.example.com"], "apiVersions": ["*"], "resources": ["widgets"],
                    "operations": ["CREATE", "DELETE"]}]),
        )],
        &[],
    );
    assert_eq!(r.problems, vec![]);
    assert_eq!(r.types.len(), 2, "both served versions");
    let ops = r.types[0].operations_for("mirror");
    assert!(ops.create && ops.delete && !ops.update);
    assert!(ops.allows(Operation::Delete) && !ops.allows(Operation::Update));
}

#[test]
fn unresolvable_items_are_problems_naming_the_fix_and_the_rest_is_still_watched() {
    let r = run(
        &target(),
        &[wr(
            "mirror",
            json!([{"resources": ["widgets"]}, {"resources": ["gizmos", "configmaps"]},
                              {"resources": ["namespaces"]}, {"resources": ["pods/log"]},
                              {"apiGroups": ["apps"], "apiVersions": ["v2"], "resources": ["deployments"]}]),
        )],
        &[],
    );
    let text: Vec<String> = r.problems.iter().map(ToString::to_string).collect();
    assert!(text[0].contains("rules[0]") && text[0].contains("several API groups"), "{text:?}");
    assert!(text[1].contains("rules[1]") && text[1].contains("\"gizmos\""), "{text:?}");
    assert!(text[2].contains("cluster-scoped") && text[2].contains("ClusterWatchRule"), "{text:?}");
    assert!(text[3].contains("subresource"), "{text:?}");
    assert!(text[4].contains("not served at versions"), "{text:?}");
    assert_eq!(r.types.iter().map(WatchedType::key).collect::<Vec<_>>(), ["v1/configmaps"]);
    // The rule's own account, for its ResourcesResolved condition.
    assert_eq!(r.rules.len(), 1);
    assert_eq!((r.rules[0].kind, r.rules[0].name.as_str()), (RuleKind::WatchRule, "r"));
    assert_eq!(r.rules[0].types, ["v1/configmaps"]);
    assert_eq!(r.rules[0].problems.len(), 5);
    assert!(r.rules[0].problems[1].starts_with("rules[1]: ") && r.rules[0].problems[1].contains("gizmos"));
}

#[test]
fn other_namespaces_need_the_targets_policy_which_is_then_exhaustive() {
    let rules = [wr("mirror", json!([{"resources": ["configmaps"], "sourceNamespace": "shop"}]))];
    let r = run(&target(), &rules, &[]);
    assert!(r.types.is_empty() && r.problems.is_empty(), "{r:?}");
    assert!(r.sources[0].message.contains("declares no"), "{:?}", r.sources);
    // Refused: listed, watching nothing.
    assert_eq!(r.rules.len(), 1);
    assert!(r.rules[0].types.is_empty());
    assert_eq!(r.source("mirror", "r"), Some(&r.sources[0]));
    let mut t = target();
    t.allowed_source_namespaces = Some(AllowedSourceNamespaces { names: vec!["shop".into()], selector: None });
    let r = run(&t, &rules, &[]);
    assert_eq!(r.problems, vec![]);
    assert_eq!(r.types[0].watches(), vec![WatchScope::Namespace("shop".into())]);
    // Once declared, the policy binds the rule's own namespace too.
    let own = run(&t, &[wr("mirror", json!([{"resources": ["configmaps"]}]))], &[]);
    assert!(own.types.is_empty(), "{own:?}");
    assert!(own.sources[0].message.contains("binds the WatchRule's own namespace"), "{:?}", own.sources);
}

#[test]
fn a_star_expands_to_what_the_policy_admits() {
    let rules = [wr("mirror", json!([{"resources": ["configmaps"], "sourceNamespace": "*"}]))];
    assert!(run(&target(), &rules, &[]).refused().next().unwrap().message.contains("declares no"));
    let mut t = target();
    let sel: LabelSelector = serde_json::from_value(json!({"matchLabels": {"mirror": "yes"}})).unwrap();
    t.allowed_source_namespaces = Some(AllowedSourceNamespaces { names: vec!["ops".into()], selector: Some(sel) });
    let r = run(&t, &rules, &[]);
    assert_eq!(r.types[0].watches(), vec![WatchScope::Namespace("ops".into()), WatchScope::Namespace("shop".into())]);
    t.allowed_source_namespaces =
        Some(AllowedSourceNamespaces { names: vec![], selector: Some(LabelSelector::default()) });
    assert_eq!(run(&t, &rules, &[]).types[0].watches(), vec![WatchScope::Everywhere]);
}

#[test]
fn cluster_rules_watch_cluster_scoped_types_of_their_target_only() {
    let cr = |target_ns: &str, resources: serde_json::Value| -> ClusterWatchRule {
        serde_json::from_value(json!({"metadata": {"name": "c"},
            "spec": {"targetRef": {"name": "prod", "namespace": target_ns}, "rules": [{"resources": resources}]}}))
        .unwrap()
    };
    let r =
        run(&target(), &[], &[cr("mirror", json!(["namespaces", "configmaps"])), cr("elsewhere", json!(["secrets"]))]);
    assert_eq!(r.types.iter().map(WatchedType::key).collect::<Vec<_>>(), ["v1/namespaces"]);
    assert_eq!(r.types[0].watches(), vec![WatchScope::Everywhere]);
    assert!(r.problems[0].message.contains("namespaced") && r.problems[0].message.contains("WatchRule"));
}

#[test]
fn rules_merge_per_type_and_a_watch_everywhere_covers_every_namespace() {
    let mut t = target();
    t.allowed_source_namespaces =
        Some(AllowedSourceNamespaces { names: vec!["mirror".into(), "shop".into()], selector: None });
    let r = run(
        &t,
        &[wr(
            "mirror",
            json!([{"resources": ["configmaps"], "operations": ["CREATE"]},
                                {"resources": ["configmaps"], "sourceNamespace": "shop", "operations": ["DELETE"]}]),
        )],
        &[],
    );
    let cm = &r.types[0];
    assert_eq!(cm.watches().len(), 2);
    assert!(cm.operations_for("mirror").create && !cm.operations_for("mirror").delete);
    assert!(cm.operations_for("shop").delete && !cm.operations_for("shop").create);
}

#[test]
fn resource_flags_resolve_like_kubectl_types() {
    let flags: Vec<String> =
        ["configmaps", "deployments.apps", "namespaces", "widgets", "gizmos"].map(String::from).to_vec();
    let r = from_flags(&flags, Some("shop"), &discovery());
    assert_eq!(
        r.types.iter().map(|t| (t.key(), t.watches())).collect::<Vec<_>>(),
        vec![
            ("v1/configmaps".to_owned(), vec![WatchScope::Namespace("shop".into())]),
            ("v1/namespaces".to_owned(), vec![WatchScope::Everywhere]),
            ("apps/v1/deployments".to_owned(), vec![WatchScope::Namespace("shop".into())]),
        ]
    );
    let text: Vec<String> = r.problems.iter().map(ToString::to_string).collect();
    assert!(text[0].starts_with("--resource widgets") && text[0].contains("several API groups"), "{text:?}");
    assert!(text[1].starts_with("--resource gizmos"), "{text:?}");
    let everywhere = from_flags(&["configmaps".to_owned()], None, &discovery());
    assert_eq!(everywhere.types[0].watches(), vec![WatchScope::Everywhere]);
}

#[test]
fn a_mistyped_resource_names_its_close_matches() {
    let flags: Vec<String> = ["configmap", "confgimaps", "deploymnets.apps", "gizmos"].map(String::from).to_vec();
    let r = from_flags(&flags, None, &discovery());
    assert!(r.types.is_empty(), "{:?}", r.types);
    let text: Vec<String> = r.problems.iter().map(ToString::to_string).collect();
    assert!(text[0].contains("did you mean configmaps?"), "{text:?}");
    assert!(text[1].contains("did you mean configmaps?"), "{text:?}");
    assert!(text[2].contains("did you mean deployments.apps?"), "{text:?}");
    assert!(!text[3].contains("did you mean"), "{text:?}");
}

#[test]
fn a_wildcard_leaves_out_the_reference_exclusions_but_a_named_type_is_watched() {
    // resource_policy.go:14-31: `*` never reaches Pods, Events, Leases, …
    let mut served = discovery();
    served.extend([
        served_type("", "v1", "pods", true),
        served_type("", "v1", "events", true),
        served_type("events.k8s.io", "v1", "events", true),
        served_type("coordination.k8s.io", "v1", "leases", true),
        served_type("batch", "v1", "jobs", true),
    ]);
    let rules = [wr("mirror", json!([{"apiGroups": ["*"], "resources": ["*"]}]))];
    let r = resolve_with(&target(), None, &rules, &[], &served);
    let keys: Vec<String> = r.types.iter().map(WatchedType::key).collect();
    for gone in ["v1/pods", "v1/events", "events.k8s.io/v1/events", "coordination.k8s.io/v1/leases", "batch/v1/jobs"] {
        assert!(!keys.contains(&gone.to_owned()), "{gone} in {keys:?}");
    }
    assert!(keys.contains(&"v1/configmaps".to_owned()), "{keys:?}");

    // Named, it is a choice: watched.
    let rules = [wr("mirror", json!([{"apiGroups": ["", "coordination.k8s.io"], "resources": ["pods", "leases"]}]))];
    let r = resolve_with(&target(), None, &rules, &[], &served);
    let keys: Vec<String> = r.types.iter().map(WatchedType::key).collect();
    assert_eq!(keys, ["v1/pods", "coordination.k8s.io/v1/leases"]);
    assert_eq!(r.problems, vec![]);
}

fn served_type(group: &str, version: &str, resource: &str, namespaced: bool) -> Served {
    served(group, version, resource, namespaced, true)
}

#[test]
fn a_rule_the_source_namespace_gate_refuses_watches_nothing_and_its_refusal_is_kept() {
    // The escalation gitops-reverser refuses (source_namespace.go:389-398):
    // the tenant's own GitTarget admits "shop", but no ClusterProvider
    // delegates the choice. The whole rule is dropped, its own-namespace
    // item included (watchrule_types.go:124-126); another rule is not.
    let mut t = target();
    t.allowed_source_namespaces =
        Some(AllowedSourceNamespaces { names: vec!["mirror".into(), "shop".into()], selector: None });
    let mut other = wr("mirror", json!([{"resources": ["deployments"]}]));
    other.metadata.name = "apps".into();
    let rules = [
        wr("mirror", json!([{"resources": ["configmaps"]}, {"resources": ["secrets"], "sourceNamespace": "shop"}])),
        other,
    ];
    let undelegated = ClusterProviderSpec { allow_source_namespace_override: false, ..delegating() };
    for provider in [None, Some(&undelegated)] {
        let r = resolve_with(&t, provider, &rules, &[], &discovery());
        assert_eq!(r.types.iter().map(WatchedType::key).collect::<Vec<_>>(), ["apps/v1/deployments"], "{provider:?}");
        let refused: Vec<&SourceVerdict> = r.refused().collect();
        assert_eq!(refused.len(), 1, "{r:?}");
        assert_eq!((refused[0].namespace.as_str(), refused[0].name.as_str()), ("mirror", "r"));
        assert_eq!(refused[0].reason, Reason::SourceNamespaceNotAllowed);
        assert!(refused[0].message.contains("spec.rules[1]"), "{}", refused[0].message);
        assert!(r.sources.iter().any(|v| v.name == "apps" && v.authorized), "{:?}", r.sources);
    }
    let r = resolve_with(&t, Some(&delegating()), &rules, &[], &discovery());
    assert_eq!(r.refused().count(), 0, "{:?}", r.sources);
    assert_eq!(r.get("", "v1", "secrets").unwrap().watches(), vec![WatchScope::Namespace("shop".into())]);
}
