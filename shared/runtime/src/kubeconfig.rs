//! The Kubernetes client configuration every command loads the same way, as
//! kubectl does: `--kubeconfig`, else the files `$KUBECONFIG` lists (merged,
//! the missing ones skipped), else `~/.kube/config`, else (with no context
//! asked for) the in-cluster service account; then kubectl's overriding
//! flags (`--cluster`, `--user`, `--server`, `--token`, `--as`, ...).

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};

pub mod bounds;
pub mod throttle;
pub use bounds::{Bounds, Unanswered};
pub use throttle::ThrottleLayer;

/// The configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// The named file is absent, unreadable, or not a kubeconfig.
    #[error("cannot read kubeconfig {}: {cause}; check the file, or pass another with --kubeconfig", path.display())]
    Read { path: PathBuf, cause: String },

    /// The configuration holds no usable context (or not the one asked for).
    #[error("cannot load{} from {}: {cause}; check the file, or choose one with --kubeconfig and --context", context.as_deref().map(|c| format!(" context {c:?}")).unwrap_or_default(), source_name(path.as_deref()))]
    Load { path: Option<PathBuf>, context: Option<String>, cause: String },

    /// A flag overriding the configuration cannot be applied.
    #[error("{flag} {value:?}: {cause}")]
    Flag { flag: &'static str, value: String, cause: String },

    /// A remote cluster's kubeconfig (a ClusterProvider's Secret) cannot be
    /// used.
    #[error(
        "cannot use the kubeconfig in Secret {secret}: {cause}; fix the Secret the ClusterProvider's spec.kubeConfig.secretRef names"
    )]
    Remote { secret: String, cause: String },

    /// A client cannot be built from the loaded configuration (its TLS
    /// material, say).
    #[error("cannot build a Kubernetes client for {server}: {cause}; check the kubeconfig")]
    Client { server: String, cause: String },
}

fn source_name(path: Option<&Path>) -> String {
    match path {
        Some(p) => format!("kubeconfig {}", p.display()),
        None => "the kubeconfig ($KUBECONFIG or ~/.kube/config) or the in-cluster service account".into(),
    }
}

/// What kubectl's connection flags override in the loaded configuration.
/// Empty fields leave the kubeconfig's values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--context`: the kubeconfig context to use.
    pub context: Option<String>,
    /// `--cluster`: the kubeconfig cluster to use instead of the context's.
    pub cluster: Option<String>,
    /// `--user`: the kubeconfig user to use instead of the context's.
    pub user: Option<String>,
    /// `--server`: the API server's address.
    pub server: Option<String>,
    /// `--token`: a bearer token, replacing the user's credentials.
    pub token: Option<String>,
    /// `--certificate-authority`: a PEM file of the CA to trust.
    pub certificate_authority: Option<PathBuf>,
    /// `--insecure-skip-tls-verify`: do not verify the server's certificate.
    pub insecure_skip_tls_verify: bool,
    /// `--as`: the user to impersonate.
    pub impersonate: Option<String>,
    /// `--as-group`: the groups to impersonate.
    pub impersonate_groups: Vec<String>,
}

impl Overrides {
    fn names_kubeconfig_entries(&self) -> bool {
        self.context.is_some() || self.cluster.is_some() || self.user.is_some()
    }
}

