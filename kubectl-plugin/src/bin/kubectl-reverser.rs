//! `kubectl reverser`: the attribution plugin, found by kubectl on the PATH.

use std::process::ExitCode;

use clap::Parser;
use kubectl_plugin::common;
use kubectl_plugin::reverser::{self, Cli};

fn main() -> ExitCode {
    // `kubectl_complete-reverser` (kubectl's completion) asks through here.
    if let Some(code) = common::complete::run_if_asked::<Cli>(&reverser::complete::Completer) {
        return code;
    }
    let cli = Cli::parse();
    common::init_logging(&cli.global);
    common::exit(reverser::run(cli))
}
