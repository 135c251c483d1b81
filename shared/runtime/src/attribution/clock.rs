//! The engine's clock: wall time in the sidecar, a virtual clock in
//! `replay`, so the same resolver waits on both. The virtual clock is ours,
//! not tokio's paused test clock, so no test machinery reaches a production
//! binary: replay advances it only when every resolution is waiting.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A boxed sleep, as [`Clock::sleep_until`] returns it.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Milliseconds on this clock: Unix milliseconds for the system clock
    /// (the clock Redis stream ids are written in), virtual ones in replay.
    fn now_ms(&self) -> u64;

    /// A monotonic reading, for measuring waits.
    fn monotonic(&self) -> Duration;

    /// Resolves once [`Clock::now_ms`] has reached `at_ms`.
    fn sleep_until(&self, at_ms: u64) -> Sleep;
}

/// Unix milliseconds, and tokio's timer for waits.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or_default()
    }

    fn monotonic(&self) -> Duration {
        static BASE: OnceLock<Instant> = OnceLock::new();
        BASE.get_or_init(Instant::now).elapsed()
    }

    fn sleep_until(&self, at_ms: u64) -> Sleep {
        let wait = Duration::from_millis(at_ms.saturating_sub(self.now_ms()));
        Box::pin(tokio::time::sleep(wait))
    }
}

/// Milliseconds since `base` on tokio's clock: virtual in tests that pause
/// tokio's time (a dev-only tokio feature), real otherwise.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    base: tokio::time::Instant,
}

impl TokioClock {
    pub fn starting_now() -> Self {
        Self { base: tokio::time::Instant::now() }
    }

    pub fn base(&self) -> tokio::time::Instant {
        self.base
    }
}

impl Clock for TokioClock {
    fn now_ms(&self) -> u64 {
        self.base.elapsed().as_millis() as u64
    }

    fn monotonic(&self) -> Duration {
        self.base.elapsed()
    }

    fn sleep_until(&self, at_ms: u64) -> Sleep {
        Box::pin(tokio::time::sleep_until(self.base + Duration::from_millis(at_ms)))
    }
}

#[derive(Debug, Default)]
struct VirtualState {
    now_ms: u64,
    /// (deadline, sleeper id) to the waker of the sleeper's task.
    sleepers: BTreeMap<(u64, u64), Waker>,
    next_id: u64,
}

/// A clock that moves only when told to ([`VirtualClock::advance_to`]).
/// Sleeps register their deadline, so the driver can ask for the next one.
#[derive(Debug, Clone, Default)]
pub struct VirtualClock {
    state: Arc<Mutex<VirtualState>>,
}

impl VirtualClock {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VirtualState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The earliest deadline a sleep is waiting for.
    pub fn next_deadline(&self) -> Option<u64> {
        self.lock().sleepers.keys().next().map(|(at, _)| *at)
    }

    /// Moves time to `at_ms` (never backwards) and wakes every sleep whose
    /// deadline has come.
    pub fn advance_to(&self, at_ms: u64) {
        let due: Vec<Waker> = {
            let mut s = self.lock();
            s.now_ms = s.now_ms.max(at_ms);
            let first_later = (s.now_ms.saturating_add(1), 0);
            let later = s.sleepers.split_off(&first_later);
            std::mem::replace(&mut s.sleepers, later).into_values().collect()
        };
        due.into_iter().for_each(Waker::wake);
    }
}

impl Clock for VirtualClock {
    fn now_ms(&self) -> u64 {
        self.lock().now_ms
    }

    fn monotonic(&self) -> Duration {
        Duration::from_millis(self.now_ms())
    }

    fn sleep_until(&self, at_ms: u64) -> Sleep {
        let id = {
            let mut s = self.lock();
            s.next_id += 1;
            s.next_id
        };
        Box::pin(VirtualSleep { clock: self.clone(), at_ms, id })
    }
}

struct VirtualSleep {
    clock: VirtualClock,
    at_ms: u64,
    id: u64,
}

impl Future for VirtualSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.clock.lock();
        if s.now_ms >= self.at_ms {
            s.sleepers.remove(&(self.at_ms, self.id));
            return Poll::Ready(());
        }
        s.sleepers.insert((self.at_ms, self.id), cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for VirtualSleep {
    fn drop(&mut self) {
        // A sleep abandoned by a `select!` must not hold the clock's next
        // deadline, or replay would advance time for nobody.
        self.clock.lock().sleepers.remove(&(self.at_ms, self.id));
    }
}

#[cfg(test)]
mod tests {
    use futures::executor::LocalPool;
    use futures::task::LocalSpawnExt;

    use super::*;

    #[test]
    fn a_virtual_sleep_ends_exactly_when_time_reaches_it() {
        let clock = VirtualClock::new();
        let mut pool = LocalPool::new();
        let done = Arc::new(Mutex::new(Vec::new()));
        for at in [300, 100] {
            let (c, d) = (clock.clone(), done.clone());
            pool.spawner()
                .spawn_local(async move {
                    c.sleep_until(at).await;
                    d.lock().unwrap().push((at, c.now_ms()));
                })
                .unwrap();
        }
        pool.run_until_stalled();
        assert_eq!(clock.next_deadline(), Some(100));
        clock.advance_to(99);
        pool.run_until_stalled();
        assert!(done.lock().unwrap().is_empty());
        clock.advance_to(100);
        pool.run_until_stalled();
        assert_eq!(clock.next_deadline(), Some(300));
        clock.advance_to(1000);
        pool.run_until_stalled();
        assert_eq!(*done.lock().unwrap(), vec![(100, 100), (300, 1000)]);
        assert_eq!(clock.next_deadline(), None);
    }

    #[test]
    fn a_dropped_sleep_leaves_no_deadline_behind() {
        let clock = VirtualClock::new();
        let mut sleep = clock.sleep_until(50);
        let waker = futures::executor::block_on(futures_poll_once(&mut sleep));
        assert!(waker);
        assert_eq!(clock.next_deadline(), Some(50));
        drop(sleep);
        assert_eq!(clock.next_deadline(), None);
    }

    /// Polls once; `true` when still pending.
    async fn futures_poll_once(f: &mut Sleep) -> bool {
        std::future::poll_fn(|cx| Poll::Ready(f.as_mut().poll(cx).is_pending())).await
    }
}
