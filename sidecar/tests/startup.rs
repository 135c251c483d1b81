//! What `serve` and `watch` log and report about themselves: the
//! ready-to-paste curl in serve's startup banner works as logged, /readyz
//! follows the follower; against an API server that accepts connections
//! and never answers (`testkit hang`) every call is bounded, the bound is
//! logged with the server, /readyz says not ready, and a stop signal ends
//! the process; a mistyped `--resource` stops `watch` at start.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;
use testkit::process::Hang;
use testkit::{RedisServer, free_port};

#[test]
fn the_printed_curl_posts_an_audit_event_as_is() {
    let dir = tempfile::tempdir().unwrap();
    let (audit, metrics) = (free_port().unwrap(), free_port().unwrap());
    let mut child = Command::new(BIN)
        .current_dir(dir.path())
        .args([
            "serve",
            "--audit-listen",
            &format!("127.0.0.1:{audit}"),
            "--metrics-listen",
            &format!("127.0.0.1:{metrics}"),
        ])
        .env("REVERSER_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The banner is logged on stderr; the socket line comes last.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut logged = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let done = line.contains("reverser-sidecar serving");
        logged.push(line);
        if done {
            break;
        }
    }
    let text = logged.join("\n");
    assert!(text.contains("reverser-sidecar serving") && text.contains("transport=\"memory\""), "{text}");
    assert!(text.contains(&format!("{}", dir.path().join("reverser.sock").display())), "{text}");
    let curl = logged.iter().find_map(|l| l.split_once("try it command=").map(|(_, c)| c)).expect("a curl line").trim();
    let out = Command::new("sh").arg("-c").arg(curl).current_dir("/").output().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let stdout = std::io::read_to_string(child.stdout.take().unwrap()).unwrap();
    assert!(stdout.is_empty(), "serve writes nothing on stdout: {stdout}");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), r#"{"events":1,"facts":1,"rejected":0}"#);
}

