use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::mirror::config::{AllowedSourceNamespaces, LabelSelector};

const TENANT: &str = "tenant";

fn policy(names: &[&str]) -> AllowedSourceNamespaces {
    AllowedSourceNamespaces { names: names.iter().map(|n| n.to_string()).collect(), selector: None }
}

fn selector(labels: Value) -> AllowedSourceNamespaces {
    let sel: LabelSelector = serde_json::from_value(json!({ "matchLabels": labels })).unwrap();
    AllowedSourceNamespaces { names: vec![], selector: Some(sel) }
}

/// A provider that admits the tenant namespace, delegating when `delegate`.
fn provider(delegate: bool) -> ClusterProviderSpec {
    ClusterProviderSpec {
        allowed_namespaces: Some(policy(&[TENANT])),
        allow_source_namespace_override: delegate,
        ..ClusterProviderSpec::default()
    }
}

fn rule(items: Value) -> WatchRule {
    serde_json::from_value(json!({"metadata": {"name": "r", "namespace": TENANT},
        "spec": {"targetRef": {"name": "t"}, "rules": items}}))
    .unwrap()
}

fn one(source_namespace: &str) -> WatchRule {
    if source_namespace.is_empty() {
        rule(json!([{"resources": ["configmaps"]}]))
    } else {
        rule(json!([{"resources": ["configmaps"], "sourceNamespace": source_namespace}]))
    }
}

fn source_namespaces() -> Vec<Namespace> {
    let labelled = |name: &str| Namespace {
        name: name.into(),
        labels: BTreeMap::from([("mirrorable".to_owned(), "true".to_owned())]),
    };
    vec![
        labelled("beta"),
        labelled("alpha"),
        labelled("source"),
        Namespace { name: "plain".into(), ..Default::default() },
    ]
}

fn decide_with(
    target_policy: Option<AllowedSourceNamespaces>,
    provider: Option<&ClusterProviderSpec>,
    labels: &BTreeMap<String, String>,
    rule: &WatchRule,
) -> Decision {
    let target = GitTargetSpec { allowed_source_namespaces: target_policy, ..GitTargetSpec::default() };
    let namespaces = source_namespaces();
    let gate = Gate {
        target_namespace: TENANT,
        target_name: "t",
        target: &target,
        provider: Provider { name: "default", spec: provider, target_namespace_labels: labels },
        namespaces: &namespaces,
    };
    gate.decide(rule)
}

fn decide(target_policy: Option<AllowedSourceNamespaces>, delegate: bool, rule: &WatchRule) -> Decision {
    decide_with(target_policy, Some(&provider(delegate)), &BTreeMap::new(), rule)
}

fn ns(names: &[&str]) -> Vec<WatchScope> {
    names.iter().map(|n| WatchScope::Namespace(n.to_string())).collect()
}

fn authorized(d: &Decision) -> (Reason, Vec<WatchScope>) {
    match d {
        Decision::Authorized { reason, scopes, .. } => (*reason, scopes.concat()),
        Decision::Refused { reason, message } => panic!("refused {reason}: {message}"),
    }
}

fn refused(d: &Decision) -> (Reason, &str) {
    match d {
        Decision::Refused { reason, message } => (*reason, message),
        Decision::Authorized { reason, scopes, .. } => panic!("authorized {reason}: {scopes:?}"),
    }
}

#[test]
fn the_rules_own_namespace_is_free_without_a_target_policy_whatever_the_provider() {
    // source_namespace_test.go:168-183: omitted, or restating the rule's
    // own namespace, with no policy and no flag — and, since the provider is
    // not consulted (source_namespace.go:259-270), no provider at all.
    for sn in ["", TENANT] {
        let d = decide_with(None, None, &BTreeMap::new(), &one(sn));
        assert_eq!(authorized(&d), (Reason::LegacySourceNamespace, ns(&[TENANT])), "{sn:?}");
    }
}

#[test]
fn a_declared_target_policy_binds_the_rules_own_namespace_too() {
    // source_namespace_test.go:184-199: exhaustive, no self-namespace
    // carve-out; the message names the fix for this footgun.
    let d = decide(Some(policy(&["source"])), false, &one(""));
    let (reason, message) = refused(&d);
    assert_eq!(reason, Reason::SourceNamespaceNotAllowed);
    assert!(message.contains("own namespace too") && message.contains("add \"tenant\""), "{message}");
    let d = decide(Some(policy(&[TENANT])), false, &one(""));
    assert_eq!(authorized(&d), (Reason::SourceNamespaceAllowed, ns(&[TENANT])));
}

