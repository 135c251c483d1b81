//! The documents a reconcile compares: what the branch tip's tree holds of
//! one type, and the live objects' documents beside it.

use std::collections::{HashMap, HashSet};

use git2::Oid;

use rules::attribution::render::{ObjectKey, render_manifest};
use rules::mirror::document::Identity as DocIdentity;
use rules::mirror::reconcile::Doc;
use rules::mirror::watch_rules::WatchScope;

use super::Result;
use super::apply::{digest, documents_in};
use super::folders::Folders;
use super::index::{KindMatch, read_blob};
use super::writer::{GitWriter, git, tree_of};

impl GitWriter {
    /// The documents of one type the tree holds anywhere under the prefix,
    /// in the watched scopes (none: everywhere), each as
    /// `<namespace>/<name>` with the digest of its content: what a
    /// reconcile compares the live objects with. `kind` is the type's kind
    /// when a listed object named it.
    pub fn documents_of_type(
        &mut self,
        group: &str,
        resource: &str,
        kind: Option<&str>,
        scopes: &[WatchScope],
    ) -> Result<Vec<Doc>> {
        self.documents_of_type_beside(group, resource, kind, scopes, &[])
    }

    /// [`GitWriter::documents_of_type`], given the live objects' documents
    /// ([`GitWriter::document`]): a file whose blob is exactly a live
    /// object's document holds that document alone, unchanged, and is not
    /// read or parsed. An unchanged relist then costs a hash per object,
    /// not a YAML parse and a render.
    pub fn documents_of_type_beside(
        &mut self,
        group: &str,
        resource: &str,
        kind: Option<&str>,
        scopes: &[WatchScope],
        live: &[Doc],
    ) -> Result<Vec<Doc>> {
        let wanted = self.identities_of_type(group, resource, kind, scopes)?;
        self.tree_documents(&wanted, live)
    }

    /// The documents of `wanted` in the branch tip's tree, beside the live
    /// documents (see [`GitWriter::documents_of_type_beside`]).
    fn tree_documents(&self, wanted: &HashSet<DocIdentity>, live: &[Doc]) -> Result<Vec<Doc>> {
        let head = self.local_head()?;
        let tree = tree_of(&self.repo, head)?;
        // A live document's blob as an id, read once: each held file whose
        // blob is the live one's is compared without formatting its id.
        let live: HashMap<(&str, &str), (Oid, &str)> = live
            .iter()
            .filter_map(|d| Some((d.path.split_once('/')?, (Oid::from_str(&d.blob).ok()?, d.blob.as_str()))))
            .collect();
        let mut at: HashMap<&str, Vec<&DocIdentity>> = HashMap::new();
        for id in wanted {
            if let Some(path) = self.index.find(id) {
                at.entry(path).or_default().push(id);
            }
        }
        let mut paths: Vec<(&str, Vec<&DocIdentity>)> = at.into_iter().collect();
        paths.sort_unstable_by_key(|(p, _)| *p);
        let mut out = Vec::with_capacity(wanted.len());
        let mut folders = Folders::new(&self.repo, &tree);
        for (path, ids) in paths {
            let Some(id) = folders.entry_id(path) else { continue };
            if let [only] = ids.as_slice()
                && let Some((_, blob)) =
                    live.get(&(only.namespace.as_str(), only.name.as_str())).filter(|(live_id, _)| *live_id == id)
            {
                out.push(Doc { path: format!("{}/{}", only.namespace, only.name), blob: (*blob).to_owned() });
                continue;
            }
            let Some(text) = read_blob(&self.repo, id, path)? else { continue };
            for (identity, value) in documents_in(&text) {
                if wanted.contains(&identity) && self.index.find(&identity) == Some(path) {
                    let blob = digest(&value)?;
                    out.push(Doc { path: format!("{}/{}", identity.namespace, identity.name), blob });
                }
            }
        }
        Ok(out)
    }

    /// The identities of the type's documents the tree holds in `scopes`,
    /// the index brought to the branch tip first. `kind`, when a listed
    /// object named it, is learned for the type.
    fn identities_of_type(
        &mut self,
        group: &str,
        resource: &str,
        kind: Option<&str>,
        scopes: &[WatchScope],
    ) -> Result<HashSet<DocIdentity>> {
        let type_key = (group.to_owned(), resource.to_owned());
        if let Some(k) = kind {
            self.kinds.insert(type_key.clone(), k.to_owned());
        }
        let head = self.local_head()?;
        let tree = tree_of(&self.repo, head)?;
        self.index.refresh(&self.repo, &tree)?;
        let matching = match self.kinds.get(&type_key) {
            Some(k) => KindMatch::Kind(k),
            None => KindMatch::Resource(resource),
        };
        Ok(self.index.identities_of(group, matching, scopes).cloned().collect())
    }

    /// Both sides of a reconcile: the type's documents in the tree (as
    /// [`GitWriter::documents_of_type_beside`]) and the live objects'
    /// documents. Only a live object the tree holds a document of is
    /// rendered and digested; any other is written whatever its digest, so
    /// its digest is left empty (a first start renders each object once,
    /// when it is written, not twice).
    pub fn reconcile_documents(
        &mut self,
        group: &str,
        resource: &str,
        kind: Option<&str>,
        scopes: &[WatchScope],
        live: &[(ObjectKey, serde_json::Value)],
    ) -> Result<(Vec<Doc>, Vec<Doc>)> {
        let wanted = self.identities_of_type(group, resource, kind, scopes)?;
        let held: HashSet<(&str, &str)> = wanted.iter().map(|id| (id.namespace.as_str(), id.name.as_str())).collect();
        // Every object of a reconcile is of its one type.
        let remembered = live.first().and_then(|(k, _)| self.digests.of_type(k));
        let mut seen = HashMap::with_capacity(held.len());
        let mut docs = Vec::with_capacity(live.len());
        for (k, o) in live {
            let path = format!("{}/{}", k.namespace, k.name);
            if !held.contains(&(k.namespace.as_str(), k.name.as_str())) {
                docs.push(Doc { path, blob: String::new() });
                continue;
            }
            let stamp = super::digests::stamp(o);
            let digest = match stamp.zip(remembered).and_then(|(s, m)| super::digests::unmoved(m, s)) {
                Some(d) => d,
                None => Oid::hash_object(git2::ObjectType::Blob, &render_manifest(k, o)?)
                    .map_err(git("hashing a manifest"))?,
            };
            if let Some((uid, rv)) = stamp {
                seen.insert(uid, (rv, digest));
            }
            docs.push(Doc { path, blob: digest.to_string() });
        }
        if let Some((k, _)) = live.first() {
            // A reconcile of the whole type saw every object of it.
            let whole = scopes.iter().all(|s| *s == WatchScope::Everywhere);
            self.digests.add_type(k, seen, whole);
        }
        let tree = self.tree_documents(&wanted, &docs)?;
        Ok((tree, docs))
    }

    /// A live object as [`GitWriter::documents_of_type`] names and digests
    /// its document.
    pub fn document(&self, key: &ObjectKey, object: &serde_json::Value) -> Result<Doc> {
        let bytes = render_manifest(key, object)?;
        let blob = Oid::hash_object(git2::ObjectType::Blob, &bytes).map_err(git("hashing a manifest"))?;
        Ok(Doc { path: format!("{}/{}", key.namespace, key.name), blob: blob.to_string() })
    }
}
