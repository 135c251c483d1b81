use serde_json::json;

use super::*;

fn event(v: Value) -> Event {
    let mut base = json!({
        "stage": "ResponseComplete",
        "verb": "update",
        "auditID": "a-1",
        "requestURI": "/api/v1/namespaces/ns/configmaps/cm",
        "user": {"username": "alice"},
        "objectRef": {"resource": "configmaps", "namespace": "ns", "name": "cm", "apiVersion": "v1"},
        "responseStatus": {"code": 200},
        "responseObject": {"metadata": {"name": "cm", "namespace": "ns", "uid": "u-1", "resourceVersion": "7"}},
        "stageTimestamp": "2026-06-25T12:00:00.700000Z"
    });
    merge(&mut base, v);
    serde_json::from_value(base).unwrap()
}

fn merge(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                if v.is_null() {
                    a.remove(&k);
                } else {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (a, b) => *a = b,
    }
}

fn fact_of(p: Published) -> Fact {
    match p {
        Published::Fact { fact, .. } => fact,
        other => panic!("expected a fact, got {other:?}"),
    }
}

#[test]
fn accept_gate_counts_every_rejection_reason() {
    // "stage is ResponseComplete"
    assert_eq!(publish("r", &event(json!({"stage": "RequestReceived"}))), Published::Rejected(Rejection::Stage));
    // "verb is a mutation"
    assert_eq!(publish("r", &event(json!({"verb": "get"}))), Published::Rejected(Rejection::Verb));
    // "responseStatus.code is absent or < 300 (a 409 conflict changed nothing)"
    assert_eq!(publish("r", &event(json!({"responseStatus": {"code": 409}}))), Published::Rejected(Rejection::Status));
    assert!(matches!(publish("r", &event(json!({"responseStatus": null}))), Published::Fact { .. }));
    // Beyond the reference (issue 30): only a 2xx is a change.
    for code in [123, -1, 199, 300] {
        let e = event(json!({"responseStatus": {"code": code}}));
        assert_eq!(publish("r", &e), Published::Rejected(Rejection::Status), "{code}");
    }
    assert!(matches!(publish("r", &event(json!({"responseStatus": {"code": 201}}))), Published::Fact { .. }));
    // "the requestURI query has no dryRun=All"
    let dry = event(json!({"requestURI": "/api/v1/namespaces/ns/configmaps?fieldManager=x&dryRun=All"}));
    assert_eq!(publish("r", &dry), Published::Rejected(Rejection::DryRun));
    // "a write whose request object's resourceVersion equals the response object's"
    let noop = event(json!({"requestObject": {"metadata": {"resourceVersion": "7"}}}));
    assert_eq!(publish("r", &noop), Published::Rejected(Rejection::NoOpWrite));
    let changed = event(json!({"requestObject": {"metadata": {"resourceVersion": "6"}}}));
    assert!(matches!(publish("r", &changed), Published::Fact { .. }));
    // "not on a subresource other than scale"
    let status = event(json!({"objectRef": {"subresource": "status"}}));
    assert_eq!(publish("r", &status), Published::Rejected(Rejection::Subresource));
    let scale = event(json!({"objectRef": {"subresource": "scale"}}));
    assert!(matches!(publish("r", &scale), Published::Fact { .. }));
}

#[test]
fn publish_gates_resource_user_and_name() {
    assert_eq!(publish("r", &event(json!({"objectRef": null}))), Published::Rejected(Rejection::NoResource));
    assert_eq!(
        publish("r", &event(json!({"objectRef": {"resource": ""}}))),
        Published::Rejected(Rejection::NoResource)
    );
    assert_eq!(publish("r", &event(json!({"user": {"username": ""}}))), Published::Rejected(Rejection::NoUser));
    // No name in objectRef and none in either body: the name gate.
    let nameless = event(json!({"verb": "create", "objectRef": {"name": ""}, "responseObject": null}));
    assert_eq!(publish("r", &nameless), Published::Rejected(Rejection::NoName));
    assert_eq!(Rejection::NoName.result(), "no_attribution_fact");
    assert_eq!(Rejection::DryRun.result(), "rejected");
}

