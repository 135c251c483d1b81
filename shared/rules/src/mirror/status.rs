//! The status the mirror writes on gitops-reverser's CRs, computed from
//! what it observed (no I/O). It follows the reference's controllers
//! (ref: gitops-reverser `internal/controller/readiness.go`,
//! `gittarget_controller.go:590-640,690-735`, `gitprovider_controller.go:98-145,205-215`,
//! `condition_helper.go`):
//!
//! - gates CONTRIBUTE a verdict; a stall outranks progress, the first
//!   contributor wins a tie, and Ready/Reconciling/Stalled are derived
//!   together from the one answer (kstatus reads the abnormal-true pair:
//!   Stalled=True is Failed, Reconciling=True is InProgress);
//! - a condition whose status is unchanged keeps its lastTransitionTime
//!   (apimachinery `SetStatusCondition`) and its place in the list;
//! - every condition carries the observed generation.

use serde::{Deserialize, Serialize};

use super::encryption::EncryptionCheck;
use super::source_cluster::{Discovery, Refusal, reachability};

/// `True`, `False`, `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

/// A `metav1.Condition`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: ConditionStatus,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub observed_generation: i64,
    #[serde(default)]
    pub last_transition_time: String,
}

/// A condition's value before it is stamped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub status: ConditionStatus,
    pub reason: String,
    pub message: String,
}

impl Verdict {
    pub fn new(status: ConditionStatus, reason: &str, message: impl Into<String>) -> Self {
        Verdict { status, reason: reason.into(), message: message.into() }
    }
}

pub const READY: &str = "Ready";
pub const RECONCILING: &str = "Reconciling";
pub const STALLED: &str = "Stalled";
pub const VALIDATED: &str = "Validated";
pub const GIT_PROVIDER_READY: &str = "GitProviderReady";
pub const STREAMS_RUNNING: &str = "StreamsRunning";

/// The shared Flux reason of a healthy object (ref: `constants.go` `ReasonSucceeded`).
pub const SUCCEEDED: &str = "Succeeded";
pub const PROGRESSING: &str = "Progressing";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Converged,
    Progressing,
    Stalled,
}

/// The accumulator that alone writes Ready/Reconciling/Stalled.
#[derive(Debug, Clone)]
pub struct Readiness {
    when_converged: Verdict,
    not_stalled: String,
    level: Level,
    verdict: Option<Verdict>,
}

impl Readiness {
    /// Converged: Ready=True `Succeeded` with `message`.
    pub fn new(message: impl Into<String>, not_stalled: impl Into<String>) -> Self {
        Readiness {
            when_converged: Verdict::new(ConditionStatus::True, SUCCEEDED, message),
            not_stalled: not_stalled.into(),
            level: Level::Converged,
            verdict: None,
        }
    }

    /// A gate that needs a human.
    pub fn stalled(&mut self, reason: &str, message: impl Into<String>) {
        self.contribute(Level::Stalled, Verdict::new(ConditionStatus::False, reason, message));
    }

    /// A gate expected to clear on its own; `ready` is False when known not
    /// ready yet, Unknown when not established.
    pub fn progressing(&mut self, ready: ConditionStatus, reason: &str, message: impl Into<String>) {
        self.contribute(Level::Progressing, Verdict::new(ready, reason, message));
    }

    fn contribute(&mut self, level: Level, verdict: Verdict) {
        if level > self.level {
            self.level = level;
            self.verdict = Some(verdict);
        }
    }

