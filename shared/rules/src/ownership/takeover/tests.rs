use serde_json::json;

use super::*;
use crate::ownership::testkit::oref;

fn project(maintainers: Option<Vec<&str>>) -> Project {
    let mut p = Project::default();
    p.metadata.name = Some("tatara".into());
    p.spec.scm.bot_login = "tatara-bot".into();
    p.spec.scm.maintainer_logins = maintainers.map(|m| m.into_iter().map(String::from).collect());
    p
}

fn mr(comments: serde_json::Value) -> MergeRequest {
    let mut m = MergeRequest::default();
    m.metadata.name = Some("mr-tatara-operator-7".into());
    m.metadata.owner_references = Some(vec![oref("review-7", true), oref("member-b", false)]);
    m.spec.repository_ref = "tatara-operator".into();
    m.spec.number = 7;
    m.status_mut().state = Some("open".into());
    m.status_mut().ownership = Some("external".into());
    m.status_mut().extra.insert("comments".into(), comments);
    m
}

fn comment(id: &str, author: &str, body: &str) -> serde_json::Value {
    json!({"externalId": id, "author": author, "body": body, "createdAt": "2026-11-01T00:00:00Z",
           "isBot": author == "tatara-bot"})
}

fn forge(id: &str, author: &str, body: &str) -> ForgeComment {
    ForgeComment { id: id.into(), author: author.into(), body: body.into() }
}

#[test]
fn the_request_carries_exactly_the_four_keys_the_handler_reads() {
    // takeover.go:20-28: repo, number, commentExternalId, task; nothing else.
    let r = TakeoverRequest { repo: "r".into(), number: 9, comment_external_id: "11".into(), task: "t".into() };
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v, json!({"repo": "r", "number": 9, "commentExternalId": "11", "task": "t"}));
}

#[test]
fn the_callers_latest_mirrored_comment_is_asked_with_as_the_controller() {
    let m = mr(json!([
        comment("10", "maint", "please take over"),
        comment("11", "alice", "take over!"),
        comment("12", "maint", "Take-over, please"),
        comment("13", "maint", "thanks"),
    ]));
    let step = next_step(&project(Some(vec!["maint"])), None, &m, "maint", &[]).unwrap();
    assert_eq!(
        step,
        Step::Ask(TakeoverRequest {
            repo: "tatara-operator".into(),
            number: 7,
            comment_external_id: "12".into(),
            task: "review-7".into(),
        })
    );
}

#[test]
fn a_non_maintainer_with_a_mirrored_comment_is_still_asked_for_the_operator_decides() {
    // The operator's 403 is the answer the caller sees, verbatim.
    let m = mr(json!([comment("11", "mallory", "take over")]));
    assert!(matches!(next_step(&project(Some(vec!["maint"])), None, &m, "mallory", &[]), Ok(Step::Ask(_))));
}

#[test]
fn a_comment_on_the_forge_not_yet_mirrored_is_waited_for_never_posted_again() {
    let m = mr(json!([]));
    let comments =
        [forge("20", "maint", "take over"), forge("21", "maint", "take over please"), forge("22", "x", "take over")];
    let step = next_step(&project(Some(vec!["maint"])), None, &m, "maint", &comments).unwrap();
    assert_eq!(step, Step::Wait { external_id: "21".into() });
}

#[test]
fn no_comment_anywhere_posts_one_only_for_a_maintainer_of_an_open_mr() {
    let m = mr(json!([comment("10", "maint", "lgtm")]));
    let p = project(Some(vec!["maint"]));
    assert_eq!(next_step(&p, None, &m, "maint", &[forge("10", "maint", "lgtm")]).unwrap(), Step::Post);
    let err = next_step(&p, None, &m, "mallory", &[]).unwrap_err();
    assert!(matches!(err, Refusal::NotMaintainer { .. }));
    assert!(err.to_string().contains(REFUSAL_BODY) && err.to_string().contains("tatara-operator!7"), "{err}");
    let mut closed = m.clone();
    closed.status_mut().state = Some("closed".into());
    assert!(matches!(next_step(&p, None, &closed, "maint", &[]), Err(Refusal::NotOpen { .. })));
}

#[test]
fn the_bot_identity_is_refused_before_anything() {
    // takeover.go:187: never the bot; and a bot listed as maintainer is no
    // maintainer (logins.go withoutBotLogin).
    let m = mr(json!([comment("11", "tatara-bot", "take over")]));
    let p = project(Some(vec!["tatara-bot", "maint"]));
    assert!(matches!(next_step(&p, None, &m, "tatara-bot", &[]), Err(Refusal::BotIdentity { .. })));
    assert!(matches!(next_step(&p, None, &m, "", &[]), Err(Refusal::BotIdentity { .. })));
}

#[test]
fn a_mirror_without_a_controller_cannot_be_asked_about() {
    let mut m = mr(json!([comment("11", "maint", "take over")]));
    m.metadata.owner_references = Some(vec![oref("member-b", false)]);
    assert!(matches!(
        next_step(&project(Some(vec!["maint"])), None, &m, "maint", &[]),
        Err(Refusal::NoController { .. })
    ));
}

#[test]
fn takeover_wording() {
    assert!(is_takeover_comment("Please TAKE OVER this"));
    assert!(is_takeover_comment("takeover"));
    assert!(is_takeover_comment(DEFAULT_COMMENT));
    assert!(!is_takeover_comment("looks good"));
}
