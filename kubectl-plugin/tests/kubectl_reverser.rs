//! `kubectl reverser` through the real `kubectl`: kubectl finds our plugin on
//! the PATH and runs it; `inject` over real manifests of every kind it
//! handles, a List, a multi-document bundle, stdin, idempotence, and clear
//! non-zero errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde::Deserialize;
use serde_norway::Value;
use testkit::kubectl::{KUBECTL, Kubectl};

const SIDECAR: &str = "reverser-sidecar";
/// The fact source every injection here names.
const FACTS: &str = "--redis-url-secret";
const FACTS_SECRET: &str = "reverser-redis/url";

/// kubectl with only `kubectl-reverser` added to the PATH; no cluster is
/// needed for inject, and the runner makes sure none is consulted.
struct PluginPath {
    kubectl: Kubectl,
}

impl PluginPath {
    fn new() -> Self {
        Self { kubectl: Kubectl::new(&[env!("CARGO_BIN_EXE_kubectl-reverser")]) }
    }

    fn dir(&self) -> &Path {
        self.kubectl.dir.path()
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl.run(args)
    }

    fn kubectl_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        match stdin {
            Some(text) => self.kubectl.run_with_stdin(args, text),
            None => self.kubectl.run(args),
        }
    }

    /// `kubectl reverser inject -f <file> <extra>`, asserting success;
    /// returns (stdout, stderr). The sidecar's fact source is the Redis URL
    /// in Secret reverser-redis/url unless `extra` names a Redis URL (or turns
    /// attribution off).
    fn inject(&self, file: &Path, extra: &[&str]) -> (String, String) {
        let file = file.to_str().unwrap();
        let mut args = vec!["reverser", "inject", "-f", file];
        args.extend_from_slice(extra);
        let own_source = |a: &&str| {
            a.starts_with("--redis-url-secret")
                || a.contains("--redis-url=")
                || a.contains("--author-attribution=false")
        };
        if !extra.iter().any(own_source) {
            args.extend_from_slice(&[FACTS, FACTS_SECRET]);
        }
        let out = self.kubectl(&args);
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(out.status.success(), "kubectl {args:?} failed: {stderr}");
        (stdout, stderr)
    }
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// Every document of a multi-document YAML text, parsed.
fn documents(text: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(v, |v, k| &v[k])
}

