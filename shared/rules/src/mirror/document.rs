//! Documents in the tree (gitops-reverser `internal/git/manifestedit/`):
//! a YAML file holds one or more documents separated by `---` lines; each is
//! an object known by its identity (group, kind, namespace, name), wherever
//! the file is and whatever else it holds. Match first: the mirror edits an
//! object's existing document in place and adds a file only for an object
//! it finds nowhere.
//!
//! Files are carved into documents as exact text, so the documents an edit
//! does not touch keep every byte; the edited one keeps its comments and
//! key order wherever its content did not change ([`edit`]).

use std::ops::Range;

use serde_json::{Map, Value};

/// Which object a document is: the identity the reference matches by.
/// The version is not part of it: a preferred-version bump is one object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Identity {
    /// Empty for the core group.
    pub group: String,
    pub kind: String,
    /// Empty for a cluster-scoped object.
    pub namespace: String,
    pub name: String,
}

impl Identity {
    pub fn new(group: &str, kind: &str, namespace: &str, name: &str) -> Self {
        Identity { group: group.into(), kind: kind.into(), namespace: namespace.into(), name: name.into() }
    }

    /// The identity a manifest declares (`apiVersion`, `kind`,
    /// `metadata.namespace`, `metadata.name`); `None` when it names none.
    pub fn of(object: &Value) -> Option<Identity> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        let meta = object.get("metadata")?;
        let name = meta.get("name")?.as_str()?;
        let namespace = meta.get("namespace").and_then(Value::as_str).unwrap_or("");
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        if kind.is_empty() || name.is_empty() {
            return None;
        }
        Some(Identity::new(group, kind, namespace, name))
    }
}

/// One document of a file: the separator line before it (empty for the
/// first) and its body, as byte ranges of the file's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub separator: Range<usize>,
    pub body: Range<usize>,
}

/// What one document of a file holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// Only comments or blank lines.
    Empty,
    /// An object with an identity.
    Object { identity: Identity, value: Value },
    /// YAML that is not a Kubernetes object (no apiVersion, kind or name).
    Foreign,
    /// Not YAML: left alone, counted, never rewritten.
    Unparsable { error: String },
}

/// Whether a path is a file documents are looked for in.
pub fn is_manifest_path(path: &str) -> bool {
    path.ends_with(".yaml") || path.ends_with(".yml")
}

/// Carves a file into its documents. A `---` line inside a block scalar
/// (`|` or `>`) is content, not a separator.
pub fn split(text: &str) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut separator = 0..0;
    let mut body_start = 0;
    let mut block: Option<usize> = None;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let start = pos;
        pos += line.len();
        let content = line.trim_end_matches(['\n', '\r']);
        if let Some(indent) = block {
            if content.trim().is_empty() || leading_spaces(content) > indent {
                continue;
            }
            block = None;
        }
        if is_separator(content) {
            if !(spans.is_empty() && start == 0) || separator != (0..0) {
                spans.push(Span { separator: separator.clone(), body: body_start..start });
            }
            separator = start..pos;
            body_start = pos;
            continue;
        }
        if opens_block_scalar(content) {
            block = Some(leading_spaces(content));
        }
    }
    spans.push(Span { separator, body: body_start..text.len() });
    spans
}

fn is_separator(line: &str) -> bool {
    line == "---" || line.starts_with("--- ") || line.starts_with("---\t")
}

fn leading_spaces(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// `key: |`, `key: >-`, `- |2` and the like: the lines below, while more
/// indented, are the scalar's text.
fn opens_block_scalar(line: &str) -> bool {
    let code = strip_comment(line).trim_end();
    let Some(last) = code.rsplit([' ', '\t']).next() else {
        return false;
    };
    let before = &code[..code.len() - last.len()];
    (before.ends_with(": ") || before.ends_with("- ") || before.trim().is_empty() && !before.is_empty())
        && last.starts_with(['|', '>'])
        && last[1..].chars().all(|c| matches!(c, '-' | '+' | '0'..='9'))
}

/// The line without a trailing ` # comment` (outside quotes).
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if (c == '"' || c == '\'') && (prev == ' ' || prev == ':' || i == 0) => quote = Some(c),
            None if c == '#' && (prev == ' ' || prev == '\t' || i == 0) => return &line[..i],
            None => {}
        }
        prev = c;
    }
    line
}

