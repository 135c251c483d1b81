//! `reverser-sidecar inject-webhook`: the HTTPS server behind the chart's
//! MutatingWebhookConfiguration. A thin executor: every decision (which pod,
//! which patch) is `rules::inject::review`, the same rule
//! `kubectl reverser inject` applies, so the two can never disagree.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use rules::inject::{InjectOptions, SidecarMode, WatcherSelector, WebhookConfig};
use tokio::net::TcpListener;

use crate::error::{Error, Result};
use crate::tls::{self, ServerTls};

/// The path the webhook configuration's `clientConfig.service.path` names.
pub const INJECT_PATH: &str = "/inject";

/// Namespaces the injector never touches, whatever it is told (issue 8:
/// "never kube-system").
const ALWAYS_EXCLUDED: &str = "kube-system";

/// A pod's AdmissionReview is bounded by the API server's own request limit
/// (3 MiB); anything larger is not from an API server.
const BODY_LIMIT: usize = 3 * 1024 * 1024;

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Where the HTTPS webhook listens (port 0 picks a free one; the bound
    /// address is logged).
    #[arg(long, env = "REVERSER_INJECT_LISTEN", default_value = "0.0.0.0:9443")]
    pub listen: SocketAddr,
    /// Serving certificate (PEM), the one the webhook's caBundle vouches for.
    #[arg(long, env = "REVERSER_TLS_CERT")]
    pub tls_cert: PathBuf,
    /// Serving private key (PEM).
    #[arg(long, env = "REVERSER_TLS_KEY")]
    pub tls_key: PathBuf,
    /// Image of the injected sidecar.
    #[arg(long, env = "REVERSER_SIDECAR_IMAGE", default_value_t = rules::inject::default_image())]
    pub sidecar_image: String,
    /// Inject a plain container instead of a native sidecar (an init
    /// container with restartPolicy Always).
    #[arg(long)]
    pub plain_container: bool,
    /// Hand the socket only to this container (default: every container).
    #[arg(long)]
    pub watcher_container: Option<String>,
    /// An argument appended to the sidecar's `serve --socket <path>`, one of
    /// `reverser-sidecar serve --help`'s (checked at startup against the
    /// sidecar's own parser); repeat for several.
    #[arg(long = "sidecar-arg", allow_hyphen_values = true)]
    pub sidecar_args: Vec<String>,
    /// Give every injected sidecar its Redis URL from this Secret key
    /// (NAME/KEY, looked up in the pod's namespace) as REVERSER_REDIS_URL.
    #[arg(long, env = "REVERSER_SIDECAR_REDIS_URL_SECRET", value_name = "NAME/KEY")]
    pub sidecar_redis_url_secret: Option<rules::inject::SecretKeyRef>,
    /// A namespace never injected; repeat for several. kube-system always is.
    #[arg(long = "exclude-namespace")]
    pub exclude_namespaces: Vec<String>,
    /// Inject only pods labelled reverser.dev/inject=enabled, whatever the
    /// webhook configuration's selectors let through.
    #[arg(long)]
    pub require_opt_in_label: bool,
}

/// The injection rule's configuration from the flags: the same
/// `InjectOptions` `kubectl reverser inject` builds from its own flags.
pub fn webhook_config(args: &Args) -> WebhookConfig {
    let mut excluded = vec![ALWAYS_EXCLUDED.to_string()];
    for ns in &args.exclude_namespaces {
        if !excluded.contains(ns) {
            excluded.push(ns.clone());
        }
    }
    WebhookConfig {
        inject: InjectOptions {
            image: args.sidecar_image.clone(),
            mode: if args.plain_container { SidecarMode::Plain } else { SidecarMode::Native },
            watcher: match &args.watcher_container {
                Some(name) => WatcherSelector::Named(name.clone()),
                None => WatcherSelector::All,
            },
            extra_args: args.sidecar_args.clone(),
            redis_url_secret: args.sidecar_redis_url_secret.clone(),
            ..InjectOptions::default()
        },
        require_opt_in_label: args.require_opt_in_label,
        excluded_namespaces: excluded,
    }
}

/// `POST /inject` (AdmissionReview in, AdmissionReview out), and the probes.
pub fn router(config: WebhookConfig) -> Router {
    Router::new()
        .route(INJECT_PATH, post(inject))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(|| async { "ok\n" }))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(Arc::new(config))
}

async fn inject(State(config): State<Arc<WebhookConfig>>, body: Bytes) -> impl IntoResponse {
    // Always a 200 with an AdmissionReview: `review` answers even a review it
    // cannot act on (allowed, with status.message saying why), so the API
    // server's failurePolicy is reserved for an injector that is down.
    let review = rules::inject::review(&body, &config);
    let response = &review["response"];
    if response.get("patch").is_some() {
        tracing::info!(uid = %response["uid"], "injected the reverser sidecar");
    } else if let Some(message) = response.pointer("/status/message").and_then(serde_json::Value::as_str) {
        tracing::warn!(uid = %response["uid"], message, "admission review not injected");
    } else {
        tracing::debug!(uid = %response["uid"], "admitted without injecting");
    }
    match serde_json::to_vec(&review) {
        Ok(bytes) => (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], bytes),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("cannot encode the AdmissionReview response: {e}\n").into_bytes(),
        ),
    }
}

/// Refuses `--sidecar-arg`s the injected sidecar would refuse: every pod
/// the webhook touched would crash-loop.
pub fn check(config: &WebhookConfig) -> Result<()> {
    runtime::cli::check_injected_sidecar(&config.inject).map_err(|why| {
        Error::Config(format!(
            "--sidecar-arg: the injected `reverser-sidecar serve` would refuse its arguments {:?} and every \
             injected pod would crash-loop: {why}; see `reverser-sidecar serve --help`",
            config.inject.extra_args
        ))
    })
}

/// Runs the webhook until SIGTERM.
pub async fn run(args: Args) -> Result<()> {
    let webhook = webhook_config(&args);
    check(&webhook)?;
    let config = tls::server_config(&ServerTls {
        cert: args.tls_cert.clone(),
        key: args.tls_key.clone(),
        // The API server authenticates the webhook, not the reverse: a
        // webhook configuration has no client certificate to present.
        client_ca: None,
    })?;
    let listener = TcpListener::bind(args.listen).await.map_err(|source| Error::Listen {
        what: "the injection webhook",
        addr: args.listen.to_string(),
        source,
    })?;
    let addr = listener.local_addr().map_err(Error::io("reading the injection webhook's address"))?;
    tracing::info!(
        %addr,
        path = INJECT_PATH,
        image = %webhook.inject.image,
        excluded = %webhook.excluded_namespaces.join(", "),
        "inject-webhook listening"
    );
    tls::serve(listener, config, router(webhook), tls::ClientTimeouts::default(), runtime::shutdown::terminated())
        .await;
    tracing::info!("inject-webhook stopped");
    Ok(())
}

#[cfg(test)]
mod tests;
