use super::*;
use crate::attribution::GroupResource;

fn scope() -> Scope {
    Scope::new("lab", GroupResource::new("", "configmaps"))
}

fn fact(author: &str, verb: &str, uid: &str, rv: &str, name: &str) -> Fact {
    Fact {
        author: author.into(),
        verb: verb.into(),
        uid: uid.into(),
        resource_version: rv.into(),
        namespace: "ns".into(),
        name: name.into(),
        ..Fact::default()
    }
}

fn collection(author: &str, selector: &str, uids: Option<&[&str]>) -> Fact {
    Fact {
        author: author.into(),
        verb: "deletecollection".into(),
        namespace: "ns".into(),
        label_selector: selector.into(),
        uids: uids.map(|u| u.iter().map(|s| s.to_string()).collect()),
        ..Fact::default()
    }
}

fn write_q(uid: &str, rv: &str) -> Query {
    Query {
        uid: uid.into(),
        resource_version: rv.into(),
        namespace: "ns".into(),
        name: "cm".into(),
        ..Query::default()
    }
}

fn removal_q(uid: &str, rv: &str) -> Query {
    Query { removal: true, ..write_q(uid, rv) }
}

fn answer(ix: &Index, q: &Query, now: u64) -> (Tier, Option<String>, bool) {
    let l = ix.lookup(&scope(), q, now);
    match l.best {
        Some(m) => (m.tier, Some(m.fact.fact.author.clone()), l.settled),
        None => (Tier::Absent, None, l.settled),
    }
}

fn index() -> Index {
    Index::new(IndexConfig::default())
}

// "file is a switch on the strongest key present, and the first matching case wins"
#[test]
fn filing_uid_and_rv_files_exact_and_latest() {
    let mut ix = index();
    let keys = ix.insert(&scope(), fact("a", "update", "u1", "7", "cm"), 0);
    assert_eq!(keys, vec![IndexKey::Exact("u1".into(), "7".into()), IndexKey::Uid("u1".into())]);
    // Filed under uid, so NOT under its name or rv even though it has them.
    let by_name = Query { uid: "other".into(), ..write_q("", "") };
    assert_eq!(answer(&ix, &by_name, 1).0, Tier::Absent);
}

#[test]
fn filing_uid_only_rv_only_name_only_and_nothing() {
    let mut ix = index();
    assert_eq!(ix.insert(&scope(), fact("a", "update", "u1", "", "cm"), 0), vec![IndexKey::Uid("u1".into())]);
    assert_eq!(ix.insert(&scope(), fact("a", "update", "", "9", "cm"), 0), vec![IndexKey::Rv("9".into())]);
    assert_eq!(
        ix.insert(&scope(), fact("a", "update", "", "", "cm"), 0),
        vec![IndexKey::Name("ns".into(), "cm".into())]
    );
    assert_eq!(ix.insert(&scope(), fact("a", "update", "", "", ""), 0), vec![]);
    assert_eq!(ix.insert(&scope(), collection("a", "", None), 0), vec![IndexKey::Collection("ns".into())]);
    assert_eq!(ix.len(), 4, "the keyless fact is not held");
}

#[test]
fn exact_tier_answers_a_write() {
    let mut ix = index();
    ix.insert(&scope(), fact("alice", "update", "u1", "7", "cm"), 0);
    assert_eq!(answer(&ix, &write_q("u1", "7"), 1), (Tier::Exact, Some("alice".into()), true));
}

// "An exact-capable event may not fall through to the removal tiers."
#[test]
fn exact_capable_write_never_reaches_latest() {
    let mut ix = index();
    ix.insert(&scope(), fact("alice", "update", "u1", "7", "cm"), 0);
    assert_eq!(answer(&ix, &write_q("u1", "8"), 1).0, Tier::Absent);
    // ... but it does reach the rv hatch and the name tier.
    ix.insert(&scope(), fact("bob", "update", "", "8", "cm"), 0);
    assert_eq!(answer(&ix, &write_q("u1", "8"), 1), (Tier::ResourceVersion, Some("bob".into()), true));
    ix.insert(&scope(), fact("carol", "update", "", "", "cm"), 0);
    assert_eq!(answer(&ix, &write_q("u1", "9"), 1), (Tier::Name, Some("carol".into()), true));
}

