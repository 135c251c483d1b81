use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIResource, APIResourceList};
use serde_json::json;

use super::cause::{Cause, FOLLOWER_STALE_SECS, unresolved_causes};
use super::history::{rfc3339, trailers};
use super::*;
use crate::Error;
use crate::attribution::clock::SystemClock;
use crate::attribution::commit::{
    Action, Change, GitWriter, Identity, ResolvedAuthor, UNRESOLVED_AUTHOR_NAME, WriterConfig,
};
use crate::attribution::index::Query;
use crate::attribution::render::{ObjectKey, layout_path};
use crate::attribution::transport::FactBatch;
use crate::attribution::{Engine, EngineConfig, Fact, GroupResource, Scope, Tier};
use crate::metrics::Metrics;

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

fn scope() -> Scope {
    Scope::new("lab", GroupResource::new("", "configmaps"))
}

fn fact(author: &str, verb: &str, uid: &str, rv: &str, audit: &str) -> Fact {
    Fact {
        author: author.into(),
        namespace: "ns".into(),
        name: "web".into(),
        uid: uid.into(),
        resource_version: rv.into(),
        verb: verb.into(),
        audit_id: audit.into(),
        stage_timestamp: "2026-11-29T12:00:00.000000Z".into(),
        ..Fact::default()
    }
}

fn engine_with(facts: Vec<Fact>) -> Engine {
    let e = Engine::new(EngineConfig::default(), Arc::new(SystemClock), Arc::new(Metrics::new()));
    let at_ms = e.clock().now_ms();
    e.apply_batch(FactBatch { scope: scope(), facts, at_ms });
    e
}

fn query(uid: &str, rv: &str, removal: bool) -> Query {
    Query {
        uid: uid.into(),
        resource_version: rv.into(),
        namespace: "ns".into(),
        name: "web".into(),
        removal,
        ..Query::default()
    }
}

fn object(uid: &str, rv: &str) -> ObjectState {
    ObjectState {
        version: "v1".into(),
        resource: "configmaps".into(),
        kind: "ConfigMap".into(),
        namespace: "ns".into(),
        name: "web".into(),
        uid: uid.into(),
        resource_version: rv.into(),
        ..ObjectState::default()
    }
}

fn now_secs() -> f64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64()
}

fn inputs(e: Explanation) -> Inputs {
    Inputs { route: "lab".into(), evidence: Some(e), now_secs: now_secs(), ..Inputs::default() }
}

#[test]
fn an_update_is_authored_by_its_exact_fact_and_the_older_write_loses() {
    let e = engine_with(vec![fact("alice", "create", "u1", "1", "a-1"), fact("bob", "update", "u1", "2", "a-2")]);
    let mut x = Explanation::from_engine(&e, &scope(), &query("u1", "2", false), true);
    x.follower_last_success = now_secs();
    assert_eq!(x.winner_tier, Tier::Exact);
    assert_eq!(x.facts_for_type, 2);
    let r = build_report(object("u1", "2"), inputs(x));
    assert!(r.verdict.resolved);
    assert_eq!(r.verdict.author.as_deref(), Some("bob"));
    assert_eq!((r.verdict.tier, r.verdict.verb.as_str(), r.verdict.audit_id.as_str()), (Tier::Exact, "update", "a-2"));
    assert_eq!(r.verdict.source, Source::Evidence);
    assert!(r.causes.is_empty());
    // bob's update is also the latest pointer: the same fact, not a competitor.
    assert!(r.competing.is_empty(), "{:?}", r.competing);
    // Asked at alice's version, bob's newer write competes on `latest` and
    // loses to the gate an exact-capable event may not pass.
    let x = Explanation::from_engine(&e, &scope(), &query("u1", "1", false), true);
    let r = build_report(object("u1", "1"), inputs(x));
    assert_eq!(r.verdict.author.as_deref(), Some("alice"));
    assert_eq!(r.competing.len(), 1, "{:?}", r.competing);
    assert_eq!((r.competing[0].tier, r.competing[0].author.as_str()), (Tier::Latest, "bob"));
    assert!(r.competing[0].lost_because.contains("exact-capable"), "{:?}", r.competing[0]);
}

#[test]
fn a_finalizer_deletion_is_authored_by_the_deleter_not_the_finalizer_patch() {
    let e = engine_with(vec![
        fact("carol", "delete", "u1", "7", "a-del"),
        fact("system:serviceaccount:kube-system:cleaner", "patch", "u1", "7", "a-patch"),
    ]);
    let x = Explanation::from_engine(&e, &scope(), &query("u1", "7", true), true);
    let mut o = object("u1", "7");
    o.deleting = true;
    let r = build_report(o, inputs(x));
    assert_eq!(r.verdict.author.as_deref(), Some("carol"));
    assert_eq!(r.verdict.tier, Tier::DeleteSticky);
    // The patch is filed under exact and latest: shown once, under exact.
    assert_eq!(r.competing.len(), 1, "{:?}", r.competing);
    let patch = &r.competing[0];
    assert_eq!((patch.tier, patch.author.as_str()), (Tier::Exact, "system:serviceaccount:kube-system:cleaner"));
    assert!(patch.lost_because.contains("delete_sticky"), "{patch:?}");
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
    assert_eq!(c(&bare(0, true, now), None).len(), 2);
    assert_eq!(c(&bare(3, true, now), Some(true)), vec![Cause::NoFactForObject { facts_for_type: 3 }]);
    for cause in c(&bare(0, true, now), None) {
        assert!(!cause.summary().is_empty() && !cause.check().is_empty());
    }
}

