//! `serve` (the sidecar) and `receive` (the audit receiver alone): wiring,
//! the startup banner (logged), and shutdown on SIGTERM: stop accepting, let
//! in-flight resolutions return their best answer, stop the follower and the
//! sweeper, all within a deadline, remove the socket, exit 0.

use std::path::Path;
use std::sync::Arc;

use std::time::Duration;

use rules::attribution::commit::AuthorMode;
use rules::attribution::route_binding::RouteBindings;
use runtime::attribution::Engine;
use runtime::attribution::clock::SystemClock;
use runtime::attribution::transport::{FactFollower, Transport, TransportKind};
use runtime::cli::{self, ReceiveArgs, ServeArgs};
use runtime::metrics::Metrics;
use runtime::proto::attribution_server::AttributionServer;
use runtime::redact::redact_url;
use runtime::shutdown::{Tasks, terminated};
use tokio::net::{TcpListener, UnixListener};

use crate::api::{Api, MirrorPolicy};
use crate::devcerts;
use crate::error::{Error, Result};
use crate::receiver::{self, ReceiverState};
use crate::tls::{self, ServerTls};

/// How long shutdown waits for in-flight work (resolutions answering,
/// connections draining, a Git push) before aborting it.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);

async fn bind(addr: std::net::SocketAddr, what: &'static str) -> Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|source| Error::Listen { what, addr: addr.to_string(), source })
}

/// Binds the Unix socket, replacing a stale socket (one no process answers
/// on) and refusing anything else at the path.
fn bind_socket(path: &Path, mode: u32) -> Result<UnixListener> {
    let problem = |problem: String| Error::Socket { path: path.to_path_buf(), problem };
    // Only a stale socket is ever replaced: anything else at the path is
    // someone's file, and deleting it silently would be data loss.
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_socket() {
            let what = if meta.is_dir() {
                "a directory"
            } else if meta.file_type().is_symlink() {
                "a symbolic link"
            } else if meta.is_file() {
                "a regular file"
            } else {
                "not a socket"
            };
            return Err(problem(format!(
                "it is {what}, which the sidecar never replaces: remove it yourself, or pass another --socket"
            )));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(problem("it is in use by a running process: stop it, or pass another --socket".into()));
        }
        std::fs::remove_file(path).map_err(|e| problem(format!("the stale socket cannot be removed: {e}")))?;
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| problem(format!("its directory cannot be created: {e}")))?;
    }
    let l = UnixListener::bind(path).map_err(|e| problem(format!("bind failed: {e}")))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| problem(format!("mode {mode:o} cannot be set: {e}")))?;
    Ok(l)
}

struct Tls {
    server: ServerTls,
    dev: Option<devcerts::DevCerts>,
}

fn receiver_tls(r: &cli::Receiver) -> Result<Tls> {
    // Refuses --tls-cert without --audit-client-ca (clap pairs cert and key).
    r.check()?;
    match (&r.tls_cert, &r.tls_key, &r.audit_client_ca) {
        (Some(cert), Some(key), Some(client_ca)) => Ok(Tls {
            server: ServerTls { cert: cert.clone(), key: key.clone(), client_ca: Some(client_ca.clone()) },
            dev: None,
        }),
        _ => {
            let dev = devcerts::ensure(&r.dev_certs_dir)?;
            let client_ca = Some(r.audit_client_ca.clone().unwrap_or_else(|| dev.ca()));
            Ok(Tls { server: ServerTls { cert: dev.server_cert(), key: dev.server_key(), client_ca }, dev: Some(dev) })
        }
    }
}

fn abs(p: &Path) -> String {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()).display().to_string()
}

