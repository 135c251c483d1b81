//! The fake API as a newcomer following the docs meets it: the real
//! `kubectl` (v1.32, at /usr/bin/kubectl) against [`fakeapi::spawn`], for
//! what kubectl shows that kube-rs would not (its AGE column).

use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use testkit::fakeapi::{self, FakeApi, Store};
use testkit::kubectl::Kubectl;

fn kubectl(api: &FakeApi) -> Kubectl {
    let k = Kubectl::new(&[]);
    let config = api.kubeconfig(k.dir.path());
    k.kubeconfig(config)
}

fn wall_secs() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs kubectl, failing the test (with its output) unless it succeeds.
fn ok(k: &Kubectl, args: &[&str], stdin: Option<&str>) -> (String, String) {
    let out = match stdin {
        Some(input) => k.run_with_stdin(args, input),
        None => k.run(args),
    };
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "kubectl {args:?} failed:\n{stdout}\n{stderr}");
    (stdout, stderr)
}

fn seconds_of(stamp: &str) -> i64 {
    stamp.parse::<Timestamp>().unwrap_or_else(|e| panic!("{stamp:?} is not a timestamp: {e}")).as_second()
}

#[test]
fn timestamps_are_the_wall_clock_however_many_writes_came_before() {
    // kube-apiserver stamps creationTimestamp and deletionTimestamp from
    // its wall clock at second resolution (several objects share a
    // second); kubectl prints AGE against its own clock.
    let api = fakeapi::spawn(Store::new()).unwrap();
    let k = kubectl(&api);
    // A stream of JSON documents (kubectl validates a `kind: List` against
    // /openapi/v2, which the fake does not serve).
    let docs: Vec<String> = (0..300)
        .map(|i| {
            let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i:03}")}});
            if i == 0 {
                cm["metadata"]["finalizers"] = json!(["example.com/hold"]);
            }
            cm.to_string()
        })
        .collect();
    let before = wall_secs();
    ok(&k, &["create", "-f", "-"], Some(&docs.join("\n")));
    ok(&k, &["delete", "configmap", "cm-000", "--wait=false"], None);
    let after = wall_secs();

    let (stamps, _) = ok(
        &k,
        &[
            "get",
            "configmaps",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name} {.metadata.creationTimestamp} {.metadata.deletionTimestamp}{"\n"}{end}"#,
        ],
        None,
    );
    let rows: Vec<Vec<&str>> = stamps.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), 300, "{stamps}");
    for row in &rows {
        let created = seconds_of(row[1]);
        assert!(before <= created && created <= after, "{row:?}: created outside [{before}, {after}]");
    }
    let deleted = rows.iter().find(|r| r[0] == "cm-000").and_then(|r| r.get(2)).expect("cm-000 is being deleted");
    let deleted = seconds_of(deleted);
    assert!(before <= deleted && deleted <= after, "deletionTimestamp {deleted} outside [{before}, {after}]");

    // What the newcomer saw: AGE, a few seconds at most, never `<invalid>`.
    let (table, _) = ok(&k, &["get", "configmaps", "--no-headers"], None);
    let limit = wall_secs() - before + 1;
    for line in table.lines() {
        let age = line.split_whitespace().last().unwrap_or_default();
        let secs: i64 =
            age.strip_suffix('s').and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("AGE {age:?}: {line}"));
        assert!(secs <= limit, "AGE {age} for an object made less than {limit}s ago: {line}");
    }
}
