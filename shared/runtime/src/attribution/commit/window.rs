//! A window's pack: the objects one commit window wrote, as one pack in the
//! clone, and the same pack for a local remote.
//!
//! Which objects: each commit, and along every path a commit changed, the
//! blob and the trees above it, unless the window's start holds that very
//! object at that very path (a change undone within the window, a file
//! written back as it was). What the start holds at a path the remote holds
//! too when it is at the start, which is when the push sends this pack.
//! An object the start holds only elsewhere is packed again: two packs then
//! share it, which the merges handle (they rebuild such packs), where
//! leaving it out on a guess could leave the remote without it.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use git2::{ObjectType, Odb, Oid, Repository, Tree};

use super::packs::whole::{self, Whole};
use super::writer::git;
use super::{GitError as Error, Result};

/// A packed window's blobs by id: hashed by the writer and kept here for
/// the window's pack, not written to the object database.
pub(super) type Blobs = HashMap<Oid, Vec<u8>>;

/// A window's pack: the objects `head` reaches and `start` does not.
pub(super) struct WindowPack {
    pub(super) start: Option<Oid>,
    pub(super) head: Oid,
    pub(super) pack: Whole,
}

/// The objects a window wrote, gathered commit by commit.
pub(super) struct WindowObjects<'r> {
    /// The tree of the window's start (`None`: an empty branch).
    start: Option<Tree<'r>>,
    seen: HashSet<Oid>,
    commits: Vec<Oid>,
    trees: Vec<Oid>,
    blobs: Vec<Oid>,
}

impl<'r> WindowObjects<'r> {
    pub(super) fn new(start: Option<Tree<'r>>) -> Self {
        WindowObjects { start, seen: HashSet::new(), commits: Vec::new(), trees: Vec::new(), blobs: Vec::new() }
    }

    /// One commit of the window, whose tree `tree` differs from its
    /// parent's at `paths` (files written or removed).
    pub(super) fn commit<'p>(&mut self, id: Oid, tree: &Tree<'_>, paths: impl IntoIterator<Item = &'p str>) {
        self.commits.push(id);
        self.add(tree.id(), ObjectType::Tree, "");
        let mut dirs: HashSet<&str> = HashSet::new();
        for path in paths {
            if let Ok(entry) = tree.get_path(Path::new(path)) {
                self.add(entry.id(), ObjectType::Blob, path);
            }
            // Every directory above the file, each once per commit.
            let mut end = 0;
            while let Some(slash) = path[end..].find('/') {
                end += slash;
                let dir = &path[..end];
                end += 1;
                if dirs.insert(dir)
                    && let Ok(entry) = tree.get_path(Path::new(dir))
                {
                    self.add(entry.id(), ObjectType::Tree, dir);
                }
            }
        }
    }

    fn add(&mut self, id: Oid, kind: ObjectType, path: &str) {
        // Gathered already (a path a later commit of the window touches
        // again): no walk of the start's tree for it.
        if self.seen.contains(&id) {
            return;
        }
        let at_start = match &self.start {
            None => false,
            Some(start) if path.is_empty() => start.id() == id,
            Some(start) => start.get_path(Path::new(path)).is_ok_and(|e| e.id() == id),
        };
        if at_start {
            return;
        }
        self.seen.insert(id);
        match kind {
            ObjectType::Blob => self.blobs.push(id),
            _ => self.trees.push(id),
        }
    }

    /// The pack of the gathered objects, read from `odb` or, for the blobs
    /// the writer kept, from `blobs`: commits, then trees, then blobs, as
    /// git orders a pack.
    pub(super) fn pack(&self, odb: &Odb<'_>, blobs: &Blobs) -> Result<Whole> {
        let context = || "reading the window's objects to pack them";
        let read = |id: &Oid| odb.read(*id).map_err(git(context()));
        let objects = self.commits.iter().chain(&self.trees).map(read).collect::<Result<Vec<_>>>()?;
        let (mut kept, mut read_blobs) = (Vec::new(), Vec::new());
        for id in &self.blobs {
            match blobs.get(id) {
                Some(bytes) => kept.push((*id, bytes.as_slice())),
                None => read_blobs.push(read(id)?),
            }
        }
        whole::build(
            objects
                .iter()
                .map(|o| (o.id(), o.kind(), o.data()))
                .chain(kept.into_iter().map(|(id, bytes)| (id, ObjectType::Blob, bytes)))
                .chain(read_blobs.iter().map(|o| (o.id(), o.kind(), o.data()))),
        )
    }
}

/// The pack of what `head` reaches and `start` does not, by libgit2's pack
/// builder (a push of several windows, or of commits not packed as one).
/// (libgit2's mempack dump inserts each commit with its whole tree: every
/// window's pack would hold the entire mirror again, delta-searched on
/// every core, which made a first start on a large cluster cost memory and
/// time growing with the square of its size.) The walk hides `start`, so
/// what it already reaches is left out, as a push does.
pub(super) fn walked_pack(work: &Repository, start: Option<Oid>, head: Oid) -> Result<git2::Buf> {
    let context = || "packing the commits to push";
    let mut walk = work.revwalk().map_err(git(context()))?;
    walk.push(head).map_err(git(context()))?;
    if let Some(start) = start {
        walk.hide(start).map_err(git(context()))?;
    }
    let mut builder = work.packbuilder().map_err(git(context()))?;
    // One thread: helper threads would each keep an allocator arena of
    // their own.
    builder.set_threads(1);
    builder.insert_walk(&mut walk).map_err(git(context()))?;
    let mut pack = git2::Buf::new();
    builder.write_buf(&mut pack).map_err(git(context()))?;
    Ok(pack)
}

/// Puts a window's pack into the repository at `repo_dir` (the clone, or a
/// local bare remote).
pub(super) fn install(repo_dir: &Path, pack: &Whole) -> Result<()> {
    whole::install(&repo_dir.join("objects"), pack).map(|_| ()).map_err(|e| match e {
        Error::Io { context, source } => {
            Error::Io { context: format!("{context} (the window's pack, in {})", repo_dir.display()), source }
        }
        other => other,
    })
}
