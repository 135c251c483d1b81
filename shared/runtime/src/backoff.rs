//! Retry pacing, one checked type for every retry loop (the Redis follower,
//! the Git push): a delay doubling from `min` to `max`, with equal jitter so
//! two processes failing together do not retry in step.

use std::time::Duration;

/// A backoff configured out of bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "retry backoff from {min:?} to {max:?} is not usable: the first pause must be above zero and no longer than the ceiling"
)]
pub struct BackoffError {
    pub min: Duration,
    pub max: Duration,
}

/// Doubling delay between `min` and `max`; [`Backoff::next_delay`] draws
/// each pause from the upper half of the current step ("equal jitter").
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
    rng: fastrand::Rng,
}

impl Backoff {
    /// Refuses a zero `min` (a tight loop) and `max < min`.
    pub fn new(min: Duration, max: Duration) -> Result<Self, BackoffError> {
        if min.is_zero() || max < min {
            return Err(BackoffError { min, max });
        }
        Ok(Self { min, max, next: min, rng: fastrand::Rng::new() })
    }

    /// The pause before the next attempt: within `[step / 2, step]`, where
    /// the step doubles per call up to `max`.
    pub fn next_delay(&mut self) -> Duration {
        let step = self.next;
        self.next = (self.next * 2).min(self.max);
        let half = step / 2;
        let spread = (step - half).as_micros() as u64;
        half + Duration::from_micros(self.rng.u64(0..=spread))
    }

    /// Back to the first step, after a success.
    pub fn reset(&mut self) {
        self.next = self.min;
    }

    /// The ceiling: no pause is ever longer.
    pub fn max(&self) -> Duration {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_zero_start_and_a_ceiling_below_it() {
        assert!(Backoff::new(Duration::ZERO, Duration::from_secs(1)).is_err());
        let err = Backoff::new(Duration::from_secs(2), Duration::from_secs(1)).unwrap_err();
        assert!(err.to_string().contains("no longer than the ceiling"), "{err}");
        assert!(Backoff::new(Duration::from_millis(5), Duration::from_millis(5)).is_ok());
    }

    #[test]
    fn doubles_to_the_ceiling_with_jitter_in_the_upper_half_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(350)).unwrap();
        let steps = [100, 200, 350, 350];
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..50 {
            b.reset();
            for step in steps {
                let d = b.next_delay().as_micros() as u64;
                assert!((step * 500..=step * 1000).contains(&d), "{d}us outside [{step}/2, {step}] ms");
                seen.insert(d);
            }
        }
        // Real jitter: fifty rounds do not all draw the same pauses.
        assert!(seen.len() > steps.len() * 10, "{} distinct pauses", seen.len());
    }
}
