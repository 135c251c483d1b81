//! Executor: applies ownership decisions to the Kubernetes API (kube). Every
//! write carries the resourceVersion its decision was computed from; a 409
//! means the world moved, so the decision is recomputed from a fresh read
//! and applied again. Deletes are only ever applied as the first step of a
//! freshly computed decision, so a stale plan never deletes a Task whose
//! ownership changed since. Forge steps go to a [`Forge`] the caller gives.

use std::fmt::Debug;

use futures::future::BoxFuture;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use rules::ownership::decision::{Action, Snapshot};
use rules::ownership::types::{ArtifactKind, Issue, MergeRequest, Task};

/// Every way applying an ownership decision fails. Messages say what
/// failed, on which object, and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecutorError {
    /// A rule refused the request (the fold's liveness gate, say).
    #[error(transparent)]
    Rules(#[from] rules::Error),

    /// The Kubernetes API refused a write or read with a Status.
    #[error("Kubernetes API refused {verb} on {kind}/{name}: {message} (HTTP {code}); {}", refusal_hint(*.code))]
    KubeRefused { verb: String, kind: String, name: String, code: u16, message: String },

    /// A Task could not be turned into JSON or back while budgeting it.
    #[error("the Task {name} could not be {what} as JSON: {source}; report this with the Task's YAML")]
    Codec {
        what: &'static str,
        name: String,
        #[source]
        source: serde_json::Error,
    },

    /// The Kubernetes API could not be reached or answered garbage.
    #[error(
        "Kubernetes API call {verb} on {kind}/{name} failed: {source}; check the kubeconfig and that the API server is reachable"
    )]
    Kube {
        verb: String,
        kind: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },

    /// A decision kept conflicting with other writers.
    #[error(
        "{what}: still conflicting after {attempts} recomputations from fresh objects; another writer keeps changing them, retry later"
    )]
    ConflictsExhausted { what: String, attempts: usize },

    /// A decision contains a forge step and no forge client was given.
    #[error("decision step needs the forge ({why}); run with a forge client or apply the printed plan by hand")]
    ForgeUnavailable { why: String },

    /// The forge refused a blocking step; the decision is requeued.
    #[error("forge refused a blocking step ({why}): {message}; nothing after it was applied, the decision is requeued")]
    ForgeRefused { why: String, message: String },
}

impl From<rules::ownership::fold::FoldRefusal> for ExecutorError {
    fn from(r: rules::ownership::fold::FoldRefusal) -> Self {
        ExecutorError::Rules(r.into())
    }
}

use ExecutorError as Error;

/// `Result` with [`ExecutorError`] as the default error.
pub type Result<T, E = ExecutorError> = std::result::Result<T, E>;

/// Applies forge steps (comments, labels, closes, branch deletes).
pub trait Forge: Send + Sync {
    /// Apply one forge step; `Err` carries the forge's refusal text.
    fn apply<'a>(&'a self, action: &'a Action) -> BoxFuture<'a, std::result::Result<(), String>>;
}

/// Spills journal entries to tatara-memory before they are dropped.
pub trait Spill: Send + Sync {
    /// Persist `entries` of Task `task`; `Err` carries why it failed.
    fn spill<'a>(
        &'a self,
        task: &'a str,
        entries: &'a [serde_json::Value],
    ) -> BoxFuture<'a, std::result::Result<(), String>>;
}

/// How a budget-guarded write ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum BudgetOutcome {
    /// Written; `spilled` entries were spilled and dropped first.
    Written { spilled: usize, conflicts: usize },
    /// The spill failed: nothing dropped, nothing written; retry later.
    SpillFailed { why: String },
    /// Nothing left to evict: failed(object-too-large) by a two-field patch.
    FailedTooLarge { why: String },
}

/// What happened to one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Applied,
    /// 409: the decision is stale.
    Conflict,
    /// 404 / 410: the target is already gone.
    Gone,
}

/// What a converged decision did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub applied: Vec<Action>,
    pub conflicts: usize,
    pub recomputations: usize,
}

/// The executor for one namespace.
#[derive(Clone)]
pub struct Executor {
    client: Client,
    namespace: String,
    /// How many 409s one [`Executor::converge`] tolerates.
    pub max_conflicts: usize,
    /// Upper bound on recomputations, conflict or not (a safety net against
    /// a decision that never converges).
    pub max_rounds: usize,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor").field("namespace", &self.namespace).finish()
    }
}

