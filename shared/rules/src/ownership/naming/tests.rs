use super::*;

/// Expected names computed by an independent implementation of the scheme in
/// `facts/tatara-api.md` (a Python transcription of the same words), so a
/// drift in either is caught here.
const TABLE: &[(&str, &str, &str, i64, &str)] = &[
    ("tatara", "", "tatara-operator", 412, "mt-tatara-operator-412-e6d2feeeaa322ca5"),
    ("tatara", "takeover", "tatara-operator", 7, "mt-t-tatara-operator-7-a81e91fba29d9d44"),
    ("tatara", "review", "tatara-operator", 1, "mt-r-tatara-operator-1-8cf09d1cabc917dc"),
    // long: the repository part is cut to the budget so the name is exactly 49.
    (
        "acme",
        "implement",
        "a-very-long-repository-name-that-goes-on-and-on-forever",
        123456,
        "mt-i-a-very-long-reposito-123456-e59d87bb1172b33f",
    ),
    (
        "tatara",
        "takeover",
        "repo-name-exactly-long-enough-to-end-on-a-dash-x-y",
        12,
        "mt-t-repo-name-exactly-long-e-12-988b2afe5748cbef",
    ),
    // unicode: non-ASCII letters are "any other run", collapsed to one dash.
    ("acme", "takeover", "Ünïcødé-Repo_名前", 42, "mt-t-n-c-d--repo-42-f399a5f3e082aafa"),
    ("p", "takeover", "日本語リポジトリ", 5, "mt-t--5-25278591d80e6076"),
    ("proj", "takeover", "emoji-🚀-repo-💥-name", 77, "mt-t-emoji---repo---name-77-14fdecc9c8a712a9"),
    // lowercasing is Unicode lowercasing: the Kelvin sign becomes ASCII k.
    ("tatara", "takeover", "İstanbul-\u{212A}elvin", 8, "mt-t-i-stanbul-kelvin-8-39bd41bbbd56d6ee"),
    // punctuation-heavy
    ("acme", "brainstorm", "..My__Repo!!!--v2..", 9, "mt-b-my-repo---v2-9-dd4a4891244ef4ac"),
    ("acme", "incident", "---", 3, "mt-i--3-d86e51f5958aec8b"),
    ("acme", "Upgrade", "Repo.With.Dots", 2147483647, "mt-u-repo-with-dots-2147483647-c155691f51fdbac8"),
    ("proj", "implement", "UPPER-case-REPO", 0, "mt-i-upper-case-repo-0-dfbedb9cc07ba1ba"),
    ("proj", "", "x", 1, "mt-x-1-3cf8e7f47da5cbfc"),
];

#[test]
fn intake_task_name_matches_the_reference_scheme_table() {
    for (project, kind, repo, number, want) in TABLE {
        let got = intake_task_name(project, kind, repo, *number);
        assert_eq!(&got, want, "IntakeTaskName({project:?}, {kind:?}, {repo:?}, {number})");
    }
}

#[test]
fn names_never_exceed_49_chars_and_stay_dns_safe() {
    // "Names never exceed 49 chars."
    for (project, kind, repo, number, _) in TABLE {
        let got = intake_task_name(project, kind, repo, *number);
        assert!(got.len() <= MAX_TASK_NAME, "{got} is {} chars", got.len());
        assert!(got.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
        assert!(!got.starts_with('-') && !got.ends_with('-'));
    }
    let long = "x".repeat(500);
    assert_eq!(intake_task_name("p", "takeover", &long, 1).len(), MAX_TASK_NAME);
}

#[test]
fn hash_covers_project_and_kind_not_just_the_sanitized_repo() {
    // sha256(`project|kind|repoRef|number`): two repos that sanitize alike
    // still get distinct names.
    assert_ne!(intake_task_name("p", "t", "Repo", 1), intake_task_name("p", "t", "repo", 1));
    assert_ne!(intake_task_name("a", "t", "r", 1), intake_task_name("b", "t", "r", 1));
}

#[test]
fn takeover_name_uses_the_takeover_kind() {
    // "The takeover kind is `takeover`."
    assert_eq!(takeover_task_name("tatara", "tatara-operator", 7), "mt-t-tatara-operator-7-a81e91fba29d9d44");
}

#[test]
fn mirror_names_and_natural_key() {
    // "Issue `iss-<repositoryRef>-<number>`, MergeRequest `mr-<repositoryRef>-<number>`.
    // The natural key is `<repositoryRef>#<number>`"
    assert_eq!(issue_cr_name("tatara-operator", 412), "iss-tatara-operator-412");
    assert_eq!(merge_request_cr_name("tatara-operator", 9), "mr-tatara-operator-9");
    assert_eq!(natural_key("tatara-operator", 412), "tatara-operator#412");
}

#[test]
fn sanitize_rules() {
    // "lowercases, keeps [a-z0-9-], collapses any other run to one -, trims -, and caps length"
    assert_eq!(sanitize("A__B", 10), "a-b");
    assert_eq!(sanitize("--ab--", 10), "ab");
    assert_eq!(sanitize("abcdef", 3), "abc");
    assert_eq!(sanitize("", 3), "");
}
