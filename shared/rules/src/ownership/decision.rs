//! Decisions: the plain, serializable data every rule returns. An executor
//! (`executor` for the Kubernetes API, the `kubectl tatara` plugin for the
//! forge) applies them in order; a human reads the `why` first. Artifacts are
//! seen through [`Artifact`], the one view of an Issue or MergeRequest CR the
//! ownership rules need.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::types::{ArtifactKind, Issue, MergeRequest, MergeRequestStatus, Task};

/// What an ownership rule sees of an Issue or MergeRequest CR.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub kind: ArtifactKind,
    pub name: String,
    pub resource_version: Option<String>,
    pub owner_references: Vec<OwnerReference>,
    pub repository_ref: String,
    pub number: i64,
    /// Mirrored forge state (`open`, `closed`, `merged`).
    pub state: Option<String>,
    /// MergeRequest only: `status.author`.
    pub author: Option<String>,
    /// MergeRequest only: `status.headBranch`.
    pub head_branch: Option<String>,
}

impl Artifact {
    /// Natural key: `<repositoryRef>#<number>` for an Issue,
    /// `<repositoryRef>!<number>` for a MergeRequest.
    pub fn key(&self) -> String {
        match self.kind {
            ArtifactKind::Issue => super::naming::natural_key(&self.repository_ref, self.number),
            ArtifactKind::MergeRequest => super::naming::merge_request_key(&self.repository_ref, self.number),
        }
    }
    /// The owner reference carrying `controller: true`, if exactly one does.
    pub fn controller(&self) -> Option<&OwnerReference> {
        let mut it = self.owner_references.iter().filter(|r| is_controller(r));
        match (it.next(), it.next()) {
            (Some(only), None) => Some(only),
            _ => None,
        }
    }
    /// Whether `uid` is a controller owner of this artifact.
    pub fn controlled_by(&self, uid: &str) -> bool {
        self.owner_references.iter().any(|r| r.uid == uid && is_controller(r))
    }
    /// Whether `uid` holds any owner reference on this artifact.
    pub fn owned_by(&self, uid: &str) -> bool {
        self.owner_references.iter().any(|r| r.uid == uid)
    }
    /// Mirrored state is `open`.
    pub fn is_open(&self) -> bool {
        self.state.as_deref() == Some("open")
    }
}

/// `controller: true` (unset means false).
pub fn is_controller(r: &OwnerReference) -> bool {
    r.controller == Some(true)
}

impl From<&Issue> for Artifact {
    fn from(i: &Issue) -> Self {
        let st = i.status.clone().unwrap_or_default();
        Artifact {
            kind: ArtifactKind::Issue,
            name: i.name().to_string(),
            resource_version: i.metadata.resource_version.clone(),
            owner_references: i.owner_refs().to_vec(),
            repository_ref: i.spec.repository_ref.clone(),
            number: i.spec.number,
            state: st.state,
            author: st.author,
            head_branch: None,
        }
    }
}

impl From<&MergeRequest> for Artifact {
    fn from(m: &MergeRequest) -> Self {
        let st = m.status.clone().unwrap_or_default();
        Artifact {
            kind: ArtifactKind::MergeRequest,
            name: m.name().to_string(),
            resource_version: m.metadata.resource_version.clone(),
            owner_references: m.owner_refs().to_vec(),
            repository_ref: m.spec.repository_ref.clone(),
            number: m.spec.number,
            state: st.state,
            author: st.author,
            head_branch: st.head_branch,
        }
    }
}

/// What a rule needs to know about a Task that holds an owner reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerInfo {
    pub name: String,
    pub uid: String,
    pub created: Option<Timestamp>,
    /// The owner still exists and is not itself being removed (deleted, being
    /// reaped in this pass, or carrying a deletionTimestamp).
    pub surviving: bool,
}

impl OwnerInfo {
    /// An owner seen through its Task.
    pub fn of(task: &Task, surviving: bool) -> Self {
        OwnerInfo {
            name: task.name().to_string(),
            uid: task.metadata.uid.clone().unwrap_or_default(),
            created: task.metadata.creation_timestamp.as_ref().map(|t| t.0),
            surviving: surviving && task.metadata.deletion_timestamp.is_none(),
        }
    }
}

