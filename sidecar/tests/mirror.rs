//! The mirror end to end (spec/mirror.md): the real `reverser-sidecar watch`
//! and `serve --git-target` processes, configured by configbutler.ai CRs in
//! the fake Kubernetes API (validated against the vendored CRD schemas),
//! audit events posted over real mTLS as the API server would, and a real
//! bare Git repository read back with the `git` CLI.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::fakeapi::{self, Store};
use testkit::free_port;
use testkit::mirror::{Mirror, NS, PREFIX, Setup, UNRESOLVED, cm_path, configmap, git};
use testkit::sidecar;

#[test]
fn creates_updates_and_a_finalized_deletion_are_authored_by_their_actors() {
    let m = Mirror::start(|_| {});
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's create", || m.remote_has(&cm_path("web")));
    m.act("bob", true, |s| {
        s.patch("configmaps", NS, "web", &json!({"data": {"k": "2"}}), false).unwrap();
    });
    m.wait("bob's update", || m.authors(&cm_path("web")).len() == 2);
    assert_eq!(m.authors(&cm_path("web")), ["bob", "alice"]);
    assert!(m.show(&cm_path("web")).contains("k: '2'"), "{}", m.show(&cm_path("web")));

    // Deleted while a finalizer holds it; another identity clears the
    // finalizer. The deleter is the author of the removal; the finalizer's
    // controller makes no commit.
    let mut guarded = configmap("guarded", "1");
    guarded["metadata"]["finalizers"] = json!(["example.com/keep"]);
    m.act("carol", true, |s| {
        s.create("configmaps", NS, guarded).unwrap();
    });
    m.wait("carol's create", || m.remote_has(&cm_path("guarded")));
    m.act("dave", true, |s| {
        s.delete("configmaps", NS, "guarded", None, None).unwrap();
    });
    m.wait("dave's deletion", || !m.remote_has(&cm_path("guarded")));
    let before_cleanup = m.commits();
    m.act("system:serviceaccount:kube-system:cleaner", true, |s| {
        s.patch("configmaps", NS, "guarded", &json!({"metadata": {"finalizers": null}}), false).unwrap();
    });
    m.act("erin", false, |s| {
        s.create("configmaps", NS, configmap("quiet", "1")).unwrap();
    });
    m.wait("erin's unaudited create", || m.remote_has(&cm_path("quiet")));
    assert_eq!(m.authors(&cm_path("guarded")), ["dave", "carol"]);
    assert_eq!(m.commits(), before_cleanup + 1, "the finalizer's clearing made no commit");
    // No audit event: exactly the unresolved author, never a guess.
    assert_eq!(m.authors(&cm_path("quiet")), [UNRESOLVED]);
    // The committer is the provider's, never the author.
    let committers = git(&m.remote, &["log", "--format=%cn <%ce>", "main"]);
    assert!(committers.lines().all(|l| l == "Lab Mirror <mirror@lab.invalid>"), "{committers}");
}

#[test]
fn a_change_while_the_watcher_is_down_is_written_once_on_restart() {
    let mut m = Mirror::start(|_| {});
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's create", || m.remote_has(&cm_path("web")));
    m.stop_watcher();
    m.act("bob", true, |s| {
        s.patch("configmaps", NS, "web", &json!({"data": {"k": "2"}}), false).unwrap();
        s.create("configmaps", NS, configmap("db", "1")).unwrap();
    });
    let before = m.commits();
    m.start_watcher(&[]);
    m.wait("the reconcile of what changed meanwhile", || m.remote_has(&cm_path("db")));
    // The facts were held by the sidecar all along: the reconcile knows who.
    assert_eq!(m.authors(&cm_path("web")), ["bob", "alice"]);
    assert_eq!(m.authors(&cm_path("db")), ["bob"]);
    let subject = git(&m.remote, &["log", "-1", "--format=%s", "main"]);
    assert!(subject.starts_with("reconciled 2 configmaps (last resourceVersion: "), "{subject}");
    assert_eq!(m.commits(), before + 1);
    // A second restart with nothing changed writes nothing.
    m.stop_watcher();
    m.start_watcher(&[]);
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(m.commits(), before + 1, "nothing written twice");
}

#[test]
fn a_410_relists_and_reconciles_without_losing_or_repeating_a_change() {
    let m = Mirror::start(|_| {});
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's create", || m.remote_has(&cm_path("web")));
    let restarts = m.watcher_metric("gitopsreverser_mirror_watch_restarts_total");
    // The watch connections drop, and the history they would resume from is
    // compacted away meanwhile: resuming answers 410 Gone.
    {
        let mut store = m.api.store.lock().unwrap();
        store.set_event_window(1);
    }
    m.api.drop_watches();
    m.act("bob", true, |s| {
        s.create("configmaps", NS, configmap("db", "1")).unwrap();
        s.patch("configmaps", NS, "web", &json!({"data": {"k": "2"}}), false).unwrap();
    });
    m.api.compact();
    m.wait("the relist's reconcile", || m.remote_has(&cm_path("db")));
    assert!(m.watcher_metric("gitopsreverser_mirror_watch_restarts_total") > restarts);
    assert!(
        m.watcher_metric("gitopsreverser_mirror_watch_restarts_total{resource=\"configmaps\",reason=\"gone\"}") >= 1
            || m.watcher_log().contains("410 Gone"),
        "{}",
        m.watcher_log()
    );
    assert_eq!(m.authors(&cm_path("db")), ["bob"]);
    assert_eq!(m.authors(&cm_path("web")), ["bob", "alice"]);
}