// "A fact about a DELETION may not be replaced by a fact about a WRITE."
#[test]
fn sticky_removal_pointer_survives_a_later_write_fact() {
    let mut ix = index();
    ix.insert(&scope(), fact("alice", "delete", "u1", "41002", "cm"), 0);
    // The finalizer patch carries the rv the deletion stamped: it overwrites
    // exact and latest, last-writer-wins ...
    ix.insert(&scope(), fact("controller", "patch", "u1", "41002", "cm"), 10);
    assert_eq!(answer(&ix, &write_q("u1", "41002"), 20).1.as_deref(), Some("controller"));
    // ... but a removal consults the sticky pointer first.
    assert_eq!(answer(&ix, &removal_q("u1", "41003"), 20), (Tier::DeleteSticky, Some("alice".into()), true));
    assert_eq!(answer(&ix, &removal_q("u1", "41002"), 20).0, Tier::DeleteSticky);
}

#[test]
fn removal_tier_precedence() {
    // exact delete beats the collection uid set.
    let mut ix = index();
    ix.insert(&scope(), collection("coll", "", Some(&["u1"])), 0);
    assert_eq!(answer(&ix, &removal_q("u1", "5"), 1), (Tier::DeletecollectionBodyUid, Some("coll".into()), true));
    // A name-tier delete does not beat the body uid (the uid tier sits above).
    ix.insert(&scope(), fact("named", "delete", "", "", "cm"), 0);
    assert_eq!(answer(&ix, &removal_q("u1", "5"), 1).0, Tier::DeletecollectionBodyUid);

    // latest delete
    let mut ix = index();
    ix.insert(&scope(), fact("w", "update", "u1", "3", "cm"), 0);
    assert_eq!(
        answer(&ix, &removal_q("u1", "5"), 1),
        (Tier::Latest, Some("w".into()), false),
        "a write is only a fallback"
    );
    ix.insert(&scope(), fact("named", "delete", "", "", "cm"), 0);
    assert_eq!(
        answer(&ix, &removal_q("u1", "5"), 1),
        (Tier::Name, Some("named".into()), true),
        "name delete beats latest write"
    );
}

#[test]
fn removal_holds_a_write_fallback_before_the_scope_tier() {
    let mut ix = index();
    ix.insert(&scope(), collection("coll", "", None), 0);
    assert_eq!(answer(&ix, &removal_q("u1", "5"), 1), (Tier::DeletecollectionScope, Some("coll".into()), true));
    ix.insert(&scope(), fact("w", "update", "u1", "3", "cm"), 0);
    assert_eq!(answer(&ix, &removal_q("u1", "5"), 1), (Tier::Latest, Some("w".into()), false));
}

#[test]
fn removal_exact_write_is_a_fallback_not_an_answer() {
    let mut ix = index();
    ix.insert(&scope(), fact("w", "patch", "u1", "5", "cm"), 0);
    assert_eq!(answer(&ix, &removal_q("u1", "5"), 1), (Tier::Exact, Some("w".into()), false));
    ix.insert(&scope(), fact("del", "delete", "u1", "6", "cm"), 0);
    assert_eq!(answer(&ix, &removal_q("u1", "5"), 1), (Tier::DeleteSticky, Some("del".into()), true));
}

#[test]
fn removal_without_uid_reaches_rv_and_name_as_fallbacks() {
    let mut ix = index();
    ix.insert(&scope(), fact("w", "update", "", "", "cm"), 0);
    assert_eq!(answer(&ix, &removal_q("", ""), 1), (Tier::Name, Some("w".into()), false));
}

#[test]
fn collection_scope_tier_is_bounded_by_selector_window_and_uid_set() {
    let mut ix = index();
    ix.insert(&scope(), collection("coll", "app=web", None), 1_000);
    let mut q = removal_q("u1", "5");
    q.observed_at_ms = 0;
    assert_eq!(answer(&ix, &q, 1_000).0, Tier::Absent, "selector does not select an unlabeled object");
    q.labels.insert("app".into(), "web".into());
    assert_eq!(answer(&ix, &q, 1_000).0, Tier::DeletecollectionScope);
    q.observed_at_ms = 40_000;
    assert_eq!(answer(&ix, &q, 40_000).0, Tier::Absent, "outside the 30s collection window");
    // A collection that named its uids is never a scope candidate for others.
    let mut ix = index();
    ix.insert(&scope(), collection("coll", "", Some(&["u9"])), 0);
    assert_eq!(answer(&ix, &removal_q("u1", "5"), 1).0, Tier::Absent);
    // A write never reaches collection tiers.
    ix.insert(&scope(), collection("coll", "", Some(&["u1"])), 0);
    assert_eq!(answer(&ix, &write_q("u1", "5"), 1).0, Tier::Absent);
}

