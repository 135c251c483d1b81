//! Git authoring throughput for 10,000 objects: files/s and commits/s.
//!
//! `cargo bench -p runtime --bench commit` (add `-- 2000` for another object
//! count). Prints figures and ratios against baselines measured in the same
//! run: rendering alone, and raw git2 blob writes of the same bytes.

use std::time::{Duration, Instant, SystemTime};

use rules::attribution::render::{ObjectKey, render_manifest};
use rules::attribution::{ActorKind, Tier};
use runtime::attribution::commit::{Action, Change, GitWriter, Identity, RemoteConfig, ResolvedAuthor, WriterConfig};
use serde_json::{Value, json};

fn object(i: usize, round: usize) -> (ObjectKey, Value) {
    let ns = format!("team-{:03}", i % 100);
    let name = format!("config-{i:05}");
    let data: serde_json::Map<String, Value> =
        (0..8).map(|k| (format!("key-{k}"), json!(format!("value-{round}-{i}-{k}")))).collect();
    let key = ObjectKey {
        group: String::new(),
        version: "v1".into(),
        resource: "configmaps".into(),
        namespace: ns.clone(),
        name: name.clone(),
    };
    let obj = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": name, "namespace": ns, "uid": format!("uid-{i}"),
            "resourceVersion": format!("{}", 1000 + i), "creationTimestamp": "2026-06-25T12:00:00Z",
            "labels": {"app": "bench", "shard": format!("{}", i % 7)},
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}]
        },
        "data": data
    });
    (key, obj)
}

fn author(i: usize) -> ResolvedAuthor {
    ResolvedAuthor {
        username: format!("user-{}", i % 10),
        display_name: String::new(),
        email: String::new(),
        actor_kind: ActorKind::User,
    }
}

fn change(i: usize, round: usize, action_delete: bool) -> Change {
    let (key, obj) = object(i, round);
    Change {
        action: if action_delete { Action::Delete } else { Action::Write(obj) },
        object: key,
        author: Some(author(i)),
        tier: Tier::Exact,
        audit_id: Some(format!("audit-{round}-{i}")),
        observed_at: SystemTime::now(),
    }
}

fn open(dir: &std::path::Path, remote: Option<&std::path::Path>) -> GitWriter {
    GitWriter::open(WriterConfig {
        remote: remote.map(|r| RemoteConfig::new(format!("file://{}", r.display()))),
        ..WriterConfig::new(dir.to_path_buf(), "main", Identity::new("Reverser Bench", "bench@reverser.invalid"))
    })
    .expect("open the clone")
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn main() {
    let n: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(10_000);
    let tmp = tempfile::tempdir().expect("tempdir");
    println!("git authoring benchmark: {n} ConfigMaps in 100 namespaces, 10 authors");

    // Baseline 1: sanitize + stable YAML only.
    let objects: Vec<(ObjectKey, Value)> = (0..n).map(|i| object(i, 0)).collect();
    let t = Instant::now();
    let rendered: Vec<Vec<u8>> = objects.iter().map(|(k, o)| render_manifest(k, o).expect("render")).collect();
    let render_time = t.elapsed();
    let render_rate = rate(n, render_time);
    println!("baseline render only:            {render_rate:>10.0} files/s ({render_time:.2?})");

    // Baseline 2: raw git2 blob writes of the same bytes (the odb floor).
    let raw = git2::Repository::init_bare(tmp.path().join("raw")).expect("init");
    let t = Instant::now();
    for bytes in &rendered {
        raw.blob(bytes).expect("blob");
    }
    let blob_time = t.elapsed();
    let blob_rate = rate(n, blob_time);
    println!("baseline raw git2 blob writes:   {blob_rate:>10.0} files/s ({blob_time:.2?})");

    // One commit window holding every object: one commit per author.
    let mut w = open(&tmp.path().join("window"), None);
    let window: Vec<Change> = (0..n).map(|i| change(i, 0, false)).collect();
    let t = Instant::now();
    let out = w.commit(&window).expect("commit");
    let d = t.elapsed();
    let files_rate = rate(n, d);
    println!(
        "one window, create {n}:        {files_rate:>10.0} files/s ({d:.2?}, {} commits) = {:.2}x render, {:.2}x raw blobs",
        out.commits.len(),
        files_rate / render_rate,
        files_rate / blob_rate
    );
    let window: Vec<Change> = (0..n).map(|i| change(i, 1, false)).collect();
    let t = Instant::now();
    let out = w.commit(&window).expect("commit");
    let d = t.elapsed();
    println!("one window, update {n}:        {:>10.0} files/s ({d:.2?}, {} commits)", rate(n, d), out.commits.len());
    let window: Vec<Change> = (0..n).map(|i| change(i, 1, true)).collect();
    let t = Instant::now();
    let out = w.commit(&window).expect("commit");
    let d = t.elapsed();
    println!("one window, delete {n}:        {:>10.0} files/s ({d:.2?}, {} commits)", rate(n, d), out.commits.len());

    // One commit per object: a window per event.
    let remote = tmp.path().join("remote.git");
    git2::Repository::init_bare(&remote).expect("init remote");
    let mut w = open(&tmp.path().join("per-event"), Some(&remote));
    let t = Instant::now();
    for i in 0..n {
        w.commit_local(&[change(i, 0, false)]).expect("commit");
    }
    let d = t.elapsed();
    let commit_rate = rate(n, d);
    println!(
        "one commit per object, local:     {commit_rate:>10.0} commits/s ({d:.2?}) = {:.2}x render, {:.2}x raw blobs",
        commit_rate / render_rate,
        commit_rate / blob_rate
    );
    let t = Instant::now();
    let push = w.push().expect("push");
    let d = t.elapsed();
    println!("push {n} commits to file:// once: {:>10.0} commits/s ({d:.2?}, {} attempt)", rate(n, d), push.attempts);

    // Commit and push every window (fetch, commit, push), a tenth as many.
    let m = (n / 10).max(1);
    let t = Instant::now();
    for i in 0..m {
        w.commit(&[change(i, 1, false)]).expect("commit and push");
    }
    let d = t.elapsed();
    println!("fetch+commit+push per object:     {:>10.0} commits/s ({d:.2?} for {m})", rate(m, d));
}
