//! A packed window's in-memory object store, written without libgit2's
//! lookup of each new object in every pack.
//!
//! libgit2 looks an object up in the clone's packs before it writes it
//! (`git_odb_write` → `git_odb__freshen`) and, on a miss, rescans the pack
//! directory and looks again. A window's trees and commits are new, so
//! every one missed in every pack index: lookups of random ids that, over a
//! run, mapped every page of each index (the steady bench: `serve`'s
//! file-backed memory grew 14.5 MiB in 10 minutes at 500 changes/s, as the
//! clone's indexes grew). git2 wraps no write that skips the lookup, so the
//! store is libgit2's in-memory backend (mempack) attached here through
//! libgit2-sys, and written through the backend's own `write`, as
//! `git_odb_write` itself does once the lookup has missed. libgit2 reads
//! from it like from any backend, so the trees and commits written here are
//! found by every later read of the window, and dropped with the handle.
//!
//! The only unsafe code of the workspace: four libgit2 calls, each with
//! what makes it sound beside it.
#![allow(unsafe_code)]

use std::marker::PhantomData;
use std::ptr;

use git2::{ObjectType, Oid, Repository};
use libgit2_sys as raw;

use super::writer::git;
use super::{GitError as Error, Result};

unsafe extern "C" {
    /// libgit2's `git_commit_owner` (git2/commit.h), which libgit2-sys
    /// does not declare: the repository a commit was read from.
    fn git_commit_owner(commit: *const raw::git_commit) -> *mut raw::git_repository;
}

/// Read before the object database's other backends (libgit2 reads them
/// by priority, highest first; its packs and loose objects are 1 and 2).
const PRIORITY: i32 = 1000;

/// The in-memory store of one window's objects, attached to the object
/// database of the repository handle it was made from.
pub(super) struct Store<'r> {
    /// A reference to the handle's object database, released on drop; the
    /// database owns `backend` and frees it with itself.
    odb: *mut raw::git_odb,
    backend: *mut raw::git_odb_backend,
    _repo: PhantomData<&'r Repository>,
}

impl<'r> Store<'r> {
    /// A new store, attached to the object database of the repository
    /// handle `anchor` was read from (git2 hands out no raw handle of a
    /// repository; a commit's is public, and its owner is the repository).
    pub(super) fn attach(anchor: &git2::Commit<'r>) -> Result<Self> {
        let failed = |what: &str| {
            let detail = git2::Error::last_error(-1).message().to_owned();
            git("attaching the window's in-memory object store")(git2::Error::from_str(&format!("{what}: {detail}")))
        };
        // SAFETY: `anchor.raw()` is a live commit for this call; the
        // repository handle it was read from lives for 'r, which outlives
        // the store. `git_repository_odb` takes a reference the
        // store releases on drop. A backend added to a database belongs to
        // it (freed with it), so the pointer stays valid while `odb` does.
        unsafe {
            let owner = git_commit_owner(anchor.raw());
            if owner.is_null() {
                return Err(failed("the commit has no repository"));
            }
            let mut odb = ptr::null_mut();
            if raw::git_repository_odb(&mut odb, owner) < 0 {
                return Err(failed("opening the object database"));
            }
            let mut backend = ptr::null_mut();
            if raw::git_mempack_new(&mut backend) < 0 {
                raw::git_odb_free(odb);
                return Err(failed("creating the in-memory store"));
            }
            if raw::git_odb_add_backend(odb, backend, PRIORITY) < 0 {
                // Not added: still ours to free.
                if let Some(free) = (*backend).free {
                    free(backend);
                }
                raw::git_odb_free(odb);
                return Err(failed("adding the in-memory store"));
            }
            Ok(Store { odb, backend, _repo: PhantomData })
        }
    }

    /// Writes an object (a tree or a commit) into the store, without
    /// looking it up anywhere first, and returns its id.
    pub(super) fn write(&self, kind: ObjectType, data: &[u8]) -> Result<Oid> {
        let id = Oid::hash_object(kind, data).map_err(git("hashing an object of the window"))?;
        let kind = match kind {
            ObjectType::Tree => raw::GIT_OBJECT_TREE,
            ObjectType::Commit => raw::GIT_OBJECT_COMMIT,
            ObjectType::Blob => raw::GIT_OBJECT_BLOB,
            other => {
                return Err(Error::Git {
                    context: "writing into the window's in-memory object store".into(),
                    source: git2::Error::from_str(&format!("a {other} is never written there")),
                });
            }
        };
        let mut oid = raw::git_oid { id: [0; raw::GIT_OID_MAX_SIZE] };
        oid.id[..20].copy_from_slice(id.as_bytes());
        // SAFETY: `backend` is the mempack attached in `attach`, alive while
        // `odb` is; mempack's `write` copies `data` and keeps no pointer to
        // it or to `oid`.
        let status = unsafe {
            match (*self.backend).write {
                Some(write) => write(self.backend, &oid, data.as_ptr().cast(), data.len(), kind),
                None => -1,
            }
        };
        if status < 0 {
            return Err(git(format!("writing {id} into the window's in-memory object store"))(
                git2::Error::last_error(status),
            ));
        }
        Ok(id)
    }
}

impl Drop for Store<'_> {
    fn drop(&mut self) {
        // SAFETY: the reference `attach` took; the database (and the store
        // in it) lives on while the repository handle holds it.
        unsafe { raw::git_odb_free(self.odb) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_store_holds_is_read_back_through_the_repository_and_gone_with_the_handle() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let sig = git2::Signature::now("a", "a@example.com").unwrap();
        let empty = repo.treebuilder(None).unwrap().write().unwrap();
        let first = repo.commit(None, &sig, &sig, "first", &repo.find_tree(empty).unwrap(), &[]).unwrap();
        let anchor = repo.find_commit(first).unwrap();
        let store = Store::attach(&anchor).unwrap();

        let mut tree = Vec::new();
        tree.extend_from_slice(b"100644 a.yaml\0");
        tree.extend_from_slice(Oid::hash_object(ObjectType::Blob, b"a: 1\n").unwrap().as_bytes());
        let id = store.write(ObjectType::Tree, &tree).unwrap();
        assert_eq!(id, Oid::hash_object(ObjectType::Tree, &tree).unwrap());
        let read = repo.find_tree(id).expect("the tree is read through the repository's object database");
        assert_eq!(read.get(0).unwrap().name(), Some("a.yaml"));
        assert!(store.write(ObjectType::Tag, b"x").is_err(), "only trees, commits and blobs");
        drop(store);
        drop(read);
        drop(anchor);
        drop(repo);

        // Never on disk: a new handle does not find it.
        let again = Repository::open_bare(dir.path()).unwrap();
        assert!(again.find_tree(id).is_err(), "the store's objects live in memory only");
    }
}
