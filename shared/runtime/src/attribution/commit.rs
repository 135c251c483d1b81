//! Git authoring's executor: [`GitWriter`] turns one commit window of
//! resolved changes into attributed commits in a local bare clone and
//! pushes them, fetching and replaying on rejection. The decisions (which
//! commit, which author, which message) are the rules'
//! (`rules::attribution::commit`), re-exported here.

mod apply;
mod config;
mod digests;
mod documents;
pub mod encryption;
mod folders;
mod index;
mod known_hosts;
mod packs;
mod push;
pub use push::probe;
pub mod signing;
mod store;
mod tree;
mod window;
mod writer;

pub use config::{RemoteAuth, RemoteConfig, WriterConfig};
pub use rules::attribution::commit::*;
pub use writer::{CommitOutcome, CommitSummary, GitWriter, PushOutcome, RejectedChange};

/// Every way Git authoring fails. Messages say what failed and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    /// A change could not be rendered or laid out (a rule refused it).
    #[error(transparent)]
    Rules(#[from] rules::Error),

    /// A git operation failed.
    #[error("git: {context}: {source}")]
    Git {
        context: String,
        #[source]
        source: git2::Error,
    },

    /// Every push attempt was rejected, each time after fetching and
    /// replaying on top of what the remote had.
    #[error(
        "push of {branch} to {remote} was rejected {attempts} times, fetching and replaying \
         after each (last: {last_reason}); the commits are kept in the local clone and \
         pushed with the next commit. If it persists, check the remote's branch protection \
         and hooks, and that nothing force-pushes that branch"
    )]
    PushExhausted { remote: String, branch: String, attempts: u32, last_reason: String },

    /// A commit could not be signed with the configured key.
    #[error("signing the commit failed: {0}; check the GitProvider's commit.signing key")]
    Signing(#[from] signing::SigningError),

    /// The folder under `spec.path` holds what the mirror may not manage,
    /// or a write would land where it may not: nothing of the window is
    /// committed (the GitTarget's `GitPathAccepted`).
    #[error("nothing is committed: {0}")]
    GitPathRefused(rules::mirror::acceptance::Refusal),

    /// A local file operation failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with [`GitError`] as the default error.
pub type Result<T, E = GitError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests;
