//! Issue 30: a weak tier (`name`, `resource_version`, `deletecollection_scope`)
//! never names an earlier actor. The probe's cases
//! (`reliability-probe.md`, scenario 8) against the index and the answer
//! memory the engine keeps beside it.

use super::*;
use crate::attribution::index::order::stage_time_us;

/// A fact stamped at `12:00:<secs>` (seconds with a fraction).
fn at(author: &str, verb: &str, uid: &str, rv: &str, secs: &str) -> Fact {
    Fact {
        stage_timestamp: format!("2026-11-29T12:00:{secs}Z"),
        audit_id: format!("{author}-{verb}-{secs}"),
        ..fact(author, verb, uid, rv, "cm")
    }
}

fn created(secs: &str) -> Option<i64> {
    stage_time_us(&format!("2026-11-29T12:00:{secs}Z"))
}

/// The engine's step: read, and remember what answered.
fn resolve(ix: &Index, mem: &mut Answered, q: &Query, now: u64) -> (Tier, Option<String>, bool) {
    let q = Query { previous: mem.previous(&scope(), &q.uid, now), ..q.clone() };
    let l = ix.lookup(&scope(), &q, now);
    match l.best {
        Some(m) => {
            mem.record(&scope(), &q.uid, m.fact.answered(&q), now);
            (m.tier, Some(m.fact.fact.author.clone()), l.settled)
        }
        None => (Tier::Absent, None, l.settled),
    }
}

fn memory() -> Answered {
    Answered::new(600_000, 1_000)
}

// R8 / R1 / R6: name-only facts (a Secret audited at Metadata level, an
// aggregated type): mallory's edit answered v10; alice's edit of v11 is
// still in its batch when v11's watch event asks.
#[test]
fn a_name_fact_that_answered_one_version_never_answers_the_next() {
    let (mut ix, mut mem) = (index(), memory());
    ix.insert(&scope(), at("mallory", "update", "", "", "01.0"), 0);
    assert_eq!(resolve(&ix, &mut mem, &write_q("u1", "10"), 1), (Tier::Name, Some("mallory".into()), true));
    // Before the change: the weak tier answered mallory at 0 ms.
    let v11 = write_q("u1", "11");
    assert_eq!(resolve(&ix, &mut mem, &v11, 2), (Tier::Absent, None, false), "passed over: keep waiting");
    ix.insert(&scope(), at("alice", "update", "", "", "05.0"), 3);
    assert_eq!(resolve(&ix, &mut mem, &v11, 3), (Tier::Name, Some("alice".into()), true));
    // The same version asked again keeps its answer.
    assert_eq!(resolve(&ix, &mut mem, &v11, 4), (Tier::Name, Some("alice".into()), true));
}

// An earlier name fact is passed over when a strong tier answered after it.
#[test]
fn a_name_fact_older_than_the_last_answer_is_passed_over() {
    let (mut ix, mut mem) = (index(), memory());
    ix.insert(&scope(), at("mallory", "update", "", "", "01.0"), 0);
    ix.insert(&scope(), at("alice", "update", "u1", "10", "02.0"), 0);
    assert_eq!(resolve(&ix, &mut mem, &write_q("u1", "10"), 1).1.as_deref(), Some("alice"));
    assert_eq!(resolve(&ix, &mut mem, &write_q("u1", "11"), 2), (Tier::Absent, None, false));
    // The rv hatch is weak too: an opaque resourceVersion orders by the stamp.
    ix.insert(&scope(), at("mallory", "update", "", "x12", "01.5"), 2);
    assert_eq!(resolve(&ix, &mut mem, &write_q("u1", "x12"), 3), (Tier::Absent, None, false));
    ix.insert(&scope(), at("bob", "update", "", "x12", "03.0"), 3);
    assert_eq!(resolve(&ix, &mut mem, &write_q("u1", "x12"), 3), (Tier::ResourceVersion, Some("bob".into()), true));
    // A later change answers.
    ix.insert(&scope(), at("carol", "update", "", "13", "04.0"), 3);
    assert_eq!(resolve(&ix, &mut mem, &write_q("u1", "13"), 4).1.as_deref(), Some("carol"));
}

