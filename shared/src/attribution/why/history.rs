//! The Git mirror's history of one object's file: the commits that touched
//! it, newest first, with their authors and the `Reverser-*` trailers the
//! writer puts on them (`commit::plan::commit_message`).

use std::path::Path;

use git2::{Oid, Repository, Sort};
use serde::Serialize;

use crate::attribution::commit::UNRESOLVED_AUTHOR_NAME;
use crate::{Error, Result};

/// What a commit did to the object's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileChange {
    Create,
    Update,
    Delete,
}

impl FileChange {
    pub fn label(self) -> &'static str {
        match self {
            FileChange::Create => "create",
            FileChange::Update => "update",
            FileChange::Delete => "delete",
        }
    }
}

/// One commit that touched the object's file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    pub commit: String,
    pub change: FileChange,
    pub path: String,
    pub author_name: String,
    pub author_email: String,
    /// The author date, RFC 3339 UTC.
    pub date: String,
    pub subject: String,
    /// `true` when the writer committed it as `unknown (attribution unresolved)`.
    pub unresolved: bool,
    /// The trailers in the message's last paragraph, in order (`Reverser-Tier`,
    /// `Reverser-Audit-ID`, `Reverser-Actor`, ...).
    pub trailers: Vec<(String, String)>,
}

impl HistoryEntry {
    /// The first value of trailer `key`.
    pub fn trailer(&self, key: &str) -> Option<&str> {
        self.trailers.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.as_str())
    }
}

/// The trailers of a commit message: `Key: value` lines of its last
/// paragraph, when every line of it is one.
pub fn trailers(message: &str) -> Vec<(String, String)> {
    let last = message.trim_end().rsplit("\n\n").next().unwrap_or_default();
    let parsed: Vec<(String, String)> = last
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(": ")?;
            let key_ok = !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            key_ok.then(|| (k.to_owned(), v.trim().to_owned()))
        })
        .collect();
    if parsed.len() == last.lines().count() { parsed } else { Vec::new() }
}

/// Up to `limit` commits reachable from `branch` (else HEAD; else, in a
/// bare clone whose HEAD names an unborn branch, `main` or its only branch)
/// that touched any of `paths` (the object's file under each version it may
/// have been mirrored at), newest first. An empty repository has no history.
pub fn read_history(repo: &Path, branch: Option<&str>, paths: &[String], limit: usize) -> Result<Vec<HistoryEntry>> {
    let git = |context: String| move |source| Error::Git { context, source };
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

/// Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, no time crate).
pub fn rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}
