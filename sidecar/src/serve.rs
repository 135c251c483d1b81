//! `serve` (the sidecar) and `receive` (the audit receiver alone): wiring,
//! the startup banner, and shutdown on SIGTERM: stop accepting, let
//! in-flight resolutions return their best answer, remove the socket, exit 0.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use shared::attribution::clock::SystemClock;
use shared::attribution::transport::{FactFollower, Transport, TransportKind};
use shared::attribution::{Engine, GroupResource, Scope};
use shared::metrics::Metrics;
use shared::proto::attribution_server::AttributionServer;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;

use crate::api::Api;
use crate::config;
use crate::devcerts;
use crate::receiver::{self, ReceiverState};
use crate::tls::{self, ServerTls};

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub attribution: config::Attribution,
    #[command(flatten)]
    pub receiver: config::Receiver,
    #[command(flatten)]
    pub ops: config::Ops,
    #[command(flatten)]
    pub git: config::Git,
    /// The Unix socket the watcher talks to (gRPC, reverser.v1).
    #[arg(long, env = "REVERSER_SOCKET", default_value = "reverser.sock")]
    pub socket: PathBuf,
    /// Socket file mode (octal).
    #[arg(long, env = "REVERSER_SOCKET_MODE", default_value = "660", value_parser = parse_mode)]
    pub socket_mode: u32,
    /// Follow these types from the start: `route:group/resource`
    /// (`lab:configmaps`, `prod:apps/deployments`); repeatable. A watcher's
    /// first Resolve of a type follows it too.
    #[arg(long = "follow", env = "REVERSER_FOLLOW", value_delimiter = ',')]
    pub follow: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct ReceiveArgs {
    #[command(flatten)]
    pub attribution: config::Attribution,
    #[command(flatten)]
    pub receiver: config::Receiver,
    #[command(flatten)]
    pub ops: config::Ops,
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8).map_err(|_| format!("{s:?} is not an octal file mode (e.g. 660)"))
}

fn parse_follow(s: &str) -> Result<Scope, String> {
    let (route, gr) = s
        .split_once(':')
        .filter(|(r, gr)| !r.is_empty() && !gr.is_empty())
        .ok_or_else(|| format!("--follow {s:?} is not route:group/resource (e.g. lab:apps/deployments)"))?;
    Ok(Scope::new(route, GroupResource::from_path_form(gr)))
}

/// Resolves on SIGTERM or SIGINT.
pub(crate) async fn terminated() {
    use tokio::signal::unix::{SignalKind, signal};
    match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

async fn wait(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

async fn bind(addr: std::net::SocketAddr, what: &str) -> Result<TcpListener, String> {
    TcpListener::bind(addr).await.map_err(|e| format!("cannot listen for {what} on {addr}: {e}"))
}

/// Binds the Unix socket, replacing a stale file (one no process answers on).
fn bind_socket(path: &Path, mode: u32) -> Result<UnixListener, String> {
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(format!(
                "{} is in use by a running process: stop it, or pass another --socket",
                path.display()
            ));
        }
        std::fs::remove_file(path).map_err(|e| format!("cannot replace the stale socket {}: {e}", path.display()))?;
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let l = UnixListener::bind(path).map_err(|e| format!("cannot bind the socket {}: {e}", path.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("cannot set mode {mode:o} on {}: {e}", path.display()))?;
    Ok(l)
}

struct Tls {
    server: ServerTls,
    dev: Option<devcerts::DevCerts>,
}

fn receiver_tls(r: &config::Receiver) -> Result<Tls, String> {
    match (&r.tls_cert, &r.tls_key) {
        (Some(cert), Some(key)) => {
            let client_ca = r.audit_client_ca.clone().ok_or(
                "--audit-client-ca is required with --tls-cert: the receiver only accepts clients \
                 whose certificate the audit CA signed",
            )?;
            Ok(Tls {
                server: ServerTls { cert: cert.clone(), key: key.clone(), client_ca: Some(client_ca) },
                dev: None,
            })
        }
        _ => {
            let dev = devcerts::ensure(&r.dev_certs_dir)?;
            let client_ca = Some(r.audit_client_ca.clone().unwrap_or_else(|| dev.ca()));
            Ok(Tls { server: ServerTls { cert: dev.server_cert(), key: dev.server_key(), client_ca }, dev: Some(dev) })
        }
    }
}

/// A URL with any userinfo password hidden, fit for printing.
fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://***@{}", &url[..s], &url[at + 1..]),
        _ => url.to_owned(),
    }
}

