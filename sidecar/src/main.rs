//! `reverser-sidecar`: the attribution sidecar. `serve` runs the product,
//! `receive` the audit receiver alone, `replay` the engine over a recorded
//! timeline (`spec/replay.md`).

use std::process::ExitCode;

/// mimalloc, not glibc's malloc: a first start parses each list on the
/// socket API's thread and frees it on the writer's, and glibc's arenas
/// spent a quarter of `serve`'s CPU there (README, "A whole cluster").
/// The `system-allocator` feature keeps glibc's, for heaptrack.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

mod accept;
mod api;
mod apiserver;
mod authority;
mod client_usage;
mod controller;
mod devcerts;
mod encryption;
mod error;
mod inject_webhook;
mod live;
mod ops;
mod receiver;
mod replay;
mod serve;
mod socket;
mod target;
mod tls;
mod watch;

#[derive(Debug, Parser)]
#[command(
    name = "reverser-sidecar",
    version,
    about = "Attribution sidecar: who authored each change mirrored into Git"
)]
struct Cli {
    #[command(flatten)]
    log: runtime::telemetry::LogArgs,
    #[command(subcommand)]
    command: Command,
}

/// Parsed once at start, so the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Run the sidecar: audit receiver, fact follower, index, and the
    /// Unix-socket API. With no flags: memory transport, ./reverser.sock,
    /// receiver and metrics on loopback, development certificates.
    Serve(runtime::cli::ServeArgs),
    /// Run the audit receiver alone (its own Deployment), appending facts to Redis.
    Receive(runtime::cli::ReceiveArgs),
    /// Serve the sidecar injection webhook: AdmissionReview v1 over HTTPS,
    /// patched by the same rule as `kubectl reverser inject`.
    InjectWebhook(inject_webhook::Args),
    /// Watch a GitTarget's types (or --resource types) and send every change
    /// to the sidecar beside it, which commits attributed Git history.
    Watch(watch::Args),
    /// Serve every GitTarget: a Deployment with its watcher and sidecar, and
    /// RBAC derived from its rules, created and removed with the GitTarget.
    Controller(controller::Args),
    /// Run the attribution engine over a recorded timeline on a virtual clock
    /// and print one JSON line per watch record.
    Replay(replay::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // kube's own lines repeat, as Debug text, each failure the commands
    // already log as a sentence naming the server and the bound.
    runtime::telemetry::init(&cli.log, "info,kube_client=off");
    let result = match cli.command {
        Command::Replay(args) => replay::run(args),
        Command::Serve(args) => runtime().and_then(|rt| rt.block_on(serve::serve(args))),
        Command::Receive(args) => runtime().and_then(|rt| rt.block_on(serve::receive(args))),
        Command::InjectWebhook(args) => runtime().and_then(|rt| rt.block_on(inject_webhook::run(args))),
        Command::Watch(args) => runtime().and_then(|rt| rt.block_on(watch::run(args))),
        Command::Controller(args) => runtime().and_then(|rt| rt.block_on(controller::run(args))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reverser-sidecar: {e}");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> error::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(error::Error::io("starting the runtime"))
}
