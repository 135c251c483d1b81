//! CommitRequest (`configbutler.ai/v1alpha3`): a one-shot "save now". It
//! finalizes the open commit window of `spec.targetRef` for the request's
//! author, with `spec.message` verbatim, `closeDelaySeconds` after the
//! watcher first sees it. Ported from gitops-reverser
//! (`internal/controller/commitrequest_controller.go`,
//! `commitrequest_finalize.go`, `internal/git/commit_request_attach*.go`):
//!
//! - the requester is attributed first and once. The reference reads an
//!   admission record. Here the requester is the author of the
//!   CommitRequest's own audit fact, resolved as every other author is, so
//!   no admission webhook is needed;
//! - the request waits for a window of its author, until `finalizeAt`.
//!   Every flush of the window before then may carry it. Its message goes on
//!   that author's commit; a window without that author's changes leaves the
//!   request waiting;
//! - at `finalizeAt` the window is flushed, with or without changes, and
//!   the request resolves: Committed (sha), AlreadyPresent (its changes
//!   left the tree as it was), WindowMismatch (the window held only other
//!   authors' changes) or NoWindowInGrace (nothing was pending);
//! - the status carries kstatus' Ready/Reconciling/Stalled plus
//!   AuthorAttributed and Pushed, `status.branch` and `status.sha`.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::attribution::commit::plan::CommitGroup;

use super::status::{Condition, ConditionStatus, READY, RECONCILING, STALLED, Verdict, settle};

/// `spec.message`'s maximum length in bytes (`commitRequestMessageMaxBytes`).
pub const MESSAGE_MAX_BYTES: usize = 1024;
/// `spec.closeDelaySeconds`' maximum (the CRD's `Maximum=300`).
pub const CLOSE_DELAY_MAX_SECONDS: u64 = 300;

pub const AUTHOR_ATTRIBUTED: &str = "AuthorAttributed";
pub const PUSHED: &str = "Pushed";

pub const WAITING_FOR_CLOSE_DELAY: &str = "WaitingForCloseDelay";
pub const COMMITTED: &str = "Committed";
pub const NO_WINDOW_IN_GRACE: &str = "NoWindowInGrace";
pub const WINDOW_MISMATCH: &str = "WindowMismatch";
pub const ALREADY_PRESENT: &str = "AlreadyPresent";
pub const FINALIZE_FAILED: &str = "FinalizeFailed";
/// AuthorAttributed=True: the requester was named by its audit fact (the
/// reference's `AttributedFromAdmission`, from another source).
pub const ATTRIBUTED_FROM_AUDIT: &str = "AttributedFromAudit";
/// AuthorAttributed=False: no fact named the requester.
pub const COMMITTER_FALLBACK: &str = "CommitterFallback";
/// AuthorAttributed=False: the mirror authors every commit as the
/// committer (attribution off), so no actor is sought.
pub const AUTHOR_CAPTURE_DISABLED: &str = "AuthorCaptureDisabled";

const NOT_STALLED: &str = "the CommitRequest is not stalled";
const CLOSE_DELAY: &str =
    "attached to the open commit window; waiting out the close delay before the commit is made and pushed";
const PUSH_PENDING: &str = "the commit has not been pushed yet";
const NO_WINDOW: &str = "no matching open commit window was collected within the grace; nothing was pending to save";
const MISMATCH: &str =
    "the open commit window belongs to a different author or GitTarget; nothing was committed for this request";
const PRESENT: &str = "the change already matches the remote, so no commit was made";
const COMMITTED_MESSAGE: &str = "the open commit window was closed, committed, and pushed";

/// `CommitRequest.spec`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    #[serde(default)]
    pub target_ref: TargetRef,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub close_delay_seconds: Option<i64>,
}

/// `spec.targetRef`: a GitTarget in the CommitRequest's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetRef {
    #[serde(default)]
    pub name: String,
}

impl Spec {
    /// The message to commit with, verbatim, cut to 1024 bytes on a
    /// character boundary (`capCommitRequestMessage`); `None`: the generated one.
    pub fn message(&self) -> Option<String> {
        let m = self.message.as_deref().filter(|m| !m.is_empty())?;
        let mut end = m.len().min(MESSAGE_MAX_BYTES);
        while !m.is_char_boundary(end) {
            end -= 1;
        }
        Some(m[..end].to_string())
    }

    /// The close delay, clamped to the CRD's 0..=300 s.
    pub fn close_delay_seconds(&self) -> u64 {
        self.close_delay_seconds.unwrap_or(0).clamp(0, CLOSE_DELAY_MAX_SECONDS as i64) as u64
    }
}

