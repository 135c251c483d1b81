//! Who a commit is authored by, spelled as gitops-reverser spells it
//! (`internal/git/commit.go:217-271`, `types.go:97-101` at f0f7b42), so the
//! `git log --author=…` queries of a team moving over keep matching:
//!
//! - the resolved actor's display name when it is usable, else the username;
//! - the actor's email when it is a valid address, else
//!   `<cleaned-username>@noreply.cluster.local` ([`noreply_email`]);
//! - no actor: exactly `unknown (attribution unresolved)
//!   <attribution-unresolved@gitops-reverser.invalid>`.
//!
//! Beyond the reference, the result is made safe for a git signature: angle
//! brackets and control characters never reach it, nothing git would trim
//! leads or ends it, and it is at most [`MAX_IDENT_CHARS`] long.

use super::{Identity, ResolvedAuthor};

/// The author of a commit whose change has no usable fact: exactly this, per
/// the spec ("the commit ships with the explicit unresolved author
/// (unknown (attribution unresolved)), never with a guess"), and as the
/// reference's display name (types.go:99).
pub const UNRESOLVED_AUTHOR_NAME: &str = "unknown (attribution unresolved)";

/// The unresolved author's email (types.go:101): `.invalid` is reserved
/// (RFC 2606), so it never routes mail nor matches a real account.
pub const UNRESOLVED_AUTHOR_EMAIL: &str = "attribution-unresolved@gitops-reverser.invalid";

/// The domain of the address made for a username that is not an email and
/// came with no usable email claim (commit.go:239, 270).
pub const NOREPLY_DOMAIN: &str = "noreply.cluster.local";

/// The local part the reference gives a username nothing of survives
/// cleaning (commit.go:266-268).
pub const UNKNOWN_USER: &str = "unknown-user";

/// The longest name, email or trailer value written, in characters: a 10 KB
/// username still makes a commit, with a readable header.
pub const MAX_IDENT_CHARS: usize = 256;

/// The author identity of a commit (commit.go:222-240). The committer is
/// never substituted: no actor, or an empty username, is the unresolved
/// author.
pub fn author_identity(author: Option<&ResolvedAuthor>) -> Identity {
    let unresolved = || Identity::new(UNRESOLVED_AUTHOR_NAME, UNRESOLVED_AUTHOR_EMAIL);
    let Some(author) = author else {
        return unresolved();
    };
    if author.username.trim().is_empty() {
        // A fact always names an actor; an empty one is not a resolution.
        return unresolved();
    }
    let email = safe_email(&author_email(author));
    let name = match clean_ident(&author_name(author)) {
        // Nothing of the username survives as a git name (`<>`, control
        // characters only): the address's local part stands in, and the
        // Reverser-Actor trailer keeps the username itself.
        name if name.is_empty() => email.rsplit_once('@').map_or(UNKNOWN_USER, |(local, _)| local).to_owned(),
        name => name,
    };
    Identity { name, email }
}

/// Who authors the commits of a sidecar: the actors the audit facts name,
/// or (gitops-reverser's configured-author mode, `--author-attribution=false`,
/// its chart's default `attribution.enabled=false`: cmd/main.go:228-237,517-520
/// at f0f7b42) the configured committer, for a cluster with no audit webhook.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AuthorMode {
    #[default]
    Attributed,
    Configured,
}

/// The author of one commit under `mode`: in configured-author mode the
/// committer, whatever the change carries; otherwise [`author_identity`].
pub fn commit_author(mode: AuthorMode, author: Option<&ResolvedAuthor>, committer: &Identity) -> Identity {
    match mode {
        AuthorMode::Configured => committer.clone(),
        AuthorMode::Attributed => author_identity(author),
    }
}

/// The display name when it is non-empty and safe in a signature (no angle
/// brackets, no control characters), else the username (commit.go:225-230).
fn author_name(author: &ResolvedAuthor) -> String {
    let display = author.display_name.trim();
    if !display.is_empty() && !display.chars().any(|c| c == '<' || c == '>' || c.is_control()) {
        display.to_owned()
    } else {
        author.username.clone()
    }
}

/// The email claim when it is a valid address, else [`noreply_email`] of
/// the username (commit.go:235-240).
fn author_email(author: &ResolvedAuthor) -> String {
    let email = author.email.trim();
    if is_valid_email(email) { email.to_owned() } else { noreply_email(&author.username) }
}

/// The reference's `ConstructSafeEmail(username, "cluster.local")`
/// (commit.go:256-271): a username that is already an email is used as is;
/// otherwise it is lowercased, everything outside `[a-z0-9.-]` is removed,
/// and `@noreply.cluster.local` appended (`unknown-user` when nothing is
/// left). `system:serviceaccount:ns:sa` becomes
/// `systemserviceaccountnssa@noreply.cluster.local`.
pub fn noreply_email(username: &str) -> String {
    if is_valid_email(username) {
        return username.to_owned();
    }
    let clean: String = username
        .to_lowercase()
        .chars()
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '.' || *c == '-')
        .collect();
    let local = if clean.is_empty() { UNKNOWN_USER } else { clean.as_str() };
    format!("{local}@{NOREPLY_DOMAIN}")
}

/// The reference's `validEmailRegex`,
/// `^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$` (commit.go:220), by
/// hand: one `@`, and the domain's last label at least two ASCII letters.
pub fn is_valid_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    let Some((host, tld)) = domain.rsplit_once('.') else {
        return false;
    };
    !local.is_empty()
        && local.chars().all(|c| c.is_ascii_alphanumeric() || "._%+-".contains(c))
        && !host.is_empty()
        && host.chars().all(|c| c.is_ascii_alphanumeric() || ".-".contains(c))
        && tld.len() >= 2
        && tld.chars().all(|c| c.is_ascii_alphabetic())
}

/// An address git keeps as given: a local part git would trim at its start
/// (`.`, from a username like `.alice`) loses it, and one too long is cut so
/// the whole stays within [`MAX_IDENT_CHARS`]. Valid addresses are all this
/// function ever sees, so nothing else can be wrong with them.
fn safe_email(email: &str) -> String {
    let Some((local, domain)) = email.rsplit_once('@') else {
        return email.to_owned();
    };
    let budget = MAX_IDENT_CHARS.saturating_sub(domain.chars().count() + 1);
    let local: String = local.trim_matches(is_crud).chars().take(budget).collect();
    let local = local.trim_end_matches(is_crud);
    format!("{}@{domain}", if local.is_empty() { UNKNOWN_USER } else { local })
}

/// `s` cut to [`MAX_IDENT_CHARS`], marked with `…` when cut.
pub(super) fn truncated(s: &str) -> String {
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

/// A name git accepts in a signature exactly as given: no angle brackets
/// (they delimit the email), no control characters, nothing git would trim
/// at either end, at most [`MAX_IDENT_CHARS`].
fn clean_ident(s: &str) -> String {
    let kept: String = s.chars().filter(|c| !matches!(c, '<' | '>') && !c.is_control()).collect();
    truncated(kept.trim_matches(is_crud)).trim_end_matches(is_crud).to_owned()
}

#[cfg(test)]
mod tests;
