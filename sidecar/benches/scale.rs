//! Scale benchmark (issue 31; not a test), on the real processes: a whole
//! cluster's worth of objects in testkit's fake API, mirrored by the real
//! `watch` and `serve` into a bare remote. Prints, from one run:
//! - **first start**: every object listed and written into an empty remote,
//!   beside the Git writer alone writing and pushing the same files (one
//!   window per type, as the watcher's reconciles go), in the same run:
//!   `--rounds` pairs (3), each baseline right after its first start, and
//!   the median of their ratios;
//! - **restart, unchanged**: a new watcher relists everything and must make
//!   no commit, beside the LIST calls alone (the same pages, from this
//!   process);
//! - **restart after changes**: objects changed while no watcher ran; the
//!   relist writes exactly those;
//! - resident memory of both processes, and per watched object.
//!
//! Objects: ConfigMaps with data, Deployments, and custom resources (the
//! rest of the types), spread over the namespaces. Run (release build):
//! `cargo bench -p reverser-sidecar --bench scale` (100,000 objects over 100
//! types in 20 namespaces; `-- --objects N --types T --namespaces K
//! --changes C --rounds R` to change it; `--serve-arg ARG` is passed to `serve`, e.g.
//! `--serve-arg --author-attribution=false`).

/// The product's allocator (sidecar/src/main.rs): the Git writer alone
/// runs here as `serve` runs it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;

use std::time::{Duration, Instant, SystemTime};

use common::cluster::{Cluster, commits, files, metric, rss_mib, rss_split, stop, type_of, until};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use rules::attribution::Tier;
use rules::attribution::commit::{Action, Change};
use rules::attribution::render::ObjectKey;
use testkit::free_port;
use testkit::mirror::git;

/// The watcher's page size (its lists page by 500).
const PAGE: u32 = 500;

struct Args {
    objects: usize,
    types: usize,
    namespaces: usize,
    changes: usize,
    /// First starts, each beside its own baseline run right after it: the
    /// ratio printed is their median (a 2-core VM's slow spells land on
    /// one pair, not on the figure).
    rounds: usize,
    serve: Vec<String>,
    /// Only the Git writer's baseline, in this process: what a heap
    /// profiler runs (`heaptrack <bench> --writer-only`).
    writer_only: bool,
    /// Runs this as `serve` instead of the built binary: a wrapper that runs
    /// it under a profiler (`exec heaptrack -o FILE "$REAL" "$@"`).
    serve_binary: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        objects: 100_000,
        types: 100,
        namespaces: 20,
        changes: 1_000,
        rounds: 3,
        serve: Vec::new(),
        writer_only: false,
        serve_binary: None,
    };
    common::each_flag(|flag, next| {
        match flag {
            "--objects" => a.objects = common::number(flag, next),
            "--types" => a.types = common::number(flag, next),
            "--namespaces" => a.namespaces = common::number(flag, next),
            "--changes" => a.changes = common::number(flag, next),
            "--rounds" => a.rounds = common::number::<usize>(flag, next).max(1),
            "--serve-arg" => a.serve.push(next.to_owned()),
            "--serve-binary" => a.serve_binary = Some(next.to_owned()),
            "--writer-only" => {
                a.writer_only = true;
                return false;
            }
            _ => return false,
        }
        true
    });
    assert!(a.types >= 3, "--types: at least ConfigMaps, Deployments and one custom type");
    a
}

impl Args {
    fn cluster(&self) -> Cluster {
        Cluster { objects: self.objects, types: self.types, namespaces: self.namespaces }
    }
}

/// The baseline: the Git writer alone writing and pushing the same files,
/// one window per type.
fn git_only(a: &Args) -> Duration {
    let tmp = tempfile::tempdir().unwrap();
    let (mut w, remote) = common::pushing_writer(tmp.path(), "");
    let mut by_type: Vec<Vec<Change>> = (0..a.types).map(|_| Vec::new()).collect();
    for i in 0..a.objects {
        let (t, value) = a.cluster().object(i, 1);
        let (group, version, resource, _) = type_of(t);
        by_type[t].push(Change {
            object: ObjectKey {
                group,
                version,
                resource,
                namespace: value["metadata"]["namespace"].as_str().unwrap().into(),
                name: value["metadata"]["name"].as_str().unwrap().into(),
            },
            action: Action::Write(value),
            author: None,
            tier: Tier::Absent,
            audit_id: None,
            observed_at: SystemTime::now(),
        });
    }
    let t = Instant::now();
    for changes in &by_type {
        w.commit(changes).unwrap();
    }
    let took = t.elapsed();
    assert_eq!(files(&remote), a.objects, "the baseline wrote every file");
    took
}

