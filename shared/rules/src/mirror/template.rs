//! A Go `text/template` subset for GitProvider commit message templates (`eventTemplate`, `groupTemplate`,
//! `reconcileTemplate`), pure Rust and free of I/O.
//!
//! Supported: text, `{{.Field}}` and field chains (`.A.B`, `$r.Name`, `(index .Resources 0).Name`), `$`, `.`,
//! variables (`{{$x := …}}`, `{{$x = …}}`, `{{range $i, $r := …}}`), `{{if}}`/`{{else if}}`/`{{else}}`,
//! `{{range}}` (lists, maps in key order, integers) with `{{else}}`, `{{with}}`/`{{else with}}`/`{{else}}`,
//! pipelines (`{{.X | printf "%s"}}`), parentheses, string/raw-string/integer/bool literals, trim markers
//! `{{-` / `-}}`, comments `{{/* */}}`, and the functions `and or not len index printf print println eq ne lt le
//! gt ge` with Go's semantics (short-circuit `and`/`or`, multi-argument `eq`, Go truthiness, Go `%v` printing).
//! Not supported: `define`/`template`/`block`, `break`/`continue`, floats, `nil`, method calls.
//!
//! Unlike Go, [`Template::parse`] type-checks every field against the documented variables of its
//! [`TemplateKind`], so a typo such as `{{.Autor}}` is rejected when the GitProvider is applied, not when the
//! first commit is written.
//!
//! One module per stage: `schema` (the documented variables as static types), `lex`, `parse`, `check` (fields
//! and variables against the schema) and `exec` (rendering).

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

mod check;
mod exec;
mod lex;
mod parse;
mod schema;

use check::*;
use exec::*;
use lex::*;
use parse::*;
use schema::*;

/// Data a template renders: Go-like dynamic values. Structs are [`Value::Map`]s keyed by field name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// A boolean; the result of `eq`, `not`, ….
    Bool(bool),
    /// A slice.
    List(Vec<Value>),
    /// A map, or a struct keyed by field name.
    Map(BTreeMap<String, Value>),
}

impl Value {
    /// Builds a [`Value::Map`] from `(name, value)` pairs.
    pub fn map<K: Into<String>, V: Into<Value>>(entries: impl IntoIterator<Item = (K, V)>) -> Self {
        Value::Map(entries.into_iter().map(|(k, v)| (k.into(), v.into())).collect())
    }

    /// Go's truthiness: false, 0, "" and empty lists/maps are false.
    pub fn is_truthy(&self) -> bool {
        match self {
            Value::Str(s) => !s.is_empty(),
            Value::Int(i) => *i != 0,
            Value::Bool(b) => *b,
            Value::List(l) => !l.is_empty(),
            Value::Map(m) => !m.is_empty(),
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Int(_) => "int",
            Value::Bool(_) => "bool",
            Value::List(_) => "list",
            Value::Map(_) => "map",
        }
    }
}

/// Formats like Go's `%v`: lists as `[a b]`, maps as `map[k:v]` in key order.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Str(s) => f.write_str(s),
            Value::Int(i) => write!(f, "{i}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::List(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Value::Map(map) => {
                f.write_str("map[")?;
                for (i, (k, v)) in map.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    write!(f, "{k}:{v}")?;
                }
                f.write_str("]")
            }
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_owned())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}
impl From<usize> for Value {
    fn from(i: usize) -> Self {
        Value::Int(i64::try_from(i).unwrap_or(i64::MAX))
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}
impl<V: Into<Value>> From<Vec<V>> for Value {
    fn from(items: Vec<V>) -> Self {
        Value::List(items.into_iter().map(Into::into).collect())
    }
}

/// Which GitProvider `spec.commit.message` field a template comes from; decides the variables it may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateKind {
    /// One commit per change: Operation, Group, Version, Resource, Namespace, Name, APIVersion, Username, GitTarget.
    Event,
    /// One commit per batch of an author's changes: Author, GitTarget, Count, Operations, Resources.
    Group,
    /// One commit per reconcile: Count, GitTarget, Group, Version, Resource, APIVersion, Namespace, Revision,
    /// ResourceVersion.
    Reconcile,
    /// The newer upstream's one template for every live window (`liveTemplate`, gitops-reverser #345): the
    /// group variables, each `.Resources` element also carrying its Operation and APIVersion.
    Live,
}

impl TemplateKind {
    /// The CRD field name, used in error messages.
    pub fn field_name(self) -> &'static str {
        match self {
            TemplateKind::Event => "eventTemplate",
            TemplateKind::Group => "groupTemplate",
            TemplateKind::Reconcile => "reconcileTemplate",
            TemplateKind::Live => "liveTemplate",
        }
    }

    /// The template used when the GitProvider leaves this field unset.
    pub fn default_source(self) -> &'static str {
        match self {
            TemplateKind::Event => DEFAULT_EVENT_TEMPLATE,
            TemplateKind::Group => DEFAULT_GROUP_TEMPLATE,
            TemplateKind::Reconcile => DEFAULT_RECONCILE_TEMPLATE,
            TemplateKind::Live => DEFAULT_LIVE_TEMPLATE,
        }
    }

    /// Names of the top-level variables, in documented order.
    pub fn variables(self) -> Vec<&'static str> {
        self.schema().fields.iter().map(|(name, _)| *name).collect()
    }

    fn schema(self) -> &'static StructTy {
        match self {
            TemplateKind::Event => &EVENT,
            TemplateKind::Group => &GROUP,
            TemplateKind::Reconcile => &RECONCILE,
            TemplateKind::Live => &LIVE,
        }
    }
}

