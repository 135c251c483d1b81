//! Status on gitops-reverser's CRs (issue 27 item 1), through the real
//! `kubectl` against the fake API: the real `reverser-sidecar watch` writes
//! it by server-side apply; `kubectl get` prints the CRDs' printer columns
//! from the Table the fake API builds; `kubectl wait` returns on Ready; each
//! reason the reference's controllers name is provoked by its cause (ref:
//! gitops-reverser `internal/controller/gitprovider_controller.go:98-145,205-215`,
//! `gittarget_controller.go:690-735`).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::fakeapi::{self, FakeApi, Store};
use testkit::free_port;
use testkit::kubectl::Kubectl;
use testkit::mirror::{Mirror, NS, git};
use testkit::sidecar;

fn kubectl(kubeconfig: &std::path::Path) -> Kubectl {
    Kubectl::new(&[]).kubeconfig(kubeconfig)
}

fn run(k: &Kubectl, args: &[&str]) -> String {
    let out = k.run(args);
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `kubectl get -o jsonpath` until it prints `want`.
fn wait_for(k: &Kubectl, object: &str, path: &str, want: &str, log: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    while Instant::now() < deadline {
        let out = k.run(&["get", object, "-n", NS, "-o", &format!("jsonpath={path}")]);
        last = String::from_utf8_lossy(&out.stdout).into_owned();
        if last == want {
            return;
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    panic!("{object} {path}: wanted {want:?}, last saw {last:?}\nwatcher log:\n{}", log());
}

const READY_REASON: &str = "{.status.conditions[?(@.type==\"Ready\")].reason}";
const READY_MESSAGE: &str = "{.status.conditions[?(@.type==\"Ready\")].message}";

#[test]
fn a_healthy_target_fills_the_printer_columns_and_kubectl_wait_returns() {
    let m = Mirror::start(|_| {});
    let k = kubectl(&m.kubeconfig);
    let out = k.run(&["wait", "--for=condition=Ready", "gittarget/lab", "-n", NS, "--timeout=30s"]);
    assert!(out.status.success(), "kubectl wait: {}\n{}", String::from_utf8_lossy(&out.stderr), m.watcher_log());
    assert!(String::from_utf8_lossy(&out.stdout).contains("condition met"));

    // The columns of the GitTarget CRD: NAME READY REASON STREAMS ...
    let streams = run(&k, &["get", "gittarget/lab", "-n", NS, "-o", "jsonpath={.status.streams.summary}"]);
    let (ready, total) = streams.split_once('/').unwrap();
    assert!(ready == total && total != "0", "{streams}");
    let table = run(&k, &["get", "gittargets", "-n", NS]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&header[..4], ["NAME", "READY", "REASON", "STREAMS"], "{table}");
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..4], ["lab", "True", "Succeeded", streams.as_str()], "{table}");
    let providers = run(&k, &["get", "gitproviders", "-n", NS]);
    assert!(providers.lines().nth(1).is_some_and(|l| l.contains("True") && l.contains("Succeeded")), "{providers}");

    // kstatus Current, the observed generation, one owner: our field
    // manager, through the status subresource.
    let obj: Value =
        serde_json::from_str(&run(&k, &["get", "gittarget/lab", "-n", NS, "-o", "json", "--show-managed-fields"]))
            .unwrap();
    let cond =
        |t: &str| obj["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == t).cloned().unwrap();
    assert_eq!(cond("Stalled")["status"], "False");
    assert_eq!(cond("Reconciling")["status"], "False");
    assert_eq!(obj["status"]["observedGeneration"], obj["metadata"]["generation"]);
    let managers: Vec<&Value> = obj["metadata"]["managedFields"].as_array().unwrap().iter().collect();
    assert!(
        managers
            .iter()
            .any(|m| m["manager"] == "reverser-mirror" && m["operation"] == "Apply" && m["subresource"] == "status"),
        "{managers:?}"
    );

    // The Ready transition is an Event on the GitTarget.
    let events: Value = serde_json::from_str(&run(&k, &["get", "events", "-n", NS, "-o", "json"])).unwrap();
    assert!(
        events["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["involvedObject"]["kind"] == "GitTarget" && e["type"] == "Normal" && e["reason"] == "Succeeded"),
        "{events}"
    );
}

/// `{.status.conditions[?(@.type=="TYPE")].FIELD}`.
fn cond_path(ty: &str, field: &str) -> String {
    format!("{{.status.conditions[?(@.type==\"{ty}\")].{field}}}")
}

/// The rules' status, as gitops-reverser's rule controllers write it (ref:
/// gitops-reverser `internal/controller/watchrule_controller.go:108-221`,
/// `stream_status.go` ruleReadiness, `stream_readiness.go:207-320`).
#[test]
fn watchrules_and_clusterwatchrules_carry_the_references_conditions() {
    let m = Mirror::start(|s| {
        s.rules.push(json!({
            "apiVersion": "configbutler.ai/v1alpha3", "kind": "ClusterWatchRule",
            "metadata": {"name": "lab-cluster"},
            "spec": {"targetRef": {"name": "lab", "namespace": NS}, "rules": [{"resources": ["namespaces"]}]}
        }));
    });
    let k = kubectl(&m.kubeconfig);
    let log = || m.watcher_log();
    for rule in ["watchrule/lab-rules", "clusterwatchrule/lab-cluster"] {
        let out = k.run(&["wait", "--for=condition=Ready", rule, "-n", NS, "--timeout=30s"]);
        assert!(out.status.success(), "kubectl wait {rule}: {}\n{}", String::from_utf8_lossy(&out.stderr), log());
    }
    let rule = |object: &str, path: &str| run(&k, &["get", object, "-n", NS, "-o", &format!("jsonpath={path}")]);
    assert_eq!(rule("watchrule/lab-rules", &cond_path("ResourcesResolved", "reason")), "Resolved");
    assert_eq!(rule("watchrule/lab-rules", &cond_path("StreamsRunning", "reason")), "AllStreamsReady");
    assert_eq!(rule("watchrule/lab-rules", &cond_path("GitTargetReady", "status")), "True");
    assert_eq!(rule("watchrule/lab-rules", &cond_path("Stalled", "status")), "False");
    assert_eq!(rule("watchrule/lab-rules", "{.status.streams.summary}"), "3/3");
    assert_eq!(rule("clusterwatchrule/lab-cluster", "{.status.streams.summary}"), "1/1");
    let generation = rule("watchrule/lab-rules", "{.metadata.generation}");
    assert_eq!(rule("watchrule/lab-rules", "{.status.observedGeneration}"), generation);

    // The printer columns: NAME TARGET READY REASON STREAMS.
    let table = run(&k, &["get", "watchrules", "-n", NS]);
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..5], ["lab-rules", "lab", "True", "Succeeded", "3/3"], "{table}");
    let table = run(&k, &["get", "clusterwatchrules"]);
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..5], ["lab-cluster", "lab", "True", "Succeeded", "1/1"], "{table}");

    // One owner: our field manager, through the status subresource.
    let obj: Value = serde_json::from_str(&run(
        &k,
        &["get", "watchrule/lab-rules", "-n", NS, "-o", "json", "--show-managed-fields"],
    ))
    .unwrap();
    assert!(
        obj["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["manager"] == "reverser-mirror" && m["subresource"] == "status"),
        "{obj}"
    );
    // The WatchRule's Ready transition is an Event in its namespace.
    let events: Value = serde_json::from_str(&run(&k, &["get", "events", "-n", NS, "-o", "json"])).unwrap();
    assert!(
        events["items"].as_array().unwrap().iter().any(|e| e["involvedObject"]["kind"] == "WatchRule"
            && e["involvedObject"]["name"] == "lab-rules"
            && e["reason"] == "Succeeded"),
        "{events}"
    );

    // A rule naming a type no server serves stalls, naming it.
    let typo = json!({
        "apiVersion": "configbutler.ai/v1alpha3", "kind": "WatchRule",
        "metadata": {"name": "typo", "namespace": NS},
        "spec": {"targetRef": {"name": "lab"}, "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"]}]}
    });
    let out = k.run_with_stdin(&["apply", "--validate=false", "-f", "-"], &typo.to_string());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_for(&k, "watchrule/typo", READY_REASON, "UnresolvedResources", log);
    assert_eq!(rule("watchrule/typo", &cond_path("Stalled", "status")), "True");
    assert_eq!(rule("watchrule/typo", &cond_path("ResourcesResolved", "status")), "False");
    let message = rule("watchrule/typo", &cond_path("ResourcesResolved", "message"));
    assert!(message.contains("widgets"), "{message}");
    // The healthy rules stay as they were.
    assert_eq!(rule("watchrule/lab-rules", READY_REASON), "Succeeded");
}