/// One step of a decision. Kubernetes steps carry the resourceVersion they
/// were computed from: the executor writes with it as a precondition and, on
/// 409, recomputes the decision from fresh objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "action")]
pub enum Action {
    /// ONE PUT of the artifact with exactly these owner references.
    SetOwners {
        kind: ArtifactKind,
        name: String,
        resource_version: Option<String>,
        owner_references: Vec<OwnerReference>,
        why: String,
    },
    /// Status update of a Task's `foldInFlight` (empty clears it).
    SetFoldInFlight { task: String, resource_version: Option<String>, members: Vec<String>, why: String },
    /// Park a Task as failed(`reason`) with a minimal status merge patch.
    FailTask { task: String, reason: String, why: String },
    /// Create a Task (a sweep mint, a takeover mint).
    CreateTask { task: Box<Task>, why: String },
    /// Create an Issue mirror CR (adopt-or-create's create half).
    CreateIssue { issue: Box<Issue>, why: String },
    /// Create a MergeRequest mirror CR (a sweep adoption or review mint).
    /// The API server drops `status` on create, so what the mirror says
    /// about the pull request is a second step, [`Action::FillMergeRequest`].
    CreateMergeRequest { merge_request: Box<MergeRequest>, why: String },
    /// Fill in the mirror's status fields that are still unset (a minimal
    /// merge patch of exactly the fields in `status`, guarded by
    /// resourceVersion): what a sweep knows of the pull request, and the
    /// ownership `ownershipForAuthor` gives a never-seen MR.
    FillMergeRequest { name: String, resource_version: Option<String>, status: Box<MergeRequestStatus>, why: String },
    /// Status update of a Task's `mrRefs` to exactly `mr_refs` (a merge
    /// patch guarded by resourceVersion: a list is replaced whole).
    SetMrRefs { task: String, resource_version: Option<String>, mr_refs: Vec<String>, why: String },
    /// Write MR ownership on the mirror's status (a minimal merge patch
    /// guarded by resourceVersion): `ownership`, `ownershipReason` (`None`
    /// removes it), `ownershipChangedAt`, and, on a takeover, `lastBotHeadSHA`.
    SetMergeRequestOwnership {
        name: String,
        resource_version: Option<String>,
        ownership: String,
        reason: Option<String>,
        last_bot_head_sha: Option<String>,
        why: String,
    },
    /// Un-park a Task into `state` (removes `parkReason`; the CRD's enum has
    /// no empty value, so clearing is removal).
    UnparkTask { task: String, resource_version: Option<String>, state: String, why: String },
    /// Delete a Task (guarded by its uid).
    DeleteTask { task: String, uid: Option<String>, why: String },
    /// Post a bot comment on a forge issue. `blocking`: a refusal (403)
    /// stops the decision and requeues it.
    PostIssueComment { repository_ref: String, number: i64, body: String, blocking: bool, why: String },
    /// Stamp a label on a forge issue.
    StampLabel { repository_ref: String, number: i64, label: String, blocking: bool, why: String },
    /// Close a forge merge request.
    CloseMergeRequest { repository_ref: String, number: i64, why: String },
    /// Delete a head branch on the forge.
    DeleteBranch { repository_ref: String, branch: String, why: String },
}

impl Action {
    /// The human-readable reason this step exists.
    pub fn why(&self) -> &str {
        match self {
            Action::SetOwners { why, .. }
            | Action::SetFoldInFlight { why, .. }
            | Action::FailTask { why, .. }
            | Action::DeleteTask { why, .. }
            | Action::CreateTask { why, .. }
            | Action::SetMergeRequestOwnership { why, .. }
            | Action::UnparkTask { why, .. }
            | Action::CreateIssue { why, .. }
            | Action::CreateMergeRequest { why, .. }
            | Action::FillMergeRequest { why, .. }
            | Action::SetMrRefs { why, .. }
            | Action::PostIssueComment { why, .. }
            | Action::StampLabel { why, .. }
            | Action::CloseMergeRequest { why, .. }
            | Action::DeleteBranch { why, .. } => why,
        }
    }

    /// Whether the step talks to the forge rather than the Kubernetes API.
    pub fn is_forge(&self) -> bool {
        matches!(
            self,
            Action::PostIssueComment { .. }
                | Action::StampLabel { .. }
                | Action::CloseMergeRequest { .. }
                | Action::DeleteBranch { .. }
        )
    }
}

/// Everything the ownership rules read from one namespace, at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub tasks: Vec<Task>,
    pub issues: Vec<Issue>,
    pub merge_requests: Vec<MergeRequest>,
}

impl Snapshot {
    /// Every Issue and MergeRequest, as [`Artifact`]s.
    pub fn artifacts(&self) -> Vec<Artifact> {
        self.issues.iter().map(Artifact::from).chain(self.merge_requests.iter().map(Artifact::from)).collect()
    }
    /// Every Task as a potential owner; one being deleted does not survive.
    pub fn owner_infos(&self) -> Vec<OwnerInfo> {
        self.tasks.iter().map(|t| OwnerInfo::of(t, true)).collect()
    }
    /// A Task by name.
    pub fn task(&self, name: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.name() == name)
    }
    /// An Issue by name.
    pub fn issue(&self, name: &str) -> Option<&Issue> {
        self.issues.iter().find(|i| i.name() == name)
    }
    /// The MergeRequest CRs mirroring `<repositoryRef>#<number>` (the
    /// `mrKey` index: by natural key, never by name).
    pub fn merge_requests_for(&self, repository_ref: &str, number: i64) -> Vec<&MergeRequest> {
        self.merge_requests
            .iter()
            .filter(|m| m.spec.repository_ref == repository_ref && m.spec.number == number)
            .collect()
    }
}
