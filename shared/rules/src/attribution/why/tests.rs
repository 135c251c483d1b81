use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIResource, APIResourceList};

use super::cause::{Cause, FOLLOWER_STALE_SECS, unresolved_causes};
use super::history::{rfc3339, trailers};
use super::*;
use crate::Error;

use crate::attribution::Tier;

fn api_resource(name: &str, kind: &str, singular: &str, short: &[&str]) -> APIResource {
    APIResource {
        name: name.into(),
        kind: kind.into(),
        singular_name: singular.into(),
        short_names: (!short.is_empty()).then(|| short.iter().map(|s| s.to_string()).collect()),
        namespaced: true,
        verbs: vec!["get".into()],
        ..APIResource::default()
    }
}

fn served() -> Vec<ApiResource> {
    let core = APIResourceList {
        group_version: "v1".into(),
        resources: vec![
            api_resource("configmaps", "ConfigMap", "configmap", &["cm"]),
            api_resource("pods", "Pod", "pod", &["po"]),
            api_resource("pods/log", "Pod", "", &[]),
            api_resource("events", "Event", "event", &["ev"]),
        ],
    };
    let apps = APIResourceList {
        group_version: "apps/v1".into(),
        resources: vec![api_resource("deployments", "Deployment", "deployment", &["deploy"])],
    };
    let events = APIResourceList {
        group_version: "events.k8s.io/v1".into(),
        resources: vec![api_resource("events", "Event", "event", &["ev"])],
    };
    // A group listed before the core one, to show the core group still wins.
    [resources_of(&events), resources_of(&core), resources_of(&apps)].concat()
}

#[test]
fn a_type_resolves_by_plural_singular_short_name_kind_and_group() {
    let s = served();
    assert!(resolve_type("configmaps.", &s).is_err());
    for input in ["configmaps", "configmap", "cm", "ConfigMap", "CONFIGMAP"] {
        assert_eq!(resolve_type(input, &s).unwrap().resource, "configmaps", "{input}");
    }
    let d = resolve_type("deploy", &s).unwrap();
    assert_eq!((d.group.as_str(), d.version.as_str(), d.kind.as_str()), ("apps", "v1", "Deployment"));
    assert_eq!(resolve_type("deployments.apps", &s).unwrap().resource, "deployments");
    assert_eq!(resolve_type("deployments.v1.apps", &s).unwrap().resource, "deployments");
    // Served by two groups: the core one wins unqualified, the group pins it.
    assert_eq!(resolve_type("events", &s).unwrap().group, "");
    assert_eq!(resolve_type("ev.events.k8s.io", &s).unwrap().group, "events.k8s.io");
    // Subresources are not types.
    assert!(matches!(resolve_type("pods/log", &s), Err(Error::WhyUnknownType { .. })));
    let err = resolve_type("widgets", &s).unwrap_err();
    assert!(err.to_string().contains("\"widgets\"") && err.to_string().contains("api-resources"), "{err}");
    assert!(resolve_type("deployments.extensions", &s).is_err());
}

#[test]
fn object_paths_follow_the_api_layout() {
    let s = served();
    assert_eq!(resolve_type("cm", &s).unwrap().object_path("ns", "x"), "/api/v1/namespaces/ns/configmaps/x");
    assert_eq!(resolve_type("deploy", &s).unwrap().object_path("ns", "x"), "/apis/apps/v1/namespaces/ns/deployments/x");
    let mut cluster = resolve_type("deploy", &s).unwrap().clone();
    cluster.namespaced = false;
    assert_eq!(cluster.object_path("ns", "x"), "/apis/apps/v1/deployments/x");
}

#[test]
fn trailers_are_the_last_paragraph_of_key_value_lines() {
    let msg = "update core/v1/x\n\n- update x (tier exact)\n\nReverser-Actor: alice\nReverser-Tier: exact\nReverser-Audit-ID: a-1\n";
    assert_eq!(
        trailers(msg),
        vec![
            ("Reverser-Actor".into(), "alice".into()),
            ("Reverser-Tier".into(), "exact".into()),
            ("Reverser-Audit-ID".into(), "a-1".into())
        ]
    );
    // A prose last paragraph has no trailers.
    assert!(trailers("subject\n\nThis is: not a trailer block\nbecause of this line\n").is_empty());
}

#[test]
fn rfc3339_renders_utc_civil_time() {
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(rfc3339(1_790_000_000), "2026-09-21T14:13:20Z");
}

fn bare(facts_for_type: u64, following: bool, last: f64) -> Explanation {
    Explanation {
        winner_tier: Tier::Absent,
        settled: true,
        candidates: Vec::new(),
        route: None,
        following,
        follower_last_success: last,
        facts_for_type,
        grace: None,
    }
}