/// The watcher alone (no sidecar: the causes below keep it from starting).
fn watcher(dir: &std::path::Path, kubeconfig: &std::path::Path) -> Child {
    Command::new(sidecar::binary())
        .args(["watch", "--git-target", &format!("{NS}/lab"), "--rescan", "200ms", "--status-interval", "0s"])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--socket")
        .arg(dir.join("absent.sock"))
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port().unwrap())])
        .env("REVERSER_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(dir.join("watcher.log")).unwrap()))
        .spawn()
        .unwrap()
}

fn api_with(objects: Vec<Value>) -> FakeApi {
    let mut store = Store::new();
    store.load_crd_schemas(&testkit::fixtures::gitops_reverser_crds()).unwrap();
    store.seed_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})).unwrap();
    for o in objects {
        store.seed_object(o).unwrap();
    }
    fakeapi::spawn(store).unwrap()
}

fn provider(url: &str) -> Value {
    json!({"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitProvider",
           "metadata": {"name": "lab-git", "namespace": NS},
           "spec": {"url": url, "allowedBranches": ["main"], "secretRef": {"name": "creds"}}})
}

fn target(provider: &str) -> Value {
    json!({"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitTarget",
           "metadata": {"name": "lab", "namespace": NS},
           "spec": {"providerRef": {"name": provider}, "branch": "main", "path": "clusters/lab"}})
}