/// Who asked, as the CommitRequest's own audit fact says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "attribution", content = "author")]
pub enum Attribution {
    /// Its fact named this user.
    Resolved(String),
    /// No fact named anyone: it matches only changes no fact named either.
    Unresolved,
    /// Commits are authored as the committer: no actor is sought.
    NotAttempted,
}

impl Attribution {
    /// The author a window's commit must have for the request to ride it:
    /// "" for a commit no fact attributed.
    pub fn author(&self) -> &str {
        match self {
            Attribution::Resolved(a) => a,
            Attribution::Unresolved | Attribution::NotAttempted => "",
        }
    }

    fn verdict(&self) -> Verdict {
        match self {
            Attribution::Resolved(a) => Verdict::new(
                ConditionStatus::True,
                ATTRIBUTED_FROM_AUDIT,
                format!("the request's audit event names {a}; it finalizes {a}'s open commit window"),
            ),
            Attribution::Unresolved => Verdict::new(
                ConditionStatus::False,
                COMMITTER_FALLBACK,
                "no audit fact names the request's author; it can attach only to a window with no named actor",
            ),
            Attribution::NotAttempted => Verdict::new(
                ConditionStatus::False,
                AUTHOR_CAPTURE_DISABLED,
                "commits are authored as the committer (attribution is off); the request can attach only to a \
                 window with no named actor",
            ),
        }
    }
}

/// What the sidecar did with a request a flush carried
/// (`CommitResponse.requested.outcome`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Carried {
    /// The requester's changes were committed with the message: this commit.
    Committed(String),
    /// The requester had changes, and they left the tree as it was.
    AlreadyPresent,
    /// The window held no change of the requester's.
    NoOpenWindow,
}

impl Carried {
    /// From the wire: `Committed`, `AlreadyPresent`, `NoOpenWindow`.
    pub fn parse(outcome: &str, commit: &str) -> Option<Self> {
        match outcome {
            "Committed" if !commit.is_empty() => Some(Carried::Committed(commit.to_string())),
            "AlreadyPresent" => Some(Carried::AlreadyPresent),
            "NoOpenWindow" => Some(Carried::NoOpenWindow),
            _ => None,
        }
    }

    pub fn label(&self) -> &'static str {
        match self {
            Carried::Committed(_) => "Committed",
            Carried::AlreadyPresent => "AlreadyPresent",
            Carried::NoOpenWindow => "NoOpenWindow",
        }
    }
}

/// A request riding one window, as the sidecar's writer takes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requested {
    /// [`Attribution::author`]: "" matches the changes no fact attributed.
    pub author: String,
    /// `None`: the generated message.
    pub message: Option<String>,
}

/// The commit group the request's message goes on: the requester's last
/// one in the window (the reference's open window is the author's latest
/// run; an earlier run of theirs was closed by another author's change).
pub fn requested_group(groups: &[CommitGroup], requested: &Requested) -> Option<usize> {
    groups.iter().rposition(|g| g.author.as_ref().map_or("", |a| a.username.as_str()) == requested.author)
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum Finalize {
    Committed {
        sha: String,
    },
    AlreadyPresent,
    WindowMismatch,
    NoWindowInGrace,
    /// The commit or its push failed (why).
    Failed {
        why: String,
    },
}

impl Finalize {
    /// The Ready reason it writes.
    pub fn reason(&self) -> &'static str {
        match self {
            Finalize::Committed { .. } => COMMITTED,
            Finalize::AlreadyPresent => ALREADY_PRESENT,
            Finalize::WindowMismatch => WINDOW_MISMATCH,
            Finalize::NoWindowInGrace => NO_WINDOW_IN_GRACE,
            Finalize::Failed { .. } => FINALIZE_FAILED,
        }
    }
}

/// One flush that carried the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flush {
    /// Changes the window sent (any author).
    pub events: usize,
    /// What the sidecar did with the request; `None`: it did not say (a
    /// sidecar that predates CommitRequests).
    pub carried: Option<Carried>,
    /// The push failed (why); the commits wait in the clone.
    pub push_error: Option<String>,
    /// The request's finalizeAt has passed.
    pub due: bool,
}

