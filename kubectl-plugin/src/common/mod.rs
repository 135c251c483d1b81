//! CLI plumbing shared by both kubectl plugins: kubectl's connection flags
//! and a bounded `kube::Client` from them ([`connection`]), kubectl's output
//! formats ([`output`], [`jsonpath`]), `error: ...` reporting with
//! documented exit codes ([`exit_code`]), completion through kubectl
//! ([`complete`]) and the `version` subcommand.
//!
//! A plugin binary composes these with clap's `#[command(flatten)]`:
//!
//! ```no_run
//! use clap::{Parser, Subcommand};
//! use kubectl_plugin::common::{self, CliError, CompletionArgs, GlobalArgs, KubeArgs, OutputArgs};
//!
//! #[derive(Parser)]
//! #[command(name = "kubectl-example", bin_name = "kubectl example", version)]
//! struct Cli {
//!     #[command(flatten)]
//!     global: GlobalArgs,
//!     #[command(subcommand)]
//!     command: Cmd,
//! }
//! #[derive(Subcommand)]
//! enum Cmd {
//!     Show {
//!         #[command(flatten)]
//!         kube: KubeArgs,
//!         #[command(flatten)]
//!         output: OutputArgs,
//!     },
//!     Completion(CompletionArgs),
//! }
//! fn main() -> std::process::ExitCode {
//!     let cli = Cli::parse();
//!     common::init_logging(&cli.global);
//!     common::exit(match cli.command {
//!         Cmd::Completion(args) => {
//!             common::print_completions::<Cli>(args.shell, &mut std::io::stdout());
//!             Ok(())
//!         }
//!         Cmd::Show { kube, output } => Err(CliError::new("not written yet")),
//!     })
//! }
//! ```

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, CommandFactory};
use runtime::ownership::executor::ExecutorError;

pub mod complete;
pub mod connection;
pub mod discovery;
pub mod jsonpath;
pub mod output;

pub use connection::{Call, KubeArgs, KubeTarget, api_failure, chain};
pub use output::{Cell, ColorChoice, Human, Node, Offers, OutputArgs, OutputFormat, Paint, Style, Table, print, table};

#[cfg(test)]
mod tests;

/// The exit codes of both plugins (0 is success). Every failure prints one
/// `error: ...` line on stderr.
pub mod exit_code {
    /// Any failure not listed below.
    pub const FAILURE: u8 = 1;
    /// The command line is wrong: an unknown flag, a bad value, a missing
    /// argument (clap's code for the same).
    pub const USAGE: u8 = 2;
    /// The object (or its type) does not exist.
    pub const NOT_FOUND: u8 = 3;
    /// The API server (or the forge) refused: RBAC, credentials, or a
    /// takeover by someone who is not a maintainer.
    pub const FORBIDDEN: u8 = 4;
    /// The API server, the sidecar, Redis or the forge could not be reached
    /// or did not answer in time.
    pub const UNREACHABLE: u8 = 5;
    /// `--exit-code` only: the command found something to report
    /// (violations, repairs to make).
    pub const FINDINGS: u8 = 6;

    /// The table printed in `--help` and the docs.
    pub const HELP: &str = "Exit status:\n  0  success\n  1  failure (anything not below)\n  \
                            2  usage error: a bad flag, value or argument\n  3  not found: the object or its type\n  \
                            4  forbidden: RBAC, credentials, or not a maintainer\n  \
                            5  unreachable: the API server, sidecar, Redis or forge did not answer in time\n  \
                            6  findings, with --exit-code (violations, repairs to make)";
}

/// `--exit-code`: for CI, exit [`exit_code::FINDINGS`] when the command
/// found something to report (as `git diff --exit-code`).
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct ExitCodeArg {
    /// Exit with status 6 when there is something to report (violations,
    /// repairs to make), 0 otherwise; for CI.
    #[arg(long)]
    pub exit_code: bool,
}

impl ExitCodeArg {
    /// `Ok` unless `--exit-code` is given and `count` findings were printed.
    pub fn findings(self, count: usize, what: &str) -> Result<(), CliError> {
        if self.exit_code && count > 0 {
            return Err(CliError::findings(format!("{count} {what} (--exit-code)")));
        }
        Ok(())
    }
}

