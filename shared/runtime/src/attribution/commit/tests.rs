//! The writer against real repositories, read back with the `git` CLI.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Value, json};

use super::*;
use rules::attribution::render::{ObjectKey, is_logically_absent, layout_path, render_manifest};
use rules::attribution::{ActorKind, Fact, Tier};

const COMMITTER: (&str, &str) = ("Reverser Mirror", "mirror@reverser.invalid");

/// Runs the `git` CLI in `dir` and returns its stdout; panics with stderr on failure.
fn git_cli(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("the git CLI is installed");
    assert!(out.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn lines(s: &str) -> Vec<String> {
    s.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect()
}

/// A bare remote made by the git CLI, with `main` as its default branch.
fn bare_remote(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    testkit::mirror::init_bare(&dir);
    dir
}

fn writer(root: &Path, clone: &str, remote: Option<&Path>) -> GitWriter {
    GitWriter::open(WriterConfig {
        remote: remote.map(|r| RemoteConfig::new(format!("file://{}", r.display()))),
        ..WriterConfig::new(root.join(clone), "main", Identity::new(COMMITTER.0, COMMITTER.1))
    })
    .unwrap()
}

fn user(name: &str) -> Option<ResolvedAuthor> {
    Some(ResolvedAuthor {
        username: name.into(),
        display_name: String::new(),
        email: String::new(),
        actor_kind: ActorKind::of(name),
    })
}

fn cm_key(ns: &str, name: &str) -> ObjectKey {
    ObjectKey {
        group: String::new(),
        version: "v1".into(),
        resource: "configmaps".into(),
        namespace: ns.into(),
        name: name.into(),
    }
}

fn cm(ns: &str, name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "uid": "u-1", "resourceVersion": "1"},
        "data": {"key": value}})
}

fn at(secs: u64) -> std::time::SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_782_388_800 + secs)
}

fn write(author: Option<ResolvedAuthor>, object: Value, audit: &str, secs: u64) -> Change {
    let ns = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    Change {
        object: cm_key(ns, name),
        action: Action::Write(object.clone()),
        tier: if author.is_some() { Tier::Exact } else { Tier::Absent },
        author,
        audit_id: Some(audit.into()),
        observed_at: at(secs),
    }
}

fn delete(author: Option<ResolvedAuthor>, key: ObjectKey, audit: &str, secs: u64) -> Change {
    Change {
        action: Action::Delete,
        object: key,
        tier: if author.is_some() { Tier::DeleteSticky } else { Tier::Absent },
        author,
        audit_id: Some(audit.into()),
        observed_at: at(secs),
    }
}

const LOG: &str = "--format=%an|%ae|%cn|%ce|%s";

/// Someone edits `path` in Git: a clone of `remote` at `work`, the file set
/// to `text`, committed and pushed.
fn edit_in_git(remote: &Path, work: &Path, path: &str, text: &str) {
    let parent = work.parent().expect("the clone goes in a directory");
    git_cli(parent, &["clone", "--quiet", &remote.display().to_string(), &work.display().to_string()]);
    std::fs::write(work.join(path), text).unwrap();
    git_cli(work, &["-c", "user.name=o", "-c", "user.email=o@x.invalid", "commit", "--quiet", "-am", "edit"]);
    git_cli(work, &["push", "--quiet", "origin", "HEAD:main"]);
}

/// A file that is exactly the document last rendered for its object is
/// replaced whole by the next version's (no parse of the old one); a file
/// someone edited in Git is edited in place, keeping their edit, and an
/// equal object is no change either way.
#[test]
fn an_unedited_document_is_replaced_whole_and_an_edited_one_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let mut w = writer(tmp.path(), "clone", Some(&remote));
    let path = "shop/configmaps/web.yaml";
    let object = |value: &str, rv: &str| {
        let mut o = cm("shop", "web", value);
        o["metadata"]["uid"] = json!("0f8fad5b-d9cb-469f-a165-70867728950e");
        o["metadata"]["resourceVersion"] = json!(rv);
        o
    };
    let doc = |value: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: shop\ndata:\n  key: '{value}'\n")
    };
    let show = || git_cli(&remote, &["show", &format!("main:{path}")]);
    w.commit(&[write(user("alice"), object("1", "1"), "a-1", 0)]).unwrap();
    let out = w.commit(&[write(user("alice"), object("2", "2"), "a-2", 1)]).unwrap();
    assert_eq!(out.commits.len(), 1);
    assert_eq!(show(), doc("2"));
    let again = w.commit(&[write(user("bob"), object("2", "3"), "b-1", 2)]).unwrap();
    assert!(again.commits.is_empty() && again.unchanged == 1, "{again:?}");

    // Someone adds a comment in Git; the next version keeps it.
    edit_in_git(&remote, &tmp.path().join("work"), path, &format!("# kept by hand\n{}", doc("2")));
    w.sync().unwrap();
    w.commit(&[write(user("carol"), object("3", "4"), "c-1", 3)]).unwrap();
    assert_eq!(show(), format!("# kept by hand\n{}", doc("3")));
    let again = w.commit(&[write(user("carol"), object("3", "5"), "c-2", 4)]).unwrap();
    assert!(again.commits.is_empty() && again.unchanged == 1, "{again:?}");
    assert_eq!(git_cli(&remote, &["fsck", "--strict", "--no-progress", "--no-dangling"]), "");
}