// "Expiry is decided on read, so an aged-out fact is never joined merely
// because the sweep has not run."
#[test]
fn ttl_is_decided_on_read_and_sticky_is_not_ttl_bound() {
    let mut ix = Index::new(IndexConfig { ttl_ms: 100, ..IndexConfig::default() });
    ix.insert(&scope(), fact("w", "update", "u1", "7", "cm"), 0);
    ix.insert(&scope(), fact("d", "delete", "u2", "7", "cm2"), 0);
    assert_eq!(answer(&ix, &write_q("u1", "7"), 99).0, Tier::Exact);
    assert_eq!(answer(&ix, &write_q("u1", "7"), 100).0, Tier::Absent);
    assert_eq!(ix.len(), 2, "nothing swept yet");
    assert_eq!(answer(&ix, &removal_q("u2", "9"), 10_000).0, Tier::DeleteSticky);
    ix.sweep(100);
    assert_eq!(ix.len(), 1, "the sweep drops the write, keeps the sticky removal");
    assert_eq!(answer(&ix, &removal_q("u2", "9"), 10_000).0, Tier::DeleteSticky);
    assert_eq!(answer(&ix, &write_q("u2", "7"), 10_000).0, Tier::Absent, "its exact key aged out");
}

#[test]
fn per_type_cap_evicts_oldest_and_counts() {
    let mut ix = Index::new(IndexConfig { max_facts_per_type: 2, ..IndexConfig::default() });
    for i in 0..3 {
        ix.insert(&scope(), fact("a", "update", &format!("u{i}"), "1", "cm"), i);
    }
    assert_eq!(ix.len(), 2);
    assert_eq!(ix.evictions(), Evictions { per_type: 1, total: 0, span: 0 });
    assert_eq!(answer(&ix, &write_q("u0", "1"), 5).0, Tier::Absent, "the oldest went");
    assert_eq!(answer(&ix, &write_q("u2", "1"), 5).0, Tier::Exact);
}

#[test]
fn total_cap_evicts_the_globally_oldest_and_counts() {
    let mut ix = Index::new(IndexConfig { max_facts: 2, ..IndexConfig::default() });
    let other = Scope::new("lab", GroupResource::new("apps", "deployments"));
    ix.insert(&scope(), fact("a", "update", "u0", "1", "cm"), 0);
    ix.insert(&other, fact("a", "update", "u1", "1", "cm"), 1);
    ix.insert(&scope(), fact("a", "delete", "u2", "1", "cm"), 2);
    assert_eq!(ix.len(), 2);
    assert_eq!(ix.evictions(), Evictions { per_type: 0, total: 1, span: 0 });
    assert_eq!(answer(&ix, &write_q("u0", "1"), 5).0, Tier::Absent);
    assert_eq!(ix.lookup(&other, &write_q("u1", "1"), 5).best.map(|m| m.tier), Some(Tier::Exact));
    // The caps bound the sticky pointer too: it is evicted with its fact.
    ix.insert(&other, fact("a", "update", "u3", "1", "cm"), 3);
    ix.insert(&other, fact("a", "update", "u4", "1", "cm"), 4);
    assert_eq!(answer(&ix, &removal_q("u2", "1"), 5).0, Tier::Absent);
    assert_eq!(ix.len(), 2);
}

#[test]
fn no_fact_crosses_a_route_or_a_type() {
    let mut ix = index();
    ix.insert(&scope(), fact("a", "update", "u1", "7", "cm"), 0);
    let other_route = Scope::new("other", GroupResource::new("", "configmaps"));
    let other_type = Scope::new("lab", GroupResource::new("", "secrets"));
    assert!(ix.lookup(&other_route, &write_q("u1", "7"), 1).best.is_none());
    assert!(ix.lookup(&other_type, &write_q("u1", "7"), 1).best.is_none());
}

#[test]
fn explain_lists_competing_facts_and_why_they_lose() {
    let mut ix = index();
    ix.insert(&scope(), fact("alice", "delete", "u1", "41002", "cm"), 0);
    ix.insert(&scope(), fact("controller", "patch", "u1", "41002", "cm"), 10);
    let c = ix.explain(&scope(), &removal_q("u1", "41002"), 20);
    let tiers: Vec<(Tier, &str)> = c.iter().map(|c| (c.tier, c.fact.fact.author.as_str())).collect();
    assert_eq!(tiers, vec![(Tier::DeleteSticky, "alice"), (Tier::Exact, "controller"), (Tier::Latest, "controller")]);
    let w = ix.explain(&scope(), &write_q("u1", "41003"), 20);
    assert!(w.iter().any(|c| c.tier == Tier::Latest && c.excluded.unwrap().contains("exact-capable")));
}