#[test]
fn excluded_actors_and_field_managers_are_not_mirrored() {
    let flux = "system:serviceaccount:flux-system:kustomize-controller";
    let m =
        Mirror::start_with(|_| {}, &[], &["--exclude-user", flux, "--exclude-field-manager", "kustomize-controller"]);
    m.act(flux, true, |s| {
        s.create("configmaps", NS, configmap("from-git", "1")).unwrap();
    });
    let mut applied = configmap("applied", "1");
    applied["metadata"]["managedFields"] =
        json!([{"manager": "kustomize-controller", "operation": "Apply", "time": "2026-11-29T12:00:00Z"}]);
    m.act("someone", false, |s| {
        s.create("configmaps", NS, applied).unwrap();
    });
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's create", || m.remote_has(&cm_path("web")));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!m.remote_has(&cm_path("from-git")), "the forward leg's own change came back");
    assert!(!m.remote_has(&cm_path("applied")), "a field manager of the forward leg came back");
    assert!(m.watcher_metric("gitopsreverser_mirror_events_skipped_total") >= 1);
    assert!(
        m.sidecar.metrics().contains("gitopsreverser_mirror_excluded_total{reason=\"actor\"} 1"),
        "{}",
        m.sidecar.metrics()
    );
}

#[test]
fn status_only_changes_make_no_commit_and_secrets_never_reach_git() {
    let m = Mirror::start(|_| {});
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api", "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "api"}},
                 "template": {"metadata": {"labels": {"app": "api"}}, "spec": {"containers": [{"name": "api", "image": "api:1"}]}}}});
    m.act("alice", true, |s| {
        s.create("deployments", NS, deployment).unwrap();
        s.create(
            "secrets",
            NS,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": NS},
            "data": {"password": "aHVudGVyMg=="}}),
        )
        .unwrap();
    });
    let path = format!("{PREFIX}/{NS}/apps/deployments/api.yaml");
    m.wait("alice's deployment", || m.remote_has(&path));
    let before = m.commits();
    m.act("system:serviceaccount:kube-system:deployment-controller", true, |s| {
        s.patch("deployments", NS, "api", &json!({"status": {"readyReplicas": 1, "observedGeneration": 1}}), true)
            .unwrap();
    });
    m.act("bob", true, |s| {
        s.create("configmaps", NS, configmap("marker", "1")).unwrap();
    });
    m.wait("bob's marker", || m.remote_has(&cm_path("marker")));
    assert_eq!(m.commits(), before + 1, "the status write made no commit");
    let everything = git(&m.remote, &["log", "-p", "--all"]);
    assert!(!everything.contains("aHVudGVyMg==") && !everything.contains("/secrets/"), "a Secret reached Git");
    assert!(m.sidecar.metrics().contains("gitopsreverser_mirror_sensitive_skipped_total 1"), "{}", m.sidecar.metrics());
}

/// A Secret the target cannot seal (no `spec.encryption`) is skipped before
/// attribution: it waits no grace (ten minutes here) for a fact, holds up
/// nothing else in its window, and is counted skipped, not unresolved.
#[test]
fn a_secret_without_encryption_is_skipped_without_waiting_for_its_author() {
    let m = Mirror::start_with(|_| {}, &["--author-attribution-grace", "10m"], &[]);
    m.act("nobody-audited", false, |s| {
        s.create(
            "secrets",
            NS,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": NS},
            "data": {"password": "aHVudGVyMg=="}}),
        )
        .unwrap();
    });
    m.act("bob", true, |s| {
        s.create("configmaps", NS, configmap("marker", "1")).unwrap();
    });
    m.wait("bob's marker, in the Secret's window or the next", || m.remote_has(&cm_path("marker")));
    let metrics = m.sidecar.metrics();
    assert!(metrics.contains("gitopsreverser_mirror_sensitive_skipped_total 1"), "{metrics}");
    let absent_secret = metrics
        .lines()
        .filter(|l| l.starts_with("gitopsreverser_attribution_resolutions_total"))
        .any(|l| l.contains("resource=\"secrets\""));
    assert!(!absent_secret, "the skipped Secret was attributed:\n{metrics}");
    m.wait("the watcher's line for the Secret's window", || m.watcher_log().contains("secrets_skipped=1"));
}