fn curl_hint(dev: &devcerts::DevCerts, addr: std::net::SocketAddr) -> String {
    let event = r#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"stage":"ResponseComplete","verb":"create","auditID":"demo-1","user":{"username":"alice"},"objectRef":{"resource":"configmaps","namespace":"default","name":"demo","apiVersion":"v1"},"responseStatus":{"code":201},"responseObject":{"metadata":{"name":"demo","namespace":"default","uid":"00000000-0000-0000-0000-000000000001","resourceVersion":"1"}}}]}"#;
    format!(
        "curl -sS --cacert {} --cert {} --key {} -H 'Content-Type: application/json' --data '{event}' https://localhost:{}/audit-webhook/{}",
        abs(&dev.ca()),
        abs(&dev.client_cert()),
        abs(&dev.client_key()),
        addr.port(),
        rules::attribution::DEFAULT_ROUTE
    )
}

/// Starts the mTLS audit receiver on `addr` and logs where it listens.
async fn start_receiver(
    addr: std::net::SocketAddr,
    r: &cli::Receiver,
    a: &cli::Attribution,
    transport: &Transport,
    metrics: &Arc<Metrics>,
    tasks: &mut Tasks,
) -> Result<()> {
    let tls = receiver_tls(r)?;
    let config = tls::server_config(&tls.server)?;
    let listener = bind(addr, "the audit webhook (--audit-listen)").await?;
    let local = listener.local_addr().map_err(Error::io("reading the audit webhook's address"))?;
    let state = Arc::new(ReceiverState {
        publisher: transport.publisher(),
        metrics: metrics.clone(),
        route_annotation_key: a.route_annotation_key.clone(),
        body_limit: r.audit_body_limit,
        body_timeout: r.audit_body_timeout,
        bindings: RouteBindings::parse(&r.audit_route_bindings).map_err(Error::Config)?,
        warned: Default::default(),
    });
    let stopping = tasks.stopping();
    let timeouts = tls::ClientTimeouts { header: r.audit_header_timeout };
    tasks.spawn("audit receiver", tls::serve(listener, config, receiver::router(state), timeouts, stopping));
    // Values go in fields, so a JSON log carries them as data.
    tracing::info!(url = %format!("https://{local}/audit-webhook/<route>"), "audit webhook listening (client certificate required)");
    if let Some(dev) = &tls.dev {
        tracing::info!(
            dir = %abs(&dev.dir),
            "dev certs: a development CA; pass --tls-cert/--tls-key/--audit-client-ca in production"
        );
        tracing::info!(command = %curl_hint(dev, local), "try it");
    }
    Ok(())
}

/// Watches Redis (readiness, and the follower's reconnect) for the life of the process.
fn spawn_monitor(transport: &Transport, tasks: &mut Tasks) {
    if transport.health().is_some() {
        let t = transport.clone();
        tasks.spawn_until_stopped("redis monitor", async move { t.monitor().await });
    }
}

/// Serves /metrics, /healthz, /readyz (and, with an engine, /v1/explain).
async fn start_ops(addr: std::net::SocketAddr, router: axum::Router, tasks: &mut Tasks) -> Result<()> {
    let listener = bind(addr, "metrics (--metrics-listen)").await?;
    let local = listener.local_addr().map_err(Error::io("reading the metrics listener's address"))?;
    let stopping = tasks.stopping();
    tasks.spawn("metrics listener", async move {
        if let Err(e) = axum::serve(listener, router).with_graceful_shutdown(stopping).await {
            tracing::error!(error = %e, "metrics listener failed");
        }
    });
    tracing::info!(url = %format!("http://{local}/metrics"), probes = "/healthz /readyz", "metrics listening");
    Ok(())
}

