use base64::Engine as _;
use proptest::prelude::*;
use serde_norway::Value;

use super::manifest::split_documents;
use super::webhook::decide_review;
use super::*;
use crate::Error;

const DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: watcher
  namespace: gitops
spec:
  replicas: 1
  selector:
    matchLabels:
      app: watcher
  template:
    metadata:
      labels:
        app: watcher
    spec:
      containers:
      - name: manager
        image: example/gitops-reverser:0.41
        env:
        - name: LOG_LEVEL
          value: info
      - name: metrics
        image: example/exporter:1
";

fn yaml(text: &str) -> Value {
    serde_norway::from_str(text).unwrap()
}

fn at<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(v, |v, k| &v[*k])
}

fn names(list: &Value) -> Vec<&str> {
    list.as_sequence().map(|s| s.iter().filter_map(|c| c["name"].as_str()).collect()).unwrap_or_default()
}

fn opts() -> InjectOptions {
    InjectOptions::default()
}

/// Checks that a pod spec carries a correctly injected native sidecar and
/// that every named watcher has the socket.
fn assert_injected(spec: &Value, watchers: &[&str]) {
    let sidecar = &spec["initContainers"][0];
    assert_eq!(sidecar["name"], Value::from(SIDECAR_NAME), "{spec:?}");
    assert_eq!(sidecar["restartPolicy"], Value::from("Always"));
    assert_eq!(sidecar["image"], Value::from(default_image()));
    assert_eq!(
        sidecar["args"],
        yaml("[serve, --socket, /var/run/reverser/reverser.sock, --socket-mode=666, --audit-listen=off]")
    );
    let sc = &sidecar["securityContext"];
    assert_eq!(sc["runAsNonRoot"], Value::from(true));
    assert_eq!(sc["readOnlyRootFilesystem"], Value::from(true));
    assert_eq!(sc["allowPrivilegeEscalation"], Value::from(false));
    assert_eq!(sc["capabilities"]["drop"], yaml("[ALL]"));
    assert_eq!(sc["seccompProfile"]["type"], Value::from("RuntimeDefault"));
    assert_eq!(sidecar["resources"]["requests"]["cpu"], Value::from("10m"));
    assert_eq!(sidecar["resources"]["limits"]["memory"], Value::from("128Mi"));
    assert_eq!(sidecar["volumeMounts"], yaml("[{name: reverser-socket, mountPath: /var/run/reverser}]"));
    let volumes = &spec["volumes"];
    let socket_volumes: Vec<&Value> =
        volumes.as_sequence().unwrap().iter().filter(|v| v["name"] == VOLUME_NAME).collect();
    assert_eq!(socket_volumes.len(), 1);
    assert!(socket_volumes[0]["emptyDir"].is_mapping());
    for c in spec["containers"].as_sequence().unwrap() {
        let name = c["name"].as_str().unwrap();
        let has_env = c["env"].as_sequence().is_some_and(|env| {
            env.iter().any(|e| e["name"] == SOCKET_ENV && e["value"] == "/var/run/reverser/reverser.sock")
        });
        let has_mount = c["volumeMounts"]
            .as_sequence()
            .is_some_and(|ms| ms.iter().any(|m| m["name"] == VOLUME_NAME && m["mountPath"] == DEFAULT_SOCKET_DIR));
        let want = watchers.contains(&name);
        assert_eq!(has_env, want, "REVERSER_SOCKET on {name}");
        assert_eq!(has_mount, want, "socket mount on {name}");
    }
}

fn workload(api_version: &str, kind: &str, template_at: &str) -> String {
    let template = "\
metadata:
  labels:
    app: w
spec:
  restartPolicy: OnFailure
  containers:
  - name: main
    image: busybox
";
    let indent = " ".repeat(template_at.matches('.').count() * 2 + 2);
    let mut out = format!("apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: w\n");
    let mut pad = String::new();
    for key in template_at.split('.') {
        out.push_str(&format!("{pad}{key}:\n"));
        pad.push_str("  ");
    }
    for line in template.lines() {
        out.push_str(&format!("{indent}{line}\n"));
    }
    out
}

