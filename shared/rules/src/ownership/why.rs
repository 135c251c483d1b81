//! `why`: why a Task is where it is, and who works an Issue or MergeRequest,
//! in the operator's own terms. Read only: every answer is what the tatara
//! operator (d22349a) will do next, derived from the same fields its
//! reconcilers read, with the rule cited:
//!
//! - a park: its reason and unpark class (`stage/park.go:87-124`), what
//!   releases it and what would decline the release now (`unparkRule`,
//!   `stage/stage.go`), and its clocks: the retry lane's `retryNextAt` and
//!   laps (`RetryWait`, `MaxUnparkRetries`), the retired-park migration
//!   window (48 h, `unpark.go:372`) and `ParkRetention` (7 d, the reaper);
//! - admission: the QueuedEvents naming the Task, their place in the pool
//!   (`queueOrderBefore`: priority then seq), the pool's capacity and what
//!   holds its slots (`poolInflight`, `queueTaskHoldsSlot`, `ticketSpent`),
//!   and the project kill switch (`maxConcurrentAgents: 0`);
//! - an artifact: the live-owner resolution the sweep makes
//!   (`resolveLiveOwner`, `sweep.go:368-440`): a controller reference naming
//!   a missing Task, or a done Task on an Issue that is not closed, is
//!   dropped by the next sweep and the Issue is an orphan again.

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::decision::{Artifact, Snapshot, is_controller};
use super::park::{UnparkClass, park_reason, unpark_class};
use super::types::{ArtifactKind, BACKLOG_SWEEP, Project, QueuedEvent, Task};

/// `ParkRetention`: a park (except backlog-sweep) ages out and is reaped.
pub const PARK_RETENTION_SECS: i64 = 7 * 24 * 3600;
/// `RetiredParkMigrationWindow`: a retired park older than this is left to age out.
pub const RETIRED_MIGRATION_WINDOW_SECS: i64 = 48 * 3600;
/// `MaxUnparkRetries`: laps of the retry lane before `retry-exhausted`.
pub const MAX_UNPARK_RETRIES: i64 = 5;
/// `MaxMergeReentries` and `MaxDeployReentries`.
pub const MAX_REENTRIES: i64 = 3;
/// `MaxHumanReviewRounds`.
pub const MAX_HUMAN_REVIEW_ROUNDS: i64 = 5;
/// `UnparkRetryBackoffBase` and `UnparkRetryBackoffCap`, in seconds.
pub const RETRY_BACKOFF_BASE_SECS: i64 = 60;
pub const RETRY_BACKOFF_CAP_SECS: i64 = 30 * 60;
/// `starvationBudget`: a priority-2 event older than this reserves a slot.
pub const STARVATION_BUDGET_SECS: i64 = 3600;
/// `AnnRetiredParkMigrated`: the retired-park migration's once-only latch.
pub const RETIRED_PARK_MIGRATED: &str = "tatara.dev/retired-park-migrated";

/// `RetryWait(attempts)`: the wait an attempts-th lap serves, doubling from
/// one minute up to thirty.
pub fn retry_wait_secs(attempts: i64) -> i64 {
    let mut wait = RETRY_BACKOFF_BASE_SECS;
    for _ in 0..attempts.max(0) {
        if wait >= RETRY_BACKOFF_CAP_SECS {
            break;
        }
        wait *= 2;
    }
    wait.min(RETRY_BACKOFF_CAP_SECS)
}

/// A time something will happen (or did), relative to `now`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Clock {
    /// What happens then.
    pub what: String,
    /// RFC 3339.
    pub at: String,
    /// Seconds from now; negative once passed.
    pub in_seconds: i64,
}

impl Clock {
    fn new(what: impl Into<String>, at: Timestamp, now: Timestamp) -> Self {
        // metav1.Time's precision: whole seconds.
        let at = Timestamp::from_second(at.as_second()).unwrap_or(at);
        Clock { what: what.into(), at: at.to_string(), in_seconds: at.as_second() - now.as_second() }
    }
}