/// JSON logs carry values as fields, not as a text layout padded into the
/// message: a log collector reads the socket, the URLs and the curl as data.
#[test]
fn json_logs_carry_the_banner_as_fields() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .current_dir(dir.path())
        .args(["serve", "--log-format", "json", "--audit-listen", &format!("127.0.0.1:{}", free_port().unwrap())])
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port().unwrap())])
        .env("REVERSER_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut logged: Vec<serde_json::Value> = Vec::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let done = v["message"].as_str().is_some_and(|m| m.starts_with("reverser-sidecar serving"));
        logged.push(v);
        if done {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let field = |message: &str, key: &str| -> String {
        let line = logged.iter().find(|v| v["message"].as_str().is_some_and(|m| m.starts_with(message)));
        let line = line.unwrap_or_else(|| panic!("no {message:?} line in {logged:#?}"));
        line[key].as_str().unwrap_or_else(|| panic!("no {key} field in {line}")).to_owned()
    };
    for v in &logged {
        let m = v["message"].as_str().unwrap_or_default();
        assert!(!m.contains("  "), "a message padded for a text layout: {m:?}");
    }
    assert!(field("reverser-sidecar serving", "socket").ends_with("reverser.sock"));
    assert_eq!(field("reverser-sidecar serving", "transport"), "memory");
    assert!(field("try it", "command").starts_with("curl -sS --cacert "));
    assert!(field("audit webhook listening", "url").ends_with("/audit-webhook/<route>"));
    assert!(field("metrics listening", "url").ends_with("/metrics"));
}

fn readyz(port: u16) -> bool {
    http_get(port, "/readyz").starts_with("HTTP/1.1 200")
}

#[test]
fn readyz_waits_for_the_follower_to_catch_up() {
    // Redis is not there yet: the follower cannot read, so not ready.
    let mut redis = RedisServer::start().unwrap();
    let url = redis.url();
    redis.kill();
    let s = Sidecar::start("serve", &["--redis-url", &url, "--audit-listen", "off", "--follow", "lab:configmaps"]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!readyz(s.metrics_port), "ready without ever reading the stream");
    assert!(http_get(s.metrics_port, "/readyz").contains("has not caught up"));
    assert!(http_get(s.metrics_port, "/healthz").starts_with("HTTP/1.1 200"), "alive all the same");
    // Once Redis answers, the follower re-warms and reports ready.
    redis.restart().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !readyz(s.metrics_port) {
        assert!(Instant::now() < deadline, "never became ready after Redis came up");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(s.metrics().contains("gitopsreverser_attribution_fact_follower_errors_total{transport=\"redis\"}"));
}

/// Waits for the file at `path` to contain every one of `wanted`.
fn wait_for_log(path: &std::path::Path, wanted: &[&str], within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if wanted.iter().all(|w| text.contains(w)) {
            return text;
        }
        assert!(Instant::now() < deadline, "the log never said {wanted:?}:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts the command with its log (stderr) in `log`: no colour, the
/// binary's own default log level, stdout dropped.
trait LoggedTo {
    fn logged_to(&mut self, log: &std::path::Path) -> std::process::Child;
}

impl LoggedTo for Command {
    fn logged_to(&mut self, log: &std::path::Path) -> std::process::Child {
        self.env("NO_COLOR", "1")
            .env_remove("REVERSER_LOG")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap()
    }
}

/// Sends SIGTERM and waits up to `within` for the exit.
fn terminate(child: &mut std::process::Child, within: Duration) -> std::process::ExitStatus {
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("still running {within:?} after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn watch_against_a_server_that_never_answers_logs_the_bound_is_not_ready_and_stops_on_sigterm() {
    let hang = Hang::start();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, testkit::fakeapi::kubeconfig(&hang.url(), "shop")).unwrap();
    let sidecar = Sidecar::start("serve", &["--audit-listen", "off"]);
    let metrics = free_port().unwrap();
    let log = dir.path().join("watch.log");
    let mut watch = Command::new(BIN)
        .args(["watch", "--resource", "configmaps", "--request-timeout", "1s", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--socket")
        .arg(&sidecar.socket)
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
        .logged_to(&log);
    // Discovery gives up after the bound, and says so naming the server.
    let text = wait_for_log(
        &log,
        &[&format!("the API server at {} did not answer within --request-timeout 1s", hang.url())],
        Duration::from_secs(20),
    );
    // Nothing is judged while the server cannot be asked.
    assert!(!text.contains("no served resource matches"), "{text}");
    assert!(!text.contains("Custom {") && !text.contains("ERROR"), "no Debug text, no kube ERROR lines:\n{text}");
    let ready = http_get(metrics, "/readyz");
    assert!(ready.starts_with("HTTP/1.1 503"), "{ready}");
    assert!(ready.contains("discovery: reading API discovery: the API server at"), "{ready}");
    assert!(http_get(metrics, "/healthz").starts_with("HTTP/1.1 200"), "alive all the same");
    // Several retries later the same failure is not logged again.
    std::thread::sleep(Duration::from_secs(7));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("did not answer").count(), 1, "{text}");
    // A stop signal ends it promptly, even with a call outstanding.
    let started = Instant::now();
    let status = terminate(&mut watch, Duration::from_secs(10));
    assert!(status.success(), "{status:?}\n{}", std::fs::read_to_string(&log).unwrap());
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
}

/// Issue 29 (B1, for a GitTarget): the status reporter's reads named
/// neither the server nor the bound (`ServiceError: client error
/// (SendRequest)`, every few seconds) and `/readyz` blamed discovery.
#[test]
fn watch_for_a_git_target_on_a_server_that_never_answers_says_so_once_and_in_readyz() {
    let hang = Hang::start();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, testkit::fakeapi::kubeconfig(&hang.url(), "shop")).unwrap();
    let metrics = free_port().unwrap();
    let log = dir.path().join("watch.log");
    let mut watch = Command::new(BIN)
        .args(["watch", "--git-target", "shop/lab", "--request-timeout", "1s", "--rescan", "1s", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
        .logged_to(&log);
    let said = format!(
        "reading the GitTarget shop/lab: the API server at {} did not answer within --request-timeout 1s",
        hang.url()
    );
    wait_for_log(&log, &[&said], Duration::from_secs(20));
    let ready = http_get(metrics, "/readyz");
    assert!(ready.starts_with("HTTP/1.1 503"), "{ready}");
    assert!(ready.contains(&format!("git-target: {said}")), "{ready}");
    // Several reports later, still said once, and no Debug text.
    std::thread::sleep(Duration::from_secs(5));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("did not answer").count(), 1, "{text}");
    assert!(!text.contains("ServiceError") && !text.contains("SendRequest"), "{text}");
    let status = terminate(&mut watch, Duration::from_secs(10));
    assert!(status.success(), "{status:?}\n{}", std::fs::read_to_string(&log).unwrap());
}

/// Issue 29 (N2): a GitTarget that does not exist was a warning every 5 s.
#[test]
fn watch_for_a_git_target_that_does_not_exist_says_so_once_and_in_readyz() {
    let dir = tempfile::tempdir().unwrap();
    let api = testkit::fakeapi::spawn(testkit::fakeapi::Store::new()).unwrap();
    let kubeconfig = api.write_kubeconfig(&dir.path().join("kubeconfig"), "shop").unwrap();
    let metrics = free_port().unwrap();
    let log = dir.path().join("watch.log");
    let mut watch = Command::new(BIN)
        .args(["watch", "--git-target", "shop/nope", "--rescan", "500ms", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
        .logged_to(&log);
    wait_for_log(
        &log,
        &["the GitTarget shop/nope does not exist", "create it, or correct --git-target"],
        Duration::from_secs(20),
    );
    std::thread::sleep(Duration::from_secs(3));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("does not exist").count(), 1, "{text}");
    let ready = http_get(metrics, "/readyz");
    assert!(ready.starts_with("HTTP/1.1 503") && ready.contains("shop/nope does not exist"), "{ready}");
    let status = terminate(&mut watch, Duration::from_secs(10));
    assert!(status.success(), "{status:?}\n{text}");
}

/// Issue 29 (N1): `watch` beside a `serve` without Git authoring logged
/// gRPC's description of the code ("The system is not in a state required
/// for the operation's execution") every few seconds, forever.
#[test]
fn watch_beside_a_serve_without_git_says_why_once_in_the_sidecars_words() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = testkit::fakeapi::Store::new();
    store
        .seed_object(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "web", "namespace": "shop"}, "data": {"k": "v"}}))
        .unwrap();
    let api = testkit::fakeapi::spawn(store).unwrap();
    let kubeconfig = api.write_kubeconfig(&dir.path().join("kubeconfig"), "shop").unwrap();
    let sidecar = Sidecar::start("serve", &["--audit-listen", "off"]);
    let log = dir.path().join("watch.log");
    let mut watch = Command::new(BIN)
        .args(["watch", "--resource", "configmaps", "-n", "shop", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--socket")
        .arg(&sidecar.socket)
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port().unwrap())])
        .logged_to(&log);
    wait_for_log(
        &log,
        &["failed: Git authoring is off: start the sidecar with --git-repo DIR or --git-target NS/NAME"],
        Duration::from_secs(20),
    );
    std::thread::sleep(Duration::from_secs(4));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("Git authoring is off").count(), 1, "{text}");
    assert!(!text.contains("The system is not in a state"), "{text}");
    let status = terminate(&mut watch, Duration::from_secs(30));
    assert!(status.success(), "{status:?}\n{text}");
}