fn stamped(author: &str, verb: &str, uid: &str, rv: &str, name: &str, audit: &str, micros: u64) -> Fact {
    Fact {
        audit_id: audit.into(),
        stage_timestamp: format!("2026-11-29T12:00:00.{micros:06}Z"),
        ..fact(author, verb, uid, rv, name)
    }
}

// The probe's case: alice writes rv 5, bob writes rv 6, alice's batch is
// re-delivered (the API server retries any non-2xx), the object is deleted
// with no delete evidence. The removal's fallback is bob, the last writer.
#[test]
fn a_redelivered_older_batch_never_becomes_latest() {
    let mut ix = index();
    let alice = stamped("alice", "update", "u1", "5", "cm", "a-5", 1);
    let bob = stamped("bob", "update", "u1", "6", "cm", "b-6", 2);
    ix.insert(&scope(), alice.clone(), 0);
    ix.insert(&scope(), bob, 10);
    let filed = ix.file(&scope(), alice, 20);
    assert_eq!(filed, Filed { keys: vec![], duplicate: true }, "a re-delivery changes nothing");
    assert_eq!(ix.duplicates(), 1);
    assert_eq!(ix.len(), 2, "and is not held twice");
    assert_eq!(answer(&ix, &removal_q("u1", "7"), 30), (Tier::Latest, Some("bob".into()), false));
}

// Without the auditID to recognise it (a copy under another id), the object's
// own order still keeps the older write out of `latest`.
#[test]
fn an_older_write_arriving_late_is_filed_exact_but_not_latest() {
    let mut ix = index();
    ix.insert(&scope(), stamped("bob", "update", "u1", "6", "cm", "b-6", 2), 0);
    let keys = ix.insert(&scope(), stamped("alice", "update", "u1", "5", "cm", "a-5", 1), 10);
    assert_eq!(keys, vec![IndexKey::Exact("u1".into(), "5".into())], "its own version only");
    assert_eq!(answer(&ix, &write_q("u1", "5"), 20), (Tier::Exact, Some("alice".into()), true));
    assert_eq!(answer(&ix, &removal_q("u1", "7"), 20).1.as_deref(), Some("bob"));
}

// Same resourceVersion (the finalizer patch carries the rv the deletion
// stamped): the stage timestamp orders them, whichever arrives first.
#[test]
fn equal_resource_versions_are_ordered_by_stage_timestamp() {
    let delete = stamped("alice", "delete", "u1", "41002", "cm", "d", 1);
    let patch = stamped("controller", "patch", "u1", "41002", "cm", "p", 2);
    for order in [[delete.clone(), patch.clone()], [patch, delete]] {
        let mut ix = index();
        for f in order {
            ix.insert(&scope(), f, 0);
        }
        assert_eq!(answer(&ix, &write_q("u1", "41002"), 1).1.as_deref(), Some("controller"));
        assert_eq!(answer(&ix, &removal_q("u1", "41003"), 1), (Tier::DeleteSticky, Some("alice".into()), true));
    }
}

#[test]
fn name_and_rv_tiers_keep_the_later_fact_too() {
    let mut ix = index();
    ix.insert(&scope(), stamped("new", "update", "", "", "cm", "n2", 2), 0);
    assert!(ix.insert(&scope(), stamped("old", "update", "", "", "cm", "n1", 1), 0).is_empty());
    assert_eq!(answer(&ix, &removal_q("", ""), 1).1.as_deref(), Some("new"));
    ix.insert(&scope(), stamped("new", "update", "", "9", "cm", "r2", 2), 0);
    assert!(ix.insert(&scope(), stamped("old", "update", "", "9", "cm", "r1", 1), 0).is_empty());
    assert_eq!(answer(&ix, &write_q("u", "9"), 1), (Tier::ResourceVersion, Some("new".into()), true));
    assert_eq!(ix.len(), 2, "a fact that took no slot is not held");
}

