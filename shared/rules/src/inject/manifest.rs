//! The walk over manifests: find each pod template of every workload kind
//! (Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController,
//! Job, CronJob's jobTemplate, Pod, PodTemplate), inside `List` items and
//! across multi-document YAML, and apply [`super::pod`]'s rule to it.
//! Documents with nothing to inject are written back byte-for-byte, which is
//! also why injecting twice changes nothing.

use serde_norway::Value;

use super::InjectOptions;
use super::pod::{Decision, SkipReason, decide, inject_pod_spec};
use crate::{Error, Result};

/// What happened to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The sidecar was added.
    Injected,
    /// A workload left as it was, and why.
    Skipped(SkipReason),
    /// Not a kind that holds a pod template: left as it was.
    NotAWorkload,
}

/// One object's outcome, for the summary a CLI prints beside its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// `Deployment`, `ConfigMap`, ...; empty when the document has no kind.
    pub kind: String,
    /// `namespace/name`, or `name` when the manifest names no namespace.
    pub name: String,
    pub outcome: Outcome,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.kind.is_empty() { "document" } else { &self.kind };
        match self.outcome {
            Outcome::Injected => write!(f, "{kind} {} injected", self.name),
            Outcome::Skipped(why) => write!(f, "{kind} {} skipped: {why}", self.name),
            Outcome::NotAWorkload => write!(f, "{kind} {} left untouched", self.name),
        }
    }
}

/// The result of [`inject_manifests`]: the text to write out and one report
/// per object met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injection {
    pub output: String,
    pub reports: Vec<Report>,
}

/// Where each workload kind keeps its pod template (`metadata` + `spec`),
/// by API group and kind; `None` for kinds that hold none. Only the real
/// groups count, so a custom resource that happens to be called `Job` is
/// left alone.
pub fn template_path(api_version: &str, kind: &str) -> Option<&'static [&'static str]> {
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    match (group, kind) {
        ("", "Pod") => Some(&[]),
        ("", "PodTemplate") => Some(&["template"]),
        ("", "ReplicationController")
        | ("apps" | "extensions", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet")
        | ("batch", "Job") => Some(&["spec", "template"]),
        ("batch", "CronJob") => Some(&["spec", "jobTemplate", "spec", "template"]),
        _ => None,
    }
}

/// `Kind namespace/name` of an object, for reports and errors.
fn identify(obj: &Value) -> (String, String) {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
    let meta = obj.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| meta.and_then(|m| m.get("generateName")).and_then(Value::as_str).map(|g| format!("{g}*")))
        .unwrap_or_else(|| "<unnamed>".into());
    let name = match meta.and_then(|m| m.get("namespace")).and_then(Value::as_str) {
        Some(ns) => format!("{ns}/{name}"),
        None => name,
    };
    (kind, name)
}

/// Applies the rule to one pod template (a mapping with `metadata` and
/// `spec`, or a Pod), returning the injected copy when the rule says inject.
/// `object` names the manifest in errors. The webhook calls this too, so the
/// patch it sends is exactly what `inject` writes.
pub fn inject_template(template: &Value, opts: &InjectOptions, object: &str) -> Result<(Option<Value>, Outcome)> {
    let spec = template.get("spec").ok_or_else(|| Error::InjectMalformed {
        object: object.to_string(),
        path: "pod template".into(),
        message: "has no spec".into(),
    })?;
    match decide(template.get("metadata"), spec) {
        Decision::Skip(why) => Ok((None, Outcome::Skipped(why))),
        Decision::Inject => {
            let mut injected = template.clone();
            if let Some(spec) = injected.get_mut("spec") {
                inject_pod_spec(spec, opts, object)?;
            }
            Ok((Some(injected), Outcome::Injected))
        }
    }
}

/// Injects every workload in `obj` (one object, or a `List` of them):
/// returns the new object (equal to `obj` when nothing was injected) and a
/// report per object.
pub fn inject_object(obj: &Value, opts: &InjectOptions) -> Result<(Value, Vec<Report>)> {
    let mut out = obj.clone();
    let mut reports = Vec::new();
    inject_in_place(&mut out, opts, &mut reports)?;
    Ok((out, reports))
}

fn inject_in_place(obj: &mut Value, opts: &InjectOptions, reports: &mut Vec<Report>) -> Result<()> {
    let (kind, name) = identify(obj);
    // `kubectl get -o yaml` writes `kind: List`; typed lists
    // (`DeploymentList`) carry their items the same way.
    if kind.ends_with("List")
        && let Some(items) = obj.get_mut("items").and_then(Value::as_sequence_mut)
    {
        for item in items {
            inject_in_place(item, opts, reports)?;
        }
        return Ok(());
    }
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let Some(path) = template_path(api_version, &kind) else {
        reports.push(Report { kind, name, outcome: Outcome::NotAWorkload });
        return Ok(());
    };
    let object = format!("{kind} {name}");
    // A Job completes when its pod's containers exit; a plain container
    // that serves forever never does (a native sidecar is stopped for it).
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    if opts.mode == super::SidecarMode::Plain && group == "batch" && matches!(kind.as_str(), "Job" | "CronJob") {
        return Err(Error::InjectPlainJob { object });
    }
    let mut slot: &mut Value = obj;
    for (depth, key) in path.iter().enumerate() {
        slot = slot.get_mut(*key).ok_or_else(|| Error::InjectMalformed {
            object: object.clone(),
            path: path[..=depth].join("."),
            message: "is missing".into(),
        })?;
    }
    let (injected, outcome) = inject_template(slot, opts, &object)?;
    if let Some(injected) = injected {
        *slot = injected;
    }
    reports.push(Report { kind, name, outcome });
    Ok(())
}