    /// Ready, Reconciling, Stalled (ref: `readiness.go` `trio`).
    pub fn trio(&self) -> [(&'static str, Verdict); 3] {
        use ConditionStatus::{False, True};
        match (&self.level, &self.verdict) {
            (Level::Stalled, Some(v)) => [
                (READY, v.clone()),
                (RECONCILING, Verdict::new(False, &v.reason, "Reconciliation is stalled")),
                (STALLED, Verdict::new(True, &v.reason, v.message.clone())),
            ],
            (Level::Progressing, Some(v)) => [
                (READY, v.clone()),
                (RECONCILING, Verdict::new(True, &v.reason, v.message.clone())),
                (STALLED, Verdict::new(False, PROGRESSING, "Reconciliation is making progress")),
            ],
            _ => {
                let c = &self.when_converged;
                [
                    (READY, c.clone()),
                    (RECONCILING, Verdict::new(False, &c.reason, "Reconciliation complete")),
                    (STALLED, Verdict::new(False, &c.reason, self.not_stalled.clone())),
                ]
            }
        }
    }
}

/// The conditions `next` stamped with `generation`: an unchanged status
/// keeps `previous`' lastTransitionTime (else `now`), existing types keep
/// their place, new ones follow in `next`'s order, and types `next` does
/// not name are dropped (the mirror owns the whole list).
pub fn settle(previous: &[Condition], next: &[(&str, Verdict)], generation: i64, now: &str) -> Vec<Condition> {
    let stamp = |ty: &str, v: &Verdict| {
        let since = previous
            .iter()
            .find(|p| p.type_ == ty && p.status == v.status)
            .map(|p| p.last_transition_time.clone())
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| now.to_string());
        Condition {
            type_: ty.to_string(),
            status: v.status,
            reason: v.reason.clone(),
            message: v.message.clone(),
            observed_generation: generation,
            last_transition_time: since,
        }
    };
    let mut out: Vec<Condition> =
        previous.iter().filter_map(|p| next.iter().find(|(t, _)| *t == p.type_).map(|(t, v)| stamp(t, v))).collect();
    for (t, v) in next {
        if !out.iter().any(|c| c.type_ == *t) {
            out.push(stamp(t, v));
        }
    }
    out
}

/// The Ready condition among `conditions`.
pub fn ready(conditions: &[Condition]) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == READY)
}

/// A Ready transition worth an Event (ref: `status.go`
/// `recordReadyTransition`): Ready's status or reason changed. `Normal`
/// when it became True, else `Warning`.
pub fn ready_transition<'a>(before: &[Condition], after: &'a [Condition]) -> Option<(&'static str, &'a Condition)> {
    let a = ready(after)?;
    if ready(before).is_some_and(|b| b.status == a.status && b.reason == a.reason) {
        return None;
    }
    Some((if a.status == ConditionStatus::True { "Normal" } else { "Warning" }, a))
}

/// What checking a GitProvider found, first failure first (the
/// reference's order: commit config, then the Secret, then the remote).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderCheck {
    Ok,
    /// The message templates (or the commit window) do not parse.
    CommitConfigInvalid(String),
    /// `spec.secretRef` names a Secret that does not exist.
    SecretNotFound {
        secret: String,
        detail: String,
    },
    /// The Secret exists but holds no usable credential.
    SecretMalformed {
        secret: String,
        detail: String,
    },
    /// The remote could not be reached or refused the credentials.
    ConnectionFailed(String),
}

/// A GitProvider's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderStatus {
    pub observed_generation: i64,
    pub conditions: Vec<Condition>,
}

/// GitProvider: Ready/Reconciling/Stalled with SecretNotFound,
/// SecretMalformed, ConnectionFailed, CommitConfigInvalid.
pub fn git_provider(
    namespace: &str,
    url: &str,
    generation: i64,
    check: &ProviderCheck,
    previous: &[Condition],
    now: &str,
) -> ProviderStatus {
    let mut rd = Readiness::new(format!("Repository connectivity validated for {url}"), "GitProvider is not stalled");
    match check {
        ProviderCheck::Ok => {}
        ProviderCheck::CommitConfigInvalid(m) => rd.stalled("CommitConfigInvalid", m.clone()),
        ProviderCheck::SecretNotFound { secret, detail } => {
            rd.stalled("SecretNotFound", format!("Secret '{secret}' not found in namespace '{namespace}': {detail}"))
        }
        ProviderCheck::SecretMalformed { secret, detail } => {
            rd.stalled("SecretMalformed", format!("Secret '{secret}' malformed: {detail}"))
        }
        ProviderCheck::ConnectionFailed(m) => {
            rd.stalled("ConnectionFailed", format!("Failed to connect to repository: {m}"))
        }
    }
    let trio = rd.trio();
    ProviderStatus { observed_generation: generation, conditions: settle(previous, &trio, generation, now) }
}

