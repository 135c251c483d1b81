use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::attribution::clock::TokioClock;
use rules::attribution::grace::AdaptiveGrace;
use rules::attribution::{Fact, GroupResource};

fn scope() -> Scope {
    Scope::new("lab", GroupResource::new("", "configmaps"))
}

fn engine() -> Arc<Engine> {
    engine_with(EngineConfig::default())
}

fn engine_with(config: EngineConfig) -> Arc<Engine> {
    Arc::new(Engine::new(config, Arc::new(TokioClock::starting_now()), Arc::new(Metrics::new())))
}

fn fact(author: &str, verb: &str, uid: &str, rv: &str) -> Fact {
    Fact {
        author: author.into(),
        verb: verb.into(),
        uid: uid.into(),
        resource_version: rv.into(),
        namespace: "ns".into(),
        name: "cm".into(),
        ..Fact::default()
    }
}

fn apply(e: &Engine, f: Fact) {
    let at_ms = e.clock().now_ms();
    e.apply_batch(FactBatch { scope: scope(), facts: vec![f], at_ms });
}

fn q(uid: &str, rv: &str, removal: bool) -> Query {
    Query {
        uid: uid.into(),
        resource_version: rv.into(),
        namespace: "ns".into(),
        name: "cm".into(),
        removal,
        ..Query::default()
    }
}

async fn resolve_in_background(e: &Arc<Engine>, query: Query) -> tokio::task::JoinHandle<Resolution> {
    let e = e.clone();
    let h = tokio::spawn(async move { e.resolve(&scope(), "v1", &query).await });
    tokio::task::yield_now().await; // let it register and read once
    h
}

