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

#[test]
fn the_defaults_title_each_kind_and_the_trailers_follow() {
    let m = Messages::new(&MessageSpec::default(), "prod").unwrap();
    let changes = [change("web", Action::Write(json!({})), Some("alice")), change("db", Action::Delete, Some("alice"))];
    let a = applied(&changes, &[Effect::Create, Effect::Delete]);
    let author = changes[0].author.as_ref();
    let group = m.message(&CommitKind::Window, author, &a).unwrap();
    assert!(group.starts_with("alice: 2 changes to prod\n\n"), "{group}");
    assert!(group.contains("Reverser-Actor: alice\n") && group.contains("Reverser-Audit-ID: audit-db\n"), "{group}");
    let event = m.message(&CommitKind::PerEvent, author, &a[..1]).unwrap();
    assert!(event.starts_with("CREATE deployments/web in shop\n\n"), "{event}");
    let reconcile = CommitKind::Reconcile {
        group: "apps".into(),
        version: "v1".into(),
        resource: "deployments".into(),
        revision: "4711".into(),
    };
    let r = m.message(&reconcile, None, &a).unwrap();
    assert!(r.starts_with("reconcile: 2 objects of deployments at revision 4711\n\n"), "{r}");
    assert!(!r.contains("Reverser-Actor"), "an unresolved commit names no actor: {r}");
}

#[test]
fn provider_templates_see_every_documented_variable() {
    let spec = MessageSpec {
        event_template: Some("{{.Operation}} {{.APIVersion}} {{.Username}} {{.GitTarget}}".into()),
        group_template: Some(
            "{{.Author}} {{index .Operations \"DELETE\"}} {{range .Resources}}{{.Namespace}}/{{.Name}} {{end}}".into(),
        ),
        reconcile_template: Some("{{.APIVersion}}@{{.Revision}}".into()),
    };
    let m = Messages::new(&spec, "prod").unwrap();
    let changes = [change("web", Action::Delete, None), change("db", Action::Write(json!({})), None)];
    let a = applied(&changes, &[Effect::Delete, Effect::Update]);
    let subject = |s: String| s.lines().next().unwrap().to_owned();
    assert_eq!(
        subject(m.message(&CommitKind::PerEvent, None, &a[..1]).unwrap()),
        "DELETE apps/v1 unknown (attribution unresolved) prod"
    );
    assert_eq!(
        subject(m.message(&CommitKind::Window, None, &a).unwrap()),
        "unknown (attribution unresolved) 1 shop/web shop/db"
    );
    let core = CommitKind::Reconcile {
        group: String::new(),
        version: "v1".into(),
        resource: "configmaps".into(),
        revision: "9".into(),
    };
    assert_eq!(subject(m.message(&core, None, &a).unwrap()), "v1@9");
}

#[test]
fn an_unknown_field_is_an_error_when_the_provider_is_read() {
    let spec = MessageSpec { group_template: Some("{{.Autor}} did it".into()), ..MessageSpec::default() };
    let err = Messages::new(&spec, "prod").unwrap_err().to_string();
    assert!(err.contains("groupTemplate") && err.contains("`.Autor`") && err.contains(".Author"), "{err}");
}
