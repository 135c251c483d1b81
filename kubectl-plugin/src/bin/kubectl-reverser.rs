//! `kubectl reverser`: the attribution plugin, found by kubectl on the PATH.

use std::process::ExitCode;

use clap::Parser;
use kubectl_plugin::common;
use kubectl_plugin::reverser::{self, Cli};

fn main() -> ExitCode {
    common::exit(reverser::run(Cli::parse()))
}
