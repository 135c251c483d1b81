//! `kubectl reverser why`'s one piece of I/O the rules do not cover: reading
//! the Git mirror's history of an object's file, newest first.

use std::path::Path;

use git2::{Oid, Repository, Sort};
use rules::attribution::commit::UNRESOLVED_AUTHOR_NAME;
use rules::attribution::why::{FileChange, HistoryEntry, rfc3339, trailers};

use super::commit::GitError;

/// Up to `limit` commits reachable from `branch` (else HEAD; else, in a
/// bare clone whose HEAD names an unborn branch, `main` or its only branch)
/// that touched any of `paths` (the object's file under each version it may
/// have been mirrored at), newest first. An empty repository has no history.
pub fn read_history(
    repo: &Path,
    branch: Option<&str>,
    paths: &[String],
    limit: usize,
) -> Result<Vec<HistoryEntry>, GitError> {
    let git = |context: String| move |source| GitError::Git { context, source };
    let r = Repository::open(repo)
        .map_err(git(format!("cannot open the Git mirror {}; pass the mirror's clone with --repo", repo.display())))?;
    let Some(head) = tip(&r, branch).map_err(git(format!("cannot read the branch of {}", repo.display())))? else {
        return Ok(Vec::new());
    };
    let mut walk = r.revwalk().map_err(git("cannot walk history".into()))?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::TIME).map_err(git("cannot sort history".into()))?;
    walk.push(head.id()).map_err(git("cannot walk from HEAD".into()))?;
    let mut out = Vec::new();
    for oid in walk {
        if out.len() >= limit {
            break;
        }
        let oid = oid.map_err(git("cannot walk history".into()))?;
        let commit = r.find_commit(oid).map_err(git(format!("cannot read commit {oid}")))?;
        let tree = commit.tree().map_err(git(format!("cannot read the tree of {oid}")))?;
        let parent_tree = match commit.parent(0) {
            Ok(p) => Some(p.tree().map_err(git(format!("cannot read the parent tree of {oid}")))?),
            Err(_) => None,
        };
        for path in paths {
            let now = blob_at(&tree, path);
            let before = parent_tree.as_ref().and_then(|t| blob_at(t, path));
            let change = match (before, now) {
                (None, Some(_)) => FileChange::Create,
                (Some(a), Some(b)) if a != b => FileChange::Update,
                (Some(_), None) => FileChange::Delete,
                _ => continue,
            };
            let author = commit.author();
            let name = author.name().unwrap_or_default().to_owned();
            let message = commit.message().unwrap_or_default();
            out.push(HistoryEntry {
                commit: oid.to_string(),
                change,
                path: path.clone(),
                unresolved: name == UNRESOLVED_AUTHOR_NAME,
                author_name: name,
                author_email: author.email().unwrap_or_default().to_owned(),
                date: rfc3339(author.when().seconds()),
                subject: commit.summary().unwrap_or_default().to_owned(),
                trailers: trailers(message),
            });
            break;
        }
    }
    Ok(out)
}

/// The commit history is read from; `None` when nothing is committed.
fn tip<'r>(r: &'r Repository, branch: Option<&str>) -> Result<Option<git2::Commit<'r>>, git2::Error> {
    if let Some(b) = branch {
        for name in [format!("refs/heads/{b}"), format!("refs/remotes/origin/{b}")] {
            if let Ok(reference) = r.find_reference(&name) {
                return reference.peel_to_commit().map(Some);
            }
        }
        return Err(git2::Error::from_str(&format!("no branch {b:?}; pass an existing one with --branch")));
    }
    if let Ok(head) = r.head() {
        return head.peel_to_commit().map(Some);
    }
    // HEAD names an unborn branch (a bare clone the writer made keeps
    // git's default HEAD while committing to its configured branch).
    if let Ok(reference) = r.find_reference("refs/heads/main") {
        return reference.peel_to_commit().map(Some);
    }
    let mut branches = r.branches(Some(git2::BranchType::Local))?;
    match (branches.next(), branches.next()) {
        (Some(only), None) => only?.0.get().peel_to_commit().map(Some),
        (None, _) => Ok(None),
        (Some(_), Some(_)) => {
            Err(git2::Error::from_str("HEAD is unborn and there are several branches; pass --branch"))
        }
    }
}

fn blob_at(tree: &git2::Tree<'_>, path: &str) -> Option<Oid> {
    tree.get_path(Path::new(path)).ok().map(|e| e.id())
}

#[cfg(all(test, feature = "grpc"))]
mod tests;