/// Why a park holds, and what releases it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParkWhy {
    pub reason: String,
    /// `None`: a reason the operator does not classify (it never re-enters).
    pub class: Option<UnparkClass>,
    pub parked_at: Option<String>,
    /// What will release it, in one sentence.
    pub releases: String,
    /// Why the release would be declined if it were tried now.
    pub held_by: Vec<String>,
    pub clocks: Vec<Clock>,
}

/// One QueuedEvent naming the Task, and where it stands in its pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionWhy {
    pub queued_event: String,
    /// `normal` or `alert`.
    pub class: String,
    pub priority: i64,
    pub seq: i64,
    /// `Queued` or `Admitted`.
    pub state: String,
    /// Queued events of the same pool admitted before this one.
    pub ahead: usize,
    pub capacity: i64,
    /// Slots of the pool held now.
    pub inflight: usize,
    pub why: String,
}

/// One artifact a Task controls or is named on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnedWhy {
    pub kind: ArtifactKind,
    pub name: String,
    pub key: String,
    pub state: Option<String>,
    /// The Task is this artifact's controller owner.
    pub controller: bool,
}

/// Why a Task is where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskWhy {
    /// Always `Task` (beside an artifact's `Issue` or `MergeRequest`).
    pub kind: String,
    pub name: String,
    pub project: String,
    /// `spec.kind`: implement, review, refine, ...
    pub task_kind: Option<String>,
    /// `status.state` (the create edge's `initialState` before the operator
    /// has written one), `new` when neither is set.
    pub state: String,
    /// The one-line answer.
    pub summary: String,
    pub park: Option<ParkWhy>,
    pub admission: Vec<AdmissionWhy>,
    pub owns: Vec<OwnedWhy>,
}

/// Who works an artifact, by the sweep's live-owner resolution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactWhy {
    pub kind: ArtifactKind,
    pub name: String,
    pub key: String,
    pub state: Option<String>,
    /// The controller owner reference's Task name, if any.
    pub controller: Option<String>,
    /// The live owner the sweep resolves (`None`: nobody works it).
    pub live_owner: Option<String>,
    pub summary: String,
    /// MergeRequest: `status.ownership` and its reason.
    pub ownership: Option<String>,
    /// The live owner's story.
    pub owner: Option<Box<TaskWhy>>,
}

/// What `why` reads besides the namespace's Tasks, Issues and MergeRequests.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub snap: &'a Snapshot,
    pub projects: &'a [Project],
    pub queued: &'a [QueuedEvent],
    pub now: Timestamp,
}

fn ts(s: Option<&str>) -> Option<Timestamp> {
    s.and_then(|s| s.parse::<Timestamp>().ok())
}

fn plus(t: Timestamp, secs: i64) -> Timestamp {
    Timestamp::from_second(t.as_second().saturating_add(secs)).unwrap_or(t)
}

fn state_of(task: &Task) -> String {
    let st = task.status.as_ref().and_then(|s| s.state.clone()).filter(|s| !s.is_empty());
    st.or_else(|| task.spec.initial_state.clone().filter(|s| !s.is_empty())).unwrap_or_else(|| "new".into())
}

fn is_done(task: &Task) -> bool {
    let st = task.status.as_ref().and_then(|s| s.state.as_deref()).unwrap_or("");
    st == "done" || st == "rejected"
}

/// `secs` from now for a reader: "in 4m", "2h ago".
pub fn relative(secs: i64) -> String {
    let a = secs.unsigned_abs();
    let text = if a >= 2 * 86400 {
        format!("{}d", a / 86400)
    } else if a >= 2 * 3600 {
        format!("{}h", a / 3600)
    } else if a >= 120 {
        format!("{}m", a / 60)
    } else {
        format!("{a}s")
    };
    if secs < 0 { format!("{text} ago") } else { format!("in {text}") }
}

/// `stage.Live`: the states that run an agent pod.
pub fn live_state(state: &str) -> bool {
    matches!(state, "refined" | "under-implementation" | "awaiting-review")
}