/// Loads the configuration `kubeconfig` and `context` select.
pub async fn load(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<kube::Config, KubeconfigError> {
    load_with(kubeconfig, &Overrides { context: context.map(str::to_owned), ..Overrides::default() }).await
}

/// Loads the configuration `kubeconfig` and `overrides` select, as kubectl
/// does with the same flags.
pub async fn load_with(kubeconfig: Option<&Path>, overrides: &Overrides) -> Result<kube::Config, KubeconfigError> {
    let fail = |path: Option<PathBuf>, cause: String| KubeconfigError::Load {
        path,
        context: overrides.context.clone(),
        cause,
    };
    let mut config = match file(kubeconfig)? {
        Some(file) => {
            let options = KubeConfigOptions {
                context: overrides.context.clone(),
                cluster: overrides.cluster.clone(),
                user: overrides.user.clone(),
            };
            match kube::Config::from_custom_kubeconfig(file, &options).await {
                Ok(config) => config,
                // kubectl --server works with a kubeconfig that names no
                // usable context (an empty one, say).
                Err(_) if overrides.server.is_some() && !overrides.names_kubeconfig_entries() => {
                    kube::Config::new(parse_server(overrides.server.as_deref().unwrap_or_default())?)
                }
                Err(e) => return Err(fail(kubeconfig.map(Path::to_path_buf), e.to_string())),
            }
        }
        None if overrides.server.is_some() => {
            kube::Config::new(parse_server(overrides.server.as_deref().unwrap_or_default())?)
        }
        None if overrides.names_kubeconfig_entries() => {
            return Err(fail(
                None,
                "there is no kubeconfig: $KUBECONFIG names no existing file and ~/.kube/config does not exist".into(),
            ));
        }
        None => kube::Config::incluster().map_err(|e| {
            fail(None, format!("there is no kubeconfig, and no in-cluster service account either ({e})"))
        })?,
    };
    apply(&mut config, overrides)?;
    Ok(config)
}

/// A client for `config` whose every call is held to `bounds`, with the
/// server it talks to (for messages).
pub fn bounded_client(config: kube::Config, bounds: &Bounds) -> Result<(kube::Client, String), KubeconfigError> {
    let (builder, server) = bounded_builder(config, bounds)?;
    Ok((builder.build(), server))
}

/// kube's default client stack (its `GenericService`, which it does not export).
type Stack = tower::util::BoxService<
    http::Request<kube::client::Body>,
    http::Response<Box<kube::client::DynBody>>,
    tower::BoxError,
>;

/// The client stack for `config` with `bounds` applied, before any layer of
/// ours, and the server it talks to.
fn bounded_builder(
    mut config: kube::Config,
    bounds: &Bounds,
) -> Result<(kube::client::ClientBuilder<Stack>, String), KubeconfigError> {
    bounds.apply(&mut config);
    let server = config.cluster_url.to_string().trim_end_matches('/').to_owned();
    let builder = kube::client::ClientBuilder::try_from(config)
        .map_err(|e| KubeconfigError::Client { server: server.clone(), cause: crate::error_chain(&e) })?;
    Ok((builder, server))
}

/// A client for a remote cluster from the kubeconfig held in Secret
/// `secret` (already checked by `rules::mirror::source_cluster`), its calls
/// held to `bounds` and paced by `throttle`; with the server it talks to.
pub async fn remote_client(
    raw: &[u8],
    secret: &str,
    bounds: &Bounds,
    throttle: &ThrottleLayer,
) -> Result<(kube::Client, String), KubeconfigError> {
    let fail = |cause: String| KubeconfigError::Remote { secret: secret.to_owned(), cause };
    let text = std::str::from_utf8(raw).map_err(|e| fail(format!("not UTF-8 text ({e})")))?;
    let file = Kubeconfig::from_yaml(text).map_err(|e| fail(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(|e| fail(e.to_string()))?;
    let (builder, server) = bounded_builder(config, bounds)?;
    Ok((builder.with_layer(throttle).build(), server))
}

/// The kubeconfig file(s) `kubeconfig` or the environment name, read and
/// merged as [`load_with`] reads them; `None` when there is none (for
/// listing contexts, clusters and users, e.g. to complete `--context`).
pub fn file(kubeconfig: Option<&Path>) -> Result<Option<Kubeconfig>, KubeconfigError> {
    match kubeconfig {
        Some(path) => read(path).map(Some),
        None => from_env_or_home(),
    }
}

fn read(path: &Path) -> Result<Kubeconfig, KubeconfigError> {
    Kubeconfig::read_from(path).map_err(|e| KubeconfigError::Read { path: path.to_path_buf(), cause: cause(&e) })
}

/// kube's message, without the path it repeats (ours names it first).
fn cause(e: &kube::config::KubeconfigError) -> String {
    match e {
        kube::config::KubeconfigError::ReadConfig(io, _) => io.to_string(),
        other => other.to_string(),
    }
}

/// The files `$KUBECONFIG` lists that exist, merged (the first to set a
/// value wins), else `~/.kube/config` when it exists; `None` when there is
/// no file at all. kubectl skips a listed file that does not exist.
fn from_env_or_home() -> Result<Option<Kubeconfig>, KubeconfigError> {
    let listed: Vec<PathBuf> = match std::env::var_os("KUBECONFIG") {
        Some(v) => std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect(),
        None => Vec::new(),
    };
    let paths: Vec<PathBuf> = if listed.is_empty() {
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube").join("config")).into_iter().collect()
    } else {
        listed
    };
    let mut merged: Option<Kubeconfig> = None;
    for path in paths.iter().filter(|p| p.exists()) {
        let next = read(path)?;
        merged = Some(match merged {
            Some(m) => m.merge(next).map_err(|e| KubeconfigError::Read { path: path.clone(), cause: cause(&e) })?,
            None => next,
        });
    }
    Ok(merged)
}

fn parse_server(server: &str) -> Result<http::Uri, KubeconfigError> {
    let flag = |cause: String| KubeconfigError::Flag { flag: "--server", value: server.to_owned(), cause };
    // kubectl takes a bare host:port as https.
    let url = if server.contains("://") { server.to_owned() } else { format!("https://{server}") };
    let uri: http::Uri = url.parse().map_err(|e| flag(format!("not a URL ({e}); e.g. https://10.0.0.1:6443")))?;
    if uri.host().is_none() {
        return Err(flag("names no host; e.g. https://10.0.0.1:6443".into()));
    }
    Ok(uri)
}

fn apply(config: &mut kube::Config, o: &Overrides) -> Result<(), KubeconfigError> {
    if let Some(server) = &o.server {
        config.cluster_url = parse_server(server)?;
    }
    if let Some(token) = &o.token {
        // The token replaces the user's credentials, as kubectl's --token
        // does; a client certificate stays.
        let auth = &mut config.auth_info;
        auth.token = Some(token.clone().into());
        auth.token_file = None;
        auth.username = None;
        auth.password = None;
        auth.exec = None;
        auth.auth_provider = None;
    }
    if let Some(ca) = &o.certificate_authority {
        std::fs::metadata(ca).map_err(|e| KubeconfigError::Flag {
            flag: "--certificate-authority",
            value: ca.display().to_string(),
            cause: format!("{e}; pass the PEM file of the CA that signed the API server's certificate"),
        })?;
        config.root_cert = None;
        config.root_cert_file = Some(ca.clone());
    }
    if o.insecure_skip_tls_verify {
        config.accept_invalid_certs = true;
    }
    if let Some(user) = &o.impersonate {
        config.auth_info.impersonate = Some(user.clone());
    }
    if !o.impersonate_groups.is_empty() {
        config.auth_info.impersonate_groups = Some(o.impersonate_groups.clone());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