/// What the `version` subcommand prints: the release and the commit it was
/// built from (`build.rs`). `--version` prints the bare release, which the
/// release tooling reads.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("REVERSER_COMMIT"), ")");

/// A plugin's top-level `--help` epilogue: its examples, then the exit
/// codes.
pub fn top_level_help(examples: &str) -> String {
    format!("{examples}\n\n{}", exit_code::HELP)
}

/// `PLUGIN version`: the plugin's name, release and commit, one line, as
/// `kubectl version --client` prints its own.
pub fn print_version(plugin: &str, out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(out, "{plugin} {VERSION}").map_err(|e| CliError::new(format!("cannot write the version: {e}")))
}

/// Flags of every command of both plugins: logging and colour.
#[derive(Debug, Clone, Default, Args)]
pub struct GlobalArgs {
    #[command(flatten)]
    pub log: runtime::telemetry::LogArgs,

    /// Colour the output and the logs: auto (only on a terminal, and never
    /// with NO_COLOR set), always or never.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto, global = true)]
    pub color: ColorChoice,
}

/// Installs the logging of a plugin: [`DEFAULT_LOG_FILTER`] unless
/// `REVERSER_LOG`/`RUST_LOG` says otherwise, coloured per `--color`.
pub fn init_logging(global: &GlobalArgs) {
    runtime::telemetry::init_with_colour(&global.log, DEFAULT_LOG_FILTER, global.color.stderr());
}

/// `completion <shell>`: print a completion script for the plugin binary.
#[derive(Debug, Clone, Args)]
pub struct CompletionArgs {
    /// The shell to generate the completion script for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `-A/--all-namespaces`, for the commands that list across namespaces.
/// Kept apart from [`KubeArgs`] because it means nothing to a command that
/// addresses one object.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct AllNamespacesArgs {
    /// List the requested objects across all namespaces; -n is then ignored.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
}

/// The plugins' log filter unless `REVERSER_LOG`/`RUST_LOG` says otherwise:
/// warnings only, since a human reads this stderr, and nothing from the
/// Kubernetes client, the forge client or the fact follower, whose failures the plugin reports
/// itself, once, as `error:`.
pub const DEFAULT_LOG_FILTER: &str = "warn,kube_client=off,octocrab=off,runtime::attribution::transport=off";

/// A failure a plugin reports to its user: printed as `error: <message>`
/// with a non-zero exit. The message says what failed, on which object, and
/// what to do, so build it with that in mind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    message: String,
    code: u8,
}

impl CliError {
    /// A failure with exit code [`exit_code::FAILURE`].
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), code: exit_code::FAILURE }
    }

    /// A usage error ([`exit_code::USAGE`]).
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(message).with_code(exit_code::USAGE)
    }

    /// Not a failure: `--exit-code` found something to report
    /// ([`exit_code::FINDINGS`]); printed without the `error: ` prefix.
    pub fn findings(message: impl Into<String>) -> Self {
        Self::new(message).with_code(exit_code::FINDINGS)
    }

    /// The same failure with another exit code (never 0: it is a failure).
    #[must_use]
    pub fn with_code(mut self, code: u8) -> Self {
        self.code = code.max(1);
        self
    }

    /// The message, without the `error: ` prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The process exit code this failure ends with.
    pub fn code(&self) -> u8 {
        self.code
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

/// The rules' and the runtime's messages already say what failed and what
/// to do; they reach the user as they are.
macro_rules! cli_error_from {
    ($($t:ty),* $(,)?) => {$(
        impl From<$t> for CliError {
            fn from(e: $t) -> Self {
                Self::new(e.to_string())
            }
        }
    )*};
}

cli_error_from!(
    rules::Error,
    runtime::Error,
    runtime::attribution::transport::TransportError,
    runtime::attribution::commit::GitError,
);

impl From<runtime::ownership::forge::ForgeError> for CliError {
    fn from(e: runtime::ownership::forge::ForgeError) -> Self {
        use runtime::ownership::forge::ForgeFailure;
        let code = match e.kind {
            ForgeFailure::Unreachable | ForgeFailure::TimedOut => exit_code::UNREACHABLE,
            ForgeFailure::Refused(401 | 403) => exit_code::FORBIDDEN,
            ForgeFailure::Refused(404) => exit_code::NOT_FOUND,
            ForgeFailure::Setup => exit_code::USAGE,
            ForgeFailure::Refused(_) | ForgeFailure::Answer => exit_code::FAILURE,
        };
        Self::new(e.to_string()).with_code(code)
    }
}

/// The resource a tatara kind is served as (`Task` -> `tasks.tatara.dev`),
/// for `kubectl auth can-i` hints.
fn tatara_resource(kind: &str) -> String {
    match kind {
        "Repository" => "repositories.tatara.dev".into(),
        "ConfigMap" => "configmaps".into(),
        other => format!("{}s.tatara.dev", other.to_lowercase()),
    }
}

/// An executor's failure in `namespace`, worded and coded like every other
/// API failure (403 says which verb on which resource, a timeout says so).
pub fn executor_failure(e: ExecutorError, namespace: &str) -> CliError {
    match e {
        ExecutorError::KubeRefused { verb, kind, name, code, message } => {
            let resource = tatara_resource(&kind);
            let name = if name == "*" { String::new() } else { name };
            let call = Call { verb: &verb, resource: &resource, name: &name, namespace };
            let doing =
                format!("cannot {verb} {kind}{}", if name.is_empty() { "s".into() } else { format!(" {name}") });
            let doing = format!("{doing} in namespace {namespace:?}");
            connection::refused(call, &doing, code, &message)
        }
        ExecutorError::Kube { verb, kind, name, source } => {
            let what = if name == "*" { format!("{kind}s") } else { format!("{kind} {name}") };
            connection::transport_failure(&format!("cannot {verb} {what} in namespace {namespace:?}"), &*source)
        }
        other => CliError::new(other.to_string()),
    }
}

/// Ends a plugin's `main`: success exits 0; a failure prints
/// `error: <message>` on stderr and exits with its code.
pub fn exit(result: Result<(), CliError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.code() == exit_code::FINDINGS => {
            eprintln!("{e}");
            ExitCode::from(e.code())
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.code())
        }
    }
}