#[test]
fn commits_are_signed_with_a_generated_key_that_git_verify_commit_accepts() {
    let m = Mirror::start(|s| {
        s.provider["spec"]["commit"]["signing"] =
            json!({"secretRef": {"name": "lab-signing"}, "generateWhenMissing": true});
    });
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's create", || m.remote_has(&cm_path("web")));
    // The sidecar generated the key into the Secret; its public half is what
    // a user adds to allowed signers.
    let secret = m.api.store.lock().unwrap().get("secrets", NS, "lab-signing").unwrap();
    let public = secret["data"]["signing.pub"].as_str().expect("the generated public key");
    let public = String::from_utf8(base64_decode(public)).unwrap();
    let verified = m.verify_head(&public).expect("a good signature");
    assert!(verified.contains("Good \"git\" signature"), "{verified}");
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

#[test]
fn a_push_rejected_by_a_concurrent_writer_loses_nothing() {
    let m = Mirror::start(|_| {});
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's create", || m.remote_has(&cm_path("web")));
    // Someone else pushes to the branch: the mirror's next push is rejected,
    // fetches, replays its commit on top, and pushes again.
    let other = m.dir.path().join("other");
    git(m.dir.path(), &["clone", "--quiet", m.remote.to_str().unwrap(), other.to_str().unwrap()]);
    std::fs::write(other.join("README.md"), "hand-written\n").unwrap();
    git(&other, &["add", "README.md"]);
    git(
        &other,
        &["-c", "user.name=Hand", "-c", "user.email=hand@lab.invalid", "commit", "--quiet", "-m", "a human commit"],
    );
    git(&other, &["push", "--quiet", "origin", "main"]);
    m.act("bob", true, |s| {
        s.create("configmaps", NS, configmap("db", "1")).unwrap();
    });
    m.wait("bob's create", || m.remote_has(&cm_path("db")));
    assert!(m.remote_has("README.md"), "the other writer's commit is kept");
    assert_eq!(git(&m.remote, &["log", "--format=%an", "main"]).lines().collect::<Vec<_>>(), ["bob", "Hand", "alice"]);
}

#[test]
fn a_gittarget_naming_a_missing_provider_stops_the_sidecar_with_the_fix() {
    // The watcher waits instead, saying ProviderNotFound in the GitTarget's
    // status (tests/status.rs).
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::new();
    store.load_crd_schemas(&testkit::fixtures::gitops_reverser_crds()).unwrap();
    store
        .seed_object(json!({"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitTarget",
            "metadata": {"name": "lab", "namespace": NS},
            "spec": {"providerRef": {"name": "nowhere"}, "branch": "main", "path": "x"}}))
        .unwrap();
    let api = fakeapi::spawn(store).unwrap();
    let kc = api.write_kubeconfig(&dir.path().join("kubeconfig"), NS).unwrap();
    let out = Command::new(sidecar::binary())
        .args(["serve", "--audit-listen", "off", "--git-target", "shop/lab", "--kubeconfig"])
        .arg(&kc)
        .arg("--socket")
        .arg(dir.path().join("serve.sock"))
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port().unwrap())])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("GitProvider shop/nowhere not found") && stderr.contains("spec.providerRef"), "{stderr}");
}

#[test]
fn a_template_with_an_unknown_field_stops_the_sidecar_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::new();
    store.load_crd_schemas(&testkit::fixtures::gitops_reverser_crds()).unwrap();
    let setup = Setup::new(&dir.path().join("remote.git"));
    let mut provider = setup.provider;
    provider["spec"]["commit"]["message"] = json!({"groupTemplate": "{{.Autor}} changed {{.Count}}"});
    store.seed_object(provider).unwrap();
    store.seed_object(setup.target).unwrap();
    let api = fakeapi::spawn(store).unwrap();
    let kc = api.write_kubeconfig(&dir.path().join("kubeconfig"), NS).unwrap();
    let out = Command::new(sidecar::binary())
        .args(["serve", "--audit-listen", "off", "--git-target", "shop/lab", "--kubeconfig"])
        .arg(&kc)
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port().unwrap())])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("spec.commit.message")
            && stderr.contains("unknown field `.Autor`")
            && stderr.contains(".Author"),
        "{stderr}"
    );
}

