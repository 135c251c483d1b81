//! `reverser-sidecar watch`: the GitTarget's watcher (spec/mirror.md). It
//! reads the GitTarget and the WatchRules and ClusterWatchRules naming it,
//! resolves them to types through discovery, lists and watches each type,
//! and sends the events to the sidecar beside it (`Commit`, in commit
//! windows) and every list to its `Reconcile`. It follows rule changes
//! without a restart. Without custom resources, `--resource` names the
//! types.

mod commit_request;
mod metrics;
mod readiness;
mod rule_status;
mod rules_watch;
mod source_cluster;
mod status;
mod stream;
mod window;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use rules::mirror::config::{ClusterProvider, WatchRule};
use rules::mirror::source_namespace::{self, Gate, Provider};
use rules::mirror::watch_rules::{self, Resolved, Served, SourceVerdict, WatchScope, WatchedType};
use rules::mirror::window::WindowPolicy;
use runtime::mirror;
use runtime::proto::attribution_client::AttributionClient;
use runtime::shutdown::{Tasks, terminated};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::apiserver::{Server, WATCH_SILENCE};
use crate::error::{Error, Result};
use metrics::WatchMetrics;
use readiness::{DISCOVERY, Outage, Readiness};
use runtime::cli::parse_duration;
use runtime::kubeconfig::Bounds;
use source_cluster::Cluster;
use stream::Shared;

/// What is mirrored: a GitTarget's rules, or (without custom resources)
/// the types named by `--resource`; one of the two is required, and the
/// usage line names both.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["git_target", "resources"])))]
pub struct Args {
    /// Mirror this GitTarget (NAMESPACE/NAME): its WatchRules and
    /// ClusterWatchRules say what is watched, its GitProvider's
    /// push.commitWindow how events are coalesced.
    #[arg(long, env = "REVERSER_GIT_TARGET", value_name = "NAMESPACE/NAME", conflicts_with = "resources")]
    pub git_target: Option<String>,
    /// Without custom resources: watch this type (`configmaps`,
    /// `deployments.apps`); repeatable.
    #[arg(long = "resource", value_name = "TYPE")]
    pub resources: Vec<String>,
    /// With --resource: watch only this namespace (default: every namespace).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// With --resource: the commit window (Go form or 5s, 0s for one commit
    /// per event).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub commit_window: Duration,
    /// With --resource: a list removes documents of objects that no longer
    /// exist (GitTarget prune mode Always).
    #[arg(long)]
    pub prune: bool,
    /// The sidecar's Unix socket.
    #[arg(long, env = "REVERSER_SOCKET", default_value = "reverser.sock")]
    pub socket: PathBuf,
    /// The audit route the watched types' facts arrive on (default: the
    /// GitTarget's ClusterProvider's auditRoute, else `default`).
    #[arg(long, env = "REVERSER_ROUTE")]
    pub route: Option<String>,
    /// Do not mirror changes by this actor (e.g. the GitOps forward leg's
    /// service account `system:serviceaccount:flux-system:kustomize-controller`);
    /// repeatable.
    #[arg(long = "exclude-user", value_name = "USER")]
    pub exclude_users: Vec<String>,
    /// Do not mirror writes whose latest field manager is this (e.g.
    /// `kustomize-controller`, `argocd-controller`); repeatable.
    #[arg(long = "exclude-field-manager", value_name = "MANAGER")]
    pub exclude_field_managers: Vec<String>,
    /// Kubeconfig (default: $KUBECONFIG, then ~/.kube/config, then the
    /// in-cluster service account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// How long each API call may wait for the server (e.g. 5s, 1m); 0: 10s
    /// to connect and 60s without a byte. A watch counts as silent after
    /// 2m without a byte (the API server sends a bookmark each minute).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// /metrics, /healthz and /readyz of the watcher.
    #[arg(long, env = "REVERSER_WATCH_METRICS_LISTEN", default_value = "127.0.0.1:9091")]
    pub metrics_listen: SocketAddr,
    /// How often the rules are read again (a change takes effect within it).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub rescan: Duration,
    /// With --git-target: write status on the GitTarget, its GitProvider and
    /// the WatchRules and ClusterWatchRules naming it at most this often per
    /// object (a change inside waits for the next rescan after it); 0s
    /// writes every change.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub status_interval: Duration,
    #[command(flatten)]
    pub remote: source_cluster::RemoteArgs,
}

