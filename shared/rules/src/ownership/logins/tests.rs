//! Ported from the operator's `api/v1alpha1/logins_test.go` (d22349a), one
//! test per Go test, plus the bot stripping `withoutBotLogin` does.

use super::*;

fn proj(bot: &str, maintainers: Option<&[&str]>, reporters: Option<&[&str]>) -> Project {
    let mut p = Project::default();
    p.spec.scm.bot_login = bot.into();
    p.spec.scm.maintainer_logins = maintainers.map(|l| l.iter().map(|s| s.to_string()).collect());
    p.spec.scm.reporter_logins = reporters.map(|l| l.iter().map(|s| s.to_string()).collect());
    p
}

fn repo(reporters: Option<&[&str]>, maintainers: Option<&[&str]>) -> Repository {
    let mut r = Repository::default();
    r.spec.reporter_logins = reporters.map(|l| l.iter().map(|s| s.to_string()).collect());
    r.spec.maintainer_logins = maintainers.map(|l| l.iter().map(|s| s.to_string()).collect());
    r
}

fn set(l: &[&str]) -> BTreeSet<String> {
    l.iter().map(|s| s.to_string()).collect()
}

#[test]
fn effective_reporter_logins_repo_override() {
    // TestEffectiveReporterLogins_RepoOverride
    let p = proj("bot", None, Some(&["alice"]));
    assert_eq!(effective_reporters(&p, Some(&Repository::default())), set(&["alice"]));
    assert_eq!(effective_reporters(&p, Some(&repo(Some(&["bob"]), None))), set(&["bob"]));
    assert_eq!(effective_reporters(&p, Some(&repo(Some(&[]), None))), set(&[]));
    assert_eq!(effective_reporters(&p, None), set(&["alice"]));
}

#[test]
fn effective_maintainer_logins_repo_override() {
    // TestEffectiveMaintainerLogins_RepoOverride
    let p = proj("bot", Some(&["alice"]), None);
    assert_eq!(effective_maintainers(&p, Some(&repo(None, Some(&["carol"])))), set(&["carol"]));
    assert_eq!(effective_maintainers(&p, Some(&Repository::default())), set(&["alice"]));
}

#[test]
fn effective_lists_strip_bot() {
    // TestEffectiveListsStripBot
    let p = proj("bot", Some(&["bot", "szymon"]), Some(&["bot", "carol"]));
    assert_eq!(effective_maintainers(&p, None), set(&["szymon"]));
    assert_eq!(effective_reporters(&p, None), set(&["carol"]));
    let r = repo(Some(&["bot", "carol"]), Some(&["bot", "dave"]));
    assert_eq!(effective_maintainers(&p, Some(&r)), set(&["dave"]));
    assert_eq!(effective_reporters(&p, Some(&r)), set(&["carol"]));
    // Trust semantics unchanged: the bot is still a trusted reporter and
    // author, never a maintainer.
    assert!(is_allowed_reporter(&p, None, "bot"));
    assert!(is_trusted_author(&p, None, "bot"));
    assert!(!is_maintainer(&p, None, "bot"));
}

#[test]
fn is_trusted_author_table() {
    // TestIsTrustedAuthor
    let p = proj("szymonrychu-bot", Some(&["szymonrychu"]), Some(&["szymonrychu"]));
    let open = proj("szymonrychu-bot", None, None);
    for (name, proj, login, want) in [
        ("bot", &p, "szymonrychu-bot", true),
        ("maintainer", &p, "szymonrychu", true),
        ("third party", &p, "randouser", false),
        ("empty login", &p, "", false),
        ("empty lists do not open", &open, "randouser", false),
        ("bot with empty lists", &open, "szymonrychu-bot", true),
    ] {
        assert_eq!(is_trusted_author(proj, None, login), want, "{name}");
    }
}

#[test]
fn is_allowed_reporter_table() {
    // TestIsAllowedReporter
    // (name, maintainers, reporters, repository override, login, allowed)
    type Case<'a> = (&'a str, Option<&'a [&'a str]>, Option<&'a [&'a str]>, Option<Repository>, &'a str, bool);
    let cases: &[Case<'_>] = &[
        ("empty list is open for anyone", None, None, None, "stranger", true),
        ("empty list is open for empty login", None, None, None, "", true),
        ("configured: listed reporter allowed", None, Some(&["alice"]), None, "alice", true),
        ("configured: stranger denied", None, Some(&["alice"]), None, "mallory", false),
        ("configured: bot always allowed", None, Some(&["alice"]), None, "bot", true),
        ("configured: maintainer always allowed", Some(&["carol"]), Some(&["alice"]), None, "carol", true),
        ("configured: empty login fails closed", None, Some(&["alice"]), None, "", false),
        (
            "repo override opens intake for this repo",
            None,
            Some(&["alice"]),
            Some(repo(Some(&[]), None)),
            "mallory",
            true,
        ),
        ("repo override tightens intake", None, Some(&["alice"]), Some(repo(Some(&["bob"]), None)), "alice", false),
    ];
    for (name, maintain, reporters, r, login, want) in cases {
        let p = proj("bot", *maintain, *reporters);
        assert_eq!(is_allowed_reporter(&p, r.as_ref(), login), *want, "{name}");
    }
}

#[test]
fn is_maintainer_table() {
    // TestIsMaintainer
    let p = proj("bot", Some(&["szymon", "alex"]), None);
    for (name, login, want) in [
        ("maintainer", "szymon", true),
        ("second maintainer", "alex", true),
        ("bot excluded even if acting", "bot", false),
        ("non-maintainer human", "rando", false),
        ("empty login", "", false),
    ] {
        assert_eq!(is_maintainer(&p, None, login), want, "{name}");
    }
    assert!(!is_maintainer(&proj("bot", None, None), None, "szymon"), "closed by default");
    assert!(!is_maintainer(&proj("bot", Some(&["bot"]), None), None, "bot"), "the bot is structurally excluded");
    let r = repo(None, Some(&["carol"]));
    assert!(is_maintainer(&p, Some(&r), "carol"), "repo-level override honoured");
    assert!(!is_maintainer(&p, Some(&r), "szymon"), "the repo list replaces the project's");
}