/// The GitProvider as a GitTarget sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderView {
    pub name: String,
    pub allowed_branches: Vec<String>,
    pub branch_allowed: bool,
    /// Its Ready, as just computed (`None`: not established).
    pub ready: Option<Condition>,
}

/// The watched types' streams of a GitTarget (ref: `stream_readiness.go`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Streams {
    pub total: u32,
    /// Listed and watching.
    pub ready: u32,
    /// Still in their first list.
    pub replaying: u32,
    /// Refused (403, type gone).
    pub blocked: u32,
}

impl Streams {
    /// `ready/total`, the printer column.
    pub fn summary(&self) -> String {
        format!("{}/{}", self.ready, self.total)
    }

    fn running(&self) -> bool {
        self.total > 0 && self.ready == self.total
    }
}

/// What the watcher observed about its GitTarget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetObservation {
    pub namespace: String,
    pub branch: String,
    pub generation: i64,
    /// `None`: the GitProvider `provider_ref` does not exist.
    pub provider: Option<ProviderView>,
    pub provider_ref: String,
    pub streams: Streams,
    /// The GitTarget's ClusterProvider (`spec.clusterProviderRef`, else
    /// `default`).
    pub cluster_provider: ClusterProviderView,
    /// Whether the watched cluster is a remote one (the ClusterProvider's
    /// `spec.kubeConfig`), and what its discovery last answered.
    pub remote: bool,
    pub discovery: Discovery,
    /// The ClusterProvider's refusal of the GitTarget's namespace
    /// (`source_cluster::admit`).
    pub admission: Option<Refusal>,
    /// `spec.encryption`, checked.
    pub encryption: EncryptionCheck,
    /// The sidecar's last refusal of the folder under `spec.path` (reason,
    /// message; `None`: accepted, or nothing written yet).
    pub git_path_refused: Option<(String, String)>,
}

/// What the GitTarget sees of its ClusterProvider.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterProviderView {
    pub name: String,
    /// `None`: no ClusterProvider of that name (the mirror then uses the
    /// name as the audit route and needs none).
    pub ready: Option<Option<Condition>>,
}

pub const CLUSTER_PROVIDER_READY: &str = "ClusterProviderReady";
pub const ENCRYPTION_CONFIGURED: &str = "EncryptionConfigured";
pub const SOURCE_CLUSTER_REACHABLE: &str = "SourceClusterReachable";
pub const GIT_PATH_ACCEPTED: &str = "GitPathAccepted";

/// GitPathAccepted while a gate before it holds the target (ref:
/// `gittarget_controller.go` `stall`: `NotChecked`).
fn git_path_not_checked(blocked: &str) -> Verdict {
    Verdict::new(ConditionStatus::Unknown, "NotChecked", blocked)
}

/// A GitTarget's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetStatus {
    pub observed_generation: i64,
    pub conditions: Vec<Condition>,
    pub streams: Streams,
}

