//! Logins: who the operator trusts, as `api/v1alpha1/logins.go` (d22349a)
//! decides it. A Repository's list, when set (an explicit `[]` too), replaces
//! the Project's; the bot's own login is stripped from both lists
//! (`withoutBotLogin`, logins.go:110-122), so the bot's token can never pass
//! for a maintainer or a listed reporter.

use std::collections::BTreeSet;

use super::types::{Project, Repository};

/// `withoutBotLogin`: `list` without the project's bot login and without
/// empty entries (an empty login names nobody).
fn without_bot(project: &Project, list: Option<Vec<String>>) -> BTreeSet<String> {
    let bot = project.spec.scm.bot_login.as_str();
    list.unwrap_or_default().into_iter().filter(|l| !l.is_empty() && (bot.is_empty() || l != bot)).collect()
}

/// `EffectiveMaintainerLogins` (logins.go:24-37): closed by default, none is
/// empty.
pub fn effective_maintainers(project: &Project, repo: Option<&Repository>) -> BTreeSet<String> {
    let list =
        repo.and_then(|r| r.spec.maintainer_logins.clone()).or_else(|| project.spec.scm.maintainer_logins.clone());
    without_bot(project, list)
}

/// `EffectiveReporterLogins` (logins.go:11-22).
pub fn effective_reporters(project: &Project, repo: Option<&Repository>) -> BTreeSet<String> {
    let list = repo.and_then(|r| r.spec.reporter_logins.clone()).or_else(|| project.spec.scm.reporter_logins.clone());
    without_bot(project, list)
}

/// `IsMaintainer` (logins.go:83-96): never the bot, never an empty login.
pub fn is_maintainer(project: &Project, repo: Option<&Repository>, login: &str) -> bool {
    !login.is_empty() && login != project.spec.scm.bot_login && effective_maintainers(project, repo).contains(login)
}

/// `IsAllowedReporter` (logins.go:39-59): an empty allowlist keeps the open
/// default; under an active gate an empty login fails closed and the bot, a
/// maintainer or a listed reporter passes.
pub fn is_allowed_reporter(project: &Project, repo: Option<&Repository>, login: &str) -> bool {
    let reporters = effective_reporters(project, repo);
    if reporters.is_empty() {
        return true;
    }
    if login.is_empty() {
        return false;
    }
    login == project.spec.scm.bot_login
        || effective_maintainers(project, repo).contains(login)
        || reporters.contains(login)
}

/// `IsTrustedAuthor` (logins.go:61-81): the bot, a maintainer or a listed
/// reporter.
pub fn is_trusted_author(project: &Project, repo: Option<&Repository>, login: &str) -> bool {
    !login.is_empty()
        && (login == project.spec.scm.bot_login
            || effective_maintainers(project, repo).contains(login)
            || effective_reporters(project, repo).contains(login))
}

#[cfg(test)]
mod tests;