#[test]
fn every_workload_kind_gets_a_native_sidecar() {
    let cases = [
        ("apps/v1", "Deployment", "spec.template"),
        ("apps/v1", "StatefulSet", "spec.template"),
        ("apps/v1", "DaemonSet", "spec.template"),
        ("apps/v1", "ReplicaSet", "spec.template"),
        ("v1", "ReplicationController", "spec.template"),
        ("batch/v1", "Job", "spec.template"),
        ("batch/v1", "CronJob", "spec.jobTemplate.spec.template"),
        ("v1", "PodTemplate", "template"),
    ];
    for (api_version, kind, path) in cases {
        let text = workload(api_version, kind, path);
        let out = inject_manifests(&text, &opts()).unwrap();
        assert_eq!(out.reports.len(), 1, "{kind}");
        assert_eq!(out.reports[0].outcome, Outcome::Injected, "{kind}");
        assert_eq!(out.reports[0].to_string(), format!("{kind} w injected"));
        let v = yaml(&out.output);
        let keys: Vec<&str> = path.split('.').chain(["spec"]).collect();
        assert_injected(at(&v, &keys), &["main"]);
        // The rest of the template is kept.
        assert_eq!(at(&v, &keys)["restartPolicy"], Value::from("OnFailure"));
    }

    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec:\n  containers: [{name: main, image: busybox}]\n";
    let out = inject_manifests(pod, &opts()).unwrap();
    assert_eq!(out.reports[0].to_string(), "Pod ns/p injected");
    assert_injected(&yaml(&out.output)["spec"], &["main"]);
}

#[test]
fn deployment_keeps_its_fields_and_every_container_becomes_a_watcher() {
    let out = inject_manifests(DEPLOYMENT, &opts()).unwrap();
    let v = yaml(&out.output);
    let spec = at(&v, &["spec", "template", "spec"]);
    assert_injected(spec, &["manager", "metrics"]);
    assert_eq!(names(&spec["containers"]), ["manager", "metrics"]);
    assert_eq!(
        spec["containers"][0]["env"],
        yaml("[{name: LOG_LEVEL, value: info}, {name: REVERSER_SOCKET, value: /var/run/reverser/reverser.sock}]")
    );
    assert_eq!(v["spec"]["replicas"], Value::from(1));
    assert_eq!(v["metadata"]["namespace"], Value::from("gitops"));
    assert_eq!(out.reports[0].name, "gitops/watcher");
}

#[test]
fn injecting_twice_changes_nothing() {
    for mode in [SidecarMode::Native, SidecarMode::Plain] {
        let o = InjectOptions { mode, ..opts() };
        let once = inject_manifests(DEPLOYMENT, &o).unwrap();
        let twice = inject_manifests(&once.output, &o).unwrap();
        assert_eq!(twice.output, once.output, "{mode:?}");
        assert_eq!(twice.reports[0].outcome, Outcome::Skipped(SkipReason::AlreadyInjected));
        // Also with the other mode: the existing sidecar is found wherever it is.
        let other = InjectOptions {
            mode: if mode == SidecarMode::Native { SidecarMode::Plain } else { SidecarMode::Native },
            ..opts()
        };
        assert_eq!(inject_manifests(&once.output, &other).unwrap().output, once.output);
    }
}

#[test]
fn plain_container_mode_appends_the_sidecar_after_the_watchers() {
    let o = InjectOptions { mode: SidecarMode::Plain, ..opts() };
    let v = yaml(&inject_manifests(DEPLOYMENT, &o).unwrap().output);
    let spec = at(&v, &["spec", "template", "spec"]);
    assert_eq!(names(&spec["containers"]), ["manager", "metrics", SIDECAR_NAME]);
    assert!(spec.get("initContainers").is_none());
    let sidecar = &spec["containers"][2];
    assert!(sidecar.get("restartPolicy").is_none());
    // The sidecar is not its own watcher.
    assert!(sidecar.get("env").is_none());
    assert_eq!(spec["containers"][0]["env"][1]["name"], Value::from(SOCKET_ENV));
    assert_eq!(spec["containers"][1]["env"][0]["name"], Value::from(SOCKET_ENV));
}

#[test]
fn a_named_watcher_alone_gets_the_socket() {
    let o = InjectOptions { watcher: WatcherSelector::Named("manager".into()), ..opts() };
    let v = yaml(&inject_manifests(DEPLOYMENT, &o).unwrap().output);
    assert_injected(at(&v, &["spec", "template", "spec"]), &["manager"]);

    let o = InjectOptions { watcher: WatcherSelector::Named("nope".into()), ..opts() };
    let err = inject_manifests(DEPLOYMENT, &o).unwrap_err();
    assert!(
        matches!(&err, Error::InjectWatcherNotFound { object, container, available }
            if object == "Deployment gitops/watcher" && container == "nope" && available == "manager, metrics"),
        "{err:?}"
    );
    assert!(err.to_string().contains("reverser.dev/inject: disabled"));
}