/// GitTarget: the gates in the reference's precedence (validation stalls
/// first, then the provider's readiness, then the streams).
pub fn git_target(obs: &TargetObservation, previous: &[Condition], now: &str) -> TargetStatus {
    use ConditionStatus::{False, True, Unknown};
    let ns = &obs.namespace;
    let mut rd = Readiness::new("GitTarget is fully reconciled", "GitTarget is not stalled");
    let mut conds: Vec<(&str, Verdict)> = Vec::new();
    match &obs.provider {
        None => {
            let m = format!("Referenced GitProvider '{ns}/{}' not found", obs.provider_ref);
            rd.stalled("ProviderNotFound", m.clone());
            conds.push((VALIDATED, Verdict::new(False, "ProviderNotFound", m)));
            conds.push((
                GIT_PROVIDER_READY,
                Verdict::new(Unknown, "GitProviderNotReady", "the GitProvider does not exist"),
            ));
            conds.push((GIT_PATH_ACCEPTED, git_path_not_checked("Blocked by Validated=False")));
            conds
                .push((STREAMS_RUNNING, Verdict::new(Unknown, "NotReady", "validation failed; streams not evaluated")));
        }
        Some(p) if !p.branch_allowed => {
            let m = format!(
                "Branch '{}' does not match any pattern in allowedBranches list {:?} of GitProvider '{ns}/{}'",
                obs.branch, p.allowed_branches, p.name
            );
            rd.stalled("BranchNotAllowed", m.clone());
            conds.push((VALIDATED, Verdict::new(False, "BranchNotAllowed", m)));
            conds.push((GIT_PROVIDER_READY, provider_ready(ns, p)));
            conds.push((GIT_PATH_ACCEPTED, git_path_not_checked("Blocked by Validated=False")));
            conds
                .push((STREAMS_RUNNING, Verdict::new(Unknown, "NotReady", "validation failed; streams not evaluated")));
        }
        // After the branch, the namespace's admission by the ClusterProvider
        // (gittarget_controller.go:333-347): nothing is watched.
        Some(p) if let Some(refusal) = &obs.admission => {
            rd.stalled(refusal.reason, refusal.message.clone());
            conds.push((VALIDATED, Verdict::new(False, refusal.reason, refusal.message.clone())));
            conds.push((GIT_PROVIDER_READY, provider_ready(ns, p)));
            conds.push((GIT_PATH_ACCEPTED, git_path_not_checked("Blocked by Validated=False")));
            conds
                .push((STREAMS_RUNNING, Verdict::new(Unknown, "NotReady", "validation failed; streams not evaluated")));
        }
        Some(p) => {
            conds.push((VALIDATED, Verdict::new(True, SUCCEEDED, "Provider, branch, and placement validation passed")));
            // A control-plane gate: a failure stalls (evaluateEncryptionGate).
            let encryption = match &obs.encryption {
                EncryptionCheck::NotRequired => {
                    Verdict::new(True, "NotRequired", "SOPS age encryption is not enabled for this GitTarget")
                }
                EncryptionCheck::Ready => Verdict::new(True, SUCCEEDED, "Encryption configuration is valid"),
                EncryptionCheck::InvalidConfig(m) => Verdict::new(False, "InvalidConfig", m.clone()),
                EncryptionCheck::MissingSecret(m) => Verdict::new(False, "MissingSecret", m.clone()),
                EncryptionCheck::SecretCreateDisabled(m) => Verdict::new(False, "SecretCreateDisabled", m.clone()),
            };
            let encryption_blocks = encryption.status == False;
            if encryption_blocks {
                rd.stalled(&encryption.reason, encryption.message.clone());
            }
            conds.push((ENCRYPTION_CONFIGURED, encryption));
            // The folder (ref: `gitPathAxis`): terminal, it needs a human; the
            // first stall after the control-plane gates.
            let git_path = match &obs.git_path_refused {
                _ if encryption_blocks => git_path_not_checked("Blocked by EncryptionConfigured=False"),
                None => Verdict::new(True, super::acceptance::ACCEPTED, "GitTarget path accepted"),
                Some((reason, message)) => {
                    rd.stalled(reason, message.clone());
                    Verdict::new(False, reason, message.clone())
                }
            };
            conds.push((GIT_PATH_ACCEPTED, git_path));
            let provider = provider_ready(ns, p);
            if provider.status == False {
                rd.progressing(False, &provider.reason, provider.message.clone());
            }
            conds.push((GIT_PROVIDER_READY, provider));
            // Then the source side, as the reference's gates order them
            // (gittarget_controller.go:603-632): a ClusterProvider not Ready,
            // then a source not reachable (False) or not established (Unknown).
            let cp = cluster_provider_ready(&obs.cluster_provider);
            if cp.status == False {
                rd.progressing(False, &cp.reason, cp.message.clone());
            }
            let reach = reachability(obs.remote, &obs.discovery);
            if reach.status != True {
                rd.progressing(reach.status, &reach.reason, reach.message.clone());
            }
            conds.push((SOURCE_CLUSTER_REACHABLE, reach));
            conds.push((CLUSTER_PROVIDER_READY, cp));
            let s = &obs.streams;
            let streams = if s.running() {
                Verdict::new(True, SUCCEEDED, format!("{} watched type(s) streaming", s.total))
            } else if s.total == 0 {
                Verdict::new(False, "NotReady", "no WatchRule or ClusterWatchRule resolves to a served type")
            } else {
                Verdict::new(False, "NotReady", format!("{} of {} watched type(s) streaming", s.ready, s.total))
            };
            if streams.status != True {
                rd.progressing(False, &streams.reason, streams.message.clone());
            }
            conds.push((STREAMS_RUNNING, streams));
        }
    }
    let mut all: Vec<(&str, Verdict)> = rd.trio().into_iter().collect();
    all.extend(conds);
    TargetStatus {
        observed_generation: obs.generation,
        conditions: settle(previous, &all, obs.generation, now),
        streams: obs.streams,
    }
}

