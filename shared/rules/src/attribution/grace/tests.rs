use super::*;
use crate::attribution::GroupResource;

fn scope(route: &str, resource: &str) -> Scope {
    Scope::new(route, GroupResource::new("", resource))
}

#[test]
fn the_grace_is_full_until_the_run_of_misses_reaches_the_setting() {
    let mut s = Streaks::new(AdaptiveGrace { after_misses: 3 });
    let cm = scope("default", "configmaps");
    for _ in 0..2 {
        assert_eq!(s.wait(&cm), Wait::Full);
        s.resolved(&cm, true);
    }
    assert_eq!(s.wait(&cm), Wait::Full);
    s.resolved(&cm, true);
    assert_eq!(s.wait(&cm), Wait::Skip);
    assert_eq!(s.view(&cm), GraceView { misses_in_a_row: 3, after_misses: 3, skipping: true });
}

#[test]
fn the_first_fact_of_the_type_restores_the_full_grace() {
    let mut s = Streaks::new(AdaptiveGrace { after_misses: 1 });
    let cm = scope("default", "configmaps");
    s.resolved(&cm, true);
    assert_eq!(s.wait(&cm), Wait::Skip);
    s.fact_filed(&cm);
    assert_eq!(s.wait(&cm), Wait::Full);
    assert_eq!(s.streak(&cm), Streak::default());
}

#[test]
fn a_resolution_that_names_an_author_ends_the_run() {
    let mut s = Streaks::new(AdaptiveGrace { after_misses: 2 });
    let cm = scope("default", "configmaps");
    s.resolved(&cm, true);
    s.resolved(&cm, false);
    s.resolved(&cm, true);
    assert_eq!(s.wait(&cm), Wait::Full, "the run restarted at the resolved event");
}

#[test]
fn runs_are_per_route_and_type() {
    let mut s = Streaks::new(AdaptiveGrace { after_misses: 1 });
    let cm = scope("default", "configmaps");
    s.resolved(&cm, true);
    assert_eq!(s.wait(&cm), Wait::Skip);
    assert_eq!(s.wait(&scope("default", "secrets")), Wait::Full);
    assert_eq!(s.wait(&scope("other", "configmaps")), Wait::Full);
    s.fact_filed(&scope("default", "secrets"));
    assert_eq!(s.wait(&cm), Wait::Skip, "another type's fact says nothing about this one");
}

#[test]
fn a_long_run_does_not_overflow() {
    let mut s = Streaks::new(AdaptiveGrace { after_misses: 1 });
    let cm = scope("default", "configmaps");
    s.by_scope.insert(cm.clone(), Streak { misses: u32::MAX });
    s.resolved(&cm, true);
    assert_eq!(s.streak(&cm).misses, u32::MAX);
}

#[test]
fn a_relisted_object_waits_at_most_a_grace_after_its_own_write() {
    use super::{deadline_ms, written_at_us};
    let grace = 3_000;
    // A watch event (no write time): one grace after it is asked.
    assert_eq!(deadline_ms(1_000_000, grace, None), 1_003_000);
    // Written long ago: the grace after the write is over, no wait.
    let written = written_at_us(&serde_json::json!({"metadata": {"managedFields": [
        {"manager": "kubectl", "time": "2026-12-01T10:00:00Z"},
        {"manager": "controller", "time": "2026-12-01T10:00:05Z"},
        {"manager": "untimed"}
    ]}}));
    let at = crate::attribution::index::order::stage_time_us("2026-12-01T10:00:05Z").unwrap();
    assert_eq!(written, Some(at), "the newest entry");
    let written_ms = at as u64 / 1000;
    assert_eq!(deadline_ms(written_ms + 3_600_000, grace, written), written_ms + 1_000 + grace);
    // Written just now (second precision): the full grace from the write,
    // never later than one grace after asking.
    assert_eq!(deadline_ms(written_ms + 500, grace, written), written_ms + 500 + grace);
    assert_eq!(deadline_ms(written_ms + 2_000, grace, written), written_ms + 1_000 + grace);
    // No managed fields: nothing known, the full grace.
    assert_eq!(written_at_us(&serde_json::json!({"metadata": {}})), None);
}
