use clap::CommandFactory;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use rules::ownership::decision::Snapshot;
use rules::ownership::types::{Issue, Project, Repository, Task, task_owner_ref};

use super::owners::{stage_text, tree};
use super::*;
use runtime::ownership::forge::{RepoCoords, repo_coords};

#[test]
fn the_command_line_is_well_formed_and_every_flag_is_explained() {
    Cli::command().debug_assert();
    for sub in Cli::command().get_subcommands() {
        for arg in sub.get_arguments() {
            if arg.get_id() == "help" || arg.get_id() == "version" {
                continue;
            }
            assert!(arg.get_help().is_some(), "{} --{} has no help", sub.get_name(), arg.get_id());
        }
    }
}

#[test]
fn repository_coordinates_come_from_the_url_then_the_project_owner() {
    let mut project = Project::new("p");
    project.spec.scm.extra.insert("owner".into(), "acme".into());
    let mut repo = Repository::new("tatara-operator");
    repo.spec.extra.insert("url".into(), "https://github.com/other/op.git".into());
    assert_eq!(repo_coords(&project, &repo), Some(RepoCoords { owner: "other".into(), repo: "op".into() }));
    repo.spec.extra.insert("url".into(), "https://ghe.example.com/team/svc".into());
    assert_eq!(repo_coords(&project, &repo).unwrap().full_name(), "team/svc");
    repo.spec.extra.remove("url");
    assert_eq!(repo_coords(&project, &repo).unwrap().full_name(), "acme/tatara-operator");
    project.spec.scm.extra.remove("owner");
    assert_eq!(repo_coords(&project, &repo), None);
}

fn task(name: &str, uid: &str) -> Task {
    let mut t = Task::new(name);
    t.metadata.uid = Some(uid.into());
    t
}

fn issue(n: i64, refs: Vec<OwnerReference>) -> Issue {
    let mut i = Issue::new(&format!("iss-r-{n}"));
    i.spec.repository_ref = "r".into();
    i.spec.number = n;
    i.metadata.owner_references = Some(refs);
    i
}

#[test]
fn the_tree_marks_every_violation_and_resolves_owners() {
    let mut parked = task("parked", "u2");
    parked.spec.initial_park_reason = Some("backlog-sweep".into());
    let mut plain = task_owner_ref("parked", "u2", false);
    plain.block_owner_deletion = None;
    let snap = Snapshot {
        tasks: vec![task("a", "u1"), parked],
        issues: vec![
            issue(1, vec![task_owner_ref("a", "u1", true), task_owner_ref("parked", "u2", false)]),
            issue(2, vec![plain]),
            issue(3, vec![task_owner_ref("gone", "u9", true)]),
        ],
        merge_requests: vec![],
    };
    let t = tree(&snap, "r#1").unwrap();
    assert_eq!(t.name, "iss-r-1");
    assert!(t.violations.is_empty(), "{:?}", t.violations);
    assert_eq!(t.owners[1].stage.as_deref(), Some("parked(backlog-sweep, unpark: human)"));
    assert!(t.owners.iter().all(|o| o.exists && o.block_owner_deletion));

    let t = tree(&snap, "issue/iss-r-2").unwrap();
    let rules: Vec<u8> = t.violations.iter().map(|f| f.rule).collect();
    assert_eq!(rules, vec![5, 3], "{:?}", t.violations);

    // A controller reference to a Task that is gone: rule 5, owner <gone>.
    let t = tree(&snap, "iss-r-3").unwrap();
    assert_eq!(t.violations.iter().map(|f| f.rule).collect::<Vec<_>>(), vec![5]);
    assert!(!t.owners[0].exists);

    let t = tree(&snap, "task/parked").unwrap();
    assert_eq!(t.stage.as_deref(), Some("parked(backlog-sweep, unpark: human)"));
    assert_eq!(t.owns.len(), 2);
    assert_eq!(t.owns.iter().filter(|o| !o.violations.is_empty()).count(), 1);

    use super::owners::Lookup;
    let e = tree(&snap, "nope").unwrap_err();
    assert!(matches!(e, Lookup::NotFound(_)), "{e}");
    // Said once: "Issue, MergeRequest or Task "nope" not found", never "no ... not found".
    assert_eq!(e.to_string(), "Issue, MergeRequest or Task \"nope\" not found");
    let e = e.error("ns-a");
    assert_eq!(e.code(), crate::common::exit_code::NOT_FOUND);
    assert!(e.message().ends_with("not found; list them with `kubectl get issues,mergerequests,tasks -n ns-a`"), "{e}");
    assert!(matches!(tree(&snap, "r#x"), Err(Lookup::Invalid(_))));
    assert!(matches!(tree(&snap, "pod/a"), Err(Lookup::Invalid(_))));
    assert!(matches!(tree(&snap, "r#99"), Err(Lookup::NotFound(_))));
    use rules::ownership::types::Stage;
    // The operator's words: no failed state, parks with their unpark class.
    assert_eq!(stage_text(&Stage::Failed("object-too-large".into())), "parked(object-too-large, unpark: never)");
    assert_eq!(stage_text(&Stage::Parked("backlog-sweep".into())), "parked(backlog-sweep, unpark: human)");
    assert_eq!(stage_text(&Stage::Parked("something-new".into())), "parked(something-new)");
    assert_eq!(stage_text(&Stage::Delivered), "done");
}

