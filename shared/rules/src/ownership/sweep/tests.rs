use std::collections::BTreeSet;

use super::*;
use crate::ownership::decision::Snapshot;
use crate::ownership::testkit::*;

fn project() -> Project {
    let mut p = Project::new("proj");
    p.spec.scm.bot_login = "tatara-bot".into();
    p
}

fn fi(number: i64) -> ForgeIssue {
    ForgeIssue {
        repository_ref: "repo".into(),
        number,
        state: "open".into(),
        author: "alice".into(),
        url: format!("https://forge/repo/issues/{number}"),
        last_comment_human: false,
        labels: vec![],
    }
}

/// An orphan issue as a mint source.
fn mi(number: i64) -> MintSource {
    MintSource::Issue(fi(number))
}

fn cr(number: i64, refs: Vec<OwnerReference>) -> Artifact {
    Artifact { number, ..issue(&format!("iss-repo-{number}"), refs) }
}

#[test]
fn orphan_needs_all_three_clauses() {
    let p = project();
    let idx = IssueKeyIndex::build(&[cr(1, vec![oref("t", true)]), cr(2, vec![oref("t", false)])]);
    // a. "issue.state == "open" (SCM truth)"
    let closed = ForgeIssue { state: "closed".into(), ..fi(3) };
    assert!(!orphan(&closed, &idx, &p, None).orphan);
    // b. "no Issue CR for (repo, number) has a controller=true owner"
    assert!(!orphan(&fi(1), &idx, &p, None).orphan);
    // Owned but not controlled is still an orphan: "the two conditions are not the same".
    assert!(orphan(&fi(2), &idx, &p, None).orphan);
    assert!(orphan(&fi(3), &idx, &p, None).orphan);
}

#[test]
fn clause_b_is_answered_by_the_issue_key_not_the_cr_name() {
    // "answered by the issueKey field index (<repositoryRef>#<number>), never
    // by a hashed name": a CR with an unrelated name but the same key counts.
    let mut odd = cr(4, vec![oref("t", true)]);
    odd.name = "some-hashed-name".into();
    let idx = IssueKeyIndex::build(&[odd]);
    assert!(!orphan(&fi(4), &idx, &project(), None).orphan);
    // And a CR named like the mirror but for another key does not.
    let mut misnamed = cr(99, vec![oref("t", true)]);
    misnamed.name = "iss-repo-5".into();
    assert!(orphan(&fi(5), &IssueKeyIndex::build(&[misnamed]), &project(), None).orphan);
}

#[test]
fn reporter_gate_open_by_default_closed_when_configured() {
    // "an empty allowlist preserves the open default"
    let mut p = project();
    assert!(is_allowed_reporter(&p, None, "mallory"));
    p.spec.scm.reporter_logins = Some(vec![]);
    assert!(is_allowed_reporter(&p, None, "mallory"));
    // "closed-by-default when configured"
    p.spec.scm.reporter_logins = Some(vec!["alice".into()]);
    p.spec.scm.maintainer_logins = Some(vec!["maint".into()]);
    assert!(is_allowed_reporter(&p, None, "alice"));
    assert!(is_allowed_reporter(&p, None, "maint"));
    assert!(is_allowed_reporter(&p, None, "tatara-bot"));
    assert!(!is_allowed_reporter(&p, None, "mallory"));
    // "an empty login fails closed under an active gate"
    assert!(!is_allowed_reporter(&p, None, ""));
    // With the gate open, an empty login passes (the open default).
    assert!(is_allowed_reporter(&project(), None, ""));
    // clause c in the predicate
    let idx = IssueKeyIndex::default();
    let from_mallory = ForgeIssue { author: "mallory".into(), ..fi(1) };
    assert!(!orphan(&from_mallory, &idx, &p, None).orphan);
}

#[test]
fn repository_lists_override_the_project() {
    let mut p = project();
    p.spec.scm.reporter_logins = Some(vec!["alice".into()]);
    let mut r = Repository::default();
    // "an explicit empty list ([]) opens intake for this repo only"
    r.spec.reporter_logins = Some(vec![]);
    assert!(is_allowed_reporter(&p, Some(&r), "mallory"));
    r.spec.reporter_logins = Some(vec!["bob".into()]);
    assert!(!is_allowed_reporter(&p, Some(&r), "alice"));
    assert!(is_allowed_reporter(&p, Some(&r), "bob"));
}

