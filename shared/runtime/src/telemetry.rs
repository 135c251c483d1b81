//! One logging setup for every binary: a `RUST_LOG`-style filter
//! (`REVERSER_LOG`, else `RUST_LOG`), `--log-format text|json`, colour only
//! when stderr is a terminal and `NO_COLOR` is unset. Logs go to stderr, so
//! stdout stays for a command's output.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    // Human-readable lines (comments, not doc: with docs clap prints a
    // paragraph per value and `--help` loses its one-line-per-flag form).
    #[default]
    Text,
    // One JSON object per line, for log collectors.
    Json,
}

/// The logging flags every binary takes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LogArgs {
    /// Log line format.
    #[arg(long, value_enum, env = "REVERSER_LOG_FORMAT", default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
}

/// The filter: `REVERSER_LOG`, else `RUST_LOG`, else `default` (e.g.
/// `info`, or `warn` for the kubectl plugins, whose stderr a human reads).
fn filter(default: &str) -> EnvFilter {
    ["REVERSER_LOG", "RUST_LOG"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.trim().is_empty()))
        .and_then(|spec| EnvFilter::try_new(spec).ok())
        .unwrap_or_else(|| EnvFilter::new(default))
}

/// Whether log lines may carry colour.
pub fn stderr_colour() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal()
}

/// Installs the process's subscriber. Call once, first thing in `main`; a
/// second call (a test harness that already installed one) changes nothing.
pub fn init(args: &LogArgs, default_filter: &str) {
    init_with_colour(args, default_filter, stderr_colour());
}

/// [`init`], with the caller deciding whether text lines carry colour (a
/// `--color` flag).
pub fn init_with_colour(args: &LogArgs, default_filter: &str, colour: bool) {
    let builder = tracing_subscriber::fmt().with_env_filter(filter(default_filter)).with_writer(std::io::stderr);
    let _ = match args.log_format {
        LogFormat::Text => builder.with_ansi(colour).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(false).try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_filter_falls_back_to_the_default() {
        // Nothing set in this test's environment names a filter we could
        // break, so the default is what `filter` gives.
        let f = filter("warn");
        assert!(f.to_string().contains("warn"), "{f}");
    }
}
