//! The sidecar's `Commit` call end to end: watch events in, attributed
//! commits out, pushed to a real bare repository and read back with the
//! `git` CLI.

mod support;

use std::process::Command;

use runtime::proto::{CommitRequest, ReconcileChunk, ReconcileHeader, ResolveRequest};
use support::*;

fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn event(event_type: &str, object: Vec<u8>) -> ResolveRequest {
    ResolveRequest { r#type: configmaps("lab"), event_type: event_type.into(), object_json: object }
}

/// `serve` committing into a clone in `work` and pushing to a bare
/// remote there, with `extra` arguments; the remote's path.
fn serve_pushing(work: &std::path::Path, extra: &[&str]) -> (Sidecar, std::path::PathBuf) {
    let remote = work.join("remote.git");
    git(work, &["init", "-q", "--bare", "-b", "main", remote.to_str().unwrap()]);
    let mirror = work.join("mirror");
    let remote_url = format!("file://{}", remote.display());
    let mut args = vec!["--git-repo", mirror.to_str().unwrap(), "--git-remote", &remote_url];
    args.extend_from_slice(extra);
    (Sidecar::start("serve", &args), remote)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_writes_attributed_history_and_pushes_it() {
    let work = tempfile::tempdir().unwrap();
    let (s, remote) = serve_pushing(
        work.path(),
        &[
            "--author-attribution-grace",
            "500ms",
            "--git-committer-name",
            "mirror-bot",
            "--git-committer-email",
            "bot@example.com",
        ],
    );
    let batch = event_list(vec![
        audit_event("create", "alice", "ns", "cm", "u-1", "10"),
        audit_event("create", "alice", "ns", "gone", "u-2", "11"),
        audit_event("delete", "carol", "ns", "gone", "u-2", "20"),
        audit_event("patch", "system:serviceaccount:kube-system:cleaner", "ns", "gone", "u-2", "20"),
    ]);
    assert_eq!(s.post("/audit-webhook/lab", &batch).0, 200);

    let mut c = s.client().await;
    let out = c
        .commit(CommitRequest {
            events: vec![
                event("ADDED", watch_object("ns", "cm", "u-1", "10", false)),
                event("ADDED", watch_object("ns", "gone", "u-2", "11", false)),
                // The deletion intent: removes the file, authored by the deleter.
                event("MODIFIED", watch_object("ns", "gone", "u-2", "20", true)),
                // Runtime cleanup after the finalizer: no Git change.
                event("DELETED", watch_object("ns", "gone", "u-2", "21", true)),
                // Nobody's fact: committed as unresolved after the grace.
                event("ADDED", watch_object("ns", "orphan", "u-3", "30", false)),
            ],
            ..CommitRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    let actions: Vec<&str> = out.resolutions.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(actions, ["write", "write", "delete", "noop", "write"]);
    assert!(out.rejected.is_empty(), "{:?}", out.rejected);
    assert!(out.push_attempts >= 1);

    let log = git(
        &remote,
        &["log", "--reverse", "--format=%an <%ae>|%cn <%ce>|%(trailers:key=Reverser-Tier,valueonly,separator=%x2C)"],
    );
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 3, "{log}");
    assert_eq!(lines[0], "alice <alice@noreply.cluster.local>|mirror-bot <bot@example.com>|exact,exact");
    assert_eq!(lines[1], "carol <carol@noreply.cluster.local>|mirror-bot <bot@example.com>|delete_sticky");
    assert!(
        lines[2].starts_with("unknown (attribution unresolved) <attribution-unresolved@gitops-reverser.invalid>|"),
        "{}",
        lines[2]
    );
    assert!(lines[2].contains("|mirror-bot <bot@example.com>|absent"), "{}", lines[2]);
    let tree = git(&remote, &["ls-tree", "-r", "--name-only", "main"]);
    assert_eq!(tree.lines().collect::<Vec<_>>(), ["ns/configmaps/cm.yaml", "ns/configmaps/orphan.yaml"]);
    let manifest = git(&remote, &["show", "main:ns/configmaps/cm.yaml"]);
    assert!(!manifest.contains("resourceVersion") && !manifest.contains("uid"), "{manifest}");
}

/// A list as the watcher sends it: 200 objects a message, the header in
/// the first.
fn reconcile_chunks(objects: &[Vec<u8>]) -> Vec<ReconcileChunk> {
    let mut chunks: Vec<ReconcileChunk> =
        objects.chunks(200).map(|c| ReconcileChunk { header: None, objects_json: c.to_vec() }).collect();
    chunks[0].header = Some(ReconcileHeader { r#type: configmaps("lab"), ..ReconcileHeader::default() });
    chunks
}

/// A reconcile's objects come in chunks: every object of every chunk is
/// written, and one that is not JSON is named by its place in the whole
/// list (its place within its chunk was once counted twice: object 201
/// was called 202), with nothing committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_in_chunks_writes_every_object_and_names_a_bad_one_by_its_place() {
    let work = tempfile::tempdir().unwrap();
    let (s, remote) = serve_pushing(work.path(), &["--author-attribution-grace", "100ms"]);
    let objects: Vec<Vec<u8>> =
        (0..450).map(|i| watch_object("ns", &format!("cm-{i:03}"), &format!("u-{i}"), "7", false)).collect();
    let mut c = s.client().await;

    let mut bad = objects.clone();
    bad[201] = b"{not json".to_vec();
    let err = c.reconcile(tokio_stream::iter(reconcile_chunks(&bad))).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{}", err.message());
    assert!(err.message().starts_with("object 201: object_json is not JSON"), "{}", err.message());
    let branch = Command::new("git").arg("-C").arg(&remote).args(["rev-parse", "-q", "--verify", "main"]).output();
    assert!(!branch.unwrap().status.success(), "a refused reconcile pushed a commit");

    let out = c.reconcile(tokio_stream::iter(reconcile_chunks(&objects))).await.unwrap().into_inner();
    assert_eq!(out.resolutions.len(), 450);
    assert!(out.rejected.is_empty(), "{:?}", out.rejected);
    let tree = git(&remote, &["ls-tree", "-r", "--name-only", "main"]);
    let files: Vec<&str> = tree.lines().collect();
    let expected: Vec<String> = (0..450).map(|i| format!("ns/configmaps/cm-{i:03}.yaml")).collect();
    assert_eq!(files, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_without_a_git_repo_is_refused_clearly() {
    let s = Sidecar::start("serve", &[]);
    let mut c = s.client().await;
    let err = c.commit(CommitRequest::default()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert!(err.message().contains("--git-repo"), "{}", err.message());
}
