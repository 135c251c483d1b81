//! `kubectl tatara`: the ownership plugin, found by kubectl on the PATH.

use std::process::ExitCode;

use kubectl_plugin::common;
use kubectl_plugin::tatara;

fn main() -> ExitCode {
    // `kubectl_complete-tatara` (kubectl's completion) asks through here.
    if let Some(code) = common::complete::run_if_asked::<tatara::Cli>(&tatara::complete::Completer) {
        return code;
    }
    let cli = tatara::parse();
    common::init_logging(&cli.global);
    common::exit(tatara::run(cli))
}
