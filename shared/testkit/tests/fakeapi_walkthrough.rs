//! The fake API as a newcomer following the docs meets it: the real
//! `kubectl` (v1.32, at /usr/bin/kubectl) against [`fakeapi::spawn`], for
//! what kubectl shows and sends that kube-rs would not (its AGE column, its
//! `fieldValidation` parameter, how it prints the server's errors and
//! warnings), and raw HTTP where the exact wire form matters (the `Status`
//! bodies, the `Warning` headers).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
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

/// One raw HTTP exchange: the status code, the `Warning` headers and the
/// JSON body.
struct Reply {
    code: u16,
    warnings: Vec<String>,
    body: Value,
}

fn call(api: &FakeApi, method: &str, path: &str, content_type: &str, body: &Value) -> Reply {
    let mut s = TcpStream::connect(api.addr).unwrap();
    let payload = body.to_string();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: {content_type}\r\n\
         Content-Length: {}\r\n\r\n{payload}",
        payload.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap();
    let warnings = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.eq_ignore_ascii_case("warning"))
        .map(|(_, v)| v.trim().to_string())
        .collect();
    Reply { code, warnings, body: serde_json::from_str(body).unwrap_or(Value::Null) }
}

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
const JSON: &str = "application/json";

/// A Deployment with three fields no Deployment has (one under metadata,
/// one in a list item) beside maps of any keys (labels, annotations).
fn deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": "web", "any.key/x": "y"}, "labelz": {"a": "b"}},
        "spec": {
            "replicaz": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}, "annotations": {"free": "form"}},
                "spec": {"containers": [{"name": "web", "image": "nginx", "imagez": "x",
                                         "resources": {"limits": {"cpu": "1"}}}]}
            }
        }
    })
}

const UNKNOWN: [&str; 3] = ["metadata.labelz", "spec.replicaz", "spec.template.spec.containers[0].imagez"];

fn strict_decoding(kind: &str, version: &str, fields: &[&str]) -> String {
    let fields: Vec<String> = fields.iter().map(|f| format!("unknown field \"{f}\"")).collect();
    format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
        fields.join(", ")
    )
}

/// [`deployment`] without its unknown fields.
fn known_only(mut d: Value) -> Value {
    d["metadata"].as_object_mut().unwrap().remove("labelz");
    d["spec"].as_object_mut().unwrap().remove("replicaz");
    d["spec"]["template"]["spec"]["containers"][0].as_object_mut().unwrap().remove("imagez");
    d
}

/// The Deployment as stored: every unknown field dropped, the rest kept.
fn assert_pruned(stored: &Value) {
    assert!(stored.pointer("/metadata/labelz").is_none(), "{stored}");
    assert!(stored.pointer("/spec/replicaz").is_none(), "{stored}");
    assert!(stored.pointer("/spec/template/spec/containers/0/imagez").is_none(), "{stored}");
    assert_eq!(stored["metadata"]["labels"], json!({"app": "web", "any.key/x": "y"}));
    assert_eq!(stored["spec"]["template"]["metadata"]["annotations"], json!({"free": "form"}));
    assert_eq!(stored["spec"]["template"]["spec"]["containers"][0]["resources"], json!({"limits": {"cpu": "1"}}));
}

