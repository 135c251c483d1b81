use super::ConditionStatus::{False, True, Unknown};
use super::*;
use crate::mirror::source_namespace::Reason;
use crate::mirror::status::{ProviderCheck, ProviderView, Streams, TargetObservation, git_provider, git_target, ready};

fn get<'a>(c: &'a [Condition], t: &str) -> &'a Condition {
    c.iter().find(|c| c.type_ == t).unwrap_or_else(|| panic!("no {t} in {c:?}"))
}

/// The conditions of a healthy GitTarget, as `status::git_target` writes them.
fn healthy_target() -> Vec<Condition> {
    let p = git_provider("shop", "u", 1, &ProviderCheck::Ok, &[], "t0");
    let view = ProviderView {
        name: "gp".into(),
        allowed_branches: vec!["main".into()],
        branch_allowed: true,
        ready: ready(&p.conditions).cloned(),
    };
    let obs = TargetObservation {
        namespace: "shop".into(),
        branch: "main".into(),
        generation: 1,
        provider: Some(view),
        provider_ref: "gp".into(),
        streams: Streams { total: 1, ready: 1, ..Streams::default() },
        cluster_provider: Default::default(),
        remote: false,
        discovery: crate::mirror::source_cluster::Discovery::Answered,
        admission: None,
        encryption: crate::mirror::encryption::EncryptionCheck::NotRequired,
        git_path_refused: None,
    };
    git_target(&obs, &[], "t0").conditions
}

fn verdict(authorized: bool, reason: Reason, message: &str) -> SourceVerdict {
    SourceVerdict { namespace: "shop".into(), name: "r".into(), authorized, reason, message: message.into() }
}

fn observe<'a>(
    kind: RuleKind,
    target: &'a [Condition],
    source: Option<&'a SourceVerdict>,
    resolution: Resolution,
    streams: &'a [(String, StreamState)],
) -> RuleObservation<'a> {
    RuleObservation {
        kind,
        generation: 4,
        target_namespace: "shop",
        target_name: "lab",
        target,
        source,
        resolution,
        streams,
    }
}

fn streaming() -> Vec<(String, StreamState)> {
    vec![("v1/configmaps".into(), StreamState::Streaming)]
}

fn one_type() -> Resolution {
    Resolution::Resolved { types: 1, problems: vec![] }
}

#[test]
fn a_resolved_admitted_streaming_rule_is_ready_with_the_references_message() {
    // watchrule_controller.go:215-220, stream_readiness.go:307-308.
    let target = healthy_target();
    let src = verdict(true, Reason::LegacySourceNamespace, "own namespace");
    let st = rule(&observe(RuleKind::WatchRule, &target, Some(&src), one_type(), &streaming()), &[], "t0");
    let r = get(&st.conditions, READY);
    assert_eq!((r.status, r.reason.as_str()), (True, SUCCEEDED));
    assert_eq!(r.message, "WatchRule is ready and monitoring resources via GitTarget 'shop/lab'");
    assert_eq!(get(&st.conditions, STALLED).message, "WatchRule is not stalled");
    assert_eq!(get(&st.conditions, RESOURCES_RESOLVED).reason, RESOLVED);
    assert_eq!(get(&st.conditions, RESOURCES_RESOLVED).message, "watching 1 resource type(s)");
    assert_eq!(get(&st.conditions, STREAMS_RUNNING).reason, ALL_STREAMS_READY);
    assert_eq!(get(&st.conditions, STREAMS_RUNNING).message, "1/1 streams running");
    assert_eq!(get(&st.conditions, GIT_TARGET_READY).message, "GitTarget shop/lab is ready");
    assert_eq!(get(&st.conditions, SOURCE_NAMESPACE_AUTHORIZED).reason, "LegacySourceNamespace");
    assert!(st.conditions.iter().all(|c| c.observed_generation == 4));
    assert_eq!(st.streams.as_ref().map(|s| s.summary.as_str()), Some("1/1"));
}

