//! Mirror benchmark (not a test), on the real processes. 10,000 objects
//! over 10 types are created by 10 actors, their audit events posted as the
//! API server would; the watcher and the sidecar turn them into attributed,
//! pushed history. Prints, from one run:
//! - events/s from the watch to a pushed commit, and the lag from an
//!   object's write to its file in the remote (p50, p99), beside the commit
//!   window;
//! - the baseline: the Git writer alone committing and pushing the same
//!   10,000 changes in windows of the same size.
//!
//! Run: `cargo bench -p reverser-sidecar --bench mirror` (`-- N` for another
//! object count).

/// The product's allocator (sidecar/src/main.rs): the Git writer alone
/// runs here as `serve` runs it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use common::percentile;
use rules::attribution::commit::{Action, Change, ResolvedAuthor};
use rules::attribution::render::ObjectKey;
use rules::attribution::{ActorKind, Tier};
use serde_json::{Value, json};
use testkit::fakeapi::ResourceType;
use testkit::mirror::{Mirror, NS, PREFIX, git};

const TYPES: usize = 10;
const ACTORS: usize = 10;
const WINDOW: &str = "1s";

fn widget(t: usize, i: usize) -> Value {
    json!({"apiVersion": "bench.example.com/v1", "kind": format!("Widget{t}"),
        "metadata": {"name": format!("w-{i}"), "namespace": NS}, "spec": {"size": i}})
}

/// The remote's documents, by path.
fn remote_paths(remote: &std::path::Path) -> Vec<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(remote)
        .args(["ls-tree", "-r", "--name-only", "main"])
        .stderr(std::process::Stdio::null())
        .output()
        .expect("git runs");
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

/// The baseline: the same changes through the Git writer alone, pushed to
/// a bare remote, in windows of `window` changes.
fn git_only(n: usize, window: usize) -> f64 {
    let tmp = tempfile::tempdir().unwrap();
    let (mut w, _remote) = common::pushing_writer(tmp.path(), PREFIX);
    let changes: Vec<Change> = (0..n)
        .map(|i| {
            let (t, actor) = (i % TYPES, i % ACTORS);
            Change {
                object: ObjectKey {
                    group: "bench.example.com".into(),
                    version: "v1".into(),
                    resource: format!("widget{t}s"),
                    namespace: NS.into(),
                    name: format!("w-{i}"),
                },
                action: Action::Write(widget(t, i)),
                author: Some(ResolvedAuthor {
                    username: format!("user-{actor}"),
                    display_name: String::new(),
                    email: String::new(),
                    actor_kind: ActorKind::User,
                }),
                tier: Tier::Exact,
                audit_id: None,
                observed_at: SystemTime::now(),
            }
        })
        .collect();
    let t = Instant::now();
    for chunk in changes.chunks(window) {
        w.commit(chunk).unwrap();
    }
    n as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    let n: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(10_000);
    let m = Mirror::start_with(
        |s| {
            s.provider["spec"]["push"]["commitWindow"] = json!(WINDOW);
            s.types = (0..TYPES)
                .map(|t| {
                    ResourceType::builtin(
                        "bench.example.com",
                        "v1",
                        &format!("widget{t}s"),
                        &format!("Widget{t}"),
                        true,
                    )
                })
                .collect();
            s.rules[0]["spec"]["rules"] = json!([{"apiGroups": ["bench.example.com"], "resources": ["*"]}]);
        },
        &["--author-attribution-max-facts", "2000000"],
        &[],
    );
    let sidecar_binary = testkit::sidecar::binary();
    eprintln!(
        "mirror benchmark: {n} objects over {TYPES} types by {ACTORS} actors, commit window {WINDOW}, {}",
        sidecar_binary.display()
    );

    // Write every object, then post the audit events in the API server's
    // 400-event batches: the watch is ahead of the facts, as in a cluster.
    let mut created: HashMap<String, Instant> = HashMap::with_capacity(n);
    let start = Instant::now();
    for batch in (0..n).collect::<Vec<_>>().chunks(400) {
        let actor = batch[0] / 400 % ACTORS;
        m.act(&format!("user-{actor}"), true, |s| {
            for &i in batch {
                let t = i % TYPES;
                s.create(&format!("widget{t}s.bench.example.com"), NS, widget(t, i)).unwrap();
                created.insert(format!("{PREFIX}/{NS}/bench.example.com/widget{t}s/w-{i}.yaml"), Instant::now());
            }
        });
    }
    let written = start.elapsed();

    // Watch the remote fill up; each file's lag is from its object's write
    // to the first poll that sees it pushed.
    let mut seen: HashMap<String, Duration> = HashMap::with_capacity(n);
    let deadline = Instant::now() + Duration::from_secs(600);
    while seen.len() < n {
        assert!(
            Instant::now() < deadline,
            "only {} of {n} documents reached the remote\n{}",
            seen.len(),
            m.watcher_log()
        );
        let now = Instant::now();
        for path in remote_paths(&m.remote) {
            if let Some(at) = created.get(&path) {
                seen.entry(path).or_insert_with(|| now.duration_since(*at));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let total = start.elapsed();
    let mut lags: Vec<Duration> = seen.into_values().collect();
    lags.sort();
    let authors = git(&m.remote, &["log", "--format=%an", "main"]);
    let unresolved = authors.lines().filter(|a| a.starts_with("unknown")).count();
    let mirror_rate = n as f64 / total.as_secs_f64();
    // The watcher sends at most MAX_EVENTS events per Commit.
    let baseline = git_only(n, rules::mirror::window::MAX_EVENTS);
    println!("| what | figure |");
    println!("|---|---|");
    println!("| objects written to the fake API (10 types, 10 actors) | {n} in {:.2} s |", written.as_secs_f64());
    println!("| mirror: watch → resolved → committed → pushed | {mirror_rate:.0} events/s |");
    println!(
        "| lag, write → file in the remote | p50 {:.2} s, p99 {:.2} s (commit window {WINDOW}) |",
        percentile(&lags, 0.5).as_secs_f64(),
        percentile(&lags, 0.99).as_secs_f64()
    );
    println!("| commits made / unresolved | {} / {unresolved} |", authors.lines().count());
    println!(
        "| baseline: Git writer alone, same changes, windows of {}, pushed | {baseline:.0} files/s |",
        rules::mirror::window::MAX_EVENTS
    );
    println!("| ratio mirror / Git-only | {:.2}x |", mirror_rate / baseline);
}
