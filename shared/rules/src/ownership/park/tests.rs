use super::*;

fn parked(reason: &str) -> Task {
    let mut t = Task::default();
    t.status_mut().state = Some("under-implementation".into());
    t.status_mut().park_reason = Some(reason.into());
    t
}

#[test]
fn every_reason_has_one_class() {
    let mut seen = std::collections::BTreeSet::new();
    for (r, _) in UNPARK_CLASSES {
        assert!(seen.insert(*r), "{r} listed twice");
    }
    assert_eq!(unpark_class("backlog-sweep"), Some(UnparkClass::Human));
    assert_eq!(unpark_class("pod-recreation-exhausted"), Some(UnparkClass::Retired));
    assert_eq!(unpark_class("ci-failed"), Some(UnparkClass::Retry));
    assert_eq!(unpark_class("no-such-reason"), None);
}

#[test]
fn unresumable_takeover_parks_follow_the_endpoint() {
    // takeover.go:92-102: ownership-lost re-takes; Human, Timer and Retry
    // clear on their own; Never and Retired are refused; unknown is not.
    assert!(!unresumable_takeover_park(&Task::default()));
    assert!(!unresumable_takeover_park(&parked(OWNERSHIP_LOST)));
    assert!(!unresumable_takeover_park(&parked("awaiting-human")));
    assert!(!unresumable_takeover_park(&parked("merge-timeout")));
    assert!(!unresumable_takeover_park(&parked("ci-failed")));
    assert!(unresumable_takeover_park(&parked("implement-declined")));
    assert!(unresumable_takeover_park(&parked("stage-deadline")));
    assert!(unresumable_takeover_park(&parked("turn-budget-exhausted")));
    assert!(!unresumable_takeover_park(&parked("something-new")));
}