#[test]
fn another_namespace_needs_the_providers_delegation_and_the_targets_policy() {
    // source_namespace_test.go:200-243.
    let cases: [(Option<AllowedSourceNamespaces>, bool, Option<&str>); 6] = [
        // The escalation: the tenant's own GitTarget names the namespace, but
        // no platform admin delegated the choice.
        (Some(policy(&["source"])), false, Some("allowSourceNamespaceOverride")),
        // Delegated, but the target declares no policy: deny by default.
        (None, true, Some("declares no spec.allowedSourceNamespaces")),
        // Declared but empty is not unrestricted.
        (Some(policy(&[])), true, Some("does not admit \"source\"")),
        (Some(policy(&["someone-else"])), true, Some("does not admit \"source\"")),
        (Some(selector(json!({"mirrorable": "false"}))), true, Some("does not admit")),
        (Some(policy(&["source"])), true, None),
    ];
    for (target_policy, delegate, want) in cases {
        let d = decide(target_policy.clone(), delegate, &one("source"));
        match want {
            Some(fragment) => {
                let (reason, message) = refused(&d);
                assert_eq!(reason, Reason::SourceNamespaceNotAllowed, "{target_policy:?} {delegate}");
                assert!(message.contains(fragment) && message.contains("spec.rules[0]"), "{message}");
            }
            None => assert_eq!(authorized(&d), (Reason::SourceNamespaceAllowed, ns(&["source"]))),
        }
    }
    let d = decide(Some(selector(json!({"mirrorable": "true"}))), true, &one("source"));
    assert_eq!(authorized(&d), (Reason::SourceNamespaceAllowed, ns(&["source"])));
}

#[test]
fn a_missing_or_unadmitting_provider_delegates_nothing() {
    // source_namespace_test.go:466-502; clusterprovider_types.go:71-76
    // (allowedNamespaces deny by default).
    let target_policy = Some(policy(&["source"]));
    let none = BTreeMap::new();
    let d = decide_with(target_policy.clone(), None, &none, &one("source"));
    let (reason, message) = refused(&d);
    assert_eq!(reason, Reason::SourceNamespaceNotAllowed);
    assert!(message.contains("ClusterProvider \"default\" does not exist"), "{message}");

    let no_namespaces = ClusterProviderSpec { allow_source_namespace_override: true, ..Default::default() };
    let d = decide_with(target_policy.clone(), Some(&no_namespaces), &none, &one("source"));
    assert!(refused(&d).1.contains("allowedNamespaces does not admit the GitTarget's namespace"), "{d:?}");

    // The provider's selector matches the GitTarget's namespace's labels.
    let by_label = ClusterProviderSpec {
        allowed_namespaces: Some(selector(json!({"tenant": "trusted"}))),
        allow_source_namespace_override: true,
        ..Default::default()
    };
    let d = decide_with(target_policy.clone(), Some(&by_label), &none, &one("source"));
    assert_eq!(refused(&d).0, Reason::SourceNamespaceNotAllowed);
    let trusted = BTreeMap::from([("tenant".to_owned(), "trusted".to_owned())]);
    let d = decide_with(target_policy, Some(&by_label), &trusted, &one("source"));
    assert_eq!(authorized(&d), (Reason::SourceNamespaceAllowed, ns(&["source"])));
}

#[test]
fn a_star_is_what_the_target_admits_and_needs_the_delegation_like_a_name() {
    // source_namespace_test.go:265-317.
    let star = one("*");
    assert_eq!(refused(&decide(None, true, &star)).0, Reason::SourceNamespaceNotAllowed);
    // Even a policy listing only the rule's own namespace: a later edit
    // would widen it without the platform admin (watchrule_types.go:176-178).
    let d = decide(Some(policy(&[TENANT])), false, &star);
    assert!(refused(&d).1.contains("allowSourceNamespaceOverride"), "{d:?}");
    let d = decide(Some(policy(&["team-payments", "source"])), true, &star);
    assert_eq!(authorized(&d), (Reason::SourceNamespaceAllowed, ns(&["source", "team-payments"])));
    let d = decide(Some(selector(json!({"mirrorable": "true"}))), true, &star);
    assert_eq!(authorized(&d), (Reason::SourceNamespaceAllowed, ns(&["alpha", "beta", "source"])));
    let every = AllowedSourceNamespaces { names: vec![], selector: Some(LabelSelector::default()) };
    assert_eq!(
        authorized(&decide(Some(every), true, &star)),
        (Reason::SourceNamespaceAllowed, vec![WatchScope::Everywhere])
    );
}