/// Whether the flush ends the request: a window of its author ends it
/// whenever it flushes (the message rides it); otherwise it waits for one
/// until `finalizeAt`, when the last flush decides.
pub fn decide(flush: &Flush) -> Option<Finalize> {
    match &flush.carried {
        Some(Carried::Committed(sha)) => Some(match &flush.push_error {
            Some(why) => Finalize::Failed {
                why: format!(
                    "committed as {sha}, but the push failed: {why}; the commit is pushed with the next window"
                ),
            },
            None => Finalize::Committed { sha: sha.clone() },
        }),
        Some(Carried::AlreadyPresent) => Some(Finalize::AlreadyPresent),
        Some(Carried::NoOpenWindow) | None if !flush.due => None,
        Some(Carried::NoOpenWindow) => {
            Some(if flush.events > 0 { Finalize::WindowMismatch } else { Finalize::NoWindowInGrace })
        }
        None => Some(Finalize::Failed {
            why: "the sidecar did not report what it did with the request; upgrade it to this watcher's release".into(),
        }),
    }
}

/// Ready/Reconciling/Stalled/Pushed for a request still in flight
/// (`setCommitRequestProgress`).
fn progress() -> [(&'static str, Verdict); 4] {
    use ConditionStatus::{False, True, Unknown};
    [
        (READY, Verdict::new(False, WAITING_FOR_CLOSE_DELAY, CLOSE_DELAY)),
        (RECONCILING, Verdict::new(True, WAITING_FOR_CLOSE_DELAY, CLOSE_DELAY)),
        (STALLED, Verdict::new(False, WAITING_FOR_CLOSE_DELAY, NOT_STALLED)),
        (PUSHED, Verdict::new(Unknown, WAITING_FOR_CLOSE_DELAY, PUSH_PENDING)),
    ]
}

/// The four conditions of a finished request (`applyFinalizeResultToStatus`:
/// a benign no-commit is Ready=True, a failure Stalled=True).
fn finished(f: &Finalize) -> [(&'static str, Verdict); 4] {
    use ConditionStatus::{False, True};
    let reject = |reason: &str, message: &str| {
        [
            (READY, Verdict::new(True, reason, message)),
            (RECONCILING, Verdict::new(False, reason, message)),
            (STALLED, Verdict::new(False, reason, NOT_STALLED)),
            (PUSHED, Verdict::new(False, reason, message)),
        ]
    };
    match f {
        Finalize::Committed { .. } => [
            (READY, Verdict::new(True, COMMITTED, COMMITTED_MESSAGE)),
            (RECONCILING, Verdict::new(False, COMMITTED, COMMITTED_MESSAGE)),
            (STALLED, Verdict::new(False, COMMITTED, NOT_STALLED)),
            (PUSHED, Verdict::new(True, "Pushed", "the commit was pushed to the remote repository")),
        ],
        Finalize::AlreadyPresent => reject(ALREADY_PRESENT, PRESENT),
        Finalize::WindowMismatch => reject(WINDOW_MISMATCH, MISMATCH),
        Finalize::NoWindowInGrace => reject(NO_WINDOW_IN_GRACE, NO_WINDOW),
        Finalize::Failed { why } => [
            (READY, Verdict::new(False, FINALIZE_FAILED, why.clone())),
            (RECONCILING, Verdict::new(False, FINALIZE_FAILED, why.clone())),
            (STALLED, Verdict::new(True, FINALIZE_FAILED, why.clone())),
            (PUSHED, Verdict::new(False, FINALIZE_FAILED, "no commit was pushed")),
        ],
    }
}

/// The status to write: in flight (`outcome` `None`) or finished.
pub fn status(
    previous: &[Condition],
    generation: i64,
    attribution: &Attribution,
    outcome: Option<&Finalize>,
    branch: &str,
    now: &str,
) -> Value {
    let mut next: Vec<(&str, Verdict)> = vec![(AUTHOR_ATTRIBUTED, attribution.verdict())];
    next.extend(match outcome {
        None => progress(),
        Some(f) => finished(f),
    });
    let conditions = settle(previous, &next, generation, now);
    let mut status = json!({"observedGeneration": generation, "conditions": conditions});
    if outcome.is_some() && !branch.is_empty() {
        status["branch"] = json!(branch);
    }
    if let Some(Finalize::Committed { sha }) = outcome {
        status["sha"] = json!(sha);
    }
    status
}

/// Finished already (`commitRequestIsTerminal`: Ready or Stalled True): the
/// watcher leaves it alone, across restarts too.
pub fn is_terminal(conditions: &[Condition]) -> bool {
    conditions.iter().any(|c| (c.type_ == READY || c.type_ == STALLED) && c.status == ConditionStatus::True)
}

#[cfg(test)]
mod tests;