/// What to do about an API refusal, by its HTTP code.
fn refusal_hint(code: u16) -> &'static str {
    match code {
        422 => "the API server rejected the object; the decision is wrong for this object, report it",
        403 => "grant the plugin's identity this verb on tatara.dev resources",
        _ => "retry; if it persists, inspect the object",
    }
}

fn kube_err(verb: &str, kind: &str, name: &str, e: kube::Error) -> Error {
    match e {
        kube::Error::Api(s) => Error::KubeRefused {
            verb: verb.into(),
            kind: kind.into(),
            name: name.into(),
            code: s.code,
            message: s.message,
        },
        other => Error::Kube { verb: verb.into(), kind: kind.into(), name: name.into(), source: Box::new(other) },
    }
}

fn classify<T>(verb: &str, kind: &str, name: &str, r: kube::Result<T>) -> Result<Step> {
    match r {
        Ok(_) => Ok(Step::Applied),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Step::Conflict),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 410 => Ok(Step::Gone),
        Err(e) => Err(kube_err(verb, kind, name, e)),
    }
}

/// The body of a status merge patch: `status`, and the resourceVersion
/// precondition when there is one.
#[derive(Debug, Serialize)]
struct StatusPatch<'a, S> {
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<serde_json::Value>,
    status: &'a S,
}

impl Executor {
    /// An executor writing to `namespace` through `client`.
    pub fn new(client: Client, namespace: &str) -> Self {
        Executor { client, namespace: namespace.to_string(), max_conflicts: 10, max_rounds: 100 }
    }

