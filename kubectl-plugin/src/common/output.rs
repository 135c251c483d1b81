//! What a command prints, as kubectl prints it: a table for a human (`-o
//! wide` for more columns, `--no-headers` without the header row), or the
//! same result for a script: `-o json`, `-o yaml`, `-o name`, or `-o
//! jsonpath=TEMPLATE`. Colour only on a terminal (`--color`).

use std::io::{IsTerminal, Write};

use clap::{Args, ValueEnum};
use serde::Serialize;

use super::jsonpath::Template;
use super::{CliError, exit_code};

/// `-o FORMAT` and `--no-headers`. `WIDE` and `NAME` say whether the
/// command prints `-o wide` and `-o name`: only what it prints is offered,
/// in `--help`, in completion, and by the parser.
#[derive(Debug, Clone, Default, Args)]
pub struct OutputArgs<const WIDE: bool = true, const NAME: bool = true> {
    #[arg(
        short = 'o',
        long,
        value_name = "FORMAT",
        value_parser = FormatParser { wide: WIDE, name: NAME },
        // The help names them already; completion still offers them.
        hide_possible_values = true,
        help = FormatParser { wide: WIDE, name: NAME }.help()
    )]
    pub output: Option<OutputFormat>,

    /// Print tables without their header row.
    #[arg(long)]
    pub no_headers: bool,

    /// With -o jsonpath: false fails on a field the result lacks. Named in
    /// -o's help, not listed itself: a flag this long would push every
    /// command's help into the one-flag-per-two-lines layout.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set, hide = true)]
    pub allow_missing_template_keys: bool,
}

/// `-o`'s parser for a command that prints `wide` and `name` or not.
#[derive(Debug, Clone, Copy)]
pub struct FormatParser {
    pub wide: bool,
    pub name: bool,
}

impl FormatParser {
    /// The formats offered, as `-o` takes them (`jsonpath=` last).
    fn offered(&self) -> Vec<&'static str> {
        let mut f = vec!["json", "yaml"];
        if self.wide {
            f.push("wide");
        }
        if self.name {
            f.push("name");
        }
        f.push("jsonpath=");
        f
    }

    /// `json, yaml, wide or jsonpath=TEMPLATE`.
    fn listed(&self) -> String {
        let mut f: Vec<String> = self.offered().iter().map(|f| f.to_string()).collect();
        let last = f.pop().map(|j| j + "TEMPLATE").unwrap_or_default();
        format!("{} or {last}", f.join(", "))
    }

    fn help(&self) -> String {
        format!(
            "Output format: {} (kubectl's JSONPath over the -o json document; \
             --allow-missing-template-keys=false fails on a missing field). Default: a table.",
            self.listed()
        )
    }
}

impl clap::builder::TypedValueParser for FormatParser {
    type Value = OutputFormat;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<OutputFormat, clap::Error> {
        let _ = arg;
        // One line, as the plugins' other usage errors read.
        let invalid =
            |why: String| clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{why}\n")).with_cmd(cmd);
        let text = value.to_str().ok_or_else(|| invalid("not UTF-8".into()))?;
        let format = OutputFormat::parse(text)
            .map_err(|why| invalid(format!("-o {text}: {why}; use {}, or no -o for the table", self.listed())))?;
        let offered = match format {
            OutputFormat::Wide => self.wide,
            OutputFormat::Name => self.name,
            _ => true,
        };
        if !offered {
            let command = cmd.get_name();
            return Err(invalid(format!(
                "{command} does not print -o {text}: use {}, or no -o for the table",
                self.listed()
            )));
        }
        Ok(format)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(self.offered().into_iter().map(clap::builder::PossibleValue::new)))
    }
}

/// The output formats of `-o`.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum OutputFormat {
    /// Columns for a human.
    #[default]
    Table,
    /// The table with more columns.
    Wide,
    /// One JSON document.
    Json,
    /// One YAML document.
    Yaml,
    /// `resource/name`, one object per line.
    Name,
    /// A kubectl JSONPath template over the JSON document.
    JsonPath(Template),
    /// `jsonpath=` with a template that does not parse: refused by
    /// [`OutputArgs::check`] with exit 1, as kubectl 1.32 refuses it
    /// (`error parsing jsonpath`), not as a usage error (issue 29).
    BadJsonPath(String),
}

impl OutputFormat {
    /// Parses `-o`'s value as kubectl does (`jsonpath=`, `jsonpath-as-json`
    /// is not offered). A `jsonpath=` template that does not parse is
    /// [`OutputFormat::BadJsonPath`], an error only when the command runs.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "wide" => Ok(Self::Wide),
            "json" => Ok(Self::Json),
            "yaml" => Ok(Self::Yaml),
            "name" => Ok(Self::Name),
            _ => match s.split_once('=') {
                Some(("jsonpath", t)) => Ok(Template::parse(t).map_or_else(Self::BadJsonPath, Self::JsonPath)),
                _ => Err(format!("unknown output format {s:?}")),
            },
        }
    }

    fn label(&self) -> &'static str {
        match self {
            Self::Table => "table",
            Self::Wide => "wide",
            Self::Json => "json",
            Self::Yaml => "yaml",
            Self::Name => "name",
            Self::JsonPath(_) | Self::BadJsonPath(_) => "jsonpath",
        }
    }
}