/// `stage.AgentKindFor`: the pod kind a state runs for a Task kind.
fn agent_kind_for(state: &str, kind: &str) -> Option<&'static str> {
    match state {
        "refined" | "under-implementation" => match kind {
            "implement" | "takeover" => Some("implement"),
            "review" => Some("review"),
            "brainstorm" => Some("brainstorm"),
            "incident" => Some("incident"),
            "refine" => Some("refine"),
            "documentation" => Some("documentation"),
            "upgrade" => Some("upgrade"),
            _ => None,
        },
        "awaiting-review" => Some("review"),
        _ => None,
    }
}

/// `queueTaskHoldsSlot`: a Task not done, not parked, mid-mint or live.
fn holds_slot(task: &Task) -> bool {
    if is_done(task) || park_reason(task).is_some() {
        return false;
    }
    let st = task.status.as_ref().and_then(|s| s.state.as_deref()).unwrap_or("");
    st.is_empty() || live_state(st)
}

/// `ticketSpent`: the Task has left the stage the ticket was cut for.
fn ticket_spent(q: &QueuedEvent, task: &Task) -> bool {
    let st = task.status.as_ref().and_then(|s| s.state.as_deref()).unwrap_or("");
    let Some(want) = q.spec.payload.agent_kind.as_deref().filter(|k| !k.is_empty()) else {
        return !(st.is_empty() || st == "new");
    };
    match agent_kind_for(st, task.spec.kind.as_deref().unwrap_or("")) {
        Some(cur) => cur != want,
        None => !(st.is_empty() || st == "new"),
    }
}

fn queued_state(q: &QueuedEvent) -> &str {
    q.status.as_ref().and_then(|s| s.state.as_deref()).unwrap_or("")
}

/// `isQueued`: `Queued`, or not yet stamped.
fn is_queued(q: &QueuedEvent) -> bool {
    matches!(queued_state(q), "" | "Queued")
}

/// The Task a QueuedEvent is for: the admitted Task, the ticket's taskRef,
/// or the mint payload's fixed name.
fn names_task(q: &QueuedEvent, task: &str) -> bool {
    let p = &q.spec.payload;
    let new_task = p.new_task.as_ref().and_then(|n| n.get("name")).and_then(|v| v.as_str());
    [q.status.as_ref().and_then(|s| s.task_ref.as_deref()), p.task_ref.as_deref(), p.name.as_deref(), new_task]
        .into_iter()
        .flatten()
        .any(|n| n == task)
}

/// `queueOrderBefore`: (effective priority, seq) ascending.
fn before(a: &QueuedEvent, b: &QueuedEvent) -> bool {
    (a.spec.priority(), a.spec.seq) < (b.spec.priority(), b.spec.seq)
}

/// `poolInflight`: admitted events of `class` whose Task still holds a slot.
fn pool_inflight(inputs: &Inputs<'_>, project: &str, class: &str) -> usize {
    inputs
        .queued
        .iter()
        .filter(|q| q.spec.project_ref == project && q.spec.class == class && queued_state(q) == "Admitted")
        .filter(|q| {
            let t = q.status.as_ref().and_then(|s| s.task_ref.as_deref()).and_then(|n| inputs.snap.task(n));
            t.is_some_and(|t| holds_slot(t) && !ticket_spent(q, t))
        })
        .count()
}

