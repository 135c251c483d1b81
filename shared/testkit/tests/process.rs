//! The `testkit` binary: the fake API as a process, driven by the real
//! kubectl, and the server that never answers.

use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use testkit::kubectl::Kubectl;
use testkit::process::Running;

const BIN: &str = env!("CARGO_BIN_EXE_testkit");

/// Starts `testkit <args>` and returns it with the first line it prints.
fn start(args: &[&str]) -> (Running, String) {
    let running = Running::start(std::path::Path::new(BIN), args);
    let line = running.first_line.clone();
    (running, line)
}

fn ok(out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "exit {:?}\n{stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    stdout
}

#[test]
fn fake_api_process_serves_its_seeds_and_crds_to_kubectl() {
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("seed.yaml");
    std::fs::write(
        &seed,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: shop, labels: {app: web}}\ndata: {k: v}\n\
         ---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: shop}}\n- apiVersion: configbutler.ai/v1alpha3\n  kind: GitTarget\n  \
         metadata: {name: mirror, namespace: shop}\n  spec: {branch: main, path: clusters/a, providerRef: {name: gh}}\n",
    )
    .unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let crds = testkit::fixtures::gitops_reverser_crds();
    let (_api, url) = start(&[
        "fake-api",
        "--crds",
        crds.to_str().unwrap(),
        "--seed",
        seed.to_str().unwrap(),
        "--kubeconfig-out",
        kubeconfig.to_str().unwrap(),
        "--namespace",
        "shop",
    ]);
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let kubectl = Kubectl::new(&[]).kubeconfig(&kubeconfig);

    let cms: Value = serde_json::from_str(&ok(&kubectl.run(&["get", "configmaps", "-o", "json"]))).unwrap();
    assert_eq!(cms["items"][0]["metadata"]["name"], "web");
    assert_eq!(cms["items"][0]["data"]["k"], "v");
    // The CRD from --crds: served, seeded, defaulted by its schema.
    let gt: Value = serde_json::from_str(&ok(&kubectl.run(&["get", "gittarget", "mirror", "-o", "json"]))).unwrap();
    assert_eq!(gt["spec"]["clusterProviderRef"]["name"], "default");
    let resources = ok(&kubectl.run(&["api-resources", "--api-group", "configbutler.ai", "-o", "name"]));
    assert!(resources.lines().any(|l| l == "gittargets.configbutler.ai"), "{resources}");
    // Writes through kubectl, checked against the schema.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: configbutler.ai/v1alpha3\nkind: GitTarget\nmetadata: {name: bad}\nspec: {branch: main, path: p}\n",
    )
    .unwrap();
    let out = kubectl.run(&["create", "--validate=false", "-f", bad.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("spec.providerRef: Required value"), "{stderr}");
    // A field the schema does not know: refused under kubectl's default
    // (fieldValidation=Strict) with the API server's words, warned about
    // under Warn, dropped under Ignore.
    let typo = dir.path().join("typo.yaml");
    std::fs::write(
        &typo,
        "apiVersion: configbutler.ai/v1alpha3\nkind: GitTarget\nmetadata: {name: typo}\n\
         spec: {branch: main, path: p, providerRef: {name: gh}, bogus: 1}\n",
    )
    .unwrap();
    let out = kubectl.run(&["apply", "-f", typo.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("strict decoding error: unknown field \"spec.bogus\""),
        "{stderr}"
    );
    let out = kubectl.run(&["apply", "--validate=warn", "-f", typo.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Warning: unknown field \"spec.bogus\""), "{out:?}");
    let spec = ok(&kubectl.run(&["get", "gittarget", "typo", "-o", "jsonpath={.spec}"]));
    assert!(!spec.contains("bogus"), "pruned: {spec}");
    // kubectl looks the namespace up before it reports a 404 (hence the seeded Namespace).
    let ns: Value = serde_json::from_str(&ok(&kubectl.run(&["get", "namespace", "shop", "-o", "json"]))).unwrap();
    assert_eq!(ns["status"]["phase"], "Active");
    let out = kubectl.run(&["get", "configmap", "nope"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("configmaps \"nope\" not found"), "{out:?}");
}

/// `kubectl apply` validates by default: kubectl reads `/openapi/v3`,
/// finds the writes take `fieldValidation`, and leaves validation to the
/// server, as against a real one. No `--validate=false` needed.
#[test]
fn kubectl_apply_works_without_validate_false() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (_api, _) = start(&["fake-api", "--kubeconfig-out", kubeconfig.to_str().unwrap()]);
    let kubectl = Kubectl::new(&[]).kubeconfig(&kubeconfig);
    let file = dir.path().join("cm.yaml");
    for (value, verb) in [("1", "created"), ("2", "configured")] {
        std::fs::write(
            &file,
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: web, namespace: default}}\ndata: {{k: '{value}'}}\n"
            ),
        )
        .unwrap();
        let out = ok(&kubectl.run(&["apply", "-f", file.to_str().unwrap()]));
        assert_eq!(out.trim(), format!("configmap/web {verb}"));
    }
    assert_eq!(ok(&kubectl.run(&["get", "configmap", "web", "-o", "jsonpath={.data.k}"])), "2");
    let out = ok(&kubectl.run(&["apply", "--dry-run=client", "-f", file.to_str().unwrap()]));
    assert!(out.contains("(dry run)"), "{out}");
}