#[test]
fn a_duplicate_is_recognised_until_its_fact_is_gone() {
    let mut ix = Index::new(IndexConfig { ttl_ms: 100, ..IndexConfig::default() });
    let f = stamped("alice", "update", "u1", "5", "cm", "a-5", 1);
    ix.insert(&scope(), f.clone(), 0);
    assert!(ix.file(&scope(), f.clone(), 50).duplicate);
    ix.sweep(100);
    assert!(ix.is_empty());
    // Aged out and swept: the same auditID is a fact again (re-warm after restart).
    assert!(!ix.file(&scope(), f, 150).duplicate);
    // The same auditID in another scope is another fact.
    let other = Scope::new("lab", GroupResource::new("", "secrets"));
    assert!(!ix.file(&other, stamped("alice", "update", "u1", "5", "cm", "a-5", 1), 150).duplicate);
}

mod reordering {
    //! Duplicates and reordering of facts never change a resolution: the same
    //! facts delivered in any order, in any batches, any of them more than
    //! once, answer every query exactly as the in-order single delivery does.

    use super::*;
    use proptest::prelude::*;

    /// One object's history in its own order: each step a write or a removal
    /// by one of a few authors, in one of the filing shapes.
    #[derive(Debug, Clone)]
    struct Step {
        author: u8,
        verb: &'static str,
        /// 0: uid + rv; 1: uid only; 2: rv only; 3: name only.
        shape: u8,
        /// Repeats the previous step's rv (a finalizer patch after a delete).
        same_rv: bool,
    }

    fn step() -> impl Strategy<Value = Step> {
        (
            0..3u8,
            prop::sample::select(vec!["create", "update", "patch", "delete", "deletecollection"]),
            prop_oneof![4 => Just(0u8), 1 => 1..4u8],
            prop::bool::weighted(0.2),
        )
            .prop_map(|(author, verb, shape, same_rv)| Step { author, verb, shape, same_rv })
    }

    /// The facts of a history over two objects (`u0`/`cm0`, `u1`/`cm1`),
    /// each with its own auditID, rv and stage timestamp increasing.
    fn history(steps: &[(u8, Step)]) -> Vec<Fact> {
        let mut rv = 100u64;
        steps
            .iter()
            .enumerate()
            .map(|(i, (obj, s))| {
                if !s.same_rv {
                    rv += 1;
                }
                let (uid, rv_s) = match s.shape {
                    0 => (format!("u{obj}"), rv.to_string()),
                    1 => (format!("u{obj}"), String::new()),
                    2 => (String::new(), rv.to_string()),
                    _ => (String::new(), String::new()),
                };
                let mut f = stamped(
                    &format!("author{}", s.author),
                    s.verb,
                    &uid,
                    &rv_s,
                    &format!("cm{obj}"),
                    &format!("audit-{i}"),
                    i as u64 + 1,
                );
                if s.verb == "deletecollection" {
                    f.uids = (s.shape == 0).then(|| vec![format!("u{obj}")]);
                }
                f
            })
            .collect()
    }

    fn queries() -> Vec<Query> {
        let mut qs = Vec::new();
        for obj in 0..2 {
            for rv in 100..=110u64 {
                for (uid, removal) in [(format!("u{obj}"), false), (format!("u{obj}"), true), (String::new(), true)] {
                    qs.push(Query {
                        uid,
                        resource_version: rv.to_string(),
                        namespace: "ns".into(),
                        name: format!("cm{obj}"),
                        removal,
                        observed_at_ms: 50,
                        ..Query::default()
                    });
                }
            }
        }
        qs
    }

    fn answers(ix: &Index) -> Vec<(Tier, Option<String>, bool)> {
        queries().iter().map(|q| answer(ix, q, 100)).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn duplicates_and_reordering_never_change_a_resolution(
            steps in prop::collection::vec((0..2u8, step()), 1..10),
            schedule in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
            shuffle in any::<u64>(),
            batch in 1..5usize,
        ) {
            let facts = history(&steps);
            let mut in_order = index();
            for f in &facts {
                in_order.insert(&scope(), f.clone(), 0);
            }

            // Every fact at least once, some again, in a shuffled order.
            let mut delivery: Vec<Fact> = facts.clone();
            delivery.extend(schedule.iter().map(|i| facts[i.index(facts.len())].clone()));
            let mut state = shuffle | 1;
            for i in (1..delivery.len()).rev() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                delivery.swap(i, (state % (i as u64 + 1)) as usize);
            }
            let mut shuffled = index();
            for (n, chunk) in delivery.chunks(batch).enumerate() {
                for f in chunk {
                    shuffled.insert(&scope(), f.clone(), n as u64);
                }
            }
            prop_assert_eq!(answers(&shuffled), answers(&in_order));
            // A re-delivery is never held twice.
            prop_assert!(shuffled.len() <= facts.len());
        }
    }
}

