//! Budget: the byte-exact object guard run before every write ("An
//! unwritable Task pins its artifacts forever"). Budgeted at 800,000 bytes;
//! oldest comments and notes are spilled first and dropped only on spill
//! success; when nothing is left to evict the Task fails with a minimal merge
//! patch carrying only two status fields, so the escape hatch cannot 413.

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// "budgeted at 800,000 bytes, half the ceiling".
pub const OBJECT_BUDGET_BYTES: usize = 800_000;
/// The failure reason of an object that cannot be made to fit.
pub const OBJECT_TOO_LARGE: &str = "object-too-large";

/// The exact size of the JSON body a write would send.
pub fn object_bytes(object: &Value) -> usize {
    serde_json::to_vec(object).map_or(usize::MAX, |b| b.len())
}

/// One journal entry chosen for eviction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Evictee {
    /// `notes` or `comments` (under `status`).
    pub field: String,
    /// Index in that array of the object the plan was computed from.
    pub index: usize,
    /// Its timestamp (`at` for notes, `createdAt` for comments).
    pub at: String,
    /// The entry itself, to spill to tatara-memory.
    pub entry: Value,
}

/// What the guard decides before a write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "plan")]
pub enum BudgetPlan {
    Fits {
        bytes: usize,
    },
    /// Spill these (oldest first), then drop them from the CR.
    Spill {
        evict: Vec<Evictee>,
        bytes_after: usize,
        why: String,
    },
    /// "nothing left to evict - the Task fails loudly".
    Fail {
        patch: Value,
        why: String,
    },
}

fn evictable(object: &Value) -> Vec<Evictee> {
    let mut out = Vec::new();
    for (field, stamp) in [("notes", "at"), ("comments", "createdAt")] {
        if let Some(items) = object.pointer(&format!("/status/{field}")).and_then(Value::as_array) {
            for (index, entry) in items.iter().enumerate() {
                out.push(Evictee {
                    field: field.to_string(),
                    index,
                    at: entry.get(stamp).and_then(Value::as_str).unwrap_or("").to_string(),
                    entry: entry.clone(),
                });
            }
        }
    }
    // "Oldest comments and oldest notes are spilled ... first": by time,
    // parsed so that differently formatted stamps still order correctly; an
    // unparseable stamp counts as oldest (it cannot be newer than anything).
    out.sort_by_key(|e| (e.at.parse::<Timestamp>().ok(), e.field.clone(), e.index));
    out
}

/// Drops `evicted` entries from `object`.
pub fn without(object: &Value, evicted: &[Evictee]) -> Value {
    let mut out = object.clone();
    for field in ["notes", "comments"] {
        let mut idx: Vec<usize> = evicted.iter().filter(|e| e.field == field).map(|e| e.index).collect();
        idx.sort_unstable_by(|a, b| b.cmp(a));
        idx.dedup();
        if let Some(items) = out.pointer_mut(&format!("/status/{field}")).and_then(Value::as_array_mut) {
            for i in idx {
                if i < items.len() {
                    items.remove(i);
                }
            }
        }
    }
    out
}

/// "the Task fails loudly: stage = failed, stageReason = object-too-large,
/// written as a minimal JSON merge patch that carries only the two status
/// fields". In the CRD, `failed(<reason>)` is the park flag `parkReason`, so
/// the two fields are `parkReason` and its clock `parkedAt`.
pub fn fail_patch(now: Timestamp) -> Value {
    json!({"status": {"parkReason": OBJECT_TOO_LARGE, "parkedAt": now.to_string()}})
}

/// The guard, byte-exact against `budget` (use [`OBJECT_BUDGET_BYTES`]).
pub fn plan(object: &Value, budget: usize, now: Timestamp) -> BudgetPlan {
    let bytes = object_bytes(object);
    if bytes <= budget {
        return BudgetPlan::Fits { bytes };
    }
    let candidates = evictable(object);
    let mut evict: Vec<Evictee> = Vec::new();
    for c in candidates {
        evict.push(c);
        let after = object_bytes(&without(object, &evict));
        if after <= budget {
            return BudgetPlan::Spill {
                why: format!(
                    "object is {bytes} bytes, over the {budget}-byte budget; spill the {} oldest comments/notes to reach {after}",
                    evict.len()
                ),
                evict,
                bytes_after: after,
            };
        }
    }
    BudgetPlan::Fail {
        patch: fail_patch(now),
        why: format!(
            "object is {bytes} bytes, over the {budget}-byte budget even with every comment and note evicted: fail it as object-too-large"
        ),
    }
}

/// Drops entries equal to `spilled` from `status.notes` / `status.comments`
/// (used to re-apply a spill's drop to a freshly read object after a 409).
pub fn without_entries(object: &Value, spilled: &[Value]) -> Value {
    let mut out = object.clone();
    for field in ["notes", "comments"] {
        if let Some(items) = out.pointer_mut(&format!("/status/{field}")).and_then(Value::as_array_mut) {
            items.retain(|e| !spilled.contains(e));
        }
    }
    out
}

/// After the spill (run once, outside the retry closure): drop only on
/// success ("dropped from the CR only on spill success").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "next")]
pub enum AfterSpill {
    /// Write this object: the spilled entries are gone from it.
    Write { object: Value },
    /// The spill failed: nothing is dropped; retry the spill later.
    Retry { why: String },
}

/// Apply a spill's result to the object the plan was computed from.
pub fn after_spill(object: &Value, evicted: &[Evictee], spill_ok: bool) -> AfterSpill {
    if spill_ok {
        AfterSpill::Write { object: without(object, evicted) }
    } else {
        AfterSpill::Retry {
            why: format!("spilling {} entries to tatara-memory failed; nothing dropped", evicted.len()),
        }
    }
}

#[cfg(test)]
mod tests;