fn admission(inputs: &Inputs<'_>, task: &Task) -> Vec<AdmissionWhy> {
    let project = inputs.projects.iter().find(|p| p.name() == task.spec.project_ref);
    let mut mine: Vec<&QueuedEvent> = inputs.queued.iter().filter(|q| names_task(q, task.name())).collect();
    mine.sort_by_key(|q| (q.spec.priority(), q.spec.seq));
    mine.into_iter()
        .map(|q| {
            let class = q.spec.class.clone();
            let capacity = project.map_or(if class == "alert" { 1 } else { 3 }, |p| {
                if class == "alert" { p.spec.alert_capacity() } else { p.spec.queue_capacity() }
            });
            let inflight = pool_inflight(inputs, &q.spec.project_ref, &class);
            let ahead = inputs
                .queued
                .iter()
                .filter(|o| o.spec.project_ref == q.spec.project_ref && o.spec.class == class && is_queued(o))
                .filter(|o| before(o, q))
                .count();
            let name = q.name().to_string();
            let why = if !is_queued(q) {
                let at = q.status.as_ref().and_then(|s| s.admitted_at.clone()).unwrap_or_default();
                let spent = inputs.snap.task(task.name()).is_some_and(|t| ticket_spent(q, t));
                if spent {
                    format!("admitted {at}; its slot is spent: the Task left the stage the ticket was cut for")
                } else {
                    format!("admitted {at}; it holds one of the {class} pool's {capacity} slots")
                }
            } else if project.is_some_and(|p| p.spec.max_concurrent_agents() == 0) {
                format!(
                    "held: project {} is paused (maxConcurrentAgents: 0, the kill switch); nothing is admitted until it is raised",
                    q.spec.project_ref
                )
            } else if project.is_none() {
                format!("held: there is no Project {:?} to admit it against", q.spec.project_ref)
            } else if inflight as i64 >= capacity {
                format!(
                    "queued: the {class} pool is full ({inflight} of {capacity} slots held); {ahead} event(s) ahead of it; \
                     it is admitted when a slot frees"
                )
            } else if ahead as i64 + inflight as i64 >= capacity {
                format!(
                    "queued: {ahead} event(s) ahead of it take the {} free slot(s) of the {class} pool first",
                    capacity - inflight as i64
                )
            } else {
                "queued with a free slot: the dispatcher's next pass admits it unless the token budget or the \
                 project's live-pod ceiling holds it"
                    .to_string()
            };
            AdmissionWhy {
                queued_event: name,
                class,
                priority: q.spec.priority(),
                seq: q.spec.seq,
                state: if is_queued(q) { "Queued".into() } else { queued_state(q).to_string() },
                ahead: if is_queued(q) { ahead } else { 0 },
                capacity,
                inflight,
                why,
            }
        })
        .collect()
}

fn owns(snap: &Snapshot, task: &Task) -> Vec<OwnedWhy> {
    let uid = task.metadata.uid.clone().unwrap_or_default();
    let st = task.status.clone().unwrap_or_default();
    let refs: Vec<String> =
        st.issue_refs.unwrap_or_default().into_iter().chain(st.mr_refs.unwrap_or_default()).collect();
    snap.artifacts()
        .into_iter()
        .filter(|a| a.owned_by(&uid) || refs.contains(&a.name))
        .map(|a| OwnedWhy {
            kind: a.kind,
            key: a.key(),
            state: a.state.clone(),
            controller: a.controller().is_some_and(|c| c.uid == uid),
            name: a.name,
        })
        .collect()
}

/// `hasNonBotEvent`: the first pending event by someone other than the bot
/// that no release has consumed yet.
fn pending_human_event<'a>(task: &'a Task, bot: &str) -> Option<&'a super::types::TaskEvent> {
    task.status
        .as_ref()
        .and_then(|s| s.pending_events.as_deref())
        .unwrap_or(&[])
        .iter()
        .find(|e| e.author != bot && e.unpark_consumed_at.is_none())
}

fn count(task: &Task, f: impl Fn(&super::types::TaskStatus) -> Option<i64>) -> i64 {
    task.status.as_ref().and_then(f).unwrap_or(0)
}

