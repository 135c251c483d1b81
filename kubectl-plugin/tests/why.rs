//! `kubectl reverser why` through the real `kubectl`, against a local HTTP
//! server speaking the Kubernetes API's JSON, with evidence from (a) a real
//! `reverser-sidecar serve` over its real Unix socket (and through the API
//! server's pod proxy to its ops port), and separately (b) a real
//! `redis-server` holding entries in the reference format with no sidecar;
//! history from a real Git repository written by `runtime::attribution::commit`.
//!
//! The sidecar binary is found next to the plugin binary (the same target
//! directory): `cargo test --workspace` builds every binary first.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::SystemTime;

use rules::attribution::render::ObjectKey;
use rules::attribution::{ActorKind, Tier};
use runtime::attribution::commit::{Action, Change, GitWriter, Identity, ResolvedAuthor, WriterConfig};
use serde_json::{Value, json};
use testkit::RedisServer;
use testkit::audit_event as audit;
use testkit::fakeapi::{self, FakeApi, Store};
use testkit::kubectl::Kubectl;
use testkit::sidecar::Sidecar;

/// The fake API with the built-in types, plus an aggregated API whose
/// server is down (discovery must skip it).
fn fake_api() -> FakeApi {
    let api = fakeapi::spawn(Store::new()).unwrap();
    api.unavailable_group("wardle.example.com", "v1alpha1");
    api
}

/// A ConfigMap as the API server returns it.
fn configmap(ns: &str, name: &str, uid: &str, rv: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "uid": uid, "resourceVersion": rv, "creationTimestamp": "2026-11-29T12:00:00Z", "labels": {"app": name}},
        "data": {"k": rv},
    })
}

fn corpus() -> std::path::PathBuf {
    testkit::fixtures::corpus_scenario("configmap/finalizer-delete")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Runs `kubectl reverser why <args> --kubeconfig <kc>`, asserting success.
fn why(k: &Kubectl, kc: &Path, args: &[&str]) -> String {
    let out = why_raw(k, kc, args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "kubectl reverser why {args:?} failed: {stderr}\n{stdout}");
    stdout
}

fn why_raw(k: &Kubectl, kc: &Path, args: &[&str]) -> Output {
    let mut argv = vec!["reverser", "why"];
    argv.extend_from_slice(args);
    argv.extend_from_slice(&["--kubeconfig", kc.to_str().unwrap()]);
    k.run(&argv)
}

fn why_json(k: &Kubectl, kc: &Path, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend_from_slice(&["-o", "json"]);
    let out = why(k, kc, &a);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("-o json is not one JSON document ({e}):\n{out}"))
}

fn key(name: &str) -> ObjectKey {
    ObjectKey {
        group: String::new(),
        version: "v1".into(),
        resource: "configmaps".into(),
        namespace: "default".into(),
        name: name.into(),
    }
}

fn change(name: &str, action: Action, author: Option<&str>, tier: Tier, audit: Option<&str>) -> Change {
    Change {
        action,
        object: key(name),
        author: author.map(|a| ResolvedAuthor {
            username: a.into(),
            display_name: String::new(),
            email: String::new(),
            actor_kind: ActorKind::of(a),
        }),
        tier,
        audit_id: audit.map(str::to_owned),
        observed_at: SystemTime::now(),
    }
}

/// The sidecar's Git writer on a local mirror at `repo`, not pushing.
fn writer(repo: &Path) -> GitWriter {
    GitWriter::open(WriterConfig::new(
        repo.to_path_buf(),
        "main",
        Identity::new("reverser", "reverser@example.invalid"),
    ))
    .unwrap()
}

/// The Git mirror as the writer would have made it for these objects.
fn mirror(dir: &Path, removal: (&str, &str)) -> PathBuf {
    let repo = dir.join("mirror.git");
    let mut w = writer(&repo);
    let cm = |name: &str, v: &str| Action::Write(configmap("default", name, "", v));
    let steps = [
        change("web", cm("web", "10"), Some("alice"), Tier::Exact, Some("audit-create-web-10")),
        change("app", cm("app", "20"), Some("alice"), Tier::Exact, Some("audit-create-app-20")),
        change("app", cm("app", "21"), Some("bob"), Tier::Exact, Some("audit-update-app-21")),
        change("cm-hold", cm("cm-hold", "1"), Some("system:admin"), Tier::Exact, None),
        change("cm-hold", Action::Delete, Some(removal.0), Tier::DeleteSticky, Some(removal.1)),
        change("orphan", cm("orphan", "90"), None, Tier::Absent, None),
        change("gone", cm("gone", "30"), Some("dave"), Tier::Exact, Some("audit-create-gone-30")),
        change("gone", Action::Delete, Some("erin"), Tier::DeleteSticky, Some("audit-delete-gone-31")),
    ];
    for s in steps {
        w.commit(std::slice::from_ref(&s)).unwrap();
    }
    repo
}

