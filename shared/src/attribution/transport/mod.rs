//! The transports: the two-method seam between the publish side and the
//! index (`FactPublisher` / `FactFollower`), with a Redis Streams
//! implementation compatible with gitops-reverser and an in-process one.

use crate::attribution::{Fact, Scope};

/// Facts of one scope, as one stream entry carries them. `at_ms` is when the
/// batch was appended (a Redis entry id's milliseconds; the clock's now for
/// memory): the index ages facts out from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactBatch {
    pub scope: Scope,
    pub facts: Vec<Fact>,
    pub at_ms: u64,
}

/// Where a follower delivers what it reads: the engine's index (which wakes
/// the waiters the facts could answer). Must not block.
pub trait FactSink: Send + Sync + 'static {
    fn apply(&self, batch: FactBatch);
}