#[test]
fn mint_stage_triaging_or_parked_backlog_sweep() {
    // "stage = triaging ... when the Task is webhook-originated, or the
    // thread's last comment is human-authored"; "parked ... otherwise"
    assert_eq!(mint_stage(true, false), MintStage::Triaging);
    assert_eq!(mint_stage(false, true), MintStage::Triaging);
    assert_eq!(mint_stage(false, false), MintStage::ParkedBacklogSweep);
    let t = mint_task(&project(), "ns", &fi(7), MintStage::ParkedBacklogSweep);
    assert_eq!(t.spec.initial_park_reason.as_deref(), Some("backlog-sweep"));
    assert_eq!(t.name(), crate::ownership::naming::intake_task_name("proj", "", "repo", 7));
    let active = mint_task(&project(), "ns", &fi(7), MintStage::Triaging);
    assert_eq!(active.spec.initial_park_reason, None);
}

#[test]
fn mint_adopts_an_ownerless_survivor_and_creates_otherwise() {
    // "if iss EXISTS: APPEND task as its controller=true owner (an UPDATE)
    // else: CREATE it with task as controller owner"
    let task_ref = oref("new-task", false);
    let mut survivor = Issue::default();
    survivor.metadata.name = Some("iss-repo-7".into());
    survivor.metadata.resource_version = Some("12".into());
    let IssueWrite::Adopt { issue, .. } = adopt_or_create(&task_ref, Some(&survivor), "proj", &fi(7)) else { panic!() };
    assert_eq!(issue.metadata.resource_version.as_deref(), Some("12"), "an UPDATE of the existing object");
    assert_eq!(issue.owner_refs(), &[oref("new-task", true)]);
    let IssueWrite::Create { issue, .. } = adopt_or_create(&task_ref, None, "proj", &fi(7)) else { panic!() };
    assert_eq!(issue.name(), "iss-repo-7");
    assert_eq!(issue.owner_refs(), &[oref("new-task", true)]);
    // A survivor someone else adopted meanwhile is not appended to (that
    // would be two controllers).
    survivor.metadata.owner_references = Some(vec![oref("other", true)]);
    assert!(matches!(adopt_or_create(&task_ref, Some(&survivor), "proj", &fi(7)), IssueWrite::Skip { .. }));
}

#[test]
fn budgets_cap_new_tasks_and_active_tasks() {
    // "mint at most Project.spec.maxNewTasksPerSweep (default 5) Tasks"
    let p = project();
    let orphans: Vec<_> = (1..=8).map(|n| (mi(n), MintStage::ParkedBacklogSweep)).collect();
    let plan = plan_mints(orphans, &p, 0);
    assert_eq!(plan.mint.len(), 5);
    assert_eq!(plan.deferred.len(), 3);
    assert_eq!(plan.cap_hits.iter().map(|h| h.cap.as_str()).collect::<Vec<_>>(), vec!["maxNewTasksPerSweep"]);
    // "never let ACTIVE Tasks exceed Project.spec.maxOpenTasks (default 6)"
    let orphans =
        vec![(mi(1), MintStage::Triaging), (mi(2), MintStage::Triaging), (mi(3), MintStage::ParkedBacklogSweep)];
    let plan = plan_mints(orphans, &p, 5);
    assert_eq!(plan.mint.iter().map(|(i, _)| i.key()).collect::<Vec<_>>(), vec!["repo#1", "repo#3"]);
    assert_eq!(plan.cap_hits.iter().map(|h| h.cap.as_str()).collect::<Vec<_>>(), vec!["maxOpenTasks"]);
    // "parked(backlog-sweep) Tasks are NOT active and do not count"
    let plan = plan_mints(vec![(mi(1), MintStage::ParkedBacklogSweep)], &p, 6);
    assert_eq!(plan.mint.len(), 1);
    assert!(plan.cap_hits.is_empty());
    // configured caps
    let mut small = project();
    small.spec.max_new_tasks_per_sweep = Some(1);
    assert_eq!(plan_mints(vec![(mi(1), MintStage::Triaging), (mi(2), MintStage::Triaging)], &small, 0).mint.len(), 1);
}

