//! The identity index: every document under the target's `spec.path`,
//! wherever its file is, by identity (group, kind, namespace, name). Built
//! once from the tree and kept current by diffing the next tree against
//! the one it describes, so a large tree is read once, not per window.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use git2::{Oid, Repository, Tree};
use rules::mirror::bootstrap::{IGNORE_FILE, SOPS_CONFIG, TargetIgnore};
use rules::mirror::document::{Content, Identity, is_manifest_path, parse, split};
use rules::mirror::reconcile::under;
use rules::mirror::watch_rules::WatchScope;

use super::Result;
use super::writer::git;

/// What one file holds, document by document.
#[derive(Debug, Clone, Default)]
struct FileDocs {
    /// Each document's identity (`None`: empty, foreign or unparsable).
    identities: Vec<Option<Identity>>,
    unparsable: usize,
}

#[derive(Debug, Default)]
pub(super) struct DocIndex {
    /// The tree this describes; `None` before the first build.
    tree: Option<Oid>,
    prefix: String,
    ignore: Option<TargetIgnore>,
    /// Why the `.gittargetignore` cannot be used, when it cannot.
    ignore_error: Option<rules::mirror::bootstrap::BootstrapError>,
    files: HashMap<String, FileDocs>,
    /// Every file holding an identity; the first in path order is the one
    /// edited (a duplicate elsewhere is left alone).
    by_identity: HashMap<Identity, BTreeSet<String>>,
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
            let mut touched: Vec<(String, Option<Oid>)> = Vec::new();
            for delta in diff.deltas() {
                if let Some(p) = delta.old_file().path().and_then(Path::to_str) {
                    touched.push((p.to_owned(), None));
                }
                if let Some(p) = delta.new_file().path().and_then(Path::to_str)
                    && delta.status() != git2::Delta::Deleted
                {
                    touched.push((p.to_owned(), Some(delta.new_file().id())));
                }
            }
            for (path, blob) in touched {
                match blob {
                    Some(id) => self.read_file(repo, id, &path)?,
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

    /// Forgets everything: the next refresh reads the tree afresh.
    pub(super) fn invalidate(&mut self) {
        self.tree = None;
    }

    fn rebuild(&mut self, repo: &Repository, tree: &Tree<'_>) -> Result<()> {
        self.files.clear();
        self.by_identity.clear();
        self.unparsable = 0;
        let ignore_path = under(&self.prefix, IGNORE_FILE);
        self.ignore = None;
        self.ignore_error = None;
        if let Some(id) = entry(tree, &ignore_path) {
            let text = read_blob(repo, id, &ignore_path)?.unwrap_or_default();
            match TargetIgnore::parse(&ignore_path, &text) {
                Ok(ig) => self.ignore = Some(ig),
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
        let mut blobs: Vec<(String, Oid)> = Vec::new();
        sub.walk(git2::TreeWalkMode::PreOrder, |parent, e| {
            if e.kind() == Some(git2::ObjectType::Blob)
                && let Some(name) = e.name()
            {
                blobs.push((under(&self.prefix, &format!("{parent}{name}")), e.id()));
            }
            git2::TreeWalkResult::Ok
        })
        .map_err(git(format!("listing {}", self.prefix)))?;
        for (path, id) in blobs {
            if self.indexed(&path) {
                self.read_file(repo, id, &path)?;
            }
        }
        if self.unparsable > 0 {
            tracing::warn!(
                documents = self.unparsable,
                "documents under the target's path do not parse as YAML; they are left alone and never rewritten"
            );
        }
        Ok(())
    }

    /// Whether a file under the prefix is read for documents: YAML, not the
    /// SOPS configuration, not matched by `.gittargetignore`.
    fn indexed(&self, path: &str) -> bool {
        let Some(rel) = self.relative(path) else {
            return false;
        };
        is_manifest_path(rel) && rel != SOPS_CONFIG && !self.ignores(rel)
    }

    fn relative<'p>(&self, path: &'p str) -> Option<&'p str> {
        if self.prefix.is_empty() { Some(path) } else { path.strip_prefix(&self.prefix)?.strip_prefix('/') }
    }

    fn ignores(&self, rel: &str) -> bool {
        self.ignore.as_ref().is_some_and(|ig| ig.ignores(rel))
    }

    /// Why no write may happen now, if one may not: a path it writes is
    /// ignored by `.gittargetignore`, or that file refuses to parse.
    pub(super) fn refuse_write(&self, path: &str) -> Option<String> {
        if let Some(e) = &self.ignore_error {
            return Some(e.to_string());
        }
        let rel = self.relative(path)?;
        self.ignores(rel).then(|| {
            format!(
                "{path} is matched by the target's {IGNORE_FILE}, so the mirror may not write it; \
                 remove the pattern or place the object elsewhere with spec.placement"
            )
        })
    }

    fn read_file(&mut self, repo: &Repository, id: Oid, path: &str) -> Result<()> {
        if !self.indexed(path) {
            self.set_file(path, None);
            return Ok(());
        }
        match read_blob(repo, id, path)? {
            Some(text) => self.set_file(path, Some(&text)),
            None => {
                self.set_file(path, None);
                self.unparsable += 1;
                self.files.insert(path.to_owned(), FileDocs { identities: vec![None], unparsable: 1 });
            }
        }
        Ok(())
    }

    /// Records what a file now holds (`None`: it is gone).
    pub(super) fn set_file(&mut self, path: &str, text: Option<&str>) {
        if let Some(old) = self.files.remove(path) {
            self.unparsable -= old.unparsable;
            for id in old.identities.into_iter().flatten() {
                if let Some(paths) = self.by_identity.get_mut(&id) {
                    paths.remove(path);
                    if paths.is_empty() {
                        self.by_identity.remove(&id);
                    }
                }
            }
        }
        let Some(text) = text.filter(|_| self.indexed(path)) else {
            return;
        };
        let mut docs = FileDocs::default();
        for span in split(text) {
            match parse(&text[span.body.clone()]) {
                Content::Object { identity, .. } => {
                    self.by_identity.entry(identity.clone()).or_default().insert(path.to_owned());
                    docs.identities.push(Some(identity));
                }
                Content::Unparsable { .. } => {
                    docs.unparsable += 1;
                    docs.identities.push(None);
                }
                Content::Empty | Content::Foreign => docs.identities.push(None),
            }
        }
        self.unparsable += docs.unparsable;
        self.files.insert(path.to_owned(), docs);
    }

    /// The file holding the object's document.
    pub(super) fn find(&self, id: &Identity) -> Option<&str> {
        self.by_identity.get(id).and_then(|p| p.first()).map(String::as_str)
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
        self.by_identity.keys().filter(move |id| {
            id.group == group
                && kind.matches(&id.kind)
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

fn entry(tree: &Tree<'_>, path: &str) -> Option<Oid> {
    tree.get_path(Path::new(path)).ok().map(|e| e.id())
}

/// A blob's text; `None` when it is not UTF-8 (such a file holds no
/// document the mirror can edit).
pub(super) fn read_blob(repo: &Repository, id: Oid, path: &str) -> Result<Option<String>> {
    let blob = repo.find_blob(id).map_err(git(format!("reading {path}")))?;
    Ok(std::str::from_utf8(blob.content()).ok().map(str::to_owned))
}