/// Issue 29 (A5): a `file://` remote that does not exist was "unsupported
/// URL protocol", which reads as if `file://` were not supported.
#[test]
fn serve_with_a_file_remote_that_does_not_exist_says_how_to_create_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.git");
    let log = dir.path().join("serve.log");
    let mut serve = Command::new(BIN)
        .args(["serve", "--audit-listen", "off", "--git-repo"])
        .arg(dir.path().join("clone"))
        .arg("--git-remote")
        .arg(format!("file://{}", missing.display()))
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port().unwrap())])
        .current_dir(dir.path())
        .logged_to(&log);
    let create = format!(
        "no repository at {}; create it with `git init --bare --initial-branch=main {}`",
        missing.display(),
        missing.display()
    );
    let text = wait_for_log(&log, &[&create], Duration::from_secs(20));
    assert!(!text.contains("unsupported URL protocol"), "{text}");
    let status = terminate(&mut serve, Duration::from_secs(10));
    assert!(status.success(), "{status:?}\n{text}");
}

/// Issue 29 (B2, by hand): `serve --audit-listen off` with no Redis can
/// never receive a fact, and said nothing of it.
#[test]
fn serve_with_no_fact_source_says_every_commit_will_be_unattributed() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let spawn = |extra: &[&str]| {
        Command::new(BIN)
            .args(["serve", "--socket"])
            .arg(dir.path().join(format!("s{}.sock", extra.len())))
            .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port().unwrap())])
            .args(extra)
            .current_dir(dir.path())
            .logged_to(&log)
    };
    let mut serve = spawn(&["--audit-listen", "off"]);
    let text =
        wait_for_log(&log, &["no fact source", "--redis-url", "--author-attribution=false"], Duration::from_secs(20));
    assert!(text.contains("unknown (attribution unresolved)"), "{text}");
    terminate(&mut serve, Duration::from_secs(10));
    // With a receiver, the memory transport's own warning, not this one.
    let mut serve =
        spawn(&["--audit-listen", &format!("127.0.0.1:{}", free_port().unwrap()), "--dev-certs-dir", "certs"]);
    let text = wait_for_log(&log, &["memory transport"], Duration::from_secs(20));
    assert!(!text.contains("no fact source"), "{text}");
    terminate(&mut serve, Duration::from_secs(10));
}

