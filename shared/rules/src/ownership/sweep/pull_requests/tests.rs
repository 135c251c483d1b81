use super::super::{MintOutcome, MintSource, mint_outcome, plan_mints, review_lines};
use super::*;
use crate::ownership::merge_request::{EXTERNAL, REASON_INITIAL};
use crate::ownership::testkit::*;

fn project() -> Project {
    let mut p = Project::new("proj");
    p.spec.scm.bot_login = "tatara-bot".into();
    p.spec.scm.maintainer_logins = Some(vec!["maint".into()]);
    p
}

fn pr(number: i64, author: &str, branch: &str) -> ForgePullRequest {
    ForgePullRequest {
        repository_ref: "repo".into(),
        number,
        author: author.into(),
        head_branch: branch.into(),
        head_sha: format!("{number:040x}"),
        head_repo: Some("org/repo".into()),
        base_repo: "org/repo".into(),
        url: format!("https://github.com/org/repo/pull/{number}"),
        ..Default::default()
    }
}

fn world() -> Snapshot {
    Snapshot { tasks: vec![task("t1", 1), task("t2", 2)], ..Default::default() }
}

/// The API server's part, in memory: apply one step to the snapshot (new
/// objects get a uid, every write a new resourceVersion).
fn apply(snap: &mut Snapshot, action: &Action) {
    let rv = |o: &mut Option<String>| *o = Some(format!("{}", o.as_deref().unwrap_or("0").parse::<u64>().unwrap() + 1));
    match action {
        Action::CreateTask { task, .. } => {
            let mut t = (**task).clone();
            t.metadata.uid = Some(format!("uid-{}", t.name()));
            t.metadata.resource_version = Some("1".into());
            snap.tasks.push(t);
        }
        Action::CreateMergeRequest { merge_request, .. } => {
            let mut m = (**merge_request).clone();
            m.metadata.resource_version = Some("1".into());
            m.status = None; // dropped on create: the status subresource owns it
            snap.merge_requests.push(m);
        }
        Action::SetMrRefs { task, resource_version, mr_refs, .. } => {
            let t = snap.tasks.iter_mut().find(|t| t.name() == task).unwrap();
            assert_eq!(&t.metadata.resource_version, resource_version, "stale write");
            t.status_mut().mr_refs = Some(mr_refs.clone());
            rv(&mut t.metadata.resource_version);
        }
        Action::SetOwners { name, resource_version, owner_references, .. } => {
            let m = snap.merge_requests.iter_mut().find(|m| m.name() == name).unwrap();
            assert_eq!(&m.metadata.resource_version, resource_version, "stale write");
            m.metadata.owner_references = Some(owner_references.clone());
            rv(&mut m.metadata.resource_version);
        }
        Action::FillMergeRequest { name, resource_version, status, .. } => {
            let m = snap.merge_requests.iter_mut().find(|m| m.name() == name).unwrap();
            assert_eq!(&m.metadata.resource_version, resource_version, "stale write");
            let mut merged = serde_json::to_value(m.status.clone().unwrap_or_default()).unwrap();
            for (k, v) in serde_json::to_value(status).unwrap().as_object().unwrap() {
                merged[k] = v.clone();
            }
            m.status = Some(serde_json::from_value(merged).unwrap());
            rv(&mut m.metadata.resource_version);
        }
        other => panic!("unexpected step {other:?}"),
    }
}

/// Decide and apply until the decision asks for nothing; every step applied.
fn converge(snap: &mut Snapshot, decide: impl Fn(&Snapshot) -> PrDecision) -> Vec<Action> {
    let mut applied = vec![];
    for _ in 0..10 {
        let actions = decide(snap).into_actions();
        if actions.is_empty() {
            return applied;
        }
        for a in &actions {
            apply(snap, a);
        }
        applied.extend(actions);
    }
    panic!("did not converge: {applied:?}");
}

fn kinds(actions: &[Action]) -> Vec<&'static str> {
    actions
        .iter()
        .map(|a| match a {
            Action::CreateTask { .. } => "createTask",
            Action::CreateMergeRequest { .. } => "createMirror",
            Action::SetOwners { .. } => "setOwners",
            Action::FillMergeRequest { .. } => "fill",
            Action::SetMrRefs { .. } => "mrRefs",
            _ => "other",
        })
        .collect()
}