#[test]
fn effective_user_is_the_impersonated_one_with_claims() {
    let ev = event(json!({
        "impersonatedUser": {"username": "bob", "extra": {
            "configbutler.ai/claims/display-name": ["Bob B"],
            "configbutler.ai/claims/email": ["bob@example.com", "other@example.com"]}}
    }));
    let f = fact_of(publish("r", &ev));
    assert_eq!((f.author.as_str(), f.display_name.as_str(), f.email.as_str()), ("bob", "Bob B", "bob@example.com"));
    // An empty impersonated user falls back to the user.
    let ev = event(json!({"impersonatedUser": {"username": ""}}));
    assert_eq!(fact_of(publish("r", &ev)).author, "alice");
}

#[test]
fn identity_backfills_from_the_bodies_in_verb_order() {
    // generateName create: objectRef has no name; the response carries it.
    let ev = event(json!({"verb": "create", "objectRef": {"name": ""},
        "responseObject": {"metadata": {"name": "gen-x1", "uid": "u-9", "resourceVersion": 41001}}}));
    let f = fact_of(publish("r", &ev));
    assert_eq!((f.name.as_str(), f.uid.as_str(), f.resource_version.as_str()), ("gen-x1", "u-9", "41001"));
    // A delete prefers the request object over the response object.
    let ev = event(json!({"verb": "delete", "objectRef": {"name": ""},
        "requestObject": {"metadata": {"name": "from-request", "uid": "u-req"}},
        "responseObject": {"metadata": {"name": "from-response", "uid": "u-resp", "resourceVersion": "9"}}}));
    let f = fact_of(publish("r", &ev));
    assert_eq!((f.name.as_str(), f.uid.as_str(), f.resource_version.as_str()), ("from-request", "u-req", "9"));
    // resourceVersion falls back to objectRef's when no response carries one.
    let ev = event(
        json!({"verb": "delete", "objectRef": {"resourceVersion": "5"}, "responseObject": {"kind": "Status", "metadata": null}}),
    );
    let f = fact_of(publish("r", &ev));
    assert_eq!((f.uid.as_str(), f.resource_version.as_str()), ("", "5"));
}

#[test]
fn collection_fact_keeps_selector_and_uid_set() {
    let ev = event(json!({
        "verb": "deletecollection",
        "requestURI": "/api/v1/namespaces/ns/configmaps?labelSelector=app%3Dweb%2Ctier+in+%28a%29",
        "objectRef": {"name": null},
        "responseObject": {"kind": "ConfigMapList", "metadata": {"resourceVersion": "50"},
            "items": [{"metadata": {"uid": "u1", "resourceVersion": "1"}}, {"metadata": {"uid": "u2"}}]}
    }));
    let Published::Fact { scope, fact, without_uidset } = publish("lab", &ev) else { panic!() };
    assert_eq!(scope.route, "lab");
    assert_eq!(fact.label_selector, "app=web,tier in (a)");
    assert_eq!(fact.uids, Some(vec!["u1".to_string(), "u2".to_string()]));
    assert_eq!((fact.uid.as_str(), fact.name.as_str(), fact.resource_version.as_str()), ("", "", ""));
    assert_eq!(without_uidset, None);
}

#[test]
fn collection_without_body_or_past_the_cap_has_no_uid_set() {
    let ev = event(json!({"verb": "deletecollection", "objectRef": {"name": null}, "responseObject": null}));
    let Published::Fact { fact, without_uidset, .. } = publish("r", &ev) else { panic!() };
    assert_eq!((fact.uids, without_uidset), (None, Some("no_uids")));

    let items: Vec<Value> = (0..=COLLECTION_UID_CAP).map(|i| json!({"metadata": {"uid": format!("u{i}")}})).collect();
    let ev =
        event(json!({"verb": "deletecollection", "objectRef": {"name": null}, "responseObject": {"items": items}}));
    let Published::Fact { fact, without_uidset, .. } = publish("r", &ev) else { panic!() };
    assert_eq!((fact.uids, without_uidset), (None, Some("uid_cap")));
}