#[test]
fn watch_waiting_for_the_sidecars_socket_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let api = testkit::fakeapi::spawn(testkit::fakeapi::Store::new()).unwrap();
    let kubeconfig = api.write_kubeconfig(&dir.path().join("kubeconfig"), "shop").unwrap();
    let log = dir.path().join("watch.log");
    let mut watch = Command::new(BIN)
        .args(["watch", "--resource", "configmaps", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--socket")
        .arg(dir.path().join("nobody.sock"))
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port().unwrap())])
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // The cause, not `transport error` alone.
    wait_for_log(&log, &["waiting for the sidecar's socket", "No such file or directory"], Duration::from_secs(20));
    let status = terminate(&mut watch, Duration::from_secs(5));
    assert!(status.success(), "{status:?}\n{}", std::fs::read_to_string(&log).unwrap());
}

#[test]
fn serve_for_a_git_target_on_a_server_that_never_answers_stops_naming_the_server_and_the_bound() {
    let hang = Hang::start();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, testkit::fakeapi::kubeconfig(&hang.url(), "shop")).unwrap();
    let started = Instant::now();
    let out = Command::new(BIN)
        .args(["serve", "--audit-listen", "off", "--git-target", "shop/lab", "--request-timeout", "1s"])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port().unwrap())])
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert!(
        stderr.contains(&format!("the API server at {} did not answer within --request-timeout 1s", hang.url()))
            && stderr.contains("GitTarget"),
        "{stderr}"
    );
}

/// Issue 29: with neither, the error named only `--resource`, though most
/// users mirror a GitTarget.
#[test]
fn watch_without_what_to_mirror_names_both_choices() {
    let out = Command::new(BIN).arg("watch").env("NO_COLOR", "1").env_remove("REVERSER_GIT_TARGET").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--git-target <NAMESPACE/NAME>") && stderr.contains("--resource <TYPE>"), "{stderr}");
}

#[test]
fn a_mistyped_resource_stops_watch_at_start_naming_the_close_match() {
    let dir = tempfile::tempdir().unwrap();
    let api = testkit::fakeapi::spawn(testkit::fakeapi::Store::new()).unwrap();
    let kubeconfig = api.write_kubeconfig(&dir.path().join("kubeconfig"), "shop").unwrap();
    let sidecar = Sidecar::start("serve", &["--audit-listen", "off"]);
    let out = Command::new(BIN)
        .args(["watch", "--resource", "configmap", "--resource", "deployments.apps", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--socket")
        .arg(&sidecar.socket)
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port().unwrap())])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--resource configmap: no served resource matches \"configmap\"")
            && stderr.contains("did you mean configmaps?"),
        "{stderr}"
    );
}

#[test]
fn a_taken_port_names_the_flag_that_chose_it() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    for (flag, extra) in
        [("--metrics-listen", ["--audit-listen", "off"]), ("--audit-listen", ["--metrics-listen", "127.0.0.1:0"])]
    {
        let out = Command::new(BIN)
            .current_dir(dir.path())
            .args(["serve", "--socket", "s.sock", flag, &format!("127.0.0.1:{port}")])
            .args(extra)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag}: {stderr}");
        assert!(stderr.contains(&format!("({flag}) on 127.0.0.1:{port}")), "{flag}: {stderr}");
        // Nothing claims to serve before every listener is bound.
        assert!(!stderr.contains("serving"), "{flag}: {stderr}");
    }
}

/// Attribution off reads no audit facts: flags that only feed the fact path
/// are refused naming themselves (as gitops-reverser refuses an audit route
/// key without attribution, cmd/main.go:703-709), and so is `receive`.
#[test]
fn attribution_off_refuses_the_flags_of_the_fact_path_and_receive() {
    let run = |args: &[&str]| {
        let out = Command::new(BIN).args(args).env("NO_COLOR", "1").output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (ok, err) = run(&["serve", "--author-attribution=false", "--redis-url", "redis://127.0.0.1:1"]);
    assert!(!ok && err.contains("--redis-url has no use with --author-attribution=false"), "{err}");
    let (ok, err) = run(&["receive", "--author-attribution=false", "--redis-url", "redis://127.0.0.1:1"]);
    assert!(!ok && err.contains("--author-attribution=false"), "{err}");
    let (ok, err) = run(&["serve", "--author-attribution=maybe"]);
    assert!(!ok && err.contains("--author-attribution"), "{err}");
}