fn mirror(snap: &Snapshot, number: i64) -> &MergeRequest {
    snap.merge_requests_for("repo", number)[0]
}

#[test]
fn adopt_appends_mr_refs_then_mirrors_the_pr_controlled_by_the_task_with_tatara_ownership() {
    let p = project();
    let bot = pr(5, "tatara-bot", "task/t1");
    let mut snap = world();
    let applied = converge(&mut snap, |s| decide_adopt(s, &p, None, &bot));
    assert_eq!(kinds(&applied), vec!["mrRefs", "createMirror", "fill"]);
    assert_eq!(snap.task("t1").unwrap().mr_refs(), &["repo#5".to_string()]);
    let m = mirror(&snap, 5);
    assert_eq!(m.name(), "mr-repo-5");
    assert_eq!(m.owner_refs(), &[oref("t1", true)], "controller=true, blockOwnerDeletion=true");
    assert_eq!((m.spec.number, m.spec.project_ref.as_str()), (5, "proj"));
    assert_eq!(m.spec.url, "https://github.com/org/repo/pull/5");
    let st = m.status.clone().unwrap();
    // "An author this project owns (scm.botLogin ...) is classified tatara";
    // "There is no lastBotHeadSHA comparison and no ownershipReason: initial".
    assert_eq!(st.ownership.as_deref(), Some(TATARA));
    assert_eq!(st.ownership_reason, None);
    assert_eq!(st.last_bot_head_sha.as_deref(), Some(bot.head_sha.as_str()));
    assert_eq!(st.author.as_deref(), Some("tatara-bot"));
    assert_eq!(st.head_branch.as_deref(), Some("task/t1"));
    assert_eq!(st.state.as_deref(), Some("open"));
    // Idempotent: a second sweep adds nothing.
    let again = decide_adopt(&snap, &p, None, &bot);
    assert!(matches!(&again, PrDecision::Nothing { why } if why.starts_with("already adopted")), "{again:?}");
}

#[test]
fn adopt_needs_all_three_clauses_and_a_live_task() {
    let p = project();
    let mut snap = world();
    // a. a human on task/t1 is not adopted (it is a review candidate).
    assert!(matches!(decide_adopt(&snap, &p, None, &pr(5, "mallory", "task/t1")), PrDecision::Nothing { .. }));
    // b. a bot branch naming no Task.
    assert!(matches!(decide_adopt(&snap, &p, None, &pr(5, "tatara-bot", "chore/bump")), PrDecision::Nothing { .. }));
    // c. "A fork with a task/... branch is never adopted."
    let fork = ForgePullRequest { head_repo: Some("evil/repo".into()), ..pr(5, "tatara-bot", "task/t1") };
    let d = decide_adopt(&snap, &p, None, &fork);
    assert!(matches!(&d, PrDecision::Nothing { why } if why.contains("no forks, ever")), "{d:?}");
    // A failed Task owns nothing: its branch's PR is an orphaned agent PR.
    snap.tasks[0] = with_state(task("t1", 1), "under-implementation", Some("object-too-large"));
    let d = decide_adopt(&snap, &p, None, &pr(5, "tatara-bot", "task/t1"));
    assert!(matches!(&d, PrDecision::Nothing { why } if why.contains("no live Task")), "{d:?}");
    // A Task of another project is not this project's to adopt into.
    let mut other = task("t3", 3);
    other.spec.project_ref = "elsewhere".into();
    snap.tasks.push(other);
    assert!(matches!(decide_adopt(&snap, &p, None, &pr(5, "tatara-bot", "task/t3")), PrDecision::Nothing { .. }));
}

