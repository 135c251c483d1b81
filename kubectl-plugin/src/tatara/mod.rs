//! `kubectl tatara`: the ownership plugin's command line (`spec/ownership.md`).
//! Each subcommand is a module here; they read the tatara CRs, ask
//! `rules::ownership` for decisions, print the plan (every line says why),
//! and change something only with `--apply`, through the shared executor's
//! guarded writes. `takeover` writes nothing: it asks the operator's REST API.

use clap::{Parser, Subcommand};
use kube::Api;
use rules::ownership::types::{Project, Repository};

use crate::common::{self, Call, CliError, CompletionArgs};

pub mod complete;
pub mod owners;
pub mod repair;
pub mod sweep;
pub mod takeover;
pub mod why;

#[cfg(test)]
mod tests;

/// `kubectl tatara`.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl-tatara",
    bin_name = "kubectl tatara",
    version,
    after_help = common::top_level_help("Examples:\n  kubectl tatara owners iss-tatara-operator-412 -n tatara\n  \
                  kubectl tatara why task/mt-i-tatara-operator-412 -n tatara\n  \
                  kubectl tatara repair -A --exit-code\n  \
                  GITHUB_TOKEN=... kubectl tatara sweep --project tatara -n tatara\n  \
                  GITHUB_TOKEN=... TATARA_TOKEN=... TATARA_OPERATOR_URL=... kubectl tatara takeover 'tatara-operator!9' -n tatara"),
    about = "Ownership of tatara's SCM artifacts: show, repair, sweep, take over"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: common::GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands of `kubectl tatara`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the ownership tree of an Issue, MergeRequest or Task, with every
    /// owner-reference rule violation marked.
    Owners(owners::Args),
    /// Find every Issue and MergeRequest that breaks an owner-reference rule;
    /// print the plan, and with --apply repair each in one guarded write.
    Repair(repair::Args),
    /// Run the sweep for a project against the forge: orphans, mint stages,
    /// pull-request dispositions, both budgets; with --apply ask the operator
    /// to run its own sweep now.
    Sweep(sweep::Args),
    /// Ask the tatara operator to take a merge request over, as a maintainer
    /// (REPO!NUMBER); writes nothing to the cluster.
    Takeover(takeover::Args),
    /// Say why a Task is where it is (its park and what releases it, the
    /// clocks, the admission it waits on), or which Task works an Issue or
    /// merge request and why; reads only.
    Why(why::Args),
    /// Print a shell completion script for kubectl-tatara.
    Completion(CompletionArgs),
    /// Print the plugin's version and the commit it was built from.
    Version,
}

/// The command line, as [`Cli::parse`] reads it, except that `-A` on a
/// subcommand that works in one namespace is refused with the reason and
/// what to pass instead, not clap's "tip: to pass '-A' as a value, use
/// '-- -A'" (issue 29). Exits 2 on a usage error, as clap does.
pub fn parse() -> Cli {
    use clap::CommandFactory;
    Cli::try_parse().unwrap_or_else(|e| refuse_all_namespaces(e, std::env::args().skip(1), Cli::command()).exit())
}

/// `e` reworded when it is `-A`/`--all-namespaces` unknown to the
/// subcommand in `args`; else `e` as it is.
fn refuse_all_namespaces(e: clap::Error, args: impl Iterator<Item = String>, mut cli: clap::Command) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let all =
        matches!(e.get(ContextKind::InvalidArg), Some(ContextValue::String(a)) if a == "-A" || a == "--all-namespaces");
    if e.kind() != ErrorKind::UnknownArgument || !all {
        return e;
    }
    cli.build();
    let Some(mut sub) = args.into_iter().find_map(|a| cli.find_subcommand(&a).cloned()) else { return e };
    let name = sub.get_name().to_string();
    let why = match name.as_str() {
        "owners" | "why" => format!(
            "{name} looks one object up by name in one namespace, so it cannot look across all namespaces (-A): \
             pass -n NAMESPACE, or run `kubectl tatara repair -A` for the rule violations of every namespace"
        ),
        _ => format!("{name} works in one namespace, so it cannot look across all namespaces (-A): pass -n NAMESPACE"),
    };
    let usage = sub.render_usage();
    clap::Error::raw(ErrorKind::ArgumentConflict, format!("{why}\n\n{usage}\n\nFor more information, try '--help'.\n"))
        .with_cmd(&sub)
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<(), CliError> {
    if let Command::Completion(args) = &cli.command {
        common::print_completions::<Cli>(args.shell, &mut std::io::stdout().lock());
        return Ok(());
    }
    if let Command::Version = &cli.command {
        return common::print_version("kubectl-tatara", &mut std::io::stdout().lock());
    }
    let out = &mut std::io::stdout().lock();
    let colour = cli.global.color.stdout();
    common::block_on(async move {
        match cli.command {
            Command::Owners(args) => owners::run(&args, colour, out).await,
            Command::Repair(args) => repair::run(&args, colour, out).await,
            Command::Sweep(args) => sweep::run(&args, colour, out).await,
            Command::Takeover(args) => takeover::run(&args, colour, out).await,
            Command::Why(args) => why::run(&args, colour, out).await,
            Command::Completion(_) | Command::Version => Ok(()),
        }
    })
}

/// Read Project `name` in `namespace`, saying what to do when it is missing.
pub(crate) async fn get_project(client: &kube::Client, namespace: &str, name: &str) -> Result<Project, CliError> {
    Api::<Project>::namespaced(client.clone(), namespace).get(name).await.map_err(|e| match e {
        kube::Error::Api(s) if s.code == 404 => CliError::new(format!(
            "there is no Project {name:?} in namespace {namespace:?}; name an existing Project with --project, or choose the namespace with -n"
        ))
        .with_code(common::exit_code::NOT_FOUND),
        e => common::api_failure(Call { verb: "get", resource: "projects.tatara.dev", name, namespace }, &e),
    })
}

/// Every Repository of `project` in `namespace` (`spec.projectRef`).
pub(crate) async fn project_repositories(
    client: &kube::Client,
    namespace: &str,
    project: &str,
) -> Result<Vec<Repository>, CliError> {
    let list =
        Api::<Repository>::namespaced(client.clone(), namespace).list(&Default::default()).await.map_err(|e| {
            common::api_failure(Call { verb: "list", resource: "repositories.tatara.dev", name: "", namespace }, &e)
        })?;
    Ok(list.items.into_iter().filter(|r| r.spec.project_ref == project).collect())
}