#[test]
fn a_refused_rule_is_stalled_with_the_gates_reason_and_runs_no_streams() {
    // watchrule_source_namespace.go:169-185: SourceNamespaceAuthorized and
    // StreamsRunning False with the gate's reason, stalled with its message.
    let target = healthy_target();
    let src = verdict(false, Reason::SourceNamespaceNotAllowed, "ClusterProvider \"default\" does not exist");
    let st = rule(&observe(RuleKind::WatchRule, &target, Some(&src), one_type(), &streaming()), &[], "t0");
    let sna = get(&st.conditions, SOURCE_NAMESPACE_AUTHORIZED);
    assert_eq!((sna.status, sna.reason.as_str()), (False, "SourceNamespaceNotAllowed"));
    let r = get(&st.conditions, READY);
    assert_eq!((r.status, r.reason.as_str()), (False, "SourceNamespaceNotAllowed"));
    assert_eq!(r.message, src.message);
    assert_eq!(get(&st.conditions, STALLED).status, True);
    assert_eq!(get(&st.conditions, RECONCILING).status, False);
    let s = get(&st.conditions, STREAMS_RUNNING);
    assert_eq!(
        (s.status, s.message.as_str()),
        (False, "No streams: the rule's source-namespace scope is not authorized")
    );
    assert!(st.conditions.iter().all(|c| c.type_ != RESOURCES_RESOLVED));
    assert_eq!(st.streams, None);
}

#[test]
fn an_item_naming_no_served_type_stalls_on_resources_resolved() {
    let target = healthy_target();
    let res =
        Resolution::Resolved { types: 0, problems: vec!["rules[0]: no served resource matches \"wigdets\"".into()] };
    let st = rule(&observe(RuleKind::ClusterWatchRule, &target, None, res, &[]), &[], "t0");
    let rr = get(&st.conditions, RESOURCES_RESOLVED);
    assert_eq!((rr.status, rr.reason.as_str()), (False, UNRESOLVED_RESOURCES));
    assert!(rr.message.contains("wigdets"), "{}", rr.message);
    let r = get(&st.conditions, READY);
    assert_eq!((r.status, r.reason.as_str()), (False, UNRESOLVED_RESOURCES));
    assert_eq!(get(&st.conditions, STALLED).status, True);
    // A ClusterWatchRule carries no source-namespace condition (stream_status.go:42-48).
    assert!(st.conditions.iter().all(|c| c.type_ != SOURCE_NAMESPACE_AUTHORIZED));
    assert_eq!(get(&st.conditions, STREAMS_RUNNING).reason, NO_RESOLVED_TYPES);
}

#[test]
fn discovery_not_answered_is_the_references_catalog_not_ready() {
    // manager_catalog.go:431-433.
    let target = healthy_target();
    let st = rule(&observe(RuleKind::WatchRule, &target, None, Resolution::CatalogNotReady, &[]), &[], "t0");
    assert_eq!(get(&st.conditions, RESOURCES_RESOLVED).message, "API resource catalog is not ready");
}

#[test]
fn streams_not_listed_yet_keep_the_rule_progressing_and_a_403_stalls_it() {
    let target = healthy_target();
    let src = verdict(true, Reason::LegacySourceNamespace, "own");
    let types = vec![
        ("v1/configmaps".to_owned(), StreamState::Streaming),
        ("apps/v1/deployments".to_owned(), StreamState::Replaying),
    ];
    let st = rule(
        &observe(RuleKind::WatchRule, &target, Some(&src), Resolution::Resolved { types: 2, problems: vec![] }, &types),
        &[],
        "t0",
    );
    let r = get(&st.conditions, READY);
    assert_eq!((r.status, r.reason.as_str()), (False, REPLAYING));
    assert_eq!(r.message, "1/2 streams running; 1 replaying (apps/v1/deployments)");
    assert_eq!(get(&st.conditions, RECONCILING).status, True);
    assert_eq!(st.streams.as_ref().unwrap().pending_sample, vec!["apps/v1/deployments".to_owned()]);

    let types = vec![("v1/secrets".to_owned(), StreamState::Blocked { not_permitted: true })];
    let st = rule(&observe(RuleKind::WatchRule, &target, Some(&src), one_type(), &types), &[], "t0");
    let r = get(&st.conditions, READY);
    assert_eq!((r.status, r.reason.as_str()), (False, WATCH_NOT_PERMITTED));
    assert_eq!(get(&st.conditions, STALLED).status, True);
}