#[test]
fn the_route_health_tells_whether_the_route_was_ever_fed() {
    let mut e = bare(0, true, now_secs());
    assert_eq!(e.route_ever_fed(), None);
    e.route = Some(RouteHealthView { ever_resolved: false, unresolved_in_a_row: 6, misrouted: true });
    assert_eq!(e.route_ever_fed(), Some(false));
    let r = build_report(object("u1", "1"), inputs(e.clone()));
    assert!(!r.verdict.resolved);
    assert_eq!(r.causes.iter().map(|c| c.cause).collect::<Vec<_>>(), vec!["route_never_resolved"]);
    e.route = Some(RouteHealthView { ever_resolved: true, unresolved_in_a_row: 1, misrouted: false });
    let r = build_report(object("u1", "1"), inputs(e));
    assert_eq!(r.causes.iter().map(|c| c.cause).collect::<Vec<_>>(), vec!["audit_policy_drops_type"]);
}

#[test]
fn explanations_survive_the_grpc_shape_and_json() {
    let e = engine_with(vec![fact("alice", "create", "u1", "1", "a-1")]);
    let x = Explanation::from_engine(&e, &scope(), &query("u1", "1", false), false);
    let back = Explanation::try_from(crate::proto::ExplainResponse::from(&x)).unwrap();
    assert_eq!(back, x);
    let json = serde_json::to_value(&x).unwrap();
    assert_eq!(json["winnerTier"], "exact");
    assert_eq!(json["candidates"][0]["fact"]["auditID"], "a-1");
    assert_eq!(serde_json::from_value::<Explanation>(json).unwrap(), x);
    let mut bad = crate::proto::ExplainResponse::from(&x);
    bad.winner_tier = "psychic".into();
    assert!(Explanation::try_from(bad).is_err());
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
    assert_eq!(p.to_proto().labels.len(), 2);
    assert!(ExplainParams::default().scope().is_err());
}

fn key() -> ObjectKey {
    ObjectKey {
        group: String::new(),
        version: "v1".into(),
        resource: "configmaps".into(),
        namespace: "ns".into(),
        name: "web".into(),
    }
}

fn change(action: Action, author: Option<&str>, tier: Tier, audit: Option<&str>) -> Change {
    Change {
        action,
        object: key(),
        author: author.map(|a| ResolvedAuthor {
            username: a.into(),
            display_name: String::new(),
            email: String::new(),
            actor_kind: crate::attribution::ActorKind::of(a),
        }),
        tier,
        audit_id: audit.map(str::to_owned),
        observed_at: SystemTime::now(),
    }
}

#[test]
fn history_reads_the_commits_the_writer_made_newest_first() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("mirror.git");
    let mut w = GitWriter::open(WriterConfig {
        repo_dir: repo.clone(),
        branch: "main".into(),
        committer: Identity::new("reverser", "reverser@example.invalid"),
        remote: None,
    })
    .unwrap();
    // Nothing committed yet: no history, not an error.
    let path = layout_path(&key()).unwrap();
    assert!(read_history(&repo, None, std::slice::from_ref(&path), 10).unwrap().is_empty());
    let cm = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "ns"}, "data": {"k": v}});
    w.commit(&[change(Action::Write(cm("1")), Some("alice"), Tier::Exact, Some("a-1"))]).unwrap();
    w.commit(&[change(Action::Write(cm("2")), None, Tier::Absent, None)]).unwrap();
    w.commit(&[change(Action::Delete, Some("carol"), Tier::DeleteSticky, Some("a-3"))]).unwrap();
    let h = read_history(&repo, None, &[path.clone(), "core/v2/configmaps/ns/web.yaml".into()], 10).unwrap();
    let summary: Vec<_> = h.iter().map(|e| (e.change, e.author_name.as_str(), e.unresolved)).collect();
    assert_eq!(
        summary,
        vec![
            (FileChange::Delete, "carol", false),
            (FileChange::Update, UNRESOLVED_AUTHOR_NAME, true),
            (FileChange::Create, "alice", false),
        ]
    );
    assert_eq!(h[0].trailer("Reverser-Tier"), Some("delete_sticky"));
    assert_eq!(h[0].trailer("Reverser-Audit-ID"), Some("a-3"));
    assert_eq!(h[2].trailer("reverser-actor"), Some("alice"));
    assert_eq!(h[0].path, path);
    assert_eq!(read_history(&repo, Some("main"), std::slice::from_ref(&path), 1).unwrap().len(), 1);
    // A deleted object is answered from the commit that removed its file.
    let mut gone = object("", "");
    gone.deleted = true;
    let r = build_report(gone, Inputs { route: "lab".into(), history: Some(h.clone()), ..Inputs::default() });
    assert_eq!(r.verdict.author.as_deref(), Some("carol"));
    assert_eq!((r.verdict.tier, r.verdict.source), (Tier::DeleteSticky, Source::Git));
    // An existing object whose newest commit is unresolved is unresolved.
    let r = build_report(object("u", "2"), Inputs { history: Some(h[1..].to_vec()), ..Inputs::default() });
    assert!(!r.verdict.resolved);
    assert_eq!(r.verdict.commit.as_deref(), Some(h[1].commit.as_str()));
    assert!(read_history(&repo, Some("nope"), &[path], 1).is_err());
    assert!(read_history(&tmp.path().join("nope"), None, &[], 1).is_err());
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
