use std::collections::BTreeMap;

use super::kubeconfig::{self, Found, SafetyPolicy};
use super::*;
use crate::mirror::config::AllowedSourceNamespaces;

const SAFE: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: remote\n  cluster:\n    server: https://remote:6443\n    certificate-authority-data: Zm9v\nusers:\n- name: reader\n  user:\n    token: abc\ncontexts:\n- name: remote\n  context: {cluster: remote, user: reader}\ncurrent-context: remote\n";

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect()
}

fn reason(r: Result<(), Refusal>) -> &'static str {
    r.expect_err("refused").reason
}

#[test]
fn keys_follow_fluxs_order_and_an_explicit_key_wins() {
    let d = data(&[("value.yaml", "b"), ("value", "a"), ("custom", "c")]);
    assert_eq!(kubeconfig::resolve_key(&d, None), Some((&b"a"[..], "value")));
    assert_eq!(kubeconfig::resolve_key(&d, Some("custom")), Some((&b"c"[..], "custom")));
    // An empty `value` falls through to value.yaml; an explicit key does not fall back.
    let d = data(&[("value", ""), ("value.yaml", "b")]);
    assert_eq!(kubeconfig::resolve_key(&d, None), Some((&b"b"[..], "value.yaml")));
    assert_eq!(kubeconfig::resolve_key(&d, Some("other")), None);
    assert_eq!(kubeconfig::describe_key(None), "value or value.yaml");
}

#[test]
fn a_token_kubeconfig_with_an_embedded_ca_passes() {
    assert_eq!(kubeconfig::check(SAFE.as_bytes(), SafetyPolicy::default()), Ok(()));
}

#[test]
fn exec_and_insecure_tls_are_refused_unless_allowed() {
    let exec = SAFE.replace(
        "    token: abc\n",
        "    exec:\n      command: aws\n      apiVersion: client.authentication.k8s.io/v1\n",
    );
    assert_eq!(reason(kubeconfig::check(exec.as_bytes(), SafetyPolicy::default())), kubeconfig::EXEC_NOT_ALLOWED);
    let allow_exec = SafetyPolicy { allow_exec: true, ..SafetyPolicy::default() };
    assert_eq!(kubeconfig::check(exec.as_bytes(), allow_exec), Ok(()));

    let insecure = SAFE.replace("    certificate-authority-data: Zm9v\n", "    insecure-skip-tls-verify: true\n");
    let err = kubeconfig::check(insecure.as_bytes(), SafetyPolicy::default()).unwrap_err();
    assert_eq!(err.reason, kubeconfig::INSECURE_TLS_NOT_ALLOWED);
    assert!(err.message.contains("--insecure-kubeconfig-tls"), "{}", err.message);
    let allow_tls = SafetyPolicy { allow_insecure_tls: true, ..SafetyPolicy::default() };
    assert_eq!(kubeconfig::check(insecure.as_bytes(), allow_tls), Ok(()));
}

#[test]
fn file_references_are_refused_whatever_the_policy() {
    let all = SafetyPolicy { allow_exec: true, allow_insecure_tls: true };
    for (from, to) in [
        ("    token: abc\n", "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n"),
        ("    token: abc\n", "    client-certificate: /etc/tls.crt\n    client-key-data: Zm9v\n"),
        ("    token: abc\n", "    client-key: /etc/tls.key\n"),
        ("    certificate-authority-data: Zm9v\n", "    certificate-authority: /etc/ca.crt\n"),
    ] {
        let k = SAFE.replace(from, to);
        assert_eq!(reason(kubeconfig::check(k.as_bytes(), all)), kubeconfig::FILE_REFERENCE_NOT_ALLOWED, "{to}");
    }
}

#[test]
fn garbage_is_invalid() {
    assert_eq!(reason(kubeconfig::check(b"clusters: 7\n", SafetyPolicy::default())), kubeconfig::INVALID);
    assert_eq!(reason(kubeconfig::check(b"{{{", SafetyPolicy::default())), kubeconfig::INVALID);
}

