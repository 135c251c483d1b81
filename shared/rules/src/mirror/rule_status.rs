//! The status of a WatchRule, a ClusterWatchRule and a ClusterProvider, as
//! gitops-reverser's controllers write it, computed from what the watcher
//! observed (no I/O). The rules follow the reference's
//! `internal/controller/watchrule_controller.go:108-221`,
//! `clusterwatchrule_controller.go`, `stream_status.go`,
//! `gittarget_dependency_status.go:13-45` and
//! `internal/watch/stream_readiness.go:30-39,195-335`:
//!
//! - axis conditions first (SourceNamespaceAuthorized on a WatchRule only,
//!   ResourcesResolved, GitTargetReady, StreamsRunning), then
//!   Ready/Reconciling/Stalled derived from them in one precedence
//!   (`stream_status.go` `ruleReadiness`): a refusal or an unresolved rule
//!   stalls; a GitTarget or streams not ready yet keep it progressing;
//! - the condition helpers are those of [`super::status`]
//!   (lastTransitionTime kept while a status does not change).

use serde::Serialize;

use super::source_cluster::Refusal;
use super::source_namespace::CONDITION as SOURCE_NAMESPACE_AUTHORIZED;
use super::status::{
    Condition, ConditionStatus, PROGRESSING, READY, RECONCILING, Readiness, STALLED, STREAMS_RUNNING, SUCCEEDED,
    Verdict, settle,
};
use super::watch_rules::{RuleKind, SourceVerdict};

pub const RESOURCES_RESOLVED: &str = "ResourcesResolved";
pub const GIT_TARGET_READY: &str = "GitTargetReady";

/// ResourcesResolved reasons (watchrule_controller.go:36-37).
pub const RESOLVED: &str = "Resolved";
pub const UNRESOLVED_RESOURCES: &str = "UnresolvedResources";

/// Stream reasons (stream_readiness.go:30-39).
pub const WATCH_ERROR: &str = "WatchError";
pub const WATCH_NOT_PERMITTED: &str = "WatchNotPermitted";
pub const ALL_STREAMS_READY: &str = "AllStreamsReady";
pub const REPLAYING: &str = "Replaying";
pub const NO_RESOLVED_TYPES: &str = "NoResolvedTypes";

/// At most this many not-ready types are named (stream_readiness.go:41).
const PENDING_SAMPLE: usize = 5;

/// The GitTarget Ready reasons that stall a rule rather than keep it
/// waiting (stream_status.go `gitTargetReadyReasonIsStalled`).
const STALLED_TARGET_REASONS: &[&str] = &[
    "ProviderNotFound",
    "BranchNotAllowed",
    "TargetConflict",
    "UnsupportedContent",
    "IgnoreShadowsManagedPath",
    "WriteBoundaryRefused",
    "RenderDoesNotMatchLive",
    "ValidationFailed",
    "EncryptionNotConfigured",
    "WorkerUnavailable",
    "GitTargetNotFound",
    "GitRepoConfigNotFound",
    "GitDestinationInvalid",
    WATCH_ERROR,
    WATCH_NOT_PERMITTED,
];

/// One watched type's stream, as the watcher sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StreamState {
    /// Listed and watching.
    Streaming,
    /// Not listed yet.
    Replaying,
    /// Its list or watch fails; `not_permitted` when refused (403).
    Blocked { not_permitted: bool },
}

impl StreamState {
    /// The reference ranks Blocked over Replaying over Streaming
    /// (stream_readiness.go `streamStateRank`).
    fn rank(self) -> u8 {
        match self {
            StreamState::Streaming => 1,
            StreamState::Replaying => 2,
            StreamState::Blocked { .. } => 3,
        }
    }
}

/// `status.streams` of a rule (watchrule_types.go:215-238).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleStreams {
    pub summary: String,
    pub total: u32,
    pub ready: u32,
    pub replaying: u32,
    pub blocked: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pending_sample: Vec<String>,
    #[serde(skip)]
    pub reason: String,
    #[serde(skip)]
    pub message: String,
}

impl RuleStreams {
    /// `StreamsRunning()`: every resolved type streams, and there is one.
    pub fn running(&self) -> bool {
        self.total > 0 && self.ready == self.total
    }
}

