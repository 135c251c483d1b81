//! The ONE conformance suite over both transports ("one conformance suite
//! over both implementations"): every property is a generic async function
//! over a [`Harness`], instantiated once for memory and once for a real
//! `redis-server` the test starts on a free loopback port.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::*;
use rules::attribution::GroupResource;
use testkit::RedisServer;

/// Generous ceiling for "eventually": a correctness bound, never a timing
/// assertion.
const PATIENCE: Duration = Duration::from_secs(20);

pub(crate) fn test_config() -> TransportConfig {
    TransportConfig {
        block: Duration::from_millis(200),
        ttl: Duration::from_secs(120),
        retry_min: Duration::from_millis(50),
        retry_max: Duration::from_millis(400),
        ..TransportConfig::default()
    }
}

pub(crate) fn scope(route: &str, group: &str, resource: &str) -> Scope {
    Scope::new(route, GroupResource::new(group, resource))
}

pub(crate) fn fact(author: &str, name: &str) -> Fact {
    Fact {
        author: author.to_owned(),
        namespace: "shop".to_owned(),
        name: name.to_owned(),
        uid: format!("uid-{name}"),
        resource_version: "1".to_owned(),
        verb: "update".to_owned(),
        ..Fact::default()
    }
}

/// A sink recording every batch, with a way to wait for a condition on them.
#[derive(Default)]
pub(crate) struct Recorder {
    batches: Mutex<Vec<FactBatch>>,
    version: watch::Sender<u64>,
}

impl FactSink for Recorder {
    fn apply(&self, batch: FactBatch) {
        self.batches.lock().unwrap().push(batch);
        self.version.send_modify(|v| *v += 1);
    }
}

impl Recorder {
    pub(crate) fn batches(&self) -> Vec<FactBatch> {
        self.batches.lock().unwrap().clone()
    }

    /// Names of every delivered fact, in delivery order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.batches().iter().flat_map(|b| b.facts.iter().map(|f| f.name.clone())).collect()
    }

    pub(crate) async fn wait_for(&self, what: &str, pred: impl Fn(&[FactBatch]) -> bool) {
        let mut rx = self.version.subscribe();
        let wait = async {
            loop {
                rx.borrow_and_update();
                if pred(&self.batches()) {
                    return;
                }
                let _ = rx.changed().await;
            }
        };
        if tokio::time::timeout(PATIENCE, wait).await.is_err() {
            panic!("timed out waiting for {what}; delivered: {:?}", self.names());
        }
    }

    pub(crate) async fn wait_for_name(&self, name: &str) {
        self.wait_for(&format!("fact {name}"), |b| b.iter().any(|b| b.facts.iter().any(|f| f.name == name))).await;
    }
}

/// Runs a follower's loop on a task; aborted on drop.
pub(crate) struct Following(JoinHandle<()>);

impl Drop for Following {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(crate) fn start<F: FactFollower + Clone + 'static>(follower: &F, sink: Arc<dyn FactSink>) -> Following {
    let f = follower.clone();
    Following(tokio::spawn(async move { f.follow(sink).await }))
}

pub(crate) async fn wait_caught_up<F: FactFollower>(follower: &F) {
    let mut rx = follower.caught_up();
    // `settled` first: caught_up is only meaningful for the current set.
    tokio::time::timeout(PATIENCE, follower.settled()).await.expect("follower never applied its subscription set");
    tokio::time::timeout(PATIENCE, rx.wait_for(|v| *v))
        .await
        .expect("follower never caught up")
        .expect("follower dropped");
}

pub(crate) fn counter(text: &str, series: &str) -> u64 {
    text.lines().find_map(|l| l.strip_prefix(series)?.trim().parse::<f64>().ok()).map_or(0, |v| v as u64)
}

/// What the suite needs from a transport under test.
pub(crate) trait Harness: Send + Sync {
    type P: FactPublisher + Clone + 'static;
    type F: FactFollower + Clone + 'static;
    fn name(&self) -> &'static str;
    fn publisher(&self) -> Self::P;
    fn follower(&self) -> Self::F;
    fn metrics(&self) -> &Arc<Metrics>;
    /// Appends an entry stamped `age` in the past (before any other append
    /// to that scope).
    fn publish_aged(&self, scope: &Scope, facts: Vec<Fact>, age: Duration);
    /// How many entries the scope's stream still holds.
    fn retained(&self, scope: &Scope) -> u64;
}