/// Real API servers send resourceVersion as a string; the corpus
/// normalizes some to numbers.
fn stringify_rvs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "resourceVersion" && x.is_number() {
                    *x = Value::String(x.to_string());
                } else {
                    stringify_rvs(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(stringify_rvs),
        _ => {}
    }
}

/// The finalizer deletion: the corpus records when present (the deleter
/// and the finalizer patch, then the Terminating object), else the same
/// shape by hand. Returns (audit events, object, expected deleter, its auditID).
fn finalizer_deletion() -> (Vec<Value>, Value, String, String) {
    let timeline = corpus().join("timeline.jsonl");
    match std::fs::read_to_string(&timeline) {
        Ok(text) => {
            let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            let mut audits: Vec<Value> = lines.iter().filter_map(|l| l.get("audit").cloned()).collect();
            audits.iter_mut().for_each(stringify_rvs);
            let mut object = lines.iter().find_map(|l| l.get("watch")).unwrap()["object"].clone();
            stringify_rvs(&mut object);
            // Served in this test's namespace; the audit events name theirs.
            let delete = audits.iter().find(|a| a["verb"] == "delete").unwrap();
            let (who, id) = (delete["user"]["username"].as_str().unwrap(), delete["auditID"].as_str().unwrap());
            let (who, id) = (who.to_owned(), id.to_owned());
            for a in &mut audits {
                a["objectRef"]["namespace"] = "default".into();
                a["responseObject"]["metadata"]["namespace"] = "default".into();
            }
            object["metadata"]["namespace"] = "default".into();
            (audits, object, who, id)
        }
        Err(_) => {
            println!("SKIP corpus: {} is absent; using hand-written finalizer-delete records", timeline.display());
            let mut del = audit("delete", "carol", "default", "cm-hold", "u-hold", "41");
            del["responseObject"]["metadata"]["deletionTimestamp"] = "2026-11-29T12:00:00Z".into();
            del["responseObject"]["metadata"]["finalizers"] = json!(["example.com/hold"]);
            let patch =
                audit("patch", "system:serviceaccount:kube-system:cleaner", "default", "cm-hold", "u-hold", "41");
            let mut object = configmap("default", "cm-hold", "u-hold", "41");
            object["metadata"]["deletionTimestamp"] = "2026-11-29T12:00:00Z".into();
            object["metadata"]["finalizers"] = json!(["example.com/hold"]);
            (vec![del, patch], object, "carol".into(), "audit-delete-cm-hold-41".into())
        }
    }
}