/// The roll-up of a rule's types (stream_readiness.go:207-320): one per
/// type (a type watched in several scopes counts once, at its worst), the
/// not-ready ones named, blocked first.
pub fn rule_streams(types: &[(String, StreamState)]) -> RuleStreams {
    let mut worst: std::collections::BTreeMap<&str, StreamState> = std::collections::BTreeMap::new();
    for (name, state) in types {
        let e = worst.entry(name.as_str()).or_insert(*state);
        if state.rank() > e.rank() {
            *e = *state;
        }
    }
    let mut out = RuleStreams { total: worst.len() as u32, ..RuleStreams::default() };
    let (mut blocked, mut replaying) = (Vec::new(), Vec::new());
    let mut not_permitted = false;
    for (name, state) in &worst {
        match state {
            StreamState::Streaming => out.ready += 1,
            StreamState::Replaying => {
                out.replaying += 1;
                replaying.push(name.to_string());
            }
            StreamState::Blocked { not_permitted: np } => {
                out.blocked += 1;
                not_permitted |= np;
                blocked.push(name.to_string());
            }
        }
    }
    out.summary = format!("{}/{}", out.ready, out.total);
    out.pending_sample = blocked.iter().chain(&replaying).take(PENDING_SAMPLE).cloned().collect();
    let message = |label: &str, names: &[String]| {
        let msg = format!("{}/{} streams running; {} {label}", out.ready, out.total, out.total - out.ready);
        if names.is_empty() {
            msg
        } else {
            let shown: Vec<&str> = names.iter().take(PENDING_SAMPLE).map(String::as_str).collect();
            format!("{msg} ({})", shown.join(", "))
        }
    };
    let (reason, msg) = if out.blocked > 0 {
        (if not_permitted { WATCH_NOT_PERMITTED } else { WATCH_ERROR }, message("blocked", &blocked))
    } else if out.replaying > 0 {
        (REPLAYING, message("replaying", &replaying))
    } else if out.total == 0 {
        (NO_RESOLVED_TYPES, "0/0 streams running; no resolved resource types".to_owned())
    } else {
        (ALL_STREAMS_READY, format!("{}/{} streams running", out.ready, out.total))
    };
    out.reason = reason.into();
    out.message = msg;
    out
}

/// What resolving a rule's types found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Discovery has not answered yet.
    CatalogNotReady,
    /// `types` distinct types watched; `problems` its items that cannot be.
    Resolved { types: usize, problems: Vec<String> },
}

/// What the watcher observed about one rule of its GitTarget.
#[derive(Debug, Clone)]
pub struct RuleObservation<'a> {
    pub kind: RuleKind,
    pub generation: i64,
    pub target_namespace: &'a str,
    pub target_name: &'a str,
    /// The GitTarget's conditions, as just computed.
    pub target: &'a [Condition],
    /// A WatchRule's source-namespace verdict (`None` on a ClusterWatchRule).
    pub source: Option<&'a SourceVerdict>,
    pub resolution: Resolution,
    pub streams: &'a [(String, StreamState)],
}

/// A rule's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleStatus {
    pub observed_generation: i64,
    pub conditions: Vec<Condition>,
    /// `None` when the rule was refused: it runs no streams to sum up.
    pub streams: Option<RuleStreams>,
}

/// A WatchRule's or ClusterWatchRule's status.
pub fn rule(obs: &RuleObservation<'_>, previous: &[Condition], now: &str) -> RuleStatus {
    use ConditionStatus::{False, True};
    let (ns, name) = (obs.target_namespace, obs.target_name);
    let kind = obs.kind.as_str();
    let mut axes: Vec<(&str, Verdict)> = Vec::new();
    let mut streams = None;
    axes.push((GIT_TARGET_READY, git_target_ready(ns, name, obs.target)));
    match obs.source {
        // watchrule_source_namespace.go:169-185: refused, nothing compiled,
        // no streams, stalled with the gate's own reason and message.
        Some(v) if !v.authorized => {
            axes.push((SOURCE_NAMESPACE_AUTHORIZED, Verdict::new(False, v.reason.as_str(), v.message.clone())));
            axes.push((
                STREAMS_RUNNING,
                Verdict::new(
                    False,
                    v.reason.as_str(),
                    "No streams: the rule's source-namespace scope is not authorized",
                ),
            ));
        }
        source => {
            if let Some(v) = source {
                axes.push((SOURCE_NAMESPACE_AUTHORIZED, Verdict::new(True, v.reason.as_str(), v.message.clone())));
            }
            axes.push((RESOURCES_RESOLVED, resources_resolved(&obs.resolution)));
            let s = rule_streams(obs.streams);
            let status = if s.running() { True } else { False };
            axes.push((STREAMS_RUNNING, Verdict::new(status, &s.reason, s.message.clone())));
            streams = Some(s);
        }
    }
    let get = |t: &str| axes.iter().find(|(a, _)| *a == t).map(|(_, v)| v);
    let mut rd = Readiness::new(
        format!("{kind} is ready and monitoring resources via GitTarget '{ns}/{name}'"),
        format!("{kind} is not stalled"),
    );
    // stream_status.go ruleReadiness: the order is the precedence.
    let stall = |rd: &mut Readiness, v: Option<&Verdict>| {
        if let Some(v) = v.filter(|v| v.status == False) {
            rd.stalled(&v.reason, v.message.clone());
        }
    };
    stall(&mut rd, get(SOURCE_NAMESPACE_AUTHORIZED));
    stall(&mut rd, get(RESOURCES_RESOLVED));
    stall(&mut rd, get(GIT_TARGET_READY).filter(|v| STALLED_TARGET_REASONS.contains(&v.reason.as_str())));
    stall(&mut rd, get(STREAMS_RUNNING).filter(|v| v.reason == WATCH_ERROR || v.reason == WATCH_NOT_PERMITTED));
    for (ty, message) in [
        (SOURCE_NAMESPACE_AUTHORIZED, "Establishing source-namespace authorization"),
        (GIT_TARGET_READY, "Waiting for GitTarget to become ready"),
        (STREAMS_RUNNING, "Waiting for streams to run"),
    ] {
        if let Some(v) = get(ty).filter(|v| v.status != True) {
            let reason = if v.reason.is_empty() { PROGRESSING } else { &v.reason };
            let message = if v.message.is_empty() { message.to_owned() } else { v.message.clone() };
            rd.progressing(False, reason, message);
        }
    }
    let mut all: Vec<(&str, Verdict)> = rd.trio().into_iter().collect();
    all.extend(axes);
    RuleStatus { observed_generation: obs.generation, conditions: settle(previous, &all, obs.generation, now), streams }
}