#[test]
fn a_type_watched_in_several_scopes_counts_once_at_its_worst() {
    // stream_readiness.go:222-238.
    let s = rule_streams(&[
        ("v1/configmaps".into(), StreamState::Streaming),
        ("v1/configmaps".into(), StreamState::Blocked { not_permitted: false }),
        ("v1/secrets".into(), StreamState::Streaming),
    ]);
    assert_eq!((s.total, s.ready, s.blocked, s.summary.as_str()), (2, 1, 1, "1/2"));
    assert_eq!(s.reason, WATCH_ERROR);
    assert_eq!(s.message, "1/2 streams running; 1 blocked (v1/configmaps)");
}

#[test]
fn the_gittarget_projection_follows_its_ready_then_stalled_then_reconciling() {
    // gittarget_dependency_status.go:13-45.
    assert_eq!(git_target_ready("shop", "lab", &[]).status, Unknown);
    assert_eq!(git_target_ready("shop", "lab", &[]).message, "Waiting for GitTarget shop/lab to publish Ready");
    let mut missing = healthy_target();
    for c in &mut missing {
        if c.type_ == READY || c.type_ == STALLED {
            c.status = if c.type_ == READY { False } else { True };
            c.reason = "ProviderNotFound".into();
            c.message = "Referenced GitProvider 'shop/gp' not found".into();
        }
    }
    let v = git_target_ready("shop", "lab", &missing);
    assert_eq!((v.status, v.reason.as_str()), (False, "ProviderNotFound"));
    // ProviderNotFound stalls the rule (stream_status.go gitTargetReadyReasonIsStalled).
    let src = verdict(true, Reason::LegacySourceNamespace, "own");
    let st = rule(&observe(RuleKind::WatchRule, &missing, Some(&src), one_type(), &streaming()), &[], "t0");
    assert_eq!(get(&st.conditions, STALLED).status, True);
    assert_eq!(get(&st.conditions, READY).reason, "ProviderNotFound");
}

#[test]
fn an_unchanged_rule_keeps_its_transition_times() {
    let target = healthy_target();
    let src = verdict(true, Reason::LegacySourceNamespace, "own");
    let first = rule(&observe(RuleKind::WatchRule, &target, Some(&src), one_type(), &streaming()), &[], "t0");
    let again =
        rule(&observe(RuleKind::WatchRule, &target, Some(&src), one_type(), &streaming()), &first.conditions, "t1");
    assert_eq!(first, again);
}

#[test]
fn a_clusterprovider_without_kubeconfig_is_validated_in_cluster() {
    // clusterprovider_controller.go:113-140.
    let st = cluster_provider(2, &KubeConfigCheck::InCluster, &[], "t0");
    let v = get(&st.conditions, VALIDATED);
    assert_eq!((v.status, v.reason.as_str()), (True, IN_CLUSTER));
    let r = get(&st.conditions, READY);
    assert_eq!((r.status, r.reason.as_str(), r.message.as_str()), (True, SUCCEEDED, v.message.as_str()));
    assert_eq!(st.observed_generation, 2);
    let refused = Refusal { reason: "KubeConfigExecNotAllowed", message: "exec".into() };
    let bad = cluster_provider(3, &KubeConfigCheck::Refused(refused), &st.conditions, "t1");
    assert_eq!(get(&bad.conditions, READY).status, False);
    let stalled = get(&bad.conditions, STALLED);
    assert_eq!((stalled.status, stalled.reason.as_str()), (True, "KubeConfigExecNotAllowed"));
    assert_eq!(get(&bad.conditions, VALIDATED).last_transition_time, "t1");
    // clusterprovider_controller.go:235: a remote whose Secret passes.
    let good = cluster_provider(3, &KubeConfigCheck::Validated("mirror/remote".into()), &bad.conditions, "t2");
    let v = get(&good.conditions, VALIDATED);
    assert_eq!((v.status, v.reason.as_str()), (True, VALIDATED));
    assert_eq!(v.message, "kubeconfig Secret mirror/remote validated");
}