#[test]
fn each_cause_shows_its_reason_in_status() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote.git");
    std::fs::create_dir_all(&remote).unwrap();
    git(&remote, &["init", "--quiet", "--bare", "--initial-branch=main"]);
    // Nothing listens on port 1 of loopback: the remote is unreachable.
    let api = api_with(vec![provider("http://127.0.0.1:1/lab.git"), target("missing")]);
    let kc = api.write_kubeconfig(&dir.path().join("kubeconfig"), NS).unwrap();
    let k = kubectl(&kc);
    let mut w = watcher(dir.path(), &kc);
    let log = || std::fs::read_to_string(dir.path().join("watcher.log")).unwrap_or_default();

    // The GitTarget names a GitProvider that does not exist.
    wait_for(&k, "gittarget/lab", READY_REASON, "ProviderNotFound", log);
    let table = run(&k, &["get", "gittargets", "-n", NS]);
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["lab", "False", "ProviderNotFound"], "{table}");
    run(
        &k,
        &["patch", "gittarget/lab", "-n", NS, "--type=merge", "-p", r#"{"spec":{"providerRef":{"name":"lab-git"}}}"#],
    );

    // Its credentials Secret does not exist.
    wait_for(&k, "gitprovider/lab-git", READY_REASON, "SecretNotFound", log);
    wait_for(&k, "gittarget/lab", READY_REASON, "GitProviderNotReady", log);
    let message = run(&k, &["get", "gittarget/lab", "-n", NS, "-o", &format!("jsonpath={READY_MESSAGE}")]);
    assert!(message.contains("SecretNotFound") && message.contains("'creds'"), "{message}");

    // It exists but holds no credential.
    let secret = |data: Value| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": NS}, "stringData": data})
            .to_string()
    };
    let out = k.run_with_stdin(&["apply", "--validate=false", "-f", "-"], &secret(json!({"note": "nothing here"})));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_for(&k, "gitprovider/lab-git", READY_REASON, "SecretMalformed", log);

    // A token now, but the remote does not answer.
    let out = k.run_with_stdin(&["apply", "--validate=false", "-f", "-"], &secret(json!({"token": "t0ken"})));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_for(&k, "gitprovider/lab-git", READY_REASON, "ConnectionFailed", log);
    let message = run(&k, &["get", "gitprovider/lab-git", "-n", NS, "-o", &format!("jsonpath={READY_MESSAGE}")]);
    assert!(message.starts_with("Failed to connect to repository:") && message.contains("127.0.0.1:1"), "{message}");

    // A reachable remote with a template that does not parse.
    let patch = json!({"spec": {"url": format!("file://{}", remote.display()),
        "commit": {"message": {"groupTemplate": "{{.Autor}} changed {{.Count}}"}}}});
    run(&k, &["patch", "gitprovider/lab-git", "-n", NS, "--type=merge", "-p", &patch.to_string()]);
    wait_for(&k, "gitprovider/lab-git", READY_REASON, "CommitConfigInvalid", log);
    let message = run(&k, &["get", "gitprovider/lab-git", "-n", NS, "-o", &format!("jsonpath={READY_MESSAGE}")]);
    assert!(message.contains("unknown field `.Autor`"), "{message}");

    // Fixed; then the branch is taken out of allowedBranches.
    run(&k, &["patch", "gitprovider/lab-git", "-n", NS, "--type=merge", "-p", r#"{"spec":{"commit":null}}"#]);
    wait_for(&k, "gitprovider/lab-git", READY_REASON, "Succeeded", log);
    run(
        &k,
        &[
            "patch",
            "gitprovider/lab-git",
            "-n",
            NS,
            "--type=merge",
            "-p",
            r#"{"spec":{"allowedBranches":["release-*"]}}"#,
        ],
    );
    wait_for(&k, "gittarget/lab", READY_REASON, "BranchNotAllowed", log);
    let stalled = run(
        &k,
        &["get", "gittarget/lab", "-n", NS, "-o", "jsonpath={.status.conditions[?(@.type==\"Stalled\")].status}"],
    );
    assert_eq!(stalled, "True");

    // Every Ready transition of the provider was an Event, newest last.
    let events: Value = serde_json::from_str(&run(&k, &["get", "events", "-n", NS, "-o", "json"])).unwrap();
    let reasons: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["kind"] == "GitProvider")
        .filter_map(|e| e["reason"].as_str())
        .collect();
    assert_eq!(reasons, ["SecretNotFound", "SecretMalformed", "ConnectionFailed", "CommitConfigInvalid", "Succeeded"]);
    // SIGTERM stops it though its sidecar never came up.
    Command::new("kill").args(["-TERM", &w.id().to_string()]).status().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while w.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            w.kill().unwrap();
            panic!("the watcher ignored SIGTERM while waiting for its sidecar\n{}", log());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// GitPathAccepted (ref: `gittarget_controller.go` `gitPathAxis`, the
/// acceptance gate of `internal/manifestanalyzer/acceptance.go`): a folder
/// holding a file the mirror cannot manage refuses every window, the
/// GitTarget says which file and stalls; alice's change waits, nothing
/// lost, and lands as hers once someone removes the file.
#[test]
fn a_folder_holding_a_foreign_file_is_refused_in_status_until_it_is_removed() {
    let mut m = Mirror::start_held(
        |s| s.prefill.push((format!("{}/deploy.sh", testkit::mirror::PREFIX), "#!/bin/sh\n".into())),
        &[],
    );
    m.spawn_watcher(&[]);
    let k = kubectl(&m.kubeconfig);
    let log = || m.watcher_log();
    m.act("alice", true, |s| {
        s.create("configmaps", NS, testkit::mirror::configmap("web", "blue")).unwrap();
    });
    wait_for(&k, "gittarget/lab", &cond_path("GitPathAccepted", "reason"), "UnsupportedContent", log);
    let message = run(
        &k,
        &["get", "gittarget/lab", "-n", NS, "-o", &format!("jsonpath={}", cond_path("GitPathAccepted", "message"))],
    );
    assert_eq!(
        message,
        "Git path refused at clusters/lab/deploy.sh: foreign file clusters/lab/deploy.sh is not a managed manifest; \
         remove it or name it in .gittargetignore"
    );
    wait_for(&k, "gittarget/lab", &cond_path("Stalled", "status"), "True", log);
    wait_for(&k, "gittarget/lab", READY_REASON, "UnsupportedContent", log);
    // The CRD's wide column.
    let table = run(&k, &["get", "gittargets", "-n", NS, "-o", "wide"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    let col = header.iter().position(|h| *h == "GITPATHACCEPTED").unwrap_or_else(|| panic!("{table}"));
    assert_eq!(row[col], "False", "{table}");
    assert!(!m.remote_has(&testkit::mirror::cm_path("web")), "nothing committed into a refused folder");

    // Someone removes the file; the held window lands as alice's.
    let work = m.dir.path().join("prefill");
    git(&work, &["rm", "--quiet", &format!("{}/deploy.sh", testkit::mirror::PREFIX)]);
    git(&work, &["-c", "user.name=o", "-c", "user.email=o@x.invalid", "commit", "--quiet", "-m", "no scripts here"]);
    git(&work, &["push", "--quiet", "origin", "HEAD:main"]);
    let out = k.run(&["wait", "--for=condition=Ready", "gittarget/lab", "-n", NS, "--timeout=40s"]);
    assert!(out.status.success(), "kubectl wait: {}\n{}", String::from_utf8_lossy(&out.stderr), log());
    wait_for(&k, "gittarget/lab", &cond_path("GitPathAccepted", "status"), "True", log);
    m.wait("alice's change in the remote", || m.remote_has(&testkit::mirror::cm_path("web")));
    assert_eq!(m.authors(&testkit::mirror::cm_path("web")), ["alice"]);
}

#[test]
fn server_side_apply_through_kubectl_records_managers_and_refuses_a_conflict_unless_forced() {
    let api = api_with(vec![target("lab-git")]);
    let dir = tempfile::tempdir().unwrap();
    let kc = api.write_kubeconfig(&dir.path().join("kubeconfig"), NS).unwrap();
    let k = kubectl(&kc);
    let doc = |branch: &str| {
        json!({"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitTarget",
               "metadata": {"name": "other", "namespace": NS},
               "spec": {"providerRef": {"name": "lab-git"}, "branch": branch, "path": "x"}})
        .to_string()
    };
    let apply = |manager: &str, branch: &str, force: bool| {
        let mut args = vec!["apply", "--validate=false", "--server-side", "--field-manager", manager, "-f", "-"];
        if force {
            args.push("--force-conflicts");
        }
        k.run_with_stdin(&args, &doc(branch))
    };
    let out = apply("alice", "main", false);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let gen1 = run(&k, &["get", "gittarget/other", "-n", NS, "-o", "jsonpath={.metadata.generation}"]);
    // The same config again changes nothing, not even the generation.
    assert!(apply("alice", "main", false).status.success());
    assert_eq!(run(&k, &["get", "gittarget/other", "-n", NS, "-o", "jsonpath={.metadata.generation}"]), gen1);
    let out = apply("bob", "dev", false);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("conflict with \"alice\"") && stderr.contains(".spec.branch"), "{stderr}");
    let out = apply("bob", "dev", true);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let obj: Value =
        serde_json::from_str(&run(&k, &["get", "gittarget/other", "-n", NS, "-o", "json", "--show-managed-fields"]))
            .unwrap();
    assert_eq!(obj["spec"]["branch"], "dev");
    assert_eq!(
        obj["metadata"]["generation"],
        json!(gen1.parse::<i64>().unwrap() + 1),
        "a spec change bumps the generation"
    );
    let owners: Vec<(String, String)> = obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["manager"].as_str().unwrap().to_string(), m["fieldsV1"].to_string()))
        .collect();
    let alice = owners.iter().find(|(m, _)| m == "alice").map(|(_, f)| f.clone()).unwrap();
    let bob = owners.iter().find(|(m, _)| m == "bob").map(|(_, f)| f.clone()).unwrap();
    assert!(!alice.contains("f:branch") && bob.contains("f:branch"), "alice {alice}, bob {bob}");
}

