//! The tatara world the ownership tests start from.

use serde_json::{Value, json};

use rules::ownership::types::API_VERSION;

use super::error::ApiError;
use super::store::Store;

/// An owner reference to a seeded Task.
fn task_ref(task: &Value, controller: bool) -> Value {
    json!({
        "apiVersion": API_VERSION, "kind": "Task",
        "name": task.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
        "uid": task.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
        "controller": controller, "blockOwnerDeletion": true
    })
}

/// Seed a small tatara world, every object valid under the CRD schemas in
/// `fixtures/crds/tatara/`: project `tatara`, repository `tatara-operator`, a
/// refine umbrella with two brainstorm members, a failed Task, three Issues
/// in the spec's shapes (umbrella-controlled with a member's plain
/// reference, member-controlled, ownerless after a failed Task's release) and
/// a bot-authored MergeRequest on `task/member-b`. Returns the objects in
/// seeding order as `(plural, object)`.
pub fn seed_world(store: &mut Store, ns: &str) -> Result<Vec<(String, Value)>, ApiError> {
    let mut out = Vec::new();
    let mut put = |store: &mut Store, plural: &str, obj: Value| -> Result<Value, ApiError> {
        let v = store.seed(plural, ns, obj)?;
        out.push((plural.to_string(), v.clone()));
        Ok(v)
    };
    put(
        store,
        "projects",
        json!({"metadata": {"name": "tatara"}, "spec": {
            "scmSecretRef": "tatara-scm", "maxNewTasksPerSweep": 5, "maxOpenTasks": 6,
            "triggerLabel": "tatara",
            "scm": {"botLogin": "tatara-bot", "owner": "acme", "provider": "github",
                    "maintainerLogins": ["maint"], "reporterLogins": ["alice"]},
            "upgradePolicy": {"adoptBranchPrefix": "renovate/", "upgradeEngineLogins": ["renovate[bot]"]}
        }}),
    )?;
    put(
        store,
        "repositories",
        json!({"metadata": {"name": "tatara-operator"}, "spec": {
            "projectRef": "tatara", "url": "https://github.com/acme/tatara-operator",
            "reingestSchedule": "0 3 * * *"
        }}),
    )?;
    let umbrella = put(
        store,
        "tasks",
        json!({"metadata": {"name": "umbrella"}, "spec": {
        "projectRef": "tatara", "goal": "Refine the ownership work", "kind": "refine"
    }, "status": {"state": "new"}}),
    )?;
    let member_a = put(
        store,
        "tasks",
        json!({"metadata": {"name": "member-a"}, "spec": {
        "projectRef": "tatara", "goal": "Brainstorm A", "kind": "brainstorm", "repositoryRef": "tatara-operator"
    }, "status": {"state": "new", "issueRefs": ["tatara-operator#412", "tatara-operator#413"],
        "notes": [{"agent": "brainstorm", "at": "2026-11-01T10:00:00Z", "kind": "note", "body": "first thoughts"}]}}),
    )?;
    let member_b = put(
        store,
        "tasks",
        json!({"metadata": {"name": "member-b"}, "spec": {
        "projectRef": "tatara", "goal": "Brainstorm B", "kind": "brainstorm", "repositoryRef": "tatara-operator"
    }, "status": {"state": "new", "issueRefs": ["tatara-operator#414"], "mrRefs": ["tatara-operator#9"]}}),
    )?;
    put(
        store,
        "tasks",
        json!({"metadata": {"name": "old-failed"}, "spec": {
        "projectRef": "tatara", "goal": "Too big", "kind": "implement"
    }, "status": {"state": "under-implementation", "parkReason": "object-too-large",
        "parkedAt": "2026-11-20T00:00:00Z", "stateEnteredAt": "2026-11-19T00:00:00Z"}}),
    )?;
    let issue = |n: i64, refs: Vec<Value>, state: &str| {
        json!({"metadata": {"name": format!("iss-tatara-operator-{n}"), "ownerReferences": refs},
            "spec": {"number": n, "projectRef": "tatara", "repositoryRef": "tatara-operator",
                     "url": format!("https://github.com/acme/tatara-operator/issues/{n}")},
            "status": {"state": state, "author": "alice", "title": format!("Issue {n}"),
                "comments": [{"author": "alice", "body": "please look", "createdAt": "2026-11-01T09:00:00Z", "externalId": format!("c{n}")}]}})
    };
    put(store, "issues", issue(412, vec![task_ref(&umbrella, true), task_ref(&member_a, false)], "open"))?;
    put(store, "issues", issue(413, vec![task_ref(&member_a, true)], "open"))?;
    put(store, "issues", issue(414, vec![task_ref(&member_b, true)], "open"))?;
    put(store, "issues", issue(415, vec![], "open"))?;
    put(
        store,
        "mergerequests",
        json!({"metadata": {"name": "mr-tatara-operator-9",
            "ownerReferences": [task_ref(&member_b, true)]},
        "spec": {"number": 9, "projectRef": "tatara", "repositoryRef": "tatara-operator",
                 "url": "https://github.com/acme/tatara-operator/pull/9"},
        "status": {"state": "open", "author": "tatara-bot", "headBranch": "task/member-b",
            "headSHA": "abc123", "lastBotHeadSHA": "abc123", "ownership": "tatara", "ciStatus": "green"}}),
    )?;
    Ok(out)
}