mod weak;

const DAY_MS: u64 = 86_400_000;

/// The append time a held fact reads back with, through a lookup.
fn held_at(ix: &Index, uid: &str, now: u64) -> Option<u64> {
    ix.lookup(&scope(), &write_q(uid, "1"), now).best.map(|m| m.fact.at_ms)
}

// A slot counts arrival order and append time in 32 bits from the store's
// base: time moving on re-bases what is held, exactly.
#[test]
fn append_times_far_apart_read_back_exactly_and_a_span_too_long_drops_the_oldest() {
    let mut ix = Index::new(IndexConfig { ttl_ms: 1_000 * DAY_MS, ..IndexConfig::default() });
    let t0 = 1_800_000_000_000;
    ix.insert(&scope(), fact("a", "update", "u0", "1", "cm"), t0);
    // 30 and 45 days later: past 2^32 ms from the first base, within it of each other.
    ix.insert(&scope(), fact("b", "update", "u1", "1", "cm"), t0 + 30 * DAY_MS);
    ix.insert(&scope(), fact("c", "update", "u2", "1", "cm"), t0 + 45 * DAY_MS);
    let now = t0 + 46 * DAY_MS;
    assert_eq!(held_at(&ix, "u0", now), Some(t0));
    assert_eq!(held_at(&ix, "u1", now), Some(t0 + 30 * DAY_MS));
    assert_eq!(held_at(&ix, "u2", now), Some(t0 + 45 * DAY_MS));
    assert_eq!(ix.evictions(), Evictions::default());
    // 60 days after the first: the first no longer fits beside it and goes.
    ix.insert(&scope(), fact("d", "update", "u3", "1", "cm"), t0 + 60 * DAY_MS);
    let now = t0 + 61 * DAY_MS;
    assert_eq!(held_at(&ix, "u0", now), None);
    assert_eq!(held_at(&ix, "u1", now), Some(t0 + 30 * DAY_MS));
    assert_eq!(held_at(&ix, "u3", now), Some(t0 + 60 * DAY_MS));
    assert_eq!(ix.evictions(), Evictions { span: 1, ..Evictions::default() });
    assert_eq!(ix.len(), 3);
    // A fact appended a little before the base (another stream's clock) fits.
    ix.insert(&scope(), fact("e", "update", "u4", "1", "cm"), t0 + 30 * DAY_MS - 1_000);
    assert_eq!(held_at(&ix, "u4", now), Some(t0 + 30 * DAY_MS - 1_000));
    assert_eq!(ix.len(), 4);
}

#[test]
fn arrival_order_past_32_bits_re_bases_and_keeps_the_order() {
    let mut ix = Index::new(IndexConfig { max_facts: 3, ..IndexConfig::default() });
    let other = Scope::new("lab", GroupResource::new("apps", "deployments"));
    ix.insert(&scope(), fact("a", "update", "u0", "1", "cm"), 0);
    // As if four billion facts had come and gone while u0 stayed.
    ix.next_seq = u64::from(u32::MAX) - 2;
    ix.insert(&scope(), fact("b", "update", "u1", "1", "cm"), 1);
    ix.insert(&scope(), fact("c", "update", "u2", "1", "cm"), 2);
    assert_eq!(ix.evictions(), Evictions::default());
    // The next one's order would be 2^32 past u0's: u0 goes, the rest re-base.
    ix.insert(&other, fact("d", "update", "u3", "1", "cm"), 3);
    assert_eq!(ix.evictions(), Evictions { span: 1, ..Evictions::default() });
    assert_eq!(answer(&ix, &write_q("u0", "1"), 5).0, Tier::Absent);
    for (uid, author) in [("u1", "b"), ("u2", "c")] {
        assert_eq!(answer(&ix, &write_q(uid, "1"), 5).1.as_deref(), Some(author));
    }
    // Arrival order across scopes still decides the total cap's eviction:
    // u1, the oldest held, goes; u3 in the other scope stays.
    ix.insert(&scope(), fact("e", "update", "u4", "1", "cm"), 4);
    assert_eq!(ix.evictions(), Evictions { span: 1, total: 1, ..Evictions::default() });
    assert_eq!(answer(&ix, &write_q("u1", "1"), 5).0, Tier::Absent);
    assert_eq!(answer(&ix, &write_q("u2", "1"), 5).0, Tier::Exact);
    assert_eq!(ix.lookup(&other, &write_q("u3", "1"), 5).best.map(|m| m.tier), Some(Tier::Exact));
}
