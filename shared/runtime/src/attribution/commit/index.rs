//! The identity index: every document under the target's `spec.path`,
//! wherever its file is, by identity (group, kind, namespace, name). Built
//! once from the tree and kept current by diffing the next tree against
//! the one it describes, so a large tree is read once, not per window.
//! Beside it, what the acceptance gate refuses in the folder
//! (`rules::mirror::acceptance`), kept per file so the gate costs the
//! number of problems, not the size of the tree.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use git2::{Oid, Repository, Tree};
use rules::mirror::acceptance::{self, EntryKind, Issue, Refusal, Role, YamlFile};
use rules::mirror::bootstrap::{IGNORE_FILE, TargetIgnore};
use rules::mirror::document::Identity;
use rules::mirror::reconcile::under;
use rules::mirror::watch_rules::WatchScope;

use super::Result;
use super::writer::git;

/// What one file holds, document by document, and what the gate refuses
/// in it.
#[derive(Debug, Clone, Default)]
struct FileDocs {
    /// Each document's identity (`None`: empty, foreign or unparsable),
    /// shared with [`DocIndex::by_identity`]'s key: one copy an object.
    identities: Vec<Option<Arc<Identity>>>,
    unparsable: usize,
    issues: Vec<Issue>,
}

/// The files holding one identity, in path order. Almost always one: a
/// sorted `Vec` holds it in one small allocation where a `BTreeSet` took a
/// node of eleven (about 300 bytes per object of a large mirror). Each path
/// is shared with [`DocIndex::files`]'s key.
#[derive(Debug, Default)]
struct Paths(Vec<Arc<str>>);

impl Paths {
    fn insert(&mut self, path: &Arc<str>) {
        if let Err(at) = self.0.binary_search_by(|p| (**p).cmp(path)) {
            self.0.insert(at, path.clone());
            self.0.shrink_to_fit();
        }
    }

    fn remove(&mut self, path: &str) {
        if let Ok(at) = self.0.binary_search_by(|p| (**p).cmp(path)) {
            self.0.remove(at);
        }
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn first(&self) -> Option<&str> {
        self.0.first().map(|p| &**p)
    }

    fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|p| &**p)
    }
}

/// One file as [`DocIndex::snapshot`] shows it: path, each document's
/// identity, unparsable documents, the gate's issues.
#[cfg(test)]
pub(super) type FileSnapshot = (String, Vec<Option<Identity>>, usize, Vec<Issue>);

#[derive(Debug, Default)]
pub(super) struct DocIndex {
    /// The tree this describes; `None` before the first build.
    tree: Option<Oid>,
    prefix: String,
    ignore: TargetIgnore,
    /// Why the `.gittargetignore` cannot be used, when it cannot.
    ignore_error: Option<rules::mirror::bootstrap::BootstrapError>,
    files: HashMap<Arc<str>, FileDocs>,
    /// Every file holding an identity; the first in path order is the one
    /// edited (the acceptance gate refuses a folder holding a second).
    /// Ordered by group and kind first, so a type's identities are one
    /// range (a relist asks once per type; a scan of the whole index each
    /// time was most of a 100-type relist's time).
    by_identity: BTreeMap<Arc<Identity>, Paths>,
    /// Identities more than one file holds.
    duplicated: BTreeSet<Arc<Identity>>,
    /// Files with at least one refusal, for the gate.
    refused: BTreeSet<String>,
    unparsable: usize,
}

impl DocIndex {
    pub(super) fn new(prefix: &str) -> Self {
        DocIndex { prefix: prefix.to_owned(), ..DocIndex::default() }
    }

    /// Brings the index to `tree`: a diff from the tree it describes, or a
    /// full read the first time (and when `.gittargetignore` changed).
    pub(super) fn refresh(&mut self, repo: &Repository, tree: &Tree<'_>) -> Result<()> {
        if self.tree == Some(tree.id()) {
            return Ok(());
        }
        let ignore_path = under(&self.prefix, IGNORE_FILE);
        let old = match self.tree {
            Some(id) => repo.find_tree(id).ok(),
            None => None,
        };
        let ignore_changed = old.as_ref().is_none_or(|o| entry(o, &ignore_path) != entry(tree, &ignore_path));
        if ignore_changed {
            self.rebuild(repo, tree)?;
        } else if let Some(old) = old {
            let mut opts = git2::DiffOptions::new();
            if !self.prefix.is_empty() {
                opts.pathspec(&self.prefix);
            }
            let diff = repo
                .diff_tree_to_tree(Some(&old), Some(tree), Some(&mut opts))
                .map_err(git("comparing the tree with the one indexed"))?;
            let mut touched: Vec<(String, Option<(Oid, EntryKind)>)> = Vec::new();
            for delta in diff.deltas() {
                if let Some(p) = delta.old_file().path().and_then(Path::to_str) {
                    touched.push((p.to_owned(), None));
                }
                if let Some(p) = delta.new_file().path().and_then(Path::to_str)
                    && delta.status() != git2::Delta::Deleted
                {
                    let kind = kind_of_mode(delta.new_file().mode().into());
                    touched.push((p.to_owned(), kind.map(|k| (delta.new_file().id(), k))));
                }
            }
            for (path, blob) in touched {
                match blob {
                    Some((id, kind)) => self.read_entry(repo, id, &path, kind)?,
                    None => self.set_file(&path, None),
                }
            }
        }
        self.tree = Some(tree.id());
        Ok(())
    }