    /// The kube client this executor writes through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The namespace this executor writes to.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    async fn list<K>(&self) -> Result<Vec<K>>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        let kind = K::kind(&()).to_string();
        let list = self.api::<K>().list(&ListParams::default()).await.map_err(|e| kube_err("list", &kind, "*", e))?;
        Ok(list.items)
    }

    /// A fresh read of everything the rules look at.
    pub async fn snapshot(&self) -> Result<Snapshot> {
        Ok(Snapshot {
            tasks: self.list::<Task>().await?,
            issues: self.list::<Issue>().await?,
            merge_requests: self.list::<MergeRequest>().await?,
        })
    }

    async fn set_owners<K>(
        &self,
        name: &str,
        rv: Option<&String>,
        refs: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
    ) -> Result<Step>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + Serialize
            + Debug,
    {
        let api = self.api::<K>();
        let kind = K::kind(&()).to_string();
        let mut obj = match api.get(name).await {
            Ok(o) => o,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Step::Gone),
            Err(e) => return Err(kube_err("get", &kind, name, e)),
        };
        // The precondition is the version the decision was computed from,
        // not the one just read: a change in between must 409.
        if let Some(rv) = rv {
            obj.meta_mut().resource_version = Some(rv.clone());
        }
        obj.meta_mut().owner_references = Some(refs.to_vec());
        classify("update", &kind, name, api.replace(name, &PostParams::default(), &obj).await)
    }

    /// A merge patch of `status` on `name`'s status subresource, guarded by
    /// `rv` (the version the decision read) when given.
    async fn patch_status<K>(&self, name: &str, status: &(impl Serialize + Debug), rv: Option<&String>) -> Result<Step>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        let patch = StatusPatch { metadata: rv.map(|rv| json!({"resourceVersion": rv})), status };
        let kind = K::kind(&()).to_string();
        classify(
            "patch status",
            &kind,
            name,
            self.api::<K>().patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await,
        )
    }

    /// Apply one step.
    pub async fn apply(&self, action: &Action, forge: Option<&dyn Forge>) -> Result<Step> {
        match action {
            Action::SetOwners { kind, name, resource_version, owner_references, .. } => match kind {
                ArtifactKind::Issue => {
                    self.set_owners::<Issue>(name, resource_version.as_ref(), owner_references).await
                }
                ArtifactKind::MergeRequest => {
                    self.set_owners::<MergeRequest>(name, resource_version.as_ref(), owner_references).await
                }
            },
            Action::SetFoldInFlight { task, resource_version, members, .. } => {
                let api = self.api::<Task>();
                let mut t = match api.get(task).await {
                    Ok(t) => t,
                    Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Step::Gone),
                    Err(e) => return Err(kube_err("get", "Task", task, e)),
                };
                if let Some(rv) = resource_version {
                    t.metadata.resource_version = Some(rv.clone());
                }
                let st = t.status_mut();
                st.fold_in_flight = Some(members.clone());
                if !members.is_empty() {
                    st.fold_in_flight_since = Some(Timestamp::now().to_string());
                }
                classify("update status", "Task", task, api.replace_status(task, &PostParams::default(), &t).await)
            }
            Action::FailTask { task, reason, .. } => {
                // The minimal merge patch: two status fields, nothing else.
                let status = json!({"parkReason": reason, "parkedAt": Timestamp::now().to_string()});
                self.patch_status::<Task>(task, &status, None).await
            }
            Action::SetMergeRequestOwnership {
                name, resource_version, ownership, reason, last_bot_head_sha, ..
            } => {
                let mut status = json!({
                    "ownership": ownership,
                    "ownershipReason": reason,
                    "ownershipChangedAt": Timestamp::now().to_string(),
                });
                if let Some(sha) = last_bot_head_sha {
                    status["lastBotHeadSHA"] = json!(sha);
                }
                self.patch_status::<MergeRequest>(name, &status, resource_version.as_ref()).await
            }
            Action::CreateMergeRequest { merge_request, .. } => classify(
                "create",
                "MergeRequest",
                merge_request.name(),
                self.api::<MergeRequest>().create(&PostParams::default(), merge_request).await,
            ),
            Action::FillMergeRequest { name, resource_version, status, .. } => {
                // Exactly the fields being filled in: a merge patch leaves
                // every other status field as the operator wrote it.
                self.patch_status::<MergeRequest>(name, status, resource_version.as_ref()).await
            }
            Action::SetMrRefs { task, resource_version, mr_refs, .. } => {
                // A merge patch replaces a list whole; the resourceVersion
                // precondition is what keeps a concurrent append from being lost.
                self.patch_status::<Task>(task, &json!({"mrRefs": mr_refs}), resource_version.as_ref()).await
            }
            Action::UnparkTask { task, resource_version, state, .. } => {
                let status = json!({"parkReason": null, "parkedAt": null, "state": state,
                    "stateEnteredAt": Timestamp::now().to_string()});
                self.patch_status::<Task>(task, &status, resource_version.as_ref()).await
            }
            Action::DeleteTask { task, uid, .. } => {
                let dp = DeleteParams {
                    preconditions: Some(Preconditions { uid: uid.clone(), resource_version: None }),
                    ..DeleteParams::default()
                };
                classify("delete", "Task", task, self.api::<Task>().delete(task, &dp).await)
            }
            Action::CreateTask { task, .. } => {
                classify("create", "Task", task.name(), self.api::<Task>().create(&PostParams::default(), task).await)
            }
            Action::CreateIssue { issue, .. } => classify(
                "create",
                "Issue",
                issue.name(),
                self.api::<Issue>().create(&PostParams::default(), issue).await,
            ),
            forge_step => {
                let Some(forge) = forge else {
                    return Err(Error::ForgeUnavailable { why: forge_step.why().to_string() });
                };
                let blocking = matches!(
                    forge_step,
                    Action::PostIssueComment { blocking: true, .. } | Action::StampLabel { blocking: true, .. }
                );
                match forge.apply(forge_step).await {
                    Ok(()) => Ok(Step::Applied),
                    Err(message) if blocking => Err(Error::ForgeRefused { why: forge_step.why().to_string(), message }),
                    Err(message) => {
                        tracing::warn!(step = forge_step.why(), %message, "non-blocking forge step failed");
                        Ok(Step::Applied)
                    }
                }
            }
        }
    }

    /// Update Task `name` (its status when `status`) by `mutate`, inside the
    /// byte budget: "Oldest comments and oldest notes are spilled to
    /// tatara-memory first, and dropped from the CR only on spill success -
    /// and the spill runs outside the retry closure, so a conflict cannot
    /// re-fire it." A 409 re-reads, re-applies `mutate` and the same drop.
    pub async fn update_task_within_budget<F>(
        &self,
        name: &str,
        status: bool,
        spill: &dyn Spill,
        mut mutate: F,
    ) -> Result<BudgetOutcome>
    where
        F: FnMut(&mut Task),
    {
        use rules::ownership::budget::{BudgetPlan, OBJECT_BUDGET_BYTES, plan, without_entries};
        let api = self.api::<Task>();
        let mut spilled: Vec<serde_json::Value> = Vec::new();
        let mut conflicts = 0;
        loop {
            let mut fresh = api.get(name).await.map_err(|e| kube_err("get", "Task", name, e))?;
            mutate(&mut fresh);
            let value = serde_json::to_value(&fresh).map_err(|source| Error::Codec {
                what: "encoded",
                name: name.into(),
                source,
            })?;
            let mut value = without_entries(&value, &spilled);
            match plan(&value, OBJECT_BUDGET_BYTES, Timestamp::now()) {
                BudgetPlan::Fits { .. } => {}
                BudgetPlan::Spill { evict, why, .. } => {
                    let entries: Vec<serde_json::Value> = evict.iter().map(|e| e.entry.clone()).collect();
                    if let Err(message) = spill.spill(name, &entries).await {
                        tracing::warn!(task = name, %message, "spill to tatara-memory failed; nothing dropped");
                        return Ok(BudgetOutcome::SpillFailed { why: format!("{why}; spill failed: {message}") });
                    }
                    tracing::info!(task = name, n = entries.len(), "spilled oldest journal entries");
                    spilled.extend(entries);
                    value = without_entries(&value, &spilled);
                }
                BudgetPlan::Fail { patch, why } => {
                    tracing::error!(task = name, %why, "object too large; failing the Task");
                    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map_err(|e| kube_err("patch status", "Task", name, e))?;
                    return Ok(BudgetOutcome::FailedTooLarge { why });
                }
            }
            let next: Task = serde_json::from_value(value).map_err(|source| Error::Codec {
                what: "decoded after budgeting",
                name: name.into(),
                source,
            })?;
            let r = if status {
                api.replace_status(name, &PostParams::default(), &next).await
            } else {
                api.replace(name, &PostParams::default(), &next).await
            };
            match classify("update", "Task", name, r)? {
                Step::Applied | Step::Gone => {
                    return Ok(BudgetOutcome::Written { spilled: spilled.len(), conflicts });
                }
                Step::Conflict => {
                    conflicts += 1;
                    if conflicts > self.max_conflicts {
                        return Err(Error::ConflictsExhausted {
                            what: format!("budgeted write of Task {name}"),
                            attempts: conflicts,
                        });
                    }
                }
            }
        }
    }

    /// Recompute `decide` from a fresh snapshot and apply it until it asks
    /// for nothing more. A 409 restarts from a fresh read; a delete is only
    /// applied as the first step of a fresh decision.
    pub async fn converge<F>(&self, what: &str, forge: Option<&dyn Forge>, mut decide: F) -> Result<Report>
    where
        F: FnMut(&Snapshot) -> Result<Vec<Action>>,
    {
        let mut report = Report::default();
        for _ in 0..self.max_rounds {
            let snap = self.snapshot().await?;
            let actions = decide(&snap)?;
            if actions.is_empty() {
                return Ok(report);
            }
            for (i, action) in actions.iter().enumerate() {
                if i > 0 && matches!(action, Action::DeleteTask { .. }) {
                    break;
                }
                match self.apply(action, forge).await? {
                    Step::Applied => {
                        // Rule 5's guard logs the violation at ERROR where it
                        // detects it (`Metrics::record_findings`); the repair
                        // that ends it is the good news.
                        if matches!(action, Action::SetOwners { .. }) && action.why().starts_with("repair") {
                            tracing::info!(step = action.why(), "ownership violation repaired");
                        } else {
                            tracing::info!(step = action.why(), "applied");
                        }
                        report.applied.push(action.clone());
                    }
                    Step::Gone => tracing::info!(step = action.why(), "target already gone"),
                    Step::Conflict => {
                        report.conflicts += 1;
                        tracing::info!(step = action.why(), "409 conflict; recomputing from a fresh read");
                        if report.conflicts > self.max_conflicts {
                            return Err(Error::ConflictsExhausted {
                                what: what.to_string(),
                                attempts: report.conflicts,
                            });
                        }
                        break;
                    }
                }
            }
            report.recomputations += 1;
        }
        Err(Error::ConflictsExhausted { what: format!("{what} (did not converge)"), attempts: report.conflicts })
    }
}

#[cfg(test)]
mod tests;