pub async fn serve(args: ServeArgs) -> Result<()> {
    // The same check `kubectl reverser inject` runs on --sidecar-arg.
    args.check()?;
    let metrics = Arc::new(Metrics::new());
    metrics.set_max_types(args.ops.metrics_max_types);
    let opts = args.attribution.transport_options()?;
    let transport = Transport::build(opts, metrics.clone())?;
    let engine = Arc::new(Engine::new(args.attribution.engine_config(), Arc::new(SystemClock), metrics.clone()));
    let follower = transport.follower();
    let author_mode = args.attribution.author_mode();
    if author_mode == AuthorMode::Configured {
        tracing::info!(
            "attribution off (--author-attribution=false): every commit is authored by the configured \
             committer, nothing waits for an audit fact, and no audit receiver runs"
        );
    } else if transport.kind() == TransportKind::Memory && args.receiver.audit_listen == "off" {
        // The same refusal `kubectl reverser inject` makes, as a warning:
        // run by hand, this may be a try-out that posts no fact.
        tracing::warn!(
            "no fact source: no audit receiver (--audit-listen off) and no Redis (--redis-url), so no audit fact \
             can ever reach this sidecar and every commit is authored `unknown (attribution unresolved)`; give \
             --redis-url (the Redis a `receive` appends to), or an --audit-listen address, or \
             --author-attribution=false to author every commit as the committer"
        );
    } else if transport.kind() == TransportKind::Memory {
        tracing::warn!(
            "memory transport (no --redis-url): acknowledged facts live in this process only, and a restart \
             or kill loses every one of them (their objects then commit unattributed); use --redis-url with \
             an appendonly Redis to keep them"
        );
    }

    let mut tasks = Tasks::new();
    spawn_monitor(&transport, &mut tasks);
    {
        let (f, sink) = (follower.clone(), engine.clone());
        tasks.spawn_until_stopped("fact follower", async move { f.follow(sink).await });
    }

    let (writer, policy, secrets) = match &args.git.git_target {
        Some(target) => {
            let (config, policy, loaded) = crate::target::writer_for(&args.git, target).await?;
            tracing::info!(
                git_target = %target,
                git_provider = %loaded.provider.metadata.name,
                audit_route = %loaded.audit_route(),
                "mirroring for a GitTarget"
            );
            (Some(config), policy, crate::live::secrets_of(&loaded))
        }
        None => (args.git.writer_config(), MirrorPolicy::default(), Default::default()),
    };
    let git = match writer {
        Some(c) => {
            let (repo, branch) = (abs(&c.repo_dir), c.branch.clone());
            let remote = c.remote.as_ref().map(|r| redact_url(&r.url)).unwrap_or_else(|| "none".into());
            let prefix = if c.prefix.is_empty() { "/".to_owned() } else { format!("{}/", c.prefix) };
            let w = crate::live::open_writer(c, author_mode, &metrics).await?;
            tracing::info!(%repo, %branch, %remote, %prefix, "git mirror");
            Some(w)
        }
        None => None,
    };
    let api = Arc::new(
        Api::new(engine.clone(), follower.clone(), git, policy)
            .with_author_mode(author_mode)
            .with_max_followed(args.attribution.author_attribution_max_followed),
    );
    if let Some(target) = &args.git.git_target {
        // The GitTarget and its GitProvider are watched: a change applies
        // without a restart.
        let live = crate::live::Live {
            git: args.git.clone(),
            target: target.clone(),
            author_mode,
            metrics: metrics.clone(),
            secrets,
        };
        let api = api.clone();
        tasks.spawn_until_stopped("live configuration", async move {
            if let Err(e) = crate::live::run(live, api).await {
                tracing::warn!(error = %e, "watching the GitTarget's configuration stopped; changes need a restart");
            }
        });
    }
    for s in &args.follow {
        api.acquire(s).map_err(|e| Error::Config(format!("--follow {s}: {}", e.message())))?;
    }
    {
        // Expiry is decided on read; this only bounds memory: expired facts,
        // follows of types no Resolve asked about for a TTL, and the memory
        // transport's logs of scopes with no fact inside the TTL.
        let (e, api, t) = (engine.clone(), api.clone(), transport.clone());
        let ttl = args.attribution.ttl;
        let every = (ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(10));
        tasks.spawn_until_stopped("index sweeper", async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                e.sweep();
                api.release_idle(ttl.as_millis() as u64);
                t.expire();
            }
        });
    }

    // Receiver (optional in this process; none without attribution).
    if let Some(addr) = args.receiver.listen()?.filter(|_| author_mode == AuthorMode::Attributed) {
        start_receiver(addr, &args.receiver, &args.attribution, &transport, &metrics, &mut tasks).await?;
    }

    let ops = crate::ops::router(
        metrics.clone(),
        crate::ops::ready_checks(&transport, Some(follower.caught_up())),
        crate::ops::eviction(&transport, args.attribution.allow_evicting_redis),
    )
    .merge(crate::ops::explain_router(engine.clone(), follower.clone()));
    start_ops(args.ops.metrics_listen, ops, &mut tasks).await?;

    // Unix socket API, on a thread of its own (see `spawn_on_own_thread`):
    // a Resolve is a short burst of work, and the hand-offs between the
    // shared runtime's workers cost more than the burst.
    let socket = args.socket.clone();
    let uds = bind_socket(&socket, args.socket_mode)?.into_std().map_err(Error::io("preparing the socket"))?;
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<AttributionServer<Api>>().await;
    let stopping = tasks.stopping();
    let releaser = api.clone();
    let api_service = AttributionServer::from_arc(api);
    tasks
        .spawn_on_own_thread("socket API", move || async move {
            match UnixListener::from_std(uds) {
                Ok(uds) => {
                    let closed = move |c| releaser.connection_closed(c);
                    crate::socket::serve(uds, api_service, health_service, closed, stopping).await
                }
                Err(e) => tracing::error!(error = %e, "socket API failed: the socket cannot be served"),
            }
        })
        .map_err(Error::io("starting the socket API's thread"))?;
    // Logged once every listener is bound: a bind that fails stops the
    // start before anything claims to serve.
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        transport = transport.kind().label(),
        socket = %abs(&socket),
        "reverser-sidecar serving (gRPC reverser.v1 + grpc.health.v1 on the socket)"
    );

    terminated().await;
    tracing::info!("shutting down: in-flight resolutions return their best answer");
    engine.shutdown();
    tasks.shutdown(SHUTDOWN_DEADLINE).await;
    let _ = std::fs::remove_file(&socket);
    Ok(())
}

