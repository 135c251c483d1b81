//! The commit window: events coalesce until the provider's commit window of
//! silence (or the window fills, or grows old), then go to the sidecar's
//! `Commit` as one call; a list goes to `Reconcile` after the events before
//! it. Calls go in watch order, so Git sees changes in that order; the one
//! overlap is a list sent while the reconcile before it commits (at most
//! two in flight, never two of one type and scope), and a window of
//! events waits for every reconcile before it.
//! A call that fails is retried with the same events (the sidecar makes no
//! commit twice: a change already recorded leaves the tree identical); a
//! push that fails leaves the commits in the sidecar's clone, and an empty
//! window later pushes them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rules::attribution::watch::WatchKind;
use rules::mirror::commit_request::{Carried, Flush, decide};
use rules::mirror::config::{GitProviderSpec, GitTargetSpec, PruneMode, commit_window};
use rules::mirror::watch_rules::{WatchScope, WatchedType};
use rules::mirror::window::WindowPolicy;
use runtime::backoff::Backoff;
use runtime::proto::attribution_client::AttributionClient;
use runtime::proto::{self, CommitRequest, CommitResponse};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tonic::transport::Channel;

use super::commit_request::{Ended, Pending as Request};
use super::metrics::WatchMetrics;
use super::stream::{Item, Listed};

/// How an idle watcher paces its retries of a failed push: soon at first
/// (a remote back after a blip), then at most every 30 s.
fn push_retry() -> Backoff {
    Backoff::new(Duration::from_secs(1), Duration::from_secs(30)).expect("valid bounds")
}
/// Objects per Reconcile message.
const RECONCILE_CHUNK: usize = 200;

/// What the window's calls said about the remote and the prune policy,
/// for the GitTarget's status (`lastPushTime`, `retention`).
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// When a push last succeeded (RFC 3339).
    pub last_push: Option<String>,
    /// Per type, the documents its last reconcile kept because the prune
    /// mode forbids removing them.
    pub kept: BTreeMap<String, u32>,
    /// When a reconcile last reported (`None`: none yet).
    pub kept_at: Option<String>,
    /// The sidecar's last refusal of the target's folder (reason, message);
    /// cleared by the next call it takes (`GitPathAccepted`).
    pub git_path_refused: Option<(String, String)>,
}

/// [`Report`], shared with the status reporter.
pub type Reported = Arc<Mutex<Report>>;

fn note(reported: &Reported, r: &CommitResponse, reconciled: Option<&str>) {
    let mut report = reported.lock().unwrap_or_else(|e| e.into_inner());
    let now = runtime::status::now();
    report.git_path_refused = None;
    if r.push_attempts > 0 && r.push_error.is_empty() {
        report.last_push = Some(now.clone());
    }
    if let Some(ty) = reconciled {
        report.kept.insert(ty.to_owned(), r.kept);
        report.kept_at = Some(now);
    }
}

/// The settings a changed GitTarget or GitProvider changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Live {
    pub policy: WindowPolicy,
    /// Whether a reconcile may remove documents of vanished objects.
    pub prune: bool,
}

impl Live {
    /// A GitTarget's through its GitProvider: the commit window (the
    /// GitTarget's spec.commit.window wins over the provider's
    /// push.commitWindow) and whether its prune mode is Always.
    pub fn of(target: &GitTargetSpec, provider: &GitProviderSpec) -> Result<Self, String> {
        let timers = commit_window(target, provider)?;
        let mut policy = WindowPolicy::new(timers.silence);
        if let Some(max_wait) = timers.max_wait {
            policy.max_wait = max_wait;
        }
        Ok(Live { policy, prune: target.prune_mode() == PruneMode::Always })
    }
}

/// What the window needs besides its items.
pub struct Settings {
    /// The commit window and prune mode now: the status reporter sends a
    /// changed GitTarget's or GitProvider's (live configuration).
    pub live: tokio::sync::watch::Receiver<Live>,
    /// The audit route the watched types' facts arrive on.
    pub route: String,
    pub exclude_users: Vec<String>,
    pub exclude_field_managers: Vec<String>,
    /// Where ended CommitRequests go (a GitTarget's watcher only).
    pub ended: Option<mpsc::Sender<Ended>>,
    pub reported: Reported,
}

struct Pending {
    event: proto::ResolveRequest,
    at: Instant,
}