/// A file the writer creates is indexed by the identity its object
/// declares, not read back: the index then reads exactly as one built from
/// the committed tree, for names YAML would take for something else, a
/// cluster-scoped object, a custom resource, and an object whose metadata
/// names another namespace than its key.
#[test]
fn created_files_are_indexed_as_reading_them_back_would() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = writer(tmp.path(), "clone", None);
    let mut changes: Vec<Change> = ["1e3", "true", "null", "0x1f", "yes", "on", "007", "a.b-c", "~", "-"]
        .iter()
        .enumerate()
        .map(|(i, name)| write(user("alice"), cm("shop", name, "v"), &format!("a-{i}"), i as u64))
        .collect();
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "uid": "u-2"}});
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "shop", "uid": "u-3"}, "spec": {"size": 1}});
    let elsewhere = cm("other", "moved", "v");
    for (group, resource, namespace, object) in [
        ("", "namespaces", "", namespace),
        ("example.com", "widgets", "shop", widget),
        ("", "configmaps", "shop", elsewhere),
    ] {
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        let mut change = write(user("bob"), object, "b", 20);
        change.object = ObjectKey {
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name,
        };
        changes.push(change);
    }
    let out = w.commit_local(&changes).unwrap();
    assert!(out.rejected.is_empty(), "{:?}", out.rejected);
    let head = w.local_head().unwrap();
    let tree = w.tree_of(head).unwrap();
    let mut read_back = super::index::DocIndex::new("");
    read_back.refresh(&w.repo, &tree).unwrap();
    let (files, identities) = read_back.snapshot();
    assert_eq!(files.len(), changes.len(), "{files:?}");
    assert_eq!(w.index.snapshot(), (files, identities));
}

#[test]
fn create_update_delete_produce_the_expected_files_and_authors() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let mut w = writer(tmp.path(), "clone", Some(&remote));
    let path = "shop/configmaps/web.yaml";

    let created = w.commit(&[write(user("alice"), cm("shop", "web", "1"), "a-1", 0)]).unwrap();
    assert_eq!(created.commits.len(), 1);
    assert_eq!(created.push.as_ref().unwrap().attempts, 1);
    assert_eq!(
        git_cli(&remote, &["show", &format!("main:{path}")]),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: shop\ndata:\n  key: '1'\n"
    );

    let mut alice_full = user("oidc:alice").unwrap();
    alice_full.display_name = "Alice Example".into();
    alice_full.email = "alice@example.com".into();
    w.commit(&[write(Some(alice_full), cm("shop", "web", "2"), "a-2", 10)]).unwrap();
    assert!(git_cli(&remote, &["show", &format!("main:{path}")]).contains("key: '2'"));

    // The same bytes again (only server-owned metadata differs): no commit.
    let mut same = cm("shop", "web", "2");
    same["metadata"]["resourceVersion"] = json!("99");
    let again = w.commit(&[write(user("carol"), same, "a-3", 20)]).unwrap();
    assert!(again.commits.is_empty());
    assert_eq!(again.unchanged, 1);

    w.commit(&[delete(user("dave"), cm_key("shop", "web"), "a-4", 30)]).unwrap();
    // Deleting what is already gone: no commit.
    let gone = w.commit(&[delete(user("erin"), cm_key("shop", "web"), "a-5", 40)]).unwrap();
    assert!(gone.commits.is_empty());

    let alice_email = noreply_email("alice");
    let dave_email = noreply_email("dave");
    assert_eq!(
        lines(&git_cli(&remote, &["log", "--reverse", LOG, "main"])),
        vec![
            format!("alice|{alice_email}|{}|{}|create {path}", COMMITTER.0, COMMITTER.1),
            format!("Alice Example|alice@example.com|{}|{}|update {path}", COMMITTER.0, COMMITTER.1),
            format!("dave|{dave_email}|{}|{}|delete {path}", COMMITTER.0, COMMITTER.1),
        ]
    );
    // The author date is the observation time.
    assert_eq!(git_cli(&remote, &["log", "-1", "--format=%at", "main"]).trim(), (1_782_388_800u64 + 30).to_string());
    assert_eq!(git_cli(&remote, &["show", "--format=", "--name-status", "main"]).trim(), format!("D\t{path}"));
    // The tree is empty again: no empty directories left behind.
    assert_eq!(git_cli(&remote, &["ls-tree", "-r", "-t", "main"]), "");
    assert_eq!(git_cli(&remote, &["fsck", "--strict", "--no-progress", "--no-dangling"]), "");
}

#[test]
fn trailers_record_the_tier_and_audit_id_of_every_change() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = writer(tmp.path(), "clone", None);
    let mut second = write(user("alice"), cm("a", "two", "x"), "audit-2", 1);
    second.tier = Tier::Name;
    w.commit(&[write(user("alice"), cm("a", "one", "x"), "audit-1", 0), second]).unwrap();
    let clone = tmp.path().join("clone");
    let trailer =
        |key: &str| git_cli(&clone, &["log", "-1", &format!("--format=%(trailers:key={key},valueonly)"), "main"]);
    assert_eq!(lines(&trailer("Reverser-Tier")), ["exact", "name"]);
    assert_eq!(lines(&trailer("Reverser-Audit-ID")), ["audit-1", "audit-2"]);
    assert_eq!(lines(&trailer("Reverser-Actor")), ["alice"]);
}

#[test]
fn an_unresolved_change_carries_the_unresolved_author_and_the_configured_committer() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let mut w = writer(tmp.path(), "clone", Some(&remote));
    let mut change = write(None, cm("shop", "orphan", "v"), "", 0);
    change.audit_id = None;
    w.commit(&[change]).unwrap();
    assert_eq!(
        git_cli(
            &remote,
            &["log", "-1", "--format=%an|%ae|%cn|%ce|%(trailers:key=Reverser-Tier,valueonly,separator=%x2C)", "main"]
        )
        .trim(),
        format!("unknown (attribution unresolved)|{UNRESOLVED_AUTHOR_EMAIL}|{}|{}|absent", COMMITTER.0, COMMITTER.1)
    );
}

#[test]
fn a_window_is_one_commit_per_author_in_event_order() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = writer(tmp.path(), "clone", None);
    let out = w
        .commit(&[
            write(user("alice"), cm("a", "x", "1"), "1", 0),
            write(user("bob"), cm("a", "y", "1"), "2", 1),
            write(None, cm("a", "z", "1"), "3", 2),
            write(user("alice"), cm("b", "x", "1"), "4", 3),
            write(user("bob"), cm("a", "x", "2"), "5", 4),
            write(user("alice"), cm("a", "x", "3"), "6", 5),
        ])
        .unwrap();
    assert_eq!(out.commits.len(), 4);
    let clone = tmp.path().join("clone");
    assert_eq!(
        lines(&git_cli(&clone, &["log", "--reverse", "--format=%an", "--name-only", "main"]))
            .into_iter()
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>(),
        [
            "alice",
            "a/configmaps/x.yaml",
            "b/configmaps/x.yaml",
            "bob",
            "a/configmaps/x.yaml",
            "a/configmaps/y.yaml",
            "unknown (attribution unresolved)",
            "a/configmaps/z.yaml",
            "alice",
            "a/configmaps/x.yaml",
        ]
    );
    // a/x ends as alice last left it, and bob's commit shows bob's value.
    assert!(git_cli(&clone, &["show", "main:a/configmaps/x.yaml"]).contains("key: '3'"));
    assert!(git_cli(&clone, &["show", "main~1:a/configmaps/x.yaml"]).contains("key: '2'"));
}

