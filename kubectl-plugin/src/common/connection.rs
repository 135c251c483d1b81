//! kubectl's connection flags, the client built from them, and what a
//! failed call to the API server says.
//!
//! Every call is bounded: `--request-timeout` as kubectl has it, and even
//! without it a connect timeout ([`CONNECT_TIMEOUT`]) and an idle-read
//! timeout ([`IDLE_TIMEOUT`]: no byte from the server for that long), so a
//! server that accepts and never answers ends the command with an error
//! instead of a hang.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use clap::Args;

use super::{CliError, exit_code};

pub use runtime::kubeconfig::bounds::{CONNECT_TIMEOUT, IDLE_TIMEOUT, humanize};
use runtime::kubeconfig::{Bounds, Unanswered};

/// The connection flags of every kubectl command. kubectl hands a plugin
/// every argument after its name untouched, so the plugin parses these
/// itself, and `KUBECONFIG` reaches it through the environment.
#[derive(Debug, Clone, Default, Args)]
pub struct KubeArgs {
    /// Path to the kubeconfig file to use (default: the files $KUBECONFIG
    /// lists, then ~/.kube/config, then the in-cluster service account).
    #[arg(long, value_name = "PATH", global = true)]
    pub kubeconfig: Option<PathBuf>,

    /// The name of the kubeconfig context to use.
    #[arg(long, value_name = "NAME", global = true)]
    pub context: Option<String>,

    /// The namespace scope for this request (default: the context's).
    #[arg(short = 'n', long, value_name = "NAMESPACE", global = true)]
    pub namespace: Option<String>,

    /// The name of the kubeconfig cluster to use.
    #[arg(long, value_name = "NAME", global = true)]
    pub cluster: Option<String>,

    /// The name of the kubeconfig user to use.
    #[arg(long, value_name = "NAME", global = true)]
    pub user: Option<String>,

    /// The address and port of the Kubernetes API server.
    #[arg(short = 's', long, value_name = "URL", global = true)]
    pub server: Option<String>,

    /// Bearer token for authentication to the API server.
    #[arg(long, value_name = "TOKEN", global = true)]
    pub token: Option<String>,

    /// Path to a cert file for the certificate authority.
    #[arg(long, value_name = "PATH", global = true)]
    pub certificate_authority: Option<PathBuf>,

    /// If true, the server's certificate will not be checked for validity.
    /// This will make your HTTPS connections insecure.
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,

    /// Username to impersonate for the operation.
    #[arg(long = "as", value_name = "USER", global = true)]
    pub as_user: Option<String>,

    /// Group to impersonate for the operation; repeat for several.
    #[arg(long = "as-group", value_name = "GROUP", global = true)]
    pub as_group: Vec<String>,

    /// How long to wait for each server request before giving up (e.g. 1s,
    /// 2m, 3h). 0 sets no limit, but the plugin still gives up after 10 s
    /// without a connection or 60 s without a byte from the server.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_request_timeout, global = true)]
    pub request_timeout: Duration,
}

/// kubectl's `--request-timeout`: `0`, a bare number of seconds, or a
/// duration with a unit (`500ms`, `1s`, `2m`, `3h`).
pub fn parse_request_timeout(s: &str) -> Result<Duration, String> {
    runtime::cli::parse_duration(s)
}

/// What this process is connected to, for error messages: one plugin run
/// talks to one API server.
#[derive(Debug, Clone)]
struct Connection {
    server: String,
    request_timeout: Duration,
}

static CONNECTION: OnceLock<Connection> = OnceLock::new();

/// A built client and the namespace the flags and the context select.
#[derive(Clone)]
pub struct KubeTarget {
    /// The client for the selected context.
    pub client: kube::Client,
    /// `-n` if given, else the context's namespace, else `default`.
    pub namespace: String,
    /// The API server's URL.
    pub server: String,
}

impl std::fmt::Debug for KubeTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeTarget")
            .field("namespace", &self.namespace)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl KubeTarget {
    /// A client for `config` (adjusted by the caller, e.g. without kube's
    /// default retry), with the namespace it selects.
    pub fn from_config(config: kube::Config) -> Result<Self, CliError> {
        let namespace = config.default_namespace.clone();
        let server = config.cluster_url.to_string().trim_end_matches('/').to_string();
        let client = kube::Client::try_from(config).map_err(|e| {
            if let Some(exec) = exec_failure(&e) {
                return CliError::new(format!("cannot authenticate to the API server at {server}: {exec}"));
            }
            CliError::new(format!(
                "cannot build a client for the API server at {server}: {}; check the context's certificates \
                 (--certificate-authority) and credentials",
                chain(&e)
            ))
        })?;
        Ok(KubeTarget { client, namespace, server })
    }
}

