use super::*;
use crate::ownership::testkit::ts;

fn note(at: &str, body_len: usize) -> Value {
    json!({"agent": "implement", "at": at, "kind": "note", "body": "n".repeat(body_len)})
}

fn task_with_notes(notes: Vec<Value>, goal_len: usize) -> Value {
    json!({
        "apiVersion": "tatara.dev/v1alpha1", "kind": "Task",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {"projectRef": "p", "goal": "g".repeat(goal_len)},
        "status": {"state": "under-implementation", "notes": notes}
    })
}

#[test]
fn the_budget_is_byte_exact() {
    // "a byte-exact guard before every write, budgeted at 800,000 bytes"
    assert_eq!(OBJECT_BUDGET_BYTES, 800_000);
    let base = task_with_notes(vec![], 0);
    let pad = OBJECT_BUDGET_BYTES - object_bytes(&base);
    let exact = task_with_notes(vec![], pad);
    assert_eq!(object_bytes(&exact), 800_000);
    assert!(matches!(plan(&exact, OBJECT_BUDGET_BYTES, ts(0)), BudgetPlan::Fits { bytes: 800_000 }));
    let over = task_with_notes(vec![], pad + 1);
    assert!(!matches!(plan(&over, OBJECT_BUDGET_BYTES, ts(0)), BudgetPlan::Fits { .. }));
}

#[test]
fn oldest_entries_are_spilled_first_and_only_as_many_as_needed() {
    // "Oldest comments and oldest notes are spilled to tatara-memory first"
    let notes = vec![
        note("2026-01-03T00:00:00Z", 400_000),
        note("2026-01-01T00:00:00Z", 400_000),
        note("2026-01-02T00:00:00Z", 400_000),
    ];
    let obj = task_with_notes(notes, 10);
    let BudgetPlan::Spill { evict, bytes_after, .. } = plan(&obj, OBJECT_BUDGET_BYTES, ts(0)) else { panic!() };
    assert_eq!(evict.len(), 2, "1.2 MB needs two 400 KB evictions, no more");
    assert_eq!(evict[0].at, "2026-01-01T00:00:00Z");
    assert_eq!(evict[1].at, "2026-01-02T00:00:00Z");
    assert!(bytes_after <= OBJECT_BUDGET_BYTES);
}

#[test]
fn comments_and_notes_compete_by_age() {
    let obj = json!({"status": {
        "notes": [{"at": "2026-01-02T00:00:00Z", "body": "x".repeat(500)}],
        "comments": [{"createdAt": "2026-01-01T00:00:00Z", "body": "y".repeat(500)}]
    }});
    let BudgetPlan::Spill { evict, .. } = plan(&obj, object_bytes(&obj) - 10, ts(0)) else { panic!() };
    assert_eq!(evict[0].field, "comments");
}

#[test]
fn dropped_only_on_spill_success() {
    // "dropped from the CR only on spill success"
    let obj = task_with_notes(vec![note("2026-01-01T00:00:00Z", 500_000), note("2026-01-02T00:00:00Z", 400_000)], 1);
    let BudgetPlan::Spill { evict, .. } = plan(&obj, OBJECT_BUDGET_BYTES, ts(0)) else { panic!() };
    assert!(matches!(after_spill(&obj, &evict, false), AfterSpill::Retry { .. }));
    let AfterSpill::Write { object } = after_spill(&obj, &evict, true) else { panic!() };
    let left = object.pointer("/status/notes").unwrap().as_array().unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["at"], "2026-01-02T00:00:00Z");
    assert!(object_bytes(&object) <= OBJECT_BUDGET_BYTES);
}

#[test]
fn nothing_left_to_evict_fails_with_a_two_field_merge_patch() {
    // "an enormous goal ... nothing left to evict - the Task fails loudly ...
    // a minimal JSON merge patch that carries only the two status fields"
    let obj = task_with_notes(vec![note("2026-01-01T00:00:00Z", 10)], 900_000);
    let BudgetPlan::Fail { patch, .. } = plan(&obj, OBJECT_BUDGET_BYTES, ts(0)) else { panic!() };
    let status = patch["status"].as_object().unwrap();
    assert_eq!(patch.as_object().unwrap().len(), 1);
    assert_eq!(status.len(), 2);
    assert_eq!(status["parkReason"], "object-too-large");
    assert!(object_bytes(&patch) < 200, "the escape hatch itself cannot 413");
}

#[test]
fn bytes_not_counts() {
    // "Two hundred notes of 4 KB is 800 KB; two hundred notes of 40 KB is 8
    // MB. Only bytes are bytes." A few large notes trip the guard; many
    // small ones do not.
    let small: Vec<Value> = (0..50).map(|i| note(&format!("2026-01-01T00:00:{:02}Z", i % 60), 1000)).collect();
    assert!(matches!(plan(&task_with_notes(small, 1), OBJECT_BUDGET_BYTES, ts(0)), BudgetPlan::Fits { .. }));
    let big: Vec<Value> = (0..3).map(|i| note(&format!("2026-01-0{}T00:00:00Z", i + 1), 300_000)).collect();
    assert!(matches!(plan(&task_with_notes(big, 1), OBJECT_BUDGET_BYTES, ts(0)), BudgetPlan::Spill { .. }));
}
