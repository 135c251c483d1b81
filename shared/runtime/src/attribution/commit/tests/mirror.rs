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

/// Given the live documents, the reconcile's read skips the files that are
/// exactly a live document; its answer is the same as reading every file:
/// for the writer's own files, a hand-formatted one, a file of two
/// documents, and a changed object.
#[test]
fn documents_read_beside_the_live_ones_are_the_documents_read_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let doc = |name: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: shop\ndata: {{key: '1'}}\n")
    };
    prefill(
        tmp.path(),
        &remote,
        &[
            ("clusters/prod/shop/hand.yaml", &format!("# kept by hand\n{}", doc("hand"))),
            ("clusters/prod/shop/both.yaml", &format!("{}---\n{}", doc("a"), doc("b"))),
        ],
    );
    let mut w = mirror_writer(tmp.path(), &remote, None, None);
    w.commit(&[write(None, cm("shop", "web", "1"), "a-1", 0)]).unwrap();
    let sorted = |mut d: Vec<Doc>| {
        d.sort_by(|x, y| x.path.cmp(&y.path));
        d
    };
    let alone = sorted(w.documents_of_type("", "configmaps", Some("ConfigMap"), &[]).unwrap());
    assert_eq!(
        alone.iter().map(|d| d.path.as_str()).collect::<Vec<_>>(),
        ["shop/a", "shop/b", "shop/hand", "shop/web"]
    );
    for web in ["1", "2"] {
        let live: Vec<Doc> = ["a", "b", "hand", "web"]
            .iter()
            .map(|n| w.document(&cm_key("shop", n), &cm("shop", n, if *n == "web" { web } else { "1" })).unwrap())
            .collect();
        let beside = sorted(w.documents_of_type_beside("", "configmaps", Some("ConfigMap"), &[], &live).unwrap());
        assert_eq!(beside, alone, "live web {web}");
    }
    // Both sides at once: an object the tree holds no document of is not
    // rendered (its digest is left empty: it is written whatever it is).
    let objects: Vec<_> = ["web", "new"].iter().map(|n| (cm_key("shop", n), cm("shop", n, "1"))).collect();
    let (tree, live) = w.reconcile_documents("", "configmaps", Some("ConfigMap"), &[], &objects).unwrap();
    assert_eq!(sorted(tree), alone);
    assert_eq!(live[0], w.document(&objects[0].0, &objects[0].1).unwrap());
    assert_eq!((live[1].path.as_str(), live[1].blob.as_str()), ("shop/new", ""));
    let plan = rules::mirror::reconcile::plan(&live, &alone, false);
    assert_eq!((plan.write, plan.unchanged), (vec![1], 1), "web unchanged, new written");
    // An object with a uid and resourceVersion is digested once per
    // version: the same version is taken as remembered (here, on purpose,
    // with other content), a new one is rendered again.
    let versioned = |data: &str, rv: &str| {
        let mut o = cm("shop", "web", data);
        o["metadata"]["uid"] = serde_json::json!("0f8fad5b-d9cb-469f-a165-70867728950e");
        o["metadata"]["resourceVersion"] = serde_json::json!(rv);
        vec![(cm_key("shop", "web"), o)]
    };
    let mut digest = |objects: &[(ObjectKey, serde_json::Value)]| {
        w.reconcile_documents("", "configmaps", Some("ConfigMap"), &[], objects).unwrap().1[0].blob.clone()
    };
    let first = digest(&versioned("1", "7"));
    assert_eq!(first, live[0].blob);
    assert_eq!(digest(&versioned("2", "7")), first, "remembered for resourceVersion 7");
    assert_ne!(digest(&versioned("2", "8")), first, "a new resourceVersion is rendered");
}

/// Commits `files` to the remote's `main` with the git CLI, as another tool.
fn prefill(root: &Path, remote: &Path, files: &[(&str, &str)]) {
    let work = root.join("prefill");
    git_cli(root, &["clone", "--quiet", &remote.display().to_string(), &work.display().to_string()]);
    for (path, content) in files {
        let file = work.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, content).unwrap();
    }
    git_cli(&work, &["add", "--all"]);
    git_cli(&work, &["-c", "user.name=other", "-c", "user.email=o@x.invalid", "commit", "--quiet", "-m", "filled"]);
    git_cli(&work, &["push", "--quiet", "origin", "HEAD:main"]);
}

