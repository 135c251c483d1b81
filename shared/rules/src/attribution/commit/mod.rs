//! Git authoring's decisions: what resolved watch events ([`Change`]s) become
//! in attributed Git history, as `spec/attribution.md` and issue 5 describe.
//!
//! - [`plan`]: the pure decisions. Which changes of one commit window go into
//!   which commit ("one commit per author, in event order"), who authors it
//!   and the message with its `Reverser-Tier` / `Reverser-Audit-ID` trailers.
//! - [`repack`]: which of the clone's packs the writer merges into one.
//! - [`identity`]: who authors it, as gitops-reverser spells it (the
//!   resolved actor, else exactly `unknown (attribution unresolved)`).
//! - [`GitWriter`]: the thin executor. Writes the manifest tree of a local
//!   bare clone without a checkout, commits with the configured committer, and
//!   pushes, fetching and replaying our commits on top when the push is
//!   rejected.
//!
//! The deletion-intent decision (§1: "the first removal deletes the file;
//! later events change nothing") arrives already made, as [`Action::Delete`].
//! What is enforced here is the other half: the writer diffs every change
//! against the tree and makes no commit for one that leaves it identical (a
//! delete of an absent file, a write of the same bytes), and the sanitizer
//! strips deletionTimestamp, so no commit ever only sets it.

use std::time::SystemTime;

use serde_json::Value;

use crate::attribution::render::ObjectKey;
use crate::attribution::{ActorKind, Fact, Tier};

pub mod identity;
pub mod plan;
pub mod repack;

pub use identity::{
    AuthorMode, NOREPLY_DOMAIN, UNRESOLVED_AUTHOR_EMAIL, UNRESOLVED_AUTHOR_NAME, author_identity, commit_author,
    noreply_email,
};
pub use plan::{CommitGroup, Effect, plan_commits};

/// What a change does to the object's file.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// The object as watched; it is sanitized and rendered as stable YAML.
    Write(Value),
    /// The object is absent from the intent tree: remove its file.
    Delete,
}

/// The actor a resolution named, as a commit author needs it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResolvedAuthor {
    /// The effective user (`system:serviceaccount:ns:sa` for a service account).
    pub username: String,
    /// Empty when the API server supplied none.
    pub display_name: String,
    /// Empty when the API server supplied none.
    pub email: String,
    pub actor_kind: ActorKind,
}

impl ResolvedAuthor {
    /// The author a fact names.
    pub fn from_fact(fact: &Fact) -> Self {
        Self {
            username: fact.author.clone(),
            display_name: fact.display_name.clone(),
            email: fact.email.clone(),
            actor_kind: fact.actor_kind(),
        }
    }
}

/// One resolved watch event, ready to be written.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub action: Action,
    pub object: ObjectKey,
    /// `None` when attribution is unresolved: the commit is then authored
    /// exactly [`UNRESOLVED_AUTHOR_NAME`].
    pub author: Option<ResolvedAuthor>,
    /// Which evidence named the author (`absent` when unresolved).
    pub tier: Tier,
    /// The fact's auditID, so a commit can be traced back to its event.
    pub audit_id: Option<String>,
    /// When the watch event was observed: the author date.
    pub observed_at: SystemTime,
}

/// A git identity (author or committer).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    pub name: String,
    pub email: String,
}

impl Identity {
    pub fn new(name: impl Into<String>, email: impl Into<String>) -> Self {
        Self { name: name.into(), email: email.into() }
    }
}
