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
    assert_eq!(ix.evictions(), Evictions { per_type: 1, total: 0 });
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
    assert_eq!(ix.evictions(), Evictions { per_type: 0, total: 1 });
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
