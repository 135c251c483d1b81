//! `GET /v1/explain` on the ops listener (what `kubectl reverser why --pod`
//! reaches through the API server's pod proxy) answers with the same
//! content as the gRPC `Explain`, through the real binary.

mod support;

use rules::attribution::why::{ExplainParams, Explanation};
use support::*;

fn body(response: &str) -> &str {
    response.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_json_endpoint_explains_what_grpc_explains() {
    let s = Sidecar::start("serve", &["--follow", "lab:configmaps"]);
    let batch = event_list(vec![
        audit_event("delete", "carol", "ns", "gone", "u-2", "20"),
        audit_event("patch", "system:serviceaccount:kube-system:cleaner", "ns", "gone", "u-2", "20"),
    ]);
    assert_eq!(s.post("/audit-webhook/lab", &batch).0, 200);
    let params = ExplainParams {
        route: "lab".into(),
        version: "v1".into(),
        resource: "configmaps".into(),
        namespace: "ns".into(),
        name: "gone".into(),
        uid: "u-2".into(),
        resource_version: "20".into(),
        removal: true,
        ..ExplainParams::default()
    };
    let grpc = s.client().await.explain(runtime::proto::ExplainRequest::from(&params)).await.unwrap().into_inner();
    let grpc = Explanation::try_from(grpc).unwrap();
    let response = http_get(s.metrics_port, &format!("/v1/explain?{}", params.to_query_string()));
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let json: Explanation = serde_json::from_str(body(&response)).unwrap();
    assert_eq!(json, grpc);
    assert_eq!(json.winner().map(|w| w.fact.fact.author.as_str()), Some("carol"));
    assert!(json.following);
    assert_eq!(json.facts_for_type, 2);
    // A write asked at the same version: the same facts, another winner.
    let write = ExplainParams { removal: false, ..params.clone() };
    let response = http_get(s.metrics_port, &format!("/v1/explain?{}", write.to_query_string()));
    let json: Explanation = serde_json::from_str(body(&response)).unwrap();
    assert_eq!(json.winner().map(|w| w.fact.fact.verb.as_str()), Some("patch"));
    // No resource: a 400 saying what is missing.
    let response = http_get(s.metrics_port, "/v1/explain?route=lab&name=gone");
    assert!(response.starts_with("HTTP/1.1 400") && response.contains("resource=configmaps"), "{response}");
}