/// ResourcesResolved. The reference is True whenever its catalog is ready
/// ("watching N resource type(s)", manager_catalog.go:415-446) and says
/// nothing of a selector that matched nothing; this resolver knows which
/// item matched nothing and why, so such a rule is False with the items
/// named: a typo is a stall its owner fixes, not a healthy rule.
fn resources_resolved(resolution: &Resolution) -> Verdict {
    use ConditionStatus::{False, True};
    match resolution {
        Resolution::CatalogNotReady => Verdict::new(False, UNRESOLVED_RESOURCES, "API resource catalog is not ready"),
        Resolution::Resolved { types, problems } if problems.is_empty() => {
            Verdict::new(True, RESOLVED, format!("watching {types} resource type(s)"))
        }
        Resolution::Resolved { types, problems } => Verdict::new(
            False,
            UNRESOLVED_RESOURCES,
            format!("watching {types} resource type(s); cannot watch {}", problems.join("; ")),
        ),
    }
}

/// The GitTarget's readiness projected onto a rule
/// (gittarget_dependency_status.go:13-45).
pub fn git_target_ready(ns: &str, name: &str, target: &[Condition]) -> Verdict {
    use ConditionStatus::{False, True, Unknown};
    let find = |t: &str| target.iter().find(|c| c.type_ == t);
    let or = |c: &Condition, reason: &str, message: &str| {
        Verdict::new(
            False,
            if c.reason.is_empty() { reason } else { &c.reason },
            if c.message.is_empty() { message.to_owned() } else { c.message.clone() },
        )
    };
    if let Some(ready) = find(READY) {
        if ready.status == True {
            return Verdict::new(True, SUCCEEDED, format!("GitTarget {ns}/{name} is ready"));
        }
        if let Some(stalled) = find(STALLED).filter(|c| c.status == True) {
            return or(stalled, "Stalled", "GitTarget is stalled");
        }
        return or(ready, PROGRESSING, "GitTarget is not ready yet");
    }
    if let Some(reconciling) = find(RECONCILING).filter(|c| c.status == True) {
        return or(reconciling, PROGRESSING, "GitTarget is reconciling");
    }
    Verdict::new(Unknown, PROGRESSING, format!("Waiting for GitTarget {ns}/{name} to publish Ready"))
}

/// ClusterProvider condition types and reasons (clusterprovider_controller.go:113-168).
pub const VALIDATED: &str = "Validated";
pub const IN_CLUSTER: &str = "InCluster";

/// A ClusterProvider's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderStatus {
    pub observed_generation: i64,
    pub conditions: Vec<Condition>,
}

/// How a ClusterProvider's kubeconfig was judged (`source_cluster`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeConfigCheck {
    /// No `spec.kubeConfig`: the cluster the mirror runs in.
    InCluster,
    /// The Secret (`namespace/name`) holds a usable kubeconfig.
    Validated(String),
    Refused(Refusal),
}

/// A ClusterProvider's Validated and readiness
/// (clusterprovider_controller.go:148-236): without `spec.kubeConfig`,
/// Validated True `InCluster`; with one, `Validated` once its Secret holds
/// a safe kubeconfig, else False with the `KubeConfig*` reason, stalled.
/// It never dials: reachability is the GitTarget's SourceClusterReachable.
pub fn cluster_provider(generation: i64, check: &KubeConfigCheck, previous: &[Condition], now: &str) -> ProviderStatus {
    use ConditionStatus::{False, True};
    let (validated, reason, message) = match check {
        KubeConfigCheck::InCluster => {
            (True, IN_CLUSTER, "in-cluster provider (no kubeConfig); the operator's own cluster".to_owned())
        }
        KubeConfigCheck::Validated(secret) => (True, VALIDATED, format!("kubeconfig Secret {secret} validated")),
        KubeConfigCheck::Refused(r) => (False, r.reason, r.message.clone()),
    };
    let mut rd = Readiness::new(&message, "ClusterProvider is not stalled");
    if validated == False {
        rd.stalled(reason, message.clone());
    }
    let mut all: Vec<(&str, Verdict)> = vec![(VALIDATED, Verdict::new(validated, reason, message))];
    all.extend(rd.trio());
    ProviderStatus { observed_generation: generation, conditions: settle(previous, &all, generation, now) }
}

#[cfg(test)]
mod tests;
