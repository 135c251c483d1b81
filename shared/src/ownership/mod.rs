//! Ownership rules of `spec/ownership.md`: owner references, fold, reap,
//! sweep, merge-request ownership, takeover, the merge gate, and the object
//! byte budget.

pub mod naming;
pub mod types;
