//! Ownership rules of `spec/ownership.md`: owner references, fold, reap,
//! sweep, merge-request ownership, takeover, the merge gate, and the object
//! byte budget.

pub mod decision;
pub mod naming;
pub mod owners;
pub mod types;

pub mod fold;
pub mod reap;
#[cfg(test)]
mod testkit;