#[test]
fn setting_only_deletion_timestamp_never_makes_a_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = writer(tmp.path(), "clone", None);
    w.commit(&[write(user("alice"), cm("a", "x", "1"), "1", 0)]).unwrap();
    // Even routed as a write (a router that forgot §1), the bytes are the same.
    let mut terminating = cm("a", "x", "1");
    terminating["metadata"]["deletionTimestamp"] = json!("2026-06-25T12:00:00Z");
    terminating["metadata"]["deletionGracePeriodSeconds"] = json!(0);
    let clone = tmp.path().join("clone");
    let objects = || git_cli(&clone, &["count-objects"]);
    let before = objects();
    let out = w.commit(&[write(user("bob"), terminating, "2", 1)]).unwrap();
    assert!(out.commits.is_empty());
    assert_eq!(objects(), before, "a no-op stores nothing");
    assert_eq!(git_cli(&clone, &["rev-list", "--count", "main"]).trim(), "1");
}

#[test]
fn a_bad_change_is_refused_alone_and_the_rest_of_the_window_lands() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = writer(tmp.path(), "clone", None);
    let mut bad = write(user("alice"), cm("a", "x", "1"), "1", 0);
    bad.object.name = "../../escape".into();
    let not_an_object =
        Change { action: Action::Write(json!("just a string")), ..write(user("alice"), cm("a", "y", "1"), "2", 0) };
    let good = write(user("alice"), cm("a", "z", "1"), "3", 0);
    let out = w.commit(&[bad, not_an_object, good]).unwrap();
    assert_eq!(out.rejected.iter().map(|r| r.index).collect::<Vec<_>>(), [0, 1]);
    assert!(matches!(out.rejected[0].error, GitError::Rules(rules::Error::LayoutPath { .. })));
    assert!(matches!(out.rejected[1].error, GitError::Rules(rules::Error::Render { .. })));
    let clone = tmp.path().join("clone");
    assert_eq!(git_cli(&clone, &["ls-tree", "-r", "--name-only", "main"]).trim(), "a/configmaps/z.yaml");
}

/// The corpus scenario `configmap/finalizer-delete`: a delete is accepted
/// while a finalizer holds the object, another identity clears the finalizer,
/// and the object goes. Exactly one removal commit, authored by the deleter,
/// and nothing for the finalizer's clearing.
#[test]
fn finalizer_scenario_yields_exactly_one_removal_commit_by_the_deleter() {
    let dir = testkit::fixtures::corpus_scenario("configmap/finalizer-delete");
    let yaml = |f: &str| -> Value { serde_norway::from_str(&std::fs::read_to_string(dir.join(f)).unwrap()).unwrap() };
    let modified = yaml("watch.modified.yaml");
    let deleted = yaml("watch.deleted.yaml");
    let audit_delete = yaml("audit.delete.yaml");
    let audit_patch = yaml("audit.patch.yaml");
    let expected: Value =
        serde_json::from_str(std::fs::read_to_string(dir.join("expected.jsonl")).unwrap().lines().next().unwrap())
            .unwrap();
    assert_eq!(expected["action"], "delete");

    let object = &modified["object"];
    let key = ObjectKey {
        group: String::new(),
        version: "v1".into(),
        resource: "configmaps".into(),
        namespace: object["metadata"]["namespace"].as_str().unwrap().into(),
        name: object["metadata"]["name"].as_str().unwrap().into(),
    };
    let author_of = |audit: &Value| {
        ResolvedAuthor::from_fact(&Fact {
            author: audit["user"]["username"].as_str().unwrap().into(),
            ..Default::default()
        })
    };
    let deleter = author_of(&audit_delete);
    let clearer = author_of(&audit_patch);
    assert_eq!(deleter.username, expected["author"].as_str().unwrap());

    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let mut w = writer(tmp.path(), "clone", Some(&remote));

    // Before the scenario the object exists in Git, as it was before the
    // delete (the same object, minus what the delete stamped).
    let mut before = object.clone();
    before["metadata"].as_object_mut().unwrap().retain(|k, _| !k.starts_with("deletion"));
    w.commit(&[Change {
        action: Action::Write(before.clone()),
        object: key.clone(),
        author: user("e2e.test"),
        tier: Tier::Exact,
        audit_id: None,
        observed_at: at(0),
    }])
    .unwrap();
    let path = layout_path(&key).unwrap();
    assert_eq!(
        git_cli(&remote, &["show", &format!("main:{path}")]).into_bytes(),
        render_manifest(&key, &before).unwrap()
    );

    // Route each watch event as §1 does: deletionTimestamp set, or DELETED,
    // is a Delete.
    let route = |event: &Value| {
        if event["type"] == "DELETED" || is_logically_absent(&event["object"]) {
            Action::Delete
        } else {
            Action::Write(event["object"].clone())
        }
    };
    let tier: Tier = serde_json::from_value(expected["tier"].clone()).unwrap();
    // The MODIFIED carrying deletionTimestamp: the deletion intent.
    let intent = w
        .commit(&[Change {
            action: route(&modified),
            object: key.clone(),
            author: Some(deleter.clone()),
            tier,
            audit_id: audit_delete["auditID"].as_str().map(str::to_owned),
            observed_at: at(1),
        }])
        .unwrap();
    assert_eq!(intent.commits.len(), 1);
    // The DELETED after the finalizer was cleared, however it is attributed.
    let removal = w
        .commit(&[Change {
            action: route(&deleted),
            object: key.clone(),
            author: Some(clearer),
            tier: Tier::Exact,
            audit_id: audit_patch["auditID"].as_str().map(str::to_owned),
            observed_at: at(3),
        }])
        .unwrap();
    assert!(removal.commits.is_empty(), "{removal:?}");
    assert_eq!(removal.unchanged, 1);

    let log = lines(&git_cli(&remote, &["log", "--format=%an|%ae|%cn|%s", "--diff-filter=D", "main"]));
    assert_eq!(
        log,
        [format!("{}|{}|{}|delete {path}", deleter.username, noreply_email(&deleter.username), COMMITTER.0)]
    );
    assert_eq!(git_cli(&remote, &["rev-list", "--count", "main"]).trim(), "2");
    assert_eq!(
        lines(&git_cli(
            &remote,
            &[
                "log",
                "-1",
                "--format=%(trailers:key=Reverser-Tier,valueonly)%(trailers:key=Reverser-Audit-ID,valueonly)",
                "main"
            ]
        )),
        ["delete_sticky".to_string(), audit_delete["auditID"].as_str().unwrap().to_string()]
    );
}

