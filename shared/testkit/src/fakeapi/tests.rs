use super::*;
use serde_json::json;

#[test]
fn seed_objects_validate_against_the_crd_schemas() {
    // "seeded with objects that validate against the CRD schemas in compat/"
    let dir = crate::fixtures::tatara_crds();
    let mut store = Store::new();
    assert!(store.load_crd_schemas(&dir).unwrap() >= 5);
    let seeded = seed_world(&mut store, "ns").expect("every seed object passes the schema");
    assert_eq!(seeded.len(), 11);
    for (plural, obj) in &seeded {
        let errs = validate_schema(store.schema(plural).unwrap(), obj, "");
        assert!(errs.is_empty(), "{plural}: {errs:?}");
    }
}

#[test]
fn the_schema_check_can_fail() {
    let dir = crate::fixtures::tatara_crds();
    let mut store = Store::new();
    store.load_crd_schemas(&dir).unwrap();
    // spec.goal is required on a Task; state must be in the enum.
    let err = store.seed("tasks", "ns", json!({"metadata": {"name": "t"}, "spec": {"projectRef": "p"}})).unwrap_err();
    assert_eq!(err.code, 422);
    assert!(err.message.contains("spec.goal: Required value"), "{}", err.message);
    let err = store
        .seed(
            "tasks",
            "ns",
            json!({"metadata": {"name": "t"}, "spec": {"projectRef": "p", "goal": "g"}, "status": {"state": "failed"}}),
        )
        .unwrap_err();
    assert!(err.message.contains(".status.state"), "{}", err.message);
}

#[test]
fn seeds_round_trip_through_the_typed_structs() {
    // Types "round-trip objects valid under the real CRD schemas without
    // losing fields we do not model".
    use rules::ownership::types::{Issue, MergeRequest, Project, Repository, Task};
    let mut store = Store::new();
    for (plural, obj) in seed_world(&mut store, "ns").unwrap() {
        let back = match plural.as_str() {
            "projects" => serde_json::to_value(serde_json::from_value::<Project>(obj.clone()).unwrap()),
            "repositories" => serde_json::to_value(serde_json::from_value::<Repository>(obj.clone()).unwrap()),
            "tasks" => serde_json::to_value(serde_json::from_value::<Task>(obj.clone()).unwrap()),
            "issues" => serde_json::to_value(serde_json::from_value::<Issue>(obj.clone()).unwrap()),
            "mergerequests" => serde_json::to_value(serde_json::from_value::<MergeRequest>(obj.clone()).unwrap()),
            _ => unreachable!(),
        }
        .unwrap();
        assert_eq!(back, obj, "{plural} round trip");
    }
}

