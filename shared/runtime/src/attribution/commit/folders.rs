//! Looking files up in a Git tree by path: one path, or many in order.

use std::path::Path;

use git2::{Oid, Repository, Tree};

pub(super) fn entry_id(tree: &Tree<'_>, path: &str) -> Option<Oid> {
    tree.get_path(Path::new(path)).ok().map(|e| e.id())
}

/// [`entry_id`] for many paths in order: the folder of the last one is
/// kept, so the files of one folder (a type's thousand documents in a
/// namespace) cost one lookup of the folder, not one each.
pub(super) struct Folders<'r> {
    repo: &'r Repository,
    root: &'r Tree<'r>,
    last: Option<(String, Option<Tree<'r>>)>,
}

impl<'r> Folders<'r> {
    pub(super) fn new(repo: &'r Repository, root: &'r Tree<'r>) -> Self {
        Folders { repo, root, last: None }
    }

    pub(super) fn entry_id(&mut self, path: &str) -> Option<Oid> {
        let Some((folder, file)) = path.rsplit_once('/') else {
            return self.root.get_name(path).map(|e| e.id());
        };
        if self.last.as_ref().is_none_or(|(f, _)| f != folder) {
            let tree = self
                .root
                .get_path(Path::new(folder))
                .ok()
                .filter(|e| e.kind() == Some(git2::ObjectType::Tree))
                .and_then(|e| self.repo.find_tree(e.id()).ok());
            self.last = Some((folder.to_owned(), tree));
        }
        self.last.as_ref()?.1.as_ref()?.get_name(file).map(|e| e.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path, in order, is found as one lookup of the whole path finds
    /// it: files beside and below others, a folder named as a file, a file
    /// named as a folder, missing ones, files at the root.
    #[test]
    fn folders_find_what_a_whole_path_lookup_finds() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let blob = |text: &str| repo.blob(text.as_bytes()).unwrap();
        let mut b = git2::build::TreeUpdateBuilder::new();
        for path in ["top.yaml", "a/x.yaml", "a/y.yaml", "a/b/x.yaml", "a-b/x.yaml", "c/d/e/f.yaml", "c/d/g.yaml"] {
            b.upsert(path, blob(path), git2::FileMode::Blob);
        }
        let empty = repo.find_tree(repo.treebuilder(None).unwrap().write().unwrap()).unwrap();
        let root = repo.find_tree(b.create_updated(&repo, &empty).unwrap()).unwrap();
        let mut paths = vec![
            "top.yaml",
            "a/x.yaml",
            "a/y.yaml",
            "a/z.yaml",
            "a/b/x.yaml",
            "a/b",
            "a-b/x.yaml",
            "c/d/e/f.yaml",
            "c/d/g.yaml",
            "c/d/g.yaml/h",
            "top.yaml/x",
            "none/x.yaml",
            "none.yaml",
            "c/d/e",
        ];
        paths.sort_unstable();
        let mut folders = Folders::new(&repo, &root);
        for path in paths {
            assert_eq!(folders.entry_id(path), entry_id(&root, path), "{path}");
        }
        assert!(Folders::new(&repo, &root).entry_id("a/b/x.yaml").is_some());
    }
}