#[test]
fn a_stale_writer_fetches_replays_and_lands_nothing_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let mut a = writer(tmp.path(), "clone-a", Some(&remote));
    let mut b = writer(tmp.path(), "clone-b", Some(&remote));

    a.commit(&[write(user("alice"), cm("a", "x", "1"), "1", 0)]).unwrap();
    a.commit(&[write(user("alice"), cm("a", "shared", "from-a"), "2", 1)]).unwrap();
    // b never saw a's commits (it commits without fetching): its push is
    // rejected, it fetches and replays.
    let out = b
        .commit_local(&[
            write(user("bob"), cm("b", "y", "1"), "3", 2),
            write(user("bob"), cm("a", "shared", "from-b"), "4", 3),
        ])
        .unwrap();
    assert_eq!(out.commits.len(), 1);
    let push = b.push().unwrap();
    assert_eq!(push, PushOutcome { attempts: 2, replayed: 1, dropped: 0 });

    assert_eq!(
        lines(&git_cli(&remote, &["log", "--reverse", "--format=%an|%cn", "main"])),
        [format!("alice|{}", COMMITTER.0), format!("alice|{}", COMMITTER.0), format!("bob|{}", COMMITTER.0),]
    );
    assert_eq!(
        lines(&git_cli(&remote, &["ls-tree", "-r", "--name-only", "main"])),
        ["a/configmaps/shared.yaml", "a/configmaps/x.yaml", "b/configmaps/y.yaml",]
    );
    // b's later observation wins the shared file.
    assert!(git_cli(&remote, &["show", "main:a/configmaps/shared.yaml"]).contains("from-b"));
    // a is now behind; `commit` fetches first, so deleting the file only b
    // had written still removes it.
    let out = a.commit(&[delete(user("alice"), cm_key("b", "y"), "5", 4)]).unwrap();
    assert_eq!(out.commits.len(), 1);
    assert_eq!(out.push.unwrap().attempts, 1);
    assert_eq!(git_cli(&remote, &["rev-list", "--count", "main"]).trim(), "4");
    assert_eq!(
        git_cli(&remote, &["show", "--format=%an", "--name-status", "main"]).trim(),
        "alice\n\nD\tb/configmaps/y.yaml"
    );
    assert_eq!(git_cli(&remote, &["fsck", "--strict", "--no-progress", "--no-dangling"]), "");
}

#[test]
fn a_replayed_commit_that_changes_nothing_is_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let mut a = writer(tmp.path(), "clone-a", Some(&remote));
    let mut b = writer(tmp.path(), "clone-b", Some(&remote));
    a.commit(&[write(user("alice"), cm("a", "x", "1"), "1", 0)]).unwrap();
    // b, stale, makes the very same change (another observer of one event).
    b.commit_local(&[write(user("bob"), cm("a", "x", "1"), "1", 5)]).unwrap();
    let push = b.push().unwrap();
    assert_eq!(push.dropped, 1, "{push:?}");
    assert_eq!(push.replayed, 0);
    assert_eq!(git_cli(&remote, &["rev-list", "--count", "main"]).trim(), "1");
    assert_eq!(git_cli(&remote, &["log", "--format=%an", "main"]).trim(), "alice");
}

#[test]
fn two_writers_racing_on_one_bare_remote_both_land_nothing_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let per_writer = 15;
    let start = std::sync::Arc::new(std::sync::Barrier::new(2));
    let writers: Vec<_> =
        ["a", "b"].into_iter().map(|who| (who, writer(tmp.path(), &format!("clone-{who}"), Some(&remote)))).collect();
    let handles: Vec<_> = writers
        .into_iter()
        .map(|(who, mut w)| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                let mut replayed = 0;
                for i in 0..per_writer {
                    // Commit without fetching, then push: every push made
                    // after the other writer's lands is rejected and replayed.
                    w.commit_local(&[write(user(who), cm(who, &format!("obj-{i}"), "v"), &format!("{who}-{i}"), i)])
                        .unwrap();
                    replayed += w.push().unwrap().replayed;
                }
                replayed
            })
        })
        .collect();
    let replayed: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    println!("racing writers: {replayed} commits replayed after a rejected push");
    // Both first commits sit on the empty remote: whichever pushes second
    // is rejected, so at least one replay is certain.
    assert!(replayed > 0, "the writers never raced");
    assert_eq!(git_cli(&remote, &["rev-list", "--count", "main"]).trim(), (2 * per_writer).to_string());
    let files = lines(&git_cli(&remote, &["ls-tree", "-r", "--name-only", "main"]));
    assert_eq!(files.len(), 2 * per_writer as usize);
    for who in ["a", "b"] {
        let authored = git_cli(&remote, &["log", "--format=%an", "main"]).lines().filter(|l| *l == who).count();
        assert_eq!(authored, per_writer as usize, "{who}");
    }
    assert_eq!(git_cli(&remote, &["fsck", "--strict", "--no-progress", "--no-dangling"]), "");
}