#[test]
fn adopt_appends_the_task_to_an_ownerless_mirror_and_leaves_anothers_alone() {
    let p = project();
    let bot = pr(6, "tatara-bot", "task/t1");
    let mut snap = world();
    let mut survivor = MergeRequest::new("mr-repo-6");
    survivor.spec = IssueSpec { number: 6, repository_ref: "repo".into(), ..Default::default() };
    survivor.metadata.resource_version = Some("4".into());
    // A plain owner without blockOwnerDeletion, and an operator mirror that
    // already says external (a human pushed): its ownership stays.
    let mut plain = oref("t2", false);
    plain.block_owner_deletion = None;
    survivor.metadata.owner_references = Some(vec![plain]);
    survivor.status_mut().ownership = Some(EXTERNAL.into());
    survivor.status_mut().ownership_reason = Some("external-push:abc".into());
    snap.merge_requests.push(survivor);
    let applied = converge(&mut snap, |s| decide_adopt(s, &p, None, &bot));
    assert_eq!(kinds(&applied), vec!["mrRefs", "setOwners", "fill"]);
    let m = mirror(&snap, 6);
    assert_eq!(m.owner_refs(), &[oref("t2", false), oref("t1", true)]);
    let st = m.status.clone().unwrap();
    assert_eq!(st.ownership.as_deref(), Some(EXTERNAL));
    assert_eq!(st.ownership_reason.as_deref(), Some("external-push:abc"));
    assert_eq!(st.last_bot_head_sha, None, "no lastBotHeadSHA under someone else's ownership");

    // A mirror another Task controls (a fold moved it): nothing is written.
    let mut snap = world();
    let mut held = MergeRequest::new("mr-repo-7");
    held.spec = IssueSpec { number: 7, repository_ref: "repo".into(), ..Default::default() };
    held.metadata.owner_references = Some(vec![oref("t2", true)]);
    snap.merge_requests.push(held);
    let d = decide_adopt(&snap, &p, None, &pr(7, "tatara-bot", "task/t1"));
    assert!(matches!(&d, PrDecision::Nothing { why } if why.contains("controlled by t2")), "{d:?}");
}

#[test]
fn adopt_respects_mr_refs_max_items_and_the_byte_budget() {
    let p = project();
    let mut snap = world();
    let full: Vec<String> = (100..100 + MR_REFS_MAX_ITEMS as i64).map(|n| format!("repo#{n}")).collect();
    snap.tasks[0].status_mut().mr_refs = Some(full.clone());
    let d = decide_adopt(&snap, &p, None, &pr(5, "tatara-bot", "task/t1"));
    assert!(matches!(&d, PrDecision::Nothing { why } if why.contains("maxItems is 50")), "{d:?}");
    // Listed already: a full list is no obstacle to finishing the mirror.
    snap.tasks[0].status_mut().mr_refs = Some(full[1..].iter().cloned().chain(["repo#5".into()]).collect());
    assert_eq!(kinds(&decide_adopt(&snap, &p, None, &pr(5, "tatara-bot", "task/t1")).into_actions()), ["createMirror"]);
    // A Task at the byte budget cannot take one more reference.
    let mut snap = world();
    snap.tasks[0].spec.goal = "x".repeat(OBJECT_BUDGET_BYTES);
    let d = decide_adopt(&snap, &p, None, &pr(5, "tatara-bot", "task/t1"));
    assert!(matches!(&d, PrDecision::Nothing { why } if why.contains("object budget")), "{d:?}");
}

#[test]
fn a_review_mint_creates_the_review_task_then_its_external_mirror() {
    let p = project();
    let human = pr(8, "bob", "fix/typo");
    let mut snap = world();
    assert!(review_verdict(&snap, &p, None, &human).orphan);
    let applied = converge(&mut snap, |s| decide_review(s, &p, None, "ns", &human, MintStage::ParkedBacklogSweep));
    assert_eq!(kinds(&applied), vec!["createTask", "createMirror", "fill"]);
    let name = review_task_name("proj", "repo", 8);
    assert!(name.starts_with("mt-r-repo-8-"), "{name}");
    let t = snap.task(&name).unwrap();
    assert_eq!(t.spec.kind.as_deref(), Some("review"));
    assert_eq!(t.spec.initial_park_reason.as_deref(), Some("backlog-sweep"));
    assert_eq!(t.spec.goal, "Review repo!8");
    assert_eq!(t.mr_refs(), &[] as &[String], "a mint writes no status, as the issue mint");
    let m = mirror(&snap, 8);
    assert_eq!(m.owner_refs(), &[oref(&name, true)]);
    let st = m.status.clone().unwrap();
    // Anything else - a human ... - is external, with reason initial.
    assert_eq!((st.ownership.as_deref(), st.ownership_reason.as_deref()), (Some(EXTERNAL), Some(REASON_INITIAL)));
    assert_eq!(st.last_bot_head_sha, None);
    assert_eq!(st.author.as_deref(), Some("bob"));
    // Done: the next sweep finds it controlled.
    assert!(!review_verdict(&snap, &p, None, &human).orphan);
    assert!(matches!(decide_review(&snap, &p, None, "ns", &human, MintStage::Triaging), PrDecision::Nothing { .. }));
    assert_eq!(mint_outcome(&applied), MintOutcome::Minted { task: name.clone() });
    assert_eq!(mint_outcome(&applied[1..]), MintOutcome::Completed { task: name });
}

