use super::*;

/// Expected names as the operator's `IntakeTaskName`
/// (`api/v1alpha1/task_types.go:361-401`, d22349a) computes them: the rows
/// of the parity report's side-by-side (`tatara-operator-parity.md` §4, Go
/// column) and this table's earlier rows recomputed under Go's rules (`-`
/// collapses with every other separator run, the cap applies while
/// building, simple-case lowercasing: `İ` is `i`).
const TABLE: &[(&str, &str, &str, i64, &str)] = &[
    ("tatara", "", "tatara-operator", 412, "mt-tatara-operator-412-e6d2feeeaa322ca5"),
    ("tatara", "takeover", "tatara-operator", 7, "mt-t-tatara-operator-7-a81e91fba29d9d44"),
    ("tatara", "review", "tatara-operator", 1, "mt-r-tatara-operator-1-8cf09d1cabc917dc"),
    ("tatara", "takeover", "tatara-operator", 9, "mt-t-tatara-operator-9-fe7f976f7dcdbfa7"),
    ("tatara", "implement", "tatara-operator", 412, "mt-i-tatara-operator-412-623bc4f991d46f7f"),
    ("tatara", "review", "tatara-cli", 33, "mt-r-tatara-cli-33-4aa65369a786a69b"),
    ("tatara", "takeover", "tatara-claude-code-wrapper", 123, "mt-t-tatara-claude-code-wrap-123-fb07e1b2849b6780"),
    // the cut lands on a `-`: Go caps while building, then trims.
    ("tatara", "takeover", "tatara-agent-skills-and-more", 12, "mt-t-tatara-agent-skills-and-12-0fa6b3ca8a7c499f"),
    ("tatara", "takeover", "a--b", 5, "mt-t-a-b-5-f6f0dce326c9ad11"),
    ("tatara", "takeover", "a.-b", 5, "mt-t-a-b-5-7e2562db8dcc8151"),
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
    // unicode: non-ASCII letters are "any other run", collapsed to one dash
    // together with any `-` next to them.
    ("acme", "takeover", "Ünïcødé-Repo_名前", 42, "mt-t-n-c-d-repo-42-f399a5f3e082aafa"),
    ("p", "takeover", "日本語リポジトリ", 5, "mt-t--5-25278591d80e6076"),
    ("proj", "takeover", "emoji-🚀-repo-💥-name", 77, "mt-t-emoji-repo-name-77-14fdecc9c8a712a9"),
    // Go lowercases by the simple mapping: İ is i, the Kelvin sign is k.
    ("tatara", "takeover", "İstanbul-\u{212A}elvin", 8, "mt-t-istanbul-kelvin-8-39bd41bbbd56d6ee"),
    // punctuation-heavy
    ("acme", "brainstorm", "..My__Repo!!!--v2..", 9, "mt-b-my-repo-v2-9-dd4a4891244ef4ac"),
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

// The operator's `api/v1alpha1/intake_name_test.go`, one test per Go test.

#[test]
fn deterministic_and_bounded() {
    // TestIntakeTaskName_DeterministicAndBounded
    let a = intake_task_name("tatara", "clarify", "tatara-operator", 353);
    assert_eq!(a, intake_task_name("tatara", "clarify", "tatara-operator", 353));
    assert!(a.len() <= MAX_TASK_NAME);
    assert!(!a.starts_with('-') && !a.ends_with('-'));
}

#[test]
fn distinct_by_key_part() {
    // TestIntakeTaskName_DistinctByKeyPart
    let base = intake_task_name("tatara", "clarify", "tatara-operator", 353);
    assert_ne!(base, intake_task_name("tatara", "review", "tatara-operator", 353));
    assert_ne!(base, intake_task_name("tatara", "clarify", "tatara-operator", 354));
    assert_ne!(base, intake_task_name("tatara", "clarify", "tatara-cli", 353));
    assert_ne!(base, intake_task_name("other", "clarify", "tatara-operator", 353));
}

#[test]
fn long_repo_ref_stays_bounded() {
    // TestIntakeTaskName_LongRepoRefStaysBounded
    let n = intake_task_name("tatara", "clarify", &"x".repeat(200), 1);
    assert!(n.len() <= MAX_TASK_NAME && !n.ends_with('-'), "{n}");
}

#[test]
fn number_is_literal_and_bounded() {
    // TestIntakeTaskName_NumberIsLiteralAndBounded
    let long = "z".repeat(200);
    let a = intake_task_name("tatara", "clarify", &long, 353);
    let b = intake_task_name("tatara", "clarify", &long, 354);
    assert_ne!(a, b);
    assert!(a.contains("-353-") && b.contains("-354-"), "{a} {b}");
    assert!(a.len() <= MAX_TASK_NAME && b.len() <= MAX_TASK_NAME);
}

#[test]
fn no_collision_across_numbers() {
    // TestIntakeTaskName_NoCollisionAcrossNumbers
    let mut seen = std::collections::BTreeMap::new();
    for i in 0..5000 {
        let n = intake_task_name("tatara", "clarify", "tatara-operator", i);
        if let Some(prev) = seen.insert(n.clone(), i) {
            panic!("collision: number {prev} and {i} both produced {n:?}");
        }
    }
}

#[test]
fn uppercase_kind_stays_dns_safe() {
    // TestIntakeTaskName_UppercaseKindStaysDNSSafe
    let n = intake_task_name("tatara", "REVIEW", "tatara-operator", 42);
    assert!(n.len() <= MAX_TASK_NAME && !n.starts_with('-') && !n.ends_with('-'));
    assert!(n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'), "{n}");
}

#[test]
fn mirror_names_and_natural_key() {
    // "Issue `iss-<repositoryRef>-<number>`, MergeRequest `mr-<repositoryRef>-<number>`.
    // The natural key is `<repositoryRef>#<number>`"
    assert_eq!(issue_cr_name("tatara-operator", 412), "iss-tatara-operator-412");
    assert_eq!(merge_request_cr_name("tatara-operator", 9), "mr-tatara-operator-9");
    assert_eq!(natural_key("tatara-operator", 412), "tatara-operator#412");
    // The operator's MRKey (mirror.go:102-105).
    assert_eq!(merge_request_key("tatara-operator", 9), "tatara-operator!9");
}

#[test]
fn keys_parse_with_either_separator() {
    assert_eq!(parse_key("tatara-operator!9"), Ok(("tatara-operator".into(), 9)));
    assert_eq!(parse_key("tatara-operator#9"), Ok(("tatara-operator".into(), 9)));
    assert!(parse_key("tatara-operator").is_err());
    assert!(parse_key("!9").is_err());
    assert!(parse_key("r!0").is_err());
    assert!(parse_key("r!x").is_err());
}

#[test]
fn sanitize_rules() {
    // sanitizeNamePart: lowercases, keeps [a-z0-9], collapses every other
    // run (`-` included) to one `-`, caps while building, trims `-`.
    assert_eq!(sanitize("A__B", 10), "a-b");
    assert_eq!(sanitize("--ab--", 10), "ab");
    assert_eq!(sanitize("a--b", 10), "a-b");
    assert_eq!(sanitize("abcdef", 3), "abc");
    assert_eq!(sanitize("ab-cd", 3), "ab");
    assert_eq!(sanitize("", 3), "");
}
