use super::*;
use crate::ownership::types::UpgradePolicy;

fn project() -> Project {
    let mut p = Project::default();
    p.spec.scm.bot_login = "tatara-bot".into();
    p.spec.upgrade_policy = Some(UpgradePolicy {
        adopt_branch_prefix: Some("renovate/".into()),
        upgrade_engine_logins: Some(vec!["renovate[bot]".into()]),
        ..Default::default()
    });
    p
}

fn mr(ownership: &str, reason: Option<&str>, last_bot: &str) -> MergeRequest {
    let mut m = MergeRequest::default();
    m.metadata.name = Some("mr-repo-1".into());
    let st = m.status_mut();
    st.ownership = Some(ownership.into());
    st.ownership_reason = reason.map(str::to_string);
    st.last_bot_head_sha = Some(last_bot.into());
    m
}

#[test]
fn classification_is_by_author_only() {
    // "An author this project owns (scm.botLogin, or a login listed in
    // Project.spec.upgradePolicy.upgradeEngineLogins) is classified tatara;
    // anything else - a human, an un-allowlisted bot, or an unknown/empty
    // author - is external."
    let p = project();
    assert_eq!(ownership_for_author(&p, "tatara-bot").ownership, "tatara");
    assert_eq!(ownership_for_author(&p, "tatara-bot").reason, None);
    assert_eq!(ownership_for_author(&p, "renovate[bot]").ownership, "tatara");
    assert_eq!(ownership_for_author(&p, "alice").ownership, "external");
    assert_eq!(ownership_for_author(&p, "dependabot[bot]").ownership, "external");
    assert_eq!(ownership_for_author(&p, "").ownership, "external");
    assert_eq!(ownership_for_author(&p, "").reason.as_deref(), Some("initial"));
}

#[test]
fn foreign_push_flips_with_two_distinct_reasons() {
    // "external-push:<sha> on an MR a maintainer handed over and
    // adopted-external-push:<sha> on an adopted dependency-upgrade MR"
    let m = mr("tatara", Some("takeover-requested-by:maint"), "aaa");
    let f = flip_on_push(&m, "bbb", MrOrigin::HandedOver).unwrap();
    assert_eq!((f.ownership.as_str(), f.reason.as_deref()), ("external", Some("external-push:bbb")));
    let f = flip_on_push(&m, "bbb", MrOrigin::AdoptedUpgrade).unwrap();
    assert_eq!(f.reason.as_deref(), Some("adopted-external-push:bbb"));
    // "If the MR's current head resolves to the same commit, ownership is tatara."
    assert_eq!(flip_on_push(&m, "aaa", MrOrigin::HandedOver), None);
    // Already external: nothing to flip.
    assert_eq!(flip_on_push(&mr("external", Some("initial"), "aaa"), "ccc", MrOrigin::HandedOver), None);
}

#[test]
fn merge_gate_prefix_test_is_exact() {
    // "merges when status.ownership == tatara or status.ownership == external
    // with a reason prefix external-push:"
    assert!(merge_gate(&mr("tatara", None, "a")).merge);
    assert!(merge_gate(&mr("external", Some("external-push:abc"), "a")).merge);
    // "An MR with ownership external and reason initial ... will not be merged"
    assert!(!merge_gate(&mr("external", Some("initial"), "a")).merge);
    // "The prefix test is exact, and adopted-external-push: does not match it."
    assert!(!merge_gate(&mr("external", Some("adopted-external-push:abc"), "a")).merge);
    assert!(!merge_gate(&mr("external", Some("xexternal-push:abc"), "a")).merge);
    assert!(!merge_gate(&MergeRequest::default()).merge);
}

fn candidate() -> UpgradeCandidate {
    UpgradeCandidate {
        author: "renovate[bot]".into(),
        head_branch: "renovate/serde-1.x".into(),
        head_sha: "s1".into(),
        head_repo: Some("org/repo".into()),
        base_repo: "org/repo".into(),
        ..Default::default()
    }
}

fn fails(p: &Project, c: &UpgradeCandidate) -> Vec<AdoptClause> {
    adopt_upgrade_mr(p, c).failed
}

