//! Reconcile (spec/mirror.md, "What the history must show"): after a list
//! (on start, and after every relist on 410 Gone) the tree is brought in
//! line with what the cluster holds, so a restart loses no change and
//! writes none twice. Objects missing from Git or different there are
//! written; documents of objects that no longer exist are removed only when
//! the target's prune mode allows it.
//!
//! Pure: the documents arrive as (name, digest) pairs — the tree's found by
//! identity anywhere under the target's path, so a file another tool wrote,
//! or placed elsewhere, is compared rather than duplicated — and the live
//! objects already rendered and digested by the caller.

use std::collections::{BTreeMap, BTreeSet};

use crate::{Error, Result};

/// One document: its path in the tree and the git blob id of its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doc {
    pub path: String,
    pub blob: String,
}

/// What a reconcile changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Indices into the live documents that are missing from the tree or
    /// differ from it, in input order.
    pub write: Vec<usize>,
    /// Paths of documents whose object the list no longer returned (only
    /// when pruning is allowed), sorted.
    pub remove: Vec<String>,
    /// Documents already identical.
    pub unchanged: usize,
    /// Documents of vanished objects left in place because pruning is off.
    pub kept: usize,
}

/// Compares the live documents with the tree's documents under the
/// reconciled directories.
pub fn plan(live: &[Doc], tree: &[Doc], prune: bool) -> Plan {
    let existing: BTreeMap<&str, &str> = tree.iter().map(|d| (d.path.as_str(), d.blob.as_str())).collect();
    let live_paths: BTreeSet<&str> = live.iter().map(|d| d.path.as_str()).collect();
    let mut p = Plan::default();
    for (i, d) in live.iter().enumerate() {
        match existing.get(d.path.as_str()) {
            Some(blob) if *blob == d.blob => p.unchanged += 1,
            _ => p.write.push(i),
        }
    }
    for path in existing.keys().filter(|path| !live_paths.contains(*path)) {
        if prune {
            p.remove.push((*path).to_owned());
        } else {
            p.kept += 1;
        }
    }
    p
}

/// The target's `spec.path` as a tree prefix: slashes trimmed, `.` and empty
/// meaning the repository root. A `..` or `.git` segment would write outside
/// the target's folder and is refused.
pub fn normalize_prefix(path: &str) -> Result<String> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty() && *s != ".").collect();
    for s in &segments {
        if *s == ".." || s.eq_ignore_ascii_case(".git") || s.chars().any(|c| c.is_control() || c == '\\') {
            return Err(Error::Render {
                object: format!("GitTarget spec.path {path:?}"),
                message: format!("segment {s:?} is not allowed; use a plain relative folder such as clusters/prod"),
            });
        }
    }
    Ok(segments.join("/"))
}

/// `prefix/rest`, or `rest` at the repository root.
pub fn under(prefix: &str, rest: &str) -> String {
    if prefix.is_empty() { rest.to_owned() } else { format!("{prefix}/{rest}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(path: &str, blob: &str) -> Doc {
        Doc { path: path.into(), blob: blob.into() }
    }

    #[test]
    fn missing_and_different_are_written_vanished_removed_only_when_pruning() {
        let live = [doc("a.yaml", "1"), doc("b.yaml", "2"), doc("c.yaml", "3")];
        let tree = [doc("a.yaml", "1"), doc("b.yaml", "old"), doc("gone.yaml", "9")];
        let p = plan(&live, &tree, true);
        assert_eq!(p.write, vec![1, 2]);
        assert_eq!(p.remove, vec!["gone.yaml".to_owned()]);
        assert_eq!((p.unchanged, p.kept), (1, 0));
        let p = plan(&live, &tree, false);
        assert_eq!(p.remove, Vec::<String>::new());
        assert_eq!(p.kept, 1);
        // A second reconcile of the same state writes nothing: no change twice.
        let after: Vec<Doc> = live.to_vec();
        assert_eq!(plan(&live, &after, true), Plan { unchanged: 3, ..Plan::default() });
    }

    #[test]
    fn prefixes_are_plain_relative_folders() {
        assert_eq!(normalize_prefix("/clusters/prod/").unwrap(), "clusters/prod");
        assert_eq!(normalize_prefix(".").unwrap(), "");
        assert_eq!(normalize_prefix("./a//b").unwrap(), "a/b");
        assert!(normalize_prefix("a/../../etc").is_err());
        assert!(normalize_prefix("a/.git/hooks").is_err());
        assert_eq!(under("", "core/v1"), "core/v1");
        assert_eq!(under("p", "core/v1"), "p/core/v1");
    }
}
