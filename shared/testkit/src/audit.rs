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

/// The audit event the API server would send for one write the fake API
/// recorded ([`crate::fakeapi::Write`]): who, which verb, on what, with the
/// request and response bodies (RequestResponse level), its auditID
/// `audit-<resourceVersion>`.
pub fn from_write(w: &crate::fakeapi::Write) -> serde_json::Value {
    let api_version = if w.group.is_empty() { w.version.clone() } else { format!("{}/{}", w.group, w.version) };
    let prefix = if w.group.is_empty() { format!("/api/{}", w.version) } else { format!("/apis/{api_version}") };
    let ns = if w.namespace.is_empty() { String::new() } else { format!("/namespaces/{}", w.namespace) };
    let sub = w.subresource.as_deref().map(|s| format!("/{s}")).unwrap_or_default();
    let mut object_ref = serde_json::json!({
        "resource": w.resource, "namespace": w.namespace, "name": w.name,
        "apiGroup": w.group, "apiVersion": w.version,
    });
    if let Some(s) = &w.subresource {
        object_ref["subresource"] = s.clone().into();
    }
    let mut event = serde_json::json!({
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse",
        "auditID": format!("audit-{}", w.resource_version), "stage": "ResponseComplete", "verb": w.verb,
        "requestURI": format!("{prefix}{ns}/{}/{}{sub}", w.resource, w.name),
        "user": {"username": w.user},
        "objectRef": object_ref,
        "responseStatus": {"code": if w.verb == "create" { 201 } else { 200 }},
        "responseObject": w.response,
        "stageTimestamp": "2026-11-29T12:00:00.000000Z",
    });
    if let Some(request) = &w.request {
        event["requestObject"] = request.clone();
    }
    event
}
