//! The tatara operator's REST API, found and called as tatara-cli does
//! (szymonrychu/tatara-cli `internal/client/config.go`
//! `ResolveOperatorBaseURL`, `internal/auth/token.go`): the base URL from
//! `--operator-base-url`, else `TATARA_OPERATOR_URL`, else `operatorBaseUrl`
//! in `$XDG_CONFIG_HOME/tatara/config.yaml`; the OIDC bearer token from
//! `TATARA_TOKEN`, else the store `tatara login` writes
//! (`$XDG_CONFIG_HOME/tatara/token.json`). The operator's answers are kept
//! verbatim: its handlers write `{"error": "..."}` (`internal/restapi/
//! handlers.go:41-43`), its auth middleware plain text (`internal/auth/
//! middleware.go:41-65`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::jiff::Timestamp;
use rules::ownership::takeover::TakeoverRequest;
use serde::Deserialize;
use serde_json::Value;

/// The flag that names the operator.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OperatorArgs {
    /// Base URL of the tatara operator's REST API (its Ingress or a
    /// port-forward; e.g. https://tatara.example.com/api/v1/operator). Else
    /// TATARA_OPERATOR_URL, else operatorBaseUrl in tatara-cli's
    /// $XDG_CONFIG_HOME/tatara/config.yaml. The OIDC token is TATARA_TOKEN,
    /// else the one `tatara login` stored in $XDG_CONFIG_HOME/tatara/token.json.
    #[arg(long, env = "TATARA_OPERATOR_URL", value_name = "URL")]
    pub operator_base_url: Option<String>,
}

/// Why a call to the operator did not get an answer to act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OperatorError {
    #[error(
        "no tatara operator URL: pass --operator-base-url, set TATARA_OPERATOR_URL, or set operatorBaseUrl in {config}"
    )]
    NoBaseUrl { config: String },
    #[error("the tatara operator URL {url:?} is not usable: {message}; pass an http(s) URL with --operator-base-url")]
    BadUrl { url: String, message: String },
    #[error(
        "no token for the tatara operator: set TATARA_TOKEN to an OIDC access token for it, or run `tatara login` \
         (which stores one in {path})"
    )]
    NoToken { path: String },
    #[error("the tatara operator token in {path} expired at {at}: run `tatara login` again, or set TATARA_TOKEN")]
    Expired { path: String, at: String },
    #[error("cannot read the tatara token store {path}: {message}; run `tatara login` again, or set TATARA_TOKEN")]
    BadStore { path: String, message: String },
    #[error(
        "the tatara operator at {url} did not answer: {message}; check --operator-base-url (or TATARA_OPERATOR_URL) \
         and that it is reachable (the API server's service proxy drops the bearer token: use the operator's \
         Ingress or a port-forward)"
    )]
    Unreachable { url: String, message: String },
    #[error("the tatara operator refused {what} with HTTP {status}: {message}")]
    Refused { what: String, status: u16, message: String },
    #[error("the tatara operator answered {what} with HTTP {status} and a body that is not JSON: {body}")]
    Answer { what: String, status: u16, body: String },
}

/// tatara-cli's config directory: `$XDG_CONFIG_HOME/tatara`, else
/// `$HOME/.config/tatara`.
fn config_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| PathBuf::from(".config"));
    base.join("tatara")
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileConfig {
    #[serde(default)]
    operator_base_url: String,
}