#[test]
fn field_validation_strict_warn_and_ignore_on_create_and_update_over_http() {
    let api = fakeapi::spawn(Store::validated()).unwrap();
    // Strict: 400 with the API server's Status; nothing stored.
    let r = call(&api, "POST", &format!("{DEPLOYMENTS}?fieldValidation=Strict"), JSON, &deployment("d"));
    assert_eq!(r.code, 400, "{}", r.body);
    assert_eq!(
        r.body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": strict_decoding("Deployment", "v1", &UNKNOWN), "reason": "BadRequest", "code": 400})
    );
    assert!(api.store.lock().unwrap().get("deployments", "default", "d").is_err(), "a refused create stores nothing");

    // Warn (also the default): created without them, one warning each.
    for (name, query) in [("warned", "?fieldValidation=Warn"), ("defaulted", "")] {
        let r = call(&api, "POST", &format!("{DEPLOYMENTS}{query}"), JSON, &deployment(name));
        assert_eq!(r.code, 201, "{}", r.body);
        let want: Vec<String> = UNKNOWN.iter().map(|f| format!(r#"299 - "unknown field \"{f}\"""#)).collect();
        assert_eq!(r.warnings, want);
        assert_pruned(&r.body);
        assert_pruned(&api.store.lock().unwrap().get("deployments", "default", name).unwrap());
    }

    // Ignore: dropped silently.
    let r = call(&api, "POST", &format!("{DEPLOYMENTS}?fieldValidation=Ignore"), JSON, &deployment("ignored"));
    assert_eq!((r.code, r.warnings.len()), (201, 0), "{}", r.body);
    assert_pruned(&r.body);

    // A value the server does not know: 422 on the options.
    let r = call(&api, "POST", &format!("{DEPLOYMENTS}?fieldValidation=Loose"), JSON, &deployment("x"));
    assert_eq!((r.code, r.body["reason"].as_str()), (422, Some("Invalid")), "{}", r.body);
    assert_eq!(
        r.body["message"],
        r#"CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loose": supported values: "", "Ignore", "Strict", "Warn""#
    );

    // PUT, of the object and of its status: decoded as strictly.
    let mut put = deployment("ignored");
    put["status"] = json!({"replicas": 0, "readyReplicaz": 1});
    for path in [format!("{DEPLOYMENTS}/ignored"), format!("{DEPLOYMENTS}/ignored/status")] {
        let r = call(&api, "PUT", &format!("{path}?fieldValidation=Strict"), JSON, &put);
        assert_eq!(r.code, 400, "{path}: {}", r.body);
        let mut fields = UNKNOWN.to_vec();
        fields.push("status.readyReplicaz");
        assert_eq!(r.body["message"], strict_decoding("Deployment", "v1", &fields), "{path}");
    }
    let r = call(&api, "PUT", &format!("{DEPLOYMENTS}/ignored?fieldValidation=Warn"), JSON, &put);
    assert_eq!((r.code, r.warnings.len()), (200, 4), "{}", r.body);
    assert_pruned(&r.body);

    // Core objects: a ConfigMap's data and a Secret's stringData are maps of
    // any key; an unknown top-level field is not.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                    "data": {"anything": "goes", "a.b": "c"}, "datta": {"k": "v"}});
    let r = call(&api, "POST", "/api/v1/namespaces/default/configmaps?fieldValidation=Strict", JSON, &cm);
    assert_eq!(r.body["message"], strict_decoding("ConfigMap", "v1", &["datta"]));
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                        "stringData": {"password": "pw"}, "type": "Opaque"});
    let r = call(&api, "POST", "/api/v1/namespaces/default/secrets?fieldValidation=Strict", JSON, &secret);
    assert_eq!((r.code, r.warnings.len()), (201, 0), "{}", r.body);
}

