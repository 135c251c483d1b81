//! The answer `why` prints: who authored the object's current state (or
//! its removal) and on which evidence, which other facts competed and why
//! they lost, the recent history, and, when unresolved, the causes that fit.
//! A pure function of the object, the evidence and the Git history.

use serde::Serialize;

use super::cause::{Cause, unresolved_causes};
use super::explanation::Explanation;
use super::history::{FileChange, HistoryEntry};
use crate::attribution::{ActorKind, Fact, Tier};

/// The object as the API server returned it (or did not).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectState {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    /// `deletionTimestamp` is set: logically absent, a removal (spec §1).
    pub deleting: bool,
    /// The API server answered 404: the answer comes from Git.
    pub deleted: bool,
    /// The object's file in the Git mirror (the layout path); for a type
    /// written only sealed, set only when the mirror holds the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The type is never written in clear text (core Secrets): its file is
    /// a SOPS file, and only when the GitTarget sets `spec.encryption`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub sealed_only: bool,
    /// Why `path` is not set, for a sealed-only type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_path: Option<String>,
}

/// Where a sealed-only object's file is: `sealed_path` when the mirror's
/// history of it (`history`, `None` without a mirror to read) has a commit,
/// else `None` and why. The writer seals these with sops when encryption is
/// on and skips them otherwise (runtime commit/apply.rs `write_sealed`,
/// gitops-reverser internal/git/sops_encryptor.go), so only the mirror can
/// tell which happened.
pub fn sealed_file(
    resource: &str,
    sealed_path: &str,
    history: Option<&[HistoryEntry]>,
) -> (Option<String>, Option<String>) {
    let how = format!(
        "{resource} are written only sealed with sops, to {sealed_path}, when the GitTarget sets spec.encryption, \
         and skipped otherwise (gitopsreverser_mirror_sensitive_skipped_total counts them)"
    );
    match history {
        Some(h) if !h.is_empty() => (Some(sealed_path.to_owned()), None),
        Some(_) => (None, Some(format!("the mirror has no commit of it; {how}"))),
        None => (None, Some(format!("no mirror was read (pass --repo); {how}"))),
    }
}

/// Where the verdict's author was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The fact index (`Explain`).
    Evidence,
    /// The Git mirror's commit and its trailers.
    Git,
    /// Nothing named an author.
    None,
}

/// Who authored the current state (or the removal).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    pub resolved: bool,
    /// The effective user; `None` when unresolved.
    pub author: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub email: String,
    pub actor_kind: ActorKind,
    pub tier: Tier,
    /// What the tier asserts.
    pub asserts: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub verb: String,
    #[serde(rename = "auditID", skip_serializing_if = "String::is_empty")]
    pub audit_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stage_timestamp: String,
    pub source: Source,
    /// The commit the Git answer was read from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// A fact that competed and lost.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Competitor {
    pub tier: Tier,
    pub author: String,
    pub verb: String,
    #[serde(rename = "auditID")]
    pub audit_id: String,
    pub stage_timestamp: String,
    pub lost_because: String,
}

/// A cause, as printed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CauseView {
    pub cause: &'static str,
    pub summary: String,
    pub check: String,
    pub detail: Cause,
}

/// The whole answer; `-o json` / `-o yaml` print it as is.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub object: ObjectState,
    pub route: String,
    /// Where the evidence came from (`socket /path`, `pod ns/name:9090`,
    /// `redis ...`); `None` when none was asked.
    pub evidence_source: Option<String>,
    pub verdict: Verdict,
    pub competing: Vec<Competitor>,
    /// Empty when resolved.
    pub causes: Vec<CauseView>,
    /// Newest first.
    pub history: Vec<HistoryEntry>,
    /// The full evidence, for scripts.
    pub evidence: Option<Explanation>,
}

/// What [`build_report`] needs besides the object.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub route: String,
    pub evidence_source: Option<String>,
    pub evidence: Option<Explanation>,
    /// `None` when no Git mirror was given.
    pub history: Option<Vec<HistoryEntry>>,
    /// Overrides the evidence's own route signal (see [`unresolved_causes`]).
    pub route_ever_fed: Option<bool>,
    /// Unix seconds, now.
    pub now_secs: f64,
}

impl Explanation {
    /// Whether any fact ever arrived on the route, as far as the route health
    /// tells: resolved once means yes; the misrouted warning means no.
    pub fn route_ever_fed(&self) -> Option<bool> {
        self.route.and_then(|h| {
            if h.ever_resolved {
                Some(true)
            } else if h.misrouted {
                Some(false)
            } else {
                None
            }
        })
    }
}