fn type_ref(route: &str, ty: &WatchedType) -> proto::TypeRef {
    proto::TypeRef {
        route: route.to_owned(),
        group: ty.group.clone(),
        version: ty.version.clone(),
        resource: ty.resource.clone(),
    }
}

fn kind_label(kind: WatchKind) -> &'static str {
    match kind {
        WatchKind::Added => "ADDED",
        WatchKind::Modified => "MODIFIED",
        WatchKind::Deleted => "DELETED",
        WatchKind::Bookmark => "BOOKMARK",
        WatchKind::Error => "ERROR",
    }
}

/// A reconcile sent while the one before it was still committing.
struct InFlight {
    /// The listed type and scope: a later list of the same waits for it,
    /// so an older list never lands after a newer one.
    list: (String, WatchScope),
    call: tokio::task::JoinHandle<bool>,
}

impl InFlight {
    /// Waits for its answer; whether a push is still owed.
    async fn answered(self) -> bool {
        owed(self.call.await)
    }
}

fn owed(answer: Result<bool, tokio::task::JoinError>) -> bool {
    answer.unwrap_or_else(|error| {
        tracing::error!(%error, "a reconcile stopped before its answer; the next window pushes what it left");
        true
    })
}

/// Runs until the item channel closes (every watch stopped), then sends
/// what is pending.
pub async fn run(
    mut rx: mpsc::Receiver<Item>,
    mut client: AttributionClient<Channel>,
    settings: Settings,
    metrics: Arc<WatchMetrics>,
) {
    let mut pending: Vec<Pending> = Vec::new();
    // CommitRequests waiting for their author's window, oldest first.
    let mut requests: Vec<Request> = Vec::new();
    let mut first = Instant::now();
    let mut last = Instant::now();
    let mut push_owed = false;
    let mut retry = push_retry();
    // Sending the next type's list while the previous one commits keeps
    // the sidecar busy: a first start's lists otherwise wait, one by one,
    // for each other's push.
    let settings = Arc::new(settings);
    let mut inflight: Option<InFlight> = None;
    loop {
        if !push_owed {
            retry.reset();
        }
        let flush_at = if pending.is_empty() {
            // Nothing pending: wake only to retry an owed push.
            Instant::now() + if push_owed { retry.next_delay() } else { Duration::from_secs(3600) }
        } else {
            first + settings.live.borrow().policy.flush_at(Duration::ZERO, last.duration_since(first))
        };
        // A request's close delay ends its wait: the window flushes for it.
        let flush_at = requests.iter().map(|r| r.finalize_at).min().map_or(flush_at, |f| f.min(flush_at));
        tokio::select! {
            // Events already delivered go into the window before its timer
            // is looked at: after a long Commit call the backlog waiting in
            // the channel is older than the window's silence, and a timer
            // taken first would send it one or two events per commit.
            biased;
            answer = async { (&mut inflight.as_mut().expect("guarded").call).await }, if inflight.is_some() => {
                inflight = None;
                push_owed = owed(answer);
            }
            item = rx.recv() => match item {
                Some(Item::Event { ty, kind, object, at }) => {
                    if pending.is_empty() {
                        first = at;
                    }
                    last = at;
                    // The object as the watch delivered it; it serializes.
                    let object_json = serde_json::to_vec(&object).unwrap_or_default();
                    pending.push(Pending {
                        event: proto::ResolveRequest {
                            r#type: Some(type_ref(&settings.route, &ty)),
                            event_type: kind_label(kind).into(),
                            object_json,
                        },
                        at,
                    });
                    let policy = settings.live.borrow().policy;
                    if policy.full(pending.len()) || Instant::now() >= first + policy.max_wait {
                        push_owed = flush(&mut client, &settings, &metrics, std::mem::take(&mut pending), &mut requests, &mut inflight).await;
                    }
                }
                Some(Item::Listed(listed)) => {
                    // The events before the list go first: Git sees watch order.
                    if !pending.is_empty() {
                        flush(&mut client, &settings, &metrics, std::mem::take(&mut pending), &mut requests, &mut inflight).await;
                    }
                    let list = (listed.ty.key(), listed.scope.clone());
                    if let Some(f) = inflight.take_if(|f| f.list == list) {
                        push_owed = f.answered().await;
                    }
                    let (mut c, s, m) = (client.clone(), settings.clone(), metrics.clone());
                    let call = tokio::spawn(async move { reconcile(&mut c, &s, &m, listed).await });
                    // At most two in flight: this one, while the one before it finishes.
                    if let Some(f) = inflight.replace(InFlight { list, call }) {
                        push_owed = f.answered().await;
                    }
                }
                Some(Item::Request(request)) => requests.push(request),
                None => {
                    if let Some(f) = inflight.take() {
                        f.answered().await;
                    }
                    if !pending.is_empty() || !requests.is_empty() {
                        flush(&mut client, &settings, &metrics, std::mem::take(&mut pending), &mut requests, &mut inflight).await;
                    }
                    return;
                }
            },
            _ = tokio::time::sleep_until(flush_at) => {
                if pending.is_empty() && !push_owed && !requests.iter().any(|r| r.finalize_at <= Instant::now()) {
                    continue;
                }
                // An empty window still pushes what an earlier one left.
                push_owed = flush(&mut client, &settings, &metrics, std::mem::take(&mut pending), &mut requests, &mut inflight).await;
            }
        }
    }
}

