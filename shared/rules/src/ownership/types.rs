//! Types: the `tatara.dev/v1alpha1` CRs the ownership rules read and write
//! (Project, Repository, Task, Issue, MergeRequest), shaped after the CRD
//! schemas in `compat/tatara-crds/`. Every struct keeps the fields we do not
//! model in a flattened `extra` map, so a read-modify-write round trip (the
//! PUT the spec demands) loses nothing.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// API group of every tatara CR.
pub const GROUP: &str = "tatara.dev";
/// API version of every tatara CR.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of every tatara CR.
pub const API_VERSION: &str = "tatara.dev/v1alpha1";

/// Fields a struct does not model, kept verbatim.
pub type Extra = Map<String, Value>;

macro_rules! custom_resource {
    ($(#[$doc:meta])* $name:ident, $spec:ty, $status:ty, $kind:literal, $plural:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub api_version: Option<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub kind: Option<String>,
            #[serde(default)]
            pub metadata: ObjectMeta,
            #[serde(default)]
            pub spec: $spec,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub status: Option<$status>,
            #[serde(flatten)]
            pub extra: Extra,
        }

        impl $name {
            /// `kind` of this CR.
            pub const KIND: &'static str = $kind;
            /// URL plural of this CR.
            pub const PLURAL: &'static str = $plural;

            /// An empty object of this kind named `name`, with apiVersion and kind set.
            pub fn new(name: &str) -> Self {
                let mut o = Self {
                    api_version: Some(API_VERSION.to_string()),
                    kind: Some($kind.to_string()),
                    ..Default::default()
                };
                o.metadata.name = Some(name.to_string());
                o
            }

            /// The object's name, or "" when it has none yet.
            pub fn name(&self) -> &str {
                self.metadata.name.as_deref().unwrap_or("")
            }

            /// The object's owner references (empty when absent).
            pub fn owner_refs(&self) -> &[OwnerReference] {
                self.metadata.owner_references.as_deref().unwrap_or(&[])
            }

            /// Status, created empty on first use.
            pub fn status_mut(&mut self) -> &mut $status {
                self.status.get_or_insert_with(Default::default)
            }
        }

        impl kube_core::Resource for $name {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;
            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(GROUP)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(VERSION)
            }
            fn api_version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(API_VERSION)
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

custom_resource!(
    /// A tatara Project: the settings the ownership rules read.
    Project, ProjectSpec, Extra, "Project", "projects"
);
custom_resource!(
    /// A Repository: per-repository overrides of the maintainer and reporter sets.
    Repository, RepositorySpec, Extra, "Repository", "repositories"
);
custom_resource!(
    /// A Task: the owner of SCM artifacts.
    Task, TaskSpec, TaskStatus, "Task", "tasks"
);
custom_resource!(
    /// An Issue CR: the cluster mirror of a forge issue, owned by Tasks.
    Issue, IssueSpec, ArtifactStatus, "Issue", "issues"
);
custom_resource!(
    /// A MergeRequest CR: the mirror of a forge merge request, owned by Tasks.
    MergeRequest, IssueSpec, MergeRequestStatus, "MergeRequest", "mergerequests"
);
custom_resource!(
    /// A QueuedEvent: a unit of agent work waiting for (or holding) an
    /// admission slot in its project's pool (`queuedevent_types.go`).
    QueuedEvent, QueuedEventSpec, QueuedEventStatus, "QueuedEvent", "queuedevents"
);

/// `Project.spec`, the fields the ownership rules read.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectSpec {
    #[serde(default)]
    pub scm: ScmSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_new_tasks_per_sweep: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_open_tasks: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_agents: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_policy: Option<UpgradePolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueSpec>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `Project.spec.queue`: the admission pools' sizes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_capacity: Option<i64>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl ProjectSpec {
    /// `maxNewTasksPerSweep`, default 5 ("mint at most
    /// Project.spec.maxNewTasksPerSweep (default 5) Tasks").
    pub fn max_new_tasks_per_sweep(&self) -> u64 {
        self.max_new_tasks_per_sweep.map_or(5, |v| v.max(0) as u64)
    }
    /// `maxOpenTasks`, default 6.
    pub fn max_open_tasks(&self) -> u64 {
        self.max_open_tasks.map_or(6, |v| v.max(0) as u64)
    }
    /// `maxConcurrentAgents` with the CRD's default of 3; 0 is the
    /// project's kill switch (`queue_controller.go` admit: "must create NO
    /// agent work at all").
    pub fn max_concurrent_agents(&self) -> i64 {
        self.max_concurrent_agents.unwrap_or(3)
    }
    /// `Project.QueueCapacity()` (`project_types.go:1491-1499`): the normal
    /// pool's size, `queue.capacity`, else `maxConcurrentAgents`, else 3.
    pub fn queue_capacity(&self) -> i64 {
        match self.queue.as_ref().and_then(|q| q.capacity) {
            Some(c) if c > 0 => c,
            _ if self.max_concurrent_agents() > 0 => self.max_concurrent_agents(),
            _ => 3,
        }
    }
    /// `Project.AlertCapacity()` (`project_types.go:1501-1506`): the alert
    /// pool's size, `queue.alertCapacity`, else 1.
    pub fn alert_capacity(&self) -> i64 {
        match self.queue.as_ref().and_then(|q| q.alert_capacity) {
            Some(c) if c > 0 => c,
            _ => 1,
        }
    }
    /// `triggerLabel`, default `tatara` (the CRD default).
    pub fn trigger_label(&self) -> &str {
        self.trigger_label.as_deref().unwrap_or("tatara")
    }
}

/// `Project.spec.scm`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScmSpec {
    #[serde(default)]
    pub bot_login: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintainer_logins: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reporter_logins: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_reaction_scope: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `Project.spec.upgradePolicy`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradePolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt_branch_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_engine_logins: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `Repository.spec`: a non-nil list overrides the project's, `[]` included.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepositorySpec {
    #[serde(default)]
    pub project_ref: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintainer_logins: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reporter_logins: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `Task.spec`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSpec {
    #[serde(default)]
    pub project_ref: String,
    #[serde(default)]
    pub goal: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_park_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documents_tasks: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `Task.status`, the fields the ownership rules read.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub park_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parked_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_entered_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fold_in_flight: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fold_in_flight_since: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documented_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_refs: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mr_refs: Option<Vec<String>>,
    /// The state a park was entered from (`no-outcome` re-drives only from
    /// under-implementation or awaiting-review).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parked_from_state: Option<String>,
    /// Forge events waiting on the Task; a non-bot one not yet consumed is
    /// what releases an UnparkHuman park (`hasNonBotEvent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_events: Option<Vec<TaskEvent>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_reentries: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_reentries: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub human_review_rounds: Option<i64>,
    /// UnparkRetry laps spent on `retryBlocker`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_attempts: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_blocker: Option<String>,
    /// The earliest time an UnparkRetry park may be released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_next_at: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One entry of `Task.status.pendingEvents` (`TaskEvent`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskEvent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub repo: String,
    #[serde(default)]
    pub number: i64,
    #[serde(default)]
    pub author: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unpark_consumed_at: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `QueuedEvent.spec`, the fields admission reads.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueuedEventSpec {
    #[serde(default)]
    pub seq: i64,
    /// `normal` or `alert`: the pool it waits in.
    #[serde(default)]
    pub class: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub project_ref: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    #[serde(default)]
    pub payload: QueuedEventPayload,
    #[serde(flatten)]
    pub extra: Extra,
}

impl QueuedEventSpec {
    /// `EffectiveQueuePriority`: unset is 2.
    pub fn priority(&self) -> i64 {
        self.priority.unwrap_or(2)
    }
}

/// `QueuedEvent.spec.payload`, the fields that name its Task.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueuedEventPayload {
    /// Set on an admission ticket: the pod kind it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_kind: Option<String>,
    /// An existing Task (a stage-driven spawn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<String>,
    /// The fixed Task name a flat mint payload builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_task: Option<Extra>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `QueuedEvent.status`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueuedEventStatus {
    /// `Queued` (or empty: not yet seen) and `Admitted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admitted_at: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `Issue.spec` and `MergeRequest.spec` (the same four required fields).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueSpec {
    #[serde(default)]
    pub number: i64,
    #[serde(default)]
    pub project_ref: String,
    #[serde(default)]
    pub repository_ref: String,
    #[serde(default)]
    pub url: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `Issue.status`, the fields the ownership rules read.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `MergeRequest.status`, the fields the ownership rules read and write.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeRequestStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_branch: Option<String>,
    #[serde(default, rename = "headSHA", skip_serializing_if = "Option::is_none")]
    pub head_sha: Option<String>,
    #[serde(default, rename = "lastBotHeadSHA", skip_serializing_if = "Option::is_none")]
    pub last_bot_head_sha: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership_changed_at: Option<String>,
    #[serde(default, rename = "lastMirroredCommentID", skip_serializing_if = "Option::is_none")]
    pub last_mirrored_comment_id: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Where a Task stands, in the spec's vocabulary, read from the CRD's fields.
///
/// The CRD splits the spec's one "stage" into orthogonal fields: `state`
/// (where the work is; terminal `done` and `rejected`) and `parkReason`
/// ("Empty means NOT PARKED, and that is the whole test"). The spec's
/// `failed(<reason>)` has no state of its own in the CRD: its reasons
/// (`object-too-large`, `fold-adoption-unverified`, ...) are park reasons.
/// [`FAILED_PARK_REASONS`] lists the ones the spec or the CRD descriptions
/// call `failed(...)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "stage", content = "reason")]
pub enum Stage {
    /// Not parked and not terminal: `state` is where the work is.
    Active(String),
    /// `parkReason` set to a reason that is not a failure.
    Parked(String),
    /// `parkReason` set to one of [`FAILED_PARK_REASONS`].
    Failed(String),
    /// `state: done` (the spec's delivered).
    Delivered,
    /// `state: rejected`.
    Rejected,
}

/// Park reasons the spec (or the CRD's own descriptions) name as `failed(...)`.
pub const FAILED_PARK_REASONS: &[&str] = &[
    "object-too-large",
    "fold-adoption-unverified",
    "ci-blocked",
    "head-moving",
    "merge-blocked",
    "deploy-blocked",
    "pod-recreation-exhausted",
];

/// `maxItems` of `Task.status.mrRefs` in the CRD: the API server refuses
/// (422) a Task whose list is longer.
pub const MR_REFS_MAX_ITEMS: usize = 50;

/// The park reason of a parked(backlog-sweep) Task.
pub const BACKLOG_SWEEP: &str = "backlog-sweep";

/// States after approval: a Task in one of them (and not parked) is live work.
pub const POST_APPROVED_STATES: &[&str] = &["under-implementation", "awaiting-review", "merged", "deployed"];

impl Task {
    /// The spec-vocabulary stage of this Task (see [`Stage`]).
    ///
    /// A Task the reconciler has not reached yet (no `status.state`) stands
    /// at its create edge: the CRD's `initialState` ("Empty = new") and
    /// `initialParkReason` ("the park flag a mint stamps ALONGSIDE
    /// InitialState"), so a freshly minted parked(backlog-sweep) Task is
    /// parked, not active, before the operator has written its status.
    pub fn stage(&self) -> Stage {
        let mut status = self.status.clone().unwrap_or_default();
        if status.state.as_deref().unwrap_or("").is_empty() && status.park_reason.as_deref().unwrap_or("").is_empty() {
            status.state = self.spec.initial_state.clone().filter(|s| !s.is_empty());
            status.park_reason = self.spec.initial_park_reason.clone();
        }
        let park = status.park_reason.unwrap_or_default();
        if !park.is_empty() {
            if FAILED_PARK_REASONS.contains(&park.as_str()) {
                return Stage::Failed(park);
            }
            return Stage::Parked(park);
        }
        match status.state.as_deref().unwrap_or("new") {
            "done" => Stage::Delivered,
            "rejected" => Stage::Rejected,
            other => Stage::Active(other.to_string()),
        }
    }

    /// "ACTIVE = stage NOT IN (parked, delivered, rejected, failed)".
    pub fn is_active(&self) -> bool {
        matches!(self.stage(), Stage::Active(_))
    }

    /// Terminal: delivered, rejected or failed.
    pub fn is_terminal(&self) -> bool {
        matches!(self.stage(), Stage::Delivered | Stage::Rejected | Stage::Failed(_))
    }

    /// The reason to name in a bot comment: stateReason, else parkReason.
    pub fn stage_reason(&self) -> String {
        let s = self.status.clone().unwrap_or_default();
        s.state_reason.filter(|r| !r.is_empty()).or(s.park_reason).unwrap_or_default()
    }

    /// `status.mrRefs` (empty when absent): the natural keys of its merge requests.
    pub fn mr_refs(&self) -> &[String] {
        self.status.as_ref().and_then(|s| s.mr_refs.as_deref()).unwrap_or(&[])
    }

    /// `status.foldInFlight` (empty when absent).
    pub fn fold_in_flight(&self) -> &[String] {
        self.status.as_ref().and_then(|s| s.fold_in_flight.as_deref()).unwrap_or(&[])
    }
}

impl Issue {
    /// Natural key `<repositoryRef>#<number>`.
    pub fn key(&self) -> String {
        crate::ownership::naming::natural_key(&self.spec.repository_ref, self.spec.number)
    }
    /// `status.state == "open"`.
    pub fn is_open(&self) -> bool {
        self.status.as_ref().and_then(|s| s.state.as_deref()) == Some("open")
    }
}

impl MergeRequest {
    /// Natural key `<repositoryRef>!<number>` (the operator's `MRKey`).
    pub fn key(&self) -> String {
        crate::ownership::naming::merge_request_key(&self.spec.repository_ref, self.spec.number)
    }
    /// `status.state == "open"`.
    pub fn is_open(&self) -> bool {
        self.status.as_ref().and_then(|s| s.state.as_deref()) == Some("open")
    }
}

/// An owned artifact: the two kinds that carry owner references to Tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ArtifactKind {
    Issue,
    MergeRequest,
}

impl ArtifactKind {
    /// URL plural.
    pub fn plural(self) -> &'static str {
        match self {
            ArtifactKind::Issue => Issue::PLURAL,
            ArtifactKind::MergeRequest => MergeRequest::PLURAL,
        }
    }
}

/// An owner reference to a Task, as every write must carry it: rule 2,
/// "Every owner reference sets blockOwnerDeletion: true. Explicitly, on every
/// write, including the plain ones."
pub fn task_owner_ref(task_name: &str, task_uid: &str, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: API_VERSION.to_string(),
        kind: Task::KIND.to_string(),
        name: task_name.to_string(),
        uid: task_uid.to_string(),
        controller: Some(controller),
        block_owner_deletion: Some(true),
    }
}

#[cfg(test)]
mod tests;
