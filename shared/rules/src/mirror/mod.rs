//! The mirror (`spec/mirror.md`): a GitTarget's watcher and the sidecar that
//! authors for it, configured by gitops-reverser's own custom resources.
//! These are its decisions; the watcher and the sidecar apply them.
//!
//! - [`config`]: GitTarget, GitProvider, WatchRule, ClusterWatchRule,
//!   ClusterProvider as plain data.
//! - [`watch_rules`]: which types are watched, where, for which operations.
//! - [`select`]: which events are mirrored (operations, excluded field
//!   managers and actors, sensitive types).
//! - [`window`]: when a commit window flushes.
//! - [`reconcile`]: what a list changes in Git.
//! - [`status`]: the conditions written back on the CRs (kstatus).
//! - [`message`] and [`template`]: commit messages from the provider's
//!   Go text/template strings, checked when the provider is read.

pub mod config;
pub mod message;
pub mod reconcile;
pub mod select;
pub mod status;
pub mod template;
pub mod watch_rules;
pub mod window;