/// What one document body holds.
pub fn parse(body: &str) -> Content {
    if body.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#') || t == "..."
    }) {
        return Content::Empty;
    }
    match serde_norway::from_str::<Value>(body) {
        Err(e) => Content::Unparsable { error: e.to_string() },
        Ok(Value::Null) => Content::Empty,
        Ok(value) => match Identity::of(&value) {
            Some(identity) => Content::Object { identity, value },
            None => Content::Foreign,
        },
    }
}

/// The file with document `index`'s body replaced by `body`.
pub fn replace(text: &str, spans: &[Span], index: usize, body: &str) -> String {
    let span = &spans[index];
    let mut out = String::with_capacity(text.len() + body.len());
    out.push_str(&text[..span.body.start]);
    out.push_str(body);
    if !body.is_empty() && !body.ends_with('\n') && span.body.end < text.len() {
        out.push('\n');
    }
    out.push_str(&text[span.body.end..]);
    out
}

/// The file with `body` added as a document of its own.
pub fn append(text: &str, body: &str) -> String {
    let mut out = text.to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("---\n");
    out.push_str(body);
    out
}

/// The file without document `index` (its separator goes with it); `None`
/// when nothing but comments or blank lines would be left, so the file goes.
pub fn remove(text: &str, spans: &[Span], index: usize) -> Option<String> {
    let span = &spans[index];
    // The first document has no separator before it: drop the next one's.
    let cut = if span.separator.is_empty() || span.separator.start == 0 && index == 0 {
        match spans.get(index + 1) {
            Some(next) => span.separator.start..next.body.start,
            None => span.separator.start..span.body.end,
        }
    } else {
        span.separator.start..span.body.end
    };
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..cut.start]);
    out.push_str(&text[cut.end..]);
    let rest_empty = split(&out).iter().all(|s| matches!(parse(&out[s.body.clone()]), Content::Empty));
    if rest_empty { None } else { Some(out) }
}

/// The existing document `old_body` (holding `old`) edited to hold
/// `desired`: entries whose value did not change keep their text (and
/// comments) and their place, changed ones are re-rendered in place with
/// `render` (one `key: value` entry as YAML), removed ones go, new ones are
/// appended. When the text cannot be edited that way (flow style, anchors,
/// an edit that would not read back as `desired`), the whole document is
/// `render`ed instead, keeping the comment lines that led it.
pub fn edit(old_body: &str, old: &Value, desired: &Value, render: &dyn Fn(&Value) -> String) -> String {
    if let (Value::Object(o), Value::Object(n)) = (old, desired) {
        let lines: Vec<&str> = old_body.split_inclusive('\n').collect();
        let mut out = String::with_capacity(old_body.len());
        if merge_block(&lines, 0, o, n, render, &mut out).is_some()
            && serde_norway::from_str::<Value>(&out).is_ok_and(|v| v == *desired)
        {
            return out;
        }
    }
    let mut out: String = old_body
        .split_inclusive('\n')
        .take_while(|l| {
            let t = l.trim();
            t.is_empty() || t.starts_with('#')
        })
        .collect();
    out.push_str(&render(desired));
    out
}

/// One entry of a block mapping: its key and its lines (the head comments
/// above the key line first).
struct Entry<'a, 'b> {
    key: String,
    head: usize,
    lines: &'a [&'b str],
}