/// `ResolveOperatorBaseURL` without its default host: flag, env (both
/// through `args`), then the config file. tatara-cli falls back to its
/// author's own deployment; a kubectl plugin has no such default.
pub fn resolve_base_url(args: &OperatorArgs) -> Result<String, OperatorError> {
    let path = config_dir().join("config.yaml");
    let url = match args.operator_base_url.clone().filter(|u| !u.is_empty()) {
        Some(u) => u,
        None => std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_norway::from_str::<FileConfig>(&text).ok())
            .map(|c| c.operator_base_url)
            .filter(|u| !u.is_empty())
            .ok_or_else(|| OperatorError::NoBaseUrl { config: path.display().to_string() })?,
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(OperatorError::BadUrl { url, message: "it is not an http:// or https:// URL".into() });
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// tatara-cli's token store (`internal/auth/token.go` `Token`).
#[derive(Debug, Deserialize)]
struct StoredToken {
    #[serde(default)]
    access_token: String,
    #[serde(default)]
    expires_at: Option<String>,
}

/// The bearer token: `TATARA_TOKEN`, else the store's access token while it
/// has not expired. The store's refresh token is not used: refreshing needs
/// the CLI's issuer and client, so an expired one says to log in again.
pub fn resolve_token(now: Timestamp) -> Result<String, OperatorError> {
    if let Some(t) = std::env::var("TATARA_TOKEN").ok().filter(|t| !t.trim().is_empty()) {
        return Ok(t.trim().to_string());
    }
    let path = config_dir().join("token.json");
    let shown = path.display().to_string();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(OperatorError::NoToken { path: shown }),
        Err(e) => return Err(OperatorError::BadStore { path: shown, message: e.to_string() }),
    };
    let token: StoredToken = serde_json::from_str(&text)
        .map_err(|e| OperatorError::BadStore { path: shown.clone(), message: format!("not tatara-cli's JSON: {e}") })?;
    if token.access_token.is_empty() {
        return Err(OperatorError::NoToken { path: shown });
    }
    // Go writes an unset time as year 1: no expiry recorded.
    if let Some(at) = token.expires_at.as_deref().filter(|a| !a.starts_with("0001-")) {
        let expires: Timestamp = at.parse().map_err(|e| OperatorError::BadStore {
            path: shown.clone(),
            message: format!("expires_at {at:?} is not a time: {e}"),
        })?;
        if expires <= now {
            return Err(OperatorError::Expired { path: shown, at: at.to_string() });
        }
    }
    Ok(token.access_token)
}

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// A client of one operator.
#[derive(Debug, Clone)]
pub struct Operator {
    base: String,
    token: String,
    client: Client<Https, Full<Bytes>>,
    /// Bounds each whole call: connect, send, and the full answer.
    timeout: Duration,
}

/// What the operator answered with a 2xx.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl Operator {
    /// A client for `base` with bearer `token`; every call gives up after
    /// `timeout` (connecting included).
    pub fn new(base: String, token: String, timeout: Duration) -> Result<Self, OperatorError> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(timeout));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let https = match builder.with_provider_and_native_roots(provider.clone()) {
            Ok(b) => b.https_or_http().enable_http1().wrap_connector(http),
            // No system roots at all: plain http still works, and an https
            // operator fails its handshake with the reason.
            Err(_) => {
                let tls = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| OperatorError::BadUrl { url: base.clone(), message: e.to_string() })?
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth();
                hyper_rustls::HttpsConnectorBuilder::new()
                    .with_tls_config(tls)
                    .https_or_http()
                    .enable_http1()
                    .wrap_connector(http)
            }
        };
        let client = Client::builder(TokioExecutor::new()).build(https);
        Ok(Operator { base, token, client, timeout })
    }

    /// The base URL calls go to.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `POST /projects/{p}/scm/mr-takeover` with exactly the four keys.
    pub async fn mr_takeover(&self, project: &str, request: &TakeoverRequest) -> Result<Answer, OperatorError> {
        let path = format!("/projects/{project}/scm/mr-takeover");
        let body = serde_json::to_vec(request).unwrap_or_default();
        self.post(&path, body, &format!("the takeover of {}!{}", request.repo, request.number)).await
    }

    async fn post(&self, path: &str, body: Vec<u8>, what: &str) -> Result<Answer, OperatorError> {
        let url = format!("{}{path}", self.base);
        let req = hyper::Request::post(&url)
            .header(hyper::header::AUTHORIZATION, format!("Bearer {}", self.token))
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::ACCEPT, "application/json")
            .header(hyper::header::USER_AGENT, concat!("kubectl-tatara/", env!("CARGO_PKG_VERSION")))
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| OperatorError::BadUrl { url: url.clone(), message: e.to_string() })?;
        let unreachable = |message: String| OperatorError::Unreachable { url: self.base.clone(), message };
        let call = async {
            let resp = self.client.request(req).await.map_err(|e| unreachable(crate::error_chain(&e)))?;
            let status = resp.status().as_u16();
            let bytes = resp.into_body().collect().await.map_err(|e| unreachable(crate::error_chain(&e)))?;
            Ok::<_, OperatorError>((status, bytes.to_bytes()))
        };
        let (status, bytes) = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| unreachable(format!("no answer within {:?}", self.timeout)))??;
        let text = String::from_utf8_lossy(&bytes).trim().to_string();
        let json: Option<Value> = serde_json::from_slice(&bytes).ok();
        if (200..300).contains(&status) {
            return json.map(|body| Answer { status, body }).ok_or(OperatorError::Answer {
                what: what.to_string(),
                status,
                body: text,
            });
        }
        let message =
            json.as_ref().and_then(|v| v.get("error")).and_then(Value::as_str).map(str::to_string).unwrap_or(text);
        Err(OperatorError::Refused { what: what.to_string(), status, message })
    }
}