#[test]
fn the_sweep_apply_table_says_what_was_asked_of_each_object() {
    use super::sweep::{TriggerLine, TriggerResult};
    use crate::common::{Human, Style};
    use rules::ownership::sweep::trigger::{Decision, Kind, Line};
    let line = |kind, name: &str, decision, outcome: &str, error: Option<&str>| TriggerLine {
        line: Line { kind, name: name.into(), decision },
        outcome: outcome.into(),
        error: error.map(String::from),
    };
    let trigger = |was: Option<&str>| Decision::Trigger {
        clear: was.map(|_| vec!["status.lastIssueScan".to_string()]).unwrap_or_default(),
        was: was.map(String::from),
        why: "the base".into(),
    };
    let r = TriggerResult {
        project: "tatara".into(),
        namespace: "tatara".into(),
        apply: true,
        triggers: vec![
            line(Kind::Repository, "a", trigger(Some("2026-12-04T04:00:00Z")), "cleared", None),
            line(Kind::Repository, "b", trigger(None), "alreadyClear", None),
            line(Kind::Repository, "c", trigger(Some("2026-12-04T04:00:00Z")), "failed", Some("403")),
            line(Kind::Project, "tatara", Decision::Refuse { cause: "off".into(), fix: "on".into() }, "refused", None),
        ],
        next: vec!["the operator sweeps repository a of project tatara on its next scan tick".into()],
    };
    let mut out = Vec::new();
    r.render(&Style { wide: false, headers: true, colour: false }, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    for want in [
        "Repository   a        cleared status.lastIssueScan (was 2026-12-04T04:00:00Z)   the base",
        "Repository   b        nothing: status.lastIssueScan unset",
        "Repository   c        NOT cleared: status.lastIssueScan",
        "Project      tatara   refused",
        "off; on",
        "the operator sweeps repository a of project tatara on its next scan tick\n",
    ] {
        assert!(text.contains(want), "{want:?} in\n{text}");
    }
}

#[test]
fn the_sweep_table_says_what_each_pull_request_came_to() {
    use super::sweep::{PullLine, SweepResult};
    use crate::common::{Human, Style};
    use rules::ownership::sweep::{DispositionCounts, PrDisposition};
    let adopted = PullLine {
        key: "tatara-operator#20".into(),
        author: "tatara-bot".into(),
        head_branch: "task/member-a".into(),
        disposition: PrDisposition::Adopt { task: "member-a".into(), why: "bot-authored".into() },
        decision: "adopt".into(),
        stage: None,
        task: Some("member-a".into()),
        why: "bot-authored, on task/member-a".into(),
    };
    let deferred = PullLine {
        key: "tatara-operator#21".into(),
        author: "bob".into(),
        disposition: PrDisposition::Review { why: "in scope".into() },
        decision: "deferred".into(),
        why: "left for the next pass".into(),
        ..adopted.clone()
    };
    let r = SweepResult {
        pull_requests: vec![adopted, deferred],
        pull_request_counts: DispositionCounts { adopt: 1, review: 1, ..Default::default() },
        ..Default::default()
    };
    let mut out = Vec::new();
    let style = Style { wide: false, headers: true, colour: false };
    r.render(&style, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("pull requests: 1 adopt, 0 ignore (bot), 1 review, 0 ignore\n"), "{text}");
    // The plan-only note is not the result: print writes it to stderr.
    assert!(!text.contains("(plan only"), "{text}");
    assert_eq!(
        r.note(&style).as_deref(),
        Some("(plan only: the operator mints and adopts; --apply asks it to run its own sweep now)")
    );
}