/// `--color`: whether output and logs may carry colour.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    // Plain comments, not docs: with docs clap prints a paragraph per value
    // and `--help` loses its one-line-per-flag form.
    // Colour when writing to a terminal and NO_COLOR is unset.
    #[default]
    Auto,
    // Always colour.
    Always,
    // Never colour.
    Never,
}

impl ColorChoice {
    /// Whether a stream that is (or is not) a terminal gets colour.
    pub fn colours(self, terminal: bool) -> bool {
        match self {
            Self::Always => true,
            Self::Never => false,
            Self::Auto => terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    /// Whether stdout gets colour.
    pub fn stdout(self) -> bool {
        self.colours(std::io::stdout().is_terminal())
    }

    /// Whether stderr (the logs) gets colour.
    pub fn stderr(self) -> bool {
        self.colours(std::io::stderr().is_terminal())
    }
}

/// How a human form is drawn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    /// `-o wide`: the extra columns.
    pub wide: bool,
    /// Header rows (off with `--no-headers`).
    pub headers: bool,
    /// ANSI colour.
    pub colour: bool,
}

/// The colours a cell may be painted with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paint {
    /// Something wrong: a violation, an unresolved author.
    Red,
    /// Something fine.
    Green,
    /// Something to look at.
    Yellow,
    /// Less important text.
    Dim,
}

impl Paint {
    fn code(self) -> &'static str {
        match self {
            Self::Red => "31",
            Self::Green => "32",
            Self::Yellow => "33",
            Self::Dim => "2",
        }
    }

    /// `text` in this colour when `colour` is on.
    pub fn paint(self, text: &str, colour: bool) -> String {
        if colour && !text.is_empty() { format!("\x1b[{}m{text}\x1b[0m", self.code()) } else { text.to_string() }
    }
}

/// One table cell: its text and, maybe, its colour.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cell {
    pub text: String,
    pub paint: Option<Paint>,
}

