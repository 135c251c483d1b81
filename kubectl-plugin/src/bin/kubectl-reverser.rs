//! `kubectl reverser`: the attribution plugin, found by kubectl on the PATH.

use std::process::ExitCode;

use clap::Parser;
use kubectl_plugin::common;
use kubectl_plugin::reverser::{self, Cli};

fn main() -> ExitCode {
    let cli = Cli::parse();
    common::init_logging(&cli.global);
    common::exit(reverser::run(cli))
}