#[test]
fn image_args_socket_dir_and_resources_are_configurable() {
    let o = InjectOptions {
        image: "registry.local/sidecar:dev".into(),
        extra_args: vec!["--transport".into(), "redis".into(), "--redis-url".into(), "redis://redis:6379".into()],
        socket_dir: "/run/attr/".into(),
        resources: SidecarResources {
            cpu_request: "50m".into(),
            memory_request: "64Mi".into(),
            memory_limit: "256Mi".into(),
        },
        run_as_user: 1000,
        ..opts()
    };
    let v = yaml(&inject_manifests(DEPLOYMENT, &o).unwrap().output);
    let spec = at(&v, &["spec", "template", "spec"]);
    let sidecar = &spec["initContainers"][0];
    assert_eq!(sidecar["image"], Value::from("registry.local/sidecar:dev"));
    assert_eq!(
        sidecar["args"],
        yaml(
            "[serve, --socket, /run/attr/reverser.sock, --socket-mode=666, --audit-listen=off, --transport, redis, --redis-url, 'redis://redis:6379']"
        )
    );
    assert_eq!(sidecar["resources"], yaml("{requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 256Mi}}"));
    assert_eq!(sidecar["securityContext"]["runAsUser"], Value::from(1000));
    assert_eq!(spec["containers"][0]["env"][1], yaml("{name: REVERSER_SOCKET, value: /run/attr/reverser.sock}"));
    assert_eq!(
        spec["containers"][0]["volumeMounts"],
        yaml("[{name: reverser-socket, mountPath: /run/attr/, readOnly: true}]")
    );
}

#[test]
fn what_the_manifest_already_sets_is_kept_when_it_agrees() {
    let text = "\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: main
    image: busybox
    env:
    - name: REVERSER_SOCKET
      value: /var/run/reverser/reverser.sock
  volumes:
  - name: reverser-socket
    emptyDir: {medium: Memory}
";
    let v = yaml(&inject_manifests(text, &opts()).unwrap().output);
    assert_eq!(
        v["spec"]["containers"][0]["env"],
        yaml("[{name: REVERSER_SOCKET, value: /var/run/reverser/reverser.sock}]")
    );
    assert_eq!(v["spec"]["volumes"], yaml("[{name: reverser-socket, emptyDir: {medium: Memory}}]"));
    assert_eq!(names(&v["spec"]["initContainers"]), [SIDECAR_NAME]);
}

#[test]
fn what_the_manifest_sets_against_the_socket_is_refused_naming_it() {
    let pod = |containers: &str, volumes: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: shop}}\nspec:\n  containers:\n{containers}  volumes:\n{volumes}"
        )
    };
    let elsewhere = pod(
        "  - name: main\n    env:\n    - {name: REVERSER_SOCKET, value: /custom/path.sock}\n",
        "  - {name: data, emptyDir: {}}\n",
    );
    let e = inject_manifests(&elsewhere, &opts()).unwrap_err().to_string();
    assert!(e.contains("Pod shop/p") && e.contains("\"/custom/path.sock\"") && e.contains("--socket-dir"), "{e}");
    let pvc = pod("  - name: main\n", "  - name: reverser-socket\n    persistentVolumeClaim: {claimName: data}\n");
    let e = inject_manifests(&pvc, &opts()).unwrap_err().to_string();
    assert!(e.contains("persistentVolumeClaim, not an emptyDir") && e.contains("rename that volume"), "{e}");
    let taken_dir = pod(
        "  - name: main\n    volumeMounts:\n    - {name: data, mountPath: /var/run/reverser}\n",
        "  - {name: data, emptyDir: {}}\n",
    );
    let e = inject_manifests(&taken_dir, &opts()).unwrap_err().to_string();
    assert!(e.contains("already mounts volume \"data\" at /var/run/reverser"), "{e}");
}

#[test]
fn the_disabled_annotation_opts_a_workload_out_byte_for_byte() {
    let text = DEPLOYMENT.replace(
        "    metadata:\n      labels:",
        "    metadata:\n      annotations:\n        reverser.dev/inject: disabled\n      labels:",
    );
    assert_ne!(text, DEPLOYMENT);
    let out = inject_manifests(&text, &opts()).unwrap();
    assert_eq!(out.output, text);
    assert_eq!(out.reports[0].outcome, Outcome::Skipped(SkipReason::OptedOut));
    // Only the pod template's annotation counts; any other value injects.
    let enabled = text.replace("inject: disabled", "inject: enabled");
    let out = inject_manifests(&enabled, &opts()).unwrap();
    assert_eq!(out.reports[0].outcome, Outcome::Injected);
}