fn pr(author: &str, branch: &str, head_repo: Option<&str>) -> ForgePullRequest {
    ForgePullRequest {
        repository_ref: "repo".into(),
        number: 3,
        author: author.into(),
        head_branch: branch.into(),
        head_repo: head_repo.map(str::to_string),
        base_repo: "org/repo".into(),
        labels: vec![],
        mentions_bot: false,
        ..Default::default()
    }
}

#[test]
fn pr_adopt_needs_bot_author_task_branch_and_no_fork() {
    let p = project();
    let tasks: BTreeSet<String> = ["t1".to_string()].into();
    // 1. ADOPT iff a, b, c
    assert!(
        matches!(pr_disposition(&pr("tatara-bot", "task/t1", Some("org/repo")), &p, None, &tasks), PrDisposition::Adopt { ref task, .. } if task == "t1")
    );
    // c. "head.repo == base.repo (NO forks, ever)"
    assert!(matches!(
        pr_disposition(&pr("tatara-bot", "task/t1", Some("fork/repo")), &p, None, &tasks),
        PrDisposition::IgnoreBot { .. }
    ));
    assert!(matches!(
        pr_disposition(&pr("tatara-bot", "task/t1", None), &p, None, &tasks),
        PrDisposition::IgnoreBot { .. }
    ));
    // 2. "BOT-AUTHORED and NOT ADOPTABLE -> IGNORE. FULL STOP." (an orphaned
    // agent PR, a pin-bump PR)
    assert!(matches!(
        pr_disposition(&pr("tatara-bot", "task/reaped", Some("org/repo")), &p, None, &tasks),
        PrDisposition::IgnoreBot { .. }
    ));
    assert!(matches!(
        pr_disposition(&pr("tatara-bot", "bump/claude", Some("org/repo")), &p, None, &tasks),
        PrDisposition::IgnoreBot { .. }
    ));
    // A fork naming its branch task/<a-real-task> is not the bot: never adopted.
    assert!(!matches!(
        pr_disposition(&pr("mallory", "task/t1", Some("mallory/repo")), &p, None, &tasks),
        PrDisposition::Adopt { .. }
    ));
}

#[test]
fn human_prs_are_reviewed_only_in_reaction_scope() {
    // 3. "mint a review-kind Task iff ... the author is a trusted insider, OR
    // Scm.PRReactionScope is not "labeledOrMentioned", OR the PR carries the
    // trigger label, OR it @-mentions the bot." 4. "Everything else is IGNORED."
    let tasks = BTreeSet::new();
    let mut p = project();
    assert!(matches!(
        pr_disposition(&pr("alice", "fix", Some("alice/repo")), &p, None, &tasks),
        PrDisposition::Review { .. }
    ));
    p.spec.scm.pr_reaction_scope = Some("labeledOrMentioned".into());
    assert!(matches!(pr_disposition(&pr("alice", "fix", None), &p, None, &tasks), PrDisposition::Ignore { .. }));
    let mut labeled = pr("alice", "fix", None);
    labeled.labels = vec!["tatara".into()];
    assert!(matches!(pr_disposition(&labeled, &p, None, &tasks), PrDisposition::Review { .. }));
    let mut mention = pr("alice", "fix", None);
    mention.mentions_bot = true;
    assert!(matches!(pr_disposition(&mention, &p, None, &tasks), PrDisposition::Review { .. }));
    p.spec.scm.maintainer_logins = Some(vec!["alice".into()]);
    assert!(matches!(pr_disposition(&pr("alice", "fix", None), &p, None, &tasks), PrDisposition::Review { .. }));
}