pub(crate) struct MemoryHarness {
    transport: MemoryTransport,
    metrics: Arc<Metrics>,
}

impl MemoryHarness {
    pub(crate) fn new(config: TransportConfig) -> Self {
        let metrics = Arc::new(Metrics::new());
        Self { transport: MemoryTransport::new(1, config, metrics.clone()).unwrap(), metrics }
    }
}

impl Harness for MemoryHarness {
    type P = MemoryPublisher;
    type F = MemoryFollower;
    fn name(&self) -> &'static str {
        "memory"
    }
    fn publisher(&self) -> MemoryPublisher {
        self.transport.publisher()
    }
    fn follower(&self) -> MemoryFollower {
        self.transport.follower()
    }
    fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }
    fn publish_aged(&self, scope: &Scope, facts: Vec<Fact>, age: Duration) {
        let at = now_ms() - age.as_millis() as u64;
        self.transport.publish_at(scope, facts, at);
    }
    fn retained(&self, scope: &Scope) -> u64 {
        self.transport.retained(scope)
    }
}

pub(crate) struct RedisHarness {
    pub(crate) server: RedisServer,
    pub(crate) transport: RedisTransport,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) config: TransportConfig,
}

impl RedisHarness {
    pub(crate) fn new(config: TransportConfig) -> Self {
        // One entry per stream node, so `MAXLEN ~ n` trims to n exactly and
        // a small max_len bites in a test.
        let server = RedisServer::start_with(&["--stream-node-max-entries", "1"], None).expect("start redis-server");
        let metrics = Arc::new(Metrics::new());
        let transport =
            RedisTransport::new(RedisOptions { url: server.url(), ca_cert_pem: None }, config.clone(), metrics.clone())
                .unwrap();
        Self { server, transport, metrics, config }
    }

    pub(crate) fn key(&self, scope: &Scope) -> String {
        scope.stream_key(&self.config.prefix)
    }
}

impl Harness for RedisHarness {
    type P = RedisPublisher;
    type F = RedisFollower;
    fn name(&self) -> &'static str {
        "redis"
    }
    fn publisher(&self) -> RedisPublisher {
        self.transport.publisher()
    }
    fn follower(&self) -> RedisFollower {
        self.transport.follower()
    }
    fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }
    fn publish_aged(&self, scope: &Scope, facts: Vec<Fact>, age: Duration) {
        let time = self.server.cli(&["TIME"]).unwrap();
        let secs: u64 = time.lines().next().unwrap().trim().parse().unwrap();
        let ms = secs * 1000 - age.as_millis() as u64;
        self.server.cli(&["XADD", &self.key(scope), &format!("{ms}-*"), "facts", &Fact::encode_entry(&facts)]).unwrap();
    }
    fn retained(&self, scope: &Scope) -> u64 {
        self.server.cli(&["XLEN", &self.key(scope)]).unwrap().trim().parse().unwrap()
    }
}

// ---------------------------------------------------------------- properties

/// Facts of several scopes in one publish become one batch per scope, in
/// order, delivered with the append time; `written` counts them.
async fn one_batch_per_scope<H: Harness>(h: H) {
    let (a, b) = (scope("r1", "", "configmaps"), scope("r1", "apps", "deployments"));
    let follower = h.follower();
    follower.acquire(&a);
    follower.acquire(&b);
    let rec = Arc::new(Recorder::default());
    let _run = start(&follower, rec.clone());
    wait_caught_up(&follower).await;

    let before = now_ms();
    let n = h
        .publisher()
        .publish(vec![
            (a.clone(), fact("alice", "a1")),
            (b.clone(), fact("bob", "b1")),
            (a.clone(), fact("carol", "a2")),
        ])
        .await
        .unwrap();
    assert_eq!(n, 3);
    rec.wait_for("both batches", |b| b.len() >= 2).await;
    let batches = rec.batches();
    assert_eq!(batches.len(), 2, "{}: {batches:?}", h.name());
    let of = |s: &Scope| batches.iter().find(|x| &x.scope == s).unwrap().clone();
    let names = |b: FactBatch| b.facts.into_iter().map(|f| f.name).collect::<Vec<_>>();
    assert_eq!(names(of(&a)), ["a1", "a2"]);
    assert_eq!(names(of(&b)), ["b1"]);
    assert_eq!(of(&a).facts[0], fact("alice", "a1"), "fact round-trips whole");
    for batch in &batches {
        // Within a minute of now (Redis stamps with the server's clock).
        assert!(batch.at_ms + 60_000 >= before && batch.at_ms <= now_ms() + 60_000);
    }
    let text = h.metrics().render();
    assert_eq!(counter(&text, "gitopsreverser_attribution_facts_total{op=\"written\"}"), 3);
    assert!(text.contains(&format!("gitopsreverser_attribution_transport_info{{transport=\"{}\"}} 1", h.name())));
}