/// How long shutdown waits for the pending window to reach the sidecar.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(20);
/// How often discovery and namespaces are read again (new CRDs, labels).
const REDISCOVER: Duration = Duration::from_secs(60);
/// How long to wait before reading discovery again after it failed.
const RETRY_DISCOVERY: Duration = Duration::from_secs(5);

/// Where the watched types come from.
enum Source {
    Target { namespace: String, name: String },
    Flags { resources: Vec<String>, namespace: Option<String> },
}

/// One running watch and the channel that updates its rules.
struct Running {
    ty: watch::Sender<Arc<WatchedType>>,
    task: JoinHandle<()>,
}

pub async fn run(args: Args) -> Result<()> {
    let bounds = Bounds::new(args.request_timeout);
    let (client, server) = Server::connect(args.kubeconfig.as_deref(), bounds).await?;
    let (watch_client, _) = Server::connect(args.kubeconfig.as_deref(), bounds.with_read(WATCH_SILENCE)).await?;
    tracing::info!(server = %server.url, bound = %bounds.describe(), "API server: a call gives up unless answered within the bound");
    let metrics = Arc::new(WatchMetrics::default());
    let readiness = Arc::new(Readiness::default());
    let mut tasks = Tasks::new();
    start_ops(args.metrics_listen, metrics.clone(), readiness.clone(), &mut tasks).await?;
    // Installed first: from here a stop signal ends whatever is waiting.
    let stop = tokio::spawn(terminated());
    tokio::pin!(stop);

    let (streams_tx, streams_rx) = watch::channel(Default::default());
    let (live_tx, live_rx) =
        watch::channel(window::Live { policy: WindowPolicy::new(args.commit_window), prune: args.prune });
    let (gone_tx, mut gone_rx) = watch::channel(None);
    let links = status::Links { reported: window::Reported::default(), live: live_tx, gone: gone_tx };
    let reported = links.reported.clone();
    let mut status_task = None;
    let local = Cluster::local(client.clone(), watch_client.clone(), server.clone());
    let started = async {
        let (source, route, branch, cluster) = match &args.git_target {
            Some(t) => {
                let (namespace, name) = crate::target::parse_target(t)?;
                let mut r = status::Reporter::new(
                    (client.clone(), server.clone()),
                    readiness.clone(),
                    &namespace,
                    &name,
                    args.status_interval,
                    args.rescan,
                    links,
                    args.remote.clone(),
                );
                if !r.until_loadable(args.rescan).await {
                    // Told to stop: the stop branch below ends the run.
                    std::future::pending::<()>().await;
                }
                let loaded = mirror::load(&client, &namespace, &name).await.map_err(|e| server.mirror_error(e))?;
                let live = window::Live::of(&loaded.target.spec, &loaded.provider.spec).map_err(|e| {
                    Error::Config(format!(
                        "GitTarget {namespace}/{name}, GitProvider {}: {e}",
                        loaded.provider.metadata.name
                    ))
                })?;
                // The watched cluster: this one, or the ClusterProvider's remote.
                let cluster = loop {
                    let provider = loaded.cluster_provider.as_ref();
                    match Cluster::of(&local, &client, provider, &args.remote, bounds).await {
                        Ok(c) => break c,
                        Err(why) => {
                            tracing::warn!("the source cluster cannot be used yet (asked again each --rescan): {why}");
                            tokio::time::sleep(args.rescan).await;
                        }
                    }
                };
                r.started(live);
                status_task = Some(tokio::spawn(r.run(streams_rx, args.rescan)));
                let route = args.route.clone().unwrap_or_else(|| loaded.audit_route());
                tracing::info!(
                    target = %t,
                    route,
                    commit_window = %runtime::kubeconfig::bounds::humanize(live.policy.silence),
                    prune_mode = loaded.target.spec.prune_mode().as_str(),
                    "watching for GitTarget"
                );
                let branch = loaded.target.spec.branch.clone();
                (Source::Target { namespace, name }, route, Some(branch), cluster)
            }
            None => {
                let route = args.route.clone().unwrap_or_else(|| "default".into());
                let source = Source::Flags { resources: args.resources.clone(), namespace: args.namespace.clone() };
                (source, route, None, local.clone())
            }
        };
        let channel = connect(&args.socket).await;
        Ok::<_, Error>((source, route, branch, cluster, channel))
    };
    let (source, route, branch, cluster, channel) = tokio::select! {
        started = started => started?,
        _ = &mut stop => {
            tracing::info!("shutting down before the watch started");
            tasks.shutdown(Duration::from_secs(2)).await;
            return Ok(());
        }
    };

    let (tx, rx) = mpsc::channel(1024);
    // A GitTarget's watcher serves the CommitRequests naming it.
    let (ended_tx, ended_rx) = mpsc::channel(64);
    let commit_requests = match (&source, branch) {
        (Source::Target { namespace, name }, Some(branch)) => Some(tokio::spawn(commit_request::run(
            client.clone(),
            commit_request::For { namespace: namespace.clone(), target: name.clone(), branch, route: route.clone() },
            AttributionClient::new(channel.clone()),
            tx.clone(),
            ended_rx,
        ))),
        _ => None,
    };
    let settings = window::Settings {
        live: live_rx,
        route,
        exclude_users: args.exclude_users.clone(),
        exclude_field_managers: args.exclude_field_managers.clone(),
        ended: commit_requests.is_some().then_some(ended_tx),
        reported,
    };
    let window_task = tokio::spawn(window::run(rx, AttributionClient::new(channel), settings, metrics.clone()));
    let shared = Shared {
        client: cluster.client.clone(),
        watch_client: cluster.watch_client.clone(),
        server: cluster.server.clone(),
        readiness: readiness.clone(),
        tx,
        metrics: metrics.clone(),
        exclude_field_managers: Arc::new(args.exclude_field_managers.clone()),
        lists: Arc::new(tokio::sync::Semaphore::new(stream::LISTS_HELD)),
    };

    // A rule change wakes the pass at once; the rescan is the backstop.
    let rules_changed = Arc::new(tokio::sync::Notify::new());
    let rules_task = match &source {
        Source::Target { namespace, .. } => {
            Some(tokio::spawn(rules_watch::run(watch_client.clone(), namespace.clone(), rules_changed.clone())))
        }
        Source::Flags { .. } => None,
    };
    let mut supervisor = Supervisor { shared, running: BTreeMap::new(), last: None };
    let mut pass = Pass {
        served: Vec::new(),
        discovered_at: None,
        discovery: Outage::default(),
        reach: Default::default(),
        rules: Outage::default(),
        rescan: args.rescan,
    };
    loop {
        // Every call below is bounded, and a stop ends any of them at once.
        let wait = tokio::select! {
            wait = pass.run(&client, &server, &cluster, &source, &readiness, &mut supervisor, &metrics) => wait?,
            _ = &mut stop => break,
            _ = gone(&mut gone_rx) => break,
        };
        let mut observed = rule_status::Observed::of(&supervisor);
        observed.remote = cluster.remote;
        observed.discovery = pass.reach.clone();
        streams_tx.send_replace(observed);
        tokio::select! {
            _ = &mut stop => break,
            _ = gone(&mut gone_rx) => break,
            _ = rules_changed.notified() => {}
            _ = tokio::time::sleep(wait.unwrap_or(args.rescan)) => {}
        }
    }
    if let Some(t) = rules_task {
        t.abort();
    }

    if let Some(t) = status_task {
        t.abort();
    }
    // It holds a sender of the window's channel: the window ends only once it is gone.
    if let Some(t) = commit_requests {
        t.abort();
    }
    tracing::info!("shutting down: the pending window goes to the sidecar first");
    supervisor.stop_all();
    drop(supervisor);
    // Every sender is gone once the watches are: the window flushes and ends.
    if tokio::time::timeout(SHUTDOWN_DEADLINE, window_task).await.is_err() {
        tracing::warn!(deadline = %runtime::kubeconfig::bounds::humanize(SHUTDOWN_DEADLINE), "the pending window did not reach the sidecar in time");
    }
    tasks.shutdown(Duration::from_secs(2)).await;
    Ok(())
}