/// Writes the completion script of the plugin's clap command `C` for
/// `shell`. The binary name is the command's name (`kubectl-reverser`), so
/// the script completes the plugin when it is run directly; kubectl itself
/// (1.26+) completes `kubectl reverser ...` through the
/// `kubectl_complete-reverser` helper ([`complete`]).
pub fn print_completions<C: CommandFactory>(shell: clap_complete::Shell, out: &mut dyn Write) {
    let mut cmd = C::command();
    let name = cmd.get_name().to_string();
    // clap_complete panics when its writer fails; render into memory and
    // let a closed pipe (`... completion bash | head`) end quietly.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut script);
    let _ = out.write_all(&script).and_then(|()| out.flush());
}

/// An object named the way kubectl commands take it: `TYPE/NAME` or
/// `TYPE NAME` (`deploy/web`, `deployment web`, `mergerequests.tatara.dev
/// mr-12`). The type is as typed; resolving it is discovery's job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedName {
    /// The resource type as the user wrote it.
    pub type_: String,
    pub name: String,
}

impl TypedName {
    /// Parses the positional arguments of a command addressing one object;
    /// anything else is a usage error.
    pub fn parse(args: &[String]) -> Result<Self, CliError> {
        let usage = |got: String| {
            CliError::usage(format!("expected one object as TYPE/NAME or TYPE NAME (e.g. deploy/web), got {got}"))
        };
        let parts: Vec<&str> = match args {
            [one] => match one.split_once('/') {
                Some((t, n)) if !n.contains('/') => vec![t, n],
                _ => return Err(usage(format!("{one:?}"))),
            },
            [t, n] if !t.contains('/') && !n.contains('/') => vec![t, n],
            [] => return Err(usage("nothing".into())),
            more => return Err(usage(format!("{more:?}"))),
        };
        match parts.as_slice() {
            [t, n] if !t.is_empty() && !n.is_empty() => Ok(Self { type_: (*t).to_string(), name: (*n).to_string() }),
            _ => Err(usage(format!("{args:?}"))),
        }
    }
}

impl std::fmt::Display for TypedName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.type_, self.name)
    }
}

/// Runs `fut` on a fresh two-thread runtime (each command is one short
/// async program).
pub fn block_on<T, F: std::future::Future<Output = Result<T, CliError>>>(fut: F) -> Result<T, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::new(format!("cannot start the async runtime: {e}")))?
        .block_on(fut)
}