    /// Marks the index as describing `tree` (after the writer applied its own
    /// edits through [`DocIndex::set_file`]).
    pub(super) fn describe(&mut self, tree: Oid) {
        self.tree = Some(tree);
    }

    /// Everything the index holds, in order: each file's documents, problems
    /// and unparsable count, then each identity's files. Two indexes of one
    /// tree compare equal by it.
    #[cfg(test)]
    pub(super) fn snapshot(&self) -> (Vec<FileSnapshot>, Vec<(Identity, Vec<String>)>) {
        let mut files: Vec<_> = self
            .files
            .iter()
            .map(|(p, f)| {
                let ids = f.identities.iter().map(|i| i.as_deref().cloned()).collect();
                (p.to_string(), ids, f.unparsable, f.issues.clone())
            })
            .collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        let ids =
            self.by_identity.iter().map(|(i, p)| ((**i).clone(), p.iter().map(str::to_owned).collect())).collect();
        (files, ids)
    }

    /// Forgets everything: the next refresh reads the tree afresh.
    pub(super) fn invalidate(&mut self) {
        self.tree = None;
    }

    fn rebuild(&mut self, repo: &Repository, tree: &Tree<'_>) -> Result<()> {
        self.files.clear();
        self.by_identity.clear();
        self.duplicated.clear();
        self.refused.clear();
        self.unparsable = 0;
        let ignore_path = under(&self.prefix, IGNORE_FILE);
        self.ignore = TargetIgnore::none();
        self.ignore_error = None;
        if let Some(id) = entry(tree, &ignore_path) {
            let text = read_blob(repo, id, &ignore_path)?.unwrap_or_default();
            match TargetIgnore::parse(&ignore_path, &text) {
                Ok(ig) => self.ignore = ig,
                Err(e) => {
                    tracing::warn!(error = %e, "the target's .gittargetignore cannot be used; writes are refused until it is fixed");
                    self.ignore_error = Some(e);
                }
            }
        }
        let sub = if self.prefix.is_empty() {
            Some(tree.clone())
        } else {
            match tree.get_path(Path::new(&self.prefix)) {
                Ok(e) if e.kind() == Some(git2::ObjectType::Tree) => {
                    Some(repo.find_tree(e.id()).map_err(git(format!("reading the tree {}", self.prefix)))?)
                }
                _ => None,
            }
        };
        let Some(sub) = sub else {
            return Ok(());
        };
        let mut entries: Vec<(String, Oid, EntryKind)> = Vec::new();
        sub.walk(git2::TreeWalkMode::PreOrder, |parent, e| {
            if let Some(kind) = kind_of_mode(e.filemode_raw())
                && let Some(name) = e.name()
            {
                entries.push((under(&self.prefix, &format!("{parent}{name}")), e.id(), kind));
            }
            git2::TreeWalkResult::Ok
        })
        .map_err(git(format!("listing {}", self.prefix)))?;
        for (path, id, kind) in entries {
            self.read_entry(repo, id, &path, kind)?;
        }
        if self.unparsable > 0 {
            tracing::warn!(
                documents = self.unparsable,
                "documents under the target's path do not parse as YAML; they are left alone and never rewritten"
            );
        }
        Ok(())
    }

    /// The role of a file under the prefix (`None`: outside it).
    fn role(&self, path: &str, kind: EntryKind) -> Option<Role> {
        Some(acceptance::classify(self.relative(path)?, kind, &self.ignore))
    }

