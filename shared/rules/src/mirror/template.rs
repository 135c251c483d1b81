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

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

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

// ---------------------------------------------------------------------------------------------------------------
// Schemas: the documented variables of each kind, as static types the checker walks.

#[derive(Debug, Clone, Copy)]
enum Ty {
    Str,
    Int,
    Bool,
    List(&'static Ty),
    Map(&'static MapTy),
    Struct(&'static StructTy),
    /// Statically unknown (e.g. `and` of mixed types): fields are checked at render time only.
    Any,
}

#[derive(Debug)]
struct StructTy {
    name: &'static str,
    fields: &'static [(&'static str, Ty)],
}

/// A string-keyed map whose documented keys are known, like `.Operations`.
#[derive(Debug)]
struct MapTy {
    name: &'static str,
    keys: &'static [&'static str],
    value: Ty,
}

static EVENT: StructTy = StructTy {
    name: "eventTemplate",
    fields: &[
        ("Operation", Ty::Str),
        ("Group", Ty::Str),
        ("Version", Ty::Str),
        ("Resource", Ty::Str),
        ("Namespace", Ty::Str),
        ("Name", Ty::Str),
        ("APIVersion", Ty::Str),
        ("Username", Ty::Str),
        ("GitTarget", Ty::Str),
    ],
};
static RESOURCE: StructTy = StructTy {
    name: "a .Resources element",
    fields: &[
        ("Group", Ty::Str),
        ("Version", Ty::Str),
        ("Resource", Ty::Str),
        ("Namespace", Ty::Str),
        ("Name", Ty::Str),
        ("Operation", Ty::Str),
        ("APIVersion", Ty::Str),
    ],
};
static RESOURCE_TY: Ty = Ty::Struct(&RESOURCE);
static OPERATIONS: MapTy = MapTy { name: ".Operations", keys: &["CREATE", "UPDATE", "DELETE"], value: Ty::Int };
static GROUP: StructTy = StructTy {
    name: "groupTemplate",
    fields: &[
        ("Author", Ty::Str),
        ("GitTarget", Ty::Str),
        ("Count", Ty::Int),
        ("Operations", Ty::Map(&OPERATIONS)),
        ("Resources", Ty::List(&RESOURCE_TY)),
    ],
};
static RECONCILE: StructTy = StructTy {
    name: "reconcileTemplate",
    fields: &[
        ("Count", Ty::Int),
        ("GitTarget", Ty::Str),
        ("Group", Ty::Str),
        ("Version", Ty::Str),
        ("Resource", Ty::Str),
        ("APIVersion", Ty::Str),
        ("Namespace", Ty::Str),
        ("Revision", Ty::Str),
        // The newer upstream's name for Revision.
        ("ResourceVersion", Ty::Str),
    ],
};
static LIVE: StructTy = StructTy {
    name: "liveTemplate",
    fields: &[
        ("Author", Ty::Str),
        ("GitTarget", Ty::Str),
        ("Count", Ty::Int),
        ("Operations", Ty::Map(&OPERATIONS)),
        ("Resources", Ty::List(&RESOURCE_TY)),
    ],
};

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Ty::Str => "a string",
            Ty::Int => "an int",
            Ty::Bool => "a bool",
            Ty::List(_) => "a list",
            Ty::Map(_) | Ty::Struct(_) => "a map",
            Ty::Any => "a value",
        }
    }

    /// Go's zero value, rendered for variables missing from the context.
    fn zero(self) -> Option<Value> {
        Some(match self {
            Ty::Str => Value::Str(String::new()),
            Ty::Int => Value::Int(0),
            Ty::Bool => Value::Bool(false),
            Ty::List(_) => Value::List(Vec::new()),
            Ty::Map(_) | Ty::Struct(_) => Value::Map(BTreeMap::new()),
            Ty::Any => return None,
        })
    }

    /// The comparable kind for `eq`/`lt`/…, if statically known.
    fn basic(self) -> Option<&'static str> {
        match self {
            Ty::Str => Some("string"),
            Ty::Int => Some("int"),
            Ty::Bool => Some("bool"),
            _ => None,
        }
    }

    fn same(self, other: Ty) -> bool {
        match (self, other) {
            (Ty::List(a), Ty::List(b)) => a.same(*b),
            (Ty::Map(a), Ty::Map(b)) => std::ptr::eq(a, b),
            (Ty::Struct(a), Ty::Struct(b)) => std::ptr::eq(a, b),
            (a, b) => a.basic().is_some() && a.basic() == b.basic(),
        }
    }
}

