//! A remote source cluster (issue 27 item 4): a ClusterProvider's
//! `spec.kubeConfig.secretRef` makes the watcher list and watch another
//! cluster while its CRs, their status and the kubeconfig Secret stay in
//! the control cluster (gitops-reverser `source_cluster_resolver.go`). Two
//! fake API servers play the two clusters; status is read through the real
//! `kubectl`.

use serde_json::{Value, json};
use testkit::fakeapi::{self, FakeApi, Store};
use testkit::kubectl::Kubectl;
use testkit::mirror::{Mirror, NS, cm_path, configmap};
use testkit::{audit, fixtures};

/// Where the operator's Secrets are, in the control cluster.
const OPERATOR_NS: &str = "reverser-system";
/// The remote cluster's credential: the fake API maps it to this user.
const REMOTE_TOKEN: &str = "remote-reader-token";
const REMOTE_USER: &str = "system:serviceaccount:mirror:reader";

/// The remote cluster: namespace `shop` with one ConfigMap only it holds.
fn remote_cluster() -> FakeApi {
    let mut store = Store::new();
    store.load_crd_schemas(&fixtures::gitops_reverser_crds()).unwrap();
    store.seed_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})).unwrap();
    store.seed_object(configmap("remote-only", "from the remote")).unwrap();
    let api = fakeapi::spawn(store).unwrap();
    api.token(REMOTE_TOKEN, REMOTE_USER);
    api
}

/// A kubeconfig for `api` with an inline token (`extra` lines go under
/// the cluster entry).
fn remote_kubeconfig(api: &FakeApi, extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: remote\n  cluster:\n    server: {}\n{extra}users:\n- name: reader\n  user:\n    token: {REMOTE_TOKEN}\ncontexts:\n- name: remote\n  context:\n    cluster: remote\n    user: reader\ncurrent-context: remote\n",
        api.url()
    )
}

/// The control cluster's extra objects: the kubeconfig Secret in the
/// operator namespace, the ClusterProvider naming it, and a ConfigMap the
/// mirror must not see (it is not in the watched cluster).
fn control_objects(kubeconfig: &str, allowed: &[&str]) -> Vec<Value> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(kubeconfig);
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NS}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "remote-kubeconfig", "namespace": OPERATOR_NS},
               "data": {"value": b64}}),
        json!({"apiVersion": "configbutler.ai/v1alpha3", "kind": "ClusterProvider", "metadata": {"name": "default"},
               "spec": {"kubeConfig": {"secretRef": {"name": "remote-kubeconfig"}},
                        "allowedNamespaces": {"names": allowed}, "qps": 50, "burst": 60}}),
        configmap("control-only", "from the control cluster"),
    ]
}

fn kubectl(m: &Mirror) -> Kubectl {
    Kubectl::new(&[]).kubeconfig(&m.kubeconfig)
}

