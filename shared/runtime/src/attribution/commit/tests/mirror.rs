//! The writer as the mirror configures it: under a GitTarget's path, titled
//! by the GitProvider's templates, one commit per event for a 0s window,
//! Secrets never in clear text, signed commits `git verify-commit` accepts,
//! and the documents a reconcile compares.

use std::sync::Arc;

use rules::mirror::config::MessageSpec;
use rules::mirror::message::{CommitKind, Messages};
use rules::mirror::reconcile::Doc;
use rules::mirror::watch_rules::WatchScope;

use super::*;
use crate::attribution::commit::signing::{SshSigner, generate_ed25519_key};

fn mirror_writer(root: &Path, remote: &Path, messages: Option<Messages>, signer: Option<Arc<SshSigner>>) -> GitWriter {
    GitWriter::open(WriterConfig {
        remote: Some(RemoteConfig::new(format!("file://{}", remote.display()))),
        prefix: "clusters/prod".into(),
        messages,
        signer,
        ..WriterConfig::new(root.join("clone"), "main", Identity::new(COMMITTER.0, COMMITTER.1))
    })
    .unwrap()
}

fn secret(ns: &str, name: &str) -> Change {
    Change {
        object: ObjectKey { resource: "secrets".into(), ..cm_key(ns, name) },
        action: Action::Write(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": ns}, "data": {"password": "aHVudGVyMg=="}})),
        author: user("alice"),
        tier: Tier::Exact,
        audit_id: None,
        observed_at: at(0),
    }
}

#[test]
fn documents_go_under_the_target_path_titled_by_the_templates() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let spec = MessageSpec {
        group_template: Some("{{.Author}} changed {{.Count}} in {{.GitTarget}}".into()),
        ..MessageSpec::default()
    };
    let mut w = mirror_writer(tmp.path(), &remote, Some(Messages::new(&spec, "prod").unwrap()), None);
    w.commit(&[
        write(user("alice"), cm("shop", "web", "1"), "a-1", 0),
        write(user("alice"), cm("shop", "db", "1"), "a-2", 1),
    ])
    .unwrap();
    assert_eq!(
        lines(&git_cli(&remote, &["ls-tree", "-r", "--name-only", "main"])),
        ["clusters/prod/shop/configmaps/db.yaml", "clusters/prod/shop/configmaps/web.yaml"]
    );
    let message = git_cli(&remote, &["log", "-1", "--format=%B", "main"]);
    assert!(message.starts_with("alice changed 2 in prod\n\n"), "{message}");
    assert!(message.contains("Reverser-Actor: alice") && message.contains("Reverser-Audit-ID: a-2"), "{message}");

    // A 0s window: one commit per change, titled by eventTemplate.
    let out = w
        .commit_as(
            &[
                write(user("bob"), cm("shop", "web", "2"), "b-1", 2),
                write(user("bob"), cm("shop", "db", "2"), "b-2", 3),
            ],
            &CommitKind::PerEvent,
        )
        .unwrap();
    assert_eq!(out.commits.len(), 2, "one commit per event, though one author");
    assert_eq!(
        lines(&git_cli(&remote, &["log", "-2", "--format=%s", "main"])),
        ["[UPDATE] v1/configmaps/db", "[UPDATE] v1/configmaps/web"]
    );
}

#[test]
fn secrets_are_never_written_and_are_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let metrics = Arc::new(crate::metrics::Metrics::new());
    let mut w = mirror_writer(tmp.path(), &remote, None, None).with_metrics(metrics.clone());
    let out =
        w.commit(&[secret("shop", "db-password"), write(user("alice"), cm("shop", "web", "1"), "a-1", 0)]).unwrap();
    assert_eq!((out.sensitive_skipped, out.commits.len()), (1, 1));
    let tree = git_cli(&remote, &["ls-tree", "-r", "--name-only", "main"]);
    assert!(!tree.contains("secrets"), "{tree}");
    let everything = git_cli(&remote, &["log", "-p", "--all"]);
    assert!(!everything.contains("aHVudGVyMg=="), "the secret's data reached Git");
    assert!(metrics.render().contains("gitopsreverser_mirror_sensitive_skipped_total 1"), "{}", metrics.render());
}

#[test]
fn signed_commits_verify_with_git_and_survive_a_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let pem = generate_ed25519_key("mirror").unwrap();
    let signer = Arc::new(SshSigner::from_openssh(&pem).unwrap());
    let allowed = tmp.path().join("allowed_signers");
    std::fs::write(&allowed, format!("{} {}\n", COMMITTER.1, signer.public_key_line().unwrap())).unwrap();
    let mut w = mirror_writer(tmp.path(), &remote, None, Some(signer));
    // Committed, not pushed; another writer pushes meanwhile, so the next
    // push replays ours on top of theirs, and the replay is signed too.
    w.commit_local(&[write(user("alice"), cm("shop", "web", "1"), "a-1", 0)]).unwrap();
    let mut other = writer(tmp.path(), "other", Some(&remote));
    other.commit(&[write(user("carol"), cm("ops", "x", "1"), "c-1", 1)]).unwrap();
    w.commit(&[write(user("bob"), cm("shop", "web", "2"), "b-1", 2)]).unwrap();
    assert_eq!(
        lines(&git_cli(&remote, &["log", "--format=%an", "main"])),
        ["bob", "alice", "carol"],
        "ours replayed on top of carol's"
    );
    let verify = |rev: &str| {
        Command::new("git")
            .arg("-C")
            .arg(&remote)
            .args(["-c", "gpg.format=ssh", "-c"])
            .arg(format!("gpg.ssh.allowedSignersFile={}", allowed.display()))
            .args(["verify-commit", rev])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git runs")
    };
    for rev in ["main", "main~1"] {
        let ok = verify(rev);
        assert!(ok.status.success(), "{rev}: {}", String::from_utf8_lossy(&ok.stderr));
        assert!(String::from_utf8_lossy(&ok.stderr).contains("Good \"git\" signature"));
    }
    // The unsigned writer's commit does not verify: the check can fail.
    let carol = git_cli(&remote, &["log", "--format=%H", "--author=carol", "main"]);
    assert!(!verify(carol.trim()).status.success());
}

#[test]
fn the_documents_a_reconcile_compares_are_found_by_identity_and_digested_by_content() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let mut w = mirror_writer(tmp.path(), &remote, None, None);
    w.commit(&[write(None, cm("shop", "web", "1"), "a-1", 0), write(None, cm("ops", "x", "1"), "a-2", 0)]).unwrap();
    let shop = [WatchScope::Namespace("shop".into())];
    let held = w.documents_of_type("", "configmaps", Some("ConfigMap"), &shop).unwrap();
    let live = w.document(&cm_key("shop", "web"), &cm("shop", "web", "1")).unwrap();
    assert_eq!(held, vec![live.clone()], "what was written digests the same as the live object");
    let changed = w.document(&cm_key("shop", "web"), &cm("shop", "web", "2")).unwrap();
    assert_ne!(changed.blob, live.blob);
    assert_eq!(changed.path, "shop/web");
    // Without a kind named, the plural of the documents' kind is matched.
    let everything = w.documents_of_type("", "configmaps", None, &[]).unwrap();
    assert_eq!(everything.iter().map(|d: &Doc| d.path.as_str()).collect::<Vec<_>>(), ["ops/x", "shop/web"]);
    assert!(w.documents_of_type("", "secrets", None, &[]).unwrap().is_empty());
}
