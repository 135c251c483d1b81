//! The engine's clock, in milliseconds: wall time in the sidecar, tokio's
//! (pausable, virtual) clock in `replay`, so the same engine runs on both.

use std::time::{SystemTime, UNIX_EPOCH};

pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    fn now_ms(&self) -> u64;
}

/// Unix milliseconds, the clock Redis stream ids are written in.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or_default()
    }
}

/// Milliseconds since `base` on tokio's clock; virtual when time is paused.
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
}
