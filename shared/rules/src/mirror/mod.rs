//! The mirror (`spec/mirror.md`): a GitTarget's watcher and the sidecar that
//! authors for it, configured by gitops-reverser's own custom resources.
//! These are its decisions; the watcher and the sidecar apply them.
//!
//! - [`config`]: GitTarget, GitProvider, WatchRule, ClusterWatchRule,
//!   ClusterProvider as plain data.
//! - [`watch_rules`]: which types are watched, where, for which operations;
//!   [`resource_policy`]: the types `resources: ["*"]` never reaches;
//!   [`source_namespace`]: which namespaces a WatchRule may watch;
//!   [`source_cluster`]: which cluster is watched (a ClusterProvider's
//!   kubeconfig, its admission of the GitTarget's namespace).
//! - [`select`]: which events are mirrored (operations, excluded field
//!   managers and actors, sensitive types).
//! - [`credentials`]: which Secret keys hold the remote's and the
//!   signing credentials.
//! - [`encryption`]: what `spec.encryption` asks for (SOPS, age
//!   recipients and their sources).
//! - [`window`]: when a commit window flushes.
//! - [`reconcile`]: what a list changes in Git.
//! - [`placement`]: where a new object's file goes (gitops-reverser's
//!   layout, or the target's `spec.placement` templates).
//! - [`document`]: the documents a tree's files hold, found by identity and
//!   edited in place.
//! - [`bootstrap`]: the files a target's first write stages, and the
//!   `.gittargetignore` they leave; [`acceptance`]: whether the folder
//!   holds only what the mirror may manage (`GitPathAccepted`).
//! - [`commit_request`]: a CommitRequest's "save now", and its status.
//! - [`controller`]: the Deployment and RBAC serving each GitTarget.
//! - [`status`]: the conditions written back on the CRs (kstatus);
//!   [`rule_status`]: those of the rules and the ClusterProvider.
//! - [`message`] and [`template`]: commit messages from the provider's
//!   Go text/template strings, checked when the provider is read.

pub mod acceptance;
pub mod bootstrap;
pub mod commit_request;
pub mod config;
pub mod controller;
pub mod credentials;
pub mod document;
pub mod encryption;
pub mod message;
pub mod placement;
pub mod reconcile;
pub mod resource_policy;
pub mod rule_status;
pub mod select;
pub mod source_cluster;
pub mod source_namespace;
pub mod status;
pub mod template;
pub mod watch_rules;
pub mod window;
