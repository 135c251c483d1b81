//! `reverser-sidecar replay` against every scenario of the captured corpus
//! (vendored in `shared/testkit/fixtures/corpus`): the printed lines must
//! match `expected.jsonl` (only the keys present; `waited_ms` within 50 ms),
//! and be byte-identical run to run.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn corpus() -> PathBuf {
    testkit::fixtures::corpus()
}

fn scenarios(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        if d.join("timeline.jsonl").is_file() && d.join("expected.jsonl").is_file() {
            out.push(d.clone());
        }
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

fn replay(timeline: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_reverser-sidecar"))
        .args(["replay", "--timeline"])
        .arg(timeline)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}: {}", timeline.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn rows(text: &str) -> Vec<Value> {
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn replay_prints_every_expected_jsonl_of_the_corpus() {
    let root = corpus();
    let cases = scenarios(&root);
    assert!(!cases.is_empty(), "no scenarios under {}", root.display());
    let mut failures = Vec::new();
    for case in &cases {
        let got_text = replay(&case.join("timeline.jsonl"));
        let got = rows(&got_text);
        let expected = rows(&std::fs::read_to_string(case.join("expected.jsonl")).unwrap());
        let line_of = |v: &Value| v["line"].as_u64().unwrap();
        let mut problems = Vec::new();
        if got.len() != expected.len() {
            problems.push(format!("{} lines, expected {}", got.len(), expected.len()));
        }
        for e in &expected {
            let Some(g) = got.iter().find(|g| line_of(g) == line_of(e)) else {
                problems.push(format!("line {}: no output", line_of(e)));
                continue;
            };
            for (k, v) in e.as_object().unwrap() {
                let ok = if k == "waited_ms" {
                    g[k].as_f64().is_some_and(|w| (w - v.as_f64().unwrap()).abs() <= 50.0)
                } else {
                    &g[k] == v
                };
                if !ok {
                    problems.push(format!("line {}: {k} = {} (expected {v})", line_of(e), g[k]));
                }
            }
        }
        // Deterministic: the same timeline prints the same bytes.
        if replay(&case.join("timeline.jsonl")) != got_text {
            problems.push("output differs between two runs".into());
        }
        if !problems.is_empty() {
            failures.push(format!("{}: {}", case.strip_prefix(&root).unwrap().display(), problems.join("; ")));
        }
    }
    assert!(failures.is_empty(), "{} of {} scenarios differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
    eprintln!("{} corpus scenarios replayed as expected", cases.len());
}

/// The bytes every scenario printed before the compact fact index, recorded
/// from the binary of `main` at the time (`tests/golden/replay/<type>/<scenario>.jsonl`):
/// changes to the index or the resolver's data structures must print them
/// unchanged. Regenerate only for a deliberate change of the output.
#[test]
fn replay_prints_the_recorded_golden_bytes_for_every_scenario() {
    let root = corpus();
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/replay");
    let cases = scenarios(&root);
    let mut failures = Vec::new();
    for case in &cases {
        let rel = case.strip_prefix(&root).unwrap();
        let file = golden.join(rel).with_extension("jsonl");
        let want = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("golden {}: {e}", file.display()));
        if replay(&case.join("timeline.jsonl")) != want {
            failures.push(rel.display().to_string());
        }
    }
    assert!(failures.is_empty(), "replay output differs from the golden bytes for: {}", failures.join(", "));
    assert_eq!(
        cases.len(),
        std::fs::read_dir(&golden)
            .unwrap()
            .flatten()
            .map(|d| std::fs::read_dir(d.path()).unwrap().count())
            .sum::<usize>(),
        "one golden file per scenario"
    );
}

#[test]
fn a_malformed_timeline_is_a_clear_error_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.jsonl");
    std::fs::write(&p, "{\"at_ms\": 0, \"route\": \"r\", \"resource\": \"configmaps\", \"watch\": {\"type\": \"ADDED\", \"object\": {}}}\n{oops\n").unwrap();
    let out =
        Command::new(env!("CARGO_BIN_EXE_reverser-sidecar")).args(["replay", "--timeline"]).arg(&p).output().unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "nothing is half-applied");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("timeline line 2"), "{err}");
}
