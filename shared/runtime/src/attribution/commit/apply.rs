//! Match first (gitops-reverser `internal/git/manifestedit/`, placement
//! spec "Existing manifests are still match-first"): a change finds its
//! object's document by identity anywhere under the target's path and edits
//! it in place; only an object found nowhere gets a new document, where
//! placement puts it. A removal takes out its document, and the file only
//! when nothing else is left in it.

use std::collections::HashMap;

use git2::{Oid, Repository, Tree};
use rules::attribution::commit::plan::Effect;
use rules::attribution::commit::{Action, Change};
use rules::attribution::render::{ObjectKey, sanitize, to_stable_yaml};
use rules::mirror::document::{self, Content, Identity, append, edit, parse, remove, replace, split};
use rules::mirror::placement::{Placement, is_sensitive_path};
use rules::mirror::reconcile::under;
use rules::mirror::select::SensitiveTypes;
use rules::mirror::watch_rules::WatchScope;

use super::encryption::Encryptor;
use super::index::{DocIndex, KindMatch};
use super::window::Blobs;
use super::writer::git;
use super::{GitError as Error, Result};

/// The files one commit changes, over the tree it starts from.
pub(super) struct Files<'r> {
    repo: &'r Repository,
    base: &'r Tree<'r>,
    /// The blobs of a packed window written so far, which the object
    /// database does not hold until the window's pack is installed.
    blobs: &'r Blobs,
    /// Path → new bytes (`None`: removed).
    pub(super) overlay: HashMap<String, Option<Vec<u8>>>,
}

impl<'r> Files<'r> {
    pub(super) fn new(repo: &'r Repository, base: &'r Tree<'r>, blobs: &'r Blobs) -> Self {
        Files { repo, base, blobs, overlay: HashMap::new() }
    }

    pub(super) fn get(&self, path: &str) -> Result<Option<Vec<u8>>> {
        if let Some(state) = self.overlay.get(path) {
            return Ok(state.clone());
        }
        match super::folders::entry_id(self.base, path) {
            None => Ok(None),
            Some(id) => {
                if let Some(bytes) = self.blobs.get(&id) {
                    return Ok(Some(bytes.clone()));
                }
                let blob = self.repo.find_blob(id).map_err(git(format!("reading {path}")))?;
                Ok(Some(blob.content().to_vec()))
            }
        }
    }

    /// The blob `path` holds in the base tree, when this window has not
    /// written it yet.
    pub(super) fn base_id(&self, path: &str) -> Option<Oid> {
        if self.overlay.contains_key(path) {
            return None;
        }
        super::folders::entry_id(self.base, path)
    }

    pub(super) fn exists(&self, path: &str) -> bool {
        match self.overlay.get(path) {
            Some(state) => state.is_some(),
            None => super::folders::entry_id(self.base, path).is_some(),
        }
    }
}

/// What one change came to.
pub(super) enum Outcome {
    /// The tree already says this.
    Unchanged,
    /// The file at `path` changed.
    Applied { effect: Effect, path: String },
    /// A sensitive write not committed: no encryption, or sealing failed.
    SensitiveSkipped,
    /// Refused (bad object, placement, a file that cannot be edited).
    Rejected(Error),
    /// A write the folder's rules forbid: the whole window is refused.
    Refused(rules::mirror::acceptance::Issue),
}

/// What changes are applied with.
pub(super) struct Context<'a> {
    pub(super) prefix: &'a str,
    pub(super) placement: &'a Placement,
    pub(super) encryptor: Option<&'a dyn Encryptor>,
    /// The types written only sealed (Secrets and `--additional-sensitive-resources`).
    pub(super) sensitive: &'a SensitiveTypes,
    pub(super) index: &'a mut DocIndex,
    /// (group, resource) → kind, as objects of the type named it: a
    /// removal names its type by resource alone.
    pub(super) kinds: &'a mut HashMap<(String, String), String>,
    /// Where a created document's digest is remembered for the next relist.
    pub(super) digests: &'a mut super::digests::Digests,
}

fn refused(key: &ObjectKey, message: impl Into<String>) -> Outcome {
    Outcome::Rejected(Error::Rules(rules::Error::Render { object: key.display(), message: message.into() }))
}

fn text(bytes: Vec<u8>, path: &str, key: &ObjectKey) -> std::result::Result<String, Outcome> {
    String::from_utf8(bytes).map_err(|_| refused(key, format!("{path} is not UTF-8 text; it is left as it is")))
}

/// Renders one value as the stable YAML a new document gets.
fn renderer(key: &ObjectKey) -> impl Fn(&serde_json::Value) -> String + '_ {
    move |v| to_stable_yaml(key, v).unwrap_or_default()
}

