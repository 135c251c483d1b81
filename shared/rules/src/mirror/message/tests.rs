use std::time::SystemTime;

use serde_json::json;

use super::*;
use crate::attribution::commit::{Change, ResolvedAuthor};
use crate::attribution::render::ObjectKey;
use crate::attribution::{ActorKind, Tier};

fn change(name: &str, action: Action, author: Option<&str>) -> Change {
    Change {
        action,
        object: ObjectKey {
            group: "apps".into(),
            version: "v1".into(),
            resource: "deployments".into(),
            namespace: "shop".into(),
            name: name.into(),
        },
        author: author.map(|a| ResolvedAuthor {
            username: a.into(),
            display_name: String::new(),
            email: String::new(),
            actor_kind: ActorKind::of(a),
        }),
        tier: if author.is_some() { Tier::Exact } else { Tier::Absent },
        audit_id: Some(format!("audit-{name}")),
        observed_at: SystemTime::UNIX_EPOCH,
    }
}

fn applied<'a>(changes: &'a [Change], effects: &[Effect]) -> Vec<Applied<'a>> {
    changes.iter().zip(effects).map(|(c, e)| Applied { effect: *e, path: "p.yaml", change: c }).collect()
}

fn reconcile(group: &str, version: &str, resource: &str, revision: &str) -> CommitKind {
    CommitKind::Reconcile {
        group: group.into(),
        version: version.into(),
        resource: resource.into(),
        revision: revision.into(),
    }
}

fn subject(s: String) -> String {
    s.lines().next().unwrap().to_owned()
}

#[test]
fn the_reference_defaults_title_each_kind_and_the_trailers_follow() {
    // internal/git/types.go:110-126 at f0f7b42, chosen by commit_executor.go:67-96.
    let m = Messages::new(&MessageSpec::default(), "prod").unwrap();
    let changes = [change("web", Action::Write(json!({})), Some("alice")), change("db", Action::Delete, Some("alice"))];
    let a = applied(&changes, &[Effect::Create, Effect::Delete]);
    let author = changes[0].author.as_ref();
    let group = m.message(&CommitKind::Window, author, &a).unwrap();
    assert!(group.starts_with("alice on prod: 2 resource(s)\n\n"), "{group}");
    assert!(group.contains("Reverser-Actor: alice\n") && group.contains("Reverser-Audit-ID: audit-db\n"), "{group}");
    let event = m.message(&CommitKind::PerEvent, author, &a[..1]).unwrap();
    assert!(event.starts_with("[CREATE] apps/v1/deployments/web\n\n"), "{event}");
    // A window that holds one change is titled as one event (pending_writes.go:231-239).
    assert_eq!(subject(m.message(&CommitKind::Window, author, &a[..1]).unwrap()), "[CREATE] apps/v1/deployments/web");
    let r = m.message(&reconcile("apps", "v1", "deployments", "4711"), None, &a).unwrap();
    assert!(r.starts_with("reconciled 2 deployments (last resourceVersion: 4711)\n\n"), "{r}");
    assert!(!r.contains("Reverser-Actor"), "an unresolved commit names no actor: {r}");
}

#[test]
fn the_reference_reconcile_default_names_the_type_and_revision() {
    // commit_test.go:95-159 (TestRenderReconcileCommitMessage_*), its cases.
    let m = Messages::new(&MessageSpec::default(), "demo").unwrap();
    let changes: Vec<Change> = (0..6).map(|i| change(&format!("o{i}"), Action::Delete, None)).collect();
    let a = applied(&changes, &[Effect::Delete; 6]);
    let cases = [
        (1, reconcile("", "v1", "configmaps", "1331"), "reconciled 1 configmaps (last resourceVersion: 1331)"),
        (
            4,
            reconcile("rbac.authorization.k8s.io", "v1", "rolebindings", "2980"),
            "reconciled 4 rolebindings (last resourceVersion: 2980)",
        ),
        (0, reconcile("", "v1", "secrets", ""), "reconciled 0 secrets"),
        (6, reconcile("", "", "", ""), "reconciled 6 resources"),
        (2, reconcile("", "", "", ""), "reconciled 2 resources"),
    ];
    for (count, kind, want) in cases {
        assert_eq!(subject(m.message(&kind, None, &a[..count]).unwrap_or_else(|e| panic!("{e}"))), want);
    }
}