/// The park of `task`, explained (`None` when it is not parked); `owned`
/// is what [`owns`] found for it.
fn park(inputs: &Inputs<'_>, task: &Task, owned: &[OwnedWhy]) -> Option<ParkWhy> {
    let reason = park_reason(task)?.to_string();
    let now = inputs.now;
    let st = task.status.clone().unwrap_or_default();
    // `parkedAt`, else `stateEnteredAt` (reaper.go parkedAt).
    let parked_at = st.parked_at.clone().or(st.state_entered_at.clone());
    let since = ts(parked_at.as_deref());
    let retention = |what: &str| since.map(|s| Clock::new(what, plus(s, PARK_RETENTION_SECS), now));
    let class = unpark_class(&reason);
    let project = inputs.projects.iter().find(|p| p.name() == task.spec.project_ref);
    let bot = project.map(|p| p.spec.scm.bot_login.as_str()).unwrap_or("");
    let merged = owned.iter().any(|o| o.kind == ArtifactKind::MergeRequest && o.state.as_deref() == Some("merged"));
    let review = task.spec.kind.as_deref() == Some("review");
    let rounds = count(task, |s| s.human_review_rounds);
    let mut held_by = Vec::new();
    let mut clocks = Vec::new();
    let releases = match class {
        None | Some(UnparkClass::Never) => {
            clocks.extend(retention("ages out (ParkRetention) and the reaper collects it"));
            format!(
                "nothing re-enters a {reason} park (UnparkNever): a human reply on what it owns makes the operator \
                 sever it and mint a new Task for the issue (resumeNoReentryParks); with no reply it ages out, is \
                 reaped, and the next sweep re-mints the still-open issue"
            )
        }
        Some(UnparkClass::Retired) => {
            clocks.extend(retention("ages out (ParkRetention) and the reaper collects it"));
            let migrated = task.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(RETIRED_PARK_MIGRATED));
            let window = since.map(|s| plus(s, RETIRED_MIGRATION_WINDOW_SECS));
            if migrated {
                held_by.push(format!("the retired-park migration already ran on it ({RETIRED_PARK_MIGRATED})"));
            } else if let Some(w) = window {
                if w.as_second() < now.as_second() {
                    held_by.push(
                        "parked longer than the 48h migration window: the operator leaves it to age out".to_string(),
                    );
                } else {
                    clocks.push(Clock::new("the retired-park migration window closes", w, now));
                }
            }
            format!(
                "{reason} was written by a ceiling the operator no longer has (UnparkRetired): its project pass \
                 releases it once, if it was parked less than 48h ago"
            )
        }
        Some(UnparkClass::Human) => {
            if reason == BACKLOG_SWEEP {
                let open: Vec<&str> = owned
                    .iter()
                    .filter(|o| o.kind == ArtifactKind::Issue && o.state.as_deref() != Some("closed"))
                    .map(|o| o.name.as_str())
                    .collect();
                if open.is_empty() {
                    held_by.push("every Issue it owns is closed: the reaper collects it".to_string());
                }
                if let Some(p) = project {
                    let active =
                        inputs.snap.tasks.iter().filter(|t| t.spec.project_ref == p.name() && t.is_active()).count()
                            as u64;
                    if active >= p.spec.max_open_tasks() {
                        held_by.push(format!(
                            "over cap: {active} active Tasks of maxOpenTasks {}; the promotion waits for a slot",
                            p.spec.max_open_tasks()
                        ));
                    }
                }
            } else {
                clocks.extend(retention("ages out (ParkRetention) if nobody answers, and the reaper collects it"));
                let open_work = owned.iter().any(|o| o.state.as_deref() == Some("open"));
                let external = inputs.snap.merge_requests.iter().any(|m| {
                    owned.iter().any(|o| o.name == m.name())
                        && m.status.as_ref().and_then(|s| s.ownership.as_deref()) == Some("external")
                });
                // unparkRule's arms: which reasons refuse a merged merge
                // request, and which are bounded by humanReviewRounds.
                let (merged_blocks, rounds_apply) = match reason.as_str() {
                    "awaiting-human" | "retry-exhausted" => (review, review && !external),
                    "identity-unverified" => (review, review),
                    "handoff-stalled" => (true, true),
                    _ => (false, false),
                };
                if merged_blocks && merged {
                    held_by.push("it owns a merged merge request: a review pod has no legal outcome (#393)".into());
                }
                if rounds_apply && rounds >= MAX_HUMAN_REVIEW_ROUNDS {
                    held_by.push(format!("human review rounds spent ({rounds} of {MAX_HUMAN_REVIEW_ROUNDS})"));
                }
                if !review && matches!(reason.as_str(), "awaiting-human" | "retry-exhausted") && !open_work {
                    held_by
                        .push("it owns no open Issue and no open merge request: nothing is left to talk about".into());
                }
            }
            match pending_human_event(task, bot) {
                Some(e) => format!(
                    "a human comment is pending (by {} on {}#{}): the operator's next unpark pass releases it{}",
                    e.author,
                    e.repo,
                    e.number,
                    if held_by.is_empty() { ", if the project has live-pod room" } else { " unless held as below" }
                ),
                None => format!(
                    "the next non-bot comment on an Issue or merge request it owns (UnparkHuman){}",
                    if reason == BACKLOG_SWEEP {
                        "; it never ages out, it is reaped when its Issues close"
                    } else {
                        ""
                    }
                ),
            }
        }
        Some(UnparkClass::Timer) => {
            let (budget, blocked) = match reason.as_str() {
                "merge-timeout" => (Some(count(task, |s| s.merge_reentries)), "merge-blocked"),
                "deploy-timeout" => (Some(count(task, |s| s.deploy_reentries)), "deploy-blocked"),
                _ => (None, ""),
            };
            if let Some(spent) = budget {
                if spent >= MAX_REENTRIES {
                    held_by.push(format!(
                        "re-entries spent ({spent} of {MAX_REENTRIES}): the next pass re-parks it as {blocked} (UnparkNever)"
                    ));
                }
                format!(
                    "the operator's next unpark pass re-enters it in place (re-entry {} of {MAX_REENTRIES})",
                    (spent + 1).min(MAX_REENTRIES)
                )
            } else {
                let from = st.parked_from_state.clone().unwrap_or_default();
                if from != "under-implementation" && from != "awaiting-review" {
                    held_by.push(format!(
                        "parked from {:?}: only a park from under-implementation or awaiting-review is re-driven (#406)",
                        if from.is_empty() { "-" } else { from.as_str() }
                    ));
                }
                if merged {
                    held_by.push("it owns a merged merge request: a re-implement would duplicate it".into());
                }
                if !held_by.is_empty() {
                    clocks.extend(retention("ages out (ParkRetention) and the reaper collects it"));
                }
                "the operator's next unpark pass re-drives it in place".to_string()
            }
        }
        Some(UnparkClass::Retry) => {
            let attempts = count(task, |s| s.retry_attempts);
            let same = st.retry_blocker.as_deref() == Some(reason.as_str());
            let spent = if same { attempts } else { 0 };
            match ts(st.retry_next_at.as_deref()) {
                None if same && spent >= MAX_UNPARK_RETRIES => held_by.push(format!(
                    "retry laps spent ({spent} of {MAX_UNPARK_RETRIES}): the next pass re-parks it retry-exhausted (UnparkHuman)"
                )),
                None => held_by.push(format!(
                    "not armed yet: the unpark driver arms its first wait ({}) on its next pass",
                    relative(retry_wait_secs(spent)).trim_start_matches("in ")
                )),
                Some(next) if next.as_second() > now.as_second() => {
                    clocks.push(Clock::new(
                        format!("the retry lane re-reads the blocker (lap {spent} of {MAX_UNPARK_RETRIES})"),
                        next,
                        now,
                    ));
                }
                Some(_) => {}
            }
            format!(
                "a backed-off retry (UnparkRetry): when due, the operator re-reads the blocker on the forge and \
                 releases it if {reason} cleared and the project has live-pod room; a standing blocker re-parks \
                 it for a longer wait, and after {MAX_UNPARK_RETRIES} laps it becomes retry-exhausted"
            )
        }
    };
    Some(ParkWhy { reason, class, parked_at, releases, held_by, clocks })
}