#[test]
fn event_list_and_lone_event_decode_and_garbage_is_a_clear_error() {
    let list = EventList::from_json(
        br#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"verb":"create","unknown":1}]}"#,
    )
    .unwrap();
    assert_eq!(list.items.len(), 1);
    let lone = EventList::from_json(br#"{"verb":"create","stage":"ResponseComplete"}"#).unwrap();
    assert_eq!(lone.items[0].verb, "create");
    let err = EventList::from_json(b"{not json").unwrap_err();
    assert!(err.to_string().contains("audit payload"), "{err}");
}

fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

fn item(audit_id: &str, extra: &str) -> String {
    format!(
        r#"{{"auditID":"{audit_id}","stage":"ResponseComplete","verb":"update","user":{{"username":"alice"}},"objectRef":{{"resource":"configmaps","namespace":"ns","name":"cm-{audit_id}","apiVersion":"v1"}},"responseObject":{{"metadata":{{"name":"cm-{audit_id}","uid":"u-{audit_id}","resourceVersion":"7"}}}}{extra}}}"#
    )
}

// "Decode item by item: keep every usable event, count and log each refused
// one with its auditID; 400 only when the body is no EventList."
#[test]
fn a_bad_item_is_refused_alone_and_every_usable_event_is_kept() {
    let deep = format!(r#","requestObject":{{"metadata":{{"name":"cm-deep"}},"spec":{}}}"#, nested(300));
    let body = format!(
        r#"{{"kind":"EventList","items":[{},{},{},{},{},5]}}"#,
        item("good-1", ""),
        // A wrong-typed field refuses its event.
        item("typed", r#","impersonatedUser":"alice""#),
        // Nesting past serde_json's 128 levels in a body: skipped unbuilt.
        item("deep", &deep),
        // A JSON Patch request body is an array: read as no body.
        item("json-patch", r#","requestObject":[{"op":"add","path":"/data/x","value":"1"}]"#),
        item("good-2", ""),
    );
    let d = EventList::decode(body.as_bytes()).unwrap();
    let kept: Vec<&str> = d.events.iter().map(|e| e.audit_id.as_str()).collect();
    assert_eq!(kept, ["good-1", "deep", "json-patch", "good-2"]);
    let refused: Vec<(usize, &str, &str, &str)> =
        d.refused.iter().map(|r| (r.index, r.audit_id.as_str(), r.verb.as_str(), r.resource.as_str())).collect();
    assert_eq!(refused, [(1, "typed", "update", "configmaps"), (5, "", "", "")]);
    assert!(d.refused[0].error.contains("invalid type"), "{}", d.refused[0].error);
    // The kept events publish as ever.
    assert!(d.events.iter().all(|e| matches!(publish("lab", e), Published::Fact { .. })));
    // The strict decoder names the first refused item.
    let err = EventList::from_json(body.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("audit event 1 (auditID \"typed\")"), "{err}");
}

#[test]
fn only_a_body_that_is_no_event_list_is_an_error() {
    for bad in [&br#"{"items": 5}"#[..], b"[]", b"null", b"123", b"", b"{not json", &[0xff, 0xfe][..]] {
        assert!(EventList::decode(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
    }
    let empty = EventList::decode(br#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1"}"#).unwrap();
    assert!(empty.events.is_empty() && empty.refused.is_empty());
    // A deep body in a lone Event does not refuse it either.
    let lone = item("lone", &format!(r#","requestObject":{}"#, nested(500)));
    assert_eq!(EventList::decode(lone.as_bytes()).unwrap().events[0].audit_id, "lone");
}
