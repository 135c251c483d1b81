//! `why`'s evidence from a real engine, over the socket API's shape, and
//! the history the Git writer leaves behind.

use std::sync::Arc;
use std::time::SystemTime;

use rules::attribution::index::Query;
use rules::attribution::render::{ObjectKey, layout_path};
use rules::attribution::why::*;
use rules::attribution::{ActorKind, Fact, GroupResource, Scope, Tier};
use serde_json::json;

use super::*;
use crate::attribution::clock::SystemClock;
use crate::attribution::commit::{
    Action, Change, GitWriter, Identity, ResolvedAuthor, UNRESOLVED_AUTHOR_NAME, WriterConfig,
};
use crate::attribution::transport::FactBatch;
use crate::attribution::{Engine, EngineConfig};
use crate::metrics::Metrics;
use crate::proto;

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
    let mut x = e.explanation(&scope(), &query("u1", "2", false), true);
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
    let x = e.explanation(&scope(), &query("u1", "1", false), true);
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
    let x = e.explanation(&scope(), &query("u1", "7", true), true);
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
        grace: None,
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
    let x = e.explanation(&scope(), &query("u1", "1", false), false);
    let back = Explanation::try_from(proto::ExplainResponse::from(&x)).unwrap();
    assert_eq!(back, x);
    let json = serde_json::to_value(&x).unwrap();
    assert_eq!(json["winnerTier"], "exact");
    assert_eq!(json["candidates"][0]["fact"]["auditID"], "a-1");
    assert_eq!(serde_json::from_value::<Explanation>(json).unwrap(), x);
    let mut bad = proto::ExplainResponse::from(&x);
    bad.winner_tier = "psychic".into();
    assert!(Explanation::try_from(bad).is_err());
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
            actor_kind: ActorKind::of(a),
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
    let mut w =
        GitWriter::open(WriterConfig::new(repo.clone(), "main", Identity::new("reverser", "reverser@example.invalid")))
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
fn explain_params_become_the_grpc_request() {
    let p = ExplainParams { resource: "configmaps".into(), labels: "app=web,tier=".into(), ..ExplainParams::default() };
    assert_eq!(proto::ExplainRequest::from(&p).labels.len(), 2);
}