#[test]
fn multi_document_input_keeps_other_documents_byte_for_byte() {
    let service = "# the service, with a comment kept as is\napiVersion: v1\nkind: Service\nmetadata:\n  name: watcher   # trailing comment\nspec:\n  ports: [{port: 80}]\n";
    let config = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata:\n  script: |\n    echo hi\n      --- not a marker\n";
    let text = format!("---\n{service}---\n{DEPLOYMENT}--- # a comment on the marker\n{config}\n---\n");
    let out = inject_manifests(&text, &opts()).unwrap();
    let docs = split_documents(&out.output);
    assert_eq!(docs.len(), 5, "{}", out.output);
    assert_eq!(docs[0].body, "");
    assert_eq!(docs[1].body, service);
    assert_eq!(docs[3].marker, "--- # a comment on the marker\n");
    assert_eq!(docs[3].body, format!("{config}\n"));
    assert_eq!(docs[4].body, "");
    assert_injected(at(&yaml(docs[2].body), &["spec", "template", "spec"]), &["manager", "metrics"]);
    let outcomes: Vec<String> = out.reports.iter().map(ToString::to_string).collect();
    assert_eq!(
        outcomes,
        ["Service watcher left untouched", "Deployment gitops/watcher injected", "ConfigMap cfg left untouched"]
    );
    // And again: nothing changes.
    assert_eq!(inject_manifests(&out.output, &opts()).unwrap().output, out.output);
}

#[test]
fn list_items_are_injected() {
    let text = "\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata: {name: s}
- apiVersion: apps/v1
  kind: DaemonSet
  metadata: {name: d}
  spec:
    template:
      spec:
        containers: [{name: agent, image: busybox}]
- apiVersion: v1
  kind: List
  items:
  - apiVersion: batch/v1
    kind: Job
    metadata: {name: j}
    spec:
      template:
        spec:
          containers: [{name: task, image: busybox}]
";
    let out = inject_manifests(text, &opts()).unwrap();
    let v = yaml(&out.output);
    assert_eq!(v["items"][0], yaml(text)["items"][0]);
    assert_injected(at(&v["items"][1], &["spec", "template", "spec"]), &["agent"]);
    assert_injected(at(&v["items"][2]["items"][0], &["spec", "template", "spec"]), &["task"]);
    assert_eq!(out.reports.len(), 3);
    assert_eq!(inject_manifests(&out.output, &opts()).unwrap().output, out.output);
}

#[test]
fn other_kinds_and_groups_are_left_alone() {
    for text in [
        "apiVersion: example.dev/v1\nkind: Job\nmetadata: {name: x}\nspec: {template: {spec: {containers: []}}}\n",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n",
        "just: a mapping\n",
        "- a\n- list\n",
        "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"c\"}}\n",
        "# only a comment\n",
        "%YAML 1.2\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\n...\n",
        "",
    ] {
        let out = inject_manifests(text, &opts()).unwrap();
        assert_eq!(out.output, text);
        assert!(out.reports.iter().all(|r| r.outcome == Outcome::NotAWorkload));
    }
}

#[test]
fn json_input_is_injected_too() {
    let text =
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#;
    let out = inject_manifests(text, &opts()).unwrap();
    assert_injected(&yaml(&out.output)["spec"], &["c"]);
}

#[test]
fn bad_input_is_a_clear_error_naming_the_place() {
    let text = format!("{DEPLOYMENT}---\napiVersion: v1\nkind: Pod\nmetadata: {{name: [unclosed\n");
    let err = inject_manifests(&text, &opts()).unwrap_err();
    let first_line = DEPLOYMENT.lines().count() + 2;
    assert!(matches!(&err, Error::InjectParse { line, .. } if *line == first_line), "{err:?}");
    assert!(err.to_string().contains(&format!("starting at line {first_line}")), "{err}");
    // The parser's own positions count lines of the whole input.
    assert!(err.to_string().contains(&format!("at line {}", first_line + 3)), "{err}");

    let err =
        inject_manifests("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 1}\n", &opts())
            .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot inject into Deployment d: spec.template is missing; fix the manifest, or opt it out with the pod template annotation reverser.dev/inject: disabled"
    );

    let err =
        inject_manifests("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: {name: c}}\n", &opts())
            .unwrap_err();
    assert!(matches!(&err, Error::InjectMalformed { path, .. } if path == "containers"), "{err:?}");
}