/// Checks that the caller's context has the documented shape, so type errors point at the caller, not the template.
fn check_context(kind: TemplateKind, value: &Value, ty: Ty, path: &str) -> Result<(), TemplateError> {
    let mismatch = || TemplateError::Context {
        kind,
        path: if path.is_empty() { ".".to_owned() } else { path.to_owned() },
        expected: ty.name(),
        found: value.type_name(),
    };
    match (ty, value) {
        (Ty::Any, _) | (Ty::Str, Value::Str(_)) | (Ty::Int, Value::Int(_)) | (Ty::Bool, Value::Bool(_)) => Ok(()),
        (Ty::List(elem), Value::List(items)) => {
            items.iter().enumerate().try_for_each(|(i, item)| check_context(kind, item, *elem, &format!("{path}[{i}]")))
        }
        (Ty::Map(map), Value::Map(entries)) => {
            entries.iter().try_for_each(|(k, v)| check_context(kind, v, map.value, &format!("{path}.{k}")))
        }
        (Ty::Struct(st), Value::Map(entries)) => {
            st.fields.iter().try_for_each(|(name, field_ty)| match entries.get(*name) {
                Some(v) => check_context(kind, v, *field_ty, &format!("{path}.{name}")),
                None => Ok(()),
            })
        }
        _ => Err(mismatch()),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Lexer: splits the source into text and action tokens, applying trim markers and dropping comments.

/// Kind and source, for turning byte offsets into positioned errors.
#[derive(Clone, Copy)]
struct Ctx<'s> {
    kind: TemplateKind,
    src: &'s str,
}

impl Ctx<'_> {
    fn line_col(&self, offset: usize) -> (usize, usize) {
        let before = &self.src[..offset.min(self.src.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, column)
    }

    fn syntax(&self, offset: usize, message: impl Into<String>) -> TemplateError {
        let (line, column) = self.line_col(offset);
        TemplateError::Syntax { kind: self.kind, line, column, message: message.into() }
    }

    fn type_error(&self, offset: usize, message: impl Into<String>) -> TemplateError {
        let (line, column) = self.line_col(offset);
        TemplateError::Type { kind: self.kind, line, column, message: message.into() }
    }

    fn render_error(&self, offset: usize, message: impl Into<String>) -> TemplateError {
        let (line, column) = self.line_col(offset);
        TemplateError::Render { kind: self.kind, line, column, message: message.into() }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// One `.Name` segment; adjacent segments form a chain.
    Field(String),
    Dot,
    /// `$` or `$name`, including the `$`.
    Var(String),
    Str(String),
    Int(i64),
    LParen,
    RParen,
    Pipe,
    Comma,
    Declare,
    Assign,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    start: usize,
    end: usize,
}

enum Segment {
    Text(String),
    Action { start: usize, tokens: Vec<Token> },
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_ident(c: u8, first: bool) -> bool {
    c == b'_' || c.is_ascii_alphabetic() || (!first && c.is_ascii_digit())
}

fn lex(ctx: Ctx<'_>) -> Result<Vec<Segment>, TemplateError> {
    let src = ctx.src;
    let bytes = src.as_bytes();
    let mut segments = Vec::new();
    let mut pos = 0;
    let mut trim_next_text = false;
    while pos < src.len() {
        let open = src[pos..].find("{{").map_or(src.len(), |i| pos + i);
        let mut text = &src[pos..open];
        if trim_next_text {
            text = text.trim_start_matches(|c: char| c.is_ascii() && is_space(c as u8));
        }
        // `{{- ` (dash then a space) trims the text before the action; `{{-3}}` is the number -3.
        let trim_before = open + 3 < src.len() && bytes[open + 2] == b'-' && is_space(bytes[open + 3]);
        if trim_before {
            text = text.trim_end_matches(|c: char| c.is_ascii() && is_space(c as u8));
        }
        if !text.is_empty() {
            segments.push(Segment::Text(text.to_owned()));
        }
        if open == src.len() {
            break;
        }
        let body = if trim_before { open + 3 } else { open + 2 };
        let (tokens, end, trim_after) = lex_action(ctx, open, body)?;
        if let Some(tokens) = tokens {
            segments.push(Segment::Action { start: open, tokens });
        }
        trim_next_text = trim_after;
        pos = end;
    }
    Ok(segments)
}

/// Lexes one action starting after `{{` / `{{- `. Returns its tokens (None for a comment), the offset after the
/// closing delimiter and whether that delimiter was ` -}}`.
fn lex_action(ctx: Ctx<'_>, open: usize, mut pos: usize) -> Result<(Option<Vec<Token>>, usize, bool), TemplateError> {
    let src = ctx.src;
    let bytes = src.as_bytes();
    let unclosed = || ctx.syntax(open, "unclosed action: missing `}}`");
    let skip_space = |mut p: usize| {
        while p < bytes.len() && is_space(bytes[p]) {
            p += 1;
        }
        p
    };
    let close_at = |p: usize| -> Option<(usize, bool)> {
        if src[p..].starts_with("}}") {
            Some((p + 2, false))
        } else if p > 0 && is_space(bytes[p - 1]) && src[p..].starts_with("-}}") {
            Some((p + 3, true))
        } else {
            None
        }
    };

    let comment_start = skip_space(pos);
    if src[comment_start..].starts_with("/*") {
        let close =
            src[comment_start + 2..].find("*/").ok_or_else(|| ctx.syntax(open, "unclosed comment: missing `*/`"))?;
        let after = skip_space(comment_start + 2 + close + 2);
        return match close_at(after) {
            Some((end, trim)) => Ok((None, end, trim)),
            None => Err(ctx.syntax(open, "comment must be followed directly by `}}`")),
        };
    }

    let mut tokens = Vec::new();
    loop {
        pos = skip_space(pos);
        if pos >= bytes.len() {
            return Err(unclosed());
        }
        if let Some((end, trim)) = close_at(pos) {
            return Ok((Some(tokens), end, trim));
        }
        let start = pos;
        let c = bytes[pos];
        let tok = match c {
            b'"' => {
                let mut value = String::new();
                let mut chars = src[pos + 1..].char_indices();
                loop {
                    match chars.next() {
                        None | Some((_, '\n')) => return Err(ctx.syntax(start, "unterminated quoted string")),
                        Some((i, '"')) => {
                            pos += 1 + i + 1;
                            break;
                        }
                        Some((i, '\\')) => match chars.next() {
                            Some((_, '"')) => value.push('"'),
                            Some((_, '\\')) => value.push('\\'),
                            Some((_, 'n')) => value.push('\n'),
                            Some((_, 't')) => value.push('\t'),
                            Some((_, 'r')) => value.push('\r'),
                            _ => return Err(ctx.syntax(pos + 1 + i, "unsupported escape in quoted string")),
                        },
                        Some((_, ch)) => value.push(ch),
                    }
                }
                Tok::Str(value)
            }
            b'`' => {
                let close = src[pos + 1..].find('`').ok_or_else(|| ctx.syntax(start, "unterminated raw string"))?;
                let value = src[pos + 1..pos + 1 + close].to_owned();
                pos += close + 2;
                Tok::Str(value)
            }
            b'.' if bytes.get(pos + 1).is_some_and(|&b| is_ident(b, true)) => {
                let name = ident_at(bytes, pos + 1);
                pos += 1 + name.len();
                Tok::Field(name.to_owned())
            }
            b'.' => {
                pos += 1;
                Tok::Dot
            }
            b'$' => {
                let name = ident_at(bytes, pos + 1);
                pos += 1 + name.len();
                Tok::Var(format!("${name}"))
            }
            b'0'..=b'9' | b'-' | b'+' if c.is_ascii_digit() || bytes.get(pos + 1).is_some_and(u8::is_ascii_digit) => {
                let mut end = pos + 1;
                while end < bytes.len()
                    && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'.' || bytes[end] == b'_')
                {
                    end += 1;
                }
                let text = &src[pos..end];
                let n = text.parse::<i64>().map_err(|_| {
                    ctx.syntax(start, format!("invalid number `{text}`: only decimal integers are supported"))
                })?;
                pos = end;
                Tok::Int(n)
            }
            c if is_ident(c, true) => {
                let name = ident_at(bytes, pos);
                pos += name.len();
                Tok::Ident(name.to_owned())
            }
            b'(' | b')' | b'|' | b',' | b'=' => {
                pos += 1;
                match c {
                    b'(' => Tok::LParen,
                    b')' => Tok::RParen,
                    b'|' => Tok::Pipe,
                    b',' => Tok::Comma,
                    _ => Tok::Assign,
                }
            }
            b':' if bytes.get(pos + 1) == Some(&b'=') => {
                pos += 2;
                Tok::Declare
            }
            _ => {
                let ch = src[pos..].chars().next().unwrap_or('?');
                return Err(ctx.syntax(start, format!("unexpected `{ch}` in action")));
            }
        };
        tokens.push(Token { tok, start, end: pos });
    }
}

fn ident_at(bytes: &[u8], start: usize) -> &str {
    let mut end = start;
    while end < bytes.len() && is_ident(bytes[end], end == start) {
        end += 1;
    }
    // Identifiers are ASCII, so this slice is on char boundaries.
    std::str::from_utf8(&bytes[start..end]).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------------------------
// Parser: builds the node tree; every node keeps its source offset for error positions.

#[derive(Debug, Clone)]
enum Node {
    Text(String),
    /// `{{pipeline}}`: prints the result unless the pipeline declares or assigns a variable.
    Action(Pipeline),
    /// `if` and `with` chains: the first branch whose pipeline is truthy runs, else `otherwise`.
    Branches {
        keyword: Keyword,
        branches: Vec<(Pipeline, Vec<Node>)>,
        otherwise: Vec<Node>,
    },
    Range {
        pipe: Pipeline,
        body: Vec<Node>,
        otherwise: Vec<Node>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keyword {
    If,
    With,
    Range,
}

impl Keyword {
    fn name(self) -> &'static str {
        match self {
            Keyword::If => "if",
            Keyword::With => "with",
            Keyword::Range => "range",
        }
    }
}

#[derive(Debug, Clone)]
struct Pipeline {
    pos: usize,
    /// Offset of the declaration, for errors about its variables.
    decl_pos: usize,
    /// Declared or assigned variables (`$x` or `$i, $r`).
    vars: Vec<String>,
    /// `=` rather than `:=`.
    assign: bool,
    cmds: Vec<Command>,
}

#[derive(Debug, Clone)]
struct Command {
    pos: usize,
    func: Option<Func>,
    args: Vec<Term>,
    /// Static result type, filled in by the checker; gives `index` on a missing map key its zero value.
    ty: Ty,
}

#[derive(Debug, Clone)]
enum Term {
    Lit(Value),
    /// A value with an optional field chain: `.`, `.A.B`, `$x.A`, `(pipeline).A`.
    Path {
        pos: usize,
        base: Base,
        chain: Vec<Step>,
    },
}

#[derive(Debug, Clone)]
enum Base {
    Dot,
    Var(String),
    Pipe(Box<Pipeline>),
}

#[derive(Debug, Clone)]
struct Step {
    name: String,
    pos: usize,
    /// Static type after this step, filled in by the checker; gives missing fields their zero value.
    ty: Ty,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Func {
    And,
    Or,
    Not,
    Len,
    Index,
    Printf,
    Print,
    Println,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

const FUNCS: [(&str, Func); 14] = [
    ("and", Func::And),
    ("or", Func::Or),
    ("not", Func::Not),
    ("len", Func::Len),
    ("index", Func::Index),
    ("printf", Func::Printf),
    ("print", Func::Print),
    ("println", Func::Println),
    ("eq", Func::Eq),
    ("ne", Func::Ne),
    ("lt", Func::Lt),
    ("le", Func::Le),
    ("gt", Func::Gt),
    ("ge", Func::Ge),
];

impl Func {
    fn name(self) -> &'static str {
        FUNCS.iter().find(|(_, f)| *f == self).map_or("?", |(n, _)| n)
    }
}

/// What one position of a command holds.
enum Operand {
    Func(Func),
    Term(Term),
}

enum Stop {
    Eof,
    End(usize),
    /// `{{else …}}` at this offset, with the tokens after `else`.
    Else(usize, Vec<Token>),
}

struct Parser<'s> {
    ctx: Ctx<'s>,
    segments: Vec<Segment>,
    next: usize,
}

impl Parser<'_> {
    /// Parses nodes until end of input, `{{end}}` or `{{else}}`.
    fn parse_list(&mut self) -> Result<(Vec<Node>, Stop), TemplateError> {
        let mut nodes = Vec::new();
        while self.next < self.segments.len() {
            let segment = std::mem::replace(&mut self.segments[self.next], Segment::Text(String::new()));
            self.next += 1;
            let (start, tokens) = match segment {
                Segment::Text(text) => {
                    nodes.push(Node::Text(text));
                    continue;
                }
                Segment::Action { start, tokens } => (start, tokens),
            };
            let Some(first) = tokens.first() else {
                return Err(self.ctx.syntax(start, "empty action `{{}}`"));
            };
            let keyword = match &first.tok {
                Tok::Ident(word) => word.as_str(),
                _ => "",
            };
            match keyword {
                "if" | "with" | "range" => {
                    let kw = match keyword {
                        "if" => Keyword::If,
                        "with" => Keyword::With,
                        _ => Keyword::Range,
                    };
                    nodes.push(self.parse_control(kw, start, &tokens[1..])?);
                }
                "end" => {
                    if let Some(extra) = tokens.get(1) {
                        return Err(self.ctx.syntax(extra.start, "unexpected token after `end`"));
                    }
                    return Ok((nodes, Stop::End(start)));
                }
                "else" => return Ok((nodes, Stop::Else(start, tokens[1..].to_vec()))),
                "define" | "template" | "block" | "break" | "continue" => {
                    return Err(self
                        .ctx
                        .syntax(start, format!("`{{{{{keyword}}}}}` is not supported in commit templates")));
                }
                _ => nodes.push(Node::Action(self.parse_pipeline(start, &tokens, 1)?)),
            }
        }
        Ok((nodes, Stop::Eof))
    }

    fn parse_control(&mut self, kw: Keyword, start: usize, tokens: &[Token]) -> Result<Node, TemplateError> {
        let max_vars = if kw == Keyword::Range { 2 } else { 1 };
        let mut branches = vec![(self.parse_pipeline(start, tokens, max_vars)?, Vec::new())];
        loop {
            let (body, stop) = self.parse_list()?;
            branches.last_mut().expect("at least one branch").1 = body;
            match stop {
                Stop::End(_) => break,
                Stop::Eof => {
                    return Err(self.ctx.syntax(start, format!("{{{{{}}}}} has no matching {{{{end}}}}", kw.name())));
                }
                Stop::Else(pos, rest) if rest.is_empty() => {
                    let (otherwise, stop) = self.parse_list()?;
                    return match stop {
                        Stop::End(_) => Ok(self.control_node(kw, branches, otherwise)),
                        Stop::Else(pos, _) => Err(self.ctx.syntax(pos, "unexpected {{else}} after {{else}}")),
                        Stop::Eof => {
                            Err(self.ctx.syntax(pos, format!("{{{{{}}}}} has no matching {{{{end}}}}", kw.name())))
                        }
                    };
                }
                Stop::Else(pos, rest) => {
                    // `{{else if …}}` / `{{else with …}}` continue the chain of the same keyword.
                    let chained = matches!(&rest[0].tok, Tok::Ident(w) if w == kw.name()) && kw != Keyword::Range;
                    if !chained {
                        return Err(self
                            .ctx
                            .syntax(pos, format!("{{{{else}}}} in {{{{{}}}}} can't take arguments here", kw.name())));
                    }
                    branches.push((self.parse_pipeline(pos, &rest[1..], 1)?, Vec::new()));
                }
            }
        }
        Ok(self.control_node(kw, branches, Vec::new()))
    }

    fn control_node(&self, kw: Keyword, mut branches: Vec<(Pipeline, Vec<Node>)>, otherwise: Vec<Node>) -> Node {
        if kw == Keyword::Range {
            let (pipe, body) = branches.remove(0);
            Node::Range { pipe, body, otherwise }
        } else {
            Node::Branches { keyword: kw, branches, otherwise }
        }
    }

    /// Parses `[$a[, $b] := | $a =] cmd | cmd …`. `start` is the action's offset, for errors on empty pipelines.
    fn parse_pipeline(&self, start: usize, tokens: &[Token], max_vars: usize) -> Result<Pipeline, TemplateError> {
        let mut rest = tokens;
        let mut vars = Vec::new();
        let mut assign = false;
        // A declaration is `$a :=`, `$a =` or `$a, $b :=` at the start; anything else is a plain pipeline.
        let mut candidates = Vec::new();
        while let Some(Token { tok: Tok::Var(name), .. }) = rest.get(candidates.len() * 2) {
            candidates.push(name.clone());
            match rest.get(candidates.len() * 2 - 1).map(|t| &t.tok) {
                Some(Tok::Comma) => {}
                Some(Tok::Declare | Tok::Assign) => {
                    assign = rest[candidates.len() * 2 - 1].tok == Tok::Assign;
                    rest = &rest[candidates.len() * 2..];
                    vars = candidates;
                    break;
                }
                _ => break,
            }
        }
        if vars.len() > max_vars {
            let message = match max_vars {
                0 => "variables can't be declared inside parentheses",
                1 => "only {{range}} can declare two variables",
                _ => "too many variables in declaration",
            };
            return Err(self.ctx.syntax(tokens[0].start, message));
        }
        if vars.iter().any(|v| v == "$") && !assign {
            return Err(self.ctx.syntax(tokens[0].start, "`$` can't be redeclared"));
        }
        let pos = rest.first().map_or(start, |t| t.start);
        if rest.is_empty() {
            return Err(self.ctx.syntax(start, "missing value in action"));
        }
        let mut cmds = Vec::new();
        for part in split_top_level(rest, |t| t.tok == Tok::Pipe) {
            let pos = part.first().map(|t| t.start);
            let Some(pos) = pos else {
                return Err(self.ctx.syntax(start, "missing command in pipeline"));
            };
            cmds.push(self.parse_command(pos, part)?);
        }
        for cmd in &cmds[1..] {
            if cmd.func.is_none() {
                return Err(self
                    .ctx
                    .syntax(cmd.pos, "only a function can receive a piped value, e.g. `| printf \"%s\"`"));
            }
        }
        Ok(Pipeline { pos, decl_pos: tokens[0].start, vars, assign, cmds })
    }

    fn parse_command(&self, pos: usize, tokens: &[Token]) -> Result<Command, TemplateError> {
        let mut func = None;
        let mut args = Vec::new();
        let mut i = 0;
        while i < tokens.len() {
            let (operand, next) = self.parse_operand(tokens, i)?;
            match operand {
                Operand::Func(f) if i == 0 => func = Some(f),
                Operand::Func(f) => {
                    let name = f.name();
                    let message = format!("function `{name}` used as an argument; call it in parentheses: ({name} …)");
                    return Err(self.ctx.syntax(tokens[i].start, message));
                }
                Operand::Term(term) => args.push(term),
            }
            i = next;
        }
        if func.is_none() && args.len() > 1 {
            return Err(self.ctx.syntax(tokens[1].start, "only functions take arguments; is a function name missing?"));
        }
        Ok(Command { pos, func, args, ty: Ty::Any })
    }

    fn func(&self, pos: usize, name: &str) -> Result<Func, TemplateError> {
        match name {
            "if" | "else" | "end" | "range" | "with" | "define" | "template" | "block" | "break" | "continue" => {
                Err(self.ctx.syntax(pos, format!("`{name}` must start its own action, e.g. {{{{{name} …}}}}")))
            }
            "nil" => Err(self.ctx.syntax(pos, "`nil` is not supported")),
            _ => FUNCS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f).ok_or_else(|| {
                let available: Vec<&str> = FUNCS.iter().map(|(n, _)| *n).collect();
                self.ctx
                    .syntax(pos, format!("unknown function `{name}`; available functions: {}", available.join(", ")))
            }),
        }
    }

    /// Parses the operand at `tokens[i]` and returns the index after it.
    fn parse_operand(&self, tokens: &[Token], i: usize) -> Result<(Operand, usize), TemplateError> {
        let token = &tokens[i];
        let literal = |value| Ok((Operand::Term(Term::Lit(value)), i + 1));
        let (base, mut next) = match &token.tok {
            Tok::Ident(w) if w == "true" || w == "false" => return literal(Value::Bool(w == "true")),
            Tok::Ident(name) => return Ok((Operand::Func(self.func(token.start, name)?), i + 1)),
            Tok::Str(s) => return literal(Value::Str(s.clone())),
            Tok::Int(n) => return literal(Value::Int(*n)),
            Tok::Dot => (Base::Dot, i + 1),
            // A leading `.Field` is a chain on dot; the field tokens are consumed below.
            Tok::Field(_) => (Base::Dot, i),
            Tok::Var(name) => (Base::Var(name.clone()), i + 1),
            Tok::LParen => {
                let mut depth = 0;
                let close = (i..tokens.len())
                    .find(|&j| {
                        match tokens[j].tok {
                            Tok::LParen => depth += 1,
                            Tok::RParen => depth -= 1,
                            _ => {}
                        }
                        depth == 0
                    })
                    .ok_or_else(|| self.ctx.syntax(token.start, "unclosed `(`"))?;
                let inner = self.parse_pipeline(token.start, &tokens[i + 1..close], 0)?;
                (Base::Pipe(Box::new(inner)), close + 1)
            }
            Tok::RParen => return Err(self.ctx.syntax(token.start, "unexpected `)`")),
            Tok::Pipe | Tok::Comma | Tok::Declare | Tok::Assign => {
                return Err(self
                    .ctx
                    .syntax(token.start, "unexpected operator; declarations look like {{$x := .Field}}"));
            }
        };
        let mut chain = Vec::new();
        // Fields bind only when written directly after the base: `.A.B`, `$x.A`, `(…).A`.
        let mut prev_end = if next == i { tokens[i].start } else { tokens[next - 1].end };
        while let Some(Token { tok: Tok::Field(name), start, end }) = tokens.get(next) {
            if *start != prev_end {
                break;
            }
            chain.push(Step { name: name.clone(), pos: *start, ty: Ty::Any });
            prev_end = *end;
            next += 1;
        }
        Ok((Operand::Term(Term::Path { pos: token.start, base, chain }), next))
    }
}

/// Splits at separators outside parentheses.
fn split_top_level(tokens: &[Token], is_sep: impl Fn(&Token) -> bool) -> Vec<&[Token]> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, token) in tokens.iter().enumerate() {
        match token.tok {
            Tok::LParen => depth += 1,
            Tok::RParen => depth -= 1,
            _ if depth == 0 && is_sep(token) => {
                parts.push(&tokens[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts
}

// ---------------------------------------------------------------------------------------------------------------
// Checker: resolves every field and variable against the kind's schema and annotates static types.

struct Checker<'s> {
    ctx: Ctx<'s>,
    root: Ty,
    vars: Vec<(String, Ty)>,
}

impl Checker<'_> {
    fn check_nodes(&mut self, nodes: &mut [Node], dot: Ty) -> Result<(), TemplateError> {
        for node in nodes {
            match node {
                Node::Text(_) => {}
                Node::Action(pipe) => {
                    self.check_pipeline(pipe, dot)?;
                }
                Node::Branches { keyword, branches, otherwise } => {
                    let mark = self.vars.len();
                    for (pipe, body) in branches {
                        let ty = self.check_pipeline(pipe, dot)?;
                        let inner_dot = if *keyword == Keyword::With { ty } else { dot };
                        let inner = self.vars.len();
                        self.check_nodes(body, inner_dot)?;
                        self.vars.truncate(inner);
                    }
                    self.check_nodes(otherwise, dot)?;
                    self.vars.truncate(mark);
                }
                Node::Range { pipe, body, otherwise } => {
                    let mark = self.vars.len();
                    let vars = std::mem::take(&mut pipe.vars);
                    let ty = self.check_pipeline(pipe, dot)?;
                    pipe.vars = vars;
                    let (key, elem) = match ty {
                        Ty::List(elem) => (Ty::Int, *elem),
                        Ty::Map(map) => (Ty::Str, map.value),
                        Ty::Int => (Ty::Int, Ty::Int),
                        Ty::Any => (Ty::Any, Ty::Any),
                        other => {
                            return Err(self.ctx.type_error(pipe.pos, format!("can't range over {}", other.name())));
                        }
                    };
                    match pipe.vars.as_slice() {
                        [v] => self.vars.push((v.clone(), elem)),
                        [k, v] => {
                            self.vars.push((k.clone(), key));
                            self.vars.push((v.clone(), elem));
                        }
                        _ => {}
                    }
                    self.check_nodes(body, elem)?;
                    self.vars.truncate(mark);
                    self.check_nodes(otherwise, dot)?;
                }
            }
        }
        Ok(())
    }

    /// Checks a pipeline and declares its variables in the current scope.
    fn check_pipeline(&mut self, pipe: &mut Pipeline, dot: Ty) -> Result<Ty, TemplateError> {
        let mut ty = None;
        for cmd in &mut pipe.cmds {
            ty = Some(self.check_command(cmd, dot, ty)?);
        }
        let ty = ty.unwrap_or(Ty::Any);
        for var in &pipe.vars {
            if pipe.assign {
                let slot = self.vars.iter_mut().rev().find(|(name, _)| name == var);
                let Some((_, var_ty)) = slot else {
                    return Err(self
                        .ctx
                        .syntax(pipe.decl_pos, format!("undefined variable `{var}`; declare it with `{var} :=`")));
                };
                if !var_ty.same(ty) {
                    *var_ty = Ty::Any;
                }
            } else {
                self.vars.push((var.clone(), ty));
            }
        }
        Ok(ty)
    }

    fn check_command(&mut self, cmd: &mut Command, dot: Ty, piped: Option<Ty>) -> Result<Ty, TemplateError> {
        let mut arg_tys = Vec::with_capacity(cmd.args.len() + 1);
        for arg in &mut cmd.args {
            arg_tys.push(self.check_term(arg, dot)?);
        }
        arg_tys.extend(piped);
        let ty = match cmd.func {
            None => arg_tys[0],
            Some(func) => self.check_call(cmd, func, &arg_tys)?,
        };
        cmd.ty = ty;
        Ok(ty)
    }

    fn check_call(&self, cmd: &Command, func: Func, args: &[Ty]) -> Result<Ty, TemplateError> {
        let arity = |ok: bool, want: &str| {
            if ok {
                Ok(())
            } else {
                let message = format!("wrong number of arguments for {}: want {want}, got {}", func.name(), args.len());
                Err(self.ctx.type_error(cmd.pos, message))
            }
        };
        match func {
            Func::And | Func::Or => {
                arity(!args.is_empty(), "at least 1")?;
                Ok(if args.iter().all(|t| t.same(args[0])) { args[0] } else { Ty::Any })
            }
            Func::Not => arity(args.len() == 1, "1").map(|()| Ty::Bool),
            Func::Len => {
                arity(args.len() == 1, "1")?;
                match args[0] {
                    Ty::Int | Ty::Bool => Err(self.ctx.type_error(cmd.pos, format!("len of {}", args[0].name()))),
                    _ => Ok(Ty::Int),
                }
            }
            Func::Index => {
                arity(!args.is_empty(), "at least 1")?;
                let mut ty = args[0];
                for (i, key) in args[1..].iter().enumerate() {
                    ty = match (ty, key) {
                        (Ty::List(elem), Ty::Int | Ty::Any) => *elem,
                        (Ty::Map(map), Ty::Str | Ty::Any) => {
                            // A literal key can be checked like a field.
                            if let Some(Term::Lit(Value::Str(k))) = cmd.args.get(i + 1)
                                && !map.keys.contains(&k.as_str())
                            {
                                return Err(self.unknown(cmd.pos, format!("\"{k}\""), map.name, map.keys));
                            }
                            map.value
                        }
                        (Ty::Any, _) => Ty::Any,
                        (container, key) => {
                            let message = format!("can't index {} with {}", container.name(), key.name());
                            return Err(self.ctx.type_error(cmd.pos, message));
                        }
                    };
                }
                Ok(ty)
            }
            Func::Printf => {
                arity(!args.is_empty(), "at least 1")?;
                match args[0] {
                    Ty::Str | Ty::Any => Ok(Ty::Str),
                    other => Err(self
                        .ctx
                        .type_error(cmd.pos, format!("printf format must be a string, not {}", other.name()))),
                }
            }
            Func::Print | Func::Println => Ok(Ty::Str),
            Func::Eq | Func::Ne | Func::Lt | Func::Le | Func::Gt | Func::Ge => {
                if func == Func::Eq {
                    arity(args.len() >= 2, "at least 2")?;
                } else {
                    arity(args.len() == 2, "2")?;
                }
                for ty in args {
                    let comparable = match func {
                        Func::Eq | Func::Ne => ty.basic().is_some(),
                        _ => matches!(ty, Ty::Str | Ty::Int),
                    };
                    if !comparable && !matches!(ty, Ty::Any) {
                        let message = format!("{} can't compare {}", func.name(), ty.name());
                        return Err(self.ctx.type_error(cmd.pos, message));
                    }
                    if let (Some(a), Some(b)) = (args[0].basic(), ty.basic())
                        && a != b
                    {
                        let message = format!("{} can't compare {} with {}", func.name(), args[0].name(), ty.name());
                        return Err(self.ctx.type_error(cmd.pos, message));
                    }
                }
                Ok(Ty::Bool)
            }
        }
    }

    fn check_term(&mut self, term: &mut Term, dot: Ty) -> Result<Ty, TemplateError> {
        let (pos, base, chain) = match term {
            Term::Lit(Value::Str(_)) => return Ok(Ty::Str),
            Term::Lit(Value::Int(_)) => return Ok(Ty::Int),
            Term::Lit(_) => return Ok(Ty::Bool),
            Term::Path { pos, base, chain } => (*pos, base, chain),
        };
        let mut ty = match base {
            Base::Dot => dot,
            Base::Var(name) if name == "$" => self.root,
            Base::Var(name) => match self.vars.iter().rev().find(|(n, _)| n == name) {
                Some((_, ty)) => *ty,
                None => return Err(self.ctx.syntax(pos, format!("undefined variable `{name}`"))),
            },
            Base::Pipe(pipe) => {
                let mark = self.vars.len();
                let ty = self.check_pipeline(pipe, dot)?;
                self.vars.truncate(mark);
                ty
            }
        };
        for step in chain {
            ty = match ty {
                Ty::Struct(st) => match st.fields.iter().find(|(n, _)| *n == step.name) {
                    Some((_, field_ty)) => *field_ty,
                    None => {
                        let names: Vec<&str> = st.fields.iter().map(|(n, _)| *n).collect();
                        return Err(self.unknown(step.pos, format!(".{}", step.name), st.name, &names));
                    }
                },
                Ty::Map(map) if map.keys.contains(&step.name.as_str()) => map.value,
                Ty::Map(map) => return Err(self.unknown(step.pos, format!(".{}", step.name), map.name, map.keys)),
                Ty::Any => Ty::Any,
                other => {
                    let message = format!("can't read field .{} of {}", step.name, other.name());
                    return Err(self.ctx.type_error(step.pos, message));
                }
            };
            step.ty = ty;
        }
        Ok(ty)
    }

    fn unknown(&self, pos: usize, field: String, owner: &str, names: &[&str]) -> TemplateError {
        let (line, column) = self.ctx.line_col(pos);
        let prefix = if owner.starts_with('.') { "" } else { "." };
        let available = names.iter().map(|n| format!("{prefix}{n}")).collect::<Vec<_>>().join(", ");
        TemplateError::UnknownField { kind: self.ctx.kind, line, column, field, owner: owner.to_owned(), available }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Evaluator.

struct Exec<'s> {
    ctx: Ctx<'s>,
    out: String,
    vars: Vec<(String, Value)>,
}

impl Exec<'_> {
    fn nodes(&mut self, nodes: &[Node], dot: &Value) -> Result<(), TemplateError> {
        for node in nodes {
            match node {
                Node::Text(text) => self.out.push_str(text),
                Node::Action(pipe) => {
                    let value = self.pipeline(pipe, dot)?;
                    if pipe.vars.is_empty() {
                        write!(self.out, "{value}").expect("writing to a String cannot fail");
                    }
                }
                Node::Branches { keyword, branches, otherwise } => {
                    let mark = self.vars.len();
                    let mut taken = false;
                    for (pipe, body) in branches {
                        let value = self.pipeline(pipe, dot)?;
                        if value.is_truthy() {
                            let inner_dot = if *keyword == Keyword::With { &value } else { dot };
                            self.nodes(body, inner_dot)?;
                            taken = true;
                            break;
                        }
                    }
                    if !taken {
                        self.nodes(otherwise, dot)?;
                    }
                    self.vars.truncate(mark);
                }
                Node::Range { pipe, body, otherwise } => {
                    let mark = self.vars.len();
                    let value = self.pipeline_value(pipe, dot)?;
                    let items: Vec<(Value, Value)> = match value {
                        Value::List(items) => items.into_iter().enumerate().map(|(i, v)| (Value::from(i), v)).collect(),
                        Value::Map(map) => map.into_iter().map(|(k, v)| (Value::Str(k), v)).collect(),
                        Value::Int(n) => (0..n.max(0)).map(|i| (Value::Int(i), Value::Int(i))).collect(),
                        other => {
                            let message = format!("can't range over a {}", other.type_name());
                            return Err(self.ctx.render_error(pipe.pos, message));
                        }
                    };
                    if items.is_empty() {
                        self.nodes(otherwise, dot)?;
                    }
                    for (key, elem) in items {
                        match pipe.vars.as_slice() {
                            [v] => self.vars.push((v.clone(), elem.clone())),
                            [k, v] => {
                                self.vars.push((k.clone(), key));
                                self.vars.push((v.clone(), elem.clone()));
                            }
                            _ => {}
                        }
                        self.nodes(body, &elem)?;
                        self.vars.truncate(mark);
                    }
                }
            }
        }
        Ok(())
    }

    /// Evaluates a pipeline and binds its declared or assigned variable.
    fn pipeline(&mut self, pipe: &Pipeline, dot: &Value) -> Result<Value, TemplateError> {
        let value = self.pipeline_value(pipe, dot)?;
        for var in &pipe.vars {
            if pipe.assign {
                if let Some(slot) = self.vars.iter_mut().rev().find(|(name, _)| name == var) {
                    slot.1 = value.clone();
                }
            } else {
                self.vars.push((var.clone(), value.clone()));
            }
        }
        Ok(value)
    }

    fn pipeline_value(&mut self, pipe: &Pipeline, dot: &Value) -> Result<Value, TemplateError> {
        let mut value = None;
        for cmd in &pipe.cmds {
            value = Some(self.command(cmd, dot, value)?);
        }
        Ok(value.expect("parser rejects empty pipelines"))
    }

    fn command(&mut self, cmd: &Command, dot: &Value, piped: Option<Value>) -> Result<Value, TemplateError> {
        let Some(func) = cmd.func else {
            return self.term(&cmd.args[0], dot);
        };
        if matches!(func, Func::And | Func::Or) {
            return self.short_circuit(cmd, func == Func::And, dot, piped);
        }
        let mut args = Vec::with_capacity(cmd.args.len() + 1);
        for term in &cmd.args {
            args.push(self.term(term, dot)?);
        }
        args.extend(piped);
        self.call(cmd, func, args)
    }

    /// `and` returns the first falsy argument, `or` the first truthy one, else the last; later ones are not evaluated.
    fn short_circuit(
        &mut self,
        cmd: &Command,
        and: bool,
        dot: &Value,
        piped: Option<Value>,
    ) -> Result<Value, TemplateError> {
        let mut last = None;
        for term in &cmd.args {
            let value = self.term(term, dot)?;
            if value.is_truthy() != and {
                return Ok(value);
            }
            last = Some(value);
        }
        Ok(piped.or(last).expect("the checker requires at least one argument"))
    }

    fn call(&self, cmd: &Command, func: Func, mut args: Vec<Value>) -> Result<Value, TemplateError> {
        let fail = |message: String| Err(self.ctx.render_error(cmd.pos, format!("{}: {message}", func.name())));
        match func {
            Func::And | Func::Or => unreachable!("evaluated lazily in `command`"),
            Func::Not => Ok(Value::Bool(!args[0].is_truthy())),
            Func::Len => match &args[0] {
                Value::Str(s) => Ok(Value::from(s.len())),
                Value::List(l) => Ok(Value::from(l.len())),
                Value::Map(m) => Ok(Value::from(m.len())),
                other => fail(format!("len of a {}", other.type_name())),
            },
            Func::Index => {
                let mut value = args.remove(0);
                for key in args {
                    value = match (value, key) {
                        (Value::List(mut items), Value::Int(i)) => {
                            match usize::try_from(i).ok().filter(|&i| i < items.len()) {
                                Some(i) => items.swap_remove(i),
                                None => return fail(format!("index out of range: {i} (length {})", items.len())),
                            }
                        }
                        (Value::Map(mut map), Value::Str(k)) => match map.remove(&k) {
                            Some(v) => v,
                            None => match cmd.ty.zero() {
                                Some(zero) => zero,
                                None => return fail(format!("map has no key \"{k}\"")),
                            },
                        },
                        (container, key) => {
                            return fail(format!("can't index a {} with a {}", container.type_name(), key.type_name()));
                        }
                    };
                }
                Ok(value)
            }
            Func::Printf => {
                let format = match args.remove(0) {
                    Value::Str(s) => s,
                    other => return fail(format!("format must be a string, not a {}", other.type_name())),
                };
                Ok(Value::Str(sprintf(&format, &args)))
            }
            Func::Print => Ok(Value::Str(go_print(&args))),
            Func::Println => {
                let line = args.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ");
                Ok(Value::Str(line + "\n"))
            }
            Func::Eq | Func::Ne => {
                let first = &args[0];
                let mut equal = false;
                for other in &args[1..] {
                    if std::mem::discriminant(first) != std::mem::discriminant(other)
                        || matches!(first, Value::List(_) | Value::Map(_))
                    {
                        return fail(format!("can't compare a {} with a {}", first.type_name(), other.type_name()));
                    }
                    equal |= first == other;
                }
                Ok(Value::Bool(equal == (func == Func::Eq)))
            }
            Func::Lt | Func::Le | Func::Gt | Func::Ge => {
                let ordering = match (&args[0], &args[1]) {
                    (Value::Int(a), Value::Int(b)) => a.cmp(b),
                    (Value::Str(a), Value::Str(b)) => a.cmp(b),
                    (a, b) => return fail(format!("can't compare a {} with a {}", a.type_name(), b.type_name())),
                };
                Ok(Value::Bool(match func {
                    Func::Lt => ordering.is_lt(),
                    Func::Le => ordering.is_le(),
                    Func::Gt => ordering.is_gt(),
                    _ => ordering.is_ge(),
                }))
            }
        }
    }

    fn term(&mut self, term: &Term, dot: &Value) -> Result<Value, TemplateError> {
        let (pos, base, chain) = match term {
            Term::Lit(value) => return Ok(value.clone()),
            Term::Path { pos, base, chain } => (*pos, base, chain),
        };
        let mut value = match base {
            Base::Dot => dot.clone(),
            Base::Var(name) => match self.vars.iter().rev().find(|(n, _)| n == name) {
                Some((_, value)) => value.clone(),
                None => return Err(self.ctx.render_error(pos, format!("undefined variable `{name}`"))),
            },
            Base::Pipe(pipe) => {
                let mark = self.vars.len();
                let value = self.pipeline(pipe, dot)?;
                self.vars.truncate(mark);
                value
            }
        };
        for step in chain {
            value = match value {
                Value::Map(mut map) => match map.remove(&step.name) {
                    Some(v) => v,
                    None => step.ty.zero().ok_or_else(|| {
                        self.ctx.render_error(step.pos, format!("no field .{} in the data", step.name))
                    })?,
                },
                other => {
                    let message = format!("can't read field .{} of a {}", step.name, other.type_name());
                    return Err(self.ctx.render_error(step.pos, message));
                }
            };
        }
        Ok(value)
    }
}

/// Go's `fmt.Sprint`: spaces only between operands when neither is a string.
fn go_print(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 && !matches!(arg, Value::Str(_)) && !matches!(args[i - 1], Value::Str(_)) {
            out.push(' ');
        }
        write!(out, "{arg}").expect("writing to a String cannot fail");
    }
    out
}

/// Go's `fmt.Sprintf` for `%v %s %d %q %t %%` with `-`/`0` flags, width and precision (`%.3s` truncates); other
/// verbs and mismatched arguments render like Go does (`%!d(string=x)`).
fn sprintf(format: &str, args: &[Value]) -> String {
    let mut out = String::new();
    let mut args = args.iter();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let left = chars.next_if_eq(&'-').is_some();
        let zero = !left && chars.next_if_eq(&'0').is_some();
        let mut width = 0usize;
        while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
            width = width * 10 + d as usize;
            chars.next();
        }
        let mut precision = None;
        if chars.next_if_eq(&'.').is_some() {
            let mut p = 0usize;
            while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                p = p * 10 + d as usize;
                chars.next();
            }
            precision = Some(p);
        }
        let Some(verb) = chars.next() else {
            out.push_str("%!(NOVERB)");
            break;
        };
        if verb == '%' {
            out.push('%');
            continue;
        }
        let Some(arg) = args.next() else {
            write!(out, "%!{verb}(MISSING)").expect("writing to a String cannot fail");
            continue;
        };
        let text = match (verb, arg) {
            ('v' | 's', Value::Str(s)) => s.chars().take(precision.unwrap_or(usize::MAX)).collect(),
            ('q', Value::Str(s)) => {
                format!("{:?}", s.chars().take(precision.unwrap_or(usize::MAX)).collect::<String>())
            }
            ('v', _) | ('d', Value::Int(_)) | ('t', Value::Bool(_)) => arg.to_string(),
            _ => format!("%!{verb}({}={arg})", arg.type_name()),
        };
        let pad = width.saturating_sub(text.chars().count());
        if zero && matches!((verb, arg), ('d' | 'v', Value::Int(_))) {
            // Zeros go between the sign and the digits: `%04d` of -3 is `-003`.
            let (sign, digits) = text.split_at(usize::from(text.starts_with('-')));
            out.push_str(sign);
            out.extend(std::iter::repeat_n('0', pad));
            out.push_str(digits);
        } else if left {
            out.push_str(&text);
            out.extend(std::iter::repeat_n(' ', pad));
        } else {
            out.extend(std::iter::repeat_n(' ', pad));
            out.push_str(&text);
        }
    }
    let extra: Vec<String> = args.map(|a| format!("{}={a}", a.type_name())).collect();
    if !extra.is_empty() {
        write!(out, "%!(EXTRA {})", extra.join(", ")).expect("writing to a String cannot fail");
    }
    out
}

#[cfg(test)]
mod tests;
