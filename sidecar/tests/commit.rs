//! The sidecar's `Commit` call end to end: watch events in, attributed
//! commits out, pushed to a real bare repository and read back with the
//! `git` CLI.

mod support;

use std::process::Command;

use runtime::proto::{CommitRequest, ResolveRequest};
use support::*;

fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn event(event_type: &str, object: Vec<u8>) -> ResolveRequest {
    ResolveRequest { r#type: configmaps("lab"), event_type: event_type.into(), object_json: object }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_writes_attributed_history_and_pushes_it() {
    let work = tempfile::tempdir().unwrap();
    let remote = work.path().join("remote.git");
    git(work.path(), &["init", "-q", "--bare", "-b", "main", remote.to_str().unwrap()]);
    let mirror = work.path().join("mirror");
    let s = Sidecar::start(
        "serve",
        &[
            "--author-attribution-grace",
            "500ms",
            "--git-repo",
            mirror.to_str().unwrap(),
            "--git-remote",
            &format!("file://{}", remote.display()),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_without_a_git_repo_is_refused_clearly() {
    let s = Sidecar::start("serve", &[]);
    let mut c = s.client().await;
    let err = c.commit(CommitRequest::default()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert!(err.message().contains("--git-repo"), "{}", err.message());
}
