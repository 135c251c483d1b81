//! Park reasons and their unpark classes, as the operator names them
//! (`internal/stage/stage.go:104-175`, `internal/stage/park.go:79-124`,
//! d22349a). A Task is parked when `status.parkReason` is set ("Empty means
//! NOT PARKED, and that is the whole test", `task_types.go:256-258`); the
//! class says what, if anything, will release it.

use serde::{Deserialize, Serialize};

use super::types::Task;

/// What releases a park (`stage.UnparkClass`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnparkClass {
    /// Nothing: the Task will never run again (`UnparkNever`).
    Never,
    /// A human comment (`UnparkHuman`).
    Human,
    /// A timer the operator arms (`UnparkTimer`).
    Timer,
    /// A retired class a one-shot migration still releases (`UnparkRetired`).
    Retired,
    /// A backed-off retry the unpark driver fires (`UnparkRetry`).
    Retry,
}

impl UnparkClass {
    /// The class as `kubectl tatara` prints it.
    pub fn label(self) -> &'static str {
        match self {
            UnparkClass::Never => "never",
            UnparkClass::Human => "human",
            UnparkClass::Timer => "timer",
            UnparkClass::Retired => "retired",
            UnparkClass::Retry => "retry",
        }
    }
}

/// The park reason a stood-down takeover Task carries (`ReasonOwnershipLost`).
pub const OWNERSHIP_LOST: &str = "ownership-lost";

/// Every park reason with its class: `unparkClasses` (park.go:87-124).
pub const UNPARK_CLASSES: &[(&str, UnparkClass)] = &[
    ("backlog-sweep", UnparkClass::Human),
    ("awaiting-human", UnparkClass::Human),
    ("identity-unverified", UnparkClass::Human),
    ("handoff-stalled", UnparkClass::Human),
    ("merge-timeout", UnparkClass::Timer),
    ("deploy-timeout", UnparkClass::Timer),
    ("no-outcome", UnparkClass::Timer),
    ("ci-pending", UnparkClass::Retry),
    ("ci-failed", UnparkClass::Retry),
    ("merge-conflict-retry", UnparkClass::Retry),
    ("mr-surface-spent", UnparkClass::Retry),
    ("retry-exhausted", UnparkClass::Human),
    ("turn-budget-exhausted", UnparkClass::Retired),
    ("review-loop-exhausted", UnparkClass::Retired),
    ("pod-recreation-exhausted", UnparkClass::Retired),
    ("stage-deadline", UnparkClass::Never),
    ("name-too-long", UnparkClass::Never),
    ("implement-declined", UnparkClass::Never),
    ("review-post-refused", UnparkClass::Never),
    ("merge-blocked", UnparkClass::Never),
    ("deploy-blocked", UnparkClass::Never),
    ("head-moving", UnparkClass::Never),
    ("ci-red", UnparkClass::Never),
    ("ci-blocked", UnparkClass::Never),
    ("merge-conflict", UnparkClass::Never),
    (OWNERSHIP_LOST, UnparkClass::Never),
    ("triage-stalled", UnparkClass::Never),
    ("operator-error", UnparkClass::Never),
    ("object-too-large", UnparkClass::Never),
    ("agent-contract-mismatch", UnparkClass::Never),
    ("merge-order-missing", UnparkClass::Never),
    ("admission-starved", UnparkClass::Never),
    ("merge-auth-refused", UnparkClass::Never),
    ("fold-adoption-unverified", UnparkClass::Never),
];

/// `UnparkClassFor`: `None` for a reason the operator does not classify.
pub fn unpark_class(reason: &str) -> Option<UnparkClass> {
    UNPARK_CLASSES.iter().find(|(r, _)| *r == reason).map(|(_, c)| *c)
}

/// The Task's park reason, when it is parked.
pub fn park_reason(task: &Task) -> Option<&str> {
    task.status.as_ref().and_then(|s| s.park_reason.as_deref()).filter(|r| !r.is_empty())
}

/// `unresumableTakeoverPark` (`internal/restapi/takeover.go:92-102`): parked
/// for a reason nothing will clear. `ownership-lost` is the re-take path
/// (itself `Never`, but the takeover mint un-parks it), and an unknown reason
/// is deliberately not refused.
pub fn unresumable_takeover_park(task: &Task) -> bool {
    let Some(reason) = park_reason(task) else {
        return false;
    };
    if reason == OWNERSHIP_LOST {
        return false;
    }
    matches!(unpark_class(reason), Some(c) if !matches!(c, UnparkClass::Human | UnparkClass::Timer | UnparkClass::Retry))
}

#[cfg(test)]
mod tests;
