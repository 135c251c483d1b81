//! A window's trees, built here rather than by libgit2's tree updater, so
//! that they are written into the window's store without libgit2's lookup
//! of each new object in every pack (see [`super::store`]).
//!
//! The result is the tree libgit2's `git_tree_create_updated` builds from
//! the same edits, object for object: entries in Git's order (a tree's name
//! compared as if it ended in `/`), modes as Git writes them (`40000` for a
//! tree), a directory left empty dropped from its parent. A test holds the
//! two to the same ids over random edits.

use std::collections::BTreeMap;

use git2::build::TreeUpdateBuilder;
use git2::{FileMode, Oid, Repository, Tree};

use super::writer::git;
use super::{GitError as Error, Result};

/// A file's mode, as the writer writes every file.
const BLOB: i32 = 0o100644;
/// A directory's mode.
const TREE: i32 = 0o040000;

/// What a window does at a path: the blob it now holds, or `None`: gone.
pub(super) type Edit<'p> = (&'p str, Option<Oid>);

/// The edits under one directory, by entry name.
#[derive(Default)]
struct Dir<'p> {
    entries: BTreeMap<&'p str, Node<'p>>,
}

enum Node<'p> {
    File(Option<Oid>),
    Dir(Dir<'p>),
}

/// `base` with `edits` applied, each new tree handed to `write` (which
/// returns its id); the root's id. Paths are `/`-separated, relative to the
/// root; a later edit of a path wins over an earlier one.
pub(super) fn updated(
    repo: &Repository,
    base: &Tree<'_>,
    edits: &[Edit<'_>],
    write: &mut dyn FnMut(&[u8]) -> Result<Oid>,
) -> Result<Oid> {
    let mut root = Dir::default();
    for &(path, blob) in edits {
        root.insert(path, blob)?;
    }
    match apply(repo, Some(base), &root, write)? {
        Some(id) => Ok(id),
        // Everything removed: the empty tree, as libgit2 writes it.
        None => write(&[]),
    }
}

impl<'p> Dir<'p> {
    fn insert(&mut self, path: &'p str, blob: Option<Oid>) -> Result<()> {
        let (name, rest) = match path.split_once('/') {
            Some((name, rest)) => (name, Some(rest)),
            None => (path, None),
        };
        if name.is_empty() || name == "." || name == ".." {
            return Err(invalid(path));
        }
        match rest {
            None => {
                self.entries.insert(name, Node::File(blob));
            }
            Some(rest) => {
                let node = self.entries.entry(name).or_insert_with(|| Node::Dir(Dir::default()));
                if let Node::File(_) = node {
                    // A file replaced by a directory within one commit.
                    *node = Node::Dir(Dir::default());
                }
                let Node::Dir(dir) = node else { unreachable!("made a directory above") };
                dir.insert(rest, blob)?;
            }
        }
        Ok(())
    }
}

fn invalid(path: &str) -> Error {
    git(format!("building the tree at {path}"))(git2::Error::from_str("a path with an empty, `.` or `..` component"))
}

/// The tree `base` becomes under `dir`'s edits (`None`: empty, so dropped
/// from its parent).
fn apply(
    repo: &Repository,
    base: Option<&Tree<'_>>,
    dir: &Dir<'_>,
    write: &mut dyn FnMut(&[u8]) -> Result<Oid>,
) -> Result<Option<Oid>> {
    // (name, mode, id) of the tree as it stands, then edited.
    let mut entries: BTreeMap<Vec<u8>, (i32, Oid)> = BTreeMap::new();
    if let Some(base) = base {
        for e in base.iter() {
            entries.insert(e.name_bytes().to_vec(), (e.filemode(), e.id()));
        }
    }
    for (&name, node) in &dir.entries {
        let key = name.as_bytes().to_vec();
        match node {
            Node::File(Some(blob)) => {
                entries.insert(key, (BLOB, *blob));
            }
            Node::File(None) => {
                entries.remove(&key);
            }
            Node::Dir(sub) => {
                let below = match entries.get(&key) {
                    Some(&(TREE, id)) => {
                        Some(repo.find_tree(id).map_err(git(format!("reading the tree {id} at {name}")))?)
                    }
                    _ => None,
                };
                match apply(repo, below.as_ref(), sub, write)? {
                    Some(id) => entries.insert(key, (TREE, id)),
                    None => entries.remove(&key),
                };
            }
        }
    }
    if entries.is_empty() {
        return Ok(None);
    }
    // Git's order: a tree's name compares as if it ended in `/`.
    let mut sorted: Vec<(&Vec<u8>, &(i32, Oid))> = entries.iter().collect();
    sorted.sort_by(|a, b| Iterator::cmp(sort_key(a.0, a.1.0), sort_key(b.0, b.1.0)));
    let mut bytes = Vec::with_capacity(sorted.len() * 48);
    for (name, (mode, id)) in sorted {
        bytes.extend_from_slice(format!("{mode:o} ").as_bytes());
        bytes.extend_from_slice(name);
        bytes.push(0);
        bytes.extend_from_slice(id.as_bytes());
    }
    write(&bytes).map(Some)
}

/// `base` with `edits` applied by libgit2's tree updater, written through
/// the repository's object database (a window written loose, or on an
/// empty branch, where there is no store).
pub(super) fn by_libgit2(
    repo: &Repository,
    base: &Tree<'_>,
    edits: &[Edit<'_>],
) -> std::result::Result<Oid, git2::Error> {
    let mut update = TreeUpdateBuilder::new();
    for &(path, blob) in edits {
        match blob {
            Some(id) => update.upsert(path, id, FileMode::Blob),
            None => update.remove(path),
        };
    }
    update.create_updated(repo, base)
}

/// An entry's name as Git orders it: a tree's with `/` after it.
fn sort_key(name: &[u8], mode: i32) -> impl Iterator<Item = &u8> {
    let slash: &'static [u8] = if mode == TREE { b"/" } else { b"" };
    name.iter().chain(slash.iter())
}

#[cfg(test)]
mod tests {
    use super::*;
    use git2::ObjectType;

    fn ours(repo: &Repository, base: &Tree<'_>, edits: &[Edit<'_>]) -> Oid {
        let odb = repo.odb().unwrap();
        updated(repo, base, edits, &mut |bytes| Ok(odb.write(ObjectType::Tree, bytes).unwrap())).unwrap()
    }

    #[test]
    fn the_trees_are_libgit2s_object_for_object_over_random_edits() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let blobs: Vec<Oid> = (0..8).map(|i| repo.blob(format!("v: {i}\n").as_bytes()).unwrap()).collect();
        // Directory and file names that sort differently once a tree's name
        // ends in `/` ("a-b.yaml" < "a/", where "a" < "a-b.yaml"), a dot
        // file, nested directories. A name is a directory's or a file's,
        // never both, as in the writer's trees.
        let dirs = ["a", "a-b", "b", "z"];
        let files = ["a-b.yaml", "a.yaml", ".sops.yaml", "z.yaml", "c"];
        let mut rng = fastrand::Rng::with_seed(31);
        let mut base = repo.find_tree(repo.treebuilder(None).unwrap().write().unwrap()).unwrap().id();
        let mut compared = 0;
        for round in 0..300 {
            // Distinct paths, none a directory of another in the set (the
            // writer's edits are files, each once).
            let mut paths: Vec<String> = Vec::new();
            for _ in 0..rng.usize(1..8) {
                let mut path: Vec<&str> = (0..rng.usize(0..3)).map(|_| dirs[rng.usize(..dirs.len())]).collect();
                path.push(files[rng.usize(..files.len())]);
                let path = path.join("/");
                let clash =
                    |a: &str, b: &str| a == b || a.starts_with(&format!("{b}/")) || b.starts_with(&format!("{a}/"));
                if !paths.iter().any(|p| clash(p, &path)) {
                    paths.push(path);
                }
            }
            let edits: Vec<Edit<'_>> = paths
                .iter()
                .map(|p| (p.as_str(), if rng.u8(..4) == 0 { None } else { Some(blobs[rng.usize(..blobs.len())]) }))
                .collect();
            // libgit2's updater refuses some edit sets (a file and a
            // directory at one path in one call): only sets it accepts.
            let tree = repo.find_tree(base).unwrap();
            let Ok(expected) = by_libgit2(&repo, &tree, &edits) else { continue };
            assert_eq!(ours(&repo, &tree, &edits), expected, "round {round}: {edits:?} on {base}");
            base = expected;
            compared += 1;
        }
        assert!(compared > 200, "libgit2 accepted only {compared} of 300 rounds");
        assert!(!repo.find_tree(base).unwrap().is_empty(), "the rounds built something");
    }

    #[test]
    fn removing_every_file_leaves_the_empty_tree_and_no_empty_directory() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let blob = repo.blob(b"x").unwrap();
        let empty = repo.find_tree(repo.treebuilder(None).unwrap().write().unwrap()).unwrap();
        let one = repo.find_tree(ours(&repo, &empty, &[("a/b/c.yaml", Some(blob)), ("d.yaml", Some(blob))])).unwrap();
        let kept = repo.find_tree(ours(&repo, &one, &[("a/b/c.yaml", None)])).unwrap();
        assert!(kept.get_path(std::path::Path::new("a")).is_err(), "the emptied directories are gone");
        assert_eq!(ours(&repo, &kept, &[("d.yaml", None)]), empty.id());
        assert!(updated(&repo, &empty, &[("a//b", Some(blob))], &mut |_| unreachable!()).is_err());
    }
}
