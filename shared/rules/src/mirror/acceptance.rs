//! The acceptance gate: whether a GitTarget's folder is one the mirror may
//! write into (gitops-reverser `internal/manifestanalyzer/acceptance.go`,
//! `acceptance_refusal.go`, `gittargetignore.go`; the writer's preconditions
//! in `internal/git/plan_flush.go`). The folder under `spec.path` is the
//! operator's: content it cannot manage refuses the whole folder — nothing is
//! committed, and the GitTarget says `GitPathAccepted=False` with the file
//! and the reason — instead of being written around.
//!
//! Each entry under the path takes one role ([`classify`]), in the
//! reference's precedence: operator artifacts and build directives, then the
//! root `.gittargetignore`, then YAML (managed), then inert passengers, and
//! anything else is foreign. The structure-only refusals the reference's
//! live writer runs (`AcceptStructureOnly`) are ported; the mapping-aware
//! ones (unwatched or out-of-scope kinds) are not, as the live writer does
//! not run them either.
//!
//! Where this mirror does less than the reference it refuses more: it does
//! not render kustomize, so a kustomization using anything beyond local
//! `resources:` refuses the folder (the reference models `namespace:`,
//! `images:`, `replicas:` and patches; writing live values over their
//! sources would be wrong content, which is worse than none).

use std::fmt;

use serde_json::Value;

use super::bootstrap::{IGNORE_FILE, SOPS_CONFIG, TargetIgnore};
use super::document::{Content, Identity, is_manifest_path, parse, split};

/// What kind of tree entry a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file (executable or not).
    File,
    Symlink,
    /// A gitlink: a submodule's commit.
    Submodule,
}

/// The role one entry under `spec.path` takes (ref: `ClassifyEntry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Matched by the root `.gittargetignore`, or that file itself: never
    /// read, never refused.
    Ignored,
    /// A YAML file read for documents.
    Managed,
    /// A build directive or the SOPS configuration: known, never managed
    /// (`kustomization.yaml`, `kustomization.yml`, `.sops.yaml`).
    Retained,
    /// The operator's own `README.md`.
    Artifact,
    /// Inert repository hygiene the operator accepts without managing:
    /// documentation, a license, Git metadata.
    Passenger,
    /// Content the operator cannot own: refused.
    Foreign(IssueKind),
}

/// Why a folder is refused (ref: `IssueKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IssueKind {
    /// Two documents claim one identity.
    Duplicate,
    /// A standalone YAML file that is not a Kubernetes manifest.
    NonKrm,
    /// A standalone YAML file that does not parse (or a SOPS file without
    /// its `sops` key).
    InvalidYaml,
    /// A file with managed objects that also holds an empty, non-manifest
    /// or invalid document.
    ImpureManagedFile,
    /// An object inside a build-directive file.
    MixedFile,
    /// A kustomization using what the mirror cannot vouch for.
    UnsupportedKustomize,
    /// A non-YAML file in no recognised role.
    ForeignFile,
    ForeignSymlink,
    ForeignSubmodule,
    /// The root `.gittargetignore` would hide the operator's own files, or
    /// does not parse.
    IgnoreShadowsManaged,
    /// A planned write outside `spec.path`.
    WriteEscapesScope,
}

impl IssueKind {
    /// The reference's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            IssueKind::Duplicate => "duplicate",
            IssueKind::NonKrm => "non-krm-yaml",
            IssueKind::InvalidYaml => "invalid-yaml",
            IssueKind::ImpureManagedFile => "impure-managed-file",
            IssueKind::MixedFile => "mixed-managed-allowlisted",
            IssueKind::UnsupportedKustomize => "unsupported-kustomize",
            IssueKind::ForeignFile => "foreign-file",
            IssueKind::ForeignSymlink => "foreign-symlink",
            IssueKind::ForeignSubmodule => "foreign-submodule",
            IssueKind::IgnoreShadowsManaged => "ignore-shadows-managed",
            IssueKind::WriteEscapesScope => "write-escapes-scope",
        }
    }
}

/// One refusal: the file (repository path), the document when it is one,
/// and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub kind: IssueKind,
    pub path: String,
    pub document: Option<usize>,
    pub message: String,
}

impl Issue {
    fn new(kind: IssueKind, path: &str, document: Option<usize>, message: impl Into<String>) -> Self {
        Issue { kind, path: path.to_owned(), document, message: message.into() }
    }
}

/// `GitPathAccepted`'s reasons (ref: `event_router.go` `gitPathRefusalReason`).
pub const ACCEPTED: &str = "GitPathAccepted";
pub const UNSUPPORTED_CONTENT: &str = "UnsupportedContent";
pub const IGNORE_SHADOWS_MANAGED_PATH: &str = "IgnoreShadowsManagedPath";
pub const WRITE_BOUNDARY_REFUSED: &str = "WriteBoundaryRefused";

