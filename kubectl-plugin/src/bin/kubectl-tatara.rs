//! `kubectl tatara`: the ownership plugin, found by kubectl on the PATH.

use std::process::ExitCode;

use clap::Parser;
use kubectl_plugin::common;
use kubectl_plugin::tatara::{self, Cli};

fn main() -> ExitCode {
    // `kubectl_complete-tatara` (kubectl's completion) asks through here.
    if let Some(code) = common::complete::run_if_asked::<Cli>(&tatara::complete::Completer) {
        return code;
    }
    let cli = Cli::parse();
    common::init_logging(&cli.global);
    common::exit(tatara::run(cli))
}
