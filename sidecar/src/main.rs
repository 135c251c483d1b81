//! `reverser-sidecar`: the attribution sidecar. `serve` runs the product,
//! `receive` the audit receiver alone, `replay` the engine over a recorded
//! timeline (`spec/replay.md`).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod replay;
mod tls;

#[derive(Debug, Parser)]
#[command(
    name = "reverser-sidecar",
    version,
    about = "Attribution sidecar: who authored each change mirrored into Git"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the attribution engine over a recorded timeline on a virtual clock
    /// and print one JSON line per watch record.
    Replay(replay::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Replay(args) => replay::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reverser-sidecar: {e}");
            ExitCode::FAILURE
        }
    }
}
