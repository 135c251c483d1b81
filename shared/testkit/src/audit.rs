//! Audit events as the API server sends them to the audit webhook.

/// One audit event for a ConfigMap as the API server sends it
/// (audit.k8s.io/v1, RequestResponse, ResponseComplete), its auditID
/// `audit-<verb>-<name>-<rv>`.
pub fn audit_event(verb: &str, user: &str, ns: &str, name: &str, uid: &str, rv: &str) -> serde_json::Value {
    serde_json::json!({
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse",
        "auditID": format!("audit-{verb}-{name}-{rv}"), "stage": "ResponseComplete", "verb": verb,
        "requestURI": format!("/api/v1/namespaces/{ns}/configmaps/{name}"),
        "user": {"username": user},
        "objectRef": {"resource": "configmaps", "namespace": ns, "name": name, "apiVersion": "v1"},
        "responseStatus": {"code": 200},
        "responseObject": {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": name, "namespace": ns, "uid": uid, "resourceVersion": rv}},
        "stageTimestamp": "2026-11-29T12:00:00.000000Z"
    })
}

/// An `EventList` body, as the audit webhook posts it.
pub fn event_list(items: Vec<serde_json::Value>) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": items}))
        .expect("JSON values serialize")
}