#[test]
fn an_unreachable_remote_and_an_unknown_resource_leave_the_rest_mirroring() {
    let later = tempfile::tempdir().unwrap();
    let remote = later.path().join("late.git");
    let m = Mirror::start(|s| {
        s.provider["spec"]["url"] = json!(format!("file://{}", remote.display()));
        s.rules[0]["spec"]["rules"] = json!([{"resources": ["configmaps", "gizmos"]}]);
    });
    // The rule's unknown resource is a problem the watcher reports; the
    // configmaps are still watched.
    m.wait("the rule problem", || m.watcher_metric("gitopsreverser_mirror_rule_problems") == 1);
    assert!(m.watcher_log().contains("\"gizmos\""), "{}", m.watcher_log());
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    // Committed in the clone while the remote is away.
    let clone = m.dir.path().join("clone");
    m.wait("alice's commit in the clone", || {
        Command::new("git")
            .arg("-C")
            .arg(&clone)
            .args(["cat-file", "-e", &format!("main:{}", cm_path("web"))])
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
    });
    assert!(m.sidecar.metrics().contains("gitopsreverser_mirror_push_failures_total"), "{}", m.sidecar.metrics());
    // The remote appears: the owed push goes out on its own.
    std::fs::create_dir_all(&remote).unwrap();
    git(&remote, &["init", "--quiet", "--bare", "--initial-branch=main"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = Command::new("git").arg("-C").arg(&remote).args(["log", "--format=%an", "main"]).output().unwrap();
        if String::from_utf8_lossy(&out.stdout).trim() == "alice" {
            break;
        }
        assert!(Instant::now() < deadline, "the owed push never went out\n{}", m.watcher_log());
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn prune_never_keeps_documents_and_prune_always_removes_what_vanished_while_down() {
    // Never: even an observed deletion leaves the document.
    let m = Mirror::start(|s| s.target["spec"]["prune"] = json!({"mode": "Never"}));
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's create", || m.remote_has(&cm_path("web")));
    m.act("bob", true, |s| {
        s.delete("configmaps", NS, "web", None, None).unwrap();
        s.create("configmaps", NS, configmap("marker", "1")).unwrap();
    });
    m.wait("bob's marker", || m.remote_has(&cm_path("marker")));
    assert!(m.remote_has(&cm_path("web")), "prune mode Never removed a document");

    // Always: a relist removes the document of an object deleted while the
    // watcher was down (OnEvent, the default, would keep it).
    let mut m = Mirror::start(|s| s.target["spec"]["prune"] = json!({"mode": "Always"}));
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
        s.create("configmaps", NS, configmap("db", "1")).unwrap();
    });
    m.wait("alice's creates", || m.remote_has(&cm_path("db")) && m.remote_has(&cm_path("web")));
    m.stop_watcher();
    m.act("carol", true, |s| {
        s.delete("configmaps", NS, "db", None, None).unwrap();
    });
    m.start_watcher(&[]);
    m.wait("the reconcile's removal", || !m.remote_has(&cm_path("db")));
    assert!(m.remote_has(&cm_path("web")));
    let subject = git(&m.remote, &["log", "-1", "--format=%s", "main"]);
    assert!(subject.starts_with("reconciled 1 configmaps"), "{subject}");
}

#[test]
fn without_custom_resources_watch_takes_the_types_from_flags() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote.git");
    std::fs::create_dir_all(&remote).unwrap();
    git(&remote, &["init", "--quiet", "--bare", "--initial-branch=main"]);
    let mut store = Store::new();
    store.seed_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})).unwrap();
    store.seed_object(configmap("existing", "0")).unwrap();
    let api = fakeapi::spawn(store).unwrap();
    let kubeconfig = api.write_kubeconfig(&dir.path().join("kubeconfig"), NS).unwrap();
    let clone = dir.path().join("clone");
    let remote_url = format!("file://{}", remote.display());
    let sidecar = testkit::sidecar::Sidecar::builder("serve")
        .args(&["--git-repo", clone.to_str().unwrap(), "--git-remote", &remote_url, "--author-attribution-grace", "1s"])
        .start();
    let mut watcher = Command::new(sidecar::binary())
        .args([
            "watch",
            "--resource",
            "configmaps",
            "--resource",
            "deployments.apps",
            "-n",
            NS,
            "--commit-window",
            "200ms",
        ])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--socket")
        .arg(&sidecar.socket)
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port().unwrap())])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let has = |path: &str| {
        Command::new("git")
            .arg("-C")
            .arg(&remote)
            .args(["cat-file", "-e", &format!("main:{path}")])
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
    };
    let wait = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // The first list reconciles what exists; no prefix without a GitTarget.
    wait("the reconcile of the existing ConfigMap", &|| has(&format!("{NS}/configmaps/existing.yaml")));
    // Without templates a reconcile is still titled as one (issue 29).
    let subject = git(&remote, &["log", "-1", "--format=%s", "main"]);
    assert!(subject.starts_with("reconciled 1 configmaps (last resourceVersion: "), "{subject}");
    let writes = {
        let mut s = api.store.lock().unwrap();
        s.as_user("alice").create("configmaps", NS, configmap("web", "1")).unwrap();
        s.take_writes()
    };
    let events: Vec<serde_json::Value> = writes.iter().map(testkit::audit::from_write).collect();
    assert_eq!(sidecar.post_events("default", &events), 200);
    wait("alice's create", &|| has(&format!("{NS}/configmaps/web.yaml")));
    assert_eq!(git(&remote, &["log", "-1", "--format=%an", "main"]).trim(), "alice");
    let _ = watcher.kill();
    let _ = watcher.wait();
}

#[test]
fn https_credentials_come_from_the_providers_secret() {
    let served = tempfile::tempdir().unwrap();
    let bare = served.path().join("history.git");
    std::fs::create_dir_all(&bare).unwrap();
    git(&bare, &["init", "--quiet", "--bare", "--initial-branch=main"]);
    git(&bare, &["config", "http.receivepack", "true"]);
    let server = testkit::git_http::GitHttpServer::start(served.path(), "mirror-bot", "s3cret");
    let url = format!("{}/history.git", server.url);
    let secret = |token: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "lab-git-credentials", "namespace": NS},
               "data": {"username": b64("mirror-bot"), "token": b64(token)}})
    };
    let m = Mirror::start(|s| {
        s.provider["spec"]["url"] = json!(url);
        s.provider["spec"]["secretRef"] = json!({"name": "lab-git-credentials"});
        s.rules.push(secret("s3cret"));
    });
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's create pushed over HTTPS-style auth", || authors_on(&bare) == "alice");
    assert!(server.served.load(std::sync::atomic::Ordering::SeqCst) > 0);
    let token_in_logs = m.watcher_log().contains("s3cret") || m.sidecar.metrics().contains("s3cret");
    assert!(!token_in_logs, "the token leaked");
}

