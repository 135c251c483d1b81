//! Flags and environment, named after the spec's flags. Every flag can also
//! be set through the environment variable shown in `--help`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use rules::attribution::grace::AdaptiveGrace;
use rules::attribution::index::IndexConfig;
use runtime::attribution::EngineConfig;
use runtime::attribution::transport::redis::RedisOptions;
use runtime::attribution::transport::{TransportConfig, TransportKind, TransportOptions, retry_ceiling};

use crate::error::{Error, Result};

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
    /// Replicas of this Deployment; the memory transport is refused above 1.
    #[arg(long, env = "REVERSER_REPLICA_COUNT", default_value_t = 1)]
    pub replica_count: u32,
}

impl Attribution {
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

    pub fn transport_options(&self) -> Result<TransportOptions> {
        let kind = match &self.transport {
            Some(t) => t.parse::<TransportKind>()?,
            None if self.redis_url.is_some() => TransportKind::Redis,
            None => TransportKind::Memory,
        };
        let redis = match &self.redis_url {
            Some(url) => {
                let ca_cert_pem = match &self.redis_ca {
                    Some(p) => {
                        Some(std::fs::read(p).map_err(Error::io(format!("cannot read --redis-ca {}", p.display())))?)
                    }
                    None => None,
                };
                Some(RedisOptions { url: url.clone(), ca_cert_pem })
            }
            None => None,
        };
        let defaults = TransportConfig::default();
        let config = TransportConfig {
            prefix: self.stream_prefix.clone(),
            ttl: self.ttl,
            response_timeout: self.redis_timeout,
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
}

impl Receiver {
    pub fn listen(&self) -> Result<Option<SocketAddr>, String> {
        if self.audit_listen == "off" {
            return Ok(None);
        }
        self.audit_listen
            .parse()
            .map(Some)
            .map_err(|_| format!("--audit-listen {:?} is not host:port (or `off`)", self.audit_listen))
    }
}

/// The operational listener: /metrics, /healthz, /readyz.
#[derive(Debug, Clone, clap::Args)]
pub struct Ops {
    /// Plain HTTP for /metrics, /healthz and /readyz.
    #[arg(long, env = "REVERSER_METRICS_LISTEN", default_value = "127.0.0.1:9090")]
    pub metrics_listen: SocketAddr,
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
    /// The committer: fixed, never the author.
    #[arg(long, env = "REVERSER_GIT_COMMITTER_NAME", default_value = "reverser")]
    pub git_committer_name: String,
    #[arg(long, env = "REVERSER_GIT_COMMITTER_EMAIL", default_value = "reverser@users.noreply.reverser.invalid")]
    pub git_committer_email: String,
}

impl Git {
    pub fn writer_config(&self) -> Option<runtime::attribution::commit::WriterConfig> {
        use runtime::attribution::commit::{Identity, RemoteAuth, RemoteConfig, WriterConfig};
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
            ..WriterConfig::new(
                repo_dir,
                self.git_branch.clone(),
                Identity::new(&self.git_committer_name, &self.git_committer_email),
            )
        })
    }
}
