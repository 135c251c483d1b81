//! Both plugins connect as kubectl does, through the real `kubectl`:
//! every call is bounded (a server that accepts and never answers ends the
//! command with a timeout error, never a hang), kubectl's connection flags
//! (`--request-timeout`, `--server`, `--token`, `--user`, `--cluster`,
//! `--as`, `--as-group`, `--certificate-authority`,
//! `--insecure-skip-tls-verify`), `KUBECONFIG` lists with missing files, and
//! a failing exec credential plugin worded for a human.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use testkit::fakeapi::{self, FakeApi, Store};
use testkit::kubectl::Kubectl;
use testkit::process::Hang;
use testkit::tls::TlsFront;

/// How long any command may take here: far above every timeout the tests
/// set (1 s), far below a hang.
const BOUND: Duration = Duration::from_secs(45);

fn kubectl() -> Kubectl {
    Kubectl::new(&[env!("CARGO_BIN_EXE_kubectl-reverser"), env!("CARGO_BIN_EXE_kubectl-tatara")])
        .env_remove("REVERSER_REDIS_URL")
        .env_remove("GITHUB_TOKEN")
}

/// Runs `kubectl args`, killing it (and failing) if it outlives [`BOUND`].
fn ends(k: &Kubectl, args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let mut child = k.spawn(args);
    loop {
        if child.try_wait().expect("poll kubectl").is_some() {
            return (child.wait_with_output().expect("collect kubectl's output"), started.elapsed());
        }
        if started.elapsed() > BOUND {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collect kubectl's output");
            panic!("kubectl {args:?} still ran after {BOUND:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A kubeconfig: clusters, users (token or exec) and one context per
/// cluster, the first current.
fn kubeconfig(dir: &Path, name: &str, clusters: &[(&str, &str)], users: &[(&str, &str)]) -> std::path::PathBuf {
    let mut y = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for (n, server) in clusters {
        y.push_str(&format!("- name: {n}\n  cluster:\n    server: {server}\n"));
    }
    y.push_str("users:\n");
    for (n, user) in users {
        y.push_str(&format!("- name: {n}\n  user:\n{user}\n"));
    }
    y.push_str("contexts:\n");
    for (n, _) in clusters {
        y.push_str(&format!(
            "- name: {n}\n  context:\n    cluster: {n}\n    user: {}\n    namespace: default\n",
            users[0].0
        ));
    }
    y.push_str(&format!("current-context: {}\n", clusters[0].0));
    let path = dir.join(name);
    std::fs::write(&path, y).unwrap();
    path
}

fn token(t: &str) -> String {
    format!("    token: {t}")
}

fn tatara_api() -> FakeApi {
    let mut store = Store::new();
    store.load_crd_schemas(&testkit::fixtures::tatara_crds()).unwrap();
    fakeapi::seed_world(&mut store, "default").unwrap();
    fakeapi::spawn(store).unwrap()
}

#[test]
fn every_command_ends_against_a_server_that_never_answers() {
    let hang = Hang::start();
    let k = kubectl();
    let kc = kubeconfig(k.dir.path(), "hang", &[("hang", &hang.url())], &[("me", &token("t"))]);
    // takeover finds the operator and its token before it reads the cluster.
    let k = k.kubeconfig(&kc).env("TATARA_OPERATOR_URL", "http://127.0.0.1:9").env("TATARA_TOKEN", "t");
    let cases: [&[&str]; 6] = [
        &["reverser", "why", "cm/web"],
        &["tatara", "owners", "task/umbrella"],
        &["tatara", "repair"],
        &["tatara", "repair", "-A"],
        &["tatara", "sweep", "--project", "tatara"],
        &["tatara", "takeover", "tatara-operator!9", "--project", "tatara"],
    ];
    for args in cases {
        let mut args = args.to_vec();
        args.extend_from_slice(&["--request-timeout", "1s"]);
        let (out, took) = ends(&k, &args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(5), "{args:?} ({took:?}): {stderr}{stdout}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains("did not answer within --request-timeout 1s"),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains(&hang.addr.to_string()), "{args:?} names the server: {stderr}");
        assert!(stdout.is_empty(), "{stdout}");
    }
}

#[test]
fn a_paused_api_server_and_a_silent_forge_end_within_the_request_timeout() {
    let api = tatara_api();
    let k = kubectl().env("GITHUB_TOKEN", "tok");
    let kc = api.kubeconfig(k.dir.path());
    let k = k.kubeconfig(&kc);
    // The forge accepts and never answers: sweep reads the cluster, then
    // waits on GitHub.
    let forge = Hang::start();
    let (out, took) =
        ends(&k, &["tatara", "sweep", "--project", "tatara", "--forge-url", &forge.url(), "--request-timeout", "1s"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    // The flag bounds the whole call: no retry multiplies it (it took 4.1 s
    // while octocrab retried each timed-out request).
    assert!(took < Duration::from_millis(3000), "a 1 s --request-timeout took {took:?}");
    // The message names the bound and the flag that sets it, not the
    // HTTP client's layers (issue 29).
    let said = format!("error: the forge at {} did not answer within 1s (--request-timeout)", forge.url());
    assert!(stderr.starts_with(&said), "{stderr}");
    assert!(!stderr.contains("SendRequest") && !stderr.contains("client error"), "{stderr}");
    assert!(!stderr.contains("ERROR"), "the forge client's own log stays quiet: {stderr}");
    // No token: one sentence naming what to set (issue 29).
    let (out, _) = ends(
        &kubectl().kubeconfig(&kc),
        &["tatara", "sweep", "--project", "tatara", "--forge-url", &forge.url(), "--request-timeout", "1s"],
    );
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr,
        format!("error: no token for the forge at {}: set GITHUB_TOKEN, or pass --github-token\n", forge.url())
    );

    api.pause();
    for args in [&["tatara", "owners", "task/umbrella"][..], &["reverser", "why", "task/umbrella"]] {
        let mut args = args.to_vec();
        args.extend_from_slice(&["--request-timeout=1s"]);
        let (out, _) = ends(&k, &args);
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(5), "{args:?}: {stderr}");
        assert!(stderr.contains("did not answer within --request-timeout 1s"), "{stderr}");
    }
    api.resume();
    let (out, _) = ends(&k, &["tatara", "owners", "task/umbrella", "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out).1);
}

#[test]
fn connection_flags_pick_the_server_credentials_and_identity() {
    let api = tatara_api();
    api.token("robot-token", "robot");
    api.token("flag-token", "carol");
    let k = kubectl();
    let dead = format!("http://127.0.0.1:{}", testkit::free_port().unwrap());
    // The current context points at nothing; the flags reach the fake API.
    let kc = kubeconfig(
        k.dir.path(),
        "two",
        &[("dead", &dead), ("live", &api.url())],
        &[("me", &token("unknown")), ("robot", &token("robot-token"))],
    );
    let k = k.kubeconfig(&kc);
    let owners = ["tatara", "owners", "task/umbrella", "-o", "json"];
    let run = |extra: &[&str]| {
        let mut args = owners.to_vec();
        args.extend_from_slice(extra);
        let (out, _) = ends(&k, &args);
        assert!(out.status.success(), "{extra:?}: {}", text(&out).1);
        api.requests().last().cloned().expect("a request reached the fake API")
    };
    let (out, _) = ends(&k, &owners);
    assert_eq!(out.status.code(), Some(5), "the current context's server is down: {}", text(&out).1);

    assert_eq!(run(&["--context", "live"]).user, "system:admin");
    assert_eq!(run(&["--cluster", "live", "--user", "robot"]).user, "robot");
    assert_eq!(run(&["--server", &api.url(), "--token", "flag-token"]).user, "carol");
    assert_eq!(run(&["-s", &api.url(), "--user", "robot"]).user, "robot");
    let r = run(&["--context", "live", "--as", "alice", "--as-group", "devs", "--as-group", "ops"]);
    assert_eq!((r.user.as_str(), r.groups.clone()), ("alice", vec!["devs".to_string(), "ops".to_string()]));

    // kubectl's own flags reach the same server the same way.
    let out = k.run(&["get", "tasks", "--server", &api.url(), "--token", "flag-token", "-o", "name"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("task.tatara.dev/umbrella"), "{out:?}");
}

#[test]
fn tls_flags_verify_the_server_as_kubectl_does() {
    let api = tatara_api();
    let front = TlsFront::start(api.addr).unwrap();
    let k = kubectl();
    let kc = kubeconfig(k.dir.path(), "tls", &[("tls", &front.url())], &[("me", &token("t"))]);
    let k = k.kubeconfig(&kc);
    let owners = ["tatara", "owners", "task/umbrella", "-o", "json"];
    let with = |extra: &[&str]| {
        let mut args = owners.to_vec();
        args.extend_from_slice(extra);
        ends(&k, &args).0
    };
    // Its CA is unknown: refused, with what to do.
    let out = with(&[]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("--certificate-authority"), "{stderr}");
    let ca = front.ca.to_str().unwrap();
    for extra in [&["--certificate-authority", ca][..], &["--insecure-skip-tls-verify"]] {
        let out = with(extra);
        assert!(out.status.success(), "{extra:?}: {}", text(&out).1);
        assert!(text(&out).0.contains("umbrella"));
    }
    let out = with(&["--certificate-authority", "/nonexistent/ca.pem"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: --certificate-authority \"/nonexistent/ca.pem\": "), "{stderr}");
}

#[test]
fn kubeconfig_lists_skip_missing_files_and_exec_failures_read_well() {
    let api = tatara_api();
    let k = kubectl();
    let real = api.kubeconfig(k.dir.path());
    let missing = k.dir.path().join("not-there");
    let list = format!("{}:{}", missing.display(), real.display());
    let k2 = kubectl().env("KUBECONFIG", &list);
    // The Kubectl harness sets KUBECONFIG itself; a later env wins.
    let (out, _) = ends(&k2, &["tatara", "owners", "task/umbrella", "-o", "json"]);
    assert!(out.status.success(), "a missing file in KUBECONFIG is skipped, as kubectl does: {}", text(&out).1);
    let (out, _) = ends(&k2, &["reverser", "why", "task/umbrella", "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out).1);

    let exec = "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: [\"-c\", \"echo 'token expired: run sso login' >&2; exit 3\"]\n      interactiveMode: Never";
    let kc = kubeconfig(k.dir.path(), "exec", &[("live", &api.url())], &[("sso", exec)]);
    let k = k.kubeconfig(&kc);
    for plugin in [&["tatara", "owners", "task/umbrella"][..], &["reverser", "why", "task/umbrella"]] {
        let (out, _) = ends(&k, plugin);
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("exec credential plugin `/bin/sh` failed (exit status: 3)"), "{stderr}");
        assert!(stderr.contains("token expired: run sso login"), "{stderr}");
        assert!(!stderr.contains("Output {") && !stderr.contains("KUBERNETES_EXEC_INFO"), "{stderr}");
    }
}
