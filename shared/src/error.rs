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

    // --- transport (issue 3: the fact transports) ---
    /// `--transport` named something else.
    #[error("unknown transport {0:?}: use `memory` or `redis`")]
    UnknownTransport(String),

    /// The memory transport with more than one replica.
    #[error(
        "the memory transport is refused with --replica-count {replicas}: facts published on one replica would never reach the watchers of another; run one replica or use --transport redis with a Redis URL"
    )]
    MemoryTransportReplicas { replicas: u32 },

    /// `--transport redis` without a URL.
    #[error(
        "the redis transport needs a Redis URL (redis://[:password@]host:port[/db] or rediss:// for TLS)"
    )]
    RedisUrlMissing,

    /// The Redis URL (or its TLS material) could not be used.
    #[error(
        "Redis URL {url} is not usable: {source}; fix the URL (redis:// or rediss://, password in the userinfo) or the CA certificate"
    )]
    RedisConfig {
        /// The URL with any password redacted.
        url: String,
        #[source]
        source: ::redis::RedisError,
    },

    /// A Redis command failed.
    #[error(
        "Redis {op} on {target} failed: {source}; check that Redis at {url} is reachable and the credentials are right"
    )]
    Redis {
        op: &'static str,
        target: String,
        /// The URL with any password redacted.
        url: String,
        #[source]
        source: ::redis::RedisError,
    },

    // inject: adding the reverser sidecar to manifests (`inject`).
    /// A workload's manifest does not have the shape its kind requires.
    #[error(
        "cannot inject into {object}: {path} {message}; fix the manifest, or opt it out with the pod template annotation reverser.dev/inject: disabled"
    )]
    InjectMalformed {
        object: String,
        path: String,
        message: String,
    },

    /// The named watcher container is not in a workload being injected.
    #[error(
        "cannot inject into {object}: it has no container named {container:?} to hand the socket to (its containers: {available}); name one of them as the watcher, or opt it out with the pod template annotation reverser.dev/inject: disabled"
    )]
    InjectWatcherNotFound {
        object: String,
        container: String,
        available: String,
    },

    /// A document of the input is not YAML.
    #[error(
        "the document starting at line {line} is not valid YAML: {message}; fix it and inject again"
    )]
    InjectParse { line: usize, message: String },

    /// An injected document could not be written back as YAML.
    #[error(
        "cannot write the document starting at line {line} back as YAML after injecting: {message}"
    )]
    InjectRender { line: usize, message: String },
}

/// `Result` with the crate's [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
