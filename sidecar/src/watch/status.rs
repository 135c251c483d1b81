//! The watcher reports status on its GitTarget and the GitTarget's
//! GitProvider (issue 27 item 1): each rescan it reads both, checks the
//! provider as the reference's GitProvider controller does (commit
//! configuration, then the credentials Secret, then the remote, ref:
//! gitops-reverser `internal/controller/gitprovider_controller.go:98-145`),
//! counts its streams, lets `rules::mirror::status` decide the
//! conditions and `runtime::status` write them. Until the GitTarget can be
//! mirrored at all (it, its provider and an allowed branch exist) the
//! watcher waits here, saying why in status, instead of exiting.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject};
use rules::mirror::config::{ClusterProvider, GitProvider, GitTarget};
use rules::mirror::encryption::{self, EncryptionCheck};
use rules::mirror::message::Messages;
use rules::mirror::rule_status::KubeConfigCheck;
use rules::mirror::source_cluster::{self, Refusal};
use rules::mirror::status::{self, ClusterProviderView, ProviderCheck, ProviderView, Streams, TargetObservation};
use runtime::mirror::configbutler;
use runtime::status::{Object, StatusWriter, conditions, now};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::Supervisor;
use super::readiness::{Outage, Readiness};
use crate::apiserver::Server;

/// The readiness concern of reading the GitTarget and its GitProvider.
const GIT_TARGET: &str = "git-target";
use super::rule_status::{self, Observed};
use super::source_cluster::RemoteArgs;
use super::window::{Live, Reported};
use crate::target::CredentialError;
use rules::mirror::rule_status as rule_status_rules;

/// How long a successful connectivity check stands before it is repeated.
const PROBE_OK_FOR: Duration = Duration::from_secs(60);
/// How long a failed one stands (the remote may be back).
const PROBE_FAILED_FOR: Duration = Duration::from_secs(10);
/// How long one connectivity check may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

struct Probe {
    key: String,
    at: Instant,
    result: Result<(), String>,
}

/// What the reporter shares with the rest of the watcher.
pub struct Links {
    /// What the window's calls said (pushes, what prune mode kept).
    pub reported: Reported,
    /// The commit window and prune mode, sent again when they change.
    pub live: watch::Sender<Live>,
    /// Set, with the reason, once the GitTarget is deleted or may no
    /// longer be mirrored: the mirror stops.
    pub gone: watch::Sender<Option<String>>,
}

/// Reports the status of one GitTarget and its GitProvider.
pub struct Reporter {
    client: kube::Client,
    /// The control cluster, named in what a failed read says.
    server: Server,
    readiness: Arc<Readiness>,
    /// Reading the GitTarget and its GitProvider: one warning per failure,
    /// not one per report.
    outage: Outage,
    /// How soon the next report comes (said in the warning).
    every: Duration,
    namespace: String,
    name: String,
    writer: StatusWriter,
    probe: Option<Probe>,
    links: Links,
    /// The mirror started: a GitTarget gone from now on stops it.
    started: bool,
    /// The signing public key, by the provider's resourceVersion.
    signing: Option<(String, Instant, Option<String>)>,
    /// How a remote ClusterProvider's kubeconfig is judged.
    remote: RemoteArgs,
}

/// What the GitTarget's ClusterProvider says of it.
struct SourceSide {
    view: ClusterProviderView,
    /// The ClusterProvider names a remote cluster.
    remote: bool,
    /// Why the GitTarget's namespace may not mirror through it (its
    /// Validated gate); `None` when it may, or when that could not be read.
    admission: Option<Refusal>,
    /// Why its kubeconfig cannot be used (the ClusterProvider's own
    /// Validated, projected onto the GitTarget as ClusterProviderReady).
    unusable: Option<Refusal>,
}

impl SourceSide {
    fn refusal(&self) -> Option<&Refusal> {
        self.admission.as_ref().or(self.unusable.as_ref())
    }
}

/// The streams the supervisor runs: each watch loop alive is ready (it
/// lists again by itself after any failure).
pub(super) fn streams(supervisor: &Supervisor) -> Streams {
    let total = supervisor.running.len() as u32;
    let ready = supervisor.running.values().filter(|r| !r.task.is_finished()).count() as u32;
    Streams { total, ready, replaying: 0, blocked: total - ready }
}

