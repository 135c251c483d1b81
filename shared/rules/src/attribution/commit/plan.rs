//! The pure decisions of Git authoring: grouping a commit window into
//! commits, the author of each, and its message and trailers.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::{Change, Identity, ResolvedAuthor};
use crate::attribution::render::ObjectKey;

/// The author of a commit whose change has no usable fact: exactly this, per
/// the spec ("the commit ships with the explicit unresolved author
/// (unknown (attribution unresolved)), never with a guess").
pub const UNRESOLVED_AUTHOR_NAME: &str = "unknown (attribution unresolved)";

/// The unresolved author's email. Its own domain, so no username's no-reply
/// address can ever equal it.
pub const UNRESOLVED_AUTHOR_EMAIL: &str = "unknown@attribution-unresolved.reverser.invalid";

/// The domain of the deterministic no-reply email given to a username the
/// fact supplied no email for. `.invalid` is reserved (RFC 2606): it can never
/// route mail or match a real account on a forge.
pub const NOREPLY_DOMAIN: &str = "users.noreply.reverser.invalid";

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

/// The author identity of a commit: the resolved actor's display name and
/// email when the fact has them, otherwise the username and
/// [`noreply_email`]; unresolved is exactly [`UNRESOLVED_AUTHOR_NAME`]. The
/// committer is never substituted.
pub fn author_identity(author: Option<&ResolvedAuthor>) -> Identity {
    let unresolved = || Identity::new(UNRESOLVED_AUTHOR_NAME, UNRESOLVED_AUTHOR_EMAIL);
    let Some(author) = author else {
        return unresolved();
    };
    if author.username.trim().is_empty() {
        // A fact always names an actor; an empty one is not a resolution.
        return unresolved();
    }
    let noreply = noreply_email(&author.username);
    let username = clean_ident(&author.username);
    let display = clean_ident(&author.display_name);
    let email = clean_ident(&author.email);
    let name = match (display.is_empty(), username.is_empty()) {
        (false, _) => display,
        (true, false) => username,
        // Nothing of the username survives as a git name (`<>`, control
        // characters only): the no-reply address's local part still names
        // this actor, distinctly, and the Reverser-Actor trailer keeps the rest.
        (true, true) => noreply.split('@').next().unwrap_or("user").to_owned(),
    };
    Identity { name, email: if email.is_empty() || !email.contains('@') { noreply } else { email } }
}

/// The deterministic no-reply email for a username:
/// `<sanitized-username>@users.noreply.reverser.invalid`.
///
/// The local part is the username lowercased with every character outside
/// `[a-z0-9._-]` turned into `-` (runs collapsed, ends trimmed), at most 48
/// characters. When that changed the username at all, `-` and the first 8
/// hex digits of the SHA-256 of the original username are appended, so two
/// usernames that sanitize alike (`system:admin`, `system-admin`) still get
/// different addresses. `alice` stays `alice@users.noreply.reverser.invalid`.
pub fn noreply_email(username: &str) -> String {
    let mut local = String::with_capacity(username.len());
    for c in username.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' {
            local.push(c);
        } else if !local.ends_with('-') {
            local.push('-');
        }
    }
    let mut local: String = local.trim_matches(|c| c == '-' || c == '.').chars().take(48).collect();
    while local.ends_with(['-', '.']) {
        local.pop();
    }
    if local.is_empty() {
        local.push_str("user");
    }
    if local != username {
        let digest = hex::encode(Sha256::digest(username.as_bytes()));
        local.push('-');
        local.push_str(&digest[..8]);
    }
    format!("{local}@{NOREPLY_DOMAIN}")
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

/// The longest name, email or trailer value written, in characters: a 10 KB
/// username still makes a commit, with a readable header.
pub const MAX_IDENT_CHARS: usize = 256;

/// A value that must stay on its one trailer line.
fn one_line(s: &str) -> String {
    let line: String = s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    truncated(line.trim())
}

/// `s` cut to [`MAX_IDENT_CHARS`], marked with `…` when cut.
fn truncated(s: &str) -> String {
    match s.char_indices().nth(MAX_IDENT_CHARS) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

/// What git trims from both ends of a signature's name and email (libgit2's
/// `is_crud`): an identity made only of these would be empty to git.
fn is_crud(c: char) -> bool {
    c <= ' ' || matches!(c, '.' | ',' | ':' | ';' | '<' | '>' | '"' | '\\' | '\'')
}

/// A name or email git accepts in a signature exactly as given: no angle
/// brackets (they delimit the email), no control characters, nothing git
/// would trim at either end, at most [`MAX_IDENT_CHARS`].
fn clean_ident(s: &str) -> String {
    let kept: String = s.chars().filter(|c| !matches!(c, '<' | '>') && !c.is_control()).collect();
    truncated(kept.trim_matches(is_crud)).trim_end_matches(is_crud).to_owned()
}

#[cfg(test)]
mod tests;