impl Context<'_> {
    /// Applies one change to `files` (and the index).
    pub(super) fn apply(&mut self, files: &mut Files<'_>, change: &Change) -> Result<Outcome> {
        let key = &change.object;
        // Coordinates that are not one path segment each are corrupt input.
        if let Err(e) = rules::attribution::render::layout_path(key) {
            return Ok(Outcome::Rejected(e.into()));
        }
        match &change.action {
            Action::Write(object) => self.write(files, key, object),
            Action::Delete => self.delete(files, key),
        }
    }

    fn write(&mut self, files: &mut Files<'_>, key: &ObjectKey, object: &serde_json::Value) -> Result<Outcome> {
        let type_key = (key.group.clone(), key.resource.clone());
        let kind = match object.get("kind").and_then(|k| k.as_str()).filter(|k| !k.is_empty()) {
            Some(k) => k.to_owned(),
            None => match self.kinds.get(&type_key) {
                Some(k) => k.clone(),
                None => return Ok(refused(key, "the object has no `kind`; the watch event is not a whole object")),
            },
        };
        self.kinds.insert(type_key, kind.clone());
        let desired = match sanitize(key, object) {
            Ok(v) => v,
            Err(e) => return Ok(Outcome::Rejected(e.into())),
        };
        let id = Identity::new(&key.group, &kind, &key.namespace, &key.name);
        let sensitive = self.sensitive.contains(&key.group, &key.resource);
        let found = self.index.find(&id).map(str::to_owned);
        if sensitive {
            return self.write_sealed(files, key, &kind, &desired, found);
        }
        let render = renderer(key);
        let Some(path) = found else {
            let rel = match self.placement.path_for(key, &kind, false) {
                Ok(p) => p,
                Err(e) => return Ok(refused(key, e.to_string())),
            };
            let path = under(self.prefix, &rel);
            if let Some(issue) = self.boundary(&path) {
                return Ok(Outcome::Refused(issue));
            }
            let body = render(&desired);
            // The digest a relist compares this object's document by.
            if let Ok(digest) = Oid::hash_object(git2::ObjectType::Blob, body.as_bytes()) {
                self.digests.remember(key, object, digest);
            }
            match files.get(&path)? {
                Some(bytes) if !bytes.iter().all(u8::is_ascii_whitespace) => {
                    if self.index.has_unparsable(&path) || is_sensitive_path(&path) {
                        return Ok(refused(
                            key,
                            format!(
                                "placement puts it in {path}, which holds a document that cannot be kept beside it"
                            ),
                        ));
                    }
                    let old = match text(bytes, &path, key) {
                        Ok(t) => t,
                        Err(o) => return Ok(o),
                    };
                    self.set(files, &path, Some(append(&old, &body)));
                }
                _ => {
                    self.index.set_rendered(&path, &desired, &body);
                    files.overlay.insert(path.clone(), Some(body.into_bytes()));
                }
            }
            return Ok(Outcome::Applied { effect: Effect::Create, path });
        };
        // The file is exactly the document last rendered for this object
        // (its blob is that document's digest): the new version's document
        // replaces it whole, with no parse of the old one (most of a busy
        // window's cost: issue 31). Any other file is edited in place.
        if let Some(held) = self.digests.held(key, object)
            && files.base_id(&path) == Some(held)
        {
            let body = render(&desired);
            let digest = Oid::hash_object(git2::ObjectType::Blob, body.as_bytes())
                .map_err(git(format!("hashing the document of {path}")))?;
            if digest == held {
                return Ok(Outcome::Unchanged);
            }
            self.digests.remember(key, object, digest);
            self.index.set_single(&path, &id, &body);
            files.overlay.insert(path.clone(), Some(body.into_bytes()));
            return Ok(Outcome::Applied { effect: Effect::Update, path });
        }
        let old_text = match files.get(&path)?.map(|b| text(b, &path, key)) {
            Some(Ok(t)) => t,
            Some(Err(o)) => return Ok(o),
            None => return Ok(refused(key, format!("{path} is indexed but absent"))),
        };
        let spans = split(&old_text);
        for (i, span) in spans.iter().enumerate() {
            let body = &old_text[span.body.clone()];
            let Content::Object { identity, value } = parse(body) else {
                continue;
            };
            if identity != id {
                continue;
            }
            if value == desired {
                return Ok(Outcome::Unchanged);
            }
            let new_body = edit(body, &value, &desired, &render);
            let new = replace(&old_text, &spans, i, &new_body);
            self.set(files, &path, Some(new));
            return Ok(Outcome::Applied { effect: Effect::Update, path });
        }
        Ok(refused(key, format!("{path} no longer holds its document")))
    }

    /// A sensitive object: one file of its own, sealed by the encryptor,
    /// never in clear text.
    fn write_sealed(
        &mut self,
        files: &mut Files<'_>,
        key: &ObjectKey,
        kind: &str,
        desired: &serde_json::Value,
        found: Option<String>,
    ) -> Result<Outcome> {
        let Some(encryptor) = self.encryptor else {
            return Ok(Outcome::SensitiveSkipped);
        };
        let (path, effect) = match found {
            Some(p) => (p, Effect::Update),
            None => match self.placement.path_for(key, kind, true) {
                Ok(rel) => (under(self.prefix, &rel), Effect::Create),
                Err(e) => return Ok(refused(key, e.to_string())),
            },
        };
        if let Some(issue) = self.boundary(&path) {
            return Ok(Outcome::Refused(issue));
        }
        let existing = files.get(&path)?;
        if let Some(bytes) = &existing {
            let others = std::str::from_utf8(bytes).map_or(1, |t| {
                split(t).iter().filter(|s| !matches!(parse(&t[s.body.clone()]), Content::Empty)).count()
            });
            if effect == Effect::Create || others > 1 {
                return Ok(refused(
                    key,
                    format!("{path} holds other documents; a sensitive object is only written to a file of its own"),
                ));
            }
        }
        let plaintext = renderer(key)(desired);
        let sealed = match encryptor.seal(&path, plaintext.as_bytes(), existing.as_deref()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(object = %key.display(), error = %e, "sealing failed; not written (never in clear text)");
                return Ok(Outcome::SensitiveSkipped);
            }
        };
        if existing.as_deref() == Some(sealed.as_slice()) {
            return Ok(Outcome::Unchanged);
        }
        let text = String::from_utf8_lossy(&sealed).into_owned();
        self.index.set_file(&path, Some(&text));
        files.overlay.insert(path.clone(), Some(sealed));
        Ok(Outcome::Applied { effect, path })
    }

    fn delete(&mut self, files: &mut Files<'_>, key: &ObjectKey) -> Result<Outcome> {
        let Some(id) = self.identity_for_removal(key) else {
            return Ok(Outcome::Unchanged);
        };
        let Some(path) = self.index.find(&id).map(str::to_owned) else {
            return Ok(Outcome::Unchanged);
        };
        let Some(bytes) = files.get(&path)? else {
            return Ok(Outcome::Unchanged);
        };
        let old = match text(bytes, &path, key) {
            Ok(t) => t,
            Err(o) => return Ok(o),
        };
        let spans = split(&old);
        let Some(i) = spans
            .iter()
            .position(|s| matches!(parse(&old[s.body.clone()]), Content::Object { identity, .. } if identity == id))
        else {
            return Ok(Outcome::Unchanged);
        };
        let new = remove(&old, &spans, i);
        self.set(files, &path, new);
        Ok(Outcome::Applied { effect: Effect::Delete, path })
    }

    /// The identity a removal is about: by the type's kind when an object
    /// of it named one, else the one document of the type's group whose
    /// kind's plural is the resource.
    fn identity_for_removal(&self, key: &ObjectKey) -> Option<Identity> {
        if let Some(kind) = self.kinds.get(&(key.group.clone(), key.resource.clone())) {
            return Some(Identity::new(&key.group, kind, &key.namespace, &key.name));
        }
        let scopes = [WatchScope::Namespace(key.namespace.clone())];
        self.index
            .identities_of(&key.group, KindMatch::Resource(&key.resource), &scopes)
            .find(|id| id.name == key.name)
            .cloned()
    }

    /// Why a write to `path` would break the folder's rules: outside
    /// `spec.path` (ref: `pathScopePrecondition`, defence in depth, as
    /// placement never makes one), or hidden by `.gittargetignore`.
    fn boundary(&self, path: &str) -> Option<rules::mirror::acceptance::Issue> {
        rules::mirror::acceptance::escapes_scope(self.prefix, path).or_else(|| self.index.shadowed(path))
    }

    fn set(&mut self, files: &mut Files<'_>, path: &str, text: Option<String>) {
        self.index.set_file(path, text.as_deref());
        files.overlay.insert(path.to_owned(), text.map(String::into_bytes));
    }
}

/// The digest a reconcile compares a document by: its stable YAML, so a
/// document another tool wrote with other key order or comments is the
/// same as ours when it holds the same object.
pub(super) fn digest(value: &serde_json::Value) -> Result<String> {
    let yaml = to_stable_yaml(&ObjectKey::default(), value)?;
    Ok(Oid::hash_object(git2::ObjectType::Blob, yaml.as_bytes()).map_err(git("hashing a manifest"))?.to_string())
}

/// Each document of `text` that is an object of one of `wanted`.
pub(super) fn documents_in(text: &str) -> impl Iterator<Item = (Identity, serde_json::Value)> + '_ {
    document::split(text).into_iter().filter_map(move |s| match parse(&text[s.body]) {
        Content::Object { identity, value } => Some((identity, value)),
        _ => None,
    })
}