/// Why `task` is where it is.
pub fn task(inputs: &Inputs<'_>, task: &Task) -> TaskWhy {
    let state = state_of(task);
    let owned = owns(inputs.snap, task);
    let park = park(inputs, task, &owned);
    let admission = if park.is_none() && !is_done(task) { admission(inputs, task) } else { vec![] };
    let name = task.name().to_string();
    let summary = if task.metadata.deletion_timestamp.is_some() {
        format!("{name} is being deleted: it is no heir and works nothing")
    } else if let Some(p) = &park {
        let class = p.class.map_or("unclassified".to_string(), |c| c.label().to_string());
        let next = match (p.held_by.first(), p.clocks.first()) {
            (Some(held), _) => format!(": {held}"),
            (None, Some(c)) if c.in_seconds > 0 => format!("; next: {} {}", c.what, relative(c.in_seconds)),
            _ => String::new(),
        };
        format!("parked({}, unpark: {class}) at {state}{next}", p.reason)
    } else if is_done(task) {
        format!("{name} has finished ({state}); it works nothing and inherits nothing")
    } else if let Some(q) = admission.iter().find(|a| a.state == "Queued") {
        format!("{state}, waiting for admission: {}", q.why)
    } else if live_state(&state) {
        let pod = task.status.as_ref().and_then(|s| s.pod_name.clone());
        match pod {
            Some(pod) => format!("{state}: its agent pod {pod} is working"),
            None => format!("{state}: an agent stage; no pod is recorded and no QueuedEvent of its is waiting"),
        }
    } else {
        match state.as_str() {
            "new" => "new: the operator triages it on its next pass".to_string(),
            "merged" | "deployed" => format!("{state}: operator-driven, no agent runs in it"),
            other => other.to_string(),
        }
    };
    TaskWhy {
        kind: Task::KIND.to_string(),
        name,
        project: task.spec.project_ref.clone(),
        task_kind: task.spec.kind.clone(),
        state,
        summary,
        park,
        admission,
        owns: owned,
    }
}