/// Retries `call` until the sidecar answers (it may be restarting beside
/// us, or refusing the target's folder until someone fixes it): nothing
/// the watch delivered is dropped. A refused folder is reported for the
/// GitTarget's status while it lasts.
async fn until_answered<F, Fut>(what: &str, metrics: &WatchMetrics, reported: &Reported, mut call: F) -> CommitResponse
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<CommitResponse>, tonic::Status>>,
{
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10)).expect("valid bounds");
    // The last failure said: a sidecar that keeps refusing for one reason
    // (Git authoring off, a restart) is said once, not every retry.
    let mut last: Option<String> = None;
    let mut failures = 0u32;
    loop {
        match call().await {
            Ok(r) => {
                if failures > 0 {
                    tracing::info!("{what} taken by the sidecar again, after {failures} failed attempt(s)");
                }
                return r.into_inner();
            }
            Err(status) => {
                failures += 1;
                metrics.window_failures.inc();
                let pause = backoff.next_delay();
                if let Some(reason) = status.metadata().get(proto::GIT_PATH_REFUSED).and_then(|v| v.to_str().ok()) {
                    let refused = (reason.to_owned(), status.message().to_owned());
                    let before =
                        reported.lock().unwrap_or_else(|e| e.into_inner()).git_path_refused.replace(refused.clone());
                    // Once per refusal, not per retry.
                    if before.as_ref() != Some(&refused) {
                        tracing::warn!(reason, retry_in = %runtime::kubeconfig::bounds::humanize(pause), "{what} refused: {}; the window is kept and retried until the folder is fixed", status.message());
                    }
                    tokio::time::sleep(pause).await;
                    continue;
                }
                let message = status.message().to_owned();
                if last.as_deref() == Some(message.as_str()) {
                    tracing::debug!(failures, "{what} failed: {message}");
                } else {
                    tracing::warn!(
                        "{what} failed: {message}; retrying in {}, with the same events (the same failure again is logged at debug)",
                        runtime::kubeconfig::bounds::humanize(pause)
                    );
                    last = Some(message);
                }
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// Sends one window, carrying the oldest waiting CommitRequest (a window
/// carries at most one, as the reference's does); returns whether a push
/// is still owed. A request that ends goes to `settings.ended`; one whose
/// author had no change here waits for the next flush, until its close
/// delay ends. The reconcile in flight, if any, is answered first: a
/// window never overtakes a list sent before it.
async fn flush(
    client: &mut AttributionClient<Channel>,
    settings: &Settings,
    metrics: &WatchMetrics,
    window: Vec<Pending>,
    requests: &mut Vec<Request>,
    inflight: &mut Option<InFlight>,
) -> bool {
    if let Some(f) = inflight.take() {
        // Its push, if owed, goes with this window's.
        f.answered().await;
    }
    let events: Vec<proto::ResolveRequest> = window.iter().map(|p| p.event.clone()).collect();
    let carried = (!requests.is_empty()).then(|| {
        let oldest = (0..requests.len()).min_by_key(|&i| requests[i].finalize_at).unwrap_or(0);
        requests.remove(oldest)
    });
    let request = CommitRequest {
        events,
        exclude_users: settings.exclude_users.clone(),
        per_event: settings.live.borrow().policy.per_event(),
        requested: carried.as_ref().map(|r| proto::Requested {
            author: r.attribution.author().to_owned(),
            message: r.message.clone().unwrap_or_default(),
        }),
    };
    let response = until_answered("Commit", metrics, &settings.reported, || {
        let mut c = client.clone();
        let r = request.clone();
        async move { c.commit(r).await }
    })
    .await;
    metrics.windows.inc();
    note(&settings.reported, &response, None);
    if let Some(r) = carried {
        let flushed = Flush {
            events: window.len(),
            carried: response.requested.as_ref().and_then(|c| Carried::parse(&c.outcome, &c.commit)),
            push_error: Some(response.push_error.clone()).filter(|e| !e.is_empty()),
            due: r.finalize_at <= Instant::now(),
        };
        match decide(&flushed) {
            Some(outcome) => {
                if let Some(ended) = &settings.ended {
                    let _ = ended.send(Ended { pending: r, outcome }).await;
                }
            }
            None => requests.push(r),
        }
    }
    report("window", metrics, &response, window.iter().map(|p| p.at))
}

/// Sends one list as a reconcile; returns whether a push is still owed.
async fn reconcile(
    client: &mut AttributionClient<Channel>,
    settings: &Settings,
    metrics: &WatchMetrics,
    listed: Listed,
) -> bool {
    // `_held` is released when this reconcile is done with the objects.
    let Listed { ty, scope, objects, revision, at, held: _held } = listed;
    let namespaces = match scope {
        WatchScope::Namespace(ns) if ty.namespaced => vec![ns.clone()],
        _ => Vec::new(),
    };
    let header = proto::ReconcileHeader {
        r#type: Some(type_ref(&settings.route, &ty)),
        namespaces,
        revision,
        exclude_users: settings.exclude_users.clone(),
        exclude_field_managers: settings.exclude_field_managers.clone(),
        prune: settings.live.borrow().prune,
    };
    // Encoded by the list's own task: one copy of the list, not two.
    let encoded = objects;
    let response = until_answered("Reconcile", metrics, &settings.reported, || {
        let mut chunks: Vec<proto::ReconcileChunk> = encoded
            .chunks(RECONCILE_CHUNK)
            .map(|c| proto::ReconcileChunk { header: None, objects_json: c.to_vec() })
            .collect();
        if chunks.is_empty() {
            chunks.push(proto::ReconcileChunk::default());
        }
        chunks[0].header = Some(header.clone());
        let mut c = client.clone();
        async move { c.reconcile(tokio_stream::iter(chunks)).await }
    })
    .await;
    metrics.reconciles.inc();
    note(&settings.reported, &response, Some(&ty.key()));
    report(&format!("reconcile of {}", ty.key()), metrics, &response, std::iter::once(at))
}

/// Logs one line for the call and records the lag of its events; returns
/// whether a push is still owed.
fn report(what: &str, metrics: &WatchMetrics, r: &CommitResponse, arrivals: impl Iterator<Item = Instant>) -> bool {
    metrics.commits.inc_by(r.commits.len() as u64);
    let authors: std::collections::BTreeSet<&str> =
        r.resolutions.iter().filter(|x| !x.author.is_empty()).map(|x| x.author.as_str()).collect();
    let unresolved = r.resolutions.iter().filter(|x| x.tier == "absent").count();
    let arrivals: Vec<Instant> = arrivals.collect();
    tracing::info!(
        events = r.resolutions.len(),
        commits = r.commits.len(),
        authors = authors.len(),
        unresolved,
        unchanged = r.unchanged,
        excluded = r.excluded,
        secrets_skipped = r.sensitive_skipped,
        kept = r.kept,
        rejected = r.rejected.len(),
        pushed = r.push_error.is_empty(),
        "{what}"
    );
    for rejected in &r.rejected {
        tracing::warn!(%rejected, "the sidecar refused a change");
    }
    if !r.push_error.is_empty() {
        tracing::warn!(error = %r.push_error, "push failed; the commits wait in the sidecar's clone and are pushed next");
        return true;
    }
    let now = Instant::now();
    for at in arrivals {
        metrics.lag_seconds.observe(now.duration_since(at).as_secs_f64());
    }
    false
}