/// Resolves once the GitTarget is deleted or may no longer be mirrored
/// (never without one).
async fn gone(rx: &mut watch::Receiver<Option<String>>) {
    let why = match rx.wait_for(Option::is_some).await {
        Ok(why) => why.clone().unwrap_or_default(),
        Err(_) => std::future::pending::<String>().await,
    };
    tracing::info!("{why}: its mirror stops (the pending window goes to the sidecar first)");
}

/// One read of discovery (when due) and the rules, applied to the watches.
struct Pass {
    served: Vec<Served>,
    discovered_at: Option<tokio::time::Instant>,
    discovery: Outage,
    /// What the watched cluster's discovery last answered (SourceClusterReachable).
    reach: rules::mirror::source_cluster::Discovery,
    rules: Outage,
    rescan: Duration,
}

impl Pass {
    /// Returns how soon to run again when sooner than the rescan (discovery
    /// failed); an error ends the watcher (a `--resource` no server serves).
    #[allow(clippy::too_many_arguments)]
    async fn run(
        &mut self,
        client: &kube::Client,
        server: &Server,
        cluster: &Cluster,
        source: &Source,
        readiness: &Readiness,
        supervisor: &mut Supervisor,
        metrics: &WatchMetrics,
    ) -> Result<Option<Duration>> {
        if self.discovered_at.is_none_or(|t| t.elapsed() >= REDISCOVER) {
            match mirror::served(&cluster.client).await {
                Ok(s) => {
                    self.reach = rules::mirror::source_cluster::Discovery::Answered;
                    self.served = s;
                    self.discovered_at = Some(tokio::time::Instant::now());
                    self.discovery.recovered("API discovery");
                    readiness.ok(DISCOVERY);
                }
                Err(e) => {
                    let why = cluster.server.mirror_failure(&e);
                    self.reach = source_cluster::discovery_failed(&cluster.server, &e);
                    readiness.failing(DISCOVERY, &why, false);
                    if self.discovered_at.is_none() {
                        // Nothing to resolve against: a name cannot be
                        // judged before the server says what it serves.
                        self.discovery.failed("nothing is watched until discovery answers", &why, RETRY_DISCOVERY);
                        return Ok(Some(RETRY_DISCOVERY));
                    }
                    self.discovery.failed("the types already watched are kept", &why, REDISCOVER);
                }
            }
        }
        match resolve(client, &cluster.client, source, &self.served).await {
            Ok(resolved) => {
                self.rules.recovered("reading the rules");
                if let Source::Flags { .. } = source
                    && supervisor.last.is_none()
                    && !resolved.problems.is_empty()
                {
                    let problems: Vec<String> = resolved.problems.iter().map(ToString::to_string).collect();
                    return Err(Error::Config(format!(
                        "cannot watch what was asked: {}; `kubectl api-resources` lists what the server serves",
                        problems.join("; ")
                    )));
                }
                supervisor.apply(resolved, metrics);
            }
            Err(e) => {
                let why = match &e {
                    Error::Runtime(runtime::Error::Mirror(m)) => server.mirror_failure(m),
                    other => other.to_string(),
                };
                self.rules.failed("the types already watched are kept", &why, self.rescan);
            }
        }
        Ok(None)
    }
}

