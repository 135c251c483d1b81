//! Merge request: MR ownership (push/merge agency, `status.ownership`), as
//! distinct from owner references. Classification by author
//! (`ownershipForAuthor`), the flip on a foreign push with its two distinct
//! reasons, the merge gate's exact prefix test, and `AdoptUpgradeMR`'s eight
//! clauses.

use serde::{Deserialize, Serialize};

use super::types::{MergeRequest, Project};

/// `status.ownership: tatara`.
pub const TATARA: &str = "tatara";
/// `status.ownership: external`.
pub const EXTERNAL: &str = "external";
/// "initial - MR was never delegated to tatara".
pub const REASON_INITIAL: &str = "initial";
/// The prefix the merge gate tests, exactly.
pub const EXTERNAL_PUSH: &str = "external-push:";
/// The adopted shape, which must not open the gate.
pub const ADOPTED_EXTERNAL_PUSH: &str = "adopted-external-push:";
/// The takeover reason prefix.
pub const TAKEOVER_REQUESTED_BY: &str = "takeover-requested-by:";
/// The durable adoption-refusal marker on the mirror (`AnnAdoptionRefused`),
/// valued with the refused head SHA. The key is not given by the spec or
/// `facts/`; this one is our assumption.
pub const ANN_ADOPTION_REFUSED: &str = "tatara.dev/adoption-refused";

/// An author the project owns: "scm.botLogin, or a login listed in
/// Project.spec.upgradePolicy.upgradeEngineLogins". Empty is never adoptable.
pub fn is_adoptable_author(project: &Project, author: &str) -> bool {
    if author.is_empty() {
        return false;
    }
    author == project.spec.scm.bot_login
        || project
            .spec
            .upgrade_policy
            .as_ref()
            .and_then(|u| u.upgrade_engine_logins.as_ref())
            .is_some_and(|l| l.iter().any(|x| x == author))
}

/// A status write of MR ownership.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnershipWrite {
    pub ownership: String,
    /// `None`: no ownershipReason is written.
    pub reason: Option<String>,
    pub why: String,
}

/// `ownershipForAuthor`: "classifies a never-seen MR and checks the author
/// only - it never looks at the branch". An owned author is `tatara` with no
/// reason in between; anything else - "a human, an un-allowlisted bot, or an
/// unknown/empty author" - is `external` with reason `initial`.
pub fn ownership_for_author(project: &Project, author: &str) -> OwnershipWrite {
    if is_adoptable_author(project, author) {
        OwnershipWrite {
            ownership: TATARA.into(),
            reason: None,
            why: format!("author {author:?} is one this project owns"),
        }
    } else {
        OwnershipWrite {
            ownership: EXTERNAL.into(),
            reason: Some(REASON_INITIAL.into()),
            why: format!("author {author:?} is not one this project owns: never delegated to tatara"),
        }
    }
}

/// Whether an MR under tatara ownership is an adopted dependency-upgrade MR
/// or one a maintainer handed over: it picks the flip's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MrOrigin {
    HandedOver,
    AdoptedUpgrade,
}

/// The flip on a foreign push: "A push of any commit other than
/// lastBotHeadSHA to the MR's head branch flips ownership from tatara to
/// external, with reason `external-push:<sha>` on an MR a maintainer handed
/// over and `adopted-external-push:<sha>` on an adopted dependency-upgrade MR."
pub fn flip_on_push(mr: &MergeRequest, live_head_sha: &str, origin: MrOrigin) -> Option<OwnershipWrite> {
    let st = mr.status.clone().unwrap_or_default();
    if st.ownership.as_deref() != Some(TATARA) || live_head_sha.is_empty() {
        return None;
    }
    if st.last_bot_head_sha.as_deref() == Some(live_head_sha) {
        return None;
    }
    let prefix = match origin {
        MrOrigin::HandedOver => EXTERNAL_PUSH,
        MrOrigin::AdoptedUpgrade => ADOPTED_EXTERNAL_PUSH,
    };
    Some(OwnershipWrite {
        ownership: EXTERNAL.into(),
        reason: Some(format!("{prefix}{live_head_sha}")),
        why: format!(
            "{}: head {live_head_sha} is not the last bot-pushed head {:?}; stand down from pushing",
            mr.name(),
            st.last_bot_head_sha.unwrap_or_default()
        ),
    })
}

