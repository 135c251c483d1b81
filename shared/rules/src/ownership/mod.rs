//! Ownership rules of `spec/ownership.md`: owner references, fold, reap,
//! sweep, merge-request ownership, takeover, the merge gate, and the object
//! byte budget.
//!
//! Every rule is a pure function over plain data ([`types`], the
//! [`decision::Snapshot`] of a namespace) returning serializable decisions
//! ([`decision::Action`], each with a human-readable `why`). The `runtime`
//! crate's executor applies them to the Kubernetes API with resourceVersion
//! preconditions and recomputes on 409; forge steps go to a forge the caller
//! supplies.
//!
//! - [`types`]: Project, Repository, Task, Issue, MergeRequest (lossless).
//! - [`naming`]: `IntakeTaskName`, mirror CR names, the natural key.
//! - [`owners`]: the five owner-reference rules and the repair.
//! - [`fold`]: the refine fold. [`reap`]: retention, settling, the terminal
//!   path. [`sweep`]: orphans, mint, budgets, pull requests.
//! - [`merge_request`]: MR ownership and the merge gate. [`takeover`].
//! - [`logins`]: maintainer and reporter sets (the bot stripped). [`park`]:
//!   park reasons and their unpark classes. [`why`]: why a Task is where it
//!   is, and who works an artifact (read only).
//! - [`budget`]: the 800,000-byte object guard.

pub mod budget;
pub mod decision;
pub mod fold;
pub mod logins;
pub mod merge_request;
pub mod naming;
pub mod owners;
pub mod park;
pub mod reap;
pub mod sweep;
pub mod takeover;
pub mod types;
pub mod why;

#[cfg(test)]
mod testkit;
