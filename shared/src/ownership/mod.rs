//! Ownership rules of `spec/ownership.md`: owner references, fold, reap,
//! sweep, merge-request ownership, takeover, the merge gate, and the object
//! byte budget.

pub mod decision;
pub mod naming;
pub mod owners;
pub mod types;

pub mod budget;
pub mod executor;
#[cfg(any(test, feature = "test-support"))]
pub mod fakeapi;
pub mod fold;
#[cfg(test)]
mod interleavings;
pub mod merge_request;
pub mod metrics;
pub mod reap;
pub mod sweep;
pub mod takeover;
#[cfg(test)]
mod testkit;
