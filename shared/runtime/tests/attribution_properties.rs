//! Property test over random interleavings of facts and watch events, on the
//! engine's real resolver under a virtual clock:
//! - no resolution ever crosses a route or a type;
//! - a removal never returns a write fact when a delete fact for the same
//!   uid was applied before it resolved;
//! - a write never resolves through a fact for a different resourceVersion
//!   of the same uid;
//! - the adaptive grace never changes an author the full grace would have
//!   found when the fact arrived before the watch event.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use rules::attribution::grace::AdaptiveGrace;
use rules::attribution::index::Query;
use rules::attribution::{Fact, GroupResource, Scope};
use runtime::attribution::clock::{Clock, TokioClock};
use runtime::attribution::transport::FactBatch;
use runtime::attribution::{Engine, EngineConfig};
use runtime::metrics::Metrics;

const ROUTES: [&str; 2] = ["a", "b"];
const TYPES: [&str; 2] = ["configmaps", "secrets"];

fn scope(i: usize) -> Scope {
    Scope::new(ROUTES[i % 2], GroupResource::new("", TYPES[i / 2]))
}

#[derive(Debug, Clone)]
enum Op {
    Fact { scope: usize, uid: u8, rv: u8, verb: &'static str, shape: u8 },
    Watch { scope: usize, uid: u8, rv: u8, removal: bool },
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            0..4usize,
            0..3u8,
            0..3u8,
            prop::sample::select(vec!["create", "update", "patch", "delete", "deletecollection"]),
            0..4u8
        )
            .prop_map(|(scope, uid, rv, verb, shape)| Op::Fact { scope, uid, rv, verb, shape }),
        (0..4usize, 0..3u8, 0..3u8, any::<bool>())
            .prop_map(|(scope, uid, rv, removal)| { Op::Watch { scope, uid, rv, removal } }),
        (0..2500u64).prop_map(Op::Advance),
    ]
}

/// The fact `op` describes.
fn make_fact(scope: usize, uid: u8, rv: u8, verb: &str, shape: u8, seq: u64) -> Fact {
    let (uid_s, rv_s) = (format!("u{uid}"), format!("{rv}"));
    let mut f = Fact {
        author: String::new(),
        verb: verb.into(),
        namespace: "ns".into(),
        name: format!("obj{uid}"),
        ..Fact::default()
    };
    if verb == "deletecollection" {
        f.name.clear();
        f.uids = shape.is_multiple_of(2).then(|| vec![uid_s]);
        f.author = format!("{scope}|{verb}|||{seq}");
        return f;
    }
    // shape: 0 uid+rv, 1 uid only, 2 rv only, 3 name only.
    if shape <= 1 {
        f.uid = uid_s;
    }
    if shape == 0 || shape == 2 {
        f.resource_version = rv_s;
    }
    // The author records what the fact carries, so a resolution can be
    // traced back: `<scope>|<verb>|<uid>|<rv>|<seq>`.
    f.author = format!("{scope}|{verb}|{}|{}|{seq}", f.uid, f.resource_version);
    f
}

struct Outcome {
    scope: usize,
    uid: String,
    rv: String,
    removal: bool,
    author: Option<String>,
    /// Deletes (scope, uid) applied before this resolution returned.
    deletes_before: Vec<(usize, String)>,
    /// Facts applied before the watch event was resolved (their `seq` is lower).
    facts_before: u64,
}