#[test]
fn adoption_requires_all_eight_clauses() {
    let p = project();
    assert!(adopt_upgrade_mr(&p, &candidate()).adopt);
    // "upgradePolicy.adoptBranchPrefix is configured. Empty is the default
    // and disables adoption outright"
    let mut off = project();
    off.spec.upgrade_policy.as_mut().unwrap().adopt_branch_prefix = Some(String::new());
    assert_eq!(fails(&off, &candidate()), vec![AdoptClause::PrefixConfigured]);
    // "the MR's head branch starts with that prefix"
    assert_eq!(
        fails(&p, &UpgradeCandidate { head_branch: "feature/x".into(), ..candidate() }),
        vec![AdoptClause::BranchHasPrefix]
    );
    // "the author is adoptable"
    assert_eq!(
        fails(&p, &UpgradeCandidate { author: "alice".into(), ..candidate() }),
        vec![AdoptClause::AuthorAdoptable]
    );
    // "the head repo equals the base repo. No forks, ever; an unknown head
    // repo fails closed"
    assert_eq!(
        fails(&p, &UpgradeCandidate { head_repo: Some("fork/repo".into()), ..candidate() }),
        vec![AdoptClause::NotAFork]
    );
    assert_eq!(fails(&p, &UpgradeCandidate { head_repo: None, ..candidate() }), vec![AdoptClause::NotAFork]);
    // The reason names the head repository as a person reads it (issue 29).
    let why = |head_repo: Option<&str>| {
        adopt_upgrade_mr(&p, &UpgradeCandidate { head_repo: head_repo.map(Into::into), ..candidate() }).why
    };
    assert!(why(Some("fork/repo")).contains("head repo \"fork/repo\" is not"), "{}", why(Some("fork/repo")));
    assert!(why(None).contains("head repo unknown (the forge did not name it)"), "{}", why(None));
    assert!(!why(None).contains("None") && !why(Some("fork/repo")).contains("Some("));
    // "no Task owns the branch and no live Task owns the mirror CR"
    assert_eq!(
        fails(&p, &UpgradeCandidate { branch_owned_by_task: true, ..candidate() }),
        vec![AdoptClause::NotAlreadyOwned]
    );
    assert_eq!(
        fails(&p, &UpgradeCandidate { mirror_owned_by_live_task: true, ..candidate() }),
        vec![AdoptClause::NotAlreadyOwned]
    );
    // "the MR does not carry the project's triggerLabel"
    assert_eq!(
        fails(&p, &UpgradeCandidate { labels: vec!["tatara".into()], ..candidate() }),
        vec![AdoptClause::NoTriggerLabel]
    );
    // "no durable adoption-refusal marker (AnnAdoptionRefused) for this head
    // SHA" - a new bump force-pushed gets a fresh decision.
    assert_eq!(
        fails(&p, &UpgradeCandidate { adoption_refused_sha: Some("s1".into()), ..candidate() }),
        vec![AdoptClause::NotRefusedForThisSha]
    );
    assert!(adopt_upgrade_mr(&p, &UpgradeCandidate { adoption_refused_sha: Some("s0".into()), ..candidate() }).adopt);
    // "its mirror has not stood down to an external push"
    assert_eq!(
        fails(
            &p,
            &UpgradeCandidate { mirror_ownership_reason: Some("adopted-external-push:s1".into()), ..candidate() }
        ),
        vec![AdoptClause::NotStoodDown]
    );
    // An empty author never adopts.
    assert!(
        fails(&p, &UpgradeCandidate { author: String::new(), ..candidate() }).contains(&AdoptClause::AuthorAdoptable)
    );
}

#[test]
fn external_mrs_are_exempt_from_the_review_round_cap() {
    // "both of its parked(awaiting-human) re-entry paths are normally bounded
    // by maxHumanReviewRounds (5). An externally-owned MR is exempt from that cap"
    assert!(review_round_allowed(&mr("tatara", None, "a"), 4));
    assert!(!review_round_allowed(&mr("tatara", None, "a"), 5));
    assert!(review_round_allowed(&mr("external", Some("external-push:x"), "a"), 9));
}

#[test]
fn announcements_post_once_per_flip() {
    // "posts the take-over announcement on the next MergeRequest reconcile,
    // once, keyed on the flip timestamp"
    let mut m = mr("external", Some("external-push:bbb"), "aaa");
    m.status_mut().ownership_changed_at = Some("2026-11-29T10:00:00Z".into());
    let (key, body) = pending_announcement(&m, None).unwrap();
    assert_eq!(body, STAND_DOWN_ANNOUNCEMENT);
    assert!(body.starts_with("A commit outside tatara landed on this branch - standing down from pushing."));
    assert_eq!(pending_announcement(&m, Some(&key)), None);
    m.status_mut().ownership = Some("tatara".into());
    m.status_mut().ownership_reason = Some("takeover-requested-by:maint".into());
    m.status_mut().ownership_changed_at = Some("2026-11-29T11:00:00Z".into());
    assert!(pending_announcement(&m, Some(&key)).unwrap().1.contains("maint"));
    // initial classification announces nothing.
    let mut init = mr("external", Some("initial"), "a");
    init.status_mut().ownership_changed_at = Some("t".into());
    assert_eq!(pending_announcement(&init, None), None);
}