/// A refused folder: every issue, sorted, and the one reason and sentence
/// the GitTarget's `GitPathAccepted` condition carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub issues: Vec<Issue>,
}

impl Refusal {
    /// `None` when there is nothing to refuse. Issues are ordered by path,
    /// document, kind (ref: `sortIssues`), so the first named is stable.
    pub fn of(mut issues: Vec<Issue>) -> Option<Refusal> {
        if issues.is_empty() {
            return None;
        }
        issues.sort_by(|a, b| (&a.path, a.document, a.kind).cmp(&(&b.path, b.document, b.kind)));
        issues.dedup();
        // A refusal made only of ignore shadows, or only of write-boundary
        // issues, has a reason of its own; any mix is the umbrella.
        let all = |k: IssueKind| issues.iter().all(|i| i.kind == k);
        let reason = if all(IssueKind::IgnoreShadowsManaged) {
            IGNORE_SHADOWS_MANAGED_PATH
        } else if all(IssueKind::WriteEscapesScope) {
            WRITE_BOUNDARY_REFUSED
        } else {
            UNSUPPORTED_CONTENT
        };
        Some(Refusal { reason, issues })
    }
}

/// The condition message (ref: `AcceptanceRefusedError.Error`): the first
/// file and why, and how many more.
impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(first) = self.issues.first() else {
            return f.write_str("Git path refused: unspecified unsupported content");
        };
        write!(f, "Git path refused at {}: {}", first.path, first.message)?;
        if self.issues.len() > 1 {
            write!(f, " (and {} more issue(s))", self.issues.len() - 1)?;
        }
        Ok(())
    }
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The operator's artifacts and the build directives, by basename at any
/// depth: never hidden by `.gittargetignore` (ref: `isRecognizedArtifact`).
/// Sealed Secrets keep their `<name>.sops.yaml` names and stay managed.
fn retained(rel: &str) -> bool {
    matches!(basename(rel), SOPS_CONFIG | "kustomization.yaml" | "kustomization.yml")
}

/// Documentation, a license, Git metadata (ref: `isBenignPassenger`, a
/// small closed set: never loose application data).
fn passenger(rel: &str) -> bool {
    let base = basename(rel);
    matches!(
        base,
        ".gitignore"
            | ".gitattributes"
            | ".gitkeep"
            | ".keep"
            | "LICENSE"
            | "LICENSE.txt"
            | "LICENCE"
            | "LICENCE.txt"
            | "COPYING"
            | "COPYING.txt"
            | "NOTICE"
            | "NOTICE.txt"
    ) || base.ends_with(".md")
        || base.ends_with(".markdown")
}

/// The role of the entry at `rel` (relative to `spec.path`), under the
/// root `.gittargetignore` (ref: `ClassifyEntry`).
pub fn classify(rel: &str, kind: EntryKind, ignore: &TargetIgnore) -> Role {
    match kind {
        // Symlinks are foreign wherever they are: a writer could follow one
        // out of the folder. Only an ignore pattern keeps one.
        EntryKind::Symlink if ignore.ignores(rel) => Role::Ignored,
        EntryKind::Symlink => Role::Foreign(IssueKind::ForeignSymlink),
        EntryKind::Submodule if ignore.ignores(rel) => Role::Ignored,
        EntryKind::Submodule => Role::Foreign(IssueKind::ForeignSubmodule),
        EntryKind::File => {
            // The one honoured ignore file; a nested copy is foreign.
            if rel == IGNORE_FILE {
                Role::Ignored
            } else if basename(rel) == "README.md" {
                Role::Artifact
            } else if retained(rel) {
                Role::Retained
            } else if ignore.ignores(rel) {
                Role::Ignored
            } else if is_manifest_path(rel) {
                Role::Managed
            } else if passenger(rel) {
                Role::Passenger
            } else {
                Role::Foreign(IssueKind::ForeignFile)
            }
        }
    }
}

/// The refusal of a foreign entry (ref: `foreignMessage`).
pub fn foreign(kind: IssueKind, path: &str) -> Issue {
    let what = match kind {
        IssueKind::ForeignSymlink => format!("symlink {path} is not managed content"),
        IssueKind::ForeignSubmodule => format!("git submodule {path} cannot be managed by the operator"),
        _ => format!("foreign file {path} is not a managed manifest"),
    };
    Issue::new(kind, path, None, format!("{what}; remove it or name it in {IGNORE_FILE}"))
}

/// What a managed YAML file holds: each document's identity (`None` for
/// any other document) and the file's refusals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct YamlFile {
    pub identities: Vec<Option<Identity>>,
    /// Documents that do not parse.
    pub unparsable: usize,
    pub issues: Vec<Issue>,
}