#[test]
fn field_validation_checks_what_a_patch_makes() {
    let api = fakeapi::spawn(Store::validated()).unwrap();
    let made = call(&api, "POST", &format!("{DEPLOYMENTS}?fieldValidation=Ignore"), JSON, &deployment("d"));
    assert_eq!(made.code, 201, "{}", made.body);
    let path = format!("{DEPLOYMENTS}/d?fieldValidation=Strict");
    let unknown = r#"strict decoding error: unknown field "spec.replicaz""#;

    // Merge and JSON patches: 422 on the field `patch`, the patched object
    // as its value (patch.go, jsonPatcher).
    let merge = json!({"spec": {"replicaz": 3}});
    let json_patch = json!([{"op": "add", "path": "/spec/replicaz", "value": 3}]);
    for (ct, body) in [("application/merge-patch+json", &merge), ("application/json-patch+json", &json_patch)] {
        let r = call(&api, "PATCH", &path, ct, body);
        assert_eq!((r.code, r.body["reason"].as_str()), (422, Some("Invalid")), "{ct}: {}", r.body);
        let cause = &r.body["details"]["causes"][0];
        assert_eq!(cause["field"], "patch", "{ct}");
        let message = cause["message"].as_str().unwrap();
        assert!(message.starts_with("Invalid value: \"{") && message.ends_with(unknown), "{ct}: {message}");
        assert_eq!(r.body["message"], format!(" \"\" is invalid: patch: {message}"), "{ct}");
    }
    // A strategic merge patch: the patch map as Go prints it.
    let r = call(&api, "PATCH", &path, "application/strategic-merge-patch+json", &merge);
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(
        r.body["details"]["causes"][0]["message"],
        format!("Invalid value: \"map[spec:map[replicaz:3]]\": {unknown}")
    );
    // Warn: applied without it, with the warning.
    let r =
        call(&api, "PATCH", &format!("{DEPLOYMENTS}/d?fieldValidation=Warn"), "application/merge-patch+json", &merge);
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.warnings, vec![r#"299 - "unknown field \"spec.replicaz\"""#.to_string()]);
    assert!(r.body.pointer("/spec/replicaz").is_none(), "{}", r.body);
    // A patch that touches only known fields passes Strict.
    let r = call(&api, "PATCH", &path, "application/merge-patch+json", &json!({"spec": {"replicas": 3}}));
    assert_eq!((r.code, r.warnings.len()), (200, 0), "{}", r.body);
    assert_eq!(r.body["spec"]["replicas"], 3);

    // Server-side apply: a field the type does not declare is refused
    // whatever fieldValidation says (structured-merge-diff's typed patch).
    let mut applied = known_only(deployment("d"));
    applied["spec"]["replicaz"] = json!(2);
    let r = call(
        &api,
        "PATCH",
        &format!("{DEPLOYMENTS}/d?fieldManager=me&fieldValidation=Ignore"),
        "application/apply-patch+yaml",
        &applied,
    );
    assert_eq!(r.code, 500, "{}", r.body);
    assert_eq!(
        r.body["message"],
        "failed to create typed patch object (default/d; apps/v1, Kind=Deployment): .spec.replicaz: field not declared in schema"
    );
}

#[test]
fn field_validation_of_custom_resources_walks_the_crd_schema_and_object_meta() {
    let api = fakeapi::spawn(Store::validated()).unwrap();
    let tasks = "/apis/tatara.dev/v1alpha1/namespaces/default/tasks";
    let task = json!({"apiVersion": "tatara.dev/v1alpha1", "kind": "Task",
        "metadata": {"name": "t", "labels": {"a": "b"}, "finalizerz": ["x"]},
        "spec": {"projectRef": "p", "goal": "g", "goalz": "h"}});
    let r = call(&api, "POST", &format!("{tasks}?fieldValidation=Strict"), JSON, &task);
    assert_eq!(r.code, 400, "{}", r.body);
    assert_eq!(r.body["message"], strict_decoding("Task", "v1alpha1", &["metadata.finalizerz", "spec.goalz"]));
    let r = call(&api, "POST", tasks, JSON, &task);
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
    assert!(r.body.pointer("/metadata/finalizerz").is_none() && r.body.pointer("/spec/goalz").is_none(), "{}", r.body);
    assert_eq!(r.body["metadata"]["labels"], json!({"a": "b"}));
}

#[test]
fn kubectl_asks_for_strict_validation_and_prints_the_servers_verdict() {
    let api = fakeapi::spawn(Store::validated()).unwrap();
    let k = kubectl(&api);
    let yaml = |name: &str| deployment(name).to_string();
    let posts = |api: &FakeApi| -> Vec<String> {
        api.requests().iter().filter(|r| r.method == "POST").map(|r| r.query.clone()).collect()
    };

    // `kubectl create` (--validate=strict, the default): refused.
    let out = k.run_with_stdin(&["create", "-f", "-"], &yaml("d"));
    assert!(!out.status.success());
    assert_eq!(
        text(&out.stderr),
        format!(
            "Error from server (BadRequest): error when creating \"STDIN\": {}\n",
            strict_decoding("Deployment", "v1", &UNKNOWN)
        )
    );
    assert!(posts(&api).last().is_some_and(|q| q.contains("fieldValidation=Strict")), "{:?}", posts(&api));
    assert!(api.store.lock().unwrap().get("deployments", "default", "d").is_err());

    // --validate=warn: created, each unknown field a warning.
    let (stdout, stderr) = ok(&k, &["create", "--validate=warn", "-f", "-"], Some(&yaml("d")));
    assert_eq!(stdout, "deployment.apps/d created\n");
    let want: String = UNKNOWN.iter().map(|f| format!("Warning: unknown field \"{f}\"\n")).collect();
    assert_eq!(stderr, want);
    assert!(posts(&api).last().is_some_and(|q| q.contains("fieldValidation=Warn")), "{:?}", posts(&api));
    assert_pruned(&api.store.lock().unwrap().get("deployments", "default", "d").unwrap());

    // --validate=false: created, not a word.
    let (_, stderr) = ok(&k, &["create", "--validate=false", "-f", "-"], Some(&yaml("quiet")));
    assert_eq!(stderr, "");
    assert!(posts(&api).last().is_some_and(|q| q.contains("fieldValidation=Ignore")), "{:?}", posts(&api));

    // `kubectl apply` to an existing object patches it (strategic merge):
    // the patch is refused.
    let out = k.run_with_stdin(&["apply", "-f", "-"], &yaml("d"));
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("The request is invalid: patch: Invalid value: \"map[")
            && stderr.contains("strict decoding error: unknown field \"metadata.labelz\""),
        "{stderr}"
    );
    // `kubectl replace` PUTs it: refused as a create is.
    let out = k.run_with_stdin(&["replace", "-f", "-"], &yaml("d"));
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains(&strict_decoding("Deployment", "v1", &UNKNOWN)), "{}", text(&out.stderr));

    // A custom resource: its CRD's schema says what is unknown.
    let task =
        "apiVersion: tatara.dev/v1alpha1\nkind: Task\nmetadata: {name: t}\nspec: {projectRef: p, goal: g, goalz: h}\n";
    let out = k.run_with_stdin(&["apply", "-f", "-"], task);
    assert!(!out.status.success());
    assert_eq!(
        text(&out.stderr),
        format!(
            "Error from server (BadRequest): error when creating \"STDIN\": {}\n",
            strict_decoding("Task", "v1alpha1", &["spec.goalz"])
        )
    );
    // What the schema knows is fine.
    let (stdout, stderr) = ok(&k, &["apply", "-f", "-"], Some(&task.replace(", goalz: h", "")));
    assert_eq!((stdout.as_str(), stderr.as_str()), ("task.tatara.dev/t created\n", ""));

    // A valid Deployment applied, changed and applied again: the second
    // apply's strategic merge patch carries `$setElementOrder/containers`,
    // a directive to the merge, not an unknown field.
    let mut good = known_only(deployment("good"));
    let (stdout, stderr) = ok(&k, &["apply", "-f", "-"], Some(&good.to_string()));
    assert_eq!((stdout.as_str(), stderr.as_str()), ("deployment.apps/good created\n", ""));
    good["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
    let (stdout, stderr) = ok(&k, &["apply", "-f", "-"], Some(&good.to_string()));
    assert_eq!((stdout.as_str(), stderr.as_str()), ("deployment.apps/good configured\n", ""));
    let stored = api.store.lock().unwrap().get("deployments", "default", "good").unwrap();
    assert_eq!(stored["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:2");
    assert!(stored["spec"]["template"]["spec"].get("$setElementOrder/containers").is_none(), "{stored}");
}