/// SSH remotes: the key from the provider's Secret, the server's host key
/// checked against `known_hosts` (fail closed), a real `sshd` running
/// `git-receive-pack` on the far side.
#[test]
fn ssh_credentials_and_known_hosts_come_from_the_providers_secret() {
    let server = testkit::ssh_git::SshGitServer::start().expect("sshd (openssh-server) must be installed");
    let bare = server.dir().join("history.git");
    std::fs::create_dir_all(&bare).unwrap();
    git(&bare, &["init", "--quiet", "--bare", "--initial-branch=main"]);
    let secret = |known_hosts: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "lab-git-ssh", "namespace": NS},
               "data": {"ssh-privatekey": b64(&server.client_key), "known_hosts": b64(known_hosts)}})
    };
    // A known_hosts that does not hold the server's key: nothing is pushed
    // (the push fails and is counted; the commit stays in the clone).
    let stranger = testkit::ssh_git::SshGitServer::start().unwrap();
    let m = Mirror::start(|s| {
        s.provider["spec"]["url"] = json!(server.url(&bare));
        s.provider["spec"]["secretRef"] = json!({"name": "lab-git-ssh"});
        s.rules.push(secret(&format!("[127.0.0.1]:{} {}\n", server.port, stranger.host_key)));
    });
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    let push_failures = |m: &Mirror| {
        let metrics = m.sidecar.metrics();
        metrics
            .lines()
            .find_map(|l| l.strip_prefix("gitopsreverser_mirror_push_failures_total "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    m.wait("a failed push and the host key refusal", || {
        push_failures(&m) >= 1.0 && m.watcher_log().contains("not in the known_hosts given")
    });
    // The refusal names the fix (libgit2's own message would not).
    let keyscan = format!("ssh-keyscan -p {} 127.0.0.1", server.port);
    assert!(m.watcher_log().contains(&keyscan), "{}", m.watcher_log());
    assert_eq!(authors_on(&bare), "", "nothing reaches a host whose key is not trusted");
    drop(m);

    // The right known_hosts: alice's create is pushed over SSH.
    let m = Mirror::start(|s| {
        s.provider["spec"]["url"] = json!(server.url(&bare));
        s.provider["spec"]["secretRef"] = json!({"name": "lab-git-ssh"});
        s.rules.push(secret(&server.known_hosts()));
    });
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's create pushed over SSH", || authors_on(&bare) == "alice");
    assert_eq!(push_failures(&m), 0.0);
}

/// The authors of `bare`'s `main`, newest first, one per line ("" before
/// the first push).
fn authors_on(bare: &std::path::Path) -> String {
    let out =
        Command::new("git").arg("-C").arg(bare).args(["log", "--format=%an", "main"]).stderr(Stdio::null()).output();
    String::from_utf8_lossy(&out.unwrap().stdout).trim().to_owned()
}

fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn a_rule_change_is_followed_without_a_restart() {
    // The rules are watched: with an hour between rescans, only the watch
    // can bring a change in.
    let m = Mirror::start_with(
        |s| s.rules[0]["spec"]["rules"] = json!([{"resources": ["configmaps"]}]),
        &[],
        &["--rescan", "1h"],
    );
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api", "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": "api"}},
                 "template": {"metadata": {"labels": {"app": "api"}}, "spec": {"containers": [{"name": "api", "image": "api:1"}]}}}});
    m.act("alice", true, |s| {
        s.create("deployments", NS, deployment).unwrap();
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's ConfigMap", || m.remote_has(&cm_path("web")));
    let path = format!("{PREFIX}/{NS}/apps/deployments/api.yaml");
    assert!(!m.remote_has(&path), "deployments are not watched yet");
    // The rule now names deployments too: the running watcher starts
    // watching them, and the first list brings the existing one in,
    // authored by alice: her fact is still held.
    m.act("admin", false, |s| {
        s.patch(
            "watchrules",
            NS,
            "lab-rules",
            &json!({"spec": {"rules": [{"resources": ["configmaps"]}, {"apiGroups": ["apps"], "resources": ["deployments"]}]}}),
            false,
        )
        .unwrap();
    });
    m.wait("the deployment after the rule change", || m.remote_has(&path));
    // Dropping the rule stops the watch: later changes stay out.
    m.act("admin", false, |s| {
        s.patch("watchrules", NS, "lab-rules", &json!({"spec": {"rules": [{"resources": ["configmaps"]}]}}), false)
            .unwrap();
    });
    m.wait("the watch to stop", || m.watcher_log().contains("no rule covers it any more"));
    m.act("bob", true, |s| {
        s.patch("deployments", NS, "api", &json!({"spec": {"replicas": 3}}), false).unwrap();
        s.create("configmaps", NS, configmap("marker", "1")).unwrap();
    });
    m.wait("bob's marker", || m.remote_has(&cm_path("marker")));
    assert_eq!(m.authors(&path), ["alice"], "the deployment's later change was not mirrored");
}

/// The path under the GitTarget's folder of the one file holding
/// `<resource>`'s `<name>`, whatever the layout.
fn document_of(m: &Mirror, resource: &str, name: &str) -> Option<String> {
    let out =
        Command::new("git").arg("-C").arg(&m.remote).args(["ls-tree", "-r", "--name-only", "main"]).output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|p| p.split('/').any(|s| s == resource) && p.ends_with(&format!("/{name}.yaml")))
        .map(str::to_owned)
}

#[test]
fn a_kubectl_applied_deployment_lands_without_last_applied_or_revision_annotations() {
    // gitops-reverser's sanitizer (internal/sanitize/types.go:106-117):
    // kubectl's and the Deployment controller's bookkeeping never reaches Git.
    let m = Mirror::start(|_| {});
    let manifest = m.dir.path().join("api.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  namespace: shop\n  labels: {app: api}\n  \
         annotations: {team: payments}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: api}}\n  template:\n    \
         metadata: {labels: {app: api}}\n    spec:\n      containers: [{name: api, image: 'nginx:1.27'}]\n",
    )
    .unwrap();
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&m.kubeconfig)
        .args(["apply", "--validate=false", "-f"])
        .arg(&manifest)
        .output()
        .unwrap();
    assert!(out.status.success(), "kubectl apply: {}", String::from_utf8_lossy(&out.stderr));
    {
        // kubectl did write its annotation: the cluster holds it.
        let store = m.api.store.lock().unwrap();
        let live = store.get("deployments", NS, "api").unwrap();
        assert!(
            live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].is_string(),
            "{live}"
        );
    }
    m.wait("the applied Deployment", || document_of(&m, "deployments", "api").is_some());
    let path = document_of(&m, "deployments", "api").unwrap();
    // The Deployment controller stamps its revision; that is no change to Git.
    let before = m.commits();
    m.act("system:serviceaccount:kube-system:deployment-controller", true, |s| {
        s.patch(
            "deployments",
            NS,
            "api",
            &json!({"metadata": {"annotations": {"deployment.kubernetes.io/revision": "1"}}}),
            false,
        )
        .unwrap();
    });
    std::thread::sleep(Duration::from_millis(1800));
    assert_eq!(m.commits(), before, "a revision stamp made a commit");
    let doc = m.show(&path);
    assert!(!doc.contains("kubectl.kubernetes.io"), "{doc}");
    assert!(!doc.contains("deployment.kubernetes.io"), "{doc}");
    assert!(
        doc.contains("team: payments") && doc.contains("replicas: 2") && doc.contains("image: nginx:1.27"),
        "{doc}"
    );
}