/// The git2 transport path (https/ssh remotes use it): a non-fast-forward is
/// reported as a rejection, not an error, and a fast-forward lands.
#[test]
fn transport_push_reports_a_non_fast_forward_as_a_rejection() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let url = remote.display().to_string();
    let mut a = writer(tmp.path(), "clone-a", Some(&remote));
    let mut b = writer(tmp.path(), "clone-b", Some(&remote));
    a.commit_local(&[write(user("alice"), cm("a", "x", "1"), "1", 0)]).unwrap();
    assert!(matches!(a.push_transport(&url).unwrap(), push::Attempt::Pushed));
    b.commit_local(&[write(user("bob"), cm("a", "y", "1"), "2", 0)]).unwrap();
    assert!(matches!(b.push_transport(&url).unwrap(), push::Attempt::Rejected(_)));
    assert_eq!(git_cli(&remote, &["rev-list", "--count", "main"]).trim(), "1");
}

#[test]
fn reopening_a_clone_keeps_unpushed_commits_and_pushes_them_next_time() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    {
        let mut w = writer(tmp.path(), "clone", Some(&remote));
        w.commit_local(&[write(user("alice"), cm("a", "x", "1"), "1", 0)]).unwrap();
    }
    // Meanwhile another writer pushes.
    writer(tmp.path(), "other", Some(&remote)).commit(&[write(user("bob"), cm("a", "y", "1"), "2", 0)]).unwrap();
    // Reopening fetches and replays the unpushed commit on top of bob's.
    let mut w = writer(tmp.path(), "clone", Some(&remote));
    let out = w.commit(&[write(user("alice"), cm("a", "z", "1"), "3", 1)]).unwrap();
    assert_eq!(out.push.unwrap().attempts, 1);
    assert_eq!(lines(&git_cli(&remote, &["log", "--reverse", "--format=%an", "main"])), ["bob", "alice", "alice"]);
}

#[test]
fn commits_are_counted_by_author_kind() {
    let tmp = tempfile::tempdir().unwrap();
    let metrics = std::sync::Arc::new(crate::metrics::Metrics::new());
    let mut w = writer(tmp.path(), "clone", None).with_metrics(metrics.clone());
    w.commit(&[
        write(user("alice"), cm("a", "x", "1"), "1", 0),
        write(user("system:serviceaccount:ns:sa"), cm("a", "y", "1"), "2", 0),
        write(None, cm("a", "z", "1"), "3", 0),
    ])
    .unwrap();
    let text = metrics.render();
    for kind in ["user", "serviceaccount", "none"] {
        assert!(text.contains(&format!("gitopsreverser_commits_total{{author_kind=\"{kind}\"}} 1")), "{text}");
    }
}

#[test]
fn an_invalid_branch_name_is_refused_with_a_typed_error() {
    let tmp = tempfile::tempdir().unwrap();
    let err = GitWriter::open(WriterConfig::new(tmp.path().join("clone"), "bad..name", Identity::new("c", "c@x")))
        .unwrap_err();
    assert!(err.to_string().contains("bad..name"), "{err}");
}

/// A large window is written as one pack; a long run of unpushed commits is
/// pushed as one pack. Both leave complete, valid repositories.
#[test]
fn large_windows_and_long_pushes_travel_as_packs_and_stay_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let mut w = writer(tmp.path(), "clone", Some(&remote));
    let packs = |dir: &Path| {
        std::fs::read_dir(dir.join("objects/pack"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "pack"))
            .count()
    };
    let clone = tmp.path().join("clone");
    let window: Vec<Change> = (0..super::writer::PACK_THRESHOLD + 50)
        .map(|i| write(user(["alice", "bob"][i % 2]), cm("big", &format!("o{i}"), "v"), "x", 0))
        .collect();
    let out = w.commit_local(&window).unwrap();
    assert_eq!(out.commits.len(), 2);
    assert_eq!(packs(&clone), 1);
    for i in 0..20 {
        w.commit_local(&[write(user("carol"), cm("small", &format!("s{i}"), "v"), "y", 1)]).unwrap();
    }
    assert_eq!(packs(&clone), 1, "small windows are written loose");
    // A second large window's pack holds what it added, not the whole tree
    // again: its 150 blobs, the trees they changed and its commits.
    let second: Vec<Change> = (0..super::writer::PACK_THRESHOLD + 50)
        .map(|i| write(user("erin"), cm("bigger", &format!("p{i}"), "v"), "e", 2))
        .collect();
    w.commit_local(&second).unwrap();
    assert_eq!(packs(&clone), 2);
    let newest = std::fs::read_dir(clone.join("objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "idx"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap())
        .unwrap();
    let listed = git_cli(&clone, &["verify-pack", "-v", &newest.display().to_string()]);
    let objects =
        listed.lines().filter(|l| l.contains(" blob ") || l.contains(" tree ") || l.contains(" commit ")).count();
    assert!(
        objects < 2 * (super::writer::PACK_THRESHOLD + 50),
        "the window's pack holds {objects} objects: more than it added"
    );
    assert_eq!(git_cli(&clone, &["fsck", "--strict", "--no-progress", "--no-dangling"]), "");
    let push = w.push().unwrap();
    assert_eq!(push.attempts, 1);
    assert_eq!(packs(&remote), 1);
    assert_eq!(git_cli(&remote, &["rev-list", "--count", "main"]).trim(), "23");
    assert_eq!(
        git_cli(&remote, &["ls-tree", "-r", "--name-only", "main"]).lines().count(),
        2 * (super::writer::PACK_THRESHOLD + 50) + 20
    );
    assert_eq!(git_cli(&remote, &["fsck", "--strict", "--no-progress", "--no-dangling"]), "");
    // A short push afterwards is copied loose: still one pack on the remote.
    // Only what it changed is copied (each commit beside its parent), and
    // the remote is whole: the new version of s1 is there.
    w.commit(&[delete(user("dave"), cm_key("small", "s0"), "z", 2)]).unwrap();
    w.commit(&[write(user("dave"), cm("small", "s1", "changed"), "z2", 3)]).unwrap();
    assert_eq!(packs(&remote), 1);
    let shown = git_cli(&remote, &["show", "main:small/configmaps/s1.yaml"]);
    assert!(shown.contains("changed"), "{shown}");
    assert_eq!(git_cli(&remote, &["fsck", "--strict", "--no-progress", "--no-dangling"]), "");
}

/// In a packed window the writer keeps the blobs it hashed until the
/// window's pack is installed: a later commit of the window reads back
/// what an earlier one wrote (a removal of an object the window created,
/// an in-place edit of a hand-edited file the window changed already), and
/// the clone and the remote stay whole.
#[test]
fn a_packed_window_reads_back_the_files_its_earlier_commits_wrote() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let mut w = writer(tmp.path(), "clone", Some(&remote));
    let kept = "shop/configmaps/kept.yaml";
    let doc = |value: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n  namespace: shop\ndata:\n  key: '{value}'\n"
        )
    };
    w.commit(&[write(user("alice"), cm("shop", "kept", "1"), "k", 0)]).unwrap();
    edit_in_git(&remote, &tmp.path().join("work"), kept, &format!("# kept by hand\n{}", doc("1")));
    w.sync().unwrap();

    let mut window = vec![
        write(user("alice"), cm("shop", "doomed", "1"), "a-1", 1),
        write(user("alice"), cm("shop", "kept", "2"), "a-2", 1),
    ];
    window.extend(
        (0..super::writer::PACK_THRESHOLD).map(|i| write(user("alice"), cm("fill", &format!("f{i}"), "v"), "a", 1)),
    );
    window.push(delete(user("bob"), cm_key("shop", "doomed"), "b-1", 2));
    window.push(write(user("bob"), cm("shop", "kept", "3"), "b-2", 2));
    let out = w.commit(&window).unwrap();
    assert_eq!(out.commits.len(), 2, "{out:?}");
    assert!(out.rejected.is_empty(), "{:?}", out.rejected);
    assert_eq!(git_cli(&remote, &["show", &format!("main:{kept}")]), format!("# kept by hand\n{}", doc("3")));
    let files = git_cli(&remote, &["ls-tree", "-r", "--name-only", "main"]);
    assert!(!files.contains("doomed"), "{files}");
    assert_eq!(files.lines().count(), 1 + super::writer::PACK_THRESHOLD);
    // The first commit of the window holds the file the second removed.
    let first = git_cli(&remote, &["show", "main~1:shop/configmaps/doomed.yaml"]);
    assert!(first.contains("name: doomed"), "{first}");
    for repo in [tmp.path().join("clone"), remote] {
        assert_eq!(git_cli(&repo, &["fsck", "--strict", "--no-progress", "--no-dangling"]), "");
    }
}