fn is_sops_file(path: &str) -> bool {
    path.ends_with(".sops.yaml") || path.ends_with(".sops.yml")
}

/// Reads a managed YAML file (ref: `manifestedit/index.go` `indexOneFile`
/// and acceptance's `recordlessRefusals`): a file with objects may hold
/// only valid objects; a standalone non-manifest or invalid file is
/// refused; a standalone empty one is ignored. Two documents of one file
/// claiming one identity: the second is a duplicate.
pub fn yaml_file(path: &str, text: &str) -> YamlFile {
    enum Doc {
        Object(Identity),
        Empty,
        NotKrm,
        Invalid(String),
    }
    let sealed = is_sops_file(path);
    let docs: Vec<Doc> = split(text)
        .iter()
        .map(|span| match parse(&text[span.body.clone()]) {
            Content::Object { value, .. } if sealed && value.get("sops").is_none() => {
                Doc::Invalid("SOPS file without a sops key, invalid".into())
            }
            Content::Object { identity, .. } => Doc::Object(identity),
            Content::Empty => Doc::Empty,
            Content::Foreign => Doc::NotKrm,
            Content::Unparsable { error } => Doc::Invalid(format!("invalid YAML: {error}")),
        })
        .collect();
    let managed = docs.iter().any(|d| matches!(d, Doc::Object(_)));
    let mut out = YamlFile::default();
    for (i, doc) in docs.into_iter().enumerate() {
        let impure = |what: &str| {
            Issue::new(
                IssueKind::ImpureManagedFile,
                path,
                Some(i),
                format!("a file with managed resources may contain only valid KRM documents; document #{i} is {what}"),
            )
        };
        match doc {
            Doc::Object(identity) => {
                if let Some(first) = out.identities.iter().position(|d| d.as_ref() == Some(&identity)) {
                    out.issues.push(duplicate(&identity, (path, i), (path, first)));
                }
                out.identities.push(Some(identity));
                continue;
            }
            Doc::Empty if managed => out.issues.push(impure("an empty document")),
            Doc::Empty => {}
            Doc::NotKrm if managed => out.issues.push(impure("a non-KRM document")),
            Doc::NotKrm => {
                out.issues.push(Issue::new(IssueKind::NonKrm, path, Some(i), "YAML is not a Kubernetes manifest"))
            }
            Doc::Invalid(message) => {
                out.unparsable += 1;
                out.issues.push(if managed {
                    impure("an invalid document")
                } else {
                    Issue::new(IssueKind::InvalidYaml, path, Some(i), message)
                });
            }
        }
        out.identities.push(None);
    }
    out
}

/// A YAML file that is not UTF-8 text: invalid, as the reference's
/// decoder finds it.
pub fn not_text(path: &str) -> YamlFile {
    YamlFile {
        identities: vec![None],
        unparsable: 1,
        issues: vec![Issue::new(IssueKind::InvalidYaml, path, Some(0), "invalid YAML: the file is not UTF-8 text")],
    }
}

/// `group/Kind/namespace/name`, `_cluster` for a cluster-scoped object
/// (ref: `identityRef`, which also names the version; the mirror's
/// identity does not carry one).
pub fn identity_ref(id: &Identity) -> String {
    let ns = if id.namespace.is_empty() { "_cluster" } else { &id.namespace };
    let group = if id.group.is_empty() { String::new() } else { format!("{}/", id.group) };
    format!("{group}{}/{ns}/{}", id.kind, id.name)
}

/// A later copy of an identity (`loser`) beside its first (`winner`), each
/// (path, document) (ref: `duplicateRefusals`).
pub fn duplicate(id: &Identity, loser: (&str, usize), winner: (&str, usize)) -> Issue {
    Issue::new(
        IssueKind::Duplicate,
        loser.0,
        Some(loser.1),
        format!(
            "duplicate manifest identity {} at {}#{}; first occurrence at {}#{}",
            identity_ref(id),
            loser.0,
            loser.1,
            winner.0,
            winner.1
        ),
    )
}

/// The kustomization fields whose render the mirror's in-place edits
/// stay true to: its own type and metadata, local `resources:`, and the
/// output options. Everything else is refused by name (the reference
/// refuses by inverting an allowlist over kustomize's own type, so a field
/// nobody remembered is refused too).
const KUSTOMIZE_SUPPORTED: &[&str] = &["apiVersion", "kind", "metadata", "resources", "bases", "sortOptions"];