/// One document of a multi-document YAML text, as slices of the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawDocument<'a> {
    /// The `---` marker (with what follows it on its line when that is only
    /// a comment), or empty for the first document.
    pub marker: &'a str,
    pub body: &'a str,
    /// The 1-based line the body starts on.
    pub line: usize,
}

/// Splits `text` at document markers: a line starting with `---` followed
/// by nothing, a space or a tab. YAML forbids such a line inside content,
/// so this never cuts a document in two.
pub(crate) fn split_documents(text: &str) -> Vec<RawDocument<'_>> {
    let mut docs = Vec::new();
    let mut marker = "";
    let mut body_start = 0;
    let mut body_line = 1;
    let mut offset = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let rest = line.strip_prefix("---");
        let is_marker = rest.is_some_and(|r| r.is_empty() || r.starts_with([' ', '\t', '\r', '\n']));
        if let (true, Some(rest)) = (is_marker, rest) {
            docs.push(RawDocument { marker, body: &text[body_start..offset], line: body_line });
            let trimmed = rest.trim_start_matches([' ', '\t']);
            if trimmed.trim().is_empty() || trimmed.starts_with('#') {
                // The whole line is the marker; the body starts on the next.
                marker = line;
                body_start = offset + line.len();
                body_line = index + 2;
            } else {
                // `--- {inline: content}`: the content is the body's start.
                let cut = line.len() - trimmed.len();
                marker = &line[..cut];
                body_start = offset + cut;
                body_line = index + 1;
            }
        }
        offset += line.len();
    }
    docs.push(RawDocument { marker, body: &text[body_start..], line: body_line });
    docs
}

/// True when a document holds only blank lines, comments, directives
/// (`%YAML 1.2`, which precede the next marker) and document end markers:
/// nothing to parse.
fn is_blank(body: &str) -> bool {
    body.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#') || t.starts_with('%') || t == "..."
    })
}

/// Injects the sidecar into every workload of a YAML text of one or more
/// documents, or of JSON (one object, or a stream of them, as `kubectl get
/// -o json` or `jq -c` write). Documents where nothing is injected (other
/// kinds, opted out, already injected, blank) come out byte-for-byte; an
/// injected one is re-rendered in its own language (YAML loses its
/// comments; JSON is indented by two spaces, as kubectl writes it).
pub fn inject_manifests(text: &str, opts: &InjectOptions) -> Result<Injection> {
    if text.trim_start().starts_with('{') {
        return inject_json(text, opts);
    }
    let mut output = String::with_capacity(text.len() + 1024);
    let mut reports = Vec::new();
    for doc in split_documents(text) {
        output.push_str(doc.marker);
        if is_blank(doc.body) {
            output.push_str(doc.body);
            continue;
        }
        let value: Value = serde_norway::from_str(doc.body).map_err(|_| {
            // Parse again below as many blank lines as precede the document,
            // so the parser's own positions are lines of the whole input.
            let padded = format!("{}{}", "\n".repeat(doc.line - 1), doc.body);
            let message = match serde_norway::from_str::<Value>(&padded) {
                Err(e) => e.to_string(),
                Ok(_) => "it does not parse on its own".into(),
            };
            Error::InjectParse { line: doc.line, message }
        })?;
        let (injected, doc_reports) = inject_object(&value, opts)?;
        let changed = doc_reports.iter().any(|r| r.outcome == Outcome::Injected);
        reports.extend(doc_reports);
        if !changed {
            output.push_str(doc.body);
            continue;
        }
        let rendered = serde_norway::to_string(&injected)
            .map_err(|e| Error::InjectRender { line: doc.line, message: e.to_string() })?;
        output.push_str(&rendered);
        if !rendered.ends_with('\n') {
            output.push('\n');
        }
    }
    Ok(Injection { output, reports })
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|b| **b == b'\n').count() + 1
}

/// [`inject_manifests`] over a stream of JSON objects: each value's bytes
/// (and the blank before it) are kept unless it was injected.
fn inject_json(text: &str, opts: &InjectOptions) -> Result<Injection> {
    let mut output = String::with_capacity(text.len() + 1024);
    let mut reports = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>();
    let mut start = 0;
    let mut last_changed = false;
    while let Some(next) = stream.next() {
        let value = next.map_err(|e| Error::InjectJson { line: e.line(), message: e.to_string() })?;
        let end = stream.byte_offset();
        let raw = &text[start..end];
        let line = line_of(text, start + (raw.len() - raw.trim_start().len()));
        let as_yaml: Value = serde_norway::to_value(&value)
            .map_err(|e| Error::InjectJson { line, message: format!("it cannot be read as a manifest: {e}") })?;
        let (injected, doc_reports) = inject_object(&as_yaml, opts)?;
        let changed = doc_reports.iter().any(|r| r.outcome == Outcome::Injected);
        reports.extend(doc_reports);
        if changed {
            let json: serde_json::Value =
                serde_json::to_value(&injected).map_err(|e| Error::InjectRender { line, message: e.to_string() })?;
            let rendered = serde_json::to_string_pretty(&json)
                .map_err(|e| Error::InjectRender { line, message: e.to_string() })?;
            output.push_str(&raw[..raw.len() - raw.trim_start().len()]);
            output.push_str(&rendered);
        } else {
            output.push_str(raw);
        }
        start = end;
        last_changed = changed;
    }
    output.push_str(&text[start..]);
    if last_changed && !output.ends_with('\n') {
        output.push('\n');
    }
    Ok(Injection { output, reports })
}