pub async fn receive(args: ReceiveArgs) -> Result<()> {
    if !args.attribution.enabled {
        return Err(Error::Config(
            "`receive` is the audit receiver, and --author-attribution=false reads no audit facts: \
             run `serve --author-attribution=false` alone, or turn attribution on"
                .into(),
        ));
    }
    let metrics = Arc::new(Metrics::new());
    metrics.set_max_types(args.ops.metrics_max_types);
    let opts = args.attribution.transport_options()?;
    if opts.kind == TransportKind::Memory {
        return Err(Error::Config(
            "`receive` runs the receiver alone, so its facts must reach followers in other processes: \
             use --author-attribution-transport redis with --redis-url (or run `serve`)"
                .into(),
        ));
    }
    let transport = Transport::build(opts, metrics.clone())?;
    let addr =
        args.receiver.listen()?.ok_or_else(|| Error::Config("`receive` needs --audit-listen host:port".into()))?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        transport = transport.kind().label(),
        "reverser-sidecar receiving"
    );
    let mut tasks = Tasks::new();
    spawn_monitor(&transport, &mut tasks);
    start_receiver(addr, &args.receiver, &args.attribution, &transport, &metrics, &mut tasks).await?;
    // A receiver has no follower: it is ready while Redis answers.
    start_ops(
        args.ops.metrics_listen,
        crate::ops::router(
            metrics,
            crate::ops::ready_checks(&transport, None),
            crate::ops::eviction(&transport, args.attribution.allow_evicting_redis),
        ),
        &mut tasks,
    )
    .await?;
    terminated().await;
    tasks.shutdown(SHUTDOWN_DEADLINE).await;
    Ok(())
}