/// Plays `ops` on one engine; the outcomes are in watch-event order.
fn run(ops: Vec<Op>, config: EngineConfig) -> Vec<Outcome> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    rt.block_on(async move {
        let clock = TokioClock::starting_now();
        let engine = Arc::new(Engine::new(config, Arc::new(clock), Arc::new(Metrics::new())));
        let deletes: Arc<Mutex<Vec<(usize, String)>>> = Arc::default();
        let seq = AtomicU64::new(0);
        let mut tasks = Vec::new();
        for op in ops {
            match op {
                Op::Advance(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                Op::Fact { scope: s, uid, rv, verb, shape } => {
                    let f = make_fact(s, uid, rv, verb, shape, seq.fetch_add(1, Ordering::Relaxed));
                    if verb == "delete" && !f.uid.is_empty() {
                        deletes.lock().unwrap().push((s, f.uid.clone()));
                    }
                    engine.apply_batch(FactBatch { scope: scope(s), facts: vec![f], at_ms: clock.now_ms() });
                }
                Op::Watch { scope: s, uid, rv, removal } => {
                    let q = Query {
                        uid: format!("u{uid}"),
                        resource_version: format!("{rv}"),
                        namespace: "ns".into(),
                        name: format!("obj{uid}"),
                        removal,
                        observed_at_ms: clock.now_ms(),
                        ..Query::default()
                    };
                    let (engine, deletes) = (engine.clone(), deletes.clone());
                    let facts_before = seq.load(Ordering::Relaxed);
                    tasks.push(tokio::spawn(async move {
                        let r = engine.resolve(&scope(s), "v1", &q).await;
                        // Nothing runs between resolve returning and this read.
                        let deletes_before = deletes.lock().unwrap().clone();
                        Outcome {
                            scope: s,
                            uid: q.uid,
                            rv: q.resource_version,
                            removal,
                            author: r.author().map(str::to_owned),
                            deletes_before,
                            facts_before,
                        }
                    }));
                }
            }
        }
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        assert_eq!(engine.waiters().len(), 0, "every resolver unregistered");
        out
    })
}

/// The `seq` a resolved author's fact was made with.
fn seq_of(author: &str) -> u64 {
    author.rsplit('|').next().and_then(|s| s.parse().ok()).expect("authors end in their seq")
}

fn check(ops: Vec<Op>) -> Result<(), TestCaseError> {
    for o in run(ops, EngineConfig::default()) {
        let Some(author) = o.author else { continue };
        let parts: Vec<&str> = author.split('|').collect();
        let (f_scope, f_verb, f_uid, f_rv) = (parts[0].parse::<usize>().unwrap(), parts[1], parts[2], parts[3]);
        prop_assert_eq!(f_scope, o.scope, "a resolution crossed a route or a type");
        let deleted_before = o.deletes_before.iter().any(|(s, u)| *s == o.scope && *u == o.uid);
        if o.removal && deleted_before {
            prop_assert!(
                f_verb == "delete" || f_verb == "deletecollection",
                "a removal of {} returned the write fact {author} after a delete fact was applied",
                o.uid
            );
        }
        if !o.removal && f_uid == o.uid {
            prop_assert_eq!(f_rv, o.rv.as_str(), "a write resolved through another version of its uid");
        }
    }
    Ok(())
}

/// Adaptive grace against the full grace over the same interleaving: an
/// author the full grace found through a fact filed before the watch event
/// is the author the adaptive grace finds too.
fn check_adaptive(ops: Vec<Op>, after_misses: u32) -> Result<(), TestCaseError> {
    let full = run(ops.clone(), EngineConfig::default());
    let adaptive = run(ops, EngineConfig { adaptive: Some(AdaptiveGrace { after_misses }), ..EngineConfig::default() });
    prop_assert_eq!(full.len(), adaptive.len());
    for (i, (f, a)) in full.iter().zip(&adaptive).enumerate() {
        let Some(author) = &f.author else { continue };
        if seq_of(author) < f.facts_before {
            prop_assert_eq!(
                a.author.as_deref(),
                Some(author.as_str()),
                "watch event {} (scope {}, uid {}, rv {}, removal {}): the full grace found a fact filed before it",
                i,
                f.scope,
                &f.uid,
                &f.rv,
                f.removal
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn resolutions_respect_scope_removal_and_version(ops in prop::collection::vec(op(), 1..60)) {
        check(ops)?;
    }

    #[test]
    fn adaptive_grace_keeps_every_author_whose_fact_came_first(
        ops in prop::collection::vec(op(), 1..60),
        after_misses in 1..4u32,
    ) {
        check_adaptive(ops, after_misses)?;
    }
}
