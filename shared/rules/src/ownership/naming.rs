//! Naming: the deterministic names of the tatara API. `IntakeTaskName` (the
//! Task a natural-key mint creates: sweep mint, takeover mint), the mirror CR
//! names `iss-<repositoryRef>-<number>` / `mr-<repositoryRef>-<number>`, and the
//! natural keys artifacts are looked up by: `<repositoryRef>#<number>` for an
//! Issue, `<repositoryRef>!<number>` for a MergeRequest, as the operator's
//! `IssueKey` / `MRKey` write them (`internal/controller/mirror.go:97-105`).

use sha2::{Digest, Sha256};

/// "Names never exceed 49 chars."
pub const MAX_TASK_NAME: usize = 49;

/// The kind used for the takeover Task's intake name ("The takeover kind is
/// `takeover`").
pub const TAKEOVER_KIND: &str = "takeover";

/// The kind a sweep passes to `IntakeTaskName` when it mints a review Task
/// for a human pull request: the Task's own `spec.kind`, `review`, as the
/// takeover mint passes `takeover`.
pub const REVIEW_KIND: &str = "review";

/// An Issue's natural key `<repositoryRef>#<number>` (the operator's
/// `IssueKey`). "look artifacts up by that key, never by a hashed name or a
/// label selector".
pub fn natural_key(repository_ref: &str, number: i64) -> String {
    format!("{repository_ref}#{number}")
}

/// A MergeRequest's natural key `<repositoryRef>!<number>` (the operator's
/// `MRKey`, the `mrKey` index).
pub fn merge_request_key(repository_ref: &str, number: i64) -> String {
    format!("{repository_ref}!{number}")
}

/// A natural key as typed: `REPO!NUMBER` or `REPO#NUMBER` (either separator,
/// so a key copied from an issue or from older output still works). The
/// number is positive, the repository part not empty.
pub fn parse_key(key: &str) -> Result<(String, i64), String> {
    let (repo, number) = key
        .rsplit_once(['!', '#'])
        .ok_or_else(|| format!("{key:?} is not REPO!NUMBER (e.g. tatara-operator!9; REPO#NUMBER is accepted too)"))?;
    let number: i64 = number
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{key:?}: {number:?} is not a positive number"))?;
    if repo.is_empty() {
        return Err(format!("{key:?}: the repository (a Repository CR's name) is missing before the number"));
    }
    Ok((repo.to_string(), number))
}

/// Mirror name of an Issue CR: `iss-<repositoryRef>-<number>`.
pub fn issue_cr_name(repository_ref: &str, number: i64) -> String {
    format!("iss-{repository_ref}-{number}")
}

/// Mirror name of a MergeRequest CR: `mr-<repositoryRef>-<number>`.
pub fn merge_request_cr_name(repository_ref: &str, number: i64) -> String {
    format!("mr-{repository_ref}-{number}")
}

/// The operator's `sanitizeNamePart` (`api/v1alpha1/task_types.go:384-401` at
/// d22349a): lowercases by the simple case mapping (as Go's `strings.ToLower`),
/// keeps `[a-z0-9]`, turns every other run, `-` included, into one `-` (none
/// before the first kept char), stops once `cap` chars are written, then trims
/// `-`. Capping while building and trimming after is what keeps `a--b` and a
/// cut that lands on a separator from differing from the operator's names.
pub fn sanitize(input: &str, cap: usize) -> String {
    let mut out = String::with_capacity(input.len().min(cap));
    let mut prev_dash = false;
    for c in input.chars().map(simple_lowercase) {
        // Every written char is ASCII, so byte length is char length.
        if out.len() >= cap {
            break;
        }
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
            prev_dash = false;
        } else if !prev_dash && !out.is_empty() {
            out.push('-');
            prev_dash = true;
        }
    }
    out.trim_matches('-').to_string()
}

/// Unicode's simple lowercase mapping, which Go's `unicode.ToLower` applies:
/// Rust's `to_lowercase` is the full mapping, which differs only for U+0130
/// (`İ` becomes `i` plus a combining dot there, plain `i` in Go).
fn simple_lowercase(c: char) -> char {
    if c == '\u{130}' {
        return 'i';
    }
    let mut lower = c.to_lowercase();
    match (lower.next(), lower.next()) {
        (Some(l), None) => l,
        _ => c,
    }
}

/// `IntakeTaskName(project, kind, repoRef, number)` =
/// trim-dashes( `"mt-"` + (first char of sanitized kind + `"-"`, when kind is
/// not empty) + sanitized(repoRef, budget) + `"-" + number` + `"-"` + first 16
/// hex of sha256(`project|kind|repoRef|number`) ), with
/// budget = 49 - len(head) - len(`-number`) - 17.
pub fn intake_task_name(project: &str, kind: &str, repo_ref: &str, number: i64) -> String {
    let mut head = String::from("mt-");
    let initial = sanitize(kind, 1);
    if !initial.is_empty() {
        head.push_str(&initial);
        head.push('-');
    }
    let number_part = format!("-{number}");
    let budget = MAX_TASK_NAME.saturating_sub(head.len()).saturating_sub(number_part.len()).saturating_sub(17);
    let digest = Sha256::digest(format!("{project}|{kind}|{repo_ref}|{number}").as_bytes());
    let hash = hex::encode(digest);
    let name = format!("{head}{}{number_part}-{}", sanitize(repo_ref, budget), &hash[..16]);
    name.trim_matches('-').to_string()
}

/// The one deterministically named takeover Task of a merge request.
pub fn takeover_task_name(project: &str, repo_ref: &str, number: i64) -> String {
    intake_task_name(project, TAKEOVER_KIND, repo_ref, number)
}

/// The one deterministically named review Task of a pull request.
pub fn review_task_name(project: &str, repo_ref: &str, number: i64) -> String {
    intake_task_name(project, REVIEW_KIND, repo_ref, number)
}

#[cfg(test)]
mod tests;