/// Status writes: a healthy target costs none once settled; a remote that
/// flaps every 250ms costs at most one write per object per
/// `--status-interval` (1s here), however often it changes.
#[test]
fn status_writes_are_none_when_healthy_and_bounded_when_the_remote_flaps() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote.git");
    std::fs::create_dir_all(&remote).unwrap();
    git(&remote, &["init", "--quiet", "--bare", "--initial-branch=main"]);
    let mut p = provider(&format!("file://{}", remote.display()));
    p["spec"].as_object_mut().unwrap().remove("secretRef");
    let api = api_with(vec![p, target("lab-git")]);
    let kc = api.write_kubeconfig(&dir.path().join("kubeconfig"), NS).unwrap();
    let k = kubectl(&kc);
    let mut w = Command::new(sidecar::binary())
        .args(["watch", "--git-target", &format!("{NS}/lab"), "--rescan", "100ms", "--status-interval", "1s"])
        .arg("--kubeconfig")
        .arg(&kc)
        .arg("--socket")
        .arg(dir.path().join("absent.sock"))
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port().unwrap())])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let log = String::new;
    wait_for(&k, "gitprovider/lab-git", READY_REASON, "Succeeded", log);
    let writes = || api.requests().iter().filter(|r| r.method == "PATCH" && r.path.ends_with("/status")).count();
    std::thread::sleep(Duration::from_secs(2));
    let settled = writes();
    std::thread::sleep(Duration::from_secs(3));
    let healthy = writes() - settled;
    assert_eq!(healthy, 0, "a healthy target's status is not rewritten");

    let start = writes();
    let began = Instant::now();
    let flap = Duration::from_secs(4);
    let mut up = false;
    while began.elapsed() < flap {
        let url = if up { format!("file://{}", remote.display()) } else { "http://127.0.0.1:1/lab.git".into() };
        run(
            &k,
            &[
                "patch",
                "gitprovider/lab-git",
                "-n",
                NS,
                "--type=merge",
                "-p",
                &json!({"spec": {"url": url}}).to_string(),
            ],
        );
        up = !up;
        std::thread::sleep(Duration::from_millis(250));
    }
    let flapping = writes() - start;
    let secs = began.elapsed().as_secs_f64();
    // Two objects, one write each per started second of the interval.
    let bound = 2 * (secs.ceil() as usize + 1);
    println!(
        "status writes: healthy 0/min; flapping {flapping} in {secs:.1}s = {:.0}/min (bound {bound})",
        flapping as f64 * 60.0 / secs
    );
    assert!(flapping >= 2, "the flapping was reported at all ({flapping})");
    assert!(flapping <= bound, "{flapping} writes in {secs:.1}s exceed one per object per second");
    w.kill().unwrap();
    w.wait().unwrap();
}

