//! The sidecar's `serve` and `receive` command lines, defined once for every
//! binary that must agree with them: `reverser-sidecar` parses them, and
//! `kubectl reverser inject` and the injection webhook check each
//! `--sidecar-arg` against them ([`check_serve_args`]), so an injected pod
//! never crash-loops on an argument its sidecar refuses. Every flag can also
//! be set through the environment variable shown in `--help`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use rules::attribution::grace::AdaptiveGrace;
use rules::attribution::index::IndexConfig;
use rules::attribution::{GroupResource, Scope};

use crate::attribution::EngineConfig;
use crate::attribution::transport::redis::RedisOptions;
use crate::attribution::transport::{Transport, TransportConfig, TransportKind, TransportOptions, retry_ceiling};
use crate::metrics::Metrics;

/// A command line that parses but cannot run; the message says which flag
/// and what to pass instead.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// A flag, or a combination of flags, that cannot work.
    #[error("{0}")]
    Invalid(String),

    /// The transport the flags select cannot be built.
    #[error(transparent)]
    Transport(#[from] crate::attribution::transport::TransportError),

    /// A file a flag names cannot be read.
    #[error("cannot read {flag} {}: {source}", path.display())]
    Read {
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// `2s`, `500ms`, `1m30s`.
pub fn humanize(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let s = d.as_secs();
    match (s / 60, s % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

/// Parses `250ms`, `3s`, `10m`, `1h` (a bare number is seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not a duration: use e.g. 500ms, 3s, 10m, 1h"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?}; use ms, s, m or h")),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("{s:?} is not a usable duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Attribution engine and transport flags, shared by `serve` and `receive`.
#[derive(Debug, Clone, clap::Args)]
pub struct Attribution {
    /// Name each commit's author from audit facts (`true`), or author every
    /// commit as the configured committer with no audit receiver and no wait
    /// (`false`: gitops-reverser's configured-author mode, for clusters
    /// without an audit webhook).
    #[arg(
        long = "author-attribution",
        env = "REVERSER_AUTHOR_ATTRIBUTION",
        default_value_t = true,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub enabled: bool,
    /// How long a resolution waits for its fact to arrive.
    #[arg(long = "author-attribution-grace", env = "REVERSER_GRACE", default_value = "3s", value_parser = parse_duration)]
    pub grace: Duration,
    /// Stop waiting the grace for a type whose events keep resolving absent
    /// with no fact seen (see --author-attribution-adaptive-grace-misses);
    /// the type's first fact restores the full grace.
    #[arg(long = "author-attribution-adaptive-grace", env = "REVERSER_ADAPTIVE_GRACE")]
    pub adaptive_grace: bool,
    /// Absent resolutions in a row, with no fact of the type between them,
    /// after which the adaptive grace stops waiting.
    #[arg(
        long = "author-attribution-adaptive-grace-misses",
        env = "REVERSER_ADAPTIVE_GRACE_MISSES",
        default_value_t = rules::attribution::grace::DEFAULT_AFTER_MISSES,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub adaptive_grace_misses: u32,
    /// Stream retention and index horizon: older facts are never joined.
    #[arg(long = "author-attribution-ttl", env = "REVERSER_TTL", default_value = "10m", value_parser = parse_duration)]
    pub ttl: Duration,
    /// How far apart a collection delete and a removal may be for the scope tier.
    #[arg(long = "author-attribution-collection-window", env = "REVERSER_COLLECTION_WINDOW", default_value = "30s", value_parser = parse_duration)]
    pub collection_window: Duration,
    /// Facts held in the index across every type.
    #[arg(long = "author-attribution-max-facts", env = "REVERSER_MAX_FACTS", default_value_t = IndexConfig::default().max_facts)]
    pub max_facts: usize,
    /// Facts held per (audit route, group/resource).
    #[arg(long = "author-attribution-max-facts-per-type", env = "REVERSER_MAX_FACTS_PER_TYPE", default_value_t = IndexConfig::default().max_facts_per_type)]
    pub max_facts_per_type: usize,
    /// `memory` (in-process, one replica only) or `redis`. Default: redis when
    /// a Redis URL is given, memory otherwise.
    #[arg(long = "author-attribution-transport", env = "REVERSER_TRANSPORT")]
    pub transport: Option<String>,
    /// Audit-event annotation naming the route, for the bare `/audit-webhook` path.
    #[arg(long = "author-attribution-audit-route-annotation-key", env = "REVERSER_AUDIT_ROUTE_ANNOTATION_KEY")]
    pub route_annotation_key: Option<String>,
    /// Redis URL: `redis://[:password@]host:port[/db]`, `rediss://` for TLS.
    #[arg(long, env = "REVERSER_REDIS_URL", hide_env_values = true)]
    pub redis_url: Option<String>,
    /// CA certificate (PEM) to trust for a `rediss://` server.
    #[arg(long, env = "REVERSER_REDIS_CA")]
    pub redis_ca: Option<PathBuf>,
    /// Stream key prefix (gitops-reverser's default).
    #[arg(long, env = "REVERSER_STREAM_PREFIX", default_value = rules::attribution::DEFAULT_STREAM_PREFIX)]
    pub stream_prefix: String,
    /// How long an append may wait for Redis before the receiver answers 503
    /// (the API server retries; a retried batch is stored once).
    #[arg(long, env = "REVERSER_REDIS_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub redis_timeout: Duration,
    /// Accept a Redis whose `maxmemory-policy` evicts keys (`allkeys-*`,
    /// `volatile-*`): it may drop acknowledged fact streams. Refused without
    /// this flag; with it, warned about, counted and shown on `/readyz`.
    #[arg(long, env = "REVERSER_ALLOW_EVICTING_REDIS")]
    pub allow_evicting_redis: bool,
    /// At most this many types (route, group, resource) are followed at
    /// once: an Acquire past it is refused (RESOURCE_EXHAUSTED), and a
    /// Resolve of a new type answers from what the index holds without
    /// following it; both counted. Each followed type is one more stream
    /// in every read of the follower.
    #[arg(long, default_value_t = 4096, value_name = "N")]
    pub author_attribution_max_followed: usize,
    /// Replicas of this Deployment; the memory transport is refused above 1.
    #[arg(long, env = "REVERSER_REPLICA_COUNT", default_value_t = 1)]
    pub replica_count: u32,
}

impl Attribution {
    /// The author mode the flags select.
    #[cfg(feature = "git")]
    pub fn author_mode(&self) -> rules::attribution::commit::AuthorMode {
        use rules::attribution::commit::AuthorMode;
        if self.enabled { AuthorMode::Attributed } else { AuthorMode::Configured }
    }

    /// With attribution off, flags that only configure the fact path are
    /// refused rather than silently unused (as gitops-reverser refuses an
    /// audit route annotation key without attribution, cmd/main.go:703-709).
    pub fn check_configured_author(&self) -> Result<(), ArgsError> {
        if self.enabled {
            return Ok(());
        }
        let unused = [
            (self.redis_url.is_some(), "--redis-url"),
            (self.transport.is_some(), "--author-attribution-transport"),
            (self.route_annotation_key.is_some(), "--author-attribution-audit-route-annotation-key"),
        ];
        match unused.iter().find(|(set, _)| *set) {
            Some((_, flag)) => Err(ArgsError::Invalid(format!(
                "{flag} has no use with --author-attribution=false: that mode reads no audit facts and \
                 authors every commit as the configured committer; drop {flag}, or turn attribution on"
            ))),
            None => Ok(()),
        }
    }

    pub fn engine_config(&self) -> EngineConfig {
        EngineConfig {
            grace: self.grace,
            index: IndexConfig {
                ttl_ms: self.ttl.as_millis() as u64,
                collection_window_ms: self.collection_window.as_millis() as u64,
                max_facts: self.max_facts,
                max_facts_per_type: self.max_facts_per_type,
            },
            adaptive: self.adaptive_grace.then_some(AdaptiveGrace { after_misses: self.adaptive_grace_misses }),
        }
    }

    /// The transport these flags select, with `--redis-ca` read.
    pub fn transport_options(&self) -> Result<TransportOptions, ArgsError> {
        let mut options = self.transport_options_unread()?;
        if let (Some(redis), Some(path)) = (options.redis.as_mut(), &self.redis_ca) {
            let pem = std::fs::read(path).map_err(|source| ArgsError::Read {
                flag: "--redis-ca",
                path: path.clone(),
                source,
            })?;
            redis.ca_cert_pem = Some(pem);
        }
        Ok(options)
    }

    /// The transport options without reading any file: what can be checked
    /// away from the pod the sidecar will run in.
    fn transport_options_unread(&self) -> Result<TransportOptions, ArgsError> {
        let kind = match &self.transport {
            Some(t) => t.parse::<TransportKind>()?,
            None if self.redis_url.is_some() => TransportKind::Redis,
            None => TransportKind::Memory,
        };
        let redis = self.redis_url.as_ref().map(|url| RedisOptions { url: url.clone(), ca_cert_pem: None });
        let defaults = TransportConfig::default();
        let config = TransportConfig {
            prefix: self.stream_prefix.clone(),
            ttl: self.ttl,
            response_timeout: self.redis_timeout,
            allow_evicting: self.allow_evicting_redis,
            retry_max: retry_ceiling(self.grace, defaults.retry_min),
            ..defaults
        };
        Ok(TransportOptions { kind, replica_count: self.replica_count, redis, config })
    }
}

/// The audit receiver's listener and TLS material.
#[derive(Debug, Clone, clap::Args)]
pub struct Receiver {
    /// Where the audit webhook listens (HTTPS, client certificate required);
    /// `off` runs no receiver in this process.
    #[arg(long, env = "REVERSER_AUDIT_LISTEN", default_value = "127.0.0.1:9443")]
    pub audit_listen: String,
    /// Server certificate (PEM). Without it, a development CA and
    /// certificates are generated into --dev-certs-dir.
    #[arg(long, env = "REVERSER_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Server private key (PEM).
    #[arg(long, env = "REVERSER_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// CA (PEM) that must have signed the API server's client certificate.
    #[arg(long, env = "REVERSER_AUDIT_CLIENT_CA")]
    pub audit_client_ca: Option<PathBuf>,
    /// Where development certificates are generated when no TLS paths are given.
    #[arg(long, env = "REVERSER_DEV_CERTS_DIR", default_value = "reverser-dev-certs")]
    pub dev_certs_dir: PathBuf,
    /// Largest audit batch accepted, in bytes (413 above).
    #[arg(long, env = "REVERSER_AUDIT_BODY_LIMIT", default_value_t = 16 * 1024 * 1024)]
    pub audit_body_limit: usize,
    /// A connection with no request in flight this long is closed: a
    /// request head sent slowly (or never finished) and an idle keep-alive.
    #[arg(long, env = "REVERSER_AUDIT_HEADER_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub audit_header_timeout: Duration,
    /// The whole body of an audit batch must arrive within this (408 after).
    #[arg(long, env = "REVERSER_AUDIT_BODY_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub audit_body_timeout: Duration,
    /// Bind a client certificate name (subject CN or a subjectAltName) to
    /// the routes it may post to (`*`: all), for clusters sharing one audit
    /// CA; repeatable. With any binding, an unbound certificate posts nowhere.
    #[arg(long = "audit-route-binding", value_name = "NAME=ROUTE[,ROUTE...]")]
    pub audit_route_bindings: Vec<String>,
}

impl Receiver {
    pub fn listen(&self) -> Result<Option<SocketAddr>, ArgsError> {
        if self.audit_listen == "off" {
            return Ok(None);
        }
        self.audit_listen.parse().map(Some).map_err(|_| {
            ArgsError::Invalid(format!("--audit-listen {:?} is not host:port (or `off`)", self.audit_listen))
        })
    }

    /// The listen address, and the CA that must have signed the API
    /// server's client certificate when the receiver serves its own
    /// certificate (`--tls-cert`).
    pub fn check(&self) -> Result<(), ArgsError> {
        self.listen()?;
        if self.tls_cert.is_some() && self.audit_client_ca.is_none() {
            return Err(ArgsError::Invalid(
                "--audit-client-ca is required with --tls-cert: the receiver only accepts clients \
                 whose certificate the audit CA signed"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// The operational listener: /metrics, /healthz, /readyz.
#[derive(Debug, Clone, clap::Args)]
pub struct Ops {
    /// Plain HTTP for /metrics, /healthz and /readyz.
    #[arg(long, env = "REVERSER_METRICS_LISTEN", default_value = "127.0.0.1:9090")]
    pub metrics_listen: SocketAddr,
    /// At most this many types (group, resource) label the per-type
    /// metrics; the rest are counted under the type `_other` (and on
    /// metrics_label_types_refused), so junk types cannot grow /metrics.
    #[arg(long, default_value_t = crate::metrics::DEFAULT_MAX_TYPES, value_name = "N")]
    pub metrics_max_types: usize,
}

/// Git authoring: the sidecar's `Commit` call writes the mirror.
#[derive(Debug, Clone, clap::Args)]
pub struct Git {
    /// Author for this GitTarget (NAMESPACE/NAME): its GitProvider gives the
    /// remote, branch, credentials, committer, message templates and
    /// signing; documents go under its spec.path. The --git-* flags below
    /// then only set the local clone's directory.
    #[arg(long, env = "REVERSER_GIT_TARGET", value_name = "NAMESPACE/NAME")]
    pub git_target: Option<String>,
    /// Kubeconfig for reading the GitTarget (default: $KUBECONFIG, then
    /// ~/.kube/config, then the in-cluster service account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// With --git-target: how long each read of the cluster may wait for
    /// the API server (e.g. 5s); 0: 10s to connect and 60s without a byte.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_duration)]
    pub request_timeout: std::time::Duration,
    /// The local clone the sidecar commits into (created when absent).
    /// Without it, `Commit` is refused and only `Resolve` is served.
    #[arg(long, env = "REVERSER_GIT_REPO")]
    pub git_repo: Option<PathBuf>,
    /// The branch commits land on.
    #[arg(long, env = "REVERSER_GIT_BRANCH", default_value = "main")]
    pub git_branch: String,
    /// Where to push: file://, https:// (with --git-token) or ssh.
    #[arg(long, env = "REVERSER_GIT_REMOTE")]
    pub git_remote: Option<String>,
    /// HTTPS token for the remote (the password of basic auth).
    #[arg(long, env = "REVERSER_GIT_TOKEN", hide_env_values = true)]
    pub git_token: Option<String>,
    /// Username sent with the token (GitHub: x-access-token; GitLab: oauth2).
    #[arg(long, env = "REVERSER_GIT_TOKEN_USER", default_value = "x-access-token")]
    pub git_token_user: String,
    /// The committer's name: fixed, never the author (with --git-target,
    /// the GitProvider's spec.commit.committer instead).
    #[arg(long, env = "REVERSER_GIT_COMMITTER_NAME", default_value = "reverser")]
    pub git_committer_name: String,
    /// The committer's email (with --git-target, the GitProvider's
    /// spec.commit.committer instead).
    #[arg(long, env = "REVERSER_GIT_COMMITTER_EMAIL", default_value = "reverser@users.noreply.reverser.invalid")]
    pub git_committer_email: String,
    /// More types written only encrypted (or skipped), besides Secrets:
    /// comma-separated `resource` or `group/resource`, as gitops-reverser's
    /// flag of the same name.
    #[arg(long, env = "REVERSER_ADDITIONAL_SENSITIVE_RESOURCES", default_value = "", value_parser = parse_sensitive)]
    pub additional_sensitive_resources: rules::mirror::select::SensitiveTypes,
    /// The sops binary that seals sensitive documents (a GitTarget's
    /// spec.encryption).
    #[arg(long, env = "REVERSER_SOPS_BINARY", default_value = "sops")]
    pub sops_binary: PathBuf,
}

fn parse_sensitive(s: &str) -> Result<rules::mirror::select::SensitiveTypes, String> {
    rules::mirror::select::SensitiveTypes::parse(s)
}

impl Git {
    /// `--git-target` as (namespace, name).
    pub fn target(&self) -> Result<Option<(String, String)>, ArgsError> {
        self.git_target.as_deref().map(parse_git_target).transpose()
    }

    /// The writer `--git-repo` and friends describe (none without a repo).
    #[cfg(feature = "git")]
    pub fn writer_config(&self) -> Option<crate::attribution::commit::WriterConfig> {
        use crate::attribution::commit::{Identity, RemoteAuth, RemoteConfig, WriterConfig};
        let repo_dir = self.git_repo.clone()?;
        let remote = self.git_remote.as_ref().map(|url| {
            let mut r = RemoteConfig::new(url.clone());
            if let Some(token) = &self.git_token {
                r.auth = RemoteAuth::Token { username: self.git_token_user.clone(), token: token.clone() };
            }
            r
        });
        Some(WriterConfig {
            remote,
            sensitive: self.additional_sensitive_resources.clone(),
            ..WriterConfig::new(
                repo_dir,
                self.git_branch.clone(),
                Identity::new(&self.git_committer_name, &self.git_committer_email),
            )
        })
    }
}

/// `reverser-sidecar serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub attribution: Attribution,
    #[command(flatten)]
    pub receiver: Receiver,
    #[command(flatten)]
    pub ops: Ops,
    #[command(flatten)]
    pub git: Git,
    /// The Unix socket the watcher talks to (gRPC, reverser.v1).
    #[arg(long, env = "REVERSER_SOCKET", default_value = "reverser.sock")]
    pub socket: PathBuf,
    /// Socket file mode (octal).
    #[arg(long, env = "REVERSER_SOCKET_MODE", default_value = "660", value_parser = parse_mode)]
    pub socket_mode: u32,
    /// Follow these types from the start: `route:group/resource`
    /// (`lab:configmaps`, `prod:apps/deployments`); repeatable. A watcher's
    /// first Resolve of a type follows it too.
    #[arg(long = "follow", env = "REVERSER_FOLLOW", value_delimiter = ',', value_parser = parse_follow)]
    pub follow: Vec<Scope>,
}

impl ServeArgs {
    /// Everything `serve` refuses before it starts that needs no file, no
    /// network and no cluster: the listen address, the transport (and the
    /// memory transport with several replicas), the TLS flags, the GitTarget.
    pub fn check(&self) -> Result<(), ArgsError> {
        self.receiver.check()?;
        self.attribution.check_configured_author()?;
        Transport::build(self.attribution.transport_options_unread()?, Arc::new(Metrics::new()))?;
        self.git.target()?;
        Ok(())
    }
}

/// `reverser-sidecar receive`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReceiveArgs {
    #[command(flatten)]
    pub attribution: Attribution,
    #[command(flatten)]
    pub receiver: Receiver,
    #[command(flatten)]
    pub ops: Ops,
}

/// `--git-target NAMESPACE/NAME` (of `serve` and `watch`).
pub fn parse_git_target(s: &str) -> Result<(String, String), ArgsError> {
    match s.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns.to_owned(), name.to_owned()))
        }
        _ => Err(ArgsError::Invalid(format!("--git-target {s:?} is not NAMESPACE/NAME (e.g. mirror/prod)"))),
    }
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8).map_err(|_| format!("{s:?} is not an octal file mode (e.g. 660)"))
}

fn parse_follow(s: &str) -> Result<Scope, String> {
    let (route, gr) = s
        .split_once(':')
        .filter(|(r, gr)| !r.is_empty() && !gr.is_empty())
        .ok_or_else(|| format!("{s:?} is not route:group/resource (e.g. lab:apps/deployments)"))?;
    Ok(Scope::new(route, GroupResource::from_path_form(gr)))
}

/// The sidecar's command line as far as `serve` goes: the global logging
/// flags, then `serve` and its flags.
#[derive(Debug, Parser)]
#[command(name = "reverser-sidecar")]
struct ServeLine {
    #[command(flatten)]
    _log: crate::telemetry::LogArgs,
    #[command(subcommand)]
    command: ServeOnly,
}

#[derive(Debug, Subcommand)]
enum ServeOnly {
    Serve(ServeArgs),
}

/// Checks `reverser-sidecar <args>` (`args` starting with `serve`) the way
/// the sidecar would at startup, with the sidecar's own parser and
/// [`ServeArgs::check`]. The checking process's environment plays no part
/// (the pod's is another): `env` lists the variables the pod will set, as
/// (name, placeholder value), e.g. `REVERSER_REDIS_URL` from a Secret.
/// Returns the sidecar's refusal, in its own words.
pub fn check_serve_args(args: &[String], env: &[(&str, &str)]) -> Result<(), String> {
    parse_serve_args(args, env).map(drop)
}

/// [`check_serve_args`], returning what `serve` would run with.
fn parse_serve_args(args: &[String], env: &[(&str, &str)]) -> Result<ServeArgs, String> {
    let mut cmd = ServeLine::command().mut_args(|a| a.env(None::<&str>));
    cmd = cmd.mut_subcommand("serve", |s| s.mut_args(|a| a.env(None::<&str>)));
    let mut argv: Vec<String> = vec!["reverser-sidecar".into()];
    argv.extend(args.iter().cloned());
    // A variable the pod sets stands for its flag, unless the flag is given.
    let serve = ServeLine::command();
    let serve = serve.find_subcommand("serve").expect("the serve subcommand is defined above");
    for (name, value) in env {
        let flag = serve.get_arguments().find(|a| a.get_env().is_some_and(|e| e == *name)).and_then(|a| a.get_long());
        if let Some(long) = flag
            && !args.iter().any(|a| a == &format!("--{long}") || a.starts_with(&format!("--{long}=")))
        {
            argv.push(format!("--{long}={value}"));
        }
    }
    let matches = cmd.try_get_matches_from(argv).map_err(|e| clap_message(&e) + &similar_flag(&e, serve))?;
    let Some(("serve", sub)) = matches.subcommand() else {
        return Err("the sidecar's arguments must start with `serve`".into());
    };
    let parsed = ServeArgs::from_arg_matches(sub).map_err(|e| clap_message(&e))?;
    parsed.check().map_err(|e| e.to_string())?;
    Ok(parsed)
}

/// For an unknown `--flag`, the sidecar's flags whose name ends with or
/// contains it (`--transport` is `--author-attribution-transport`), which
/// clap's edit-distance tip does not find.
fn similar_flag(e: &clap::Error, serve: &clap::Command) -> String {
    use clap::error::{ContextKind, ContextValue};
    let Some(ContextValue::String(given)) = e.get(ContextKind::InvalidArg) else { return String::new() };
    let Some(name) = given.strip_prefix("--").map(|n| n.split('=').next().unwrap_or(n)) else { return String::new() };
    if name.len() < 3 {
        return String::new();
    }
    let known: Vec<String> = serve
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|l| l.ends_with(&format!("-{name}")) || l.contains(name))
        .map(|l| format!("--{l}"))
        .collect();
    if known.is_empty() { String::new() } else { format!("; did you mean {}?", known.join(" or ")) }
}

/// Checks the sidecar an injection adds (`rules::inject`): its arguments as
/// `serve` parses them, with the environment the injection gives it
/// (`REVERSER_REDIS_URL` from a Secret, whose value only the pod knows).
pub fn check_injected_sidecar(options: &rules::inject::InjectOptions) -> Result<(), String> {
    injected_serve_args(options).map(drop)
}

fn injected_serve_args(options: &rules::inject::InjectOptions) -> Result<ServeArgs, String> {
    let env = match options.redis_url_secret {
        Some(_) => vec![(rules::inject::REDIS_URL_ENV, "redis://from-a-secret.invalid:6379")],
        None => Vec::new(),
    };
    parse_serve_args(&rules::inject::sidecar_args(options), &env)
}

/// [`check_injected_sidecar`], then what `kubectl reverser inject` adds: the
/// sidecar has a fact source (without one every commit would be authored
/// `unknown`), and no password shows in the pod spec.
pub fn check_injected_fact_source(options: &rules::inject::InjectOptions) -> Result<(), InjectRefusal> {
    let parsed = injected_serve_args(options).map_err(InjectRefusal::Args)?;
    if options.redis_url_secret.is_none()
        && let Some(url) = &parsed.attribution.redis_url
        && crate::redact::redact_url(url) != *url
    {
        return Err(InjectRefusal::PasswordInSpec);
    }
    // Configured-author mode needs no fact: the committer authors everything.
    if parsed.attribution.enabled && parsed.attribution.redis_url.is_none() && parsed.receiver.audit_listen == "off" {
        return Err(InjectRefusal::NoFactSource);
    }
    Ok(())
}

/// Why `inject` will not write a sidecar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InjectRefusal {
    /// `serve` would refuse its arguments: the pod would crash-loop.
    #[error("{0}")]
    Args(String),
    /// Neither Redis nor an audit listener: no fact could ever arrive.
    #[error(
        "the sidecar would have no fact source: it listens for no audit webhook and reads no Redis, so every commit \
         would be authored `unknown`. Pass --redis-url-secret NAME/KEY (a Secret in the workload's namespace holding \
         the URL of the Redis the chart's receiver publishes to), or let the chart's webhook inject the pod (it \
         wires the receiver's Redis), or pass --sidecar-arg=--author-attribution=false to author every commit as the \
         configured committer; see docs/inject.md"
    )]
    NoFactSource,
    /// The Redis URL and its password would show in the pod spec.
    #[error(
        "--sidecar-arg=--redis-url carries a password, which would show in the pod spec to anyone who can read \
         it; put the URL in a Secret and pass --redis-url-secret NAME/KEY instead"
    )]
    PasswordInSpec,
}