impl KubeArgs {
    /// What the flags override in the kubeconfig.
    pub fn overrides(&self) -> runtime::kubeconfig::Overrides {
        runtime::kubeconfig::Overrides {
            context: self.context.clone(),
            cluster: self.cluster.clone(),
            user: self.user.clone(),
            server: self.server.clone(),
            token: self.token.clone(),
            certificate_authority: self.certificate_authority.clone(),
            insecure_skip_tls_verify: self.insecure_skip_tls_verify,
            impersonate: self.as_user.clone(),
            impersonate_groups: self.as_group.clone(),
        }
    }

    /// The kube configuration these flags select, as kubectl would, with
    /// every call bounded (see the module documentation).
    pub async fn config(&self) -> Result<kube::Config, CliError> {
        let mut config = runtime::kubeconfig::load_with(self.kubeconfig.as_deref(), &self.overrides())
            .await
            .map_err(|e| CliError::new(e.to_string()))?;
        if let Some(ns) = &self.namespace {
            config.default_namespace = ns.clone();
        }
        bound(&mut config, self.request_timeout);
        // A CLI answers at once, as kubectl does, rather than backing off on
        // an aggregated API that is down or a pod proxy that cannot connect.
        config.default_retry = false;
        Ok(config)
    }

    /// The forge's timeouts for the same `--request-timeout`.
    pub fn forge_timeouts(&self) -> runtime::ownership::forge::Timeouts {
        match (!self.request_timeout.is_zero()).then_some(self.request_timeout) {
            Some(t) => runtime::ownership::forge::Timeouts { connect: t.min(CONNECT_TIMEOUT), read: t },
            None => runtime::ownership::forge::Timeouts { connect: CONNECT_TIMEOUT, read: IDLE_TIMEOUT },
        }
    }

    /// A client for [`Self::config`], with the namespace it selects.
    pub async fn client(&self) -> Result<KubeTarget, CliError> {
        let target = KubeTarget::from_config(self.config().await?)?;
        let _ = CONNECTION.set(Connection { server: target.server.clone(), request_timeout: self.request_timeout });
        Ok(target)
    }
}

/// Sets the timeouts every call of the client is bounded by.
pub fn bound(config: &mut kube::Config, request_timeout: Duration) {
    Bounds::new(request_timeout).apply(config);
}

pub use runtime::error_chain as chain;

/// The request that failed, for messages and `kubectl auth can-i` hints.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// `get`, `list`, `update`, ...
    pub verb: &'a str,
    /// The resource as kubectl names it: `configmaps`, `tasks.tatara.dev`.
    pub resource: &'a str,
    /// The object's name, empty for a list.
    pub name: &'a str,
    /// The namespace, empty for the cluster scope or all namespaces.
    pub namespace: &'a str,
}

impl Call<'_> {
    fn what(&self) -> String {
        let object =
            if self.name.is_empty() { self.resource.to_string() } else { format!("{}/{}", self.resource, self.name) };
        if self.namespace.is_empty() { object } else { format!("{object} in namespace {:?}", self.namespace) }
    }

    /// The verb and the subresource: the executor names a status write
    /// `patch status` / `update status`.
    fn verb_and_subresource(&self) -> (&str, Option<&str>) {
        match self.verb.split_once(' ') {
            Some((verb, sub)) => (verb, Some(sub)),
            None => (self.verb, None),
        }
    }

    /// A `kubectl auth can-i` that runs as written: a subresource goes in
    /// `--subresource` (kubectl refuses `can-i patch status RESOURCE`).
    fn can_i(&self) -> String {
        let ns = if self.namespace.is_empty() { " -A".to_string() } else { format!(" -n {}", self.namespace) };
        let (verb, sub) = self.verb_and_subresource();
        let sub = sub.map(|s| format!(" --subresource={s}")).unwrap_or_default();
        format!("kubectl auth can-i {verb} {}{sub}{ns}", self.resource)
    }
}

/// What a failed API call says: which call, what the server (or the
/// network) answered, and what to do; with the exit code for its kind
/// (not found, forbidden, unreachable, or any other failure).
pub fn api_failure(call: Call<'_>, e: &kube::Error) -> CliError {
    let doing = format!("cannot {} {}", call.verb, call.what());
    match e {
        kube::Error::Api(s) => refused(call, &doing, s.code, &s.message),
        other => transport_failure(&doing, other),
    }
}