#[test]
fn ignored_files_are_never_read_nor_rewritten() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let web = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: shop\ndata:\n  key: old\n";
    prefill(
        tmp.path(),
        &remote,
        &[
            ("clusters/prod/.gittargetignore", "# passengers\nkept/\nscripts/\n"),
            ("clusters/prod/kept/web.yaml", web),
            ("clusters/prod/kept/broken.yaml", "kind: [\n"),
            ("clusters/prod/scripts/deploy.sh", "#!/bin/sh\n"),
            ("clusters/prod/LICENSE", "MIT\n"),
            ("clusters/prod/docs/how.md", "# how\n"),
        ],
    );
    let mut w = mirror_writer(tmp.path(), &remote, None, None);
    let out = w.commit(&[write(user("alice"), cm("shop", "web", "1"), "a-1", 0)]).unwrap();
    assert_eq!(out.unparsable, 0, "an ignored file is never read");
    // The ignored copy is not the object's document: a new one is written.
    assert_eq!(git_cli(&remote, &["show", "main:clusters/prod/kept/web.yaml"]), web);
    assert!(git_cli(&remote, &["show", "main:clusters/prod/shop/configmaps/web.yaml"]).contains("key: '1'"));
    // A placement into an ignored path refuses the whole window (ref:
    // ignoreShadowPrecondition), naming the pattern: nothing is committed.
    let before = git_cli(&remote, &["rev-parse", "main"]);
    let mut placed = mirror_writer(tmp.path().join("b").as_path(), &remote, None, None);
    placed.config.placement.default = Some("kept/{name}.yaml".into());
    let refused = placed
        .commit(&[
            write(user("bob"), cm("shop", "web", "2"), "b-0", 1),
            write(user("bob"), cm("shop", "other", "1"), "b-1", 1),
        ])
        .unwrap_err();
    let GitError::GitPathRefused(r) = refused else { panic!("{refused}") };
    assert_eq!(r.reason, "IgnoreShadowsManagedPath");
    assert!(
        r.to_string().contains("pattern \"kept/\" shadows the managed write path clusters/prod/kept/other.yaml"),
        "{r}"
    );
    assert_eq!(git_cli(&remote, &["rev-parse", "main"]), before, "nothing pushed, not even bob's edit of web");
}