/// The observations beside the conditions: `lastPushTime` after a push,
/// `retention` (what prune mode `Never` kept on a relist,
/// gittarget_types.go:210-226), the GitProvider's `signingPublicKey` (the
/// key the sidecar generated, in authorized_keys format,
/// gitprovider_types.go:150-154) and the ClusterProvider's own conditions.
#[test]
fn the_status_reports_pushes_retention_the_signing_key_and_the_cluster_provider() {
    let mut m = Mirror::start(|s| {
        s.target["spec"]["prune"] = json!({"mode": "Never"});
        s.provider["spec"]["commit"]["signing"] =
            json!({"secretRef": {"name": "git-signing"}, "generateWhenMissing": true});
        s.seed.push(json!({"apiVersion": "configbutler.ai/v1alpha3", "kind": "ClusterProvider",
            "metadata": {"name": "default"}, "spec": {"allowedNamespaces": {"names": [NS]}}}));
    });
    let k = kubectl(&m.kubeconfig);
    let log = || String::new();
    m.act("alice", true, |s| {
        s.create("configmaps", NS, testkit::mirror::configmap("web", "1")).unwrap();
    });
    m.wait("alice's create", || m.remote_has(&testkit::mirror::cm_path("web")));
    let pushed = |k: &Kubectl| run(k, &["get", "gittarget/lab", "-n", NS, "-o", "jsonpath={.status.lastPushTime}"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while pushed(&k).is_empty() {
        assert!(Instant::now() < deadline, "no lastPushTime\n{}", m.watcher_log());
        std::thread::sleep(Duration::from_millis(150));
    }
    let first_push = pushed(&k);
    assert!(first_push.len() == 20 && first_push.ends_with('Z'), "an RFC 3339 second: {first_push}");

    // Deleted while the watcher is down: the relist finds its document, and
    // prune mode Never keeps it. That is an observation, not a condition.
    m.stop_watcher();
    m.act("bob", false, |s| {
        s.delete("configmaps", NS, "web", None, None).unwrap();
    });
    m.start_watcher(&[]);
    wait_for(&k, "gittarget/lab", "{.status.retention.mode}", "Never", || m.watcher_log());
    wait_for(&k, "gittarget/lab", "{.status.retention.retainedDocuments}", "1", || m.watcher_log());
    assert!(
        !run(&k, &["get", "gittarget/lab", "-n", NS, "-o", "jsonpath={.status.retention.observedTime}"]).is_empty()
    );
    assert!(m.remote_has(&testkit::mirror::cm_path("web")));
    wait_for(&k, "gittarget/lab", READY_REASON, "Succeeded", || m.watcher_log());

    // The signing key the sidecar generated, as the Secret holds it.
    let encoded = run(&k, &["get", "secret/git-signing", "-n", NS, "-o", "jsonpath={.data.signing\\.pub}"]);
    let public = String::from_utf8(base64_decode(&encoded)).unwrap();
    assert!(public.starts_with("ssh-ed25519 "), "{public}");
    wait_for(&k, "gitprovider/lab-git", "{.status.signingPublicKey}", public.trim(), log);

    // The ClusterProvider names the cluster the mirror runs in.
    let validated = "{.status.conditions[?(@.type==\"Validated\")].reason}";
    wait_for(&k, "clusterprovider/default", validated, "InCluster", || m.watcher_log());
    let out = k.run(&["wait", "--for=condition=Ready", "clusterprovider/default", "--timeout=30s"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // ... and the GitTarget projects it, beside the source's reachability.
    let reason = |ty: &str| format!("{{.status.conditions[?(@.type==\"{ty}\")].reason}}");
    wait_for(&k, "gittarget/lab", &reason("ClusterProviderReady"), "ClusterProviderReady", || m.watcher_log());
    wait_for(&k, "gittarget/lab", &reason("SourceClusterReachable"), "LocalCluster", || m.watcher_log());
}

fn base64_decode(s: &str) -> Vec<u8> {
    let out =
        Command::new("base64").arg("-d").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(s.as_bytes())?;
            c.wait_with_output()
        });
    out.unwrap().stdout
}
