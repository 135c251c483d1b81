//! The GitProvider's Secrets read under gitops-reverser's key names
//! (internal/git/credentials.go:145-215, :288; internal/git/signing.go:25-29)
//! through the real `reverser-sidecar` binaries: a `bearerToken` sent as
//! `Authorization: Bearer`, basic auth with an empty username, an Argo CD
//! `sshPrivateKey` trusted through a knownHostsRef's hashed
//! `ssh_known_hosts`, an SSH key decrypted with `ssh-password`, a signing key
//! decrypted with `passphrase`, and a `signing.key` that `generateWhenMissing`
//! leaves alone. Every key name's selection is unit-tested in
//! `rules::mirror::credentials`.

use std::process::{Command, Stdio};

use serde_json::json;
use testkit::mirror::{Mirror, NS, cm_path, configmap, git};

fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn authors_on(bare: &std::path::Path) -> String {
    let out =
        Command::new("git").arg("-C").arg(bare).args(["log", "--format=%an", "main"]).stderr(Stdio::null()).output();
    String::from_utf8_lossy(&out.unwrap().stdout).trim().to_owned()
}

fn served_bare(root: &std::path::Path) -> std::path::PathBuf {
    let bare = root.join("history.git");
    std::fs::create_dir_all(&bare).unwrap();
    git(&bare, &["init", "--quiet", "--bare", "--initial-branch=main"]);
    git(&bare, &["config", "http.receivepack", "true"]);
    bare
}

fn credentials_secret(data: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "lab-git-credentials", "namespace": NS}, "data": data})
}

#[test]
fn a_bearer_token_and_basic_auth_with_an_empty_username_reach_an_https_remote() {
    // bearerToken: only `Authorization: Bearer tok` is accepted.
    let served = tempfile::tempdir().unwrap();
    let bare = served_bare(served.path());
    let server = testkit::git_http::GitHttpServer::start_bearer(served.path(), "tok");
    let url = format!("{}/history.git", server.url);
    let m = Mirror::start(|s| {
        s.provider["spec"]["url"] = json!(url);
        s.provider["spec"]["secretRef"] = json!({"name": "lab-git-credentials"});
        s.rules.push(credentials_secret(json!({"bearerToken": b64("tok")})));
    });
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's create pushed with the bearer token", || authors_on(&bare) == "alice");
    assert!(!m.watcher_log().contains("tok\""), "the token leaked");
    drop(m);
    drop(server);

    // password alone: basic auth with an empty username (Azure DevOps' PATs).
    let served = tempfile::tempdir().unwrap();
    let bare = served_bare(served.path());
    let server = testkit::git_http::GitHttpServer::start(served.path(), "", "pat");
    let url = format!("{}/history.git", server.url);
    let m = Mirror::start(|s| {
        s.provider["spec"]["url"] = json!(url);
        s.provider["spec"]["secretRef"] = json!({"name": "lab-git-credentials"});
        s.rules.push(credentials_secret(json!({"password": b64("pat")})));
    });
    m.act("bob", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("bob's create pushed with an empty username", || authors_on(&bare) == "bob");
}

#[test]
fn an_argo_ssh_key_is_trusted_through_hashed_ssh_known_hosts_of_the_ref() {
    let server = testkit::ssh_git::SshGitServer::start().expect("sshd (openssh-server) must be installed");
    let bare = server.dir().join("history.git");
    std::fs::create_dir_all(&bare).unwrap();
    git(&bare, &["init", "--quiet", "--bare", "--initial-branch=main"]);
    // Hashed as `ssh-keygen -H` writes it, under Argo CD's key name.
    let tmp = tempfile::tempdir().unwrap();
    let known = tmp.path().join("known_hosts");
    std::fs::write(&known, server.known_hosts()).unwrap();
    let hashed = Command::new("ssh-keygen").arg("-H").arg("-f").arg(&known).output().unwrap();
    assert!(hashed.status.success(), "{}", String::from_utf8_lossy(&hashed.stderr));
    let hashed = std::fs::read_to_string(&known).unwrap();
    assert!(hashed.starts_with("|1|") && !hashed.contains("127.0.0.1"), "{hashed}");
    let m = Mirror::start(|s| {
        s.provider["spec"]["url"] = json!(server.url(&bare));
        s.provider["spec"]["secretRef"] = json!({"name": "lab-git-ssh"});
        s.provider["spec"]["knownHostsRef"] = json!({"name": "lab-known-hosts"});
        s.rules
            .push(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "lab-git-ssh", "namespace": NS},
            "data": {"sshPrivateKey": b64(&server.client_key)}}));
        s.rules.push(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lab-known-hosts", "namespace": NS},
            "data": {"ssh_known_hosts": hashed}}),
        );
    });
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's create pushed over SSH", || authors_on(&bare).lines().any(|a| a == "alice"));
}