/// A follower never receives facts of a scope it does not follow, and every
/// follower receives every fact of a scope it follows (fan-out, no consumer
/// groups).
async fn subscription_partitions_and_fans_out<H: Harness>(h: H) {
    let (a, b) = (scope("r1", "", "configmaps"), scope("r2", "", "configmaps"));
    let (f1, f2) = (h.follower(), h.follower());
    f1.acquire(&a);
    f2.acquire(&a);
    let (r1, r2) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
    let _x = start(&f1, r1.clone());
    let _y = start(&f2, r2.clone());
    wait_caught_up(&f1).await;
    wait_caught_up(&f2).await;
    let p = h.publisher();
    p.publish(vec![(b.clone(), fact("eve", "other-route"))]).await.unwrap();
    p.publish(vec![(a.clone(), fact("alice", "mine"))]).await.unwrap();
    r1.wait_for_name("mine").await;
    r2.wait_for_name("mine").await;
    assert_eq!(r1.names(), ["mine"], "{}", h.name());
    assert_eq!(r2.names(), ["mine"], "{}", h.name());
}

/// The set changes at runtime, reference-counted, without restarting the loop.
async fn acquire_release_reference_counted<H: Harness>(h: H) {
    let (a, b) = (scope("r", "", "configmaps"), scope("r", "", "secrets"));
    let follower = h.follower();
    follower.acquire(&a);
    let rec = Arc::new(Recorder::default());
    let _run = start(&follower, rec.clone());
    wait_caught_up(&follower).await;
    let p = h.publisher();

    // Acquired while the loop is running (blocked in its read).
    follower.acquire(&b);
    tokio::time::timeout(PATIENCE, follower.settled()).await.unwrap();
    p.publish(vec![(b.clone(), fact("bob", "b1"))]).await.unwrap();
    rec.wait_for_name("b1").await;

    // Two references, one released: still followed.
    follower.acquire(&b);
    follower.release(&b);
    assert_eq!(follower.subscriptions(), vec![a.clone(), b.clone()]);
    p.publish(vec![(b.clone(), fact("bob", "b2"))]).await.unwrap();
    rec.wait_for_name("b2").await;

    // The last reference released: no longer followed.
    follower.release(&b);
    assert_eq!(follower.subscriptions(), vec![a.clone()]);
    tokio::time::timeout(PATIENCE, follower.settled()).await.unwrap();
    p.publish(vec![(b.clone(), fact("bob", "b3"))]).await.unwrap();
    p.publish(vec![(a.clone(), fact("alice", "sentinel"))]).await.unwrap();
    rec.wait_for_name("sentinel").await;
    assert!(
        !rec.names().contains(&"b3".to_string()),
        "{}: released scope still delivered: {:?}",
        h.name(),
        rec.names()
    );

    // Re-acquired: re-warmed from retention, so b3 arrives after all.
    follower.acquire(&b);
    rec.wait_for_name("b3").await;
}