    fn relative<'p>(&self, path: &'p str) -> Option<&'p str> {
        if self.prefix.is_empty() { Some(path) } else { path.strip_prefix(&self.prefix)?.strip_prefix('/') }
    }

    /// Why the folder may not be written now, if it may not: everything the
    /// acceptance gate refuses in it (ref: `AcceptStructureOnly`).
    pub(super) fn refusal(&self) -> Option<Refusal> {
        if self.refused.is_empty() && self.duplicated.is_empty() && self.ignore_error.is_none() {
            return None;
        }
        let mut issues: Vec<Issue> = self
            .refused
            .iter()
            .filter_map(|p| self.files.get(p.as_str()))
            .flat_map(|f| f.issues.iter().cloned())
            .collect();
        for id in &self.duplicated {
            let Some(paths) = self.by_identity.get(id) else { continue };
            let doc = |p: &str| {
                self.files.get(p).and_then(|f| f.identities.iter().position(|d| d.as_ref() == Some(id))).unwrap_or(0)
            };
            let mut paths = paths.iter();
            let Some(winner) = paths.next() else { continue };
            for loser in paths {
                issues.push(acceptance::duplicate(id, (loser, doc(loser)), (winner, doc(winner))));
            }
        }
        if let Some(e) = &self.ignore_error {
            issues.push(acceptance::unusable_ignore(&under(&self.prefix, IGNORE_FILE), &e.to_string()));
        }
        Refusal::of(issues)
    }

    /// The refusal of a write to `path` the root `.gittargetignore` matches
    /// (ref: `ignoreShadowPrecondition`).
    pub(super) fn shadowed(&self, path: &str) -> Option<Issue> {
        let rel = self.relative(path)?;
        self.ignore.matching_pattern(rel).map(|pattern| acceptance::shadowed_write(path, pattern))
    }

    fn read_entry(&mut self, repo: &Repository, id: Oid, path: &str, kind: EntryKind) -> Result<()> {
        match self.role(path, kind) {
            Some(Role::Managed | Role::Retained) => match read_blob(repo, id, path)? {
                Some(text) => self.set_entry(path, kind, Some(&text)),
                // Not UTF-8: no document the mirror can read or edit.
                None => {
                    self.set_entry(path, kind, None);
                    self.insert(path, acceptance::not_text(path));
                }
            },
            _ => self.set_entry(path, kind, Some("")),
        }
        Ok(())
    }

    /// Records what a file now holds (`None`: it is gone).
    pub(super) fn set_file(&mut self, path: &str, text: Option<&str>) {
        self.set_entry(path, EntryKind::File, text);
    }

    /// `path`, which holds only `id`'s document, now holds only its next
    /// version (`text`, one document of `id`): when the gate had nothing to
    /// say of the file, the index reads the same and the text is not parsed
    /// again; otherwise it is read as any file is.
    pub(super) fn set_single(&mut self, path: &str, id: &Identity, text: &str) {
        let same = !rules::mirror::placement::is_sensitive_path(path)
            && self.files.get(path).is_some_and(|f| {
                f.unparsable == 0
                    && f.issues.is_empty()
                    && matches!(f.identities.as_slice(), [Some(held)] if **held == *id)
            });
        if !same {
            self.set_file(path, Some(text));
        }
    }

    /// `path`, a file that held nothing, now holds only the document just
    /// rendered of `object` (`text`): indexed by the identity the object
    /// declares, which is what reading `text` back would find, without
    /// parsing it (a YAML parse per created file was a fifth of the writer's
    /// time in a first start: issue 31). A path the gate reads otherwise (a
    /// sealed file, anything not a managed manifest) is read as any file is.
    pub(super) fn set_rendered(&mut self, path: &str, object: &serde_json::Value, text: &str) {
        let identity = Identity::of(object);
        let managed = matches!(self.role(path, EntryKind::File), Some(Role::Managed));
        match identity {
            Some(identity) if managed && !rules::mirror::placement::is_sensitive_path(path) => {
                self.set_entry(path, EntryKind::File, None);
                self.insert(path, YamlFile { identities: vec![Some(identity)], ..YamlFile::default() });
            }
            _ => self.set_file(path, Some(text)),
        }
    }

    fn set_entry(&mut self, path: &str, kind: EntryKind, text: Option<&str>) {
        if let Some(old) = self.files.remove(path) {
            self.unparsable -= old.unparsable;
            self.refused.remove(path);
            for id in old.identities.into_iter().flatten() {
                if let Some(paths) = self.by_identity.get_mut(&*id) {
                    paths.remove(path);
                    match paths.len() {
                        0 => {
                            self.by_identity.remove(&*id);
                            self.duplicated.remove(&*id);
                        }
                        1 => {
                            self.duplicated.remove(&*id);
                        }
                        _ => {}
                    }
                }
            }
        }
        let (Some(text), Some(role)) = (text, self.role(path, kind)) else {
            return;
        };
        let docs = match role {
            Role::Managed => acceptance::yaml_file(path, text),
            Role::Retained => YamlFile { issues: acceptance::retained_file(path, text), ..YamlFile::default() },
            Role::Foreign(k) => YamlFile { issues: vec![acceptance::foreign(k, path)], ..YamlFile::default() },
            Role::Ignored | Role::Artifact | Role::Passenger => return,
        };
        self.insert(path, docs);
    }

    fn insert(&mut self, path: &str, docs: YamlFile) {
        // Held for every file of the mirror: no spare capacity, and each
        // identity and path once.
        let path: Arc<str> = Arc::from(path);
        let identities: Vec<Option<Arc<Identity>>> = docs
            .identities
            .into_iter()
            .map(|d| {
                d.map(|id| self.by_identity.get_key_value(&id).map_or_else(|| Arc::new(id), |(held, _)| held.clone()))
            })
            .collect();
        let mut issues = docs.issues;
        issues.shrink_to_fit();
        let docs = FileDocs { identities, unparsable: docs.unparsable, issues };
        for id in docs.identities.iter().flatten() {
            let paths = self.by_identity.entry(id.clone()).or_default();
            paths.insert(&path);
            if paths.len() > 1 {
                self.duplicated.insert(id.clone());
            }
        }
        self.unparsable += docs.unparsable;
        if !docs.issues.is_empty() {
            self.refused.insert(path.to_string());
        }
        self.files.insert(path, docs);
    }

    /// The file holding the object's document.
    pub(super) fn find(&self, id: &Identity) -> Option<&str> {
        self.by_identity.get(id).and_then(|p| p.first())
    }

    /// Whether a file holds a document that does not parse.
    pub(super) fn has_unparsable(&self, path: &str) -> bool {
        self.files.get(path).is_some_and(|f| f.unparsable > 0)
    }

    /// Documents that do not parse, under the prefix.
    pub(super) fn unparsable(&self) -> usize {
        self.unparsable
    }

    /// The kinds documents of `group` carry whose name could be the plural
    /// `resource` (a deletion names the type by resource, a document by kind).
    pub(super) fn identities_of<'s>(
        &'s self,
        group: &'s str,
        kind: KindMatch<'s>,
        scopes: &'s [WatchScope],
    ) -> impl Iterator<Item = &'s Identity> + 's {
        let from = Identity {
            group: group.to_owned(),
            kind: match kind {
                KindMatch::Kind(k) => k.to_owned(),
                KindMatch::Resource(_) => String::new(),
            },
            ..Identity::default()
        };
        let same_type = move |id: &Identity| match kind {
            KindMatch::Kind(k) => id.group == group && id.kind == k,
            KindMatch::Resource(_) => id.group == group,
        };
        self.by_identity.range(from..).map(|(id, _)| &**id).take_while(move |id| same_type(id)).filter(move |id| {
            kind.matches(&id.kind)
                && (scopes.is_empty()
                    || scopes.iter().any(|s| match s {
                        WatchScope::Everywhere => true,
                        WatchScope::Namespace(ns) => *ns == id.namespace,
                    }))
        })
    }
}