#[test]
fn the_mint_stage_reads_the_tatara_parked_label() {
    // "stamp the tatara-parked label on the SCM issue (BLOCKING TOO - the
    // sweep's mint-stage predicate READS this label)"; parked(backlog-sweep)
    // is "every re-mint of an issue whose previous Task the operator parked
    // and the reaper collected".
    let parked = ForgeIssue { labels: vec!["tatara-parked".into()], last_comment_human: true, ..fi(1) };
    assert_eq!(mint_stage_for(&parked, false), MintStage::ParkedBacklogSweep);
    assert_eq!(mint_stage_for(&parked, true), MintStage::Triaging, "webhook-originated: a human is waiting");
    let fresh = ForgeIssue { last_comment_human: true, ..fi(2) };
    assert_eq!(mint_stage_for(&fresh, false), MintStage::Triaging);
    assert_eq!(mint_stage_for(&fi(3), false), MintStage::ParkedBacklogSweep);
}

#[test]
fn a_pass_counts_active_tasks_from_the_snapshot() {
    // "never let ACTIVE Tasks exceed Project.spec.maxOpenTasks" with ACTIVE
    // counted from the cluster; parked Tasks do not count.
    let mut snap = Snapshot::default();
    for i in 0..5 {
        snap.tasks.push(with_state(task(&format!("a{i}"), i), "under-implementation", None));
    }
    snap.tasks.push(with_state(task("p", 9), "new", Some("backlog-sweep")));
    let issues: Vec<ForgeIssue> = (1..=3).map(|n| ForgeIssue { last_comment_human: true, ..fi(n) }).collect();
    let plan = plan_pass(&snap, &project(), None, &issues);
    assert_eq!(plan.mint.len(), 1, "5 active + 1 = maxOpenTasks 6");
    assert_eq!(plan.deferred.len(), 2);
    assert_eq!(plan.cap_hits[0].cap, "maxOpenTasks");
}

#[test]
fn the_plan_reads_as_mint_lines_with_their_cost_then_deferred_lines_with_the_caps() {
    let orphans: Vec<_> =
        (1..=7).map(|n| (mi(n), if n == 1 { MintStage::Triaging } else { MintStage::ParkedBacklogSweep })).collect();
    let lines = plan_lines(&plan_mints(orphans, &project(), 0));
    let shape: Vec<(&str, &str, Option<&str>)> =
        lines.iter().map(|l| (l.key.as_str(), l.decision.as_str(), l.stage.as_deref())).collect();
    assert_eq!(shape[0], ("repo#1", "mint", Some("triaging")));
    assert_eq!(shape[1], ("repo#2", "mint", Some("parked(backlog-sweep)")));
    assert_eq!(shape[5], ("repo#6", "deferred", None));
    assert_eq!(lines.len(), 7);
    assert!(lines[0].why.starts_with("orphan; ") && lines[0].why.contains("human is waiting"), "{}", lines[0].why);
    assert!(lines[1].why.contains("spawns zero pods"), "{}", lines[1].why);
    assert!(lines[6].why.contains("maxNewTasksPerSweep"), "{}", lines[6].why);
    let skip = IssueLine::skip(&fi(9), "closed".into());
    assert_eq!((skip.key.as_str(), skip.decision.as_str(), skip.why.as_str()), ("repo#9", "skip", "closed"));
}

#[test]
fn a_mint_is_minted_by_the_pass_that_created_its_task_and_completed_by_any_other() {
    let issue = fi(7);
    let task = mint_task(&project(), "ns", &issue, MintStage::ParkedBacklogSweep);
    let name = task.name().to_string();
    let task_ref = oref(&name, false);
    let IssueWrite::Create { issue: mirror, why } = adopt_or_create(&task_ref, None, "proj", &issue) else { panic!() };
    let create_task = Action::CreateTask { task: Box::new(task), why: "mint".into() };
    let create_mirror = Action::CreateIssue { issue: mirror, why };
    assert_eq!(mint_outcome(&[create_task, create_mirror.clone()]), MintOutcome::Minted { task: name.clone() });
    // Another pass created the Task; this one only wrote the mirror, which
    // names the Task as its controller.
    assert_eq!(mint_outcome(&[create_mirror]), MintOutcome::Completed { task: name });
    assert_eq!(mint_outcome(&[]), MintOutcome::NothingToDo);
}