/// A steady stream of large windows leaves a pack each; merged in the
/// background as the tiers fill, the clone keeps few packs, and the windows
/// committed while a merge runs, the history and every file stay whole.
#[test]
fn a_stream_of_packed_windows_is_merged_into_few_packs_and_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = writer(tmp.path(), "clone", None);
    let clone = tmp.path().join("clone");
    let windows = rules::attribution::commit::repack::FAN_IN as usize + 4;
    let size = super::writer::PACK_THRESHOLD + 50;
    for n in 0..windows {
        // Half new objects, half a new version of the same ones.
        let window: Vec<Change> = (0..size)
            .map(|i| {
                let name = if i % 2 == 0 { format!("o{n}-{i}") } else { format!("shared-{i}") };
                write(user(["alice", "bob", "carol"][i % 3]), cm("steady", &name, &format!("v{n}")), "x", n as u64)
            })
            .collect();
        let out = w.commit_local(&window).unwrap();
        assert!(!out.commits.is_empty(), "window {n} committed");
    }
    w.repack.wait();
    let merged = super::packs::packs(&clone).unwrap();
    assert!(
        merged.len() < rules::attribution::commit::repack::FAN_IN as usize,
        "{} packs after {windows} packed windows",
        merged.len()
    );
    assert!(w.repack.merges() >= 1, "{} merges", w.repack.merges());
    assert_eq!(w.repack.concatenated(), w.repack.merges(), "packs without a shared object are concatenated");
    // Every object is still there: the history, each tree and blob.
    assert_eq!(git_cli(&clone, &["fsck", "--strict", "--no-progress", "--no-dangling"]), "");
    let commits: usize = git_cli(&clone, &["rev-list", "--count", "main"]).trim().parse().unwrap();
    assert_eq!(commits, 3 * windows);
    let files = git_cli(&clone, &["ls-tree", "-r", "--name-only", "main"]).lines().count();
    assert_eq!(files, windows * size / 2 + size / 2);
    // The writer reads through the merged packs: one more window over the
    // same objects commits, and a rewrite of what it holds changes nothing.
    let again: Vec<Change> =
        (0..size).map(|i| write(user("dave"), cm("steady", &format!("o0-{i}"), "last"), "y", 99)).collect();
    assert_eq!(w.commit_local(&again).unwrap().commits.len(), 1);
    assert_eq!(w.commit_local(&again).unwrap().commits.len(), 0);
    w.repack.wait();
    assert_eq!(git_cli(&clone, &["fsck", "--strict", "--no-progress", "--no-dangling"]), "");
}

/// Windows that set objects back to what they were write some objects a
/// second time, into a later pack: packs sharing an object are rebuilt,
/// not concatenated (an index may not list an object twice), and stay
/// whole.
#[test]
fn packs_sharing_an_object_are_rebuilt_and_stay_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = writer(tmp.path(), "clone", None);
    let clone = tmp.path().join("clone");
    let size = super::writer::PACK_THRESHOLD + 20;
    for n in 0..rules::attribution::commit::repack::FAN_IN as usize {
        let value = ["a", "b"][n % 2];
        let window: Vec<Change> =
            (0..size).map(|i| write(user("alice"), cm("flip", &format!("o{i}"), value), "x", n as u64)).collect();
        assert_eq!(w.commit_local(&window).unwrap().commits.len(), 1, "window {n}");
    }
    w.repack.wait();
    assert!(w.repack.merges() >= 1, "{} merges", w.repack.merges());
    assert_eq!(w.repack.concatenated(), 0, "packs sharing objects were concatenated");
    assert_eq!(super::packs::packs(&clone).unwrap().len(), 1);
    assert_eq!(git_cli(&clone, &["fsck", "--strict", "--no-progress", "--no-dangling"]), "");
    let shown = git_cli(&clone, &["show", "main:flip/configmaps/o7.yaml"]);
    assert!(shown.contains("key: b"), "{shown}");
}