/// The ClusterProvider's Ready projected onto the GitTarget (ref:
/// `gittarget_source_cluster.go` `clusterProviderReadiness`). Without a
/// ClusterProvider the reference cannot reconcile at all; the mirror can
/// (it needs one only to delegate source namespaces), so that is Unknown,
/// which holds nothing up.
fn cluster_provider_ready(cp: &ClusterProviderView) -> Verdict {
    use ConditionStatus::{False, True, Unknown};
    const NOT_READY: &str = "ClusterProviderNotReady";
    let name = &cp.name;
    match &cp.ready {
        None => Verdict::new(
            Unknown,
            NOT_READY,
            format!(
                "ClusterProvider {name:?} does not exist; its name is the audit route, and no namespace is delegated"
            ),
        ),
        Some(None) => Verdict::new(
            Unknown,
            NOT_READY,
            format!("referenced ClusterProvider {name:?} has not reported readiness yet"),
        ),
        Some(Some(c)) if c.status == True => {
            Verdict::new(True, "ClusterProviderReady", format!("referenced ClusterProvider {name:?} is Ready"))
        }
        Some(Some(c)) if c.status == False => Verdict::new(
            False,
            NOT_READY,
            if c.message.is_empty() {
                format!("referenced ClusterProvider {name:?} is not Ready")
            } else {
                format!("referenced ClusterProvider {name:?} is not Ready: {}", c.message)
            },
        ),
        Some(Some(_)) => {
            Verdict::new(Unknown, NOT_READY, format!("referenced ClusterProvider {name:?} readiness is unknown"))
        }
    }
}