/// The types GitTarget `namespace/name`'s rules resolve to now (the
/// controller derives its mirror's RBAC from them).
pub(crate) async fn resolve_target(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    served: &[Served],
) -> Result<Resolved> {
    resolve(client, client, &Source::Target { namespace: namespace.into(), name: name.into() }, served).await
}

/// The types to watch now: the rules from the control cluster (`client`),
/// the namespaces from the watched one.
async fn resolve(
    client: &kube::Client,
    watched: &kube::Client,
    source: &Source,
    served: &[Served],
) -> Result<Resolved> {
    Ok(match source {
        Source::Flags { resources, namespace } => watch_rules::from_flags(resources, namespace.as_deref(), served),
        Source::Target { namespace, name } => {
            let loaded = mirror::load(client, namespace, name).await.map_err(runtime::Error::from)?;
            let (rules, cluster_rules) = mirror::rules(client, namespace).await.map_err(runtime::Error::from)?;
            let namespaces = if loaded.target.spec.allowed_source_namespaces.is_some() {
                mirror::namespaces(watched).await
            } else {
                Vec::new()
            };
            let provider_name = loaded.target.spec.cluster_provider();
            let (provider, labels) = provider_facts(client, namespace, name, provider_name, &rules).await?;
            let gate = Gate {
                target_namespace: namespace,
                target_name: name,
                target: &loaded.target.spec,
                provider: Provider {
                    name: provider_name,
                    spec: provider.as_ref().map(|p| &p.spec),
                    target_namespace_labels: &labels,
                },
                namespaces: &namespaces,
            };
            watch_rules::resolve(&gate, &rules, &cluster_rules, served)
        }
    })
}