/// A clap error as one line: the refusal and its tip, without the usage.
fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let text = text.split("\n\nUsage:").next().unwrap_or(&text);
    let text = text.strip_prefix("error: ").unwrap_or(text);
    text.split('\n').map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("3s").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert!(parse_duration("3 days").is_err());
        assert!(parse_duration("s").is_err());
    }

    fn check(args: &[&str]) -> Result<(), String> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        check_serve_args(&args, &[])
    }

    #[test]
    fn serve_args_are_checked_as_the_sidecar_parses_them() {
        check(&["serve", "--socket", "/s", "--socket-mode=666", "--audit-listen=off"]).unwrap();
        check(&["serve", "--author-attribution-transport", "redis", "--redis-url", "redis://r:6379"]).unwrap();
        check(&["serve", "--log-format", "json", "--follow", "default:configmaps,prod:apps/deployments"]).unwrap();

        let e = check(&["serve", "--transport", "redis"]).unwrap_err();
        assert!(e.contains("unexpected argument '--transport'") && e.contains("--author-attribution-transport"), "{e}");
        let e = check(&["serve", "--socket", "/a", "--socket", "/b"]).unwrap_err();
        assert!(e.contains("--socket") && e.contains("more than once") || e.contains("multiple"), "{e}");
        let e = check(&["serve", "--author-attribution-grace", "soon"]).unwrap_err();
        assert!(e.contains("\"soon\" is not a duration"), "{e}");
        let e = check(&["serve", "--follow", "configmaps"]).unwrap_err();
        assert!(e.contains("route:group/resource"), "{e}");
        let e = check(&["serve", "--audit-listen", "nowhere"]).unwrap_err();
        assert!(e.contains("--audit-listen \"nowhere\""), "{e}");
        let e = check(&["serve", "--author-attribution-transport", "redis"]).unwrap_err();
        assert!(e.to_lowercase().contains("redis"), "{e}");
        let e = check(&["serve", "--author-attribution-transport", "carrier-pigeon"]).unwrap_err();
        assert!(e.contains("carrier-pigeon"), "{e}");
        let e = check(&["serve", "--replica-count", "3"]).unwrap_err();
        assert!(e.contains("3"), "{e}");
        let e = check(&["serve", "--tls-cert", "c", "--tls-key", "k"]).unwrap_err();
        assert!(e.contains("--audit-client-ca"), "{e}");
        let e = check(&["serve", "--git-target", "nonamespace"]).unwrap_err();
        assert!(e.contains("NAMESPACE/NAME"), "{e}");
    }

    #[test]
    fn the_pods_environment_stands_for_its_flag() {
        let args: Vec<String> =
            ["serve", "--author-attribution-transport=redis"].iter().map(|a| a.to_string()).collect();
        assert!(check_serve_args(&args, &[]).is_err());
        check_serve_args(&args, &[("REVERSER_REDIS_URL", "redis://from-a-secret:6379")]).unwrap();
    }
}