fn jsonpath(k: &Kubectl, object: &str, path: &str) -> String {
    let out = k.run(&["get", object, "-n", NS, "-o", &format!("jsonpath={path}")]);
    assert!(out.status.success(), "kubectl get {object}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn condition(k: &Kubectl, object: &str, ty: &str) -> String {
    jsonpath(
        k,
        object,
        &format!(
            "{{.status.conditions[?(@.type==\"{ty}\")].status}}/{{.status.conditions[?(@.type==\"{ty}\")].reason}}"
        ),
    )
}

/// `user` changes `name` on the remote cluster, and the remote's audit
/// event reaches the sidecar on the ClusterProvider's route.
fn act_on_remote(m: &Mirror, remote: &FakeApi, user: &str, name: &str, value: &str) {
    let writes = {
        let mut store = remote.store.lock().unwrap();
        store.as_user(user).create("configmaps", NS, configmap(name, value)).unwrap();
        store.take_writes()
    };
    let events: Vec<Value> = writes.iter().map(audit::from_write).collect();
    assert_eq!(m.sidecar.post_events("default", &events), 200);
}

#[test]
fn a_remote_clusterprovider_mirrors_the_remote_while_the_crs_stay_in_the_control_cluster() {
    let remote = remote_cluster();
    let objects = control_objects(&remote_kubeconfig(&remote, ""), &[NS]);
    let m = Mirror::start_with(|s| s.seed.extend(objects), &[], &["--operator-namespace", OPERATOR_NS]);
    m.wait("the remote's ConfigMap", || m.remote_has(&cm_path("remote-only")));
    assert!(!m.remote_has(&cm_path("control-only")), "the control cluster's objects are not the source");

    act_on_remote(&m, &remote, "alice", "remote-new", "1");
    m.wait("alice's change on the remote", || m.remote_has(&cm_path("remote-new")));
    assert_eq!(m.authors(&cm_path("remote-new")), vec!["alice"]);

    // The status, in the control cluster, says where the source is.
    let k = kubectl(&m);
    let out = k.run(&["wait", "--for=condition=Ready", "gittarget/lab", "-n", NS, "--timeout=30s"]);
    assert!(out.status.success(), "kubectl wait: {}\n{}", String::from_utf8_lossy(&out.stderr), m.watcher_log());
    assert_eq!(condition(&k, "gittarget/lab", "SourceClusterReachable"), "True/SourceClusterReachable");
    assert_eq!(condition(&k, "gittarget/lab", "ClusterProviderReady"), "True/ClusterProviderReady");
    assert_eq!(condition(&k, "clusterprovider/default", "Validated"), "True/Validated");
    let message = jsonpath(&k, "clusterprovider/default", "{.status.conditions[?(@.type==\"Validated\")].message}");
    assert_eq!(message, format!("kubeconfig Secret {OPERATOR_NS}/remote-kubeconfig validated"));

    // The remote was listed and watched with the kubeconfig's credential;
    // the control cluster was not asked for ConfigMaps at all.
    let remote_reads: Vec<_> = remote
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/api/v1/") && r.path.ends_with("/configmaps"))
        .collect();
    assert!(!remote_reads.is_empty(), "the remote's ConfigMaps were listed");
    assert!(remote_reads.iter().all(|r| r.user == REMOTE_USER), "{remote_reads:?}");
    assert!(
        !m.api.requests().iter().any(|r| r.path.ends_with("/configmaps")),
        "the control cluster's ConfigMaps were read"
    );
    let log = m.watcher_log();
    assert!(log.contains("qps=50") && log.contains("burst=60"), "the provider's throttle applies:\n{log}");
}

#[test]
fn an_unsafe_kubeconfig_is_refused_unless_allowed_and_a_tightened_provider_stops_the_mirror() {
    let remote = remote_cluster();
    let insecure = remote_kubeconfig(&remote, "    insecure-skip-tls-verify: true\n");
    let objects = control_objects(&insecure, &[NS]);
    let mut m = Mirror::start_held(|s| s.seed.extend(objects), &[]);
    m.spawn_watcher(&["--operator-namespace", OPERATOR_NS]);
    let k = kubectl(&m);
    m.wait("the ClusterProvider's refusal", || {
        condition(&k, "clusterprovider/default", "Validated") == "False/KubeConfigInsecureTLSNotAllowed"
    });
    let message = jsonpath(&k, "clusterprovider/default", "{.status.conditions[?(@.type==\"Validated\")].message}");
    assert!(message.contains("--insecure-kubeconfig-tls"), "{message}");
    // On the GitTarget it is the ClusterProvider's readiness, projected
    // (gittarget_controller.go:331-333 leaves the kubeconfig to the provider).
    m.wait("the GitTarget held", || {
        condition(&k, "gittarget/lab", "ClusterProviderReady") == "False/ClusterProviderNotReady"
    });
    assert_eq!(condition(&k, "gittarget/lab", "Ready"), "False/ClusterProviderNotReady");
    assert_eq!(condition(&k, "gittarget/lab", "Validated"), "True/Succeeded");
    assert_eq!(m.commits(), 0, "nothing is mirrored from a refused kubeconfig");
    assert!(remote.requests().is_empty(), "the remote was never dialed");
    m.stop_watcher();

    // The operator opts in: the same kubeconfig is used.
    m.start_watcher(&["--operator-namespace", OPERATOR_NS, "--insecure-kubeconfig-tls"]);
    m.wait("the remote's ConfigMap", || m.remote_has(&cm_path("remote-only")));
    assert_eq!(condition(&k, "clusterprovider/default", "Validated"), "True/Validated");

    // A platform admin stops admitting the namespace: the running mirror stops, saying why.
    let patch = json!({"spec": {"allowedNamespaces": {"names": ["elsewhere"]}}}).to_string();
    let out = k.run(&["patch", "clusterprovider/default", "--type=merge", "-p", &patch]);
    assert!(out.status.success(), "kubectl patch: {}", String::from_utf8_lossy(&out.stderr));
    let mut watcher = m.watcher.take().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = watcher.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the watcher kept running:\n{}", m.watcher_log());
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(status.success(), "{status:?}");
    let log = m.watcher_log();
    assert!(log.contains("the GitTarget may no longer be mirrored (NamespaceNotAuthorized)"), "{log}");
    assert_eq!(condition(&k, "gittarget/lab", "Validated"), "False/NamespaceNotAuthorized");
    let message = jsonpath(&k, "gittarget/lab", "{.status.conditions[?(@.type==\"Validated\")].message}");
    assert!(message.contains("spec.allowedNamespaces"), "{message}");
}