fn merge_block(
    lines: &[&str],
    indent: usize,
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    render: &dyn Fn(&Value) -> String,
    out: &mut String,
) -> Option<()> {
    let (prefix, entries) = entries(lines, indent)?;
    for l in &lines[..prefix] {
        out.push_str(l);
    }
    let pad = " ".repeat(indent);
    let emit = |key: &str, value: &Value, out: &mut String| {
        let mut one = Map::new();
        one.insert(key.to_owned(), value.clone());
        for l in render(&Value::Object(one)).split_inclusive('\n') {
            if l.trim().is_empty() {
                out.push_str(l);
            } else {
                out.push_str(&pad);
                out.push_str(l);
            }
        }
    };
    for e in &entries {
        let Some(n) = new.get(&e.key) else {
            continue;
        };
        let o = old.get(&e.key)?;
        if o == n {
            for l in e.lines {
                out.push_str(l);
            }
            continue;
        }
        for l in &e.lines[..e.head] {
            out.push_str(l);
        }
        let key_line = e.lines[e.head];
        let block_style = strip_comment(key_line).trim_end().ends_with(':');
        if let (Value::Object(om), Value::Object(nm), true) = (o, n, block_style) {
            let children = &e.lines[e.head + 1..];
            if let Some(child) = children.iter().find(|l| {
                let t = l.trim();
                !t.is_empty() && !t.starts_with('#')
            }) {
                let child_indent = leading_spaces(child);
                if child_indent > indent && !child.trim_start().starts_with('-') {
                    out.push_str(key_line);
                    merge_block(children, child_indent, om, nm, render, out)?;
                    continue;
                }
            }
        }
        emit(&e.key, n, out);
    }
    let mut added: Vec<&String> = new.keys().filter(|k| !old.contains_key(*k)).collect();
    added.sort();
    for k in added {
        emit(k, &new[k], out);
    }
    Some(())
}

/// The entries of the block mapping at `indent`; `None` when the lines are
/// not one (a sequence, flow style, a complex key, an anchor or alias).
fn entries<'a, 'b>(lines: &'a [&'b str], indent: usize) -> Option<(usize, Vec<Entry<'a, 'b>>)> {
    let is_filler = |l: &str| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#')
    };
    let mut starts: Vec<(usize, String)> = Vec::new();
    let mut in_block: Option<usize> = None;
    for (i, l) in lines.iter().enumerate() {
        let content = l.trim_end_matches(['\n', '\r']);
        if let Some(b) = in_block {
            if content.trim().is_empty() || leading_spaces(content) > b {
                continue;
            }
            in_block = None;
        }
        if is_filler(content) {
            continue;
        }
        let lead = leading_spaces(content);
        if lead < indent {
            return None;
        }
        if opens_block_scalar(content) {
            in_block = Some(lead);
        }
        let code = strip_comment(content);
        if code.contains(['&', '*']) && code.split_whitespace().any(|w| w.starts_with(['&', '*'])) {
            return None;
        }
        if lead > indent {
            continue;
        }
        starts.push((i, key_of(code.trim_start())?));
    }
    // Comment lines right above a key line travel with it.
    let mut heads = Vec::with_capacity(starts.len());
    for (n, (i, _)) in starts.iter().enumerate() {
        let lower = if n == 0 { 0 } else { starts[n - 1].0 + 1 };
        let mut head = *i;
        while head > lower && is_filler(lines[head - 1]) && leading_spaces(lines[head - 1]) <= indent {
            head -= 1;
        }
        heads.push(head);
    }
    let prefix = heads.first().copied().unwrap_or(lines.len());
    let entries = starts
        .into_iter()
        .enumerate()
        .map(|(n, (i, key))| {
            let end = heads.get(n + 1).copied().unwrap_or(lines.len());
            Entry { key, head: i - heads[n], lines: &lines[heads[n]..end] }
        })
        .collect();
    Some((prefix, entries))
}

/// The key of a block-mapping entry line (`key: value`, `"key": value`);
/// `None` for what is not one (`- item`, `? key`, flow collections).
fn key_of(code: &str) -> Option<String> {
    if code.starts_with(['-', '?', '{', '[', '!', '&', '*', '|', '>']) {
        return None;
    }
    if let Some(quote) = code.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let end = code[1..].find(quote)? + 1;
        if !code[end + 1..].starts_with(':') {
            return None;
        }
        return serde_norway::from_str::<String>(&code[..=end]).ok();
    }
    let (colon, _) = code.match_indices(':').find(|(i, _)| {
        let after = &code[i + 1..];
        after.is_empty() || after.starts_with([' ', '\t', '\r', '\n'])
    })?;
    Some(code[..colon].trim_end().to_owned())
}

#[cfg(test)]
mod tests;