/// A new follower (a restart) re-warms from one TTL of retention: what is
/// younger than the TTL is delivered, what is older is not, and it reports
/// caught-up only once the backlog is in the sink.
async fn rewarms_from_one_ttl<H: Harness>(h: H, ttl: Duration) {
    let a = scope("r", "", "configmaps");
    h.publish_aged(&a, vec![fact("old", "aged-out")], ttl + Duration::from_secs(30));
    h.publish_aged(&a, vec![fact("young", "kept-1")], ttl / 2);
    let p = h.publisher();
    for i in 2..=4 {
        p.publish(vec![(a.clone(), fact("young", &format!("kept-{i}")))]).await.unwrap();
    }
    let follower = h.follower();
    follower.acquire(&a);
    let rec = Arc::new(Recorder::default());
    let _run = start(&follower, rec.clone());
    wait_caught_up(&follower).await;
    // Caught up means the whole retained backlog is already applied.
    assert_eq!(rec.names(), ["kept-1", "kept-2", "kept-3", "kept-4"], "{}", h.name());
}

/// An entry with an authorless fact is skipped whole and counted; the entries
/// after it are still applied.
async fn authorless_entry_skipped_and_counted<H: Harness>(h: H) {
    let a = scope("r", "", "configmaps");
    let follower = h.follower();
    follower.acquire(&a);
    let rec = Arc::new(Recorder::default());
    let _run = start(&follower, rec.clone());
    wait_caught_up(&follower).await;
    let p = h.publisher();
    p.publish(vec![(a.clone(), fact("alice", "in-bad-entry")), (a.clone(), fact("", "nobody"))]).await.unwrap();
    p.publish(vec![(a.clone(), fact("bob", "after"))]).await.unwrap();
    rec.wait_for_name("after").await;
    assert_eq!(rec.names(), ["after"], "{}", h.name());
    let text = h.metrics().render();
    let series = format!("gitopsreverser_attribution_fact_stream_decode_errors_total{{transport=\"{}\"}}", h.name());
    assert_eq!(counter(&text, &series), 1, "{text}");
}

/// A sink that blocks inside `apply` of one named fact until released: a
/// follower stuck there falls behind.
struct GateSink {
    inner: Arc<Recorder>,
    gate_on: String,
    entered: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    gate: Mutex<std::sync::mpsc::Receiver<()>>,
}

impl FactSink for GateSink {
    fn apply(&self, batch: FactBatch) {
        let hit = batch.facts.iter().any(|f| f.name == self.gate_on);
        self.inner.apply(batch);
        if hit {
            if let Some(tx) = self.entered.lock().unwrap().take() {
                let _ = tx.send(());
            }
            // block_in_place: a worker blocked outright would strand the
            // tasks in its LIFO slot (e.g. the publisher's connection).
            tokio::task::block_in_place(|| {
                let _ = self.gate.lock().unwrap().recv();
            });
        }
    }
}

pub(crate) struct Gate {
    pub(crate) sink: Arc<dyn FactSink>,
    pub(crate) recorder: Arc<Recorder>,
    pub(crate) entered: tokio::sync::oneshot::Receiver<()>,
    pub(crate) open: std::sync::mpsc::Sender<()>,
}

pub(crate) fn gate_on(name: &str) -> Gate {
    let recorder = Arc::new(Recorder::default());
    let (etx, erx) = tokio::sync::oneshot::channel();
    let (gtx, grx) = std::sync::mpsc::channel();
    let sink = Arc::new(GateSink {
        inner: recorder.clone(),
        gate_on: name.to_owned(),
        entered: Mutex::new(Some(etx)),
        gate: Mutex::new(grx),
    });
    Gate { sink, recorder, entered: erx, open: gtx }
}

/// A follower that was behind when MAXLEN trimmed past it reports the gap:
/// lost + delivered after the stall = everything appended during it.
async fn slow_follower_gap_reported<H: Harness>(h: H) {
    let a = scope("r", "", "configmaps");
    let follower = h.follower();
    follower.acquire(&a);
    let gate = gate_on("e1");
    let _run = start(&follower, gate.sink.clone());
    wait_caught_up(&follower).await;
    let p = h.publisher();
    p.publish(vec![(a.clone(), fact("a", "e1"))]).await.unwrap();
    tokio::time::timeout(PATIENCE, gate.entered).await.unwrap().unwrap();
    // Stalled inside apply(e1): 19 more appends, MAXLEN 5 trims past it.
    for i in 2..=20 {
        p.publish(vec![(a.clone(), fact("a", &format!("e{i}")))]).await.unwrap();
    }
    assert!(h.retained(&a) <= 6, "{}: MAXLEN did not trim", h.name());
    gate.open.send(()).unwrap();
    gate.recorder.wait_for_name("e20").await;
    let delivered_after = gate.recorder.names().len() as u64 - 1;
    let key = a.stream_key(DEFAULT_PREFIX_FOR_TESTS);
    let gaps = counter(
        &h.metrics().render(),
        &format!("gitopsreverser_attribution_fact_stream_gaps_total{{stream=\"{key}\"}}"),
    );
    assert!(gaps > 0, "{}: no gap reported", h.name());
    assert_eq!(gaps + delivered_after, 19, "{}", h.name());
}