/// Who works `artifact`: `resolveLiveOwner`'s verdict, and the owner's story.
pub fn artifact(inputs: &Inputs<'_>, a: &Artifact) -> ArtifactWhy {
    let controller =
        a.owner_references.iter().find(|r| r.kind == Task::KIND && is_controller(r)).map(|r| r.name.clone());
    // The operator gets the controller by NAME (an uncached Get), not by uid.
    let found = controller.as_deref().and_then(|n| inputs.snap.task(n));
    let releasable = |t: &Task| is_done(t) && a.kind == ArtifactKind::Issue && a.state.as_deref() != Some("closed");
    let live_owner = match found {
        Some(t) if !releasable(t) => controller.clone(),
        _ => None,
    };
    let key = a.key();
    let summary = match (&controller, found) {
        (None, _) if a.state.as_deref() == Some("open") && a.kind == ArtifactKind::Issue => format!(
            "{key} is open and controlled by no Task: the next sweep mints a Task for it if its reporter passes the \
             intake gate (see `kubectl tatara sweep`)"
        ),
        (None, _) => format!("{key} is controlled by no Task"),
        (Some(c), None) => format!(
            "{key}'s controller {c} does not exist: the next sweep drops the reference and the {} is mintable again",
            if a.kind == ArtifactKind::Issue { "Issue" } else { "merge request" }
        ),
        (Some(c), Some(t)) if releasable(t) => format!(
            "{key}'s controller {c} has finished ({}) and the Issue is not closed: the next sweep releases it and \
             the Issue is mintable again",
            state_of(t)
        ),
        (Some(c), Some(_)) => format!("{key} is worked by {c}"),
    };
    let ownership = if a.kind == ArtifactKind::MergeRequest {
        inputs.snap.merge_requests.iter().find(|m| m.name() == a.name).and_then(|m| m.status.as_ref()).and_then(|s| {
            s.ownership.as_ref().map(|o| match s.ownership_reason.as_deref().filter(|r| !r.is_empty()) {
                Some(r) => format!("{o} ({r})"),
                None => o.clone(),
            })
        })
    } else {
        None
    };
    let owner = found.filter(|_| live_owner.is_some()).map(|t| Box::new(task(inputs, t)));
    ArtifactWhy {
        kind: a.kind,
        name: a.name.clone(),
        key,
        state: a.state.clone(),
        controller,
        live_owner,
        summary,
        ownership,
        owner,
    }
}

#[cfg(test)]
mod tests;
