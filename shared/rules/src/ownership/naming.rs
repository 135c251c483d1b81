//! Naming: the deterministic names of the tatara API. `IntakeTaskName` (the
//! Task a natural-key mint creates: sweep mint, takeover mint), the mirror CR
//! names `iss-<repositoryRef>-<number>` / `mr-<repositoryRef>-<number>`, and the
//! natural key `<repositoryRef>#<number>` that artifacts are looked up by.

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

/// Natural key `<repositoryRef>#<number>`: the `issueKey` / `mrKey` index.
/// "look artifacts up by that key, never by a hashed name or a label selector".
pub fn natural_key(repository_ref: &str, number: i64) -> String {
    format!("{repository_ref}#{number}")
}

/// Mirror name of an Issue CR: `iss-<repositoryRef>-<number>`.
pub fn issue_cr_name(repository_ref: &str, number: i64) -> String {
    format!("iss-{repository_ref}-{number}")
}

/// Mirror name of a MergeRequest CR: `mr-<repositoryRef>-<number>`.
pub fn merge_request_cr_name(repository_ref: &str, number: i64) -> String {
    format!("mr-{repository_ref}-{number}")
}

/// "sanitize lowercases, keeps `[a-z0-9-]`, collapses any other run to one
/// `-`, trims `-`, and caps length".
pub fn sanitize(input: &str, cap: usize) -> String {
    let mut out = String::with_capacity(input.len());
    let mut in_other_run = false;
    for c in input.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' {
            out.push(c);
            in_other_run = false;
        } else if !in_other_run {
            out.push('-');
            in_other_run = true;
        }
    }
    let trimmed = out.trim_matches('-');
    // Every kept char is ASCII, so byte length is char length.
    trimmed[..trimmed.len().min(cap)].to_string()
}

/// `IntakeTaskName(project, kind, repoRef, number)` =
/// trim-dashes( `"mt-"` + (first char of sanitized kind + `"-"`, when kind is
/// not empty) + sanitized(repoRef, budget) + `"-" + number` + `"-"` + first 16
/// hex of sha256(`project|kind|repoRef|number`) ), with
/// budget = 49 - len(head) - len(`-number`) - 17.
pub fn intake_task_name(project: &str, kind: &str, repo_ref: &str, number: i64) -> String {
    let mut head = String::from("mt-");
    if let Some(first) = sanitize(kind, usize::MAX).chars().next() {
        head.push(first);
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