#[test]
fn a_wildcard_rule_does_not_mirror_pods_events_or_leases() {
    // internal/watch/resource_policy.go:14-31: `*` never reaches them.
    let m = Mirror::start(|s| {
        s.rules[0]["spec"]["rules"] = json!([{"apiGroups": ["*"], "resources": ["*"]}]);
    });
    m.act("alice", true, |s| {
        s.create(
            "pods",
            NS,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": NS},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]}}),
        )
        .unwrap();
        s.create(
            "events.v1",
            NS,
            json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web-1.1", "namespace": NS},
            "involvedObject": {"kind": "Pod", "name": "web-1"}, "reason": "Started"}),
        )
        .unwrap();
        s.create(
            "events.events.k8s.io",
            NS,
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "web-1.2", "namespace": NS}, "reason": "Pulled"}),
        )
        .unwrap();
        s.create(
            "leases",
            NS,
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "leader", "namespace": NS}, "spec": {"holderIdentity": "web-1"}}),
        )
        .unwrap();
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("the ConfigMap", || document_of(&m, "configmaps", "web").is_some());
    std::thread::sleep(Duration::from_millis(1500));
    let tree = git(&m.remote, &["ls-tree", "-r", "--name-only", "main"]);
    for (resource, name) in [("pods", "web-1"), ("events", "web-1.1"), ("events", "web-1.2"), ("leases", "leader")] {
        assert!(document_of(&m, resource, name).is_none(), "{resource}/{name} was mirrored:\n{tree}");
    }
}

/// A remote gitops-reverser filled, as its code writes it: the canonical
/// `<path>/<namespace>/[<group>/]<resource>/<name>.yaml` (gitops-reverser
/// internal/types/identifier.go:96-112), a multi-document file with a
/// comment (internal/git/manifestedit/split.go), and an object a person
/// placed elsewhere. The cluster holds the same objects.
fn gitops_reverser_filled(s: &mut Setup) {
    let single = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: single\n  namespace: shop\ndata:\n  k: '1'\n";
    let multi = "\
# Shared settings, kept together by hand.
apiVersion: v1
kind: ConfigMap
metadata:
  name: first
  namespace: shop
data:
  # the colour of the shop
  colour: blue
  k: '1'
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: second
  namespace: shop
data:
  k: '1'
";
    let placed = "kind: ConfigMap\napiVersion: v1\nmetadata:\n  namespace: shop\n  name: placed\ndata: {k: '1'}\n";
    s.prefill = vec![
        (format!("{PREFIX}/{NS}/configmaps/single.yaml"), single.to_owned()),
        (format!("{PREFIX}/{NS}/shared.yaml"), multi.to_owned()),
        (format!("{PREFIX}/hand/placed-config.yaml"), placed.to_owned()),
        // Documentation is a passenger: accepted, never touched (a YAML file
        // that does not parse would refuse the folder, as it does in
        // gitops-reverser: sidecar/tests/status.rs, runtime's writer tests).
        (format!("{PREFIX}/hand/NOTES.md"), "Edited by hand; see shared.yaml.\n".to_owned()),
        (format!("{PREFIX}/README.md"), "# Ours\n".to_owned()),
    ];
    s.seed = vec![
        configmap("single", "1"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "first", "namespace": NS},
               "data": {"colour": "blue", "k": "1"}}),
        configmap("second", "1"),
        configmap("placed", "1"),
    ];
}

#[test]
fn a_repository_gitops_reverser_filled_is_continued_in_place_never_duplicated() {
    let mut m = Mirror::start(gitops_reverser_filled);
    let filled = m.commits();
    let shared = format!("{PREFIX}/{NS}/shared.yaml");
    let placed = format!("{PREFIX}/hand/placed-config.yaml");
    let tree = || git(&m.remote, &["ls-tree", "-r", "--name-only", "main"]);
    // The first list finds every object's document where it is: nothing
    // to write, no commit, no second copy.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(m.commits(), filled, "an unchanged tree makes no commit:\n{}", tree());
    assert!(!m.remote_has(&cm_path("first")) && !m.remote_has(&cm_path("placed")), "{}", tree());

    // An update edits the document inside the multi-document file: the
    // comments and the sibling document stay byte for byte.
    let before = m.show(&shared);
    m.act("alice", true, |s| {
        s.patch("configmaps", NS, "first", &json!({"data": {"k": "2"}}), false).unwrap();
    });
    m.wait("alice's update", || m.authors(&shared).first().map(String::as_str) == Some("alice"));
    assert_eq!(m.show(&shared), before.replace("  k: '1'\n---", "  k: '2'\n---"), "edited in place");
    assert!(!m.remote_has(&cm_path("first")), "{}", tree());
    // The placed object is edited where it was placed.
    m.act("bob", true, |s| {
        s.patch("configmaps", NS, "placed", &json!({"data": {"k": "2"}}), false).unwrap();
    });
    m.wait("bob's update", || m.authors(&placed).first().map(String::as_str) == Some("bob"));
    assert!(m.show(&placed).contains("k: '2'"), "{}", m.show(&placed));
    assert!(!m.remote_has(&cm_path("placed")), "{}", tree());
    // A new object lands at gitops-reverser's path, with the bootstrap
    // files beside it; the README that exists is not overwritten.
    m.act("carol", true, |s| {
        s.create("configmaps", NS, configmap("fresh", "1")).unwrap();
    });
    m.wait("carol's create", || m.remote_has(&cm_path("fresh")));
    assert_eq!(m.show(&format!("{PREFIX}/README.md")), "# Ours\n");
    assert!(m.show(&format!("{PREFIX}/.gittargetignore")).contains("# .gittargetignore"));
    // A deletion removes its document and keeps the sibling; the file of a
    // last document goes.
    m.act("dave", true, |s| {
        s.delete("configmaps", NS, "second", None, None).unwrap();
        s.delete("configmaps", NS, "single", None, None).unwrap();
    });
    m.wait("dave's deletions", || !m.remote_has(&format!("{PREFIX}/{NS}/configmaps/single.yaml")));
    let left = m.show(&shared);
    assert!(left.contains("name: first") && !left.contains("name: second"), "{left}");
    assert!(left.starts_with("# Shared settings, kept together by hand.\n"), "{left}");
    // The passenger was never touched.
    assert_eq!(m.show(&format!("{PREFIX}/hand/NOTES.md")), "Edited by hand; see shared.yaml.\n");

    // A restart relists an unchanged tree: no commit.
    let settled = m.commits();
    m.stop_watcher();
    m.start_watcher(&[]);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(m.commits(), settled, "a relist of an unchanged tree makes no commit");
}

