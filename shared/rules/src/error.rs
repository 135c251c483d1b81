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
    #[error("the redis transport needs a Redis URL (redis://[:password@]host:port[/db] or rediss:// for TLS)")]
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

    // --- ownership (spec/ownership.md) ---
    /// The Kubernetes API refused a write or read with a Status.
    #[error("Kubernetes API refused {verb} on {kind}/{name}: {message} (HTTP {code}); {hint}")]
    KubeRefused { verb: String, kind: String, name: String, code: u16, message: String, hint: String },

    /// The Kubernetes API could not be reached or answered garbage.
    #[error(
        "Kubernetes API call {verb} on {kind}/{name} failed: {source}; check the kubeconfig and that the API server is reachable"
    )]
    Kube {
        verb: String,
        kind: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },

    /// A decision kept conflicting with other writers.
    #[error(
        "{what}: still conflicting after {attempts} recomputations from fresh objects; another writer keeps changing them, retry later"
    )]
    ConflictsExhausted { what: String, attempts: usize },

    /// A decision contains a forge step and no forge client was given.
    #[error("decision step needs the forge ({why}); run with a forge client or apply the printed plan by hand")]
    ForgeUnavailable { why: String },

    /// An ownership rule refused the request (the fold's liveness gate, a
    /// takeover by a non-maintainer); the status is the HTTP answer.
    #[error("refused with HTTP {status}: {message}")]
    Refused { status: u16, message: String },

    /// The forge refused a blocking step; the decision is requeued.
    #[error("forge refused a blocking step ({why}): {message}; nothing after it was applied, the decision is requeued")]
    ForgeRefused { why: String, message: String },

    // inject: adding the reverser sidecar to manifests (`inject`).
    /// A workload's manifest does not have the shape its kind requires.
    #[error(
        "cannot inject into {object}: {path} {message}; fix the manifest, or opt it out with the pod template annotation reverser.dev/inject: disabled"
    )]
    InjectMalformed { object: String, path: String, message: String },

    /// The named watcher container is not in a workload being injected.
    #[error(
        "cannot inject into {object}: it has no container named {container:?} to hand the socket to (its containers: {available}); name one of them as the watcher, or opt it out with the pod template annotation reverser.dev/inject: disabled"
    )]
    InjectWatcherNotFound { object: String, container: String, available: String },

    /// A document of the input is not YAML.
    #[error("the document starting at line {line} is not valid YAML: {message}; fix it and inject again")]
    InjectParse { line: usize, message: String },

    /// An injected document could not be written back as YAML.
    #[error("cannot write the document starting at line {line} back as YAML after injecting: {message}")]
    InjectRender { line: usize, message: String },

    // Git authoring (`attribution::render`, `attribution::commit`).
    /// An object could not be rendered as a manifest.
    #[error("cannot render {object}: {message}")]
    Render { object: String, message: String },

    /// An object's coordinates do not make a safe layout path.
    #[error(
        "cannot lay out {object}: its {component} {value:?} {problem}; \
         the watch event is corrupt, fix its source"
    )]
    LayoutPath { object: String, component: &'static str, value: String, problem: &'static str },

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

    // kubectl tatara (issue 7): the forge, reached through octocrab.
    /// A forge (GitHub) request failed or answered something unusable.
    #[error("forge request {op} on {target} failed: {message}; {hint}")]
    Forge { op: String, target: String, message: String, hint: String },

    // `kubectl reverser why` (`attribution::why`).
    /// `why`'s TYPE is served by no API group.
    #[error(
        "the server doesn't have a resource type {input:?}; run `kubectl api-resources` to list the types it serves"
    )]
    WhyUnknownType { input: String },

    /// The evidence could not be read or understood.
    #[error("{message}")]
    WhyEvidence { message: String },
}

/// `Result` with the crate's [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