#[test]
fn validation_names_the_secret_and_the_key() {
    let policy = SafetyPolicy::default();
    let missing = Found { secret: "mirror/remote", key: None, data: None };
    let err = kubeconfig::validate(missing, policy).unwrap_err();
    assert_eq!(err.reason, kubeconfig::SECRET_NOT_FOUND);
    assert!(err.message.contains("mirror/remote"), "{}", err.message);

    let empty = data(&[("other", "x")]);
    let err =
        kubeconfig::validate(Found { secret: "mirror/remote", key: None, data: Some(&empty) }, policy).unwrap_err();
    assert_eq!(err.reason, kubeconfig::KEY_NOT_FOUND);
    assert!(err.message.contains("value or value.yaml"), "{}", err.message);

    let good = data(&[("value.yaml", SAFE)]);
    let raw = kubeconfig::validate(Found { secret: "mirror/remote", key: None, data: Some(&good) }, policy).unwrap();
    assert_eq!(raw, SAFE.as_bytes());

    let exec = data(&[("value", &SAFE.replace("    token: abc\n", "    exec: {command: x}\n"))]);
    let err =
        kubeconfig::validate(Found { secret: "mirror/remote", key: None, data: Some(&exec) }, policy).unwrap_err();
    assert_eq!(err.reason, kubeconfig::EXEC_NOT_ALLOWED);
    assert!(err.message.starts_with("kubeconfig Secret mirror/remote key \"value\": "), "{}", err.message);
}

#[test]
fn allowed_namespaces_deny_by_default() {
    let none = BTreeMap::new();
    let spec = ClusterProviderSpec::default();
    let err = admit("default", Some(&spec), "shop", &none).unwrap_err();
    assert_eq!(err.reason, NAMESPACE_NOT_AUTHORIZED);
    assert!(err.message.contains("\"shop\"") && err.message.contains("\"default\""), "{}", err.message);

    let spec = ClusterProviderSpec {
        allowed_namespaces: Some(AllowedSourceNamespaces { names: vec!["shop".into()], selector: None }),
        ..ClusterProviderSpec::default()
    };
    assert_eq!(admit("default", Some(&spec), "shop", &none), Ok(()));
    assert_eq!(admit("default", Some(&spec), "other", &none).unwrap_err().reason, NAMESPACE_NOT_AUTHORIZED);
    // No ClusterProvider: the mirror watches its own cluster (a documented divergence).
    assert_eq!(admit("default", None, "shop", &none), Ok(()));
}

#[test]
fn the_providers_throttle_wins_over_the_defaults() {
    let defaults = Throttle { qps: DEFAULT_QPS, burst: DEFAULT_BURST };
    assert_eq!(throttle(&ClusterProviderSpec::default(), defaults), defaults);
    let spec = ClusterProviderSpec { qps: Some(5), burst: Some(7), ..ClusterProviderSpec::default() };
    assert_eq!(throttle(&spec, defaults), Throttle { qps: 5.0, burst: 7 });
    let spec = ClusterProviderSpec { qps: Some(0), burst: Some(-1), ..ClusterProviderSpec::default() };
    assert_eq!(throttle(&spec, defaults), defaults);
}

#[test]
fn reachability_classifies_what_discovery_hit() {
    use ConditionStatus::{False, True, Unknown};
    let r = |remote, d: Discovery| {
        let v = reachability(remote, &d);
        (v.status, v.reason)
    };
    assert_eq!(r(true, Discovery::Awaiting), (Unknown, "AwaitingDiscovery".into()));
    assert_eq!(r(false, Discovery::Answered), (True, "LocalCluster".into()));
    assert_eq!(r(true, Discovery::Answered), (True, "SourceClusterReachable".into()));
    let refused = |code| Discovery::Refused { code, message: "no".into() };
    assert_eq!(r(true, refused(401)), (False, "SourceClusterAuthenticationFailed".into()));
    assert_eq!(r(true, refused(403)), (False, "SourceClusterAccessDenied".into()));
    assert_eq!(r(true, refused(500)), (False, "SourceClusterUnreachable".into()));
    assert_eq!(r(true, Discovery::Unreachable("timeout".into())), (False, "SourceClusterUnreachable".into()));
}