#[test]
fn placement_templates_place_new_objects_and_a_bad_one_is_refused_naming_it() {
    let m = Mirror::start(|s| {
        s.target["spec"]["placement"] = json!({
            "byType": {"v1/configmaps": "config/{namespace}/{name}.yaml"},
            "default": "{groupPath}/{version}/{resource}/{namespaceOrCluster}/{name}{sensitiveSuffix}",
        });
    });
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
        s.create(
            "deployments",
            NS,
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api", "namespace": NS},
                   "spec": {"replicas": 1}}),
        )
        .unwrap();
    });
    let placed = format!("{PREFIX}/config/{NS}/web.yaml");
    m.wait("alice's ConfigMap at its byType path", || m.remote_has(&placed));
    m.wait("alice's Deployment at the default path", || {
        m.remote_has(&format!("{PREFIX}/apps/v1/deployments/{NS}/api.yaml"))
    });
    assert!(!m.remote_has(&cm_path("web")));
    // Edited where placement put it.
    m.act("bob", true, |s| {
        s.patch("configmaps", NS, "web", &json!({"data": {"k": "2"}}), false).unwrap();
    });
    m.wait("bob's update", || m.authors(&placed).len() == 2);
    drop(m);

    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::new();
    store.load_crd_schemas(&testkit::fixtures::gitops_reverser_crds()).unwrap();
    let setup = Setup::new(&dir.path().join("remote.git"));
    let mut target = setup.target;
    target["spec"]["placement"] = json!({"default": "{namespace}/{nmae}.yaml"});
    store.seed_object(setup.provider).unwrap();
    store.seed_object(target).unwrap();
    let api = fakeapi::spawn(store).unwrap();
    let kc = api.write_kubeconfig(&dir.path().join("kubeconfig"), NS).unwrap();
    let out = Command::new(sidecar::binary())
        .args(["serve", "--audit-listen", "off", "--git-target", "shop/lab", "--kubeconfig"])
        .arg(&kc)
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port().unwrap())])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("GitTarget shop/lab") && stderr.contains("spec.placement default") && stderr.contains("{nmae}"),
        "{stderr}"
    );
}

/// gitops-reverser's configured-author mode (`--author-attribution=false`,
/// cmd/main.go:517-520 at f0f7b42): every commit is authored by the
/// configured committer, nothing waits the grace (ten minutes here: the
/// commit must land inside the 30 s wait), and no audit receiver listens.
#[test]
fn with_attribution_off_the_committer_authors_every_commit_and_nothing_waits_the_grace() {
    let m = Mirror::start_with(|_| {}, &["--author-attribution=false", "--author-attribution-grace", "10m"], &[]);
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", m.sidecar.audit_port)).is_err(),
        "no audit receiver runs with attribution off"
    );
    m.act("alice", false, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's create, without waiting the 10 m grace", || m.remote_has(&cm_path("web")));
    m.act("bob", false, |s| {
        s.patch("configmaps", NS, "web", &json!({"data": {"k": "2"}}), false).unwrap();
    });
    m.wait("bob's update", || m.authors(&cm_path("web")).len() == 2);
    let log = git(&m.remote, &["log", "--format=%an <%ae>|%cn <%ce>", "main", "--", &cm_path("web")]);
    assert!(log.lines().all(|l| l == "Lab Mirror <mirror@lab.invalid>|Lab Mirror <mirror@lab.invalid>"), "{log}");
    let body = git(&m.remote, &["log", "-1", "--format=%B", "main", "--", &cm_path("web")]);
    assert!(body.contains("Reverser-Tier: configured") && !body.contains("Reverser-Actor"), "{body}");
}

