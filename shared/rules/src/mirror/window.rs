//! Commit windows (`GitProvider.spec.push.commitWindow`): a rolling silence
//! window coalesces events into one commit per author; the timer resets on
//! every event, and the window flushes after that much silence. `0s` flushes
//! at once, one commit per event. Two bounds keep a busy type from holding
//! history back forever: a window also flushes at [`WindowPolicy::max_events`]
//! events, and [`WindowPolicy::max_wait`] after its first event.

use std::time::Duration;

/// When a pending window is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowPolicy {
    /// The provider's commit window: this much silence flushes.
    pub silence: Duration,
    /// A window this large flushes at once (and bounds one `Commit` call).
    pub max_events: usize,
    /// A window this old flushes even while events keep coming.
    pub max_wait: Duration,
}

/// Events per `Commit` call at most.
pub const MAX_EVENTS: usize = 500;

impl WindowPolicy {
    /// The policy for a provider's commit window: flush after `silence`, at
    /// [`MAX_EVENTS`], and at the latest six windows (at least 30 s) after
    /// the first event.
    pub fn new(silence: Duration) -> Self {
        WindowPolicy { silence, max_events: MAX_EVENTS, max_wait: (silence * 6).max(Duration::from_secs(30)) }
    }

    /// Whether every change is its own commit (`commitWindow: 0s`).
    pub fn per_event(&self) -> bool {
        self.silence.is_zero()
    }

    /// When a window whose first event arrived at `first` and last at `last`
    /// (on any monotonic clock) flushes, unless it fills up first.
    pub fn flush_at(&self, first: Duration, last: Duration) -> Duration {
        (last + self.silence).min(first + self.max_wait)
    }

    /// Whether a window of `pending` events flushes now, whatever the clock.
    pub fn full(&self, pending: usize) -> bool {
        pending >= self.max_events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn silence_resets_on_every_event_and_the_wait_is_bounded() {
        let p = WindowPolicy::new(S(5));
        assert_eq!(p.flush_at(S(0), S(0)), S(5));
        assert_eq!(p.flush_at(S(0), S(4)), S(9), "a new event resets the timer");
        assert_eq!(p.flush_at(S(0), S(29)), S(30), "a steady trickle still flushes within max_wait");
        assert!(!p.per_event());
        assert!(p.full(MAX_EVENTS) && !p.full(MAX_EVENTS - 1));
    }

    #[test]
    fn a_zero_window_flushes_at_once_one_commit_per_event() {
        let p = WindowPolicy::new(Duration::ZERO);
        assert!(p.per_event());
        assert_eq!(p.flush_at(S(3), S(3)), S(3));
    }
}