fn abs(p: &Path) -> String {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()).display().to_string()
}

fn curl_hint(dev: &devcerts::DevCerts, addr: std::net::SocketAddr) -> String {
    let event = r#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"stage":"ResponseComplete","verb":"create","auditID":"demo-1","user":{"username":"alice"},"objectRef":{"resource":"configmaps","namespace":"default","name":"demo","apiVersion":"v1"},"responseStatus":{"code":201},"responseObject":{"metadata":{"name":"demo","namespace":"default","uid":"00000000-0000-0000-0000-000000000001","resourceVersion":"1"}}}]}"#;
    format!(
        "curl -sS --cacert {} --cert {} --key {} -H 'Content-Type: application/json' --data '{event}' https://localhost:{}/audit-webhook/local",
        abs(&dev.ca()),
        abs(&dev.client_cert()),
        abs(&dev.client_key()),
        addr.port()
    )
}

/// Starts the mTLS audit receiver on `addr`; returns its banner lines.
async fn start_receiver(
    addr: std::net::SocketAddr,
    r: &config::Receiver,
    a: &config::Attribution,
    transport: &Transport,
    metrics: &Arc<Metrics>,
    tasks: &mut tokio::task::JoinSet<()>,
    stop: &watch::Receiver<bool>,
) -> Result<String, String> {
    let tls = receiver_tls(r)?;
    let config = tls::server_config(&tls.server)?;
    let listener = bind(addr, "the audit webhook").await?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let state = Arc::new(ReceiverState {
        publisher: transport.publisher(),
        metrics: metrics.clone(),
        route_annotation_key: a.route_annotation_key.clone(),
        body_limit: r.audit_body_limit,
    });
    tasks.spawn(tls::serve(listener, config, receiver::router(state), wait(stop.clone())));
    let mut line = format!("audit webhook  https://{local}/audit-webhook/<route> (client certificate required)");
    if let Some(dev) = &tls.dev {
        line += &format!(
            "\ndev certs      {} (development CA; pass --tls-cert/--tls-key/--audit-client-ca in production)\ntry it         {}",
            abs(&dev.dir),
            curl_hint(dev, local)
        );
    }
    Ok(line)
}

