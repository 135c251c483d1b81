//! The rules crate's one error type: every way a pure rule refuses its input.

/// Everything a rule can refuse. Messages say what failed, on
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

    /// One item of an audit batch is no usable Event.
    #[error("audit event {index} (auditID {audit_id:?}) is not an audit.k8s.io/v1 Event: {error}")]
    AuditItem { index: usize, audit_id: String, error: String },

    /// A replay timeline line is malformed.
    #[error("timeline line {line}: {message}")]
    Timeline { line: usize, message: String },

    /// A label selector could not be parsed.
    #[error("label selector {selector:?} is not valid: {message}")]
    Selector { selector: String, message: String },

    // --- ownership (spec/ownership.md) ---
    /// An ownership rule refused the request (the fold's liveness gate, a
    /// takeover by a non-maintainer); the status is the HTTP answer.
    #[error("refused with HTTP {status}: {message}")]
    Refused { status: u16, message: String },

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

    /// The pod already uses a name or path the injection needs for
    /// something else (a REVERSER_SOCKET pointing elsewhere, a volume named
    /// `reverser-socket` that is not an emptyDir): injecting would leave the
    /// watcher without the socket.
    #[error("cannot inject into {object}: {conflict}")]
    InjectConflict { object: String, conflict: String },

    /// A plain-container sidecar would keep a Job (or a CronJob's Jobs)
    /// from ever completing: it never exits.
    #[error(
        "cannot inject into {object} with --plain-container: the sidecar never exits, so the Job's pod would never complete; inject a native sidecar instead (drop --plain-container; Kubernetes 1.29+), or opt it out with the pod template annotation reverser.dev/inject: disabled"
    )]
    InjectPlainJob { object: String },

    /// A JSON input is not a stream of JSON objects.
    #[error("the JSON value starting at line {line} is not valid JSON: {message}; fix it and inject again")]
    InjectJson { line: usize, message: String },

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