impl OwnershipWrite {
    /// This write as a step on `mr`, guarded by its resourceVersion.
    pub fn action(&self, mr: &MergeRequest) -> super::decision::Action {
        super::decision::Action::SetMergeRequestOwnership {
            name: mr.name().to_string(),
            resource_version: mr.metadata.resource_version.clone(),
            ownership: self.ownership.clone(),
            reason: self.reason.clone(),
            last_bot_head_sha: None,
            why: self.why.clone(),
        }
    }
}

/// The stand-down announcement `DrainOwnershipAnnouncement` posts.
pub const STAND_DOWN_ANNOUNCEMENT: &str = "A commit outside tatara landed on this branch - standing down from pushing. I'll keep reviewing, and the operator will still merge on an approved review. Comment 'take over' to hand it back.";

/// `maxHumanReviewRounds` (5).
pub const MAX_HUMAN_REVIEW_ROUNDS: i64 = 5;

/// Whether a review round may spawn a pod: "An externally-owned MR is exempt
/// from that cap - the round budget bounds ordinary review ping-pong, not a
/// maintainer reclaiming a stood-down MR".
pub fn review_round_allowed(mr: &MergeRequest, human_review_rounds: i64) -> bool {
    let external = mr.status.as_ref().and_then(|s| s.ownership.as_deref()) == Some(EXTERNAL);
    external || human_review_rounds < MAX_HUMAN_REVIEW_ROUNDS
}

/// What `DrainOwnershipAnnouncement` posts for the current flip, if it has
/// not yet: "once, keyed on the flip timestamp". `last_announced` is the
/// `ownershipChangedAt` the previous announcement was posted for. Returns
/// `(key, body)`; record `key` once posted.
pub fn pending_announcement(mr: &MergeRequest, last_announced: Option<&str>) -> Option<(String, String)> {
    let st = mr.status.clone().unwrap_or_default();
    let key = st.ownership_changed_at.filter(|k| !k.is_empty())?;
    if last_announced == Some(key.as_str()) {
        return None;
    }
    let reason = st.ownership_reason.unwrap_or_default();
    let body = match st.ownership.as_deref() {
        Some(EXTERNAL) if reason.starts_with(EXTERNAL_PUSH) || reason.starts_with(ADOPTED_EXTERNAL_PUSH) => {
            STAND_DOWN_ANNOUNCEMENT.to_string()
        }
        // The spec names a take-over announcement but not its words.
        Some(TATARA) if reason.starts_with(TAKEOVER_REQUESTED_BY) => format!(
            "Taking this merge request over at the request of {}: I'll push to this branch and merge once it is approved and green.",
            &reason[TAKEOVER_REQUESTED_BY.len()..]
        ),
        _ => return None,
    };
    Some((key, body))
}

/// The merge gate's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateVerdict {
    pub merge: bool,
    pub why: String,
}

/// "The merge gate merges when status.ownership == tatara or
/// status.ownership == external with a reason prefix external-push:." The
/// prefix test is exact: `adopted-external-push:` does not match it.
pub fn merge_gate(mr: &MergeRequest) -> GateVerdict {
    let st = mr.status.clone().unwrap_or_default();
    let reason = st.ownership_reason.unwrap_or_default();
    match st.ownership.as_deref() {
        Some(TATARA) => GateVerdict { merge: true, why: "ownership is tatara: fully delegated".into() },
        Some(EXTERNAL) if reason.starts_with(EXTERNAL_PUSH) => {
            GateVerdict { merge: true, why: format!("ownership external with reason {reason}: merge-after-stand-down") }
        }
        other => GateVerdict {
            merge: false,
            why: format!("ownership {:?} with reason {reason:?}: human-merged only", other.unwrap_or("")),
        },
    }
}

