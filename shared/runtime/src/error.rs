//! The runtime's error type: one enum per concern (transport, Git,
//! Kubernetes executor), joined here with `#[from]` for callers that hold
//! several of them, with the rules' refusals alongside.

/// Any runtime failure. Each variant's message says what failed, on which
/// object, and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A rule refused its input.
    #[error(transparent)]
    Rules(#[from] rules::Error),

    /// The fact transport (memory or Redis Streams).
    #[error(transparent)]
    Transport(#[from] crate::attribution::transport::TransportError),

    /// Git authoring or reading the mirror.
    #[cfg(feature = "git")]
    #[error(transparent)]
    Git(#[from] crate::attribution::commit::GitError),

    /// Applying ownership decisions to the Kubernetes API or the forge.
    #[cfg(feature = "kube")]
    #[error(transparent)]
    Executor(#[from] crate::ownership::executor::ExecutorError),

    /// The forge (GitHub) refused or could not be reached.
    #[cfg(feature = "forge")]
    #[error(transparent)]
    Forge(#[from] crate::ownership::forge::ForgeError),

    /// Reading the mirror's configuration from the cluster.
    #[cfg(feature = "kube")]
    #[error(transparent)]
    Mirror(#[from] crate::mirror::MirrorError),

    /// The kubeconfig could not be loaded.
    #[cfg(feature = "kube")]
    #[error(transparent)]
    Kubeconfig(#[from] crate::kubeconfig::KubeconfigError),

    /// The retry pacing was configured out of bounds.
    #[error(transparent)]
    Backoff(#[from] crate::backoff::BackoffError),

    /// A local I/O failure, with what we were doing at the time.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with the runtime's [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error and its sources joined by `: `, each said once (wrappers often
/// repeat their source's words, or hide them: hyper's "client error
/// (SendRequest)" is a timeout two sources down).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = s.source();
    }
    parts.join(": ")
}
