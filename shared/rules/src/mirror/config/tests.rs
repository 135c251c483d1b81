use serde_json::json;

use super::*;

#[test]
fn a_full_gittarget_and_provider_parse_with_their_defaults() {
    let target: GitTarget = serde_json::from_value(json!({
        "apiVersion": API_VERSION, "kind": "GitTarget",
        "metadata": {"name": "prod", "namespace": "mirror"},
        "spec": {"providerRef": {"name": "github"}, "branch": "main", "path": "clusters/prod"}
    }))
    .unwrap();
    assert_eq!(target.spec.prune_mode(), PruneMode::OnEvent, "the CRD's default");
    assert_eq!(target.spec.cluster_provider(), "default");
    assert!(target.spec.prune_mode().on_event() && !target.spec.prune_mode().on_reconcile());

    let provider: GitProvider = serde_json::from_value(json!({
        "metadata": {"name": "github", "namespace": "mirror"},
        "spec": {"url": "https://github.com/acme/mirror.git", "allowedBranches": ["main", "release/*"],
                 "commit": {"committer": {"name": "Mirror"}, "message": {"groupTemplate": "{{.Author}}"}},
                 "push": {"commitWindow": "1m30s"}}
    }))
    .unwrap();
    assert_eq!(provider.spec.committer(), Committer { name: "Mirror".into(), email: "noreply@configbutler.ai".into() });
    assert_eq!(provider.spec.commit_window().unwrap(), Duration::from_secs(90));
    assert!(provider.spec.allows_branch("main") && provider.spec.allows_branch("release/1.2"));
    assert!(!provider.spec.allows_branch("dev") && !provider.spec.allows_branch("release"));
    assert_eq!(provider.spec.messages().group_template.as_deref(), Some("{{.Author}}"));
}

#[test]
fn go_durations_parse_and_nonsense_is_refused_with_the_form_to_use() {
    for (s, ms) in [("0s", 0), ("0", 0), ("5s", 5000), ("250ms", 250), ("1h1m1s", 3_661_000), ("1.5s", 1500)] {
        assert_eq!(parse_go_duration(s).unwrap(), Duration::from_millis(ms), "{s}");
    }
    for bad in ["", "5", "-1s", "five seconds", "5x"] {
        assert!(parse_go_duration(bad).unwrap_err().contains("Go's form"), "{bad}");
    }
}

#[test]
fn rules_know_their_target_and_the_audit_route_defaults_to_the_provider_name() {
    let wr: WatchRule = serde_json::from_value(json!({
        "metadata": {"name": "cms", "namespace": "mirror"},
        "spec": {"targetRef": {"name": "prod"}, "rules": [{"resources": ["configmaps"]}]}
    }))
    .unwrap();
    assert!(wr.targets("mirror", "prod") && !wr.targets("other", "prod") && !wr.targets("mirror", "dev"));
    let cr: ClusterWatchRule = serde_json::from_value(json!({
        "metadata": {"name": "crds"},
        "spec": {"targetRef": {"name": "prod", "namespace": "mirror"}, "rules": [{"resources": ["namespaces"]}]}
    }))
    .unwrap();
    assert!(cr.targets("mirror", "prod") && !cr.targets("x", "prod"));
    let mut cp: ClusterProvider = serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
    assert_eq!(cp.audit_route(), "default");
    cp.spec.attribution = Some(AttributionSpec { audit_route: Some("prod-eu-1".into()) });
    assert_eq!(cp.audit_route(), "prod-eu-1");
}

#[test]
fn label_selectors_match_as_the_api_defines() {
    let sel: LabelSelector = serde_json::from_value(json!({
        "matchLabels": {"team": "a"},
        "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "stage"]},
                             {"key": "legacy", "operator": "DoesNotExist"}]
    }))
    .unwrap();
    let labels = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    assert!(sel.matches(&labels(&[("team", "a"), ("env", "prod")])));
    assert!(!sel.matches(&labels(&[("team", "a"), ("env", "dev")])));
    assert!(!sel.matches(&labels(&[("team", "a"), ("env", "prod"), ("legacy", "y")])));
    assert!(LabelSelector::default().is_empty() && LabelSelector::default().matches(&labels(&[])));
}

#[test]
fn the_newer_gittarget_commit_shape_wins_over_the_provider() {
    // gitops-reverser #330/#345 (api/v1alpha3/gittarget_types.go after
    // f0f7b42): spec.commit.window and spec.commit.message on the GitTarget.
    let provider: GitProvider = serde_json::from_value(json!({
        "metadata": {"name": "github"},
        "spec": {"url": "u", "commit": {"message": {"groupTemplate": "provider group", "reconcileTemplate": "provider reconcile"}},
                 "push": {"commitWindow": "10s"}}
    }))
    .unwrap();
    let plain: GitTargetSpec =
        serde_json::from_value(json!({"providerRef": {"name": "github"}, "branch": "main", "path": "p"})).unwrap();
    assert_eq!(
        commit_window(&plain, &provider.spec).unwrap(),
        WindowTimers { silence: Duration::from_secs(10), max_wait: None }
    );
    assert_eq!(commit_messages(&plain, &provider.spec), provider.spec.messages());

    let newer: GitTargetSpec = serde_json::from_value(json!({
        "gitProviderRef": {"name": "github"}, "branch": "main", "path": "p",
        "commit": {"window": {"idleTimeout": "750ms"},
                   "message": {"liveTemplate": "live {{.Count}}", "groupTemplate": "  "}}
    }))
    .unwrap();
    assert_eq!(newer.provider_ref.name, "github", "gitProviderRef is the newer name of providerRef");
    assert_eq!(
        commit_window(&newer, &provider.spec).unwrap(),
        WindowTimers { silence: Duration::from_millis(750), max_wait: Some(DEFAULT_MAX_DURATION) }
    );
    let m = commit_messages(&newer, &provider.spec);
    assert_eq!(m.live_template.as_deref(), Some("live {{.Count}}"));
    assert_eq!(m.group_template.as_deref(), Some("provider group"), "an empty template falls back");
    assert_eq!(m.reconcile_template.as_deref(), Some("provider reconcile"));

    let bad: GitTargetSpec = serde_json::from_value(json!({
        "providerRef": {"name": "github"}, "branch": "main", "path": "p",
        "commit": {"window": {"idleTimeout": "2m", "maxDuration": "1m"}}
    }))
    .unwrap();
    let err = commit_window(&bad, &provider.spec).unwrap_err();
    assert!(err.contains("idleTimeout") && err.contains("maxDuration"), "{err}");
    let typo: GitTargetSpec = serde_json::from_value(json!({
        "providerRef": {"name": "github"}, "branch": "main", "path": "p",
        "commit": {"window": {"maxDuration": "soon"}}
    }))
    .unwrap();
    let err = commit_window(&typo, &provider.spec).unwrap_err();
    assert!(err.contains("spec.commit.window.maxDuration") && err.contains("\"soon\""), "{err}");
}