/// A pull request's head repository as a reason names it: quoted, or
/// "unknown" when the forge did not say (a deleted fork), never Rust's
/// `Some(..)`/`None`.
pub(crate) fn head_repo_named(head_repo: Option<&str>) -> String {
    head_repo.map_or_else(|| "unknown (the forge did not name it)".to_string(), |r| format!("{r:?}"))
}

/// What `AdoptUpgradeMR` reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeCandidate {
    pub author: String,
    pub head_branch: String,
    pub head_sha: String,
    /// `None`: the forge did not say ("an unknown head repo fails closed").
    pub head_repo: Option<String>,
    pub base_repo: String,
    pub labels: Vec<String>,
    /// A Task owns the branch (e.g. its `task/<name>` branch or a takeover's).
    pub branch_owned_by_task: bool,
    /// A live Task owns the mirror CR.
    pub mirror_owned_by_live_task: bool,
    /// The mirror's `AnnAdoptionRefused` value (the refused head SHA).
    pub adoption_refused_sha: Option<String>,
    /// The mirror's `status.ownershipReason`.
    pub mirror_ownership_reason: Option<String>,
}

/// One clause of `AdoptUpgradeMR`, named for the lead and the plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AdoptClause {
    PrefixConfigured,
    BranchHasPrefix,
    AuthorAdoptable,
    NotAFork,
    NotAlreadyOwned,
    NoTriggerLabel,
    NotRefusedForThisSha,
    NotStoodDown,
}

/// The verdict with every failed clause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdoptionVerdict {
    pub adopt: bool,
    pub failed: Vec<AdoptClause>,
    pub why: String,
}

/// `AdoptUpgradeMR`: "Adoption requires all of" eight clauses.
pub fn adopt_upgrade_mr(project: &Project, mr: &UpgradeCandidate) -> AdoptionVerdict {
    let prefix = project.spec.upgrade_policy.as_ref().and_then(|u| u.adopt_branch_prefix.clone()).unwrap_or_default();
    let mut failed = Vec::new();
    let mut why = Vec::new();
    let mut fail = |c: AdoptClause, w: String| {
        failed.push(c);
        why.push(w);
    };
    if prefix.is_empty() {
        fail(AdoptClause::PrefixConfigured, "upgradePolicy.adoptBranchPrefix is empty: adoption is disabled".into());
    } else if !mr.head_branch.starts_with(&prefix) {
        fail(AdoptClause::BranchHasPrefix, format!("head branch {:?} does not start with {prefix:?}", mr.head_branch));
    }
    if !is_adoptable_author(project, &mr.author) {
        fail(AdoptClause::AuthorAdoptable, format!("author {:?} is not adoptable", mr.author));
    }
    if mr.head_repo.as_deref() != Some(mr.base_repo.as_str()) {
        fail(
            AdoptClause::NotAFork,
            format!("head repo {} is not the base repo: no forks, ever", head_repo_named(mr.head_repo.as_deref())),
        );
    }
    if mr.branch_owned_by_task || mr.mirror_owned_by_live_task {
        fail(AdoptClause::NotAlreadyOwned, "a Task owns the branch or a live Task owns the mirror".into());
    }
    if mr.labels.iter().any(|l| l == project.spec.trigger_label()) {
        fail(AdoptClause::NoTriggerLabel, "the MR carries the trigger label: a human asked for a review".into());
    }
    if mr.adoption_refused_sha.as_deref().is_some_and(|s| !s.is_empty() && s == mr.head_sha) {
        fail(AdoptClause::NotRefusedForThisSha, format!("adoption was refused for head {}", mr.head_sha));
    }
    let reason = mr.mirror_ownership_reason.as_deref().unwrap_or("");
    if reason.starts_with(EXTERNAL_PUSH) || reason.starts_with(ADOPTED_EXTERNAL_PUSH) {
        fail(AdoptClause::NotStoodDown, format!("the mirror stood down to an external push ({reason})"));
    }
    AdoptionVerdict {
        adopt: failed.is_empty(),
        why: if why.is_empty() { "every adoption clause holds".into() } else { why.join("; ") },
        failed,
    }
}

#[cfg(test)]
mod tests;