/// A packed window pushed to a local remote goes as the pack it was
/// written as (no object copied loose), and the remote's packs are merged
/// as the clone's are: the remote stays whole and equal to the clone.
#[test]
fn packed_windows_pushed_to_a_local_remote_go_as_their_packs_and_are_merged_there() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let mut w = writer(tmp.path(), "clone", Some(&remote));
    let clone = tmp.path().join("clone");
    let windows = rules::attribution::commit::repack::FAN_IN as usize + 2;
    let size = super::writer::PACK_THRESHOLD + 20;
    for n in 0..windows {
        let window: Vec<Change> = (0..size)
            .map(|i| write(user(["alice", "bob"][i % 2]), cm("pushed", &format!("o{n}-{i}"), "v"), "x", n as u64))
            .collect();
        let out = w.commit(&window).unwrap();
        assert_eq!(out.push.as_ref().map(|p| p.attempts), Some(1), "window {n} pushed");
    }
    w.remote_packs.wait();
    let loose = git_cli(&remote, &["count-objects", "-v"]);
    assert!(loose.lines().any(|l| l == "count: 0"), "objects copied loose:\n{loose}");
    let packs = super::packs::packs(&remote).unwrap();
    assert!(packs.len() < rules::attribution::commit::repack::FAN_IN as usize, "{} packs", packs.len());
    assert_eq!(git_cli(&remote, &["fsck", "--strict", "--no-progress", "--no-dangling"]), "");
    assert_eq!(
        git_cli(&remote, &["ls-tree", "-r", "main"]),
        git_cli(&clone, &["ls-tree", "-r", "main"]),
        "the remote holds what the clone does"
    );
    assert_eq!(git_cli(&remote, &["ls-tree", "-r", "--name-only", "main"]).lines().count(), windows * size);
}

/// A window's pack holds what the window wrote and its start does not hold
/// at the same path: a file one author changes and another writes back as
/// it was is not packed again (nor the trees above it), and the remote,
/// which holds the start, ends whole.
#[test]
fn a_window_pack_leaves_out_what_its_start_holds_at_the_same_path() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let mut w = writer(tmp.path(), "clone", Some(&remote));
    let clone = tmp.path().join("clone");
    w.commit(&[write(user("alice"), cm("back", "x", "v1"), "a0", 0)]).unwrap();
    let path = git_cli(&clone, &["ls-tree", "-r", "--name-only", "main"]).trim().to_owned();
    let dir = path.rsplit_once('/').map(|(d, _)| d.to_owned()).unwrap();
    let at_start = |p: &str| git_cli(&clone, &["rev-parse", &format!("main:{p}")]).trim().to_owned();
    let (blob, tree) = (at_start(&path), at_start(&dir));

    let mut window = vec![write(user("alice"), cm("back", "x", "v2"), "a1", 1)];
    window.extend(
        (0..super::writer::PACK_THRESHOLD).map(|i| write(user("alice"), cm("other", &format!("o{i}"), "v"), "a", 1)),
    );
    window.push(write(user("bob"), cm("back", "x", "v1"), "b1", 2));
    let out = w.commit(&window).unwrap();
    assert_eq!(out.commits.len(), 2, "{out:?}");
    assert_eq!(at_start(&path), blob, "the file is back as it was");

    let head = git_cli(&clone, &["rev-parse", "main"]).trim().to_owned();
    let listed: Vec<String> = std::fs::read_dir(clone.join("objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .map(|idx| {
            let out =
                Command::new("git").args(["show-index"]).stdin(std::fs::File::open(&idx).unwrap()).output().unwrap();
            String::from_utf8(out.stdout).unwrap()
        })
        .filter(|ids| ids.contains(&head))
        .collect();
    assert_eq!(listed.len(), 1, "one pack holds the window");
    assert!(!listed[0].contains(&blob), "the blob the start holds at that path was packed again");
    assert!(!listed[0].contains(&tree), "the tree the start holds at that path was packed again");
    assert_eq!(git_cli(&remote, &["fsck", "--strict", "--no-progress", "--no-dangling"]), "");
    assert_eq!(git_cli(&remote, &["rev-parse", &format!("main:{path}")]).trim(), blob);
}

use testkit::git_http;

fn token_writer(root: &Path, clone: &str, url: &str, token: &str) -> Result<GitWriter, GitError> {
    GitWriter::open(WriterConfig {
        remote: Some(RemoteConfig {
            url: url.into(),
            auth: RemoteAuth::Token { username: "x-access-token".into(), token: token.into() },
            max_push_attempts: 5,
        }),
        ..WriterConfig::new(root.join(clone), "main", Identity::new(COMMITTER.0, COMMITTER.1))
    })
}

/// An HTTP remote with a token, served by real `git http-backend`: the push
/// goes through git2's transport and the server's receive-pack, which
/// refuses a stale push; the writer fetches, replays and lands it.
#[test]
fn http_remote_with_a_token_pushes_and_replays_after_a_rejection() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    git_cli(&remote, &["config", "http.receivepack", "true"]);
    let server = git_http::GitHttpServer::start(tmp.path(), "x-access-token", "s3cret");
    let url = format!("{}/remote.git", server.url);

    let mut a = token_writer(tmp.path(), "clone-a", &url, "s3cret").unwrap();
    let mut b = token_writer(tmp.path(), "clone-b", &url, "s3cret").unwrap();
    let out = a.commit(&[write(user("alice"), cm("a", "x", "1"), "1", 0)]).unwrap();
    assert_eq!(out.push.unwrap().attempts, 1);
    b.commit_local(&[write(user("bob"), cm("a", "y", "1"), "2", 1)]).unwrap();
    let push = b.push().unwrap();
    assert_eq!((push.attempts, push.replayed), (2, 1), "{push:?}");
    assert_eq!(
        lines(&git_cli(&remote, &["log", "--reverse", "--format=%an|%cn", "main"])),
        [format!("alice|{}", COMMITTER.0), format!("bob|{}", COMMITTER.0)]
    );
    assert!(server.served.load(std::sync::atomic::Ordering::SeqCst) > 0);

    // A wrong token is refused, and said so, rather than looping; the
    // writer still opens (the remote may come right), and the push says why.
    let mut wrong = token_writer(tmp.path(), "clone-c", &url, "wrong").unwrap();
    let err = wrong.commit(&[write(user("carol"), cm("a", "z", "1"), "3", 2)]).unwrap_err();
    assert!(err.to_string().contains("credentials"), "{err}");
    assert!(server.refused.load(std::sync::atomic::Ordering::SeqCst) > 0);
}