#[test]
fn document_markers_split_only_at_line_starts() {
    let docs = split_documents("a: 1\n---\nb: |\n  ---\n--- {c: 3}\n---x: 4\n");
    let bodies: Vec<&str> = docs.iter().map(|d| d.body).collect();
    assert_eq!(bodies, ["a: 1\n", "b: |\n  ---\n", "{c: 3}\n---x: 4\n"]);
    assert_eq!(docs[2].marker, "--- ");
    assert_eq!(docs.iter().map(|d| d.line).collect::<Vec<_>>(), [1, 3, 5]);
    let joined: String = docs.iter().flat_map(|d| [d.marker, d.body]).collect();
    assert_eq!(joined, "a: 1\n---\nb: |\n  ---\n--- {c: 3}\n---x: 4\n");
}

// ---- webhook ----

fn admission(pod: &serde_json::Value, namespace: &str, operation: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": pod,
            "oldObject": null,
            "dryRun": false
        }
    })
}

fn watcher_pod() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "watcher-7d9f-",
            "labels": {"app": "watcher", "reverser.dev/inject": "enabled"}
        },
        "spec": {
            "containers": [{"name": "manager", "image": "example/gitops-reverser:0.41"}],
            "serviceAccountName": "watcher"
        }
    })
}

/// Runs the webhook on `review` and applies the patch it returns, if any.
fn webhook(review: &serde_json::Value, config: &WebhookConfig) -> (serde_json::Value, Option<serde_json::Value>) {
    let response = super::review(&serde_json::to_vec(review).unwrap(), config);
    assert_eq!(response["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(response["kind"], "AdmissionReview");
    assert_eq!(response["response"]["allowed"], true);
    let patched = response["response"].get("patch").map(|p| {
        assert_eq!(response["response"]["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD.decode(p.as_str().unwrap()).unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        let mut pod = review["request"]["object"].clone();
        json_patch::patch(&mut pod, &patch).unwrap();
        pod
    });
    (response, patched)
}

/// What `inject` makes of a pod, as JSON.
fn injected_by_inject(pod: &serde_json::Value, o: &InjectOptions) -> serde_json::Value {
    let (v, _) = inject_object(&serde_json::from_value(pod.clone()).unwrap(), o).unwrap();
    serde_json::to_value(v).unwrap()
}

#[test]
fn webhook_patch_equals_inject_output() {
    let config = WebhookConfig::default();
    let review = admission(&watcher_pod(), "gitops", "CREATE");
    let (response, patched) = webhook(&review, &config);
    assert_eq!(response["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    let patched = patched.expect("a patch");
    assert_eq!(patched, injected_by_inject(&watcher_pod(), &config.inject));
    assert_eq!(patched["spec"]["initContainers"][0]["name"], SIDECAR_NAME);
    assert_eq!(patched["spec"]["containers"][0]["env"][0]["name"], SOCKET_ENV);
}

#[test]
fn webhook_opt_outs_are_admitted_without_a_patch() {
    let base = WebhookConfig::default();
    let requiring = WebhookConfig { require_opt_in_label: true, ..WebhookConfig::default() };
    let mut unlabelled = watcher_pod();
    unlabelled["metadata"]["labels"].as_object_mut().unwrap().remove(INJECT_KEY);
    let mut disabled = watcher_pod();
    disabled["metadata"]["annotations"] = serde_json::json!({INJECT_KEY: "disabled"});
    let mut host = watcher_pod();
    host["spec"]["hostNetwork"] = true.into();
    let already = injected_by_inject(&watcher_pod(), &base.inject);
    let mut other_kind = admission(&watcher_pod(), "gitops", "CREATE");
    other_kind["request"]["kind"]["kind"] = "Service".into();

    let cases = [
        (admission(&unlabelled, "gitops", "CREATE"), &requiring, AllowReason::NotOptedIn),
        (admission(&disabled, "gitops", "CREATE"), &base, AllowReason::Skipped(SkipReason::OptedOut)),
        (admission(&host, "gitops", "CREATE"), &base, AllowReason::HostNetwork),
        (
            admission(&watcher_pod(), "kube-system", "CREATE"),
            &base,
            AllowReason::ExcludedNamespace("kube-system".into()),
        ),
        (admission(&already, "gitops", "CREATE"), &base, AllowReason::Skipped(SkipReason::AlreadyInjected)),
        (admission(&watcher_pod(), "gitops", "UPDATE"), &base, AllowReason::NotAPodCreate),
        (other_kind, &base, AllowReason::NotAPodCreate),
    ];
    for (review, config, reason) in cases {
        let decision = decide_review(&review, config).unwrap();
        assert_eq!(decision.action, Action::Allow(reason.clone()));
        let (response, patched) = webhook(&review, config);
        assert!(patched.is_none(), "{reason:?}: {response}");
        assert!(response["response"].get("status").is_none(), "{reason:?}");
    }
    // The same unlabelled pod is injected when the label is not required.
    let (_, patched) = webhook(&admission(&unlabelled, "gitops", "CREATE"), &base);
    assert!(patched.is_some());
}

#[test]
fn malformed_reviews_get_allowed_with_a_message() {
    let config = WebhookConfig::default();
    let mut no_uid = admission(&watcher_pod(), "gitops", "CREATE");
    no_uid["request"].as_object_mut().unwrap().remove("uid");
    let mut v1beta1 = admission(&watcher_pod(), "gitops", "CREATE");
    v1beta1["apiVersion"] = "admission.k8s.io/v1beta1".into();
    let mut no_object = admission(&watcher_pod(), "gitops", "CREATE");
    no_object["request"]["object"] = serde_json::Value::Null;
    let mut bad_pod = admission(&watcher_pod(), "gitops", "CREATE");
    bad_pod["request"]["object"]["spec"]["containers"] = "not a list".into();
    let named = WebhookConfig {
        inject: InjectOptions { watcher: WatcherSelector::Named("absent".into()), ..opts() },
        ..WebhookConfig::default()
    };

    let cases: Vec<(Vec<u8>, &WebhookConfig, &str, &str)> = vec![
        (b"{not json".to_vec(), &config, "", "not JSON"),
        (b"[]".to_vec(), &config, "", "expected an admission.k8s.io/v1 AdmissionReview"),
        (serde_json::to_vec(&v1beta1).unwrap(), &config, "", "admissionReviewVersions"),
        (serde_json::to_vec(&no_uid).unwrap(), &config, "", "no uid"),
        (serde_json::to_vec(&no_object).unwrap(), &config, "705ab4f5-6393-11e8-b7cc-42010a800002", "carries no object"),
        (
            serde_json::to_vec(&bad_pod).unwrap(),
            &config,
            "705ab4f5-6393-11e8-b7cc-42010a800002",
            "containers is not a list",
        ),
        (
            serde_json::to_vec(&admission(&watcher_pod(), "gitops", "CREATE")).unwrap(),
            &named,
            "705ab4f5-6393-11e8-b7cc-42010a800002",
            "no container named \"absent\"",
        ),
    ];
    for (body, config, uid, message) in cases {
        let response = review(&body, config);
        let r = &response["response"];
        assert_eq!(r["allowed"], true);
        assert_eq!(r["uid"], uid);
        assert!(r.get("patch").is_none());
        let text = r["status"]["message"].as_str().unwrap();
        assert!(text.contains(message), "{text} should contain {message}");
        assert_eq!(r["warnings"][0], text);
    }
}

// ---- properties ----

fn container_strategy() -> impl Strategy<Value = serde_json::Value> {
    (
        "[a-z]{1,8}",
        proptest::option::of(proptest::collection::vec(("[A-Z_]{1,6}", "[a-z0-9]{0,4}"), 0..3)),
        proptest::option::of(proptest::collection::vec("[a-z]{1,5}", 0..3)),
    )
        .prop_map(|(name, env, mounts)| {
            let mut c = serde_json::json!({"name": name, "image": format!("example/{name}:1")});
            if let Some(env) = env {
                c["env"] = env.into_iter().map(|(n, v)| serde_json::json!({"name": n, "value": v})).collect();
            }
            if let Some(mounts) = mounts {
                c["volumeMounts"] = mounts
                    .into_iter()
                    .map(|m| serde_json::json!({"name": m, "mountPath": format!("/mnt/{m}")}))
                    .collect();
            }
            c
        })
}

fn pod_strategy() -> impl Strategy<Value = serde_json::Value> {
    (
        proptest::collection::vec(container_strategy(), 1..4),
        proptest::option::of(proptest::collection::vec(container_strategy(), 0..3)),
        proptest::option::of(proptest::collection::vec("[a-z]{1,6}", 0..3)),
        any::<bool>(),
    )
        .prop_map(|(containers, init, volumes, labelled)| {
            let mut pod = serde_json::json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {"containers": containers}
            });
            if labelled {
                pod["metadata"]["labels"] = serde_json::json!({"app": "a"});
            }
            if let Some(init) = init {
                pod["spec"]["initContainers"] = init.into();
            }
            if let Some(volumes) = volumes {
                pod["spec"]["volumes"] =
                    volumes.into_iter().map(|v| serde_json::json!({"name": v, "emptyDir": {}})).collect();
            }
            pod
        })
}

proptest! {
    /// Applying the webhook's patch to a pod equals inject's output for that
    /// pod, in both modes; and inject is idempotent.
    #[test]
    fn webhook_patch_applied_equals_inject(pod in pod_strategy(), plain in any::<bool>(), extra in proptest::collection::vec("--[a-z]{1,6}", 0..3)) {
        let config = WebhookConfig {
            inject: InjectOptions {
                mode: if plain { SidecarMode::Plain } else { SidecarMode::Native },
                extra_args: extra,
                ..opts()
            },
            ..WebhookConfig::default()
        };
        let expected = injected_by_inject(&pod, &config.inject);
        prop_assert_ne!(&expected, &pod);
        let (_, patched) = webhook(&admission(&pod, "ns", "CREATE"), &config);
        prop_assert_eq!(patched.as_ref(), Some(&expected));
        prop_assert_eq!(injected_by_inject(&expected, &config.inject), expected);
    }
}

#[test]
fn re_rendered_documents_keep_every_value_and_its_type() {
    // Strings YAML would otherwise read as booleans, numbers or null, a
    // multi-line script, and numbers, all inside an injected document.
    let text = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: tricky
  annotations: {"a": "yes", "b": "0755", "c": "~", "d": "1e3", "e": "true", "f": ""}
spec:
  replicas: 3
  template:
    spec:
      terminationGracePeriodSeconds: 30
      containers:
      - name: main
        image: "busybox:1.36"
        command: ["sh", "-c", "echo 'a: b' # not a comment\nexit 0\n"]
        env:
        - {name: ON, value: "on"}
        - {name: NUM, value: "08"}
        - {name: HEX, value: "0x1F"}
        - {name: COLON, value: "key: value"}
        - {name: DASH, value: "- item"}
        - {name: MARKER, value: "---"}
"#;
    let before = yaml(text);
    let out = inject_manifests(text, &opts()).unwrap();
    assert_eq!(out.reports[0].outcome, Outcome::Injected);
    let after = yaml(&out.output);
    assert_eq!(after["metadata"], before["metadata"]);
    assert_eq!(after["spec"]["replicas"], Value::from(3));
    let (b, a) =
        (&before["spec"]["template"]["spec"]["containers"][0], &after["spec"]["template"]["spec"]["containers"][0]);
    assert_eq!(a["command"], b["command"]);
    assert_eq!(a["image"], b["image"]);
    let env_before = b["env"].as_sequence().unwrap();
    let env_after = a["env"].as_sequence().unwrap();
    assert_eq!(&env_after[..env_before.len()], &env_before[..]);
    // A `---` inside a value must not be read back as a document marker.
    assert_eq!(split_documents(&out.output).len(), 1, "{}", out.output);
    assert_eq!(inject_manifests(&out.output, &opts()).unwrap().output, out.output);
}

proptest! {
    /// Bad input is an error or untouched output, never a panic.
    #[test]
    fn arbitrary_input_never_panics(
        text in "(---\n|apiVersion: (v1|apps/v1|batch/v1)\n|kind: (Pod|Deployment|CronJob|List)\n|spec:\n|  template:\n|  containers: [\\{name: a\\}]\n|items:\n- |[a-z:\\[\\]{} -]{0,12}\n){0,12}",
        bytes in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        if let Ok(out) = inject_manifests(&text, &opts())
            && out.reports.iter().all(|r| r.outcome != Outcome::Injected)
        {
            prop_assert_eq!(out.output, text);
        }
        let response = review(&bytes, &WebhookConfig::default());
        prop_assert_eq!(&response["response"]["allowed"], &serde_json::Value::Bool(true));
    }
}

#[test]
fn the_redis_url_comes_from_a_secret_never_the_pod_spec() {
    let secret: SecretKeyRef = "reverser-redis/url".parse().unwrap();
    let o = InjectOptions { redis_url_secret: Some(secret), ..opts() };
    let c = sidecar_container(&o);
    assert_eq!(
        c["env"],
        yaml("[{name: REVERSER_REDIS_URL, valueFrom: {secretKeyRef: {name: reverser-redis, key: url}}}]")
    );
    assert!(!serde_norway::to_string(&c).unwrap().contains("redis://"));
    assert!(sidecar_container(&opts())["env"].is_null(), "no Secret, no env");
    for bad in ["reverser-redis", "/url", "a/", "a/b/c", ""] {
        assert!(bad.parse::<SecretKeyRef>().is_err(), "{bad}");
    }
}

#[test]
fn plain_containers_are_refused_for_jobs_and_cronjobs() {
    let plain = InjectOptions { mode: SidecarMode::Plain, ..opts() };
    for (text, object) in [
        (
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: backfill, namespace: shop}\nspec:\n  template:\n    spec:\n      containers: [{name: w, image: w}]\n",
            "Job shop/backfill",
        ),
        (
            "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: resync}\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers: [{name: w, image: w}]\n",
            "CronJob resync",
        ),
    ] {
        let e = inject_manifests(text, &plain).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("cannot inject into {object} with --plain-container: the sidecar never exits")),
            "{e}"
        );
        inject_manifests(text, &opts()).unwrap();
    }
}

#[test]
fn json_in_gives_json_out_for_one_object_or_a_stream() {
    let one = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "w", "image": "w"}]}});
    let service = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"}}"#;
    let text = format!("{}\n{service}\n{}", serde_json::to_string_pretty(&one).unwrap(), one);
    let out = inject_manifests(&text, &opts()).unwrap();
    let values: Vec<serde_json::Value> =
        serde_json::Deserializer::from_str(&out.output).into_iter().collect::<std::result::Result<_, _>>().unwrap();
    assert_eq!(values.len(), 3);
    for v in [&values[0], &values[2]] {
        assert_eq!(v["spec"]["initContainers"][0]["name"], SIDECAR_NAME, "{}", out.output);
    }
    assert!(out.output.contains(&format!("\n{service}\n")), "an untouched object keeps its bytes: {}", out.output);
    assert!(out.output.starts_with("{\n  \"apiVersion\""), "kubectl's two-space JSON: {}", out.output);
    assert_eq!(out.reports.iter().filter(|r| r.outcome == Outcome::Injected).count(), 2);
    // Injecting the output again changes nothing.
    assert_eq!(inject_manifests(&out.output, &opts()).unwrap().output, out.output);
    let e = inject_manifests("{\"kind\": \"Service\"}\n{\"kind\": ", &opts()).unwrap_err().to_string();
    assert!(e.starts_with("the JSON value starting at line 2 is not valid JSON"), "{e}");
}