#[test]
fn the_cause_that_fits_an_unresolved_attribution() {
    let now = now_secs();
    let c = |e: &Explanation, fed| unresolved_causes(e, "lab", "configmaps", fed, now);
    assert_eq!(
        c(&bare(0, false, now), None),
        vec![Cause::FollowerNotReading { following: false, seconds_since_last_read: Some(0.0) }]
    );
    assert_eq!(
        c(&bare(5, true, 0.0), None),
        vec![Cause::FollowerNotReading { following: true, seconds_since_last_read: None }]
    );
    let stale = c(&bare(5, true, now - FOLLOWER_STALE_SECS - 5.0), Some(true));
    assert!(
        matches!(stale[..], [Cause::FollowerNotReading { seconds_since_last_read: Some(s), .. }] if s > FOLLOWER_STALE_SECS)
    );
    assert_eq!(c(&bare(0, true, now), Some(false)), vec![Cause::RouteNeverResolved { route: "lab".into() }]);
    assert_eq!(c(&bare(0, true, now), Some(true)), vec![Cause::AuditPolicyDropsType { resource: "configmaps".into() }]);
    // Nothing shows a fact ever arrived on the route: the route alone, never
    // beside "facts arrive on the route" (issue 29).
    assert_eq!(c(&bare(0, true, now), None), vec![Cause::RouteNeverResolved { route: "lab".into() }]);
    assert_eq!(c(&bare(3, true, now), Some(true)), vec![Cause::NoFactForObject { facts_for_type: 3 }]);
    for cause in c(&bare(0, true, now), None) {
        assert!(!cause.summary().is_empty() && !cause.check().is_empty());
    }
}

#[test]
fn a_skipped_grace_is_named_beside_the_cause_that_fits() {
    use crate::attribution::grace::GraceView;
    let now = now_secs();
    let mut e = bare(0, true, now);
    e.grace = Some(GraceView { misses_in_a_row: 12, after_misses: 10, skipping: true });
    let causes = unresolved_causes(&e, "lab", "configmaps", Some(false), now);
    assert_eq!(
        causes,
        vec![
            Cause::RouteNeverResolved { route: "lab".into() },
            Cause::GraceSkipped { misses_in_a_row: 12, after_misses: 10 }
        ]
    );
    assert!(causes[1].summary().contains("12 resolutions in a row"), "{}", causes[1].summary());
    e.grace = Some(GraceView { misses_in_a_row: 3, after_misses: 10, skipping: false });
    assert_eq!(unresolved_causes(&e, "lab", "configmaps", Some(false), now).len(), 1, "not skipping: not a cause");
}

#[test]
fn explain_params_carry_the_object_to_a_query() {
    let p = ExplainParams {
        route: "a:b".into(),
        resource: "configmaps".into(),
        name: "web".into(),
        labels: "app=web,tier=".into(),
        removal: true,
        ..ExplainParams::default()
    };
    let q = p.query(5);
    assert_eq!(q.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(q.labels.get("tier").map(String::as_str), Some(""));
    assert!(q.removal);
    assert!(p.to_query_string().contains("route=a%3Ab"), "{}", p.to_query_string());
    assert!(p.to_query_string().contains("labels=app%3Dweb%2Ctier%3D"));
    assert!(ExplainParams::default().scope().is_err());
}

#[test]
fn timestamps_survive_a_json_round_trip_exactly() {
    // `GET /v1/explain` must carry exactly what gRPC Explain carries, the
    // follower's last-success timestamp included; serde_json parses floats
    // exactly only with its `float_roundtrip` feature (set in the workspace).
    let mut x = 1_795_999_267.476_768_3_f64;
    for _ in 0..100_000 {
        let back: f64 = serde_json::from_str(&serde_json::to_string(&x).unwrap()).unwrap();
        assert_eq!(back.to_bits(), x.to_bits(), "{x}");
        x = f64::from_bits(x.to_bits() + 7919);
    }
}

fn now_secs() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}

#[test]
fn a_sealed_only_file_is_shown_only_when_the_mirror_has_a_commit_of_it() {
    let path = "shop/secrets/db.sops.yaml";
    let commit = HistoryEntry {
        commit: "c0ffee".into(),
        change: FileChange::Create,
        path: path.into(),
        author_name: "alice".into(),
        author_email: String::new(),
        date: String::new(),
        subject: String::new(),
        unresolved: false,
        trailers: vec![],
    };
    assert_eq!(sealed_file("secrets", path, Some(&[commit])), (Some(path.to_owned()), None));
    let (none, why) = sealed_file("secrets", path, Some(&[]));
    assert_eq!(none, None);
    assert!(why.unwrap().starts_with(
        "the mirror has no commit of it; secrets are written only sealed with sops, to shop/secrets/db.sops.yaml"
    ));
    let (none, why) = sealed_file("secrets", path, None);
    assert_eq!(none, None);
    assert!(why.unwrap().starts_with("no mirror was read (pass --repo)"));
}

/// Printed after "how to check:", a check never starts with "check" again
/// (issue 29: "how to check: check that ...").
#[test]
fn no_check_repeats_the_word_check() {
    let causes = [
        Cause::FollowerNotReading { following: false, seconds_since_last_read: None },
        Cause::FollowerNotReading { following: true, seconds_since_last_read: Some(90.0) },
        Cause::RouteNeverResolved { route: "lab".into() },
        Cause::AuditPolicyDropsType { resource: "secrets".into() },
        Cause::AuditPolicyDropsType { resource: "configmaps".into() },
        Cause::NoFactForObject { facts_for_type: 3 },
        Cause::GraceSkipped { misses_in_a_row: 5, after_misses: 5 },
    ];
    for c in causes {
        let check = c.check();
        assert!(!check.to_lowercase().starts_with("check"), "{}: {check}", c.label());
    }
}