/// How documents of a watched type are recognised: by its kind when known,
/// else by the kind's plural matching the resource.
#[derive(Debug, Clone, Copy)]
pub(super) enum KindMatch<'a> {
    Kind(&'a str),
    Resource(&'a str),
}

impl KindMatch<'_> {
    fn matches(&self, kind: &str) -> bool {
        match self {
            KindMatch::Kind(k) => *k == kind,
            KindMatch::Resource(r) => plural_of(kind) == *r,
        }
    }
}

/// The plural Kubernetes gives most kinds (`Ingress` → `ingresses`,
/// `NetworkPolicy` → `networkpolicies`): a fallback when no object of the
/// type was seen to name its kind.
pub(super) fn plural_of(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s') || lower.ends_with('x') || lower.ends_with("ch") || lower.ends_with("sh") {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// What a tree entry of this mode is (`None`: a tree).
fn kind_of_mode(mode: i32) -> Option<EntryKind> {
    match mode {
        0o120000 => Some(EntryKind::Symlink),
        0o160000 => Some(EntryKind::Submodule),
        m if m & 0o170000 == 0o100000 => Some(EntryKind::File),
        _ => None,
    }
}

fn entry(tree: &Tree<'_>, path: &str) -> Option<Oid> {
    tree.get_path(Path::new(path)).ok().map(|e| e.id())
}

/// A blob's text; `None` when it is not UTF-8 (such a file holds no
/// document the mirror can edit).
pub(super) fn read_blob(repo: &Repository, id: Oid, path: &str) -> Result<Option<String>> {
    let blob = repo.find_blob(id).map_err(git(format!("reading {path}")))?;
    Ok(std::str::from_utf8(blob.content()).ok().map(str::to_owned))
}
