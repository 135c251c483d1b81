//! The crate's one error type.

/// Everything that can fail in the shared crate. Messages say what failed, on
/// which object, and what to do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A fact on the wire names no author; the spec refuses it whole.
    #[error("fact refused: it names no author (the one field the wire contract requires)")]
    AuthorlessFact,

    /// A fact entry could not be decoded as JSON.
    #[error("fact entry is not valid fact JSON: {0}")]
    FactDecode(#[source] serde_json::Error),

    /// An audit payload could not be decoded.
    #[error("audit payload is not an audit.k8s.io/v1 Event or EventList: {0}")]
    AuditDecode(#[source] serde_json::Error),

    /// A replay timeline line is malformed.
    #[error("timeline line {line}: {message}")]
    Timeline { line: usize, message: String },

    /// A label selector could not be parsed.
    #[error("label selector {selector:?} is not valid: {message}")]
    Selector { selector: String, message: String },

    /// An I/O failure with what we were doing at the time.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    // Git authoring (`attribution::render`, `attribution::commit`).
    /// An object could not be rendered as a manifest.
    #[error("cannot render {object}: {message}")]
    Render { object: String, message: String },

    /// An object's coordinates do not make a safe layout path.
    #[error(
        "cannot lay out {object}: its {component} {value:?} {problem}; \
         the watch event is corrupt, fix its source"
    )]
    LayoutPath {
        object: String,
        component: &'static str,
        value: String,
        problem: &'static str,
    },

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
    PushExhausted {
        remote: String,
        branch: String,
        attempts: u32,
        last_reason: String,
    },
}

/// `Result` with the crate's [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