/// The object a status is written on, from the object as read.
pub(super) fn raw_object(resource: ApiResource, obj: &DynamicObject) -> Object {
    Object {
        resource,
        namespace: obj.metadata.namespace.clone(),
        name: obj.metadata.name.clone().unwrap_or_default(),
        uid: obj.metadata.uid.clone().unwrap_or_default(),
    }
}

pub(super) fn decode<T: serde::de::DeserializeOwned>(obj: &DynamicObject) -> Option<T> {
    serde_json::to_value(obj).ok().and_then(|v| serde_json::from_value(v).ok())
}

/// Writes one status; a failure is logged (the next report retries),
/// never fatal.
pub(super) async fn write(writer: &mut StatusWriter, obj: &Object, current: Option<&Value>, next: Value) {
    match writer.report(obj, current, next).await {
        Ok(outcome) => tracing::debug!(object = %obj.name, %outcome, "status"),
        Err(e) => tracing::warn!("{e}"),
    }
}

impl Reporter {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        (client, server): (kube::Client, Server),
        readiness: Arc<Readiness>,
        namespace: &str,
        name: &str,
        min_interval: Duration,
        every: Duration,
        links: Links,
        remote: RemoteArgs,
    ) -> Self {
        Reporter {
            writer: StatusWriter::new(client.clone(), min_interval),
            client,
            server,
            readiness,
            outage: Outage::default(),
            every,
            namespace: namespace.into(),
            name: name.into(),
            probe: None,
            links,
            started: false,
            signing: None,
            remote,
        }
    }

    /// The mirror runs with `live`; changes to it are sent from here on.
    pub fn started(&mut self, live: Live) {
        self.links.live.send_replace(live);
        self.started = true;
    }

    /// Reports until the GitTarget can be mirrored (`true`), or the
    /// process is told to stop (`false`).
    pub async fn until_loadable(&mut self, every: Duration) -> bool {
        let stop = runtime::shutdown::terminated();
        tokio::pin!(stop);
        loop {
            if self.report(&Observed::default()).await {
                return true;
            }
            tokio::select! {
                _ = &mut stop => return false,
                _ = tokio::time::sleep(every) => {}
            }
        }
    }

    /// Reads, checks and writes the statuses (the GitTarget's, its
    /// GitProvider's, its rules'); whether the GitTarget can be mirrored.
    /// Failures to read or write are logged, never fatal.
    pub async fn report(&mut self, observed: &Observed) -> bool {
        let ns = self.namespace.clone();
        let targets: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &ns, &configbutler("GitTarget", "gittargets"));
        let raw_target = match targets.get_opt(&self.name).await {
            Ok(Some(t)) => t,
            Ok(None) => {
                if self.started {
                    self.links.gone.send_replace(Some("the GitTarget was deleted".into()));
                } else {
                    let why = format!(
                        "the GitTarget {ns}/{} does not exist in the API server at {}; create it, or correct --git-target",
                        self.name, self.server.url
                    );
                    self.failed(&why);
                }
                return false;
            }
            Err(e) => {
                let why = format!("reading the GitTarget {ns}/{}: {}", self.name, self.server.failure(&e));
                self.failed(&why);
                return false;
            }
        };
        let Some(target) = decode::<GitTarget>(&raw_target) else {
            tracing::warn!("the GitTarget does not have the shape of its CRD; no status written");
            return false;
        };
        let providers: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &ns, &configbutler("GitProvider", "gitproviders"));
        let provider_ref = target.spec.provider_ref.name.clone();
        let raw_provider = match providers.get_opt(&provider_ref).await {
            Ok(p) => p,
            Err(e) => {
                let why = format!("reading the GitProvider {ns}/{provider_ref}: {}", self.server.failure(&e));
                self.failed(&why);
                return false;
            }
        };
        self.outage.recovered("reading the GitTarget and its GitProvider");
        self.readiness.ok(GIT_TARGET);

        let stamp = now();
        let provider = raw_provider.as_ref().and_then(|raw| decode::<GitProvider>(raw).map(|p| (raw, p)));
        let view = match &provider {
            None => None,
            Some((raw, provider)) => {
                let check = self.check(raw, provider).await;
                let current = raw.data.get("status");
                let computed = status::git_provider(
                    &ns,
                    &provider.spec.url,
                    provider.metadata.generation,
                    &check,
                    &conditions(current),
                    &stamp,
                );
                let mut next = json!({
                    "observedGeneration": computed.observed_generation,
                    "conditions": computed.conditions,
                });
                if let Some(key) = self.signing_public_key(raw, provider).await {
                    next["signingPublicKey"] = json!(key);
                }
                let obj = raw_object(configbutler("GitProvider", "gitproviders"), raw);
                write(&mut self.writer, &obj, current, next).await;
                Some(ProviderView {
                    name: provider_ref.clone(),
                    allowed_branches: provider.spec.allowed_branches.clone(),
                    branch_allowed: provider.spec.allows_branch(&target.spec.branch),
                    ready: status::ready(&computed.conditions).cloned(),
                })
            }
        };
        let branch_allowed = view.as_ref().is_some_and(|v| v.branch_allowed);
        if let (true, Some((_, provider))) = (self.started, &provider) {
            self.follow_changes(&target, provider);
        }
        let side = self.report_cluster_provider(target.spec.cluster_provider(), &stamp).await;
        let loadable = branch_allowed && side.refusal().is_none();
        // Told once the status says why: a running mirror stops.
        let revoked = side.refusal().filter(|_| self.started).map(|r| {
            tracing::warn!(reason = r.reason, "{}", r.message);
            format!("the GitTarget may no longer be mirrored ({})", r.reason)
        });
        let git_path_refused = self.links.reported.lock().unwrap_or_else(|e| e.into_inner()).git_path_refused.clone();
        let observation = TargetObservation {
            git_path_refused,
            namespace: ns.clone(),
            branch: target.spec.branch.clone(),
            generation: target.metadata.generation,
            provider: view,
            provider_ref,
            streams: observed.streams,
            cluster_provider: side.view,
            remote: side.remote,
            discovery: observed.discovery.clone(),
            admission: side.admission,
            encryption: self.check_encryption(&target).await,
        };
        let current = raw_target.data.get("status");
        let computed = status::git_target(&observation, &conditions(current), &stamp);
        let mut next = json!({
            "observedGeneration": computed.observed_generation,
            "conditions": computed.conditions,
            "streams": computed.streams,
        });
        next["streams"]["summary"] = json!(computed.streams.summary());
        let report = self.links.reported.lock().unwrap_or_else(|e| e.into_inner()).clone();
        // lastPushTime: this watcher's last push, else what an earlier run wrote.
        match (&report.last_push, current.and_then(|s| s.get("lastPushTime"))) {
            (Some(t), _) => next["lastPushTime"] = json!(t),
            (None, Some(t)) => next["lastPushTime"] = t.clone(),
            (None, None) => {}
        }
        // retention: what the last reconciles kept under the prune mode; an
        // observation, never a condition (gittarget_types.go:210-226).
        match (&report.kept_at, current.and_then(|s| s.get("retention"))) {
            (Some(at), _) => {
                next["retention"] = json!({
                    "mode": target.spec.prune_mode().as_str(),
                    "retainedDocuments": report.kept.values().sum::<u32>(),
                    "observedTime": at,
                });
            }
            (None, Some(r)) => next["retention"] = r.clone(),
            (None, None) => {}
        }
        let obj = raw_object(configbutler("GitTarget", "gittargets"), &raw_target);
        if revoked.is_some() {
            // The mirror stops next: its reason is written now, not deferred.
            self.writer.forget(&obj);
        }
        write(&mut self.writer, &obj, current, next).await;
        let target = (ns.as_str(), self.name.as_str());
        rule_status::report(&self.client, &mut self.writer, target, &computed.conditions, observed, &stamp).await;
        if revoked.is_some() {
            self.links.gone.send_replace(revoked);
        }
        loadable
    }

    /// A changed commit window or prune mode reaches the window (live
    /// configuration); an invalid one keeps what runs, and the
    /// GitProvider's status says why.
    fn follow_changes(&mut self, target: &GitTarget, provider: &GitProvider) {
        let Ok(live) = Live::of(&target.spec, &provider.spec) else { return };
        self.links.live.send_if_modified(|current| {
            if *current == live {
                return false;
            }
            tracing::info!(
                commit_window = %runtime::kubeconfig::bounds::humanize(live.policy.silence),
                prune_mode = target.spec.prune_mode().as_str(),
                "the GitTarget or its GitProvider changed; the commit window and prune mode follow"
            );
            *current = live;
            true
        });
    }

    /// The ClusterProvider's status (Validated, Ready), and what it says
    /// of this GitTarget. The status depends on the ClusterProvider (and
    /// its kubeconfig Secret) alone, so every watcher mirroring through it
    /// writes the same and a second write is no write.
    async fn report_cluster_provider(&mut self, name: &str, stamp: &str) -> SourceSide {
        let mut side = SourceSide {
            view: ClusterProviderView { name: name.to_owned(), ready: Some(None) },
            remote: false,
            admission: None,
            unusable: None,
        };
        let api: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &configbutler("ClusterProvider", "clusterproviders"));
        let raw = match api.get_opt(name).await {
            Ok(Some(raw)) => raw,
            Ok(None) => {
                side.view.ready = None;
                return side;
            }
            Err(e) => {
                tracing::debug!(error = %e, "reading the ClusterProvider for its status failed");
                return side;
            }
        };
        let Some(provider) = decode::<ClusterProvider>(&raw) else {
            tracing::warn!("the ClusterProvider does not have the shape of its CRD; no status written");
            return side;
        };
        side.remote = provider.spec.kube_config.is_some();
        // The namespace's admission first, as the GitTarget's Validated
        // gate orders it; a failed read of the labels decides nothing.
        let labels = match provider.spec.allowed_namespaces.as_ref() {
            Some(m) if m.needs_labels(&self.namespace) => {
                match runtime::mirror::namespace_labels(&self.client, &self.namespace).await {
                    Ok(l) => Some(l),
                    Err(e) => {
                        tracing::warn!(error = %e, "reading the GitTarget's Namespace for its admission failed");
                        None
                    }
                }
            }
            _ => Some(Default::default()),
        };
        if let Some(labels) = labels {
            side.admission = source_cluster::admit(name, Some(&provider.spec), &self.namespace, &labels).err();
        }
        let check = match super::source_cluster::check(&self.client, &provider, &self.remote).await {
            Ok(c) => c.check,
            Err(e) => {
                tracing::warn!("{e}; the ClusterProvider's status is left as it is");
                return side;
            }
        };
        if let KubeConfigCheck::Refused(r) = &check {
            side.unusable = Some(r.clone());
        }
        let current = raw.data.get("status");
        let generation = raw.metadata.generation.unwrap_or(0);
        let computed = rule_status_rules::cluster_provider(generation, &check, &conditions(current), stamp);
        let next = json!({"observedGeneration": computed.observed_generation, "conditions": computed.conditions});
        let obj = raw_object(configbutler("ClusterProvider", "clusterproviders"), &raw);
        write(&mut self.writer, &obj, current, next).await;
        side.view.ready = Some(status::ready(&computed.conditions).cloned());
        side
    }

    /// `spec.encryption`, checked against its key Secret.
    async fn check_encryption(&self, target: &GitTarget) -> EncryptionCheck {
        let plan = encryption::plan(target.spec.encryption.as_ref());
        let secret = plan.as_ref().ok().and_then(|p| p.as_ref()).and_then(|p| p.key_secret.clone());
        let keys = match &secret {
            None => None,
            Some(name) => match runtime::mirror::secret(&self.client, &self.namespace, name).await {
                Ok(data) => data.map(|d| d.into_keys().collect::<Vec<_>>()),
                Err(e) => {
                    return EncryptionCheck::MissingSecret(format!(
                        "reading Secret {}/{name} failed: {e}",
                        self.namespace
                    ));
                }
            },
        };
        encryption::check(plan, &self.namespace, keys.as_deref())
    }

    /// `signingPublicKey`: the public half of the provider's signing key,
    /// in authorized_keys format, when signing is configured and the key
    /// is there (`signing.pub`, else derived from `signing.key`). Read
    /// again when the provider changes, or after a minute (the sidecar may
    /// have generated it since).
    async fn signing_public_key(&mut self, raw: &DynamicObject, provider: &GitProvider) -> Option<String> {
        let signing = provider.spec.signing()?;
        let version = raw.metadata.resource_version.clone().unwrap_or_default();
        // A key not there yet is asked for again sooner.
        if let Some((v, at, key)) = &self.signing
            && *v == version
            && at.elapsed() < if key.is_some() { PROBE_OK_FOR } else { PROBE_FAILED_FOR }
        {
            return key.clone();
        }
        let key = crate::target::signing_public_key(&self.client, &self.namespace, &signing.secret_ref.name).await;
        self.signing = Some((version, Instant::now(), key.clone()));
        key
    }

    /// A read of the configuration failed: `/readyz` says why, and the log
    /// says it once (the same failure again at debug).
    fn failed(&mut self, why: &str) {
        self.readiness.failing(GIT_TARGET, why, false);
        self.outage.failed("no status is written and nothing new is mirrored until it can be read", why, self.every);
    }

    /// Reports every `every`, with what the watcher last observed.
    pub async fn run(mut self, mut observed: watch::Receiver<Observed>, every: Duration) {
        loop {
            let now = observed.borrow_and_update().clone();
            self.report(&now).await;
            tokio::time::sleep(every).await;
        }
    }

    /// The provider's first failing check, in the reference's order.
    async fn check(&mut self, raw: &DynamicObject, provider: &GitProvider) -> ProviderCheck {
        let spec = &provider.spec;
        if let Err(e) = Messages::new(&spec.messages(), &self.name) {
            return ProviderCheck::CommitConfigInvalid(format!("spec.commit.message: {e}"));
        }
        if let Err(e) = spec.commit_window() {
            return ProviderCheck::CommitConfigInvalid(format!("spec.push.commitWindow: {e}"));
        }
        let remote = match crate::target::remote_for(&self.client, &self.namespace, spec).await {
            Ok(r) => r,
            Err(crate::error::Error::Credentials(c)) => {
                let detail = c.to_string();
                return match c {
                    CredentialError::SecretNotFound { secret, .. } => ProviderCheck::SecretNotFound { secret, detail },
                    CredentialError::NoCredential { secret, .. } | CredentialError::NotText { secret, .. } => {
                        ProviderCheck::SecretMalformed { secret, detail }
                    }
                };
            }
            Err(e) => {
                let secret = spec.secret_ref.as_ref().map(|s| s.name.clone()).unwrap_or_default();
                return ProviderCheck::SecretMalformed { secret, detail: e.to_string() };
            }
        };
        // The remote is asked again when the provider changed, or the last
        // answer is old.
        let key = format!("{}|{}", raw.metadata.resource_version.as_deref().unwrap_or(""), spec.url);
        let fresh = self.probe.as_ref().filter(|p| {
            p.key == key && p.at.elapsed() < if p.result.is_ok() { PROBE_OK_FOR } else { PROBE_FAILED_FOR }
        });
        let result = match fresh {
            Some(p) => p.result.clone(),
            None => {
                let probed = tokio::time::timeout(
                    PROBE_TIMEOUT,
                    tokio::task::spawn_blocking(move || runtime::attribution::commit::probe(&remote)),
                )
                .await;
                let result = match probed {
                    Ok(Ok(Ok(()))) => Ok(()),
                    Ok(Ok(Err(e))) => Err(e.to_string()),
                    Ok(Err(e)) => Err(format!("the check did not finish: {e}")),
                    Err(_) => Err(format!("no answer within {PROBE_TIMEOUT:?}")),
                };
                self.probe = Some(Probe { key, at: Instant::now(), result: result.clone() });
                result
            }
        };
        match result {
            Ok(()) => ProviderCheck::Ok,
            Err(e) => ProviderCheck::ConnectionFailed(e),
        }
    }
}
