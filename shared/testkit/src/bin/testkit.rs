//! `testkit`: testkit's fakes as processes, for tests that drive other
//! processes (kubectl, the sidecar, a watcher) and for trying things by
//! hand.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use testkit::audit_webhook;
use testkit::fakeapi::{self, Registry, Store};

#[derive(Debug, Parser)]
#[command(
    name = "testkit",
    version,
    about = "Testkit's fakes as processes: the fake Kubernetes API, a server that never answers."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the fake Kubernetes API until SIGTERM or SIGINT. Prints its URL
    /// (`http://127.0.0.1:PORT`) as the first line of stdout once it
    /// accepts connections.
    FakeApi(Box<FakeApiArgs>),
    /// Accept TCP connections and never answer (for timeout tests). Prints
    /// the address it listens on as the first line of stdout.
    Hang {
        /// The port to listen on (0: a free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// The address to listen on.
        #[arg(long, default_value = "127.0.0.1")]
        address: std::net::IpAddr,
    },
}

#[derive(Debug, clap::Args)]
struct FakeApiArgs {
    /// The port to listen on (0: a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    address: std::net::IpAddr,
    /// A directory of CRD YAML files to serve, writes validated against
    /// their schemas (repeatable). The vendored tatara.dev and
    /// configbutler.ai types are served without validation unless their
    /// directories are given here or --validate-vendored is set.
    #[arg(long = "crds", value_name = "DIR")]
    crds: Vec<PathBuf>,
    /// Validate writes of the vendored CRDs against their schemas.
    #[arg(long)]
    validate_vendored: bool,
    /// A YAML file of objects to seed (multi-document or a List; each with
    /// apiVersion, kind and metadata.namespace when namespaced). Repeatable.
    #[arg(long = "seed", value_name = "FILE")]
    seed: Vec<PathBuf>,
    /// Write a kubeconfig for the server to this path (context `fake`).
    #[arg(long, value_name = "PATH")]
    kubeconfig_out: Option<PathBuf>,
    /// The default namespace of the written kubeconfig.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// How often watches that allow bookmarks get one, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    bookmark_interval_ms: u64,
    /// How many events the log keeps for resuming watches (older ones are
    /// compacted away: a watch from before them gets 410 Expired).
    #[arg(long, default_value_t = fakeapi::DEFAULT_EVENT_WINDOW)]
    event_window: usize,
    /// List GROUP/VERSION in discovery as an aggregated API whose server is
    /// down (its paths answer 503). Repeatable.
    #[arg(long = "unavailable-group", value_name = "GROUP/VERSION")]
    unavailable_groups: Vec<String>,
    /// At exit, write every resource request as the RBAC authorizer saw it
    /// (user, verb, group, resource, namespace, name) to this file, one JSON
    /// object per line, so a test can hold them against a Role.
    #[arg(long, value_name = "FILE")]
    request_log: Option<PathBuf>,
    /// The API server's audit webhook backend: a kubeconfig-format file
    /// naming the receiver (its `server` URL, CA and client certificate).
    /// Every write is posted as its RequestResponse audit event, in
    /// `EventList` batches, as `kube-apiserver --audit-webhook-config-file`
    /// posts them (e.g. to `reverser-sidecar serve`'s receiver).
    #[arg(long, value_name = "FILE")]
    audit_webhook_config_file: Option<PathBuf>,
    /// Events per batch (the API server's --audit-webhook-batch-max-size).
    #[arg(long, default_value_t = 400, value_name = "N")]
    audit_webhook_batch_max_size: usize,
    /// How long a batch may wait to fill, in milliseconds (the API server's
    /// --audit-webhook-batch-max-wait is 30s; shorter here, to try things).
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    audit_webhook_batch_max_wait_ms: u64,
}

fn fail(message: String) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::FAILURE
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(r) => r,
        Err(e) => return fail(format!("cannot start the runtime: {e}")),
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::FakeApi(args) => fake_api(*args).await,
            Command::Hang { port, address } => hang(SocketAddr::new(address, port)).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn announce(line: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|_| out.flush()).map_err(|e| format!("cannot write to stdout: {e}"))
}

async fn shutdown() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

async fn fake_api(args: FakeApiArgs) -> Result<(), String> {
    let registry = if args.validate_vendored { Registry::vendored() } else { Registry::standard() };
    let mut store = Store::with_registry(registry);
    for dir in &args.crds {
        store.load_crd_schemas(dir).map_err(|e| format!("--crds {}: {e}", dir.display()))?;
    }
    store.set_event_window(args.event_window);
    for file in &args.seed {
        let text = std::fs::read_to_string(file).map_err(|e| format!("--seed {}: {e}", file.display()))?;
        store.seed_yaml(&text).map_err(|e| format!("--seed {}: {}", file.display(), e.message))?;
    }
    let api = fakeapi::serve_on(store, SocketAddr::new(args.address, args.port))
        .await
        .map_err(|e| format!("cannot listen on {}:{}: {e}", args.address, args.port))?;
    api.set_bookmark_interval(Duration::from_millis(args.bookmark_interval_ms.max(1)));
    for gv in &args.unavailable_groups {
        let (group, version) =
            gv.split_once('/').ok_or_else(|| format!("--unavailable-group {gv:?}: expected GROUP/VERSION"))?;
        api.unavailable_group(group, version);
    }
    if let Some(path) = &args.kubeconfig_out {
        api.write_kubeconfig(path, &args.namespace).map_err(|e| format!("--kubeconfig-out {}: {e}", path.display()))?;
    }
    let webhook = match &args.audit_webhook_config_file {
        None => None,
        Some(file) => {
            let hook = audit_webhook::Webhook::from_file(file)
                .await
                .map_err(|e| format!("--audit-webhook-config-file {}: {e}", file.display()))?;
            let batch = audit_webhook::Batch {
                max_size: args.audit_webhook_batch_max_size.max(1),
                max_wait: Duration::from_millis(args.audit_webhook_batch_max_wait_ms.max(1)),
            };
            Some(tokio::spawn(hook.run(api.store.clone(), batch)))
        }
    };
    announce(&api.url())?;
    shutdown().await;
    if let Some(w) = webhook {
        w.abort();
    }
    if let Some(path) = &args.request_log {
        let mut lines = String::new();
        for a in api.authorizations() {
            let line = serde_json::to_string(&a).map_err(|e| format!("cannot encode a request: {e}"))?;
            lines.push_str(&line);
            lines.push('\n');
        }
        std::fs::write(path, lines).map_err(|e| format!("--request-log {}: {e}", path.display()))?;
    }
    Ok(())
}

async fn hang(addr: SocketAddr) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| format!("cannot read the listening address: {e}"))?;
    announce(&local.to_string())?;
    let mut held = Vec::new();
    let stop = shutdown();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                // Kept open, never read or written: the peer waits forever.
                if let Ok((conn, _)) = accepted {
                    held.push(conn);
                }
            }
            _ = &mut stop => return Ok(()),
        }
    }
}
