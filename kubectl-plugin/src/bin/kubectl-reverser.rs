//! `kubectl reverser`: the attribution plugin, found by kubectl on the PATH.

use std::process::ExitCode;

use clap::Parser;
use kubectl_plugin::common;
use kubectl_plugin::reverser::{self, Cli};

fn main() -> ExitCode {
    let cli = Cli::parse();
    runtime::telemetry::init(&cli.log, common::DEFAULT_LOG_FILTER);
    common::exit(reverser::run(cli))
}
