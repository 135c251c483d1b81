//! `kubectl reverser`: the attribution plugin's command line. Each
//! subcommand is a module here; they parse, call the `shared` crate, print.

use clap::{Parser, Subcommand};

use crate::common::{self, CliError, CompletionArgs};

pub mod complete;
pub mod inject;
pub mod why;

#[cfg(test)]
mod tests;

/// `kubectl reverser`.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl-reverser",
    bin_name = "kubectl reverser",
    version,
    after_help = common::top_level_help("Examples:\n  kubectl reverser why deploy/web -n shop --socket /var/run/reverser/reverser.sock\n  \
                  kubectl reverser why cm/settings --redis-url \"$REDIS_URL\" --route prod-eu-1 -o json\n  \
                  kubectl reverser inject -f deploy.yaml --redis-url-secret redis/url | kubectl apply -f -\n  \
                  source <(kubectl reverser completion bash)"),
    about = "Attribution for Git-mirrored cluster state: explain who authored an object, inject the reverser sidecar"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: common::GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands of `kubectl reverser`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Add the reverser sidecar to Kubernetes manifests (like `linkerd
    /// inject`) and write them to stdout.
    Inject(inject::Args),
    /// Explain who authored an object's current state (or its removal), on
    /// which evidence, what competed, and its Git history.
    Why(Box<why::Args>),
    /// Print a shell completion script for kubectl-reverser.
    Completion(CompletionArgs),
    /// Print the plugin's version and the commit it was built from.
    Version,
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<(), CliError> {
    let colour = cli.global.color.stdout();
    match cli.command {
        Command::Inject(args) => inject::run(
            &args,
            &mut std::io::stdin().lock(),
            &mut std::io::stdout().lock(),
            &mut std::io::stderr().lock(),
        ),
        Command::Why(args) => why::run(&args, colour, &mut std::io::stdout().lock()),
        Command::Completion(args) => {
            common::print_completions::<Cli>(args.shell, &mut std::io::stdout().lock());
            Ok(())
        }
        Command::Version => common::print_version("kubectl-reverser", &mut std::io::stdout().lock()),
    }
}
