//! The body of both `kubectl_complete-NAME` helpers, included by their
//! `main`s and by nothing else: the helpers link the standard library only
//! (a few hundred kilobytes, not the plugin's client stack), so kubectl can
//! start one on every TAB cheaply.

use std::os::unix::process::CommandExt;
use std::process::ExitCode;

/// The argument the plugin answers completion requests on
/// (`kubectl_plugin::common::complete::REQUEST`).
const REQUEST: &str = "__complete";

/// Runs `PLUGIN __complete ARGS...`, the plugin found beside the helper
/// (krew installs both into one directory; a symlink to the helper resolves
/// there too) or else on the PATH.
pub fn delegate(plugin: &str) -> ExitCode {
    let beside =
        std::env::current_exe().ok().and_then(|me| me.parent().map(|d| d.join(plugin))).filter(|p| p.is_file());
    let program = beside.unwrap_or_else(|| plugin.into());
    let err = std::process::Command::new(&program).arg(REQUEST).args(std::env::args_os().skip(1)).exec();
    eprintln!("error: cannot run {} to complete the command line: {err}", program.display());
    ExitCode::FAILURE
}