#[test]
fn a_review_mint_is_active_when_a_human_waits_and_skips_what_a_task_answers_for() {
    let p = project();
    let waiting = ForgePullRequest { last_comment_human: true, ..pr(8, "bob", "fix") };
    let stage = MintSource::Review(waiting.clone()).stage();
    assert_eq!(stage, MintStage::Triaging);
    let PrDecision::Write { actions, .. } = decide_review(&world(), &p, None, "ns", &waiting, stage) else { panic!() };
    let Action::CreateTask { task: minted, .. } = &actions[0] else { panic!() };
    assert_eq!(minted.spec.initial_park_reason, None);
    // A mirror some other Task controls (a takeover Task, say): not minted.
    let mut snap = world();
    let mut held = MergeRequest::new("mr-repo-8");
    held.spec = IssueSpec { number: 8, repository_ref: "repo".into(), ..Default::default() };
    held.metadata.owner_references = Some(vec![oref("t2", true)]);
    snap.merge_requests.push(held);
    let v = review_verdict(&snap, &p, None, &waiting);
    assert!(!v.orphan && v.why.contains("controlled by t2"), "{v:?}");
    // A terminal review Task blocks the re-mint until it is reaped.
    let mut snap = world();
    let name = review_task_name("proj", "repo", 8);
    snap.tasks.push(with_state(task(&name, 5), "rejected", None));
    let v = review_verdict(&snap, &p, None, &waiting);
    assert!(!v.orphan && v.why.contains("terminal"), "{v:?}");
    // Out of scope, and bot-authored: no review.
    let mut scoped = project();
    scoped.spec.scm.pr_reaction_scope = Some("labeledOrMentioned".into());
    assert!(!review_verdict(&world(), &scoped, None, &waiting).orphan);
    assert!(!review_verdict(&world(), &p, None, &pr(9, "tatara-bot", "bump")).orphan);
}

#[test]
fn review_mints_share_the_issue_mints_budget_in_forge_order() {
    let p = project();
    let issue = |n: i64| {
        MintSource::Issue(super::super::ForgeIssue {
            repository_ref: "repo".into(),
            number: n,
            state: "open".into(),
            ..Default::default()
        })
    };
    let mut orphans: Vec<(MintSource, MintStage)> =
        (1..=4).map(|n| (issue(n), MintStage::ParkedBacklogSweep)).collect();
    orphans.push((MintSource::Review(pr(20, "bob", "a")), MintStage::Triaging));
    orphans.push((MintSource::Review(pr(21, "carol", "b")), MintStage::ParkedBacklogSweep));
    let plan = plan_mints(orphans, &p, 0);
    assert_eq!(plan.mint.len(), 5, "maxNewTasksPerSweep counts both kinds");
    let lines = review_lines(&plan);
    let shape: Vec<(&str, &str)> = lines.iter().map(|l| (l.key.as_str(), l.decision.as_str())).collect();
    assert_eq!(shape, vec![("repo!20", "mint"), ("repo!21", "deferred")]);
    assert!(lines[0].why.contains("reaction scope") && lines[0].why.contains("human is waiting"), "{}", lines[0].why);
    assert!(lines[1].why.contains("maxNewTasksPerSweep"), "{}", lines[1].why);
    // And maxOpenTasks binds an active review mint like an active issue mint.
    let plan = plan_mints(vec![(MintSource::Review(pr(20, "bob", "a")), MintStage::Triaging)], &p, 6);
    assert_eq!(plan.cap_hits[0].cap, "maxOpenTasks");
}

#[test]
fn dispositions_are_counted() {
    let p = project();
    let live: BTreeSet<String> = ["t1".to_string()].into();
    let mut counts = DispositionCounts::default();
    for x in [pr(1, "tatara-bot", "task/t1"), pr(2, "tatara-bot", "bump"), pr(3, "bob", "x")] {
        counts.count(&pr_disposition(&x, &p, None, &live));
    }
    assert_eq!(counts, DispositionCounts { adopt: 1, ignore_bot: 1, review: 1, ignore: 0 });
}