/// The LIST calls a relist makes, from this process: every type, every
/// page of 500, over HTTP from the same fake API.
fn lists_alone(a: &Args, kubeconfig: &std::path::Path) -> Duration {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(kubeconfig).unwrap(),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let t = Instant::now();
        let mut listed = 0;
        for ty in 0..a.types {
            let (group, version, plural, kind) = type_of(ty);
            let ar = ApiResource {
                api_version: if group.is_empty() { version.clone() } else { format!("{group}/{version}") },
                group,
                version,
                kind,
                plural,
            };
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            let mut params = ListParams::default().limit(PAGE);
            loop {
                let page = api.list(&params).await.unwrap();
                listed += page.items.len();
                match page.metadata.continue_.filter(|c| !c.is_empty()) {
                    Some(c) => params = params.continue_token(&c),
                    None => break,
                }
            }
        }
        assert_eq!(listed, a.objects);
        t.elapsed()
    })
}

/// A `serve` writing into a new empty bare remote under `dir`.
fn start_serve(a: &Args, dir: &std::path::Path) -> (testkit::sidecar::Sidecar, std::path::PathBuf) {
    let remote = dir.join("remote.git");
    testkit::mirror::init_bare(&remote);
    let mut serve_args: Vec<String> = vec![
        "--audit-listen".into(),
        "off".into(),
        "--git-repo".into(),
        dir.join("clone").display().to_string(),
        "--git-remote".into(),
        format!("file://{}", remote.display()),
        "--author-attribution-max-facts".into(),
        "2000000".into(),
    ];
    serve_args.extend(a.serve.iter().cloned());
    let serve_args: Vec<&str> = serve_args.iter().map(String::as_str).collect();
    let mut builder = testkit::sidecar::Sidecar::builder("serve").args(&serve_args);
    if let Some(path) = &a.serve_binary {
        builder = builder.binary(path);
    }
    (builder.start(), remote)
}

/// What one first start took.
struct FirstStart {
    took: Duration,
    /// On-CPU seconds: watch, serve, this process (the fake API).
    cpu: [f64; 3],
    /// The watcher's metrics port.
    metrics: u16,
}

/// A watcher started on `serve` (whose remote is empty), until every
/// object is in the remote; the watcher is left running.
fn first_start(
    a: &Args,
    kubeconfig: &std::path::Path,
    serve: &testkit::sidecar::Sidecar,
    remote: &std::path::Path,
    log: &std::path::Path,
) -> (FirstStart, std::process::Child) {
    let serve_pid = serve.child.as_ref().unwrap().id();
    let wm = free_port().unwrap();
    let cpu = |pid: u32| common::cpu_and_switches(pid).0;
    let (serve_cpu, own_cpu) = (cpu(serve_pid), cpu(std::process::id()));
    let t = Instant::now();
    let w = a.cluster().watcher(kubeconfig, &serve.socket, wm, log, "1s");
    // Done when every type's reconcile has answered: its answer comes after
    // its commit is pushed. Read from the watcher's metrics, not by listing
    // the remote's tree: `git ls-tree -r` of up to 100,000 files every poll
    // took a good part of one of the two cores from the run it measured
    // (the baseline has no such observer).
    until("every type reconciled", Duration::from_secs(3600), log, || {
        metric(wm, "gitopsreverser_mirror_reconciles_total") >= a.types as u64
    });
    let took = t.elapsed();
    let cpu = [cpu(w.id()), cpu(serve_pid) - serve_cpu, cpu(std::process::id()) - own_cpu].map(|ns| ns as f64 / 1e9);
    assert_eq!(files(remote), a.objects, "the first start wrote every object");
    (FirstStart { took, cpu, metrics: wm }, w)
}