#[test]
fn a_watchrule_reading_another_namespace_is_mirrored_only_once_the_clusterprovider_delegates_it() {
    // gitops-reverser's source-namespace gate (internal/authz/source_namespace.go:389-398,
    // clusterprovider_types.go:95-107): a tenant's GitTarget admitting a
    // foreign namespace is not enough; its ClusterProvider must admit the
    // target's namespace and set allowSourceNamespaceOverride.
    let m = Mirror::start(|s| {
        s.target["spec"]["allowedSourceNamespaces"] = json!({"names": [NS, "vault"]});
        s.seed.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "vault"}}));
        let mut foreign = configmap("foreign", "1");
        foreign["metadata"]["namespace"] = json!("vault");
        s.seed.push(foreign);
    });
    let k = testkit::kubectl::Kubectl::new(&[]).kubeconfig(&m.kubeconfig);
    let apply = |manifest: Value| {
        let out = k.run_with_stdin(&["apply", "--validate=false", "-f", "-"], &manifest.to_string());
        assert!(out.status.success(), "kubectl apply: {}", String::from_utf8_lossy(&out.stderr));
    };
    let foreign = format!("{PREFIX}/vault/configmaps/foreign.yaml");
    let marker = |name: &str| {
        m.act("alice", true, |s| {
            s.create("configmaps", NS, configmap(name, "1")).unwrap();
        });
        m.wait(name, || m.remote_has(&cm_path(name)));
    };
    apply(json!({"apiVersion": "configbutler.ai/v1alpha3", "kind": "WatchRule",
        "metadata": {"name": "vault-rules", "namespace": NS},
        "spec": {"targetRef": {"name": "lab"}, "rules": [{"resources": ["configmaps"], "sourceNamespace": "vault"}]}}));
    m.wait("the refusal without a ClusterProvider", || {
        m.watcher_log().contains(
            "WatchRule shop/vault-rules is not watched at all (SourceNamespaceAuthorized SourceNamespaceNotAllowed)",
        ) && m.watcher_log().contains("ClusterProvider \"default\" does not exist")
    });
    // The rule's own namespace is still mirrored; the foreign one is not.
    marker("before");
    assert!(!m.remote_has(&foreign), "mirrored with no ClusterProvider");
    assert_eq!(m.watcher_metric("gitopsreverser_mirror_rules_refused"), 1);

    // A provider that admits the target but does not delegate: still refused.
    let mut provider = json!({"apiVersion": "configbutler.ai/v1alpha3", "kind": "ClusterProvider",
        "metadata": {"name": "default"}, "spec": {"allowedNamespaces": {"names": [NS]}}});
    apply(provider.clone());
    m.wait("the refusal naming the override", || {
        m.watcher_log().contains("does not set spec.allowSourceNamespaceOverride")
    });
    marker("undelegated");
    assert!(!m.remote_has(&foreign), "mirrored without allowSourceNamespaceOverride");
    // Told once per refusal, not on every rescan.
    assert_eq!(m.watcher_log().matches("does not set spec.allowSourceNamespaceOverride").count(), 1);
    // And in the rule's status, as the reference writes it
    // (watchrule_source_namespace.go:169-185): refused, stalled, its reason.
    let condition = |ty: &str, field: &str| {
        let path = format!("jsonpath={{.status.conditions[?(@.type==\"{ty}\")].{field}}}");
        let out = k.run(&["get", "watchrule/vault-rules", "-n", NS, "-o", &path]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    m.wait("the refusal in the rule's status", || {
        condition("SourceNamespaceAuthorized", "reason") == "SourceNamespaceNotAllowed"
            && condition("SourceNamespaceAuthorized", "message").contains("allowSourceNamespaceOverride")
    });
    assert_eq!(condition("SourceNamespaceAuthorized", "status"), "False");
    assert_eq!(condition("Ready", "status"), "False");
    assert_eq!(condition("Stalled", "status"), "True");

    provider["spec"]["allowSourceNamespaceOverride"] = json!(true);
    apply(provider);
    m.wait("the foreign namespace mirrored", || m.remote_has(&foreign));
    assert_eq!(m.watcher_metric("gitopsreverser_mirror_rules_refused"), 0);
    let out = k.run(&["wait", "--for=condition=Ready", "watchrule/vault-rules", "-n", NS, "--timeout=30s"]);
    assert!(out.status.success(), "kubectl wait: {}\n{}", String::from_utf8_lossy(&out.stderr), m.watcher_log());
    assert_eq!(condition("SourceNamespaceAuthorized", "status"), "True");
}

/// Issue 31: a first start on a populated cluster waited one grace per
/// type's reconcile for facts of writes made long before (100 types, 5
/// minutes of waiting at the default 3 s). A relisted object whose
/// managedFields say it was written long ago waits at most a grace after
/// that write, here none: with a 10-minute grace, its document lands at
/// once (the wait below gives up after 30 s). One written just now still
/// waits for its fact, and names its author when the fact comes.
#[test]
fn a_first_start_on_objects_written_long_ago_waits_no_grace_for_their_facts() {
    let written = |time: &str| {
        json!([{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "time": time,
                "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}}])
    };
    let mut m = Mirror::start_held(
        |s| {
            let mut old = configmap("old", "1");
            old["metadata"]["managedFields"] = written("2026-01-01T00:00:00Z");
            s.seed = vec![old];
        },
        &["--author-attribution-grace", "10m"],
    );
    m.spawn_watcher(&[]);
    m.wait("the old object's document", || m.remote_has(&cm_path("old")));
    assert_eq!(m.authors(&cm_path("old")), [UNRESOLVED]);
    // Changed while the watcher is down, by alice, audited: the relist
    // finds her fact (written now, so it may wait for it).
    m.stop_watcher();
    let now = runtime::status::now();
    m.act("alice", true, |s| {
        let mut cm = configmap("old", "2");
        cm["metadata"]["managedFields"] = written(&now);
        s.replace("configmaps", NS, "old", cm, false).unwrap();
    });
    m.spawn_watcher(&[]);
    m.wait("alice's change", || m.authors(&cm_path("old")).first().map(String::as_str) == Some("alice"));
}