#[test]
fn the_webhook_warns_instead_of_giving_a_jobs_pod_a_plain_sidecar() {
    let mut pod = serde_json::json!({"metadata": {"name": "backfill-x", "namespace": "ns",
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "backfill", "uid": "u"}]},
        "spec": {"containers": [{"name": "w", "image": "w"}]}});
    let plain =
        WebhookConfig { inject: InjectOptions { mode: SidecarMode::Plain, ..opts() }, ..WebhookConfig::default() };
    let answer = review(&serde_json::to_vec(&admission(&pod, "ns", "CREATE")).unwrap(), &plain);
    assert!(answer["response"]["patch"].is_null(), "{answer}");
    assert_eq!(answer["response"]["allowed"], true);
    let warning = answer["response"]["warnings"][0].as_str().unwrap();
    assert!(warning.contains("Job ns/backfill") && warning.contains("never exits"), "{warning}");
    // A native sidecar is fine for a Job; so is a plain one for other pods.
    let native = WebhookConfig { inject: opts(), ..WebhookConfig::default() };
    let answer = review(&serde_json::to_vec(&admission(&pod, "ns", "CREATE")).unwrap(), &native);
    assert!(answer["response"]["patch"].is_string(), "{answer}");
    pod["metadata"]["ownerReferences"][0]["kind"] = "ReplicaSet".into();
    pod["metadata"]["ownerReferences"][0]["apiVersion"] = "apps/v1".into();
    let answer = review(&serde_json::to_vec(&admission(&pod, "ns", "CREATE")).unwrap(), &plain);
    assert!(answer["response"]["patch"].is_string(), "{answer}");
}
