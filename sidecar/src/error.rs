//! The sidecar's error type: what stopped a command, with what to do about
//! it. The runtime's and the rules' errors join it with `#[from]`; the rest
//! are the binary's own edges (flags, listeners, TLS files, the socket).

use std::path::PathBuf;

/// Why a `reverser-sidecar` command could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(transparent)]
    Rules(#[from] rules::Error),

    #[error(transparent)]
    Runtime(#[from] runtime::Error),

    /// Flags that parse but cannot run (`runtime::cli`).
    #[error(transparent)]
    Args(#[from] runtime::cli::ArgsError),

    #[error(transparent)]
    Transport(#[from] runtime::attribution::transport::TransportError),

    #[error(transparent)]
    Git(#[from] runtime::attribution::commit::GitError),

    /// The GitProvider's credentials Secret is missing or unusable.
    #[error(transparent)]
    Credentials(#[from] crate::target::CredentialError),

    /// A flag, or a combination of flags, that cannot work; the message says
    /// which and what to pass instead.
    #[error("{0}")]
    Config(String),

    /// A read of the cluster got no usable answer: the text names the
    /// read, the API server and its bound.
    #[error("{0}; check that the API server is up and reachable from here (--kubeconfig, --request-timeout)")]
    ApiServer(String),

    /// A listener could not be bound.
    #[error("cannot listen for {what} on {addr}: {source}; stop what holds the address or choose another")]
    Listen {
        what: &'static str,
        addr: String,
        #[source]
        source: std::io::Error,
    },

    /// The Unix socket path cannot be served.
    #[error("cannot serve the socket {}: {problem}", path.display())]
    Socket { path: PathBuf, problem: String },

    /// A TLS file (certificate, key, CA) is unreadable or unusable.
    #[error("{0}")]
    Tls(String),

    /// The development certificates could not be generated.
    #[error("generating development certificates: {0}; pass --tls-cert/--tls-key/--audit-client-ca instead")]
    DevCerts(#[from] rcgen::Error),

    /// A local file operation failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let context = context.into();
        move |source| Error::Io { context, source }
    }
}

/// `Result` with the sidecar's [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