#[test]
fn remote_urls_pick_the_local_compare_and_swap_path_only_for_local_remotes() {
    use push::{Endpoint, endpoint};
    for local in ["file:///srv/git/mirror.git", "/srv/git/mirror.git", "./m.git"] {
        assert!(matches!(endpoint(local), Endpoint::Local(_)), "{local}");
    }
    for remote in
        ["https://github.com/acme/mirror.git", "ssh://git@github.com/acme/mirror.git", "git@github.com:acme/mirror.git"]
    {
        assert!(matches!(endpoint(remote), Endpoint::Transport(_)), "{remote}");
    }
}

#[test]
fn credentials_never_reach_a_log() {
    let auth = RemoteAuth::Token { username: "x-access-token".into(), token: "ghp_secret".into() };
    let shown = format!("{:?}", RemoteConfig { auth, ..RemoteConfig::new("https://x") });
    assert!(!shown.contains("ghp_secret"), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
    let key = RemoteAuth::SshKey {
        username: "git".into(),
        private_key: "/keys/id".into(),
        passphrase: Some("hunter2".into()),
    };
    assert!(!format!("{key:?}").contains("hunter2"));
}

#[test]
fn an_unreachable_remote_never_loses_a_window() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let mut w = writer(tmp.path(), "clone", Some(&remote));
    // The remote goes away.
    let away = tmp.path().join("away.git");
    std::fs::rename(&remote, &away).unwrap();
    let window = [write(user("alice"), cm("a", "x", "1"), "1", 0)];
    let err = w.commit(&window).unwrap_err();
    assert!(matches!(err, GitError::Git { .. }), "{err}");
    let clone = tmp.path().join("clone");
    assert_eq!(git_cli(&clone, &["log", "--format=%an", "main"]).trim(), "alice");
    // It comes back; retrying the same window adds nothing and pushes it.
    std::fs::rename(&away, &remote).unwrap();
    let out = w.commit(&window).unwrap();
    assert!(out.commits.is_empty());
    assert_eq!(out.push.unwrap().attempts, 1);
    assert_eq!(git_cli(&remote, &["log", "--format=%an", "main"]).trim(), "alice");
}

#[test]
fn a_writer_opens_while_its_remote_is_away_and_pushes_once_it_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = tmp.path().join("later.git");
    // No remote yet: the writer still opens and commits in the clone.
    let mut w = writer(tmp.path(), "clone", Some(&remote));
    let window = [write(user("alice"), cm("a", "x", "1"), "1", 0)];
    let (out, push_error) = w.commit_keeping(&window, &rules::mirror::message::CommitKind::Window, None).unwrap();
    assert_eq!(out.commits.len(), 1);
    assert!(push_error.is_some(), "the push failed and says so");
    std::fs::create_dir_all(&remote).unwrap();
    git_cli(&remote, &["init", "--quiet", "--bare", "--initial-branch=main"]);
    // An empty window pushes what the clone holds.
    let (out, push_error) = w.commit_keeping(&[], &rules::mirror::message::CommitKind::Window, None).unwrap();
    assert!(push_error.is_none(), "{push_error:?}");
    assert_eq!(out.push.unwrap().attempts, 1);
    assert_eq!(git_cli(&remote, &["log", "--format=%an", "main"]).trim(), "alice");
}

/// A remote that declines every push (a protected branch's hook) ends in a
/// typed error naming the reason, after the configured attempts, and the
/// commit stays in the clone.
#[test]
fn a_push_the_remote_always_declines_ends_in_a_typed_error_with_the_reason() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let remote = bare_remote(tmp.path(), "remote.git");
    let hook = remote.join("hooks/pre-receive");
    std::fs::write(&hook, "#!/bin/sh\necho 'branch is protected' >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = git_http::GitHttpServer::start(tmp.path(), "x-access-token", "s3cret");
    let url = format!("{}/remote.git", server.url);
    let mut w = token_writer(tmp.path(), "clone", &url, "s3cret").unwrap();
    let err = w.commit(&[write(user("alice"), cm("a", "x", "1"), "1", 0)]).unwrap_err();
    match &err {
        GitError::PushExhausted { attempts, last_reason, .. } => {
            assert_eq!(*attempts, 5);
            assert!(last_reason.contains("hook declined"), "{last_reason}");
        }
        other => panic!("expected PushExhausted, got {other}"),
    }
    let clone = tmp.path().join("clone");
    assert_eq!(git_cli(&clone, &["log", "--format=%an", "main"]).trim(), "alice");
    assert_eq!(git_cli(&remote, &["for-each-ref"]), "");
}

#[test]
fn a_rejected_push_backs_off_exponentially_with_jitter_and_a_cap() {
    for _ in 0..50 {
        // The delays of attempts 1..=100, as the push loop draws them.
        let mut backoff = super::push::push_backoff();
        let ms: Vec<u64> = (0..100).map(|_| backoff.next_delay().as_millis() as u64).collect();
        assert!((5..=10).contains(&ms[0]), "{}", ms[0]);
        assert!((10..=20).contains(&ms[1]), "{}", ms[1]);
        assert!((160..=320).contains(&ms[5]), "{}", ms[5]);
        for a in [7, 10, 100] {
            assert!((320..=640).contains(&ms[a - 1]), "attempt {a}: {}", ms[a - 1]);
        }
        // Ten attempts wait long enough in total for a busy writer's burst to end.
        let total: u64 = ms[..10].iter().sum();
        assert!(total >= 1500, "{total}");
    }
}

mod encryption;
mod mirror;