#[test]
fn the_reference_custom_templates_render_as_there() {
    // commit_test.go:72-93, 161-177, 201-232.
    let spec = MessageSpec {
        event_template: Some("audit({{.GitTarget}}): {{.Username}} {{.Operation}} {{.Namespace}}/{{.Name}}".into()),
        group_template: Some("grouped({{.GitTarget}}): {{.Author}} changed {{.Count}} resource(s)".into()),
        reconcile_template: Some(
            "e2e-snapshot: synced {{.Count}} {{.APIVersion}}/{{.Resource}}@{{.Revision}} to {{.GitTarget}}".into(),
        ),
        live_template: None,
    };
    let changes =
        [change("api", Action::Write(json!({})), Some("alice")), change("db", Action::Write(json!({})), Some("alice"))];
    let a = applied(&changes, &[Effect::Update, Effect::Update]);
    let m = Messages::new(&spec, "platform").unwrap();
    let author = changes[0].author.as_ref();
    assert_eq!(
        subject(m.message(&CommitKind::PerEvent, author, &a[..1]).unwrap()),
        "audit(platform): alice UPDATE shop/api"
    );
    assert_eq!(
        subject(m.message(&CommitKind::Window, author, &a).unwrap()),
        "grouped(platform): alice changed 2 resource(s)"
    );
    let snapshot = Messages::new(&spec, "signing-snapshot-dest").unwrap();
    let six: Vec<Change> = (0..6).map(|i| change(&format!("s{i}"), Action::Delete, None)).collect();
    let a6 = applied(&six, &[Effect::Delete; 6]);
    assert_eq!(
        subject(snapshot.message(&reconcile("", "v1", "secrets", "1331"), None, &a6).unwrap()),
        "e2e-snapshot: synced 6 v1/secrets@1331 to signing-snapshot-dest"
    );
}

#[test]
fn templates_see_every_documented_variable_and_unresolved_is_empty() {
    let spec = MessageSpec {
        event_template: Some("{{.Operation}} {{.APIVersion}} [{{.Username}}] {{.GitTarget}}".into()),
        group_template: Some(
            "[{{.Author}}] {{index .Operations \"DELETE\"}} {{range .Resources}}{{.Namespace}}/{{.Name}} {{end}}"
                .into(),
        ),
        reconcile_template: Some("{{.APIVersion}}@{{.Revision}}={{.ResourceVersion}}".into()),
        live_template: None,
    };
    let m = Messages::new(&spec, "prod").unwrap();
    let changes = [change("web", Action::Delete, None), change("db", Action::Write(json!({})), None)];
    let a = applied(&changes, &[Effect::Delete, Effect::Update]);
    // types.go:74-82: the sentinel is the author header's, never a template value.
    assert_eq!(subject(m.message(&CommitKind::PerEvent, None, &a[..1]).unwrap()), "DELETE apps/v1 [] prod");
    assert_eq!(subject(m.message(&CommitKind::Window, None, &a).unwrap()), "[] 1 shop/web shop/db");
    assert_eq!(subject(m.message(&reconcile("", "v1", "configmaps", "9"), None, &a).unwrap()), "v1@9=9");
}

#[test]
fn a_live_template_titles_every_live_commit_and_reconciles_keep_theirs() {
    // gitops-reverser #345: one liveTemplate for windows of any size.
    let spec = MessageSpec { live_template: Some(DEFAULT_LIVE.into()), ..MessageSpec::default() };
    let m = Messages::new(&spec, "prod").unwrap();
    let changes = [change("web", Action::Write(json!({})), Some("bob")), change("db", Action::Delete, Some("bob"))];
    let a = applied(&changes, &[Effect::Create, Effect::Delete]);
    let author = changes[0].author.as_ref();
    let two = m.message(&CommitKind::Window, author, &a).unwrap();
    assert!(
        two.starts_with("chore: sync 2 resources\n\n- [CREATE] apps/v1/deployments/shop/web\n- [DELETE] apps/v1/deployments/shop/db\n"),
        "{two}"
    );
    let one = m.message(&CommitKind::PerEvent, author, &a[..1]).unwrap();
    assert!(one.starts_with("chore: sync 1 resource\n"), "{one}");
    let r = m.message(&reconcile("apps", "v1", "deployments", "7"), None, &a).unwrap();
    assert!(r.starts_with("reconciled 2 deployments (last resourceVersion: 7)"), "{r}");
}

const DEFAULT_LIVE: &str = crate::mirror::template::DEFAULT_LIVE_TEMPLATE;

#[test]
fn without_templates_a_reconcile_is_still_titled_as_one() {
    // issue 29: `serve` without a GitTarget titled reconcile commits like edits.
    let changes = [change("web", Action::Write(json!({})), None)];
    let a = applied(&changes, &[Effect::Update]);
    let r = untemplated_message(&reconcile("apps", "v1", "deployments", "12"), None, &a);
    assert!(r.starts_with("reconciled 1 deployments (last resourceVersion: 12)\n\n"), "{r}");
    assert!(untemplated_message(&CommitKind::Window, None, &a).starts_with("update p.yaml\n\n"));
}

#[test]
fn an_unknown_field_is_an_error_when_the_provider_is_read() {
    let spec = MessageSpec { group_template: Some("{{.Autor}} did it".into()), ..MessageSpec::default() };
    let err = Messages::new(&spec, "prod").unwrap_err().to_string();
    assert!(err.contains("groupTemplate") && err.contains("`.Autor`") && err.contains(".Author"), "{err}");
}