/// The ClusterProvider and the labels of the GitTarget's namespace, read
/// only when a WatchRule of the target asks for another namespace. A read
/// that fails (rather than finding nothing) is an error, so the types
/// already watched are kept: gitops-reverser requeues rather than tearing
/// down streams on a failed read (source_namespace.go:370-371).
async fn provider_facts(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    provider_name: &str,
    rules: &[WatchRule],
) -> Result<(Option<ClusterProvider>, BTreeMap<String, String>)> {
    if !rules.iter().any(|r| r.targets(namespace, name) && source_namespace::needs_provider(r)) {
        return Ok((None, BTreeMap::new()));
    }
    let provider = mirror::cluster_provider(client, provider_name).await.map_err(runtime::Error::from)?;
    let labels = match provider.as_ref().and_then(|p| p.spec.allowed_namespaces.as_ref()) {
        Some(m) if m.needs_labels(namespace) => {
            mirror::namespace_labels(client, namespace).await.map_err(runtime::Error::from)?
        }
        _ => BTreeMap::new(),
    };
    Ok((provider, labels))
}

struct Supervisor {
    shared: Shared,
    running: BTreeMap<(String, WatchScope), Running>,
    /// Shared with the status reporter, which reads it after every pass.
    last: Option<Arc<Resolved>>,
}