/// An API server's refusal (`code` with its Status message) of `call`.
pub fn refused(call: Call<'_>, doing: &str, code: u16, message: &str) -> CliError {
    match code {
        403 => CliError::new(format!(
            "{doing}: the API server refused it (403 Forbidden): {message}. Your identity needs the {:?} verb on \
             {}{}; check with `{}`, or ask for the RBAC",
            call.verb_and_subresource().0,
            call.resource,
            call.verb_and_subresource().1.map(|s| format!("/{s}")).unwrap_or_default(),
            call.can_i()
        ))
        .with_code(exit_code::FORBIDDEN),
        401 => CliError::new(format!(
            "{doing}: the API server did not accept the credentials (401 Unauthorized): {message}; check the \
             kubeconfig's user, --token or --user"
        ))
        .with_code(exit_code::FORBIDDEN),
        404 => CliError::new(format!("{doing}: not found ({message})")).with_code(exit_code::NOT_FOUND),
        _ => CliError::new(format!("{doing}: the API server answered {code}: {message}")),
    }
}

/// A call that got no answer from the API server: a timeout, a refused
/// connection, TLS, or the credentials could not be obtained.
pub fn transport_failure(doing: &str, e: &(dyn std::error::Error + 'static)) -> CliError {
    let server = CONNECTION.get().map(|c| c.server.clone()).unwrap_or_else(|| "the API server".into());
    let where_ = if server.starts_with("the ") { server.clone() } else { format!("the API server at {server}") };
    if let Some(exec) = exec_failure(e) {
        return CliError::new(format!("{doing}: {exec}"));
    }
    let bounds = Bounds::new(CONNECTION.get().map(|c| c.request_timeout).unwrap_or_default());
    match Unanswered::classify(e) {
        Unanswered::TimedOut => CliError::new(format!(
            "{doing}: {where_} did not answer {}; check that the cluster is up and reachable from here \
             (--server, --context)",
            bounds.describe()
        ))
        .with_code(exit_code::UNREACHABLE),
        Unanswered::Refused => CliError::new(format!(
            "{doing}: cannot connect to {where_}: connection refused; check --server or --context, and that the \
             cluster is up"
        ))
        .with_code(exit_code::UNREACHABLE),
        Unanswered::Tls(text) => CliError::new(format!(
            "{doing}: the TLS connection to {where_} failed: {text}; pass the CA that signed the server's \
             certificate with --certificate-authority (or fix the kubeconfig's)"
        ))
        .with_code(exit_code::UNREACHABLE),
        Unanswered::Other(text) => CliError::new(format!(
            "{doing}: cannot reach {where_}: {text}; check --kubeconfig and --context, and that the cluster is up"
        ))
        .with_code(exit_code::UNREACHABLE),
    }
}

/// A failed exec credential plugin, as a sentence: its command, exit
/// status and what it wrote on stderr.
fn exec_failure(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(auth) = err.downcast_ref::<kube::client::AuthError>() {
            return Some(match auth {
                kube::client::AuthError::AuthExecRun { cmd, out } => {
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    // An interactive plugin writes to our stderr directly:
                    // its words are then above this line.
                    let said = match stderr.trim() {
                        "" => "its own message, if it wrote one, is above".to_string(),
                        said => format!("it said: {said}"),
                    };
                    format!(
                        "the kubeconfig user's exec credential plugin {} failed ({}); {said}; fix the plugin or \
                         choose another user (--user, --token)",
                        exec_command(cmd),
                        out.status
                    )
                }
                kube::client::AuthError::AuthExecStart(io) => format!(
                    "the kubeconfig user's exec credential plugin could not be started: {io}; install it or fix \
                     users[].user.exec.command"
                ),
                other => format!("cannot obtain credentials from the kubeconfig's user: {other}"),
            });
        }
        if let Some(kube::Error::Auth(auth)) = err.downcast_ref::<kube::Error>() {
            cur = Some(auth);
            continue;
        }
        cur = err.source();
    }
    None
}

/// kube words the command as Rust's `Command` debug form, environment
/// first: `KUBERNETES_EXEC_INFO="{\"kind\"...}" "/usr/bin/helper" "arg"`;
/// the program is what a user recognises.
fn exec_command(debug_form: &str) -> String {
    let mut tokens: Vec<String> = Vec::new();
    let (mut cur, mut quoted, mut escaped) = (String::new(), false, false);
    for c in debug_form.chars() {
        match c {
            _ if escaped => {
                cur.push(c);
                escaped = false;
            }
            '\\' if quoted => escaped = true,
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            ' ' if !quoted => tokens.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    tokens.push(cur);
    let program = tokens.iter().find(|t| t.starts_with('"')).map_or(debug_form, |t| t.trim_matches('"'));
    format!("`{program}`")
}