const DEFAULT_PREFIX_FOR_TESTS: &str = rules::attribution::DEFAULT_STREAM_PREFIX;

/// A follower that keeps up is never charged a gap for entries MAXLEN ages
/// out after it read them.
async fn caught_up_follower_no_gap<H: Harness>(h: H) {
    let a = scope("r", "", "configmaps");
    let follower = h.follower();
    follower.acquire(&a);
    let rec = Arc::new(Recorder::default());
    let _run = start(&follower, rec.clone());
    wait_caught_up(&follower).await;
    let p = h.publisher();
    for i in 1..=12 {
        let name = format!("k{i}");
        p.publish(vec![(a.clone(), fact("a", &name))]).await.unwrap();
        rec.wait_for_name(&name).await;
    }
    assert!(h.retained(&a) <= 6, "{}: MAXLEN did not trim", h.name());
    // One more turn of the loop after the trims, so a gap would be seen.
    p.publish(vec![(a.clone(), fact("a", "last"))]).await.unwrap();
    rec.wait_for_name("last").await;
    let text = h.metrics().render();
    assert!(
        !text.contains("gitopsreverser_attribution_fact_stream_gaps_total{"),
        "{}: gap charged to a caught-up follower:\n{text}",
        h.name()
    );
}

/// With a small read count the follower reports caught-up only after paging
/// through the whole backlog.
async fn caught_up_only_after_backlog<H: Harness>(h: H) {
    let a = scope("r", "", "configmaps");
    let p = h.publisher();
    for i in 1..=5 {
        p.publish(vec![(a.clone(), fact("a", &format!("p{i}")))]).await.unwrap();
    }
    let follower = h.follower();
    assert!(*follower.caught_up().borrow(), "nothing subscribed is caught up");
    follower.acquire(&a);
    let rec = Arc::new(Recorder::default());
    let _run = start(&follower, rec.clone());
    wait_caught_up(&follower).await;
    assert_eq!(rec.names(), ["p1", "p2", "p3", "p4", "p5"], "{}", h.name());
}

fn small(config: TransportConfig) -> TransportConfig {
    TransportConfig { max_len: 5, ..config }
}

macro_rules! conformance {
    ($make:ident; $($test:ident: $body:expr;)*) => {
        mod memory_transport {
            use super::*;
            fn $make(c: TransportConfig) -> MemoryHarness {
                MemoryHarness::new(c)
            }
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 3)]
                async fn $test() {
                    $body.await;
                }
            )*
        }
        mod redis_transport {
            use super::*;
            fn $make(c: TransportConfig) -> RedisHarness {
                RedisHarness::new(c)
            }
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 3)]
                async fn $test() {
                    $body.await;
                }
            )*
        }
    };
}

conformance! { make;
    publishes_one_batch_per_scope: one_batch_per_scope(make(test_config()));
    partitions_by_subscription_and_fans_out: subscription_partitions_and_fans_out(make(test_config()));
    acquire_and_release_are_reference_counted_at_runtime: acquire_release_reference_counted(make(test_config()));
    restart_rewarms_from_one_ttl: rewarms_from_one_ttl(make(test_config()), test_config().ttl);
    authorless_entry_is_skipped_and_counted: authorless_entry_skipped_and_counted(make(test_config()));
    slow_follower_trimmed_past_reports_a_gap: slow_follower_gap_reported(make(small(test_config())));
    caught_up_follower_is_never_charged_a_gap: caught_up_follower_no_gap(make(small(test_config())));
    caught_up_only_after_paging_the_backlog: caught_up_only_after_backlog(make(TransportConfig { read_count: 2, ..test_config() }));
}
