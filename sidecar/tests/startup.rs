//! What `serve` logs and reports about itself: the ready-to-paste curl in
//! its startup banner works as logged, and /readyz follows the follower.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;
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
        let done = line.contains("socket ");
        logged.push(line);
        if done {
            break;
        }
    }
    let text = logged.join("\n");
    assert!(text.contains("reverser-sidecar serving") && text.contains("transport=\"memory\""), "{text}");
    assert!(text.contains(&format!("{}", dir.path().join("reverser.sock").display())), "{text}");
    let curl = logged.iter().find_map(|l| l.split_once("try it").map(|(_, c)| c)).expect("a curl line").trim();
    let out = Command::new("sh").arg("-c").arg(curl).current_dir("/").output().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let stdout = std::io::read_to_string(child.stdout.take().unwrap()).unwrap();
    assert!(stdout.is_empty(), "serve writes nothing on stdout: {stdout}");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), r#"{"events":1,"facts":1,"rejected":0}"#);
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