fn names(list: &Value) -> Vec<String> {
    list.as_sequence()
        .map(|s| s.iter().filter_map(|c| c["name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// The pod spec at `path` carries a native sidecar and every one of
/// `watchers` has the socket.
fn assert_native_sidecar(spec: &Value, watchers: &[&str]) {
    let sidecar = &spec["initContainers"][0];
    assert_eq!(sidecar["name"].as_str(), Some(SIDECAR), "{spec:?}");
    assert_eq!(sidecar["restartPolicy"].as_str(), Some("Always"));
    assert_eq!(
        sidecar["image"].as_str(),
        Some(concat!("ghcr.io/reverser/reverser-sidecar:", env!("CARGO_PKG_VERSION")))
    );
    assert_eq!(sidecar["securityContext"]["capabilities"]["drop"][0].as_str(), Some("ALL"));
    assert_eq!(sidecar["securityContext"]["runAsNonRoot"].as_bool(), Some(true));
    assert!(names(&spec["volumes"]).contains(&"reverser-socket".to_string()), "{spec:?}");
    for c in spec["containers"].as_sequence().unwrap() {
        let name = c["name"].as_str().unwrap();
        let env = c["env"].as_sequence().into_iter().flatten().find(|e| e["name"].as_str() == Some("REVERSER_SOCKET"));
        if watchers.contains(&name) {
            assert_eq!(env.and_then(|e| e["value"].as_str()), Some("/var/run/reverser/reverser.sock"), "{name}");
        } else {
            assert!(env.is_none(), "{name} should not be a watcher");
        }
    }
}

/// Injects `file`, checks the result with `check`, then injects the output
/// again and checks it is identical.
fn inject_and_reinject(plugin: &PluginPath, file: &Path, check: impl Fn(&[Value])) -> String {
    let (first, stderr) = plugin.inject(file, &[]);
    assert!(stderr.contains(" injected"), "{stderr}");
    check(&documents(&first));

    let again = plugin.dir().join("injected.yaml");
    std::fs::write(&again, &first).unwrap();
    let (second, stderr) = plugin.inject(&again, &[]);
    assert_eq!(second, first, "a second injection changed the output");
    assert!(stderr.contains("skipped: already injected"), "{stderr}");
    assert!(stderr.lines().all(|l| l.contains("skipped: ") || !l.ends_with(" injected")), "{stderr}");
    first
}

#[test]
fn kubectl_plugin_list_shows_kubectl_reverser() {
    let plugin = PluginPath::new();
    // Only our directory on the PATH: kubectl lists exactly our plugin and
    // exits 0 (a stray plugin elsewhere on the PATH could make it warn).
    let bin = plugin.kubectl.bin_dir();
    let out = Command::new(KUBECTL).args(["plugin", "list"]).env("PATH", &bin).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let listed = bin.join("kubectl-reverser");
    assert!(stdout.lines().any(|l| l.trim() == listed.to_str().unwrap()), "{stdout}");
    // And with the rest of the PATH after ours, it is still found.
    let out = plugin.kubectl(&["plugin", "list"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(listed.to_str().unwrap()), "{out:?}");
}

#[test]
fn kubectl_runs_the_plugin_version_and_completion() {
    let plugin = PluginPath::new();
    let out = plugin.kubectl(&["reverser", "--version"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), concat!("kubectl-reverser ", env!("CARGO_PKG_VERSION"), "\n"));
    let out = plugin.kubectl(&["reverser", "completion", "bash"]);
    assert!(out.status.success(), "{out:?}");
    let script = String::from_utf8(out.stdout).unwrap();
    assert!(script.contains("kubectl-reverser"), "{script}");
    assert!(script.contains("inject"), "{script}");
}

#[test]
fn inject_every_workload_kind_through_kubectl() {
    let plugin = PluginPath::new();
    let cases: [(&str, &str, &[&str]); 6] = [
        ("deployment.yaml", "spec.template.spec", &["manager"]),
        ("statefulset.yaml", "spec.template.spec", &["watcher"]),
        ("daemonset.yaml", "spec.template.spec", &["watcher", "log-shipper"]),
        ("job.yaml", "spec.template.spec", &["backfill"]),
        ("cronjob.yaml", "spec.jobTemplate.spec.template.spec", &["resync"]),
        ("pod.yaml", "spec", &["watcher"]),
    ];
    for (file, path, watchers) in cases {
        let original = documents(&std::fs::read_to_string(fixture(file)).unwrap());
        inject_and_reinject(&plugin, &fixture(file), |docs| {
            assert_eq!(docs.len(), 1, "{file}");
            let spec = at(&docs[0], path);
            assert_native_sidecar(spec, watchers);
            // The user's containers are all still there, unchanged in name
            // and order, and the rest of the object is kept.
            assert_eq!(names(&spec["containers"]), names(&at(&original[0], path)["containers"]), "{file}");
            assert_eq!(docs[0]["metadata"], original[0]["metadata"], "{file}");
        });
    }
}

#[test]
fn inject_a_multi_document_bundle_keeps_other_documents_byte_for_byte() {
    let plugin = PluginPath::new();
    let text = std::fs::read_to_string(fixture("multi.yaml")).unwrap();
    let out = inject_and_reinject(&plugin, &fixture("multi.yaml"), |docs| {
        let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
        assert_eq!(kinds, ["Namespace", "ServiceAccount", "ConfigMap", "Deployment", "Deployment", "Service"]);
        let spec = at(&docs[3], "spec.template.spec");
        assert_native_sidecar(spec, &["manager"]);
        assert_eq!(names(&spec["volumes"]), ["config", "reverser-socket"], "the existing volume is kept");
        assert!(at(&docs[4], "spec.template.spec")["initContainers"].is_null());
    });
    let original: Vec<&str> = text.split("\n---\n").collect();
    let injected: Vec<&str> = out.split("\n---\n").collect();
    assert_eq!(injected.len(), original.len());
    for (i, (a, b)) in original.iter().zip(&injected).enumerate() {
        if i == 3 {
            assert_ne!(a, b);
        } else {
            assert_eq!(a, b, "document {i} changed");
        }
    }
}

#[test]
fn inject_a_list_and_from_stdin() {
    let plugin = PluginPath::new();
    let out = inject_and_reinject(&plugin, &fixture("list.yaml"), |docs| {
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0]["kind"].as_str(), Some("List"));
        assert_eq!(docs[0]["items"][0]["kind"].as_str(), Some("Service"));
        assert!(docs[0]["items"][0]["spec"]["initContainers"].is_null());
        assert_native_sidecar(at(&docs[0]["items"][1], "spec.template.spec"), &["manager"]);
    });

    let text = std::fs::read_to_string(fixture("list.yaml")).unwrap();
    let piped = plugin.kubectl_with_stdin(&["reverser", "inject", "-f", "-", FACTS, FACTS_SECRET], Some(&text));
    assert!(piped.status.success(), "{piped:?}");
    assert_eq!(String::from_utf8(piped.stdout).unwrap(), out);
    assert_eq!(String::from_utf8(piped.stderr).unwrap(), "Deployment gitops/gitops-reverser injected\n");
}

#[test]
fn inject_flags_reach_the_plugin_through_kubectl() {
    let plugin = PluginPath::new();
    let (out, _) = plugin.inject(
        &fixture("daemonset.yaml"),
        &[
            "--plain-container",
            "--watcher-container",
            "watcher",
            "--image",
            "registry.example.com/reverser-sidecar:dev",
            "--redis-url-secret",
            "reverser-redis/url",
            "--sidecar-arg=--author-attribution-transport=redis",
            "--sidecar-arg",
            "--metrics-listen=0.0.0.0:9091",
        ],
    );
    let docs = documents(&out);
    let spec = at(&docs[0], "spec.template.spec");
    assert_eq!(names(&spec["containers"]), ["watcher", "log-shipper", SIDECAR]);
    assert!(spec["initContainers"].is_null());
    let sidecar = &spec["containers"][2];
    assert_eq!(sidecar["image"].as_str(), Some("registry.example.com/reverser-sidecar:dev"));
    assert!(sidecar["restartPolicy"].is_null());
    let args: Vec<&str> = sidecar["args"].as_sequence().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(
        args,
        [
            "serve",
            "--socket",
            "/var/run/reverser/reverser.sock",
            "--socket-mode=666",
            "--audit-listen=off",
            "--author-attribution-transport=redis",
            "--metrics-listen=0.0.0.0:9091"
        ]
    );
    assert!(spec["containers"][0]["env"].is_sequence());
    assert!(spec["containers"][1]["env"].is_null());
}

#[test]
fn inject_errors_are_clear_and_non_zero() {
    let plugin = PluginPath::new();
    let cases: [(Vec<String>, &str); 3] = [
        (
            vec!["-f".into(), "/nonexistent/manifests.yaml".into()],
            "error: cannot read manifests from /nonexistent/manifests.yaml:",
        ),
        (vec!["-f".into(), fixture("invalid.yaml").display().to_string()], "is not valid YAML"),
        (
            vec![
                "-f".into(),
                fixture("deployment.yaml").display().to_string(),
                "--watcher-container".into(),
                "nope".into(),
            ],
            "error: ",
        ),
    ];
    for (extra, expected) in cases {
        let mut args = vec!["reverser", "inject", FACTS, FACTS_SECRET];
        args.extend(extra.iter().map(String::as_str));
        let out = plugin.kubectl(&args);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(out.stdout.is_empty(), "{args:?} wrote output on failure");
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
    }
    let out =
        plugin.kubectl(&["reverser", "inject", FACTS, FACTS_SECRET, "-f", fixture("invalid.yaml").to_str().unwrap()]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("document starting at line 6"), "{stderr}");

    let out = plugin.kubectl(&[
        "reverser",
        "inject",
        FACTS,
        FACTS_SECRET,
        "-f",
        fixture("deployment.yaml").to_str().unwrap(),
        "--watcher-container",
        "nope",
    ]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("Deployment gitops/gitops-reverser")
            && stderr.contains("\"nope\"")
            && stderr.contains("manager"),
        "{stderr}"
    );
}

#[test]
fn inject_hands_the_redis_url_over_from_a_secret() {
    let plugin = PluginPath::new();
    let (out, _) = plugin.inject(&fixture("daemonset.yaml"), &["--redis-url-secret", "reverser-redis/url"]);
    let docs = documents(&out);
    let sidecar = &at(&docs[0], "spec.template.spec")["initContainers"][0];
    let env = &sidecar["env"][0];
    assert_eq!(env["name"].as_str(), Some("REVERSER_REDIS_URL"));
    assert_eq!(env["valueFrom"]["secretKeyRef"]["name"].as_str(), Some("reverser-redis"));
    assert_eq!(env["valueFrom"]["secretKeyRef"]["key"].as_str(), Some("url"));
    let bad = plugin.kubectl(&[
        "reverser",
        "inject",
        "-f",
        fixture("daemonset.yaml").to_str().unwrap(),
        "--redis-url-secret",
        "nokey",
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("NAME/KEY"), "{}", String::from_utf8_lossy(&bad.stderr));
}

/// What the real sidecar does with `serve ARGS`: `Some(code)` when it exits
/// (refused) within a few seconds, `None` when it is still serving.
fn sidecar_verdict(args: &[&str]) -> Option<i32> {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let mut child = Command::new(testkit::sidecar::binary())
        .args(["serve", "--socket", socket.to_str().unwrap(), "--audit-listen=off", "--metrics-listen=127.0.0.1:0"])
        .args(args)
        .env("REVERSER_LOG", "off")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status.code().unwrap_or(-1));
        }
        if socket.exists() || std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn inject_refuses_sidecar_args_the_sidecar_refuses_and_only_those() {
    let plugin = PluginPath::new();
    let deployment = fixture("deployment.yaml");
    let cases: [(&[&str], Option<&str>); 6] = [
        (
            &["--transport", "redis"],
            Some("unexpected argument '--transport' found; did you mean --author-attribution-transport?"),
        ),
        (&["--author-attribution-grace=soon"], Some("\"soon\" is not a duration")),
        (&["--author-attribution-transport=redis"], Some("redis")),
        (&["--follow=configmaps"], Some("route:group/resource")),
        (&["--author-attribution-grace=5s", "--follow=default:configmaps"], None),
        (&["--author-attribution-transport=memory", "--log-format=json"], None),
    ];
    for (sidecar_args, refusal) in cases {
        let mut args = vec!["reverser", "inject", "-f", deployment.to_str().unwrap()];
        let flags: Vec<String> = sidecar_args.iter().map(|a| format!("--sidecar-arg={a}")).collect();
        args.extend(flags.iter().map(String::as_str));
        if refusal.is_none() {
            // Accepted needs a fact source too (see the test below).
            args.extend_from_slice(&[FACTS, FACTS_SECRET]);
        }
        let out = plugin.kubectl(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        // The real sidecar agrees: what inject refuses, it refuses; what
        // inject accepts, it serves.
        let sidecar = sidecar_verdict(sidecar_args);
        match refusal {
            Some(words) => {
                assert_eq!(out.status.code(), Some(2), "{sidecar_args:?}: {stderr}");
                assert!(stderr.starts_with("error: --sidecar-arg: reverser-sidecar serve would refuse"), "{stderr}");
                assert!(stderr.contains(words), "{sidecar_args:?}: {stderr}");
                assert!(out.stdout.is_empty());
                assert!(
                    matches!(sidecar, Some(code) if code != 0),
                    "the sidecar accepted {sidecar_args:?}: {sidecar:?}"
                );
            }
            None => {
                assert!(out.status.success(), "{sidecar_args:?}: {stderr}");
                assert_eq!(sidecar, None, "the sidecar refused {sidecar_args:?}");
            }
        }
    }
    // With the URL from a Secret, the redis transport is complete.
    let out = plugin.kubectl(&[
        "reverser",
        "inject",
        "-f",
        deployment.to_str().unwrap(),
        "--redis-url-secret=reverser-redis/url",
        "--sidecar-arg=--author-attribution-transport=redis",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn inject_json_gives_json_and_refuses_a_plain_sidecar_in_a_job() {
    let plugin = PluginPath::new();
    // `kubectl get -o json` of one object, then a stream as `jq -c` writes.
    let deployment: serde_json::Value =
        serde_norway::from_str(&std::fs::read_to_string(fixture("deployment.yaml")).unwrap()).unwrap();
    let pod: serde_json::Value =
        serde_norway::from_str(&std::fs::read_to_string(fixture("pod.yaml")).unwrap()).unwrap();
    let pretty = serde_json::to_string_pretty(&deployment).unwrap() + "\n";
    let stream = format!("{}\n{}\n", deployment, pod);
    for (text, objects) in [(pretty, 1), (stream, 2)] {
        let out = plugin.kubectl_with_stdin(&["reverser", "inject", "-f", "-", FACTS, FACTS_SECRET], Some(&text));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8(out.stdout).unwrap();
        let values: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&stdout)
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("JSON in, JSON out ({e}):\n{stdout}"));
        for v in &values {
            let spec = v.pointer("/spec/template/spec").or_else(|| v.get("spec")).unwrap();
            assert_eq!(spec["initContainers"][0]["name"], SIDECAR, "{stdout}");
        }
        assert_eq!(values.len(), objects, "{stdout}");
    }
    for job in ["job.yaml", "cronjob.yaml"] {
        let out = plugin.kubectl(&[
            "reverser",
            "inject",
            FACTS,
            FACTS_SECRET,
            "-f",
            fixture(job).to_str().unwrap(),
            "--plain-container",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && out.stdout.is_empty(), "{job}: {stderr}");
        assert!(stderr.contains("with --plain-container: the sidecar never exits"), "{job}: {stderr}");
    }
}

#[test]
fn inject_refuses_a_sidecar_no_fact_could_reach_or_a_password_in_the_pod_spec() {
    let plugin = PluginPath::new();
    let deployment = fixture("deployment.yaml");
    let file = deployment.to_str().unwrap();
    // No fact source: the README's headline alone.
    let out = plugin.kubectl(&["reverser", "inject", "-f", file]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.starts_with("error: the sidecar would have no fact source")
            && stderr.contains("--redis-url-secret NAME/KEY")
            && stderr.contains("the chart's webhook"),
        "{stderr}"
    );
    // A password through --sidecar-arg would show in the pod spec.
    let out =
        plugin.kubectl(&["reverser", "inject", "-f", file, "--sidecar-arg=--redis-url=redis://:hunter2@redis:6379"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("carries a password") && stderr.contains("--redis-url-secret"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "the refusal repeats the password: {stderr}");
    // A URL without a password is a fact source.
    let (out, _) = plugin.inject(&deployment, &["--sidecar-arg=--redis-url=redis://redis:6379"]);
    assert!(out.contains("--redis-url=redis://redis:6379"), "{out}");
    // Configured-author mode needs none: the committer authors every commit.
    let (out, _) = plugin.inject(&deployment, &["--sidecar-arg=--author-attribution=false"]);
    assert!(out.contains("--author-attribution=false"), "{out}");
    // ...and a Redis URL beside it is refused as unused, naming the flag.
    let out = plugin.kubectl(&[
        "reverser",
        "inject",
        "-f",
        file,
        "--sidecar-arg=--author-attribution=false",
        "--sidecar-arg=--redis-url=redis://redis:6379",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--redis-url has no use with --author-attribution=false"), "{stderr}");
}

#[test]
fn the_injected_sidecar_serves_its_metrics_where_why_pod_looks() {
    let plugin = PluginPath::new();
    let (out, _) = plugin.inject(&fixture("deployment.yaml"), &[]);
    let docs = documents(&out);
    let sidecar = &at(&docs[0], "spec.template.spec")["initContainers"][0];
    let args: Vec<&str> = sidecar["args"].as_sequence().unwrap().iter().filter_map(Value::as_str).collect();
    // The pod proxy reaches the pod's IP, at why --pod's default --pod-port.
    assert!(args.contains(&"--metrics-listen=0.0.0.0:9090"), "{args:?}");
    let (out, _) = plugin.inject(&fixture("deployment.yaml"), &["--metrics-port", "9191"]);
    assert!(out.contains("--metrics-listen=0.0.0.0:9191"), "{out}");
}

#[test]
fn inject_refuses_a_socket_the_pod_already_points_elsewhere_or_a_volume_it_would_write_into() {
    let plugin = PluginPath::new();
    let pod = |containers: &str, volumes: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: shop}}\nspec:\n  containers:\n{containers}  volumes:\n{volumes}"
        )
    };
    let cases = [
        (
            pod(
                "  - name: main\n    env:\n    - {name: REVERSER_SOCKET, value: /custom/path.sock}\n",
                "  - {name: d, emptyDir: {}}\n",
            ),
            "sets REVERSER_SOCKET \"/custom/path.sock\"",
        ),
        (
            pod("  - name: main\n", "  - name: reverser-socket\n    persistentVolumeClaim: {claimName: data}\n"),
            "persistentVolumeClaim, not an emptyDir",
        ),
    ];
    for (text, words) in cases {
        let out = plugin.kubectl_with_stdin(&["reverser", "inject", "-f", "-", FACTS, FACTS_SECRET], Some(&text));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && out.stdout.is_empty(), "{stderr}");
        assert!(
            stderr.starts_with("error: stdin: cannot inject into Pod shop/p: ") && stderr.contains(words),
            "{stderr}"
        );
    }
}