/// The acceptance gate through real Git trees (ref: acceptance_test.go,
/// gittargetignore_test.go): a foreign file, a symlink, a standalone
/// non-manifest and a cross-file duplicate each refuse the folder; nothing
/// is committed until it is fixed, and then the held window lands.
#[test]
fn a_folder_holding_what_the_mirror_cannot_manage_refuses_every_window_until_fixed() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let x = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: ops\n";
    prefill(
        tmp.path(),
        &remote,
        &[
            ("clusters/prod/deploy.sh", "#!/bin/sh\n"),
            ("clusters/prod/values.yaml", "replicas: 3\n"),
            ("clusters/prod/a/x.yaml", x),
            ("clusters/prod/b/x.yaml", x),
            ("clusters/prod/README.md", "# ours\n"),
            ("elsewhere/notes.txt", "outside spec.path: not ours to judge\n"),
        ],
    );
    let work = tmp.path().join("prefill");
    std::os::unix::fs::symlink("/etc/passwd", work.join("clusters/prod/link.yaml")).unwrap();
    git_cli(&work, &["add", "--all"]);
    git_cli(&work, &["-c", "user.name=o", "-c", "user.email=o@x.invalid", "commit", "--quiet", "-m", "link"]);
    git_cli(&work, &["push", "--quiet", "origin", "HEAD:main"]);
    let before = git_cli(&remote, &["rev-parse", "main"]);

    let mut w = mirror_writer(tmp.path(), &remote, None, None);
    let change = [write(user("alice"), cm("shop", "web", "1"), "a-1", 0)];
    let refused = w.commit(&change).unwrap_err();
    let GitError::GitPathRefused(r) = refused else { panic!("{refused}") };
    assert_eq!(r.reason, "UnsupportedContent");
    let found: Vec<(&str, &str)> = r.issues.iter().map(|i| (i.path.as_str(), i.kind.as_str())).collect();
    assert_eq!(
        found,
        [
            ("clusters/prod/b/x.yaml", "duplicate"),
            ("clusters/prod/deploy.sh", "foreign-file"),
            ("clusters/prod/link.yaml", "foreign-symlink"),
            ("clusters/prod/values.yaml", "non-krm-yaml"),
        ]
    );
    assert_eq!(
        r.to_string(),
        "Git path refused at clusters/prod/b/x.yaml: duplicate manifest identity ConfigMap/ops/x at \
         clusters/prod/b/x.yaml#0; first occurrence at clusters/prod/a/x.yaml#0 (and 3 more issue(s))"
    );
    assert_eq!(git_cli(&remote, &["rev-parse", "main"]), before, "nothing committed");

    // Someone cleans the folder; the same window then lands as alice's.
    git_cli(&work, &["rm", "--quiet", "clusters/prod/deploy.sh", "clusters/prod/b/x.yaml", "clusters/prod/link.yaml"]);
    std::fs::write(work.join("clusters/prod/.gittargetignore"), "values.yaml\n").unwrap();
    git_cli(&work, &["add", "--all"]);
    git_cli(&work, &["-c", "user.name=o", "-c", "user.email=o@x.invalid", "commit", "--quiet", "-m", "clean"]);
    git_cli(&work, &["push", "--quiet", "origin", "HEAD:main"]);
    w.commit(&change).unwrap();
    assert_eq!(git_cli(&remote, &["log", "-1", "--format=%an", "main"]).trim(), "alice");
    assert!(git_cli(&remote, &["show", "main:clusters/prod/shop/configmaps/web.yaml"]).contains("key: '1'"));
}

/// Stands in for the SOPS encryptor (written elsewhere): the identity in
/// clear, the content only as its digest, and the same bytes back for the
/// same plaintext, as `Encryptor::seal` promises.
#[derive(Debug)]
struct DigestSeal;

impl super::super::encryption::Encryptor for DigestSeal {
    fn seal(
        &self,
        _path: &str,
        plaintext: &[u8],
        existing: Option<&[u8]>,
    ) -> Result<Vec<u8>, super::super::encryption::EncryptionError> {
        let v: Value = serde_norway::from_slice(plaintext).unwrap();
        let digest = git2::Oid::hash_object(git2::ObjectType::Blob, plaintext).unwrap();
        let sealed = format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {}\n  namespace: {}\nsops:\n  digest: {digest}\n",
            v["metadata"]["name"].as_str().unwrap(),
            v["metadata"]["namespace"].as_str().unwrap()
        );
        match existing {
            Some(e) if e == sealed.as_bytes() => Ok(e.to_vec()),
            _ => Ok(sealed.into_bytes()),
        }
    }
}

#[test]
fn a_sensitive_object_goes_through_the_encryptor_to_its_own_sops_file() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let mut w = mirror_writer(tmp.path(), &remote, None, None);
    w.config.encryption = Some(Arc::new(DigestSeal));
    let out = w.commit(&[secret("shop", "db")]).unwrap();
    assert_eq!((out.commits.len(), out.sensitive_skipped), (1, 0));
    let path = "main:clusters/prod/shop/secrets/db.sops.yaml";
    assert!(git_cli(&remote, &["show", path]).contains("digest: "));
    assert!(!git_cli(&remote, &["log", "-p", "--all"]).contains("aHVudGVyMg=="), "never in clear text");
    // The same Secret again: sealed to the same bytes, no commit.
    let out = w.commit(&[secret("shop", "db")]).unwrap();
    assert_eq!((out.commits.len(), out.unchanged), (0, 1));
    // Removed by identity.
    let gone = Change {
        action: Action::Delete,
        object: ObjectKey { resource: "secrets".into(), ..cm_key("shop", "db") },
        ..secret("shop", "db")
    };
    w.commit(&[gone]).unwrap();
    assert!(!git_cli(&remote, &["ls-tree", "-r", "--name-only", "main"]).contains("db.sops.yaml"));
}