/// Fields the reference models and this mirror does not: the render
/// differs from the source there, so writing the live object back over the
/// source would be wrong.
const KUSTOMIZE_REFERENCE_ONLY: &[&str] = &[
    "namespace",
    "images",
    "imageTags",
    "replicas",
    "patches",
    "commonLabels",
    "labels",
    "commonAnnotations",
    "buildMetadata",
];

/// A `resources:` entry kustomize would fetch rather than read from the tree.
fn remote_resource(entry: &str) -> bool {
    entry.contains("://")
        || entry.starts_with("git@")
        || entry.starts_with("github.com/")
        || entry.starts_with("gitlab.com/")
        || entry.starts_with("bitbucket.org/")
        || entry.contains("?ref=")
}

/// The refusals of a retained file (ref: `mixedFileRefusals`,
/// `unsupportedKustomizeRefusals`): an object hiding in it, or a
/// kustomization the mirror cannot vouch for. The SOPS configuration is
/// never refused for its content.
pub fn retained_file(path: &str, text: &str) -> Vec<Issue> {
    let mut out = Vec::new();
    for (i, span) in split(text).iter().enumerate() {
        if let Content::Object { identity, .. } = parse(&text[span.body.clone()]) {
            out.push(Issue::new(
                IssueKind::MixedFile,
                path,
                Some(i),
                format!(
                    "managed resource {} must not live in the allowlisted build-directive file {path}",
                    identity_ref(&identity)
                ),
            ));
        }
    }
    if basename(path) == SOPS_CONFIG || !out.is_empty() {
        return out;
    }
    let features = kustomize_features(text);
    if !features.is_empty() {
        out.push(Issue::new(
            IssueKind::UnsupportedKustomize,
            path,
            None,
            format!(
                "{path}: the kustomization uses {} that this mirror does not render; the operator will not \
                 write into this folder (keep only local resources: entries, or point spec.path at a folder \
                 without a kustomization)",
                features.join(", ")
            ),
        ));
    }
    out
}

/// The kustomization's features the mirror does not model, sorted.
fn kustomize_features(text: &str) -> Vec<String> {
    let Ok(value) = serde_norway::from_str::<Value>(text) else {
        return vec!["unparseable".into()];
    };
    let Value::Object(map) = value else {
        // An empty kustomization renders nothing.
        return if value.is_null() { Vec::new() } else { vec!["unparseable".into()] };
    };
    let mut out: Vec<String> = map
        .iter()
        .filter(|(k, v)| !KUSTOMIZE_SUPPORTED.contains(&k.as_str()) && !is_zero(v))
        .map(|(k, _)| {
            if KUSTOMIZE_REFERENCE_ONLY.contains(&k.as_str()) { format!("{k}:") } else { format!("{k}: (unsupported)") }
        })
        .collect();
    for key in ["resources", "bases"] {
        if let Some(entries) = map.get(key).and_then(Value::as_array)
            && entries.iter().any(|e| e.as_str().is_some_and(remote_resource))
        {
            out.push("a remote base".into());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// A present but empty field renders nothing (ref: the zero-value test of
/// `unmodelledFields`).
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(_) => false,
    }
}

/// The refusal of a planned write to `path` (from the repository root)
/// that leaves the folder `prefix` (`spec.path`; empty: the whole
/// repository), absolute or through `..` (ref: `pathScopePrecondition`).
/// Defence in depth: placement validation never makes such a path.
pub fn escapes_scope(prefix: &str, path: &str) -> Option<Issue> {
    let inside = prefix.is_empty() || path.strip_prefix(prefix).is_some_and(|r| r.starts_with('/'));
    let clean = !path.starts_with('/') && !path.split('/').any(|s| s == ".." || s == "." || s.is_empty());
    (!inside || !clean).then(|| {
        Issue::new(
            IssueKind::WriteEscapesScope,
            path,
            None,
            format!(
                "planned write path {path:?} escapes the GitTarget write scope: the operator only ever writes \
                 inside spec.path"
            ),
        )
    })
}

/// The parse-time refusal of an unusable `.gittargetignore` (ref:
/// `LoadGitTargetIgnore`'s catastrophic patterns).
pub fn unusable_ignore(path: &str, why: &str) -> Issue {
    Issue::new(IssueKind::IgnoreShadowsManaged, path, None, why)
}

/// A planned write `path` the root `.gittargetignore` matches (ref:
/// `ignoreShadowPrecondition`): the whole flush is refused.
pub fn shadowed_write(path: &str, pattern: &str) -> Issue {
    Issue::new(
        IssueKind::IgnoreShadowsManaged,
        path,
        None,
        format!(
            "{IGNORE_FILE} pattern {pattern:?} shadows the managed write path {path}; the operator would be blind \
             to its own file. Remove the pattern or move the resource out of its match (spec.placement)"
        ),
    )
}

#[cfg(test)]
mod tests;