fn main() {
    let a = args();
    eprintln!(
        "scale: {} objects over {} types in {} namespaces; serve {:?}",
        a.objects, a.types, a.namespaces, a.serve
    );
    if a.writer_only {
        let before = rss_split(std::process::id()).0;
        let took = git_only(&a);
        let kept = rss_split(std::process::id()).0 - before;
        println!("the Git writer alone: {:.1} s, {kept:.1} MiB anonymous memory kept", took.as_secs_f64());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let seeded = Instant::now();
    let api = testkit::fakeapi::spawn(a.cluster().store()).unwrap();
    eprintln!("seeded the fake API in {:.1} s", seeded.elapsed().as_secs_f64());
    let kubeconfig = api.write_kubeconfig(&dir.path().join("kubeconfig"), "ns-0").unwrap();

    // First starts, each into its own empty remote with its own `serve`,
    // each beside the baseline run right after it. The last round's
    // `serve` and remote go on to the restarts.
    let mut pairs = Vec::new();
    for round in 1..a.rounds {
        let here = tempfile::tempdir().unwrap();
        let (serve, remote) = start_serve(&a, here.path());
        let (first, w) = first_start(&a, &kubeconfig, &serve, &remote, &here.path().join("watch.log"));
        stop(w);
        drop(serve);
        let baseline = git_only(&a);
        eprintln!(
            "round {round}: first start {:.1} s, baseline {:.1} s",
            first.took.as_secs_f64(),
            baseline.as_secs_f64()
        );
        pairs.push((first.took, baseline));
    }
    let (serve, remote) = start_serve(&a, dir.path());
    let serve_pid = serve.child.as_ref().unwrap().id();
    let log = dir.path().join("watch.log");
    let (first, w) = first_start(&a, &kubeconfig, &serve, &remote, &log);
    let wm = first.metrics;
    let first_commits = commits(&remote);
    std::thread::sleep(Duration::from_secs(2));
    let (watch_rss, serve_rss) = (rss_mib(w.id()), rss_mib(serve_pid));
    let (watch_split, serve_split) = (rss_split(w.id()), rss_split(serve_pid));
    eprintln!("first start done in {:.1} s; the baseline next", first.took.as_secs_f64());
    // (This process's own memory after the baseline says nothing of the
    // writer's: it also held every input object. `--writer-only` runs the
    // baseline alone, for a heap profiler.)
    let baseline = git_only(&a);
    pairs.push((first.took, baseline));
    // Baseline time over mirror time, per round.
    let ratio = |(m, b): &(Duration, Duration)| b.as_secs_f64() / m.as_secs_f64();
    let mut ratios: Vec<f64> = pairs.iter().map(ratio).collect();
    ratios.sort_by(f64::total_cmp);
    let median = ratios[ratios.len() / 2];

    // Restart on an unchanged cluster: the relist makes no commit.
    stop(w);
    let t = Instant::now();
    let w = a.cluster().watcher(&kubeconfig, &serve.socket, wm, &log, "1s");
    until("every type relisted", Duration::from_secs(3600), &log, || {
        metric(wm, "gitopsreverser_mirror_reconciles_total") >= a.types as u64
    });
    let relist = t.elapsed();
    let unchanged_commits = commits(&remote) - first_commits;
    let lists = lists_alone(&a, &kubeconfig);

    // Changes while no watcher runs: the relist writes exactly those.
    stop(w);
    let before = git(&remote, &["rev-parse", "main"]).trim().to_owned();
    {
        let mut store = api.store.lock().unwrap();
        let step = (a.objects / a.changes.max(1)).max(1);
        for i in (0..a.objects).step_by(step).take(a.changes) {
            let (t, value) = a.cluster().object(i, 2);
            let (group, _, plural, _) = type_of(t);
            let resource = if group.is_empty() { plural } else { format!("{plural}.{group}") };
            let ns = value["metadata"]["namespace"].as_str().unwrap().to_owned();
            let name = value["metadata"]["name"].as_str().unwrap().to_owned();
            store.replace(&resource, &ns, &name, value, false).unwrap();
        }
    }
    let t = Instant::now();
    let w = a.cluster().watcher(&kubeconfig, &serve.socket, wm, &log, "1s");
    until("the changes relisted", Duration::from_secs(3600), &log, || {
        metric(wm, "gitopsreverser_mirror_reconciles_total") >= a.types as u64
    });
    std::thread::sleep(Duration::from_secs(3));
    let changed_in = t.elapsed();
    let diff = git(&remote, &["diff", "--name-only", &before, "main"]);
    let changed = diff.lines().count();
    stop(w);

    println!("| what | figure |");
    println!("|---|---|");
    let secs = |f: &dyn Fn(&(Duration, Duration)) -> Duration| {
        pairs.iter().map(|p| format!("{:.1}", f(p).as_secs_f64())).collect::<Vec<_>>().join(" / ")
    };
    println!(
        "| first start: {} objects, {} types, {} namespaces, listed and written into an empty remote (each round) | {} s (last: {:.0} objects/s, {first_commits} commits) |",
        a.objects,
        a.types,
        a.namespaces,
        secs(&|p| p.0),
        a.objects as f64 / first.took.as_secs_f64()
    );
    println!(
        "| CPU in the last first start: watch / serve / the fake API (this process) | {:.1} / {:.1} / {:.1} s |",
        first.cpu[0], first.cpu[1], first.cpu[2]
    );
    println!(
        "| baseline: the Git writer alone, the same files, one window per type, pushed (each round, right after its first start) | {} s |",
        secs(&|p| p.1)
    );
    println!(
        "| ratio (baseline time / mirror time; target ≥ 0.8), median of {} rounds | {median:.2}x (each: {}) |",
        pairs.len(),
        pairs.iter().map(|p| format!("{:.2}x", ratio(p))).collect::<Vec<_>>().join(", ")
    );
    println!(
        "| restart, unchanged cluster: relist of every type | {:.1} s, {unchanged_commits} commits |",
        relist.as_secs_f64()
    );
    println!("| the LIST calls alone (pages of {PAGE}) | {:.1} s |", lists.as_secs_f64());
    println!("| ratio (relist / LISTs; target ≤ 1.5) | {:.2}x |", relist.as_secs_f64() / lists.as_secs_f64());
    println!(
        "| restart after {} changes made while down | {changed} files changed, in {:.1} s |",
        a.changes,
        changed_in.as_secs_f64()
    );
    println!(
        "| resident memory after the first start: watch / serve | {watch_rss:.1} MiB / {serve_rss:.1} MiB ({:.0} / {:.0} bytes per object) |",
        watch_rss * 1048576.0 / a.objects as f64,
        serve_rss * 1048576.0 / a.objects as f64
    );
    println!(
        "| of which anonymous / file-backed: watch / serve | {:.1} / {:.1} MiB, {:.1} / {:.1} MiB |",
        watch_split.0, watch_split.1, serve_split.0, serve_split.1
    );
}