/// The GitProvider's Ready projected onto the GitTarget (ref:
/// `gittarget_source_cluster.go` `gitProviderReadiness`).
fn provider_ready(ns: &str, p: &ProviderView) -> Verdict {
    use ConditionStatus::{False, True, Unknown};
    match &p.ready {
        None => Verdict::new(
            Unknown,
            "GitProviderNotReady",
            format!("referenced GitProvider {ns}/{} has not reported readiness yet", p.name),
        ),
        Some(c) if c.status == True => {
            Verdict::new(True, "GitProviderReady", format!("referenced GitProvider {ns}/{} is ready", p.name))
        }
        Some(c) => Verdict::new(
            False,
            "GitProviderNotReady",
            format!("referenced GitProvider {ns}/{} is not ready: {}: {}", p.name, c.reason, c.message),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::ConditionStatus::{False, True, Unknown};
    use super::*;

    fn get<'a>(c: &'a [Condition], t: &str) -> &'a Condition {
        c.iter().find(|c| c.type_ == t).unwrap()
    }

    fn observation(provider: Option<ProviderView>, streams: Streams) -> TargetObservation {
        TargetObservation {
            namespace: "ns".into(),
            branch: "main".into(),
            generation: 3,
            provider,
            provider_ref: "gp".into(),
            streams,
            cluster_provider: ClusterProviderView { name: "default".into(), ready: None },
            remote: false,
            discovery: Discovery::Answered,
            admission: None,
            encryption: EncryptionCheck::NotRequired,
            git_path_refused: None,
        }
    }

    fn view(branch_allowed: bool, ready: Option<Condition>) -> ProviderView {
        ProviderView { name: "gp".into(), allowed_branches: vec!["main".into()], branch_allowed, ready }
    }

    #[test]
    fn an_encryption_that_cannot_be_used_stalls_the_target() {
        let streams = Streams { total: 1, ready: 1, replaying: 0, blocked: 0 };
        let mut obs = observation(Some(view(true, None)), streams);
        let st = git_target(&obs, &[], "t");
        assert_eq!(get(&st.conditions, ENCRYPTION_CONFIGURED).reason, "NotRequired");
        obs.encryption = EncryptionCheck::SecretCreateDisabled("create it".into());
        let st = git_target(&obs, &[], "t");
        let e = get(&st.conditions, ENCRYPTION_CONFIGURED);
        assert_eq!((e.status, e.reason.as_str()), (False, "SecretCreateDisabled"));
        assert_eq!(get(&st.conditions, STALLED).status, True);
        assert_eq!(get(&st.conditions, READY).reason, "SecretCreateDisabled");
    }

    /// ref: `gittarget_controller.go` `gitPathAxis` and the precedence in
    /// `gitTargetReadinessGates`: a refused folder stalls the target and
    /// outranks streams that are still replaying; a gate before it leaves
    /// it NotChecked.
    #[test]
    fn a_refused_folder_stalls_the_target_with_its_reason() {
        let replaying = Streams { total: 2, ready: 1, replaying: 1, blocked: 0 };
        let mut obs = observation(Some(view(true, None)), replaying);
        let st = git_target(&obs, &[], "t");
        let g = get(&st.conditions, GIT_PATH_ACCEPTED);
        assert_eq!(
            (g.status, g.reason.as_str(), g.message.as_str()),
            (True, "GitPathAccepted", "GitTarget path accepted")
        );
        let m = "Git path refused at deploy.sh: foreign file deploy.sh is not a managed manifest";
        obs.git_path_refused = Some(("UnsupportedContent".into(), m.into()));
        let st = git_target(&obs, &[], "t");
        let g = get(&st.conditions, GIT_PATH_ACCEPTED);
        assert_eq!((g.status, g.reason.as_str(), g.message.as_str()), (False, "UnsupportedContent", m));
        assert_eq!(get(&st.conditions, STALLED).status, True);
        assert_eq!(
            (get(&st.conditions, READY).status, get(&st.conditions, READY).reason.as_str()),
            (False, "UnsupportedContent")
        );
        obs.encryption = EncryptionCheck::InvalidConfig("bad".into());
        let st = git_target(&obs, &[], "t");
        assert_eq!(get(&st.conditions, GIT_PATH_ACCEPTED).reason, "NotChecked");
        assert_eq!(get(&st.conditions, READY).reason, "InvalidConfig");
        let st = git_target(&observation(None, replaying), &[], "t");
        assert_eq!(get(&st.conditions, GIT_PATH_ACCEPTED).status, Unknown);
    }

    #[test]
    fn the_source_side_follows_the_clusterprovider_and_discovery() {
        let ready = |status| Condition {
            type_: READY.into(),
            status,
            reason: "r".into(),
            message: "it broke".into(),
            observed_generation: 1,
            last_transition_time: "t".into(),
        };
        let streams = Streams { total: 1, ready: 1, replaying: 0, blocked: 0 };
        let mut obs = observation(Some(view(true, Some(ready(True)))), streams);
        // No ClusterProvider: Unknown, which holds nothing up.
        let st = git_target(&obs, &[], "t");
        assert_eq!(get(&st.conditions, CLUSTER_PROVIDER_READY).status, Unknown);
        assert_eq!(get(&st.conditions, SOURCE_CLUSTER_REACHABLE).reason, "LocalCluster");
        assert_eq!(get(&st.conditions, READY).status, True);
        // A ClusterProvider not Ready holds the GitTarget in progress.
        obs.cluster_provider.ready = Some(Some(ready(False)));
        let st = git_target(&obs, &[], "t");
        let cp = get(&st.conditions, CLUSTER_PROVIDER_READY);
        assert_eq!((cp.status, cp.reason.as_str()), (False, "ClusterProviderNotReady"));
        assert!(cp.message.ends_with("is not Ready: it broke"), "{}", cp.message);
        assert_eq!(get(&st.conditions, READY).reason, "ClusterProviderNotReady");
        obs.cluster_provider.ready = Some(Some(ready(True)));
        assert_eq!(get(&git_target(&obs, &[], "t").conditions, CLUSTER_PROVIDER_READY).status, True);
        // Before discovery answers the source is not established: Ready Unknown.
        obs.discovery = Discovery::Awaiting;
        let st = git_target(&obs, &[], "t");
        assert_eq!(get(&st.conditions, SOURCE_CLUSTER_REACHABLE).reason, "AwaitingDiscovery");
        let r = get(&st.conditions, READY);
        assert_eq!((r.status, r.reason.as_str()), (Unknown, "AwaitingDiscovery"));
        // A remote that refused the credential: Ready False, not stalled.
        obs.remote = true;
        obs.discovery = Discovery::Refused { code: 401, message: "Unauthorized".into() };
        let st = git_target(&obs, &[], "t");
        let reach = get(&st.conditions, SOURCE_CLUSTER_REACHABLE);
        assert_eq!((reach.status, reach.reason.as_str()), (False, "SourceClusterAuthenticationFailed"));
        assert_eq!(get(&st.conditions, READY).reason, "SourceClusterAuthenticationFailed");
        assert_eq!(get(&st.conditions, STALLED).status, False);
        obs.discovery = Discovery::Answered;
        let reach = get(&git_target(&obs, &[], "t").conditions, SOURCE_CLUSTER_REACHABLE).clone();
        assert_eq!((reach.status, reach.reason.as_str()), (True, "SourceClusterReachable"));
    }

    #[test]
    fn a_namespace_the_clusterprovider_does_not_admit_fails_validation() {
        // gittarget_controller.go:333-347, after the branch.
        let mut obs = observation(Some(view(true, None)), healthy());
        obs.admission = Some(Refusal { reason: "NamespaceNotAuthorized", message: "not admitted".into() });
        let st = git_target(&obs, &[], "t");
        let v = get(&st.conditions, VALIDATED);
        assert_eq!(
            (v.status, v.reason.as_str(), v.message.as_str()),
            (False, "NamespaceNotAuthorized", "not admitted")
        );
        assert_eq!(get(&st.conditions, STALLED).status, True);
        assert_eq!(get(&st.conditions, READY).status, False);
        assert_eq!(get(&st.conditions, STREAMS_RUNNING).status, Unknown);
    }

    fn healthy() -> Streams {
        Streams { total: 2, ready: 2, ..Streams::default() }
    }

    #[test]
    fn a_healthy_target_is_ready_and_kstatus_current() {
        let ok = git_provider("ns", "u", 1, &ProviderCheck::Ok, &[], "t0");
        let st = git_target(&observation(Some(view(true, ready(&ok.conditions).cloned())), healthy()), &[], "t0");
        assert_eq!(get(&st.conditions, READY).status, True);
        assert_eq!(get(&st.conditions, READY).reason, SUCCEEDED);
        assert_eq!(get(&st.conditions, RECONCILING).status, False);
        assert_eq!(get(&st.conditions, STALLED).status, False);
        assert_eq!(get(&st.conditions, GIT_PROVIDER_READY).reason, "GitProviderReady");
        assert!(st.conditions.iter().all(|c| c.observed_generation == 3));
        assert_eq!(st.streams.summary(), "2/2");
    }

    #[test]
    fn a_missing_provider_or_branch_stalls_with_the_references_reasons() {
        let st = git_target(&observation(None, healthy()), &[], "t0");
        assert_eq!(
            (get(&st.conditions, READY).status, get(&st.conditions, READY).reason.as_str()),
            (False, "ProviderNotFound")
        );
        assert_eq!(get(&st.conditions, STALLED).status, True);
        assert_eq!(get(&st.conditions, STREAMS_RUNNING).status, Unknown);
        let st = git_target(&observation(Some(view(false, None)), healthy()), &[], "t0");
        assert_eq!(get(&st.conditions, READY).reason, "BranchNotAllowed");
        assert!(get(&st.conditions, READY).message.contains("allowedBranches list [\"main\"]"));
        assert_eq!(get(&st.conditions, VALIDATED).status, False);
    }

    #[test]
    fn provider_failures_carry_their_reason_and_the_target_says_so() {
        for (check, reason) in [
            (ProviderCheck::SecretNotFound { secret: "creds".into(), detail: "not found".into() }, "SecretNotFound"),
            (ProviderCheck::SecretMalformed { secret: "creds".into(), detail: "no key".into() }, "SecretMalformed"),
            (ProviderCheck::CommitConfigInvalid("bad template".into()), "CommitConfigInvalid"),
            (ProviderCheck::ConnectionFailed("refused".into()), "ConnectionFailed"),
        ] {
            let p = git_provider("ns", "u", 1, &check, &[], "t0");
            let r = ready(&p.conditions).unwrap();
            assert_eq!((r.status, r.reason.as_str()), (False, reason));
            assert_eq!(get(&p.conditions, STALLED).status, True);
            let st = git_target(&observation(Some(view(true, Some(r.clone()))), healthy()), &[], "t0");
            let tr = ready(&st.conditions).unwrap();
            assert_eq!((tr.status, tr.reason.as_str()), (False, "GitProviderNotReady"));
            assert!(tr.message.contains(reason), "{}", tr.message);
            // kstatus InProgress: the provider may recover on its own.
            assert_eq!(get(&st.conditions, RECONCILING).status, True);
        }
    }

    #[test]
    fn streams_not_all_running_keep_the_target_progressing() {
        let ok = git_provider("ns", "u", 1, &ProviderCheck::Ok, &[], "t0");
        let obs = observation(
            Some(view(true, ready(&ok.conditions).cloned())),
            Streams { total: 2, ready: 1, replaying: 1, blocked: 0 },
        );
        let st = git_target(&obs, &[], "t0");
        assert_eq!(
            (get(&st.conditions, READY).status, get(&st.conditions, READY).reason.as_str()),
            (False, "NotReady")
        );
        let none = observation(Some(view(true, ready(&ok.conditions).cloned())), Streams::default());
        assert_eq!(get(&git_target(&none, &[], "t0").conditions, STREAMS_RUNNING).status, False);
    }

    #[test]
    fn unchanged_statuses_keep_their_transition_time_and_order() {
        let first = git_provider("ns", "u", 1, &ProviderCheck::Ok, &[], "t0");
        let again = git_provider("ns", "u", 2, &ProviderCheck::Ok, &first.conditions, "t1");
        assert!(again.conditions.iter().all(|c| c.last_transition_time == "t0"));
        assert_eq!(
            again.conditions.iter().map(|c| &c.type_).collect::<Vec<_>>(),
            first.conditions.iter().map(|c| &c.type_).collect::<Vec<_>>()
        );
        let failed = git_provider("ns", "u", 2, &ProviderCheck::ConnectionFailed("x".into()), &again.conditions, "t2");
        assert_eq!(get(&failed.conditions, READY).last_transition_time, "t2");
        // Reconciling stays False: its time does not move.
        assert_eq!(get(&failed.conditions, RECONCILING).last_transition_time, "t0");
    }

    #[test]
    fn only_a_ready_status_or_reason_change_is_an_event() {
        let ok = git_provider("ns", "u", 1, &ProviderCheck::Ok, &[], "t0");
        assert_eq!(ready_transition(&[], &ok.conditions).map(|(t, _)| t), Some("Normal"));
        assert!(ready_transition(&ok.conditions, &ok.conditions).is_none());
        let bad = git_provider("ns", "u", 1, &ProviderCheck::ConnectionFailed("x".into()), &ok.conditions, "t1");
        assert_eq!(
            ready_transition(&ok.conditions, &bad.conditions).map(|(t, c)| (t, c.reason.as_str())),
            Some(("Warning", "ConnectionFailed"))
        );
        let worse = git_provider("ns", "u", 1, &ProviderCheck::ConnectionFailed("y".into()), &bad.conditions, "t2");
        assert!(ready_transition(&bad.conditions, &worse.conditions).is_none(), "a new message alone is no transition");
    }
}
