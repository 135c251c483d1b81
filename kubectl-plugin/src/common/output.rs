//! `-o table|json|yaml` (kubectl's other formats come with issue 15's point 3).

use std::io::Write;

use clap::{Args, ValueEnum};
use serde::Serialize;

use super::CliError;

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