#[test]
fn why_with_a_real_sidecar_over_its_socket_and_through_the_pod_proxy() {
    let k = Kubectl::new(&[env!("CARGO_BIN_EXE_kubectl-reverser")]).env_remove("REVERSER_REDIS_URL");
    let api = fake_api();
    let kc = api.kubeconfig(k.dir.path());
    let sidecar = Sidecar::start("serve", &["--follow", "default:configmaps"]);
    let (hold_events, hold_object, deleter, delete_id) = finalizer_deletion();
    let repo = mirror(k.dir.path(), (&deleter, &delete_id));
    let repo = repo.to_str().unwrap();

    let mut events = vec![
        audit("create", "alice", "default", "web", "u-web", "10"),
        audit("create", "alice", "default", "app", "u-app", "20"),
        audit("update", "bob", "default", "app", "u-app", "21"),
    ];
    events.extend(hold_events);
    assert_eq!(sidecar.post_events("default", &events), 200);
    api.seed_object(configmap("default", "web", "u-web", "10")).unwrap();
    api.seed_object(configmap("default", "app", "u-app", "21")).unwrap();
    api.seed_object(hold_object).unwrap();
    api.seed_object(configmap("default", "orphan", "u-orphan", "90")).unwrap();
    api.seed_object(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default", "uid": "u-deploy", "resourceVersion": "5"}})).unwrap();
    let socket = sidecar.socket.to_str().unwrap();

    // A create: the table names the author, tier, verb, auditID and history.
    let out = why(&k, &kc, &["configmap/web", "--socket", socket, "--repo", repo]);
    assert!(out.contains("Author of the current state: alice [user]"), "{out}");
    assert!(out.contains("tier:        exact (this actor produced this exact version)"), "{out}");
    assert!(out.contains("verb:        create") && out.contains("audit-create-web-10"), "{out}");
    assert!(out.contains("default/configmaps/web.yaml"), "{out}");
    assert!(out.contains("History (newest first)") && out.contains("create"), "{out}");
    // kubectl's other output forms: a JSONPath template over the JSON
    // answer, tables without their header rows, colour only when asked.
    let author =
        why(&k, &kc, &["configmap/web", "--socket", socket, "-o", "jsonpath={.verdict.author}/{.verdict.tier}"]);
    assert_eq!(author, "alice/exact");
    let bare = why(&k, &kc, &["configmap/web", "--socket", socket, "--repo", repo, "--no-headers"]);
    assert!(!bare.contains("COMMIT ") && bare.contains("History (newest first)"), "{bare}");
    assert!(!out.contains('\u{1b}'), "piped output has no colour: {out:?}");
    let coloured = why(&k, &kc, &["configmap/web", "--socket", socket, "--color=always"]);
    assert!(coloured.contains("\u{1b}[32malice\u{1b}[0m"), "{coloured:?}");
    let refused = why_raw(&k, &kc, &["configmap/web", "--socket", socket, "-o", "name"]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(text(&refused).1.contains("why does not print -o name"), "{refused:?}");

    // An update (TYPE NAME form, short name): bob, on the exact tier; JSON.
    let r = why_json(&k, &kc, &["cm", "app", "--socket", socket, "--repo", repo]);
    assert_eq!(r["verdict"]["author"], "bob", "{r:#}");
    assert_eq!(r["verdict"]["tier"], "exact");
    assert_eq!(r["verdict"]["verb"], "update");
    assert_eq!(r["verdict"]["auditID"], "audit-update-app-21");
    assert_eq!(r["verdict"]["source"], "evidence");
    assert_eq!(r["history"].as_array().unwrap().len(), 2, "{r:#}");
    assert_eq!(r["history"][0]["authorName"], "bob");
    assert_eq!(r["history"][1]["change"], "create");
    assert_eq!(r["evidenceSource"], format!("socket {socket}"));

    // A finalizer deletion: the deleter, on the sticky removal pointer; the
    // finalizer patch competed and lost.
    let r = why_json(&k, &kc, &["configmaps/cm-hold", "--socket", socket, "--repo", repo]);
    assert_eq!(r["object"]["deleting"], true, "{r:#}");
    assert_eq!(r["verdict"]["author"], deleter.as_str(), "{r:#}");
    assert_eq!(r["verdict"]["tier"], "delete_sticky");
    assert_eq!(r["verdict"]["auditID"], delete_id.as_str());
    let competing = r["competing"].as_array().unwrap();
    assert!(
        competing.iter().any(|c| c["verb"] == "patch" && c["lostBecause"].as_str().unwrap().contains("delete_sticky")),
        "{r:#}"
    );
    assert_eq!(r["history"][0]["change"], "delete");
    let out = why(&k, &kc, &["configmaps/cm-hold", "--socket", socket]);
    assert!(out.contains("Author of the removal") && out.contains("Competing facts"), "{out}");

    // The same through the API server's pod proxy to the ops port, as YAML.
    api.pod("default", "watcher-0", 9090, sidecar.metrics_port);
    let out = why(&k, &kc, &["cm/cm-hold", "--pod", "watcher-0", "-o", "yaml"]);
    let y: Value = serde_norway::from_str(&out).unwrap_or_else(|e| panic!("-o yaml is not YAML ({e}):\n{out}"));
    assert_eq!(y["verdict"]["author"], deleter.as_str(), "{out}");
    assert_eq!(y["evidenceSource"], "pod default/watcher-0:9090");
    // A sidecar pod in another namespace than the object, on another port.
    api.pod("ops", "reverser-1", 9191, sidecar.metrics_port);
    let r = why_json(&k, &kc, &["cm/web", "--pod", "reverser-1", "--pod-namespace", "ops", "--pod-port", "9191"]);
    assert_eq!(
        (r["verdict"]["author"].as_str(), r["evidenceSource"].as_str()),
        (Some("alice"), Some("pod ops/reverser-1:9191")),
        "{r:#}"
    );

    // Unresolved, facts flow for the type but none names the object: that
    // cause, how to check it, and the Git commit's unresolved author.
    let r = why_json(&k, &kc, &["cm/orphan", "--socket", socket, "--repo", repo]);
    assert_eq!(r["verdict"]["resolved"], false, "{r:#}");
    assert_eq!(r["verdict"]["tier"], "absent");
    assert_eq!(r["causes"][0]["cause"], "no_fact_for_object", "{r:#}");
    assert_eq!(r["history"][0]["unresolved"], true);
    let out = why(&k, &kc, &["cm/orphan", "--socket", socket]);
    assert!(out.contains("UNRESOLVED") && out.contains("how to check:"), "{out}");
    // A type the sidecar does not follow: the follower is not reading it
    // (the pod proxy's GET /v1/explain answers from what the sidecar holds;
    // over the socket, `why` asks it to follow the type first).
    let r = why_json(&k, &kc, &["deploy/web", "--pod", "reverser-1", "--pod-namespace", "ops", "--pod-port", "9191"]);
    assert_eq!(r["object"]["group"], "apps");
    assert_eq!(r["causes"][0]["cause"], "follower_not_reading", "{r:#}");
    assert_eq!(r["causes"][0]["detail"]["following"], false);
    assert!(r["causes"][0]["check"].as_str().unwrap().contains("--follow"), "{r:#}");
    let followed = why_json(&k, &kc, &["deploy/web", "--socket", socket]);
    assert!(
        followed["causes"].as_array().unwrap().iter().all(|c| c["cause"] != "follower_not_reading"),
        "{followed:#}"
    );

    // A deleted object is answered from Git: the commit that removed it.
    let r = why_json(&k, &kc, &["cm/gone", "--socket", socket, "--repo", repo]);
    assert_eq!(r["object"]["deleted"], true, "{r:#}");
    assert_eq!(r["verdict"]["author"], "erin");
    assert_eq!(r["verdict"]["tier"], "delete_sticky");
    assert_eq!(r["verdict"]["source"], "git");
    assert_eq!(r["verdict"]["auditID"], "audit-delete-gone-31");
}

#[test]
fn why_with_redis_streams_in_the_reference_format_and_no_sidecar() {
    let k = Kubectl::new(&[env!("CARGO_BIN_EXE_kubectl-reverser")]).env_remove("REVERSER_REDIS_URL");
    let api = fake_api();
    let kc = api.kubeconfig(k.dir.path());
    let redis = RedisServer::start().expect("redis-server must be installed (apt-get install redis-server)");
    let stream = "gitops-reverser:author:v2:audit:route:prod%3Aeu:configmaps";
    let facts = json!([
        {"author": "alice", "namespace": "default", "name": "web", "uid": "u-web", "resourceVersion": "10", "verb": "create", "auditID": "a-1", "stageTimestamp": "2026-11-29T12:00:00.000000Z"},
        {"author": "alice", "namespace": "default", "name": "app", "uid": "u-app", "resourceVersion": "20", "verb": "create", "auditID": "a-2"},
    ]);
    redis.cli(&["XADD", stream, "*", "facts", &facts.to_string()]).unwrap();
    let later = json!([
        {"author": "bob", "displayName": "Bob B", "namespace": "default", "name": "app", "uid": "u-app", "resourceVersion": "21", "verb": "update", "auditID": "a-3"},
        {"author": "carol", "namespace": "default", "name": "cm-hold", "uid": "u-hold", "resourceVersion": "41", "verb": "delete", "auditID": "a-del"},
        {"author": "system:serviceaccount:kube-system:cleaner", "namespace": "default", "name": "cm-hold", "uid": "u-hold", "resourceVersion": "41", "verb": "patch", "auditID": "a-patch"},
    ]);
    redis.cli(&["XADD", stream, "*", "facts", &later.to_string()]).unwrap();
    api.seed_object(configmap("default", "web", "u-web", "10")).unwrap();
    api.seed_object(configmap("default", "app", "u-app", "21")).unwrap();
    let mut hold = configmap("default", "cm-hold", "u-hold", "41");
    hold["metadata"]["deletionTimestamp"] = "2026-11-29T12:00:00Z".into();
    api.seed_object(hold).unwrap();
    api.seed_object(configmap("default", "orphan", "u-orphan", "90")).unwrap();
    api.seed_object(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default", "uid": "u-deploy", "resourceVersion": "5"}})).unwrap();
    let url = redis.url();
    let from = |extra: &[&str]| {
        let mut a = extra.to_vec();
        a.extend_from_slice(&["--redis-url", &url, "--route", "prod:eu"]);
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let run = |extra: &[&str]| {
        let args = from(extra);
        why_json(&k, &kc, &args.iter().map(String::as_str).collect::<Vec<_>>())
    };

    let r = run(&["cm/web"]);
    assert_eq!(
        (r["verdict"]["author"].as_str(), r["verdict"]["tier"].as_str()),
        (Some("alice"), Some("exact")),
        "{r:#}"
    );
    assert_eq!(r["verdict"]["verb"], "create");
    assert_eq!(r["evidence"]["following"], true);
    let r = run(&["configmap", "app"]);
    assert_eq!(
        (r["verdict"]["author"].as_str(), r["verdict"]["displayName"].as_str()),
        (Some("bob"), Some("Bob B")),
        "{r:#}"
    );
    assert_eq!(r["verdict"]["auditID"], "a-3");
    let r = run(&["cm/cm-hold"]);
    assert_eq!(
        (r["verdict"]["author"].as_str(), r["verdict"]["tier"].as_str()),
        (Some("carol"), Some("delete_sticky")),
        "{r:#}"
    );
    assert!(
        r["competing"].as_array().unwrap().iter().any(|c| c["author"] == "system:serviceaccount:kube-system:cleaner")
    );
    // Unresolved: facts for the type, none for the object.
    let r = run(&["cm/orphan"]);
    assert_eq!(r["causes"][0]["cause"], "no_fact_for_object", "{r:#}");
    // The route is fed (its configmaps stream exists), deployments never are.
    let r = run(&["deploy/web"]);
    assert_eq!(r["causes"][0]["cause"], "audit_policy_drops_type", "{r:#}");
    assert_eq!(r["causes"].as_array().unwrap().len(), 1);
    // A route nothing ever wrote to.
    let args = ["cm/web", "--redis-url", &url, "--route", "nowhere", "-o", "json"];
    let r: Value = serde_json::from_str(&why(&k, &kc, &args)).unwrap();
    assert_eq!(r["causes"][0]["cause"], "route_never_resolved", "{r:#}");
    let out = why(&k, &kc, &["cm/web", "--redis-url", &url, "--route", "nowhere"]);
    assert!(out.contains("the route has never resolved") && out.contains("/audit-webhook/nowhere"), "{out}");
}

#[test]
fn why_errors_are_clear_and_non_zero() {
    let k = Kubectl::new(&[env!("CARGO_BIN_EXE_kubectl-reverser")]).env_remove("REVERSER_REDIS_URL");
    let api = fake_api();
    let kc = api.kubeconfig(k.dir.path());
    let empty_repo = k.dir.path().join("empty.git");
    git2::Repository::init_bare(&empty_repo).unwrap();
    let fail = |args: &[&str], kc: &Path, code: i32, needle: &str| {
        let out = why_raw(&k, kc, args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}{stdout}");
        assert!(stderr.starts_with("error: ") && stderr.contains(needle), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{stdout}");
    };
    // Exit codes: 2 usage, 3 not found, 5 unreachable (docs/why.md).
    fail(&["widgets/x"], &kc, 3, "doesn't have a resource type \"widgets\"");
    fail(&["cm"], &kc, 2, "expected one object as TYPE/NAME or TYPE NAME");
    fail(
        &["cm/nothing", "--repo", empty_repo.to_str().unwrap()],
        &kc,
        3,
        "configmaps \"nothing\" in namespace \"default\" not found",
    );
    fail(&["cm/nothing"], &kc, 3, "pass --repo");
    api.seed_object(configmap("default", "web", "u-web", "10")).unwrap();
    let missing = k.dir.path().join("no.sock");
    fail(&["cm/web", "--socket", missing.to_str().unwrap()], &kc, 5, "cannot reach the sidecar at socket");
    fail(&["cm/web", "--pod", "watcher-0"], &kc, 5, "cannot reach the sidecar in pod default/watcher-0 on port 9090");
    let port = testkit::free_port().unwrap();
    let url = format!("redis://127.0.0.1:{port}");
    fail(&["cm/web", "--redis-url", &url, "--timeout", "2"], &kc, 5, "cannot read the fact stream");
    // --timeout takes a duration, as --request-timeout does; bare seconds
    // still work (issue 29: `--timeout 2s` was "invalid digit").
    fail(&["cm/web", "--redis-url", &url, "--timeout", "1s"], &kc, 5, "within 1s;");
    fail(&["cm/web", "--redis-url", &url, "--timeout", "500ms"], &kc, 5, "within 500ms;");
    fail(&["cm/web", "--timeout", "soon"], &kc, 2, "is not a duration: use e.g. 500ms, 3s, 10m, 1h");
    // Bad kubeconfigs: absent, not YAML, pointing at nothing.
    fail(&["cm/web"], &k.dir.path().join("absent"), 1, "cannot read kubeconfig");
    let garbage = k.dir.path().join("garbage");
    std::fs::write(&garbage, "{{{ not yaml").unwrap();
    fail(&["cm/web"], &garbage, 1, "kubeconfig");
    let dead = k.dir.path().join("dead");
    std::fs::write(&dead, std::fs::read_to_string(&kc).unwrap().replace(&api.port().to_string(), &port.to_string()))
        .unwrap();
    fail(&["cm/web"], &dead, 5, "connection refused");
}

/// An author is whatever the API server's user said: one with control
/// characters, an escape sequence, a newline, NUL, angle brackets, or 10 KB
/// still makes a valid commit, and `why` prints it escaped, never raw.
#[test]
fn a_hostile_author_makes_a_valid_commit_and_a_safe_why() {
    let k = Kubectl::new(&[env!("CARGO_BIN_EXE_kubectl-reverser")]).env_remove("REVERSER_REDIS_URL");
    let api = fake_api();
    let kc = api.kubeconfig(k.dir.path());
    let sidecar = Sidecar::start("serve", &["--follow", "default:configmaps"]);
    let evil = "mal\u{1b}[31mlory\nReverser-Actor: eve\u{0}<root@evil>\u{7}";
    let long = "x".repeat(10 * 1024);
    assert_eq!(sidecar.post_events("default", &[audit("create", evil, "default", "web", "u-web", "10")]), 200);
    api.seed_object(configmap("default", "web", "u-web", "10")).unwrap();

    let repo = k.dir.path().join("mirror.git");
    let mut w = writer(&repo);
    let cm = |name: &str, v: &str| Action::Write(configmap("default", name, "", v));
    for (name, who) in [("web", evil), ("long", long.as_str()), ("crud", "...<>"), ("ctl", "\u{0}\n\u{1b}")] {
        w.commit(&[change(name, cm(name, "10"), Some(who), Tier::Exact, Some("audit\nid"))]).unwrap();
    }
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").arg("-C").arg(&repo).args(args).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    git(&["fsck", "--strict"]);
    let authors = git(&["log", "main", "--format=%an <%ae>"]);
    assert_eq!(authors.lines().count(), 4, "{authors}");
    for line in authors.lines() {
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(line.chars().count() < 600, "{} chars", line.chars().count());
    }

    let out = why(
        &k,
        &kc,
        &["configmap/web", "--socket", sidecar.socket.to_str().unwrap(), "--repo", repo.to_str().unwrap()],
    );
    assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
    assert!(out.contains(r"mal\u{1b}[31mlory\nReverser-Actor: eve\u{0}<root@evil>\u{7}"), "{out}");
}

/// The README's first run, step by step with the real parts: `reverser-sidecar
/// serve` with no flag naming a route or a type (only free ports), the `curl`
/// it prints pasted as printed (alice creates configmap default/demo), then
/// `kubectl reverser why configmap/demo` through the real kubectl against
/// the fake API run as a process. `why` asks the sidecar to follow the type
/// and waits for it, so the answer names alice without `--follow`.
#[test]
fn the_readme_first_run_goes_from_serve_to_a_why_that_names_alice() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let k = Kubectl::new(&[env!("CARGO_BIN_EXE_kubectl-reverser")]).env_remove("REVERSER_REDIS_URL");
    let dir = k.dir.path().join("first-run");
    std::fs::create_dir_all(&dir).unwrap();
    let mut serve = Command::new(testkit::sidecar::binary())
        .current_dir(&dir)
        .args(["serve", "--audit-listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0"])
        .env("REVERSER_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stderr = serve.stderr.take().unwrap();
    let _serve = Kill(serve);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            // The curl is the `command` field of serve's `try it` line.
            if let Some((_, curl)) = line.split_once("try it command=") {
                let _ = tx.send(curl.trim().to_string());
            }
        }
    });
    let curl = rx.recv_timeout(std::time::Duration::from_secs(30)).expect("serve prints a curl to try");
    assert!(curl.starts_with("curl ") && curl.contains("/audit-webhook/default"), "{curl}");
    let socket = dir.join("reverser.sock");
    for _ in 0..200 {
        if socket.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let posted = Command::new("sh").arg("-c").arg(&curl).current_dir(&dir).output().unwrap();
    assert!(posted.status.success(), "the printed curl failed: {posted:?}");

    // The cluster where alice created it: the fake API process seeded with
    // the README's docs/first-run.yaml.
    let seed = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/first-run.yaml");
    assert!(seed.is_file(), "{} is missing", seed.display());
    let kc = dir.join("kubeconfig");
    let _api = testkit::process::Running::start(
        &testkit::process::binary("testkit", "testkit"),
        &["fake-api", "--seed", seed.to_str().unwrap(), "--kubeconfig-out", kc.to_str().unwrap()],
    );
    let out = why(&k, &kc, &["configmap/demo", "--socket", socket.to_str().unwrap(), "--timeout", "20"]);
    assert!(out.contains("Author of the current state: alice [user]"), "{out}");
    assert!(out.contains("Route:      default"), "{out}");
}

#[test]
fn why_on_a_secret_advises_metadata_auditing_and_names_no_git_file() {
    let k = Kubectl::new(&[env!("CARGO_BIN_EXE_kubectl-reverser")]).env_remove("REVERSER_REDIS_URL");
    let api = fake_api();
    let kc = api.kubeconfig(k.dir.path());
    // Facts arrive on the route (a ConfigMap's), none for secrets; the
    // sidecar has resolved one ConfigMap's event on it, so its route health
    // knows the route is fed.
    let sidecar = Sidecar::start("serve", &["--follow", "default:configmaps"]);
    assert_eq!(sidecar.post_events("default", &[audit("create", "alice", "default", "web", "u-web", "10")]), 200);
    resolve_once(&sidecar.socket, configmap("default", "web", "u-web", "10"));
    api.seed_object(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db-pass", "namespace": "default", "uid": "u-secret", "resourceVersion": "7"}}))
        .unwrap();
    let socket = sidecar.socket.to_str().unwrap();
    let r = why_json(&k, &kc, &["secret/db-pass", "--socket", socket]);
    assert_eq!(r["verdict"]["resolved"], false, "{r:#}");
    assert!(r["object"]["path"].is_null(), "no mirror read, no file to show: {r:#}");
    assert_eq!(r["object"]["sealedOnly"], true, "{r:#}");
    let policy = r["causes"].as_array().unwrap().iter().find(|c| c["cause"] == "audit_policy_drops_type");
    let check = policy.unwrap_or_else(|| panic!("no audit policy cause: {r:#}"))["check"].as_str().unwrap();
    // docs/audit-setup.md: Secrets at Metadata, never with their data.
    assert!(check.contains("log secrets at Metadata (never RequestResponse"), "{check}");
    let out = why(&k, &kc, &["secret/db-pass", "--socket", socket]);
    assert!(out.contains("Git path:   none: no mirror was read (pass --repo); secrets are written only sealed with sops, to default/secrets/db-pass.sops.yaml, when the GitTarget sets spec.encryption"), "{out}");
    assert!(out.contains("UNRESOLVED (no commit known: see Git path)"), "{out}");
    // "how to check:" is followed by what to look at, not a second "check"
    // (issue 29).
    assert!(out.contains("how to check: the API server's audit policy: a rule must log secrets"), "{out}");
    assert!(!out.contains("check: check"), "{out}");
    assert!(!out.contains("committed as `unknown"), "{out}");
    // No evidence flag: nobody was asked, which is no verdict.
    let out = why(&k, &kc, &["secret/db-pass"]);
    assert!(out.contains("Author of the current state: not known, no evidence was asked (pass --socket"), "{out}");
    assert!(!out.contains("UNRESOLVED"), "{out}");
    // A field the answer lacks: nothing, as kubectl's default; an error
    // naming it with --allow-missing-template-keys=false, as kubectl's.
    assert_eq!(why(&k, &kc, &["secret/db-pass", "--socket", socket, "-o", "jsonpath={.nope}"]), "");
    let strict = why_raw(
        &k,
        &kc,
        &["secret/db-pass", "--socket", socket, "-o", "jsonpath={.nope}", "--allow-missing-template-keys=false"],
    );
    assert_eq!(strict.status.code(), Some(1), "{strict:?}");
    assert!(text(&strict).1.contains(".nope is not found"), "{strict:?}");
    // Only the formats why prints.
    let wide = why_raw(&k, &kc, &["secret/db-pass", "--socket", socket, "-o", "wide"]);
    assert_eq!(wide.status.code(), Some(2), "{wide:?}");
    assert!(
        text(&wide).1.starts_with("error: why does not print -o wide: use json, yaml or jsonpath=TEMPLATE"),
        "{wide:?}"
    );
    let help = text(&k.run(&["reverser", "why", "--help"])).0;
    assert!(help.contains("Output format: json, yaml or jsonpath=TEMPLATE") && !help.contains("wide"), "{help}");
}

/// A JSONPath template that fails, to parse or on a missing field with
/// --allow-missing-template-keys=false, exits 1 as kubectl 1.32 does
/// (issue 29); a format kubectl would not know stays a usage error.
#[test]
fn why_jsonpath_errors_exit_1_as_kubectl_does() {
    let k = Kubectl::new(&[env!("CARGO_BIN_EXE_kubectl-reverser")]).env_remove("REVERSER_REDIS_URL");
    let api = fake_api();
    let kc = api.kubeconfig(k.dir.path());
    api.seed_object(configmap("default", "web", "u-web", "5")).unwrap();
    for (args, says) in [
        (&["cm/web", "-o", "jsonpath={.nope}", "--allow-missing-template-keys=false"][..], ".nope is not found"),
        (&["cm/web", "-o", "jsonpath={.nope"], "jsonpath"),
    ] {
        let out = why_raw(&k, &kc, args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("Usage:") && stdout.is_empty(), "{args:?}: {stderr}\n{stdout}");
    }
    let bogus = why_raw(&k, &kc, &["cm/web", "-o", "bogus"]);
    assert_eq!(bogus.status.code(), Some(2), "{bogus:?}");
}

/// Resolves the ADDED event of ConfigMap `object` on route `default`
/// through the sidecar's socket, as its watcher would, asserting an author.
fn resolve_once(socket: &Path, object: Value) {
    use runtime::proto::attribution_client::AttributionClient;
    use runtime::proto::{ResolveRequest, TypeRef};
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let answer = rt.block_on(async {
        let mut client = AttributionClient::new(runtime::proto::connect_unix(socket).await.unwrap());
        let t = TypeRef {
            route: "default".into(),
            group: String::new(),
            version: "v1".into(),
            resource: "configmaps".into(),
        };
        client
            .resolve(ResolveRequest {
                r#type: Some(t),
                event_type: "ADDED".into(),
                object_json: object.to_string().into(),
            })
            .await
            .unwrap()
            .into_inner()
    });
    assert!(!answer.author.is_empty(), "{answer:?}");
}

/// A sidecar that has seen no fact on its route: one cause, the route,
/// never beside it "facts arrive on the route, but none for secrets" (issue
/// 29: the two contradicted each other).
#[test]
fn why_on_a_route_never_fed_names_the_route_alone() {
    let k = Kubectl::new(&[env!("CARGO_BIN_EXE_kubectl-reverser")]).env_remove("REVERSER_REDIS_URL");
    let api = fake_api();
    let kc = api.kubeconfig(k.dir.path());
    let sidecar = Sidecar::start("serve", &[]);
    api.seed_object(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db-pass", "namespace": "default", "uid": "u-secret", "resourceVersion": "7"}}))
        .unwrap();
    let socket = sidecar.socket.to_str().unwrap();
    let r = why_json(&k, &kc, &["secret/db-pass", "--socket", socket]);
    let causes: Vec<&str> = r["causes"].as_array().unwrap().iter().map(|c| c["cause"].as_str().unwrap()).collect();
    assert_eq!(causes, ["route_never_resolved"], "{r:#}");
    let out = why(&k, &kc, &["secret/db-pass", "--socket", socket]);
    assert!(out.contains("no fact has ever arrived on audit route \"default\""), "{out}");
    assert!(!out.contains("facts arrive on the route"), "{out}");
}

/// Seals like sops would look from Git: a file that holds no clear value.
#[derive(Debug)]
struct FakeSeal;

impl runtime::attribution::commit::encryption::Encryptor for FakeSeal {
    fn seal(
        &self,
        _path: &str,
        _plaintext: &[u8],
        _existing: Option<&[u8]>,
    ) -> Result<Vec<u8>, runtime::attribution::commit::encryption::EncryptionError> {
        Ok(b"data: ENC[sealed]\nsops:\n  mac: ENC[mac]\n".to_vec())
    }
}

#[test]
fn why_on_a_secret_shows_its_sops_file_only_when_the_mirror_holds_it() {
    let k = Kubectl::new(&[env!("CARGO_BIN_EXE_kubectl-reverser")]).env_remove("REVERSER_REDIS_URL");
    let api = fake_api();
    let kc = api.kubeconfig(k.dir.path());
    let secret = |name: &str, uid: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": {"pw": "aHVudGVyMg=="},
            "metadata": {"name": name, "namespace": "default", "uid": uid, "resourceVersion": "7"}})
    };
    api.seed_object(secret("sealed", "u-sealed")).unwrap();
    api.seed_object(secret("skipped", "u-skipped")).unwrap();
    // A mirror with encryption on (the GitTarget's spec.encryption): the
    // writer commits the Secret as its .sops.yaml file.
    let repo = k.dir.path().join("mirror.git");
    let mut config = WriterConfig::new(repo.clone(), "main", Identity::new("reverser", "reverser@example.invalid"));
    config.encryption = Some(std::sync::Arc::new(FakeSeal));
    let mut w = GitWriter::open(config).unwrap();
    let key = ObjectKey { resource: "secrets".into(), ..key("sealed") };
    let mut c = change("sealed", Action::Write(secret("sealed", "u-sealed")), Some("alice"), Tier::Exact, Some("a-1"));
    c.object = key;
    let out = w.commit(std::slice::from_ref(&c)).unwrap();
    assert_eq!((out.commits.len(), out.sensitive_skipped), (1, 0), "the writer sealed it");
    let repo_arg = repo.to_str().unwrap();

    let out = why(&k, &kc, &["secret/sealed", "--repo", repo_arg]);
    assert!(out.contains("Git path:   default/secrets/sealed.sops.yaml (sealed with sops)"), "{out}");
    assert!(out.contains("History (newest first):") && out.contains("alice"), "{out}");
    let r = why_json(&k, &kc, &["secret/sealed", "--repo", repo_arg]);
    assert_eq!(r["object"]["path"], "default/secrets/sealed.sops.yaml", "{r:#}");

    // Never committed (encryption off when it changed): no path, and why.
    let out = why(&k, &kc, &["secret/skipped", "--repo", repo_arg]);
    assert!(!out.contains("skipped.sops.yaml (sealed") && !out.contains("skipped.yaml"), "{out}");
    assert!(
        out.contains("Git path:   none: the mirror has no commit of it; secrets are written only sealed with sops"),
        "{out}"
    );
    assert!(out.contains("and skipped otherwise (gitopsreverser_mirror_sensitive_skipped_total counts them)"), "{out}");
}
