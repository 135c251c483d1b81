//! `kubectl_complete-tatara`: kubectl (1.26+) runs it from the PATH to
//! complete `kubectl tatara ...`; it asks `kubectl-tatara` itself. A binary
//! rather than a shell script, so the release builds it for every platform
//! and packs it like the plugin (scripts/release).

#[path = "../complete_helper.rs"]
mod complete_helper;

fn main() -> std::process::ExitCode {
    complete_helper::delegate("kubectl-tatara")
}
