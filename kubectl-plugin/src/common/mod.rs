//! CLI plumbing shared by both kubectl plugins: the flags kubectl users
//! expect, a `kube::Client` built from them, output formats, `error: ...`
//! reporting with a non-zero exit, and the `completion <shell>` subcommand.
//!
//! A plugin binary composes these with clap's `#[command(flatten)]`:
//!
//! ```no_run
//! use clap::{Parser, Subcommand};
//! use kubectl_plugin::common::{self, CliError, CompletionArgs, KubeArgs, OutputArgs};
//!
//! #[derive(Parser)]
//! #[command(name = "kubectl-example", version)]
//! struct Cli {
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
//!     common::exit(match Cli::parse().command {
//!         Cmd::Completion(args) => {
//!             common::print_completions::<Cli>(args.shell, &mut std::io::stdout());
//!             Ok(())
//!         }
//!         Cmd::Show { kube, output } => Err(CliError::new("not written yet")),
//!     })
//! }
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, ValueEnum};
use serde::Serialize;

#[cfg(test)]
mod tests;

/// The connection flags of every kubectl command. kubectl hands a plugin
/// every argument after its name untouched, so the plugin must parse these
/// itself, and `KUBECONFIG` reaches it through the environment.
#[derive(Debug, Clone, Default, Args)]
pub struct KubeArgs {
    /// Path to the kubeconfig file to use (default: $KUBECONFIG, then
    /// ~/.kube/config, then the in-cluster service account).
    #[arg(long, value_name = "PATH", global = true)]
    pub kubeconfig: Option<PathBuf>,

    /// The name of the kubeconfig context to use.
    #[arg(long, value_name = "NAME", global = true)]
    pub context: Option<String>,

    /// The namespace scope for this request (default: the context's).
    #[arg(short = 'n', long, value_name = "NAMESPACE", global = true)]
    pub namespace: Option<String>,
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

/// `-o table|json|yaml`.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct OutputArgs {
    /// Output format: a human table, or JSON / YAML a script can use.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
}

/// The output formats a plugin command offers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Columns for a human.
    #[default]
    Table,
    /// One JSON document.
    Json,
    /// One YAML document.
    Yaml,
}

/// `completion <shell>`: print a completion script for the plugin binary.
#[derive(Debug, Clone, Args)]
pub struct CompletionArgs {
    /// The shell to generate the completion script for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The plugins' log filter unless `REVERSER_LOG`/`RUST_LOG` says otherwise:
/// warnings only, since a human reads this stderr, and nothing from the
/// Kubernetes client or the fact follower, whose failures the plugin reports
/// itself, once, as `error:`.
pub const DEFAULT_LOG_FILTER: &str = "warn,kube_client=off,runtime::attribution::transport=off";

/// A failure a plugin reports to its user: printed as `error: <message>`
/// with a non-zero exit. The message says what failed, on which object, and
/// what to do, so build it with that in mind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    message: String,
    code: u8,
}

impl CliError {
    /// A failure with exit code 1.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), code: 1 }
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
    runtime::ownership::executor::ExecutorError,
    runtime::ownership::forge::ForgeError,
);

/// Ends a plugin's `main`: success exits 0; a failure prints
/// `error: <message>` on stderr and exits with its code.
pub fn exit(result: Result<(), CliError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.code())
        }
    }
}

/// Writes the completion script of the plugin's clap command `C` for
/// `shell`. The binary name is the command's name (`kubectl-reverser`), so
/// the script completes the plugin when it is run directly; kubectl itself
/// (1.26+) completes `kubectl reverser ...` through an executable named
/// `kubectl_complete-reverser` on the PATH.
pub fn print_completions<C: CommandFactory>(shell: clap_complete::Shell, out: &mut dyn Write) {
    let mut cmd = C::command();
    let name = cmd.get_name().to_string();
    // clap_complete panics when its writer fails; render into memory and
    // let a closed pipe (`... completion bash | head`) end quietly.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut script);
    let _ = out.write_all(&script).and_then(|()| out.flush());
}

/// A built client and the namespace the flags and the context select.
#[derive(Clone)]
pub struct KubeTarget {
    /// The client for the selected context.
    pub client: kube::Client,
    /// `-n` if given, else the context's namespace, else `default`.
    pub namespace: String,
}

impl std::fmt::Debug for KubeTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeTarget").field("namespace", &self.namespace).finish_non_exhaustive()
    }
}

impl KubeTarget {
    /// A client for `config` (adjusted by the caller, e.g. without kube's
    /// default retry), with the namespace it selects.
    pub fn from_config(config: kube::Config) -> Result<Self, CliError> {
        let namespace = config.default_namespace.clone();
        let url = config.cluster_url.to_string();
        let client = kube::Client::try_from(config).map_err(|e| {
            CliError::new(format!(
                "cannot build a client for cluster {url}: {e}; check the context's certificates and credentials"
            ))
        })?;
        Ok(KubeTarget { client, namespace })
    }
}

impl KubeArgs {
    /// The kube configuration these flags select, as kubectl would:
    /// `--kubeconfig` file, else `$KUBECONFIG` / `~/.kube/config`, else (with
    /// no `--context`) the in-cluster service account.
    pub async fn config(&self) -> Result<kube::Config, CliError> {
        let mut config = runtime::kubeconfig::load(self.kubeconfig.as_deref(), self.context.as_deref())
            .await
            .map_err(|e| CliError::new(e.to_string()))?;
        if let Some(ns) = &self.namespace {
            config.default_namespace = ns.clone();
        }
        Ok(config)
    }

    /// A client for [`Self::config`], with the namespace it selects.
    pub async fn client(&self) -> Result<KubeTarget, CliError> {
        KubeTarget::from_config(self.config().await?)
    }
}

/// Prints `value` in `format`: `table` calls `table` (which writes columns
/// for a human), `json` and `yaml` serialize `value` whole.
pub fn print_output<T, F>(format: OutputFormat, value: &T, out: &mut dyn Write, table: F) -> Result<(), CliError>
where
    T: Serialize + ?Sized,
    F: FnOnce(&T, &mut dyn Write) -> std::io::Result<()>,
{
    let written = match format {
        OutputFormat::Table => table(value, out),
        OutputFormat::Json => {
            let text = serde_json::to_string_pretty(value)
                .map_err(|e| CliError::new(format!("cannot render the result as JSON: {e}")))?;
            writeln!(out, "{text}")
        }
        OutputFormat::Yaml => {
            let text = serde_norway::to_string(value)
                .map_err(|e| CliError::new(format!("cannot render the result as YAML: {e}")))?;
            out.write_all(text.as_bytes())
        }
    };
    written.map_err(|e| CliError::new(format!("cannot write the output: {e}")))
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
    /// Parses the positional arguments of a command addressing one object.
    pub fn parse(args: &[String]) -> Result<Self, CliError> {
        let usage = |got: String| {
            CliError::new(format!("expected one object as TYPE/NAME or TYPE NAME (e.g. deploy/web), got {got}"))
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

/// Formats rows as aligned, upper-case-headed columns, like kubectl's tables.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = String>| {
        let mut text = String::new();
        for (i, cell) in cells.enumerate() {
            let w = widths.get(i).copied().unwrap_or(0);
            if i > 0 {
                text.push_str("   ");
            }
            text.push_str(&format!("{cell:<w$}"));
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut headers.iter().map(|h| h.to_uppercase()));
    for row in rows {
        line(&mut row.iter().cloned());
    }
    out
}
