//! Inject: add the reverser sidecar beside a Git-mirroring watcher in
//! Kubernetes manifests, like `linkerd inject` (issue 9, `kubectl reverser
//! inject`), and the same rule behind a mutating admission webhook.
//!
//! - [`pod`]: the rule itself, over one pod template: what the sidecar, the
//!   socket volume and the watcher's `REVERSER_SOCKET` look like, and when a
//!   template is left alone (already injected, opted out).
//! - [`manifest`]: the walk over documents: every workload kind, `List`
//!   items, multi-document YAML and streams of JSON objects (JSON in, JSON
//!   out), leaving other documents byte-for-byte.
//! - [`webhook`]: `admission.k8s.io/v1` AdmissionReview in, response out, its
//!   JSONPatch computed by diffing a pod against [`pod`]'s output for it.

pub mod manifest;
pub mod pod;
pub mod webhook;

#[cfg(test)]
mod tests;

pub use manifest::{Injection, Outcome, Report, inject_manifests, inject_object, inject_template, template_path};
pub use pod::{Decision, SkipReason, decide, inject_pod_spec, sidecar_args, sidecar_container};
pub use webhook::{Action, AllowReason, ReviewDecision, ReviewError, WebhookConfig, decide_review, review};

/// The sidecar container's name; an existing container of this name (init or
/// plain) is how a second injection knows there is nothing left to do.
pub const SIDECAR_NAME: &str = "reverser-sidecar";
/// The shared `emptyDir` volume holding the socket.
pub const VOLUME_NAME: &str = "reverser-socket";
/// The environment variable handing the socket path to the watcher.
pub const SOCKET_ENV: &str = "REVERSER_SOCKET";
/// The annotation (value `disabled`) on a pod template that opts it out, and
/// the label (value `enabled`) a webhook may require to opt a pod in.
pub const INJECT_KEY: &str = "reverser.dev/inject";
/// Where the socket directory is mounted by default.
pub const DEFAULT_SOCKET_DIR: &str = "/var/run/reverser";
/// The socket's file name inside the socket directory.
pub const SOCKET_FILE: &str = "reverser.sock";

/// The default sidecar image: this crate's version, so a plugin injects the
/// sidecar it was released with.
pub fn default_image() -> String {
    format!("ghcr.io/reverser/reverser-sidecar:{}", env!("CARGO_PKG_VERSION"))
}

/// How the sidecar is added to the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SidecarMode {
    /// A native sidecar: an init container with `restartPolicy: Always`
    /// (Kubernetes 1.29+), started before and stopped after the watcher.
    #[default]
    Native,
    /// A plain container beside the watcher, for clusters without native
    /// sidecars.
    Plain,
}

/// Which containers of the pod are watchers, given `REVERSER_SOCKET` and the
/// socket mount.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum WatcherSelector {
    /// Every container of `containers` except the sidecar.
    #[default]
    All,
    /// Only the container of this name; a pod without it is an error.
    Named(String),
}

/// Requests and limits put on the sidecar (Kubernetes quantities).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidecarResources {
    pub cpu_request: String,
    pub memory_request: String,
    pub memory_limit: String,
}

impl Default for SidecarResources {
    fn default() -> Self {
        Self { cpu_request: "10m".into(), memory_request: "32Mi".into(), memory_limit: "128Mi".into() }
    }
}

/// Everything an injection can be told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InjectOptions {
    /// The sidecar image; [`default_image`] by default.
    pub image: String,
    /// Native sidecar (default) or plain container.
    pub mode: SidecarMode,
    /// Which containers get the socket.
    pub watcher: WatcherSelector,
    /// Appended to the sidecar's `serve --socket <path>`, e.g.
    /// `--author-attribution-transport=redis` (the sidecar's own flags:
    /// callers check them with `runtime::cli::check_serve_args`).
    pub extra_args: Vec<String>,
    /// Where the socket directory is mounted in both containers.
    pub socket_dir: String,
    /// The sidecar's requests and limits.
    pub resources: SidecarResources,
    /// The uid the sidecar runs as (the security context's `runAsNonRoot`
    /// can only be verified by the kubelet against a numeric uid).
    pub run_as_user: i64,
    /// A Secret key holding the Redis URL, handed to the sidecar as
    /// `REVERSER_REDIS_URL`, so the URL (and its password) never appears in
    /// the pod spec. The Secret must live in the workload's namespace.
    pub redis_url_secret: Option<SecretKeyRef>,
}

/// `NAME/KEY` of a Secret in the workload's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretKeyRef {
    pub name: String,
    pub key: String,
}

impl std::str::FromStr for SecretKeyRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once('/') {
            Some((name, key)) if !name.is_empty() && !key.is_empty() && !key.contains('/') => {
                Ok(SecretKeyRef { name: name.to_owned(), key: key.to_owned() })
            }
            _ => Err(format!("{s:?} is not a Secret key as NAME/KEY (e.g. reverser-redis/url)")),
        }
    }
}

/// The sidecar's environment variable for the Redis URL.
pub const REDIS_URL_ENV: &str = "REVERSER_REDIS_URL";

impl Default for InjectOptions {
    fn default() -> Self {
        Self {
            image: default_image(),
            mode: SidecarMode::default(),
            watcher: WatcherSelector::default(),
            extra_args: Vec::new(),
            socket_dir: DEFAULT_SOCKET_DIR.into(),
            resources: SidecarResources::default(),
            run_as_user: 65532,
            redis_url_secret: None,
        }
    }
}

impl InjectOptions {
    /// The socket path handed to the sidecar (`--socket`) and the watcher
    /// (`REVERSER_SOCKET`).
    pub fn socket_path(&self) -> String {
        format!("{}/{SOCKET_FILE}", self.socket_dir.trim_end_matches('/'))
    }
}
