//! The pure decisions of Git authoring: grouping a commit window into
//! commits, and each one's message and trailers (its author is
//! [`super::identity`]).

use std::collections::HashMap;

// The writer plans and authors together; it reaches both through here.
use super::identity::truncated;
pub use super::identity::{UNRESOLVED_AUTHOR_NAME, author_identity};
use super::{Change, ResolvedAuthor};
use crate::attribution::render::ObjectKey;

/// One planned commit: one author's changes, as indices into the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitGroup {
    pub author: Option<ResolvedAuthor>,
    /// Indices into the window's changes, in event order.
    pub changes: Vec<usize>,
}

/// Groups the changes of one commit window (given in event order) into one
/// commit per author ("Changes inside the commit window are grouped into one
/// commit per author, in event order"). Commits are ordered by each author's
/// first change.
///
/// One exception keeps history true: a change is never moved ahead of an
/// earlier change to the same object by another author (DESIGN: "only the
/// ORDER of Git changes per object is preserved"). When alice edits X, bob
/// edits X, and alice edits X again, alice's second edit opens a second alice
/// commit after bob's, so X ends as alice last left it and bob's commit still
/// shows bob's edit.
pub fn plan_commits(changes: &[Change]) -> Vec<CommitGroup> {
    let mut groups: Vec<CommitGroup> = Vec::new();
    // The author's group that can still take changes.
    let mut open: HashMap<Option<&ResolvedAuthor>, usize> = HashMap::new();
    // The last group that touched each object.
    let mut last_touch: HashMap<&ObjectKey, usize> = HashMap::new();
    for (i, change) in changes.iter().enumerate() {
        let author = change.author.as_ref();
        let fits = |g: usize| last_touch.get(&change.object).is_none_or(|&t| t <= g);
        let target = match open.get(&author) {
            Some(&g) if fits(g) => g,
            _ => {
                groups.push(CommitGroup { author: change.author.clone(), changes: Vec::new() });
                let g = groups.len() - 1;
                open.insert(author, g);
                g
            }
        };
        groups[target].changes.push(i);
        last_touch.insert(&change.object, target);
    }
    groups
}

/// One commit per change, in event order: a GitProvider's `commitWindow:
/// 0s` ("one event per commit").
pub fn plan_each(changes: &[Change]) -> Vec<CommitGroup> {
    changes.iter().enumerate().map(|(i, c)| CommitGroup { author: c.author.clone(), changes: vec![i] }).collect()
}

/// What a change did to the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    Create,
    Update,
    Delete,
}

impl Effect {
    pub fn label(self) -> &'static str {
        match self {
            Effect::Create => "create",
            Effect::Update => "update",
            Effect::Delete => "delete",
        }
    }
}

/// One change that altered the tree, as the message describes it.
#[derive(Debug, Clone, Copy)]
pub struct Applied<'a> {
    pub effect: Effect,
    pub path: &'a str,
    pub change: &'a Change,
}

/// The commit message: a subject, one line per change, and the trailers
/// (`Reverser-Actor` once when resolved, then per change `Reverser-Tier` and
/// `Reverser-Audit-ID` when it has one) "so a commit can be traced back".
/// A GitProvider's templates replace the subject
/// (`rules::mirror::message`); the rest is [`commit_details`].
pub fn commit_message(author: Option<&ResolvedAuthor>, applied: &[Applied<'_>]) -> String {
    let subject = match applied {
        [one] => format!("{} {}", one.effect.label(), one.path),
        many => {
            let count = |e: Effect| many.iter().filter(|a| a.effect == e).count();
            let parts: Vec<String> = [Effect::Create, Effect::Update, Effect::Delete]
                .into_iter()
                .filter(|e| count(*e) > 0)
                .map(|e| format!("{} {}", count(e), e.label()))
                .collect();
            format!("{} changes: {}", many.len(), parts.join(", "))
        }
    };
    format!("{subject}\n\n{}", commit_details(author, applied))
}

/// What every commit message carries below its subject: one line per
/// change, then the trailers.
pub fn commit_details(author: Option<&ResolvedAuthor>, applied: &[Applied<'_>]) -> String {
    let mut msg = String::new();
    for a in applied {
        msg.push_str(&format!("- {} {} (tier {}", a.effect.label(), a.path, a.change.tier));
        if let Some(id) = audit_id(a.change) {
            msg.push_str(&format!(", audit {id}"));
        }
        msg.push_str(")\n");
    }
    msg.push('\n');
    if let Some(author) = author {
        msg.push_str(&format!("Reverser-Actor: {}\n", one_line(&author.username)));
    }
    for a in applied {
        msg.push_str(&format!("Reverser-Tier: {}\n", a.change.tier));
        if let Some(id) = audit_id(a.change) {
            msg.push_str(&format!("Reverser-Audit-ID: {id}\n"));
        }
    }
    msg
}

fn audit_id(change: &Change) -> Option<String> {
    change.audit_id.as_deref().map(one_line).filter(|s| !s.is_empty())
}

/// A value that must stay on its one trailer line.
fn one_line(s: &str) -> String {
    let line: String = s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    truncated(line.trim())
}

#[cfg(test)]
mod tests;
