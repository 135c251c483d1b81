//! `kubectl_complete-reverser`: kubectl (1.26+) runs it from the PATH to
//! complete `kubectl reverser ...`; it asks `kubectl-reverser` itself. A binary
//! rather than a shell script, so the release builds it for every platform
//! and packs it like the plugin (scripts/release).

#[path = "../complete_helper.rs"]
mod complete_helper;

fn main() -> std::process::ExitCode {
    complete_helper::delegate("kubectl-reverser")
}