impl Supervisor {
    /// Starts the watches the rules now ask for, stops the ones they no
    /// longer do, and hands running ones their new operations.
    fn apply(&mut self, resolved: Resolved, metrics: &WatchMetrics) {
        if self.last.as_deref() == Some(&resolved) {
            return;
        }
        for p in &resolved.problems {
            tracing::warn!("a rule item cannot be watched (the rest is): {p}");
        }
        // A refusal is told once, when it appears (or its reason changes),
        // not on every change elsewhere.
        let before: Vec<&SourceVerdict> = self.last.iter().flat_map(|r| r.refused()).collect();
        for v in resolved.refused().filter(|v| !before.contains(v)) {
            tracing::warn!(
                rule = %v.name,
                namespace = %v.namespace,
                reason = %v.reason,
                "WatchRule {}/{} is not watched at all ({} {}): {}",
                v.namespace,
                v.name,
                source_namespace::CONDITION,
                v.reason,
                v.message
            );
        }
        metrics.refused_rules.set(resolved.refused().count() as i64);
        metrics.rule_problems.set(resolved.problems.len() as i64);
        metrics.watched_types.set(resolved.types.len() as i64);
        let mut wanted: BTreeMap<(String, WatchScope), Arc<WatchedType>> = BTreeMap::new();
        for t in &resolved.types {
            let t = Arc::new(t.clone());
            for scope in t.watches() {
                wanted.insert((t.key(), scope), t.clone());
            }
        }
        let gone: Vec<(String, WatchScope)> =
            self.running.keys().filter(|k| !wanted.contains_key(*k)).cloned().collect();
        for key in gone {
            if let Some(r) = self.running.remove(&key) {
                tracing::info!(r#type = %key.0, scope = %key.1, "no rule covers it any more; stopped watching");
                self.shared.readiness.forget(&stream::concern(&key.0, &key.1));
                r.task.abort();
            }
        }
        for (key, ty) in wanted {
            match self.running.get(&key) {
                Some(r) => {
                    r.ty.send_if_modified(|current| {
                        let changed = **current != *ty;
                        *current = ty.clone();
                        changed
                    });
                }
                None => {
                    tracing::info!(r#type = %key.0, scope = %key.1, "watching");
                    if rules::mirror::select::is_sensitive(&ty.group, &ty.resource) {
                        tracing::info!(
                            r#type = %key.0,
                            "{} are watched but never written to Git in clear text (skipped and counted)",
                            ty.resource
                        );
                    }
                    self.shared.readiness.pending(&stream::concern(&key.0, &key.1), "not listed yet");
                    let (tx, rx) = watch::channel(ty);
                    let task = tokio::spawn(stream::run(self.shared.clone(), rx, key.1.clone()));
                    self.running.insert(key, Running { ty: tx, task });
                }
            }
        }
        self.last = Some(Arc::new(resolved));
    }

    fn stop_all(&mut self) {
        for (_, r) in std::mem::take(&mut self.running) {
            r.task.abort();
        }
    }
}

/// The sidecar's socket, waited for: the two containers start together.
async fn connect(socket: &std::path::Path) -> tonic::transport::Channel {
    let mut backoff =
        runtime::backoff::Backoff::new(Duration::from_millis(100), Duration::from_secs(5)).expect("valid bounds");
    let mut warned = false;
    loop {
        match runtime::proto::connect_unix(socket).await {
            Ok(channel) => return channel,
            Err(e) => {
                if !warned {
                    // The whole chain: `transport error` alone hides the ENOENT.
                    tracing::info!(
                        "waiting for the sidecar's socket {}: {}; retrying until `serve` listens there (--socket)",
                        socket.display(),
                        runtime::error_chain(&e)
                    );
                    warned = true;
                }
                tokio::time::sleep(backoff.next_delay()).await;
            }
        }
    }
}

async fn start_ops(
    addr: SocketAddr,
    metrics: Arc<WatchMetrics>,
    readiness: Arc<Readiness>,
    tasks: &mut Tasks,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|source| Error::Listen {
        what: "the watcher's metrics (--metrics-listen)",
        addr: addr.to_string(),
        source,
    })?;
    let router = Router::new()
        .route(
            "/metrics",
            get(move || {
                let m = metrics.clone();
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        m.render(),
                    )
                }
            }),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let r = readiness.clone();
                async move {
                    match r.check() {
                        Ok(()) => (axum::http::StatusCode::OK, "ok\n".to_owned()),
                        Err(why) => (axum::http::StatusCode::SERVICE_UNAVAILABLE, format!("not ready:\n{why}\n")),
                    }
                }
            }),
        );
    // The port bound, not the one asked for (`:0` picks one).
    let addr = listener.local_addr().unwrap_or(addr);
    let stopping = tasks.stopping();
    tasks.spawn("watcher metrics", async move {
        if let Err(e) = axum::serve(listener, router).with_graceful_shutdown(stopping).await {
            tracing::error!(error = %e, "watcher metrics listener failed");
        }
    });
    tracing::info!(url = %format!("http://{addr}/metrics"), "metrics listening");
    Ok(())
}