impl fmt::Display for TemplateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.field_name())
    }
}

/// Default `eventTemplate`, gitops-reverser's (`internal/git/types.go:110` at f0f7b42), e.g.
/// `[UPDATE] apps/v1/deployments/web`.
pub const DEFAULT_EVENT_TEMPLATE: &str = "[{{.Operation}}] {{.APIVersion}}/{{.Resource}}/{{.Name}}";
/// Default `groupTemplate`, gitops-reverser's (types.go:126), e.g. `alice on prod: 3 resource(s)`.
pub const DEFAULT_GROUP_TEMPLATE: &str = "{{.Author}} on {{.GitTarget}}: {{.Count}} resource(s)";
/// Default `reconcileTemplate`, gitops-reverser's (types.go:121-123), e.g.
/// `reconciled 12 deployments (last resourceVersion: 42)`.
pub const DEFAULT_RECONCILE_TEMPLATE: &str = "reconciled {{.Count}} \
{{if .Resource}}{{.Resource}}{{else}}resources{{end}}{{if .Revision}} (last resourceVersion: {{.Revision}}){{end}}";
/// Default `liveTemplate`, the newer upstream's (`DefaultLiveCommitMessageTemplate`, after #345). Only a
/// GitTarget or GitProvider that sets `liveTemplate` is titled by it; without one the event and group
/// templates title live windows, as at f0f7b42.
pub const DEFAULT_LIVE_TEMPLATE: &str = "chore: sync {{.Count}} resource{{if ne .Count 1}}s{{end}}\n\n\
{{range .Resources -}}- [{{.Operation}}] {{.APIVersion}}/{{.Resource}}/{{.Namespace}}/{{.Name}}\n{{end -}}";

/// Why a template was rejected or could not be rendered. Positions are 1-based; columns count characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The template is not valid template syntax, or uses an unsupported construct or function.
    #[error("{kind} line {line}, column {column}: {message}")]
    Syntax { kind: TemplateKind, line: usize, column: usize, message: String },

    /// A field that the template kind does not provide.
    #[error("{kind} line {line}, column {column}: unknown field `{field}`; {owner} provides {available}")]
    UnknownField {
        kind: TemplateKind,
        line: usize,
        column: usize,
        /// The unknown name, e.g. `.Autor`.
        field: String,
        /// Whose fields were searched, e.g. `groupTemplate` or `a .Resources element`.
        owner: String,
        /// The valid names, comma-separated, in documented order.
        available: String,
    },

    /// Well-formed but meaningless for the data, e.g. `{{range .Count}}` over a string or `eq` of a string and an int.
    #[error("{kind} line {line}, column {column}: {message}")]
    Type { kind: TemplateKind, line: usize, column: usize, message: String },

    /// The context handed to `render` does not match the kind's documented variables (a caller bug).
    #[error("{kind}: render context field `{path}` should be {expected} but is {found}")]
    Context { kind: TemplateKind, path: String, expected: &'static str, found: &'static str },

    /// Evaluation failed, e.g. `index` out of range.
    #[error("{kind} line {line}, column {column}: {message}")]
    Render { kind: TemplateKind, line: usize, column: usize, message: String },
}

/// A parsed and validated template, cheap to render many times.
#[derive(Debug, Clone)]
pub struct Template {
    kind: TemplateKind,
    source: String,
    nodes: Vec<Node>,
}

impl Template {
    /// Parses `source` and checks every field, variable and function use against `kind`'s variables.
    pub fn parse(source: &str, kind: TemplateKind) -> Result<Self, TemplateError> {
        let ctx = Ctx { kind, src: source };
        let segments = lex(ctx)?;
        let mut parser = Parser { ctx, segments, next: 0 };
        let (mut nodes, stop) = parser.parse_list()?;
        match stop {
            Stop::Eof => {}
            Stop::End(pos) => {
                return Err(ctx.syntax(pos, "unexpected {{end}}: no {{if}}, {{range}} or {{with}} is open"));
            }
            Stop::Else(pos, _) => {
                return Err(ctx.syntax(pos, "unexpected {{else}}: no {{if}}, {{range}} or {{with}} is open"));
            }
        }
        let root = Ty::Struct(kind.schema());
        Checker { ctx, root, vars: vec![("$".to_owned(), root)] }.check_nodes(&mut nodes, root)?;
        Ok(Self { kind, source: source.to_owned(), nodes })
    }

    /// Parses the kind's default template.
    pub fn default_for(kind: TemplateKind) -> Self {
        Self::parse(kind.default_source(), kind).expect("default templates are tested to parse")
    }

    /// The kind this template was validated for.
    pub fn kind(&self) -> TemplateKind {
        self.kind
    }

    /// Renders with `context`, a [`Value::Map`] of the kind's variables. Missing variables render as their zero
    /// value (`""`, `0`, empty list), as Go does for struct fields; extra entries are ignored.
    pub fn render(&self, context: &Value) -> Result<String, TemplateError> {
        let root = Ty::Struct(self.kind.schema());
        check_context(self.kind, context, root, "")?;
        let mut exec = Exec { ctx: Ctx { kind: self.kind, src: &self.source }, out: String::new(), vars: Vec::new() };
        exec.vars.push(("$".to_owned(), context.clone()));
        exec.nodes(&self.nodes, context)?;
        Ok(exec.out)
    }
}

#[cfg(test)]
mod tests;
