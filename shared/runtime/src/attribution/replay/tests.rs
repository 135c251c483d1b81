use rules::attribution::replay::parse_timeline;

use super::*;

fn run_text(text: &str) -> Vec<String> {
    let (lines, _) = run(parse_timeline(text).unwrap(), ReplayOptions::default());
    lines.iter().map(|l| serde_json::to_string(l).unwrap()).collect()
}

const AUDIT_CREATE: &str = r#"{"at_ms": 700, "route": "lab", "audit": {"stage": "ResponseComplete", "verb": "create", "auditID": "a1", "user": {"username": "system:admin"}, "objectRef": {"resource": "configmaps", "namespace": "ns", "name": "cm", "apiVersion": "v1"}, "responseStatus": {"code": 201}, "responseObject": {"metadata": {"name": "cm", "namespace": "ns", "uid": "u1", "resourceVersion": 41001}}}}"#;
const WATCH_ADDED: &str = r#"{"at_ms": 0, "route": "lab", "group": "", "version": "v1", "resource": "configmaps", "watch": {"type": "ADDED", "object": {"metadata": {"name": "cm", "namespace": "ns", "uid": "u1", "resourceVersion": 41001}}}}"#;

#[test]
fn a_late_audit_batch_resolves_the_waiting_watch_event() {
    let out = run_text(&format!("{WATCH_ADDED}\n{AUDIT_CREATE}\n"));
    assert_eq!(
        out,
        vec![
            r#"{"line":1,"action":"write","tier":"exact","author":"system:admin","actor_kind":"user","waited_ms":700}"#
        ]
    );
}

#[test]
fn the_same_route_is_required() {
    let other_route = AUDIT_CREATE.replace(r#""route": "lab""#, r#""route": "elsewhere""#);
    let out = run_text(&format!("{WATCH_ADDED}\n{other_route}\n"));
    assert_eq!(
        out,
        vec![r#"{"line":1,"action":"write","tier":"absent","author":null,"actor_kind":"none","waited_ms":3000}"#]
    );
}

#[test]
fn bookmarks_are_ignored_and_blank_lines_keep_numbering() {
    let bm = r#"{"at_ms": 0, "route": "lab", "group": "", "version": "v1", "resource": "configmaps", "watch": {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "5"}}}}"#;
    assert_eq!(run_text(&format!("\n{bm}\n")), vec![r#"{"line":2,"action":"ignored"}"#]);
}

#[test]
fn replay_is_deterministic() {
    let text = format!("{WATCH_ADDED}\n{AUDIT_CREATE}\n");
    let a = run_text(&text);
    for _ in 0..5 {
        assert_eq!(run_text(&text), a);
    }
}