// R2: a body-less delete, a recreate under the same name, alice's delete
// lagging: the earlier deleter's fact predates the object.
#[test]
fn a_name_delete_older_than_the_object_is_not_about_it() {
    let (mut ix, mut mem) = (index(), memory());
    ix.insert(&scope(), at("mallory", "delete", "", "", "00.5"), 0);
    let q = Query { created_at_us: created("02"), ..removal_q("u2", "20") };
    assert_eq!(resolve(&ix, &mut mem, &q, 1), (Tier::Absent, None, false));
    ix.insert(&scope(), at("alice", "delete", "", "", "04.0"), 2);
    assert_eq!(resolve(&ix, &mut mem, &q, 2), (Tier::Name, Some("alice".into()), true));
    // The object's own second counts as after it (creationTimestamp is cut to the second).
    let (mut ix, mut mem) = (index(), memory());
    ix.insert(&scope(), at("carol", "delete", "", "", "02.3"), 0);
    assert_eq!(resolve(&ix, &mut mem, &q, 1), (Tier::Name, Some("carol".into()), true));
}

// R3: a body-less deletecollection names nobody created after it.
#[test]
fn a_collection_older_than_the_object_does_not_cover_it() {
    let mut ix = index();
    let coll = Fact { stage_timestamp: "2026-11-29T12:00:00Z".into(), ..collection("mallory", "", None) };
    ix.insert(&scope(), coll, 0);
    let q = Query { created_at_us: created("05"), ..removal_q("u3", "30") };
    assert_eq!(answer(&ix, &q, 1), (Tier::Absent, None, false));
    let older = Query { created_at_us: created("00"), ..q.clone() };
    assert_eq!(answer(&ix, &older, 1), (Tier::DeletecollectionScope, Some("mallory".into()), true));
    let why = ix.explain(&scope(), &q, 1);
    assert_eq!(why[0].excluded, Some(BEFORE_CREATION));
}

// The deletion is one change: the delete fact that answered the first
// removal event (deletionTimestamp set) answers the later ones too, as the
// sticky pointer does for a uid-keyed delete.
#[test]
fn a_delete_fact_answers_every_removal_event_of_its_deletion() {
    let (mut ix, mut mem) = (index(), memory());
    ix.insert(&scope(), at("bob", "delete", "", "", "01.0"), 0);
    assert_eq!(resolve(&ix, &mut mem, &removal_q("u4", "40"), 1).1.as_deref(), Some("bob"));
    assert_eq!(resolve(&ix, &mut mem, &removal_q("u4", "41"), 2), (Tier::Name, Some("bob".into()), true));
    // But never a later write of the object.
    assert_eq!(resolve(&ix, &mut mem, &write_q("u4", "42"), 3), (Tier::Absent, None, false));
}

// The strong tiers are unchanged: the answer memory never gates them.
#[test]
fn strong_tiers_are_not_gated() {
    let (mut ix, mut mem) = (index(), memory());
    ix.insert(&scope(), at("alice", "update", "u5", "50", "01.0"), 0);
    assert_eq!(resolve(&ix, &mut mem, &write_q("u5", "50"), 1).0, Tier::Exact);
    let late_created = Query { created_at_us: created("30"), ..removal_q("u5", "51") };
    // The latest pointer still falls back to the last writer.
    assert_eq!(resolve(&ix, &mut mem, &late_created, 2), (Tier::Latest, Some("alice".into()), false));
}

// Explain / why: a passed-over fact is listed with the reason.
#[test]
fn explain_names_the_fact_passed_over_and_why() {
    let (mut ix, mut mem) = (index(), memory());
    ix.insert(&scope(), at("mallory", "update", "", "", "01.0"), 0);
    resolve(&ix, &mut mem, &write_q("u1", "10"), 1);
    let q = Query { previous: mem.previous(&scope(), "u1", 2), ..write_q("u1", "11") };
    let why = ix.explain(&scope(), &q, 2);
    assert_eq!(why.len(), 1);
    assert_eq!((why[0].tier, why[0].excluded), (Tier::Name, Some(ANSWERED_EARLIER)));
}
