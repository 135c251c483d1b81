use super::*;
use crate::ownership::testkit::*;

fn project(maintainers: Option<Vec<&str>>) -> Project {
    let mut p = Project::default();
    p.metadata.name = Some("tatara".into());
    p.spec.scm.bot_login = "tatara-bot".into();
    p.spec.scm.maintainer_logins = maintainers.map(|m| m.into_iter().map(String::from).collect());
    p
}

fn mr() -> MergeRequest {
    let mut m = MergeRequest::default();
    m.metadata.name = Some("mr-tatara-operator-7".into());
    m.spec.repository_ref = "tatara-operator".into();
    m.spec.number = 7;
    m.status_mut().ownership = Some("external".into());
    m.status_mut().head_branch = Some("alice/fix".into());
    m
}

#[test]
fn non_maintainer_gets_403_with_the_exact_text() {
    // "If the author is not a maintainer, the endpoint answers HTTP 403 with
    // the body author not in maintainer set: only a project maintainer may
    // hand this merge request over"
    let err = takeover(&project(Some(vec!["maint"])), None, &mr(), "alice", "h", None).unwrap_err();
    assert_eq!(err.status, 403);
    assert_eq!(err.body, "author not in maintainer set: only a project maintainer may hand this merge request over");
}

#[test]
fn maintainer_set_is_closed_by_default() {
    // "an account in the project or repository maintainerLogins set, closed
    // by default"
    assert!(takeover(&project(None), None, &mr(), "maint", "h", None).is_err());
    assert!(takeover(&project(Some(vec![])), None, &mr(), "maint", "h", None).is_err());
    assert!(takeover(&project(Some(vec!["maint"])), None, &mr(), "", "h", None).is_err());
    // The repository list overrides; "an explicit empty list ([]) clears" it.
    let mut repo = Repository::default();
    repo.spec.maintainer_logins = Some(vec![]);
    assert!(takeover(&project(Some(vec!["maint"])), Some(&repo), &mr(), "maint", "h", None).is_err());
    repo.spec.maintainer_logins = Some(vec!["repo-maint".into()]);
    assert!(takeover(&project(Some(vec!["maint"])), Some(&repo), &mr(), "repo-maint", "h", None).is_ok());
}

#[test]
fn maintainer_takeover_stamps_ownership_and_mints_the_deterministic_task() {
    // "stamps status.ownership = tatara with reason takeover-requested-by:<user>,
    // bumps lastBotHeadSHA to the live head, and calls MintOrUnparkTakeoverTask"
    let plan = takeover(&project(Some(vec!["maint"])), None, &mr(), "maint", "live123", None).unwrap();
    assert_eq!(plan.ownership.ownership, "tatara");
    assert_eq!(plan.ownership.reason.as_deref(), Some("takeover-requested-by:maint"));
    assert_eq!(plan.last_bot_head_sha, "live123");
    let TakeoverTask::Mint { task, .. } = plan.task else { panic!() };
    // "exactly one deterministically named ... takeover Task per MR"
    assert_eq!(task.name(), "mt-t-tatara-operator-7-a81e91fba29d9d44");
    assert_eq!(task.spec.initial_state.as_deref(), Some("under-implementation"));
    assert_eq!(task.spec.kind.as_deref(), Some("takeover"));
    // "bound to the MR's existing head branch"
    assert_eq!(task.metadata.annotations.as_ref().unwrap()["tatara.dev/takeover-head-branch"], "alice/fix");
}

#[test]
fn existing_takeover_task_is_unparked_or_left() {
    // "un-parks it back into under-implementation if it already exists and is
    // parked(ownership-lost), and returns it unchanged in any other live state"
    let p = project(Some(vec!["maint"]));
    let parked = with_state(task("tk", 0), "under-implementation", Some("ownership-lost"));
    assert!(matches!(mint_or_unpark(&p, &mr(), Some(&parked)), TakeoverTask::Unpark { .. }));
    let other = with_state(task("tk", 0), "under-implementation", Some("awaiting-human"));
    assert!(matches!(mint_or_unpark(&p, &mr(), Some(&other)), TakeoverTask::Leave { .. }));
    let live = with_state(task("tk", 0), "awaiting-review", None);
    assert!(matches!(mint_or_unpark(&p, &mr(), Some(&live)), TakeoverTask::Leave { .. }));
}

#[test]
fn the_comment_author_comes_from_the_mirror() {
    // "re-checks the comment author server-side ... The agent's judgment alone
    // can never change ownership."
    let mut m = mr();
    m.status_mut().extra.insert(
        "comments".into(),
        serde_json::json!([{"author": "maint", "body": "please take over", "createdAt": "2026-11-29T00:00:00Z", "externalId": "c1"}]),
    );
    assert_eq!(comment_author(&m, "c1").as_deref(), Some("maint"));
    assert_eq!(comment_author(&m, "c2"), None);
}