#[test]
fn fake_api_process_refuses_a_bad_seed_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("seed.yaml");
    std::fs::write(&seed, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n").unwrap();
    let out = Command::new(BIN).args(["fake-api", "--seed", seed.to_str().unwrap()]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: --seed ") && stderr.contains("\"Widget\""), "{stderr}");
}

#[test]
fn fake_api_process_logs_every_resource_request_as_the_authorizer_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let (kubeconfig, log) = (dir.path().join("kubeconfig"), dir.path().join("requests.jsonl"));
    let (mut api, _url) = start(&[
        "fake-api",
        "--kubeconfig-out",
        kubeconfig.to_str().unwrap(),
        "--namespace",
        "shop",
        "--request-log",
        log.to_str().unwrap(),
    ]);
    let kubectl = Kubectl::new(&[]).kubeconfig(&kubeconfig);
    let cm = dir.path().join("cm.yaml");
    std::fs::write(&cm, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {k: v}\n").unwrap();
    ok(&kubectl.run(&["create", "--validate=false", "-f", cm.to_str().unwrap()]));
    ok(&kubectl.run(&["get", "configmap", "web", "-o", "name"]));
    ok(&kubectl.run(&["get", "configmaps", "-A", "-o", "name"]));
    ok(&kubectl.run(&["patch", "configmap", "web", "--type=merge", "-p", r#"{"data":{"k":"w"}}"#]));
    // The log is written at exit, on SIGTERM as a test would stop it.
    let term = Command::new("kill").args(["-TERM", &api.id().to_string()]).status().unwrap();
    assert!(term.success());
    assert!(api.wait().unwrap().success());
    let seen: Vec<Value> =
        std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let brief: Vec<(String, String, Value, Value)> = seen
        .iter()
        .filter(|r| r["resource"] == "configmaps")
        .map(|r| {
            (
                r["verb"].as_str().unwrap().into(),
                r["user"].as_str().unwrap().into(),
                r["namespace"].clone(),
                r["name"].clone(),
            )
        })
        .collect();
    let shop = Value::from("shop");
    let web = Value::from("web");
    assert_eq!(
        brief,
        [
            ("create".into(), "system:admin".into(), shop.clone(), Value::Null),
            ("get".into(), "system:admin".into(), shop.clone(), web.clone()),
            ("list".into(), "system:admin".into(), Value::Null, Value::Null),
            ("get".into(), "system:admin".into(), shop.clone(), web.clone()),
            ("patch".into(), "system:admin".into(), shop, web),
        ],
        "{seen:?}"
    );
    assert!(seen.iter().all(|r| r["group"] == "" && r.get("path").is_none()), "{seen:?}");
}

#[test]
fn hang_accepts_and_never_answers() {
    let (_hang, addr) = start(&["hang"]);
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    conn.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut buf = [0u8; 16];
    let err = conn.read(&mut buf).expect_err("no byte ever comes back");
    assert!(matches!(err.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut), "{err:?}");
}

#[test]
fn help_documents_every_flag() {
    let help = String::from_utf8(Command::new(BIN).args(["fake-api", "--help"]).output().unwrap().stdout).unwrap();
    for flag in [
        "--port",
        "--crds <DIR>",
        "--seed <FILE>",
        "--kubeconfig-out <PATH>",
        "--namespace",
        "--bookmark-interval-ms",
        "--event-window",
        "--unavailable-group",
        "--validate-vendored",
        "--request-log <FILE>",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
    let help = String::from_utf8(Command::new(BIN).args(["hang", "--help"]).output().unwrap().stdout).unwrap();
    assert!(help.contains("--port"), "{help}");
}

/// kubectl's typed generators send protobuf bodies (issue 29): the fake
/// API decodes those of ConfigMap, Secret, ServiceAccount and Namespace as
/// the API server does, and refuses another kind with a 415 naming the way
/// around.
#[test]
fn kubectl_create_configmap_and_its_siblings_work_against_the_fake_api() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (_api, _) = start(&["fake-api", "--kubeconfig-out", kubeconfig.to_str().unwrap()]);
    let kubectl = Kubectl::new(&[]).kubeconfig(&kubeconfig);
    assert_eq!(ok(&kubectl.run(&["create", "namespace", "shop"])).trim(), "namespace/shop created");
    let out = ok(&kubectl.run(&["create", "configmap", "web", "-n", "shop", "--from-literal=greeting=hello"]));
    assert_eq!(out.trim(), "configmap/web created");
    let cm: Value =
        serde_json::from_str(&ok(&kubectl.run(&["get", "configmap", "web", "-n", "shop", "-o", "json"]))).unwrap();
    assert_eq!(cm["data"], serde_json::json!({"greeting": "hello"}));
    assert!(cm["metadata"]["uid"].is_string(), "stored as any object is: {cm}");
    ok(&kubectl.run(&["create", "secret", "generic", "creds", "-n", "shop", "--from-literal=password=s3cret"]));
    let secret = ok(&kubectl.run(&["get", "secret", "creds", "-n", "shop", "-o", "jsonpath={.type} {.data.password}"]));
    assert_eq!(secret, "Opaque czNjcmV0");
    ok(&kubectl.run(&["create", "serviceaccount", "robot", "-n", "shop"]));
    ok(&kubectl.run(&["get", "serviceaccount", "robot", "-n", "shop"]));
    // Another kind: refused, clearly.
    let out = kubectl.run(&["create", "deployment", "web", "-n", "shop", "--image=nginx"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("decodes protobuf bodies of v1 ConfigMap") && err.contains("kubectl create -f"), "{err}");
}