pub async fn serve(args: ServeArgs) -> Result<(), String> {
    let metrics = Arc::new(Metrics::new());
    let opts = args.attribution.transport_options()?;
    let transport = Transport::build(opts, metrics.clone()).map_err(|e| e.to_string())?;
    let follow: Vec<Scope> = args.follow.iter().map(|s| parse_follow(s)).collect::<Result<_, _>>()?;
    let engine = Arc::new(Engine::new(args.attribution.engine_config(), Arc::new(SystemClock), metrics.clone()));
    let follower = transport.follower();
    let (stop_tx, stop_rx) = watch::channel(false);

    let mut tasks = tokio::task::JoinSet::new();
    {
        let (f, sink) = (follower.clone(), engine.clone());
        tokio::spawn(async move { f.follow(sink).await });
    }
    {
        // Expiry is decided on read; this only bounds memory.
        let e = engine.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(10));
            loop {
                tick.tick().await;
                e.sweep();
            }
        });
    }

    let git = match args.git.writer_config() {
        Some(c) => {
            let dir = c.repo_dir.display().to_string();
            let w = tokio::task::spawn_blocking(move || {
                shared::attribution::commit::GitWriter::open(c).map_err(|e| e.to_string())
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("cannot open the Git mirror {dir}: {e}"))?;
            Some(w.with_metrics(metrics.clone()))
        }
        None => None,
    };
    let git_line = args.git.git_repo.as_ref().map(|d| {
        let remote = args.git.git_remote.as_deref().map(|r| format!(", pushing to {}", redact(r))).unwrap_or_default();
        format!("git mirror     {} (branch {}{remote})", abs(d), args.git.git_branch)
    });
    let api = Arc::new(Api::new(engine.clone(), follower.clone(), git));
    for s in &follow {
        api.acquire(s);
    }

    // Receiver (optional in this process).
    let receiver_line = match args.receiver.listen()? {
        Some(addr) => Some(
            start_receiver(addr, &args.receiver, &args.attribution, &transport, &metrics, &mut tasks, &stop_rx).await?,
        ),
        None => None,
    };

    // Ops listener.
    let ops_listener = bind(args.ops.metrics_listen, "metrics").await?;
    let ops_local = ops_listener.local_addr().map_err(|e| e.to_string())?;
    let ready = follower.caught_up();
    let ops =
        crate::ops::router(metrics.clone(), ready).merge(crate::ops::explain_router(engine.clone(), follower.clone()));
    let stop = stop_rx.clone();
    tasks.spawn(async move {
        if let Err(e) = axum::serve(ops_listener, ops).with_graceful_shutdown(wait(stop)).await {
            tracing::error!(error = %e, "metrics listener failed");
        }
    });

    // Unix socket API.
    let socket = args.socket.clone();
    let uds = bind_socket(&socket, args.socket_mode)?;
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<AttributionServer<Api>>().await;
    let stop = stop_rx.clone();
    let api_service = AttributionServer::from_arc(api);
    tasks.spawn(async move {
        let incoming = tokio_stream::wrappers::UnixListenerStream::new(uds);
        if let Err(e) = tonic::transport::Server::builder()
            .add_service(health_service)
            .add_service(api_service)
            .serve_with_incoming_shutdown(incoming, wait(stop))
            .await
        {
            tracing::error!(error = %e, "socket API failed");
        }
    });

    println!("reverser-sidecar {} serving", env!("CARGO_PKG_VERSION"));
    println!("transport      {}", transport.kind().label());
    println!("socket         {} (gRPC reverser.v1 + grpc.health.v1)", abs(&socket));
    if let Some(l) = receiver_line {
        println!("{l}");
    }
    if let Some(l) = git_line {
        println!("{l}");
    }
    println!("metrics        http://{ops_local}/metrics  (probes: /healthz /readyz)");

    terminated().await;
    tracing::info!("shutting down: in-flight resolutions return their best answer");
    engine.shutdown();
    stop_tx.send_replace(true);
    while tasks.join_next().await.is_some() {}
    let _ = std::fs::remove_file(&socket);
    Ok(())
}

pub async fn receive(args: ReceiveArgs) -> Result<(), String> {
    let metrics = Arc::new(Metrics::new());
    let opts = args.attribution.transport_options()?;
    if opts.kind == TransportKind::Memory {
        return Err("`receive` runs the receiver alone, so its facts must reach followers in other processes: \
                    use --author-attribution-transport redis with --redis-url (or run `serve`)"
            .into());
    }
    let transport = Transport::build(opts, metrics.clone()).map_err(|e| e.to_string())?;
    let addr = args.receiver.listen()?.ok_or("`receive` needs --audit-listen host:port")?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    let receiver_line =
        start_receiver(addr, &args.receiver, &args.attribution, &transport, &metrics, &mut tasks, &stop_rx).await?;
    let ops_listener = bind(args.ops.metrics_listen, "metrics").await?;
    let ops_local = ops_listener.local_addr().map_err(|e| e.to_string())?;
    // A receiver has no follower: it is ready once it listens.
    let ops = crate::ops::router(metrics, watch::channel(true).1);
    let stop = stop_rx.clone();
    tasks.spawn(async move {
        let _ = axum::serve(ops_listener, ops).with_graceful_shutdown(wait(stop)).await;
    });
    println!("reverser-sidecar {} receiving", env!("CARGO_PKG_VERSION"));
    println!("transport      {}", transport.kind().label());
    println!("{receiver_line}");
    println!("metrics        http://{ops_local}/metrics  (probes: /healthz /readyz)");
    terminated().await;
    stop_tx.send_replace(true);
    while tasks.join_next().await.is_some() {}
    Ok(())
}
