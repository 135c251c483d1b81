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

fn update(at_ms: u64, user: &str, rv: u64, micros: u64) -> String {
    format!(
        r#"{{"at_ms": {at_ms}, "route": "lab", "audit": {{"stage": "ResponseComplete", "verb": "update", "auditID": "{user}-{rv}", "user": {{"username": "{user}"}}, "objectRef": {{"resource": "configmaps", "namespace": "ns", "name": "cm", "apiVersion": "v1"}}, "responseStatus": {{"code": 200}}, "responseObject": {{"metadata": {{"name": "cm", "namespace": "ns", "uid": "u1", "resourceVersion": "{rv}"}}}}, "stageTimestamp": "2026-11-29T12:00:00.{micros:06}Z"}}}}"#
    )
}

const WATCH_DELETED: &str = r#"{"at_ms": 1000, "route": "lab", "group": "", "version": "v1", "resource": "configmaps", "watch": {"type": "DELETED", "object": {"metadata": {"name": "cm", "namespace": "ns", "uid": "u1", "resourceVersion": "7"}}}}"#;

// The probe's case, as a timeline: alice writes rv 5, bob rv 6, the API
// server re-delivers alice's batch, the object is deleted with no delete
// evidence. The removal falls back to bob, the last writer; so it does when
// the two batches arrive the other way round.
#[test]
fn a_redelivered_or_reordered_batch_never_changes_the_author_of_a_removal() {
    let expected =
        vec![r#"{"line":4,"action":"delete","tier":"latest","author":"bob","actor_kind":"user","waited_ms":3000}"#];
    let redelivered = format!(
        "{}\n{}\n{}\n{WATCH_DELETED}\n",
        update(0, "alice", 5, 1),
        update(100, "bob", 6, 2),
        update(200, "alice", 5, 1)
    );
    assert_eq!(run_text(&redelivered), expected);
    let reordered = format!("{}\n{}\n\n{WATCH_DELETED}\n", update(0, "bob", 6, 2), update(100, "alice", 5, 1));
    assert_eq!(run_text(&reordered), expected);
}

/// The records of `timeline` with every audit record delivered again: right
/// after itself, and once more just before the next watch record.
fn with_redeliveries(records: &[(usize, Record)]) -> Vec<(usize, Record)> {
    let mut out = Vec::new();
    let mut pending: Vec<Record> = Vec::new();
    // Line numbers past the file's, so they never collide with a watch line.
    let mut extra = 1_000_000;
    for (line, rec) in records {
        if let Record::Watch { at_ms, .. } = rec {
            for mut p in pending.drain(..) {
                if let Record::Audit { at_ms: a, .. } = &mut p {
                    *a = *at_ms;
                }
                extra += 1;
                out.push((extra, p));
            }
        }
        out.push((*line, rec.clone()));
        if let Record::Audit { .. } = rec {
            extra += 1;
            out.push((extra, rec.clone()));
            pending.push(rec.clone());
        }
    }
    out
}

/// Consecutive audit records of one millisecond, in reverse order.
fn with_reordered_batches(records: &[(usize, Record)]) -> Vec<(usize, Record)> {
    let mut out: Vec<(usize, Record)> = Vec::new();
    let mut run: Vec<(usize, Record)> = Vec::new();
    for (line, rec) in records {
        let joins = matches!(rec, Record::Audit { .. }) && run.last().is_none_or(|(_, r)| r.at_ms() == rec.at_ms());
        if !joins {
            out.extend(run.drain(..).rev());
        }
        if matches!(rec, Record::Audit { .. }) {
            run.push((*line, rec.clone()));
        } else {
            out.push((*line, rec.clone()));
        }
    }
    out.extend(run.drain(..).rev());
    out
}

// Every captured scenario prints exactly the same lines when the API server
// re-delivers each of its audit batches, or delivers one millisecond's
// batches in another order.
#[test]
fn the_corpus_is_unchanged_by_redelivered_and_reordered_audit_batches() {
    let root = testkit::fixtures::corpus();
    let mut timelines = Vec::new();
    let mut stack = vec![root];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else if e.file_name() == "timeline.jsonl" {
                timelines.push(e.path());
            }
        }
    }
    assert!(timelines.len() >= 18, "the corpus has its scenarios: {timelines:?}");
    let print = |records: Vec<(usize, Record)>| -> Vec<String> {
        run(records, ReplayOptions::default()).0.iter().map(|l| serde_json::to_string(l).unwrap()).collect()
    };
    for path in timelines {
        let records = parse_timeline(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let original = print(records.clone());
        assert_eq!(print(with_redeliveries(&records)), original, "{} with re-deliveries", path.display());
        assert_eq!(print(with_reordered_batches(&records)), original, "{} reordered", path.display());
    }
}