#[test]
fn a_star_that_admits_nothing_today_is_authorized_and_says_so() {
    // source_namespace_test.go:403-423: not a refusal, but not silent.
    let d = decide(Some(policy(&[])), true, &one("*"));
    assert_eq!(authorized(&d), (Reason::NoAdmittedSourceNamespaces, vec![]));
    assert!(d.message().contains("mirrors nothing"), "{d:?}");
}

#[test]
fn one_refused_item_refuses_the_whole_rule() {
    // source_namespace_test.go:382-402; watchrule_types.go:124-126.
    let r = rule(json!([{"resources": ["configmaps"], "sourceNamespace": "source"},
                        {"resources": ["secrets"], "sourceNamespace": "elsewhere"}]));
    let d = decide(Some(policy(&[TENANT, "source"])), true, &r);
    let (reason, message) = refused(&d);
    assert_eq!(reason, Reason::SourceNamespaceNotAllowed);
    assert!(message.starts_with("spec.rules[1] (resources secrets, sourceNamespace \"elsewhere\")"), "{message}");
}

#[test]
fn mixed_items_resolve_each_to_their_own_namespaces() {
    // source_namespace_test.go:360-381.
    let r = rule(json!([{"resources": ["configmaps"]}, {"resources": ["secrets"], "sourceNamespace": "source"}]));
    match decide(Some(policy(&[TENANT, "source"])), true, &r) {
        Decision::Authorized { reason, scopes, message } => {
            assert_eq!(reason, Reason::SourceNamespaceAllowed);
            assert_eq!(scopes, vec![ns(&[TENANT]), ns(&["source"])]);
            assert!(message.contains("all 2 rule item(s)"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_name_that_is_no_namespace_makes_the_policy_unavailable_not_narrower() {
    // source_namespace_test.go:572-605: `names: ["*"]` is refused, a valid
    // name beside it does not rescue it, and a legacy rule with no policy
    // is untouched.
    for p in [policy(&["*"]), policy(&["source", "*"])] {
        let d = decide(Some(p), true, &one("*"));
        let (reason, message) = refused(&d);
        assert_eq!(reason, Reason::SourceNamespacePolicyUnavailable);
        assert!(message.contains("selector: {}"), "{message}");
    }
    // A denial outranks an unavailable policy (source_namespace.go:555-561).
    let r = rule(json!([{"resources": ["configmaps"], "sourceNamespace": "source"}]));
    assert_eq!(refused(&decide(Some(policy(&["source", "*"])), false, &r)).0, Reason::SourceNamespaceNotAllowed);
}

#[test]
fn only_an_overriding_item_reads_the_provider() {
    assert!(!needs_provider(&one("")) && !needs_provider(&one(TENANT)));
    assert!(needs_provider(&one("source")) && needs_provider(&one("*")));
    assert!(!needs_provider(&rule(json!([]))));
    assert_eq!(authorized(&decide(None, false, &rule(json!([])))), (Reason::LegacySourceNamespace, vec![]));
}

#[test]
fn reasons_are_spelled_as_the_reference_publishes_them() {
    // source_namespace.go:25-49.
    let all = [
        (Reason::LegacySourceNamespace, "LegacySourceNamespace"),
        (Reason::SourceNamespaceAllowed, "SourceNamespaceAllowed"),
        (Reason::NoAdmittedSourceNamespaces, "NoAdmittedSourceNamespaces"),
        (Reason::SourceNamespaceNotAllowed, "SourceNamespaceNotAllowed"),
        (Reason::SourceNamespacePolicyUnavailable, "SourceNamespacePolicyUnavailable"),
    ];
    for (reason, text) in all {
        assert_eq!(reason.to_string(), text);
    }
    assert_eq!(CONDITION, "SourceNamespaceAuthorized");
}
