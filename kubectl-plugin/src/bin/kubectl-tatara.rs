//! `kubectl tatara`: the ownership plugin, found by kubectl on the PATH.

use std::process::ExitCode;

use clap::Parser;
use kubectl_plugin::common;
use kubectl_plugin::tatara::{self, Cli};

fn main() -> ExitCode {
    tracing_init();
    common::exit(tatara::run(Cli::parse()))
}

/// Logs (warnings by default, `RUST_LOG` to change) go to stderr so stdout
/// stays the command's output.
fn tracing_init() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