#[test]
fn an_ssh_key_with_its_ssh_password_pushes() {
    let server = testkit::ssh_git::SshGitServer::start().expect("sshd (openssh-server) must be installed");
    let bare = server.dir().join("history.git");
    std::fs::create_dir_all(&bare).unwrap();
    git(&bare, &["init", "--quiet", "--bare", "--initial-branch=main"]);
    // The server's client key, passphrase-protected by ssh-keygen.
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("id");
    std::fs::write(&key, &server.client_key).unwrap();
    let mut perms = std::fs::metadata(&key).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o600);
    std::fs::set_permissions(&key, perms).unwrap();
    let out = Command::new("ssh-keygen").args(["-q", "-p", "-N", "s3cret pass", "-f"]).arg(&key).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let encrypted = std::fs::read_to_string(&key).unwrap();
    assert_ne!(encrypted, server.client_key);
    let m = Mirror::start(|s| {
        s.provider["spec"]["url"] = json!(server.url(&bare));
        s.provider["spec"]["secretRef"] = json!({"name": "lab-git-ssh"});
        s.rules.push(
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "lab-git-ssh", "namespace": NS},
            "data": {"ssh-privatekey": b64(&encrypted), "ssh-password": b64("s3cret pass"),
                     "known_hosts": b64(&server.known_hosts())}}),
        );
    });
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's create pushed with the decrypted key", || authors_on(&bare).lines().any(|a| a == "alice"));
}

/// An OpenSSH ed25519 key from the real ssh-keygen: (private, public).
fn ssh_keygen(dir: &std::path::Path, passphrase: &str) -> (String, String) {
    let key = dir.join(format!("signing-{}", passphrase.len()));
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", passphrase, "-C", "existing", "-f"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(made.status.success());
    (std::fs::read_to_string(&key).unwrap(), std::fs::read_to_string(key.with_extension("pub")).unwrap())
}

#[test]
fn a_passphrase_protected_signing_key_signs_with_its_passphrase() {
    let tmp = tempfile::tempdir().unwrap();
    let (private, public) = ssh_keygen(tmp.path(), "correct horse");
    let m = Mirror::start(|s| {
        s.provider["spec"]["commit"]["signing"] = json!({"secretRef": {"name": "lab-signing"}});
        s.rules
            .push(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "lab-signing", "namespace": NS},
            "data": {"signing.key": b64(&private), "passphrase": b64("correct horse")}}));
    });
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's create", || m.remote_has(&cm_path("web")));
    m.verify_head(&public).expect("a good signature");
}

#[test]
fn generate_when_missing_never_adds_a_key_to_a_secret_holding_signing_key() {
    let tmp = tempfile::tempdir().unwrap();
    let (private, public) = ssh_keygen(tmp.path(), "");
    let m = Mirror::start(|s| {
        s.provider["spec"]["commit"]["signing"] =
            json!({"secretRef": {"name": "lab-signing"}, "generateWhenMissing": true});
        s.rules
            .push(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "lab-signing", "namespace": NS},
            "data": {"signing.key": b64(&private), "signing.pub": b64(&public)}}));
    });
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "1")).unwrap();
    });
    m.wait("alice's create", || m.remote_has(&cm_path("web")));
    let secret = m.api.store.lock().unwrap().get("secrets", NS, "lab-signing").unwrap();
    let keys: Vec<&String> = secret["data"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["signing.key", "signing.pub"], "a key was added");
    // The commit is signed by the existing key.
    m.verify_head(&public).expect("a good signature");
}