#[test]
fn store_enforces_resource_version_and_single_controller() {
    let mut store = Store::new();
    seed_world(&mut store, "ns").unwrap();
    let iss = store.get("issues", "ns", "iss-tatara-operator-413").unwrap();
    let rv = iss["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    // A write with the current resourceVersion succeeds and bumps it.
    let mut next = iss.clone();
    next["metadata"]["labels"] = json!({"a": "b"});
    let written = store.replace("issues", "ns", "iss-tatara-operator-413", next.clone(), false).unwrap();
    assert_ne!(written["metadata"]["resourceVersion"].as_str().unwrap(), rv);
    // The same body again is stale: 409.
    assert_eq!(store.replace("issues", "ns", "iss-tatara-operator-413", next, false).unwrap_err().code, 409);
    // Two controller references: 422.
    let mut two = store.get("issues", "ns", "iss-tatara-operator-412").unwrap();
    two["metadata"]["ownerReferences"][1]["controller"] = json!(true);
    let err = store.replace("issues", "ns", "iss-tatara-operator-412", two, false).unwrap_err();
    assert_eq!(err.code, 422);
    assert!(err.message.contains("Only one reference can have Controller set to true"));
    assert_eq!(store.get("issues", "ns", "nope").unwrap_err().code, 404);
}

#[test]
fn status_subresource_split() {
    let mut store = Store::new();
    seed_world(&mut store, "ns").unwrap();
    let mut t = store.get("tasks", "ns", "umbrella").unwrap();
    t["status"]["foldInFlight"] = json!(["member-a"]);
    t["spec"]["goal"] = json!("changed");
    // PUT /status takes only status.
    let after = store.replace("tasks", "ns", "umbrella", t.clone(), true).unwrap();
    assert_eq!(after["status"]["foldInFlight"], json!(["member-a"]));
    assert_eq!(after["spec"]["goal"], json!("Refine the ownership work"));
    // PUT on the main resource ignores status.
    let mut t2 = after.clone();
    t2["status"]["foldInFlight"] = json!([]);
    let after2 = store.replace("tasks", "ns", "umbrella", t2, false).unwrap();
    assert_eq!(after2["status"]["foldInFlight"], json!(["member-a"]));
}

#[test]
fn garbage_collector_keeps_zero_owner_objects_and_drops_dangling_refs() {
    // "deletes a dependent object only when every owner reference resolves to
    // gone ... an object with zero owner references is never collected"
    let mut store = Store::new();
    seed_world(&mut store, "ns").unwrap();
    store.delete("tasks", "ns", "member-a", None, None).unwrap();
    assert_eq!(
        store.get("issues", "ns", "iss-tatara-operator-413").unwrap_err().code,
        404,
        "sole owner gone: collected"
    );
    let shared = store.get("issues", "ns", "iss-tatara-operator-412").unwrap();
    assert_eq!(shared["metadata"]["ownerReferences"].as_array().unwrap().len(), 1, "dangling plain ref removed");
    assert!(store.get("issues", "ns", "iss-tatara-operator-415").is_ok(), "zero owners: never collected");
}

#[tokio::test]
async fn lists_honour_selectors_and_span_namespaces_over_http() {
    use kube::api::{Api, ListParams};
    use rules::ownership::types::{Issue, Task};
    let mut store = Store::new();
    seed_world(&mut store, "a").unwrap();
    seed_world(&mut store, "b").unwrap();
    let api = serve(store).await.unwrap();
    let client = api.client("a").unwrap();
    let all: Api<Task> = Api::all(client.clone());
    assert_eq!(all.list(&ListParams::default()).await.unwrap().items.len(), 8);
    let ns: Api<Issue> = Api::namespaced(client, "a");
    let one = ns.list(&ListParams::default().fields("metadata.name=iss-tatara-operator-413")).await.unwrap();
    assert_eq!(one.items.len(), 1);
    let none = ns.list(&ListParams::default().labels("team=x")).await.unwrap();
    assert!(none.items.is_empty());
    let not = ns.list(&ListParams::default().fields("metadata.name!=iss-tatara-operator-413")).await.unwrap();
    assert_eq!(not.items.len(), 3);
}

#[test]
fn malformed_bodies_are_400_not_a_panic() {
    let mut store = Store::new();
    seed_world(&mut store, "ns").unwrap();
    assert_eq!(store.replace("issues", "ns", "iss-tatara-operator-413", json!("nope"), false).unwrap_err().code, 400);
    assert_eq!(
        store.replace("issues", "ns", "iss-tatara-operator-413", json!({"metadata": 3}), false).unwrap_err().code,
        400
    );
    assert_eq!(
        store.patch("issues", "ns", "iss-tatara-operator-413", &json!({"metadata": [1]}), false).unwrap_err().code,
        400
    );
    assert_eq!(store.create("issues", "ns", json!([1, 2])).unwrap_err().code, 400);
    assert_eq!(store.get("widgets", "ns", "x").unwrap_err().code, 404);
}

#[test]
fn yaml_seeds_json_patches_and_dry_runs() {
    let mut store = Store::new();
    let seeded = store
        .seed_yaml(
            "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: shop}}\n\
             - {apiVersion: v1, kind: Secret, metadata: {name: s, namespace: shop}, stringData: {p: pw}}\n",
        )
        .unwrap();
    assert_eq!(seeded.len(), 2);
    assert!(seeded[0]["metadata"].get("namespace").is_none(), "namespaces are cluster-scoped");
    // A Secret's stringData lands in data, base64-encoded.
    assert_eq!(seeded[1]["data"], json!({"p": "cHc="}));
    assert!(seeded[1].get("stringData").is_none());
    assert!(store.seed_yaml("apiVersion: v9\nkind: Nope\nmetadata: {name: x}\n").is_err());

    let ops = json!([{"op": "test", "path": "/data/p", "value": "nope"}, {"op": "remove", "path": "/data/p"}]);
    let err = store.json_patch("secrets", "shop", "s", &ops, false).unwrap_err();
    assert_eq!(err.code, 422);
    let ops = json!([{"op": "test", "path": "/data/p", "value": "cHc="}, {"op": "remove", "path": "/data/p"}]);
    assert_eq!(store.json_patch("secrets", "shop", "s", &ops, false).unwrap()["data"], json!({}));

    let rv = store.resource_version();
    let made = store.dry_run().create("configmaps", "shop", json!({"metadata": {"generateName": "cm-"}})).unwrap();
    assert!(made["metadata"]["name"].as_str().unwrap().starts_with("cm-"));
    assert_eq!(store.resource_version(), rv, "a dry run stores nothing");
    assert!(store.all("configmaps", "shop").is_empty());
}

#[test]
fn the_event_log_window_compacts_the_oldest_events() {
    let mut store = Store::new();
    store.set_event_window(3);
    for i in 0..5 {
        store.create("configmaps", "ns", json!({"metadata": {"name": format!("c{i}")}})).unwrap();
    }
    let now = store.resource_version();
    assert_eq!(store.events().count(), 3);
    assert_eq!(store.events_after(now - 3).unwrap().len(), 3);
    let err = store.events_after(now - 4).unwrap_err();
    assert_eq!((err.code, err.reason.as_str()), (410, "Expired"));
    store.compact();
    assert!(store.events_after(now).unwrap().is_empty());
    assert_eq!(store.events_after(now - 1).unwrap_err().code, 410);
}

#[test]
fn a_json_patch_test_for_null_passes_on_a_missing_path_as_the_api_server_does() {
    // evanphx/json-patch `test`: a missing path is null. kube-rs's finalizer
    // helper adds the first finalizer with exactly this patch.
    let mut store = Store::new();
    store
        .seed_object(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}}))
        .unwrap();
    let ops = json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                     {"op": "add", "path": "/metadata/finalizers", "value": ["x"]}]);
    let out = store.json_patch("configmaps", "ns", "c", &ops, false).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["x"]));
    // A test for a value that is not there still fails.
    let ops = json!([{"op": "test", "path": "/metadata/labels", "value": {"a": "b"}}]);
    assert_eq!(store.json_patch("configmaps", "ns", "c", &ops, false).unwrap_err().code, 422);
    // And a test for null where there is a value.
    let ops = json!([{"op": "test", "path": "/metadata/finalizers", "value": null}]);
    assert_eq!(store.json_patch("configmaps", "ns", "c", &ops, false).unwrap_err().code, 422);
}