fn unresolved_verdict() -> Verdict {
    Verdict {
        resolved: false,
        author: None,
        display_name: String::new(),
        email: String::new(),
        actor_kind: ActorKind::None,
        tier: Tier::Absent,
        asserts: Tier::Absent.asserts().into(),
        verb: String::new(),
        audit_id: String::new(),
        stage_timestamp: String::new(),
        source: Source::None,
        commit: None,
    }
}

fn git_verdict(h: &HistoryEntry) -> Verdict {
    if h.unresolved {
        return Verdict { commit: Some(h.commit.clone()), ..unresolved_verdict() };
    }
    let tier = h.trailer("Reverser-Tier").and_then(|t| super::explanation::parse_tier(t).ok()).unwrap_or(Tier::Absent);
    let author = h.trailer("Reverser-Actor").map_or_else(|| h.author_name.clone(), str::to_owned);
    Verdict {
        resolved: true,
        actor_kind: ActorKind::of(&author),
        display_name: if h.author_name != author { h.author_name.clone() } else { String::new() },
        email: h.author_email.clone(),
        author: Some(author),
        tier,
        asserts: tier.asserts().into(),
        verb: match h.change {
            FileChange::Delete => "delete".into(),
            _ => String::new(),
        },
        audit_id: h.trailer("Reverser-Audit-ID").unwrap_or_default().to_owned(),
        stage_timestamp: String::new(),
        source: Source::Git,
        commit: Some(h.commit.clone()),
    }
}

/// Builds the answer. The evidence's winner names the author when there is
/// one; otherwise the Git mirror's commit that produced the current state
/// (for a 404, the commit that removed the file) does; otherwise it is
/// unresolved, with the causes that fit.
pub fn build_report(object: ObjectState, inputs: Inputs) -> Report {
    let Inputs { route, evidence_source, evidence, history, route_ever_fed, now_secs } = inputs;
    let history = history.unwrap_or_default();
    let winner = if object.deleted { None } else { evidence.as_ref().and_then(Explanation::winner) };
    let verdict = match winner {
        Some(w) => {
            let f = &w.fact.fact;
            Verdict {
                resolved: true,
                author: Some(f.author.clone()),
                display_name: f.display_name.clone(),
                email: f.email.clone(),
                actor_kind: f.actor_kind(),
                tier: w.tier,
                asserts: w.tier.asserts().into(),
                verb: f.verb.clone(),
                audit_id: f.audit_id.clone(),
                stage_timestamp: f.stage_timestamp.clone(),
                source: Source::Evidence,
                commit: None,
            }
        }
        None => {
            // The commit that made the file what the object now is: the
            // removal for a gone or terminating object, else the newest.
            let from_git = if object.deleted || object.deleting {
                history.iter().find(|h| h.change == FileChange::Delete)
            } else {
                history.first().filter(|h| h.change != FileChange::Delete)
            };
            from_git.map_or_else(unresolved_verdict, git_verdict)
        }
    };
    let winner_tier = winner.map(|w| w.tier);
    // Other facts only: the winner filed under a second tier (uid+rv also
    // files `latest`) is not a competitor, and a fact listed under two
    // tiers is shown once, under the stronger (the candidates' order).
    let mut seen: Vec<&Fact> = winner.map(|w| &w.fact.fact).into_iter().collect();
    let competing = evidence
        .iter()
        .flat_map(|e| e.candidates.iter())
        .filter(|c| {
            let fresh = !c.wins && !seen.contains(&&c.fact.fact);
            seen.push(&c.fact.fact);
            fresh
        })
        .map(|c| Competitor {
            tier: c.tier,
            author: c.fact.fact.author.clone(),
            verb: c.fact.fact.verb.clone(),
            audit_id: c.fact.fact.audit_id.clone(),
            stage_timestamp: c.fact.fact.stage_timestamp.clone(),
            lost_because: match (&c.excluded, winner_tier) {
                (Some(why), _) => why.clone(),
                (None, Some(t)) => format!("a stronger tier answered first ({t})"),
                (None, None) => "the resolver did not choose it".into(),
            },
        })
        .collect();
    let causes = match (&evidence, verdict.resolved) {
        (Some(e), false) => {
            let fed = route_ever_fed.or_else(|| e.route_ever_fed());
            let resource = if object.group.is_empty() {
                object.resource.clone()
            } else {
                format!("{}.{}", object.resource, object.group)
            };
            unresolved_causes(e, &route, &resource, fed, now_secs)
                .into_iter()
                .map(|c| CauseView { cause: c.label(), summary: c.summary(), check: c.check(), detail: c })
                .collect()
        }
        _ => Vec::new(),
    };
    Report { object, route, evidence_source, verdict, competing, causes, history, evidence }
}
