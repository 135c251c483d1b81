//! `kubectl tatara`: the ownership plugin, found by kubectl on the PATH.

use std::process::ExitCode;

use clap::Parser;
use kubectl_plugin::common;
use kubectl_plugin::tatara::{self, Cli};

fn main() -> ExitCode {
    let cli = Cli::parse();
    common::init_logging(&cli.global);
    common::exit(tatara::run(cli))
}