#[tokio::test(start_paused = true)]
async fn a_present_fact_resolves_without_waiting() {
    let e = engine();
    apply(&e, fact("alice", "create", "u1", "1"));
    let r = e.resolve(&scope(), "v1", &q("u1", "1", false)).await;
    assert_eq!((r.tier, r.author(), r.waited), (Tier::Exact, Some("alice"), Duration::ZERO));
    assert_eq!(e.waiters().len(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_late_fact_wakes_the_waiting_resolver() {
    let e = engine();
    let h = resolve_in_background(&e, q("u1", "1", false)).await;
    assert!(!e.waiters().is_empty(), "registered while waiting");
    tokio::time::sleep(Duration::from_millis(700)).await;
    apply(&e, fact("alice", "create", "u1", "1"));
    let r = h.await.unwrap();
    assert_eq!((r.tier, r.author(), r.waited), (Tier::Exact, Some("alice"), Duration::from_millis(700)));
    assert_eq!(e.waiters().len(), 0, "a resolver leaves nothing registered");
}

#[tokio::test(start_paused = true)]
async fn an_unmatched_write_waits_out_the_grace_and_is_absent() {
    let e = engine();
    apply(&e, fact("other", "update", "u1", "1"));
    let r = e.resolve(&scope(), "v1", &q("u1", "2", false)).await;
    assert_eq!((r.tier, r.fact.is_none(), r.waited), (Tier::Absent, true, Duration::from_secs(3)));
    assert_eq!(r.actor_kind(), ActorKind::None);
}

// "A removal never returns on a write fact without looking further."
#[tokio::test(start_paused = true)]
async fn a_removal_holds_a_write_fallback_until_the_grace_ends() {
    let e = engine();
    apply(&e, fact("writer", "update", "u1", "1"));
    let r = e.resolve(&scope(), "v1", &q("u1", "2", true)).await;
    assert_eq!((r.tier, r.author(), r.waited), (Tier::Latest, Some("writer"), Duration::from_secs(3)));
}

// "A fact about the deletion, filed under any key, ends the wait immediately."
#[tokio::test(start_paused = true)]
async fn delete_evidence_ends_a_removal_wait_immediately() {
    let e = engine();
    apply(&e, fact("writer", "update", "u1", "1"));
    let h = resolve_in_background(&e, q("u1", "2", true)).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    apply(&e, fact("deleter", "delete", "u1", "2"));
    let r = h.await.unwrap();
    assert_eq!((r.tier, r.author(), r.waited), (Tier::DeleteSticky, Some("deleter"), Duration::from_millis(1200)));
}

// "a removal waiting out its grace must not delay any other resolution"
#[tokio::test(start_paused = true)]
async fn a_waiting_removal_blocks_no_write() {
    let e = engine();
    for i in 0..100 {
        apply(&e, fact("alice", "update", &format!("w{i}"), "1"));
    }
    let removal = resolve_in_background(&e, q("gone", "9", true)).await;
    let writes: Vec<_> = (0..100)
        .map(|i| {
            let e = e.clone();
            tokio::spawn(async move { e.resolve(&scope(), "v1", &q(&format!("w{i}"), "1", false)).await })
        })
        .collect();
    for w in writes {
        let r = w.await.unwrap();
        assert_eq!((r.tier, r.waited), (Tier::Exact, Duration::ZERO));
    }
    assert!(!removal.is_finished(), "the removal is still waiting out its grace");
    let r = removal.await.unwrap();
    assert_eq!((r.tier, r.waited), (Tier::Absent, Duration::from_secs(3)));
    assert_eq!(e.waiters().len(), 0);
}

// A relisted object written long before (grace::deadline_ms): its wait
// ended before it was asked, so it answers on the first poll with what the
// index holds, as the wait would have ended on.
#[tokio::test(start_paused = true)]
async fn a_resolution_whose_wait_ended_before_it_began_answers_at_once() {
    use futures::FutureExt;
    let e = engine();
    // The engine's clock counts from its start: move it past a week.
    tokio::time::advance(Duration::from_secs(8 * 86_400)).await;
    apply(&e, fact("writer", "update", "u1", "1"));
    let week_ago_us = (e.clock().now_ms() as i64 - 7 * 86_400_000) * 1000;
    // A removal with only a write fact: a read that does not settle.
    let query = Query { written_at_us: Some(week_ago_us), ..q("u1", "2", true) };
    let r = e.resolve(&scope(), "v1", &query).now_or_never().expect("answered on the first poll");
    assert_eq!((r.tier, r.author(), r.waited), (Tier::Latest, Some("writer"), Duration::ZERO));
    let absent = Query { written_at_us: Some(week_ago_us), ..q("u2", "1", false) };
    let r = e.resolve(&scope(), "v1", &absent).now_or_never().expect("answered on the first poll");
    assert_eq!(r.tier, Tier::Absent);
    assert_eq!(e.waiters().registrations(), 0, "neither set up a wait");
    // Written just now: the same removal still waits out its grace.
    let now_us = e.clock().now_ms() as i64 * 1000;
    let fresh = Query { written_at_us: Some(now_us), ..q("u1", "2", true) };
    assert!(e.resolve(&scope(), "v1", &fresh).now_or_never().is_none(), "a fresh write waits");
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_resolution_unregisters() {
    let e = engine();
    let h = resolve_in_background(&e, q("u1", "1", true)).await;
    assert!(!e.waiters().is_empty());
    h.abort();
    let _ = h.await;
    assert_eq!(e.waiters().len(), 0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_returns_the_best_answer_now() {
    let e = engine();
    apply(&e, fact("writer", "update", "u1", "1"));
    let h = resolve_in_background(&e, q("u1", "2", true)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    e.shutdown();
    let r = h.await.unwrap();
    assert_eq!((r.tier, r.author(), r.waited), (Tier::Latest, Some("writer"), Duration::from_millis(100)));
}

#[tokio::test(start_paused = true)]
async fn a_route_that_never_resolved_is_flagged_after_five_misses_once() {
    let e = engine_with(EngineConfig { grace: Duration::from_millis(10), ..EngineConfig::default() });
    for i in 0..4 {
        e.resolve(&scope(), "v1", &q(&format!("u{i}"), "1", false)).await;
    }
    assert!(!e.route_health("lab").unwrap().warned, "four misses are not yet a pattern");
    e.resolve(&scope(), "v1", &q("u5", "1", false)).await;
    let h = e.route_health("lab").unwrap();
    assert!(h.warned && !h.ever_resolved && h.unresolved_in_a_row == 5);
    // A route that has resolved once is never flagged.
    let other = Scope::new("ok", GroupResource::new("", "configmaps"));
    e.apply_batch(FactBatch { scope: other.clone(), facts: vec![fact("a", "create", "x", "1")], at_ms: 0 });
    e.resolve(&other, "v1", &q("x", "1", false)).await;
    for i in 0..6 {
        e.resolve(&other, "v1", &q(&format!("m{i}"), "1", false)).await;
    }
    assert!(!e.route_health("ok").unwrap().warned);
}

#[tokio::test(start_paused = true)]
async fn metrics_count_resolutions_by_tier_and_actor_kind() {
    let e = engine();
    apply(&e, fact("system:serviceaccount:ns:bot", "create", "u1", "1"));
    e.resolve(&scope(), "v1", &q("u1", "1", false)).await;
    let text = e.metrics().render();
    assert!(text.contains(r#"gitopsreverser_attribution_resolutions_total{tier="exact",actor_kind="serviceaccount",group="",version="v1",resource="configmaps"} 1"#), "{text}");
    assert!(text.contains("gitopsreverser_attribution_fact_index_entries 1"));
}

fn adaptive_engine(after_misses: u32) -> Arc<Engine> {
    engine_with(EngineConfig { adaptive: Some(AdaptiveGrace { after_misses }), ..EngineConfig::default() })
}

// Adaptive grace: a run of misses with no fact seen stops the wait; the
// type's first fact restores the full grace.
#[tokio::test(start_paused = true)]
async fn adaptive_grace_skips_after_a_run_of_misses_and_a_fact_restores_it() {
    let e = adaptive_engine(2);
    for i in 0..2 {
        let r = e.resolve(&scope(), "v1", &q(&format!("m{i}"), "1", false)).await;
        assert_eq!((r.tier, r.waited), (Tier::Absent, Duration::from_secs(3)), "miss {i} waits the full grace");
    }
    let skipped = e.resolve(&scope(), "v1", &q("m2", "1", false)).await;
    assert_eq!((skipped.tier, skipped.waited), (Tier::Absent, Duration::ZERO));
    let explained = e.explanation(&scope(), &q("m2", "1", false), true);
    assert_eq!(
        explained.grace,
        Some(rules::attribution::grace::GraceView { misses_in_a_row: 3, after_misses: 2, skipping: true })
    );
    let text = e.metrics().render();
    assert!(
        text.contains(
            r#"gitopsreverser_attribution_grace_skipped_total{group="",version="v1",resource="configmaps"} 1"#
        ),
        "{text}"
    );
    // Another type on the route still waits.
    let other = Scope::new("lab", GroupResource::new("apps", "deployments"));
    assert_eq!(e.resolve(&other, "v1", &q("d", "1", false)).await.waited, Duration::from_secs(3));

    // The first fact of the type restores the full grace: a late fact is
    // waited for again.
    apply(&e, fact("alice", "create", "u1", "1"));
    let h = resolve_in_background(&e, q("u2", "1", false)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    e.apply_batch(FactBatch {
        scope: scope(),
        facts: vec![Fact { name: "cm".into(), ..fact("bob", "create", "u2", "1") }],
        at_ms: e.clock().now_ms(),
    });
    let r = h.await.unwrap();
    assert_eq!((r.tier, r.author(), r.waited), (Tier::Exact, Some("bob"), Duration::from_millis(500)));
    assert_eq!(e.explanation(&scope(), &q("u2", "1", false), true).grace.map(|g| g.skipping), Some(false));
}

#[tokio::test(start_paused = true)]
async fn a_skipped_grace_still_reads_the_facts_already_filed() {
    let e = adaptive_engine(1);
    let _ = e.resolve(&scope(), "v1", &q("m0", "1", false)).await;
    // Skipping now; a fact filed before the next watch event is found (and
    // ends the run, so the wait is full again afterwards).
    apply(&e, fact("alice", "create", "u1", "1"));
    let r = e.resolve(&scope(), "v1", &q("u1", "1", false)).await;
    assert_eq!((r.tier, r.author()), (Tier::Exact, Some("alice")));
    assert_eq!(e.waiters().len(), 0);
}

#[tokio::test(start_paused = true)]
async fn without_the_opt_in_the_grace_is_always_full() {
    let e = engine_with(EngineConfig { grace: Duration::from_millis(10), ..EngineConfig::default() });
    for i in 0..30 {
        let r = e.resolve(&scope(), "v1", &q(&format!("m{i}"), "1", false)).await;
        assert_eq!(r.waited, Duration::from_millis(10));
    }
    assert_eq!(e.explanation(&scope(), &q("m0", "1", false), true).grace, None);
}