impl Cell {
    pub fn painted(text: impl Into<String>, paint: Paint) -> Self {
        Self { text: text.into(), paint: Some(paint) }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Self {
        Self { text, paint: None }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Self {
        Self { text: text.to_string(), paint: None }
    }
}

/// A table with kubectl's look: upper-case headers, columns three spaces
/// apart, no trailing blanks. Columns marked wide show only with `-o wide`.
#[derive(Debug, Clone, Default)]
pub struct Table {
    columns: Vec<(String, bool)>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    /// A table with these columns (`(header, wide_only)`).
    pub fn new(columns: &[(&str, bool)]) -> Self {
        Self { columns: columns.iter().map(|(h, w)| (h.to_uppercase(), *w)).collect(), rows: Vec::new() }
    }

    /// Adds a row, one cell per column.
    pub fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text in `style`.
    pub fn render(&self, style: &Style) -> String {
        let shown: Vec<usize> = (0..self.columns.len()).filter(|i| style.wide || !self.columns[*i].1).collect();
        let mut widths: Vec<usize> = shown.iter().map(|i| self.columns[*i].0.chars().count()).collect();
        for row in &self.rows {
            for (w, i) in widths.iter_mut().zip(&shown) {
                *w = (*w).max(row.get(*i).map_or(0, |c| c.text.chars().count()));
            }
        }
        let mut out = String::new();
        let mut line = |cells: Vec<Cell>| {
            let mut text = String::new();
            let last = cells.iter().rposition(|c| !c.text.is_empty()).map_or(0, |i| i + 1);
            for (k, cell) in cells.iter().take(last).enumerate() {
                if k > 0 {
                    text.push_str("   ");
                }
                let pad = widths[k].saturating_sub(cell.text.chars().count());
                match cell.paint {
                    Some(p) => text.push_str(&p.paint(&cell.text, style.colour)),
                    None => text.push_str(&cell.text),
                }
                if k + 1 < last {
                    text.push_str(&" ".repeat(pad));
                }
            }
            out.push_str(&text);
            out.push('\n');
        };
        if style.headers {
            line(shown.iter().map(|i| Cell::from(self.columns[*i].0.as_str())).collect());
        }
        for row in &self.rows {
            line(shown.iter().map(|i| row.get(*i).cloned().unwrap_or_default()).collect());
        }
        out
    }
}

/// A node of a tree drawn like kubectl-tree: each child's first cell is
/// prefixed with `├─` / `└─`, nested under `│ `.
#[derive(Debug, Clone, Default)]
pub struct Node {
    pub cells: Vec<Cell>,
    pub children: Vec<Node>,
}

impl Node {
    /// Adds the tree's rows to `table`: the first cell of each carries the
    /// tree's drawing.
    pub fn add_to(&self, table: &mut Table) {
        self.add(table, "", None);
    }

    fn add(&self, table: &mut Table, indent: &str, last: Option<bool>) {
        let mut cells = self.cells.clone();
        let branch = match last {
            None => "",
            Some(true) => "└─",
            Some(false) => "├─",
        };
        if let Some(first) = cells.first_mut() {
            first.text = format!("{indent}{branch}{}", first.text);
        }
        table.row(cells);
        let child_indent = match last {
            None => String::new(),
            Some(true) => format!("{indent}  "),
            Some(false) => format!("{indent}│ "),
        };
        for (i, child) in self.children.iter().enumerate() {
            child.add(table, &child_indent, Some(i + 1 == self.children.len()));
        }
    }
}

/// Which of `-o`'s formats a command offers besides table, json, yaml and
/// jsonpath.
#[derive(Debug, Clone, Copy, Default)]
pub struct Offers {
    /// `-o wide`.
    pub wide: bool,
    /// `-o name`.
    pub name: bool,
}

impl<const WIDE: bool, const NAME: bool> OutputArgs<WIDE, NAME> {
    /// The format asked for.
    pub fn format(&self) -> OutputFormat {
        self.output.clone().unwrap_or_default()
    }

    /// Refuses, before any work, a format `command` does not offer (the
    /// parser already refuses what `WIDE` and `NAME` leave out).
    pub fn check(&self, command: &str, offers: Offers) -> Result<(), CliError> {
        let format = self.format();
        if let OutputFormat::BadJsonPath(why) = &format {
            return Err(jsonpath_failure(why));
        }
        let refused = match format {
            OutputFormat::Wide => !offers.wide,
            OutputFormat::Name => !offers.name,
            _ => false,
        };
        if refused {
            let listed = FormatParser { wide: offers.wide, name: offers.name }.listed();
            return Err(CliError::new(format!(
                "{command} does not print -o {}: use {listed}, or no -o for the table",
                format.label()
            ))
            .with_code(exit_code::USAGE));
        }
        Ok(())
    }

    /// The human form's style.
    pub fn style(&self, colour: bool) -> Style {
        Style { wide: self.format() == OutputFormat::Wide, headers: !self.no_headers, colour }
    }
}

/// What a command's result looks like to a human and as names.
pub trait Human: Serialize {
    /// The table (or text) form.
    fn render(&self, style: &Style, out: &mut dyn Write) -> std::io::Result<()>;

    /// `-o name`: one `resource/name` per object (commands that offer it).
    fn names(&self) -> Vec<String> {
        Vec::new()
    }

    /// A line for the person after the table or text ("(plan only: ...)"):
    /// [`print`] writes it to stderr, so stdout stays the result alone for
    /// a pipe.
    fn note(&self, style: &Style) -> Option<String> {
        let _ = style;
        None
    }
}

/// A JSONPath template that does not parse, or fails on the result: exit 1,
/// as kubectl 1.32 (`error parsing jsonpath`, `error executing jsonpath`);
/// 2 stays for a bad flag.
fn jsonpath_failure(why: &str) -> CliError {
    CliError::new(why).with_code(exit_code::FAILURE)
}

/// Prints `value` as `args` asks: the human form, names, JSON, YAML, or a
/// JSONPath template over the JSON.
pub fn print<T: Human, const WIDE: bool, const NAME: bool>(
    args: &OutputArgs<WIDE, NAME>,
    colour: bool,
    value: &T,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let written = match args.format() {
        OutputFormat::Table | OutputFormat::Wide => {
            let style = args.style(colour);
            value.render(&style, out).and_then(|()| {
                // After the result, once it is out.
                out.flush()?;
                match value.note(&style) {
                    Some(note) => writeln!(std::io::stderr(), "{note}"),
                    None => Ok(()),
                }
            })
        }
        OutputFormat::Name => value.names().iter().try_for_each(|n| writeln!(out, "{n}")),
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
        OutputFormat::JsonPath(template) => {
            let json = serde_json::to_value(value)
                .map_err(|e| CliError::new(format!("cannot render the result as JSON: {e}")))?;
            let text = template.render(&json, args.allow_missing_template_keys).map_err(|e| jsonpath_failure(&e))?;
            out.write_all(text.as_bytes())
        }
        OutputFormat::BadJsonPath(why) => return Err(jsonpath_failure(&why)),
    };
    match written {
        // `... | head` closes the pipe early: the output was wanted no further.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(|e| CliError::new(format!("cannot write the output: {e}"))),
    }
}

/// Formats rows as aligned, upper-case-headed columns, like kubectl's
/// tables (no colour, every column shown).
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let columns: Vec<(&str, bool)> = headers.iter().map(|h| (*h, false)).collect();
    let mut t = Table::new(&columns);
    for row in rows {
        t.row(row.iter().map(|c| Cell::from(c.as_str())).collect());
    }
    t.render(&Style { wide: true, headers: true, colour: false })
}
