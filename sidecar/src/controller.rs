//! `reverser-sidecar controller` (issue 27 item 5): every GitTarget served
//! without a chart change. kube-runtime's `Controller` reconciles each
//! GitTarget into the objects `rules::mirror::controller` derives (its
//! watcher and sidecar in one Deployment, a ServiceAccount, RBAC from what
//! its rules resolve to), applied with server-side apply. It runs again
//! when the GitTarget, a WatchRule or ClusterWatchRule naming it, or its
//! Deployment changes. Its finalizer on the GitTarget removes them with it;
//! a sweep removes what no GitTarget claims (one deleted while the
//! controller was down, a namespace no rule watches any more). A GitTarget
//! the chart's static `mirrors` list serves is skipped (`--skip-git-target`).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Error as FinalizerError, Event as FinalizerEvent, finalizer};
use kube::runtime::reflector::ObjectRef;
use rules::mirror::config::{ClusterProvider, GitProvider, GitTargetSpec};
use rules::mirror::controller::{self as rules_controller, Applied, MANAGER, Settings, TARGET_UID, Target};
use rules::mirror::watch_rules::Served;
use runtime::cli::parse_duration;
use runtime::kubeconfig::Bounds;
use runtime::mirror::configbutler;
use serde::{Deserialize, Serialize};

use crate::apiserver::{Server, WATCH_SILENCE, cr_watcher_config};
use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The image the mirrors run (watcher and sidecar).
    #[arg(long, env = "REVERSER_IMAGE", value_name = "IMAGE")]
    pub image: String,
    /// Their imagePullPolicy.
    #[arg(long, default_value = "IfNotPresent", value_parser = ["Always", "IfNotPresent", "Never"])]
    pub image_pull_policy: String,
    /// A flag for every mirror's `serve` (its attribution settings, e.g.
    /// `--author-attribution-grace=5s`); repeatable.
    #[arg(long = "sidecar-arg", value_name = "FLAG", allow_hyphen_values = true)]
    pub sidecar_args: Vec<String>,
    /// The Secret and key holding the Redis URL the sidecars follow facts
    /// from (REVERSER_REDIS_URL).
    #[arg(long, value_name = "SECRET:KEY")]
    pub redis_url_secret: Option<String>,
    /// The operator's namespace: the mirrors' Deployments run there, and
    /// remote ClusterProviders' kubeconfig Secrets are read there (default:
    /// the pod's own namespace).
    #[arg(long, env = "REVERSER_OPERATOR_NAMESPACE", value_name = "NAMESPACE")]
    pub operator_namespace: Option<String>,
    /// The first part of every object's name (the chart passes its
    /// fullname): `<prefix>-mirror-<namespace>-<name>-<hash>`.
    #[arg(long, default_value = "reverser", value_name = "PREFIX")]
    pub name_prefix: String,
    /// Leave this GitTarget (NAMESPACE/NAME) alone: another mirror serves
    /// it, such as the chart's static `mirrors` list; repeatable.
    #[arg(long = "skip-git-target", value_name = "NAMESPACE/NAME")]
    pub skip: Vec<String>,
    /// How often RBAC no GitTarget claims any more is removed.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub sweep: Duration,
    /// Kubeconfig (default: $KUBECONFIG, then ~/.kube/config, then the
    /// in-cluster service account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// How long each API call may wait for the server; 0: 10s to connect
    /// and 60s without a byte.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_duration)]
    pub request_timeout: Duration,
}

/// A GitTarget as the controller reads it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct GitTargetObject {
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    #[serde(default)]
    spec: serde_json::Value,
}

impl kube::Resource for GitTargetObject {
    type DynamicType = ();
    type Scope = kube::core::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "GitTarget".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "configbutler.ai".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1alpha3".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "gittargets".into()
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &mut self.metadata
    }
}

/// How long discovery stands before it is asked again (new CRDs).
const REDISCOVER: Duration = Duration::from_secs(60);

/// Held on every GitTarget the controller serves, until what serves it is gone.
const FINALIZER: &str = "reverser.dev/mirror";

struct Ctx {
    client: kube::Client,
    server: Server,
    settings: Settings,
    skip: BTreeSet<String>,
    served: tokio::sync::Mutex<Option<(Instant, Arc<Vec<Served>>)>>,
    /// What each GitTarget (by uid) last wanted outside its namespace.
    wanted: Mutex<BTreeMap<String, BTreeSet<rules_controller::Identity>>>,
}

/// Why one reconcile failed; it is retried.
#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    #[error("{0}")]
    Read(String),
    #[error("applying {kind} {name}: {message}")]
    Apply { kind: String, name: String, message: String },
}

fn resource_of(kind: &str) -> Option<ApiResource> {
    Some(match kind {
        "ServiceAccount" => ApiResource::erase::<ServiceAccount>(&()),
        "Role" => ApiResource::erase::<Role>(&()),
        "RoleBinding" => ApiResource::erase::<RoleBinding>(&()),
        "ClusterRole" => ApiResource::erase::<ClusterRole>(&()),
        "ClusterRoleBinding" => ApiResource::erase::<ClusterRoleBinding>(&()),
        "Deployment" => ApiResource::erase::<Deployment>(&()),
        _ => return None,
    })
}

/// Every kind the controller applies, each labelled with its GitTarget's uid.
const KINDS: [&str; 6] = ["Deployment", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"];

pub async fn run(args: Args) -> Result<()> {
    let bounds = Bounds::new(args.request_timeout);
    let (client, server) = Server::connect(args.kubeconfig.as_deref(), bounds).await?;
    let (watch_client, _) = Server::connect(args.kubeconfig.as_deref(), bounds.with_read(WATCH_SILENCE)).await?;
    let redis = match &args.redis_url_secret {
        None => None,
        Some(s) => match s.split_once(':') {
            Some((name, key)) if !name.is_empty() && !key.is_empty() => Some((name.to_owned(), key.to_owned())),
            _ => return Err(Error::Config(format!("--redis-url-secret {s:?}: give SECRET:KEY, e.g. redis:url"))),
        },
    };
    let operator_namespace = args
        .operator_namespace
        .clone()
        .or_else(|| {
            std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        })
        .ok_or_else(|| {
            Error::Config("the namespace the mirrors run in is unknown outside a pod: pass --operator-namespace".into())
        })?;
    for t in &args.skip {
        crate::target::parse_target(t)?;
    }
    tracing::info!(
        server = %server.url,
        bound = %bounds.describe(),
        image = %args.image,
        "serving every GitTarget; a call to the API server gives up unless answered within the bound"
    );
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        server,
        settings: Settings {
            namespace: operator_namespace,
            prefix: args.name_prefix.clone(),
            image: args.image.clone(),
            pull_policy: args.image_pull_policy.clone(),
            sidecar_args: args.sidecar_args.clone(),
            redis,
        },
        skip: args.skip.iter().cloned().collect(),
        served: tokio::sync::Mutex::new(None),
        wanted: Mutex::new(BTreeMap::new()),
    });
    let managed = format!("app.kubernetes.io/managed-by={MANAGER}");
    let targets: Api<GitTargetObject> = Api::all(watch_client.clone());
    let deployments: Api<Deployment> = Api::all(watch_client.clone());
    let rules_ar = configbutler("WatchRule", "watchrules");
    let cluster_rules_ar = configbutler("ClusterWatchRule", "clusterwatchrules");
    let controller = Controller::new(targets, cr_watcher_config())
        // Its Deployment is in the operator's namespace: found by annotation.
        .watches(deployments, cr_watcher_config().labels(&managed), |d: Deployment| {
            let target = d.metadata.annotations.as_ref()?.get(rules_controller::TARGET)?;
            let (ns, name) = target.split_once('/')?;
            Some(ObjectRef::<GitTargetObject>::new(name).within(ns))
        })
        .watches_with(
            Api::all_with(watch_client.clone(), &rules_ar),
            rules_ar,
            cr_watcher_config(),
            |rule: DynamicObject| {
                let ns = rule.metadata.namespace.clone()?;
                let name = rule.data.pointer("/spec/targetRef/name")?.as_str()?;
                Some(ObjectRef::<GitTargetObject>::new(name).within(&ns))
            },
        )
        .watches_with(
            Api::all_with(watch_client.clone(), &cluster_rules_ar),
            cluster_rules_ar,
            cr_watcher_config(),
            |rule: DynamicObject| {
                let name = rule.data.pointer("/spec/targetRef/name")?.as_str()?;
                let ns = rule.data.pointer("/spec/targetRef/namespace")?.as_str()?;
                Some(ObjectRef::<GitTargetObject>::new(name).within(ns))
            },
        )
        .shutdown_on_signal();
    let sweeper = tokio::spawn(sweep(ctx.clone(), args.sweep));
    controller
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((target, _)) => tracing::debug!(target = %target, "reconciled"),
                Err(kube::runtime::controller::Error::ReconcilerFailed(e, target)) => {
                    let why = match &e {
                        FinalizerError::ApplyFailed(e) | FinalizerError::CleanupFailed(e) => e.to_string(),
                        other => runtime::error_chain(other),
                    };
                    tracing::warn!(target = %target, "GitTarget {target}: {why}; retrying in 5s")
                }
                Err(e) => tracing::warn!("{}", runtime::error_chain(&e)),
            }
        })
        .await;
    sweeper.abort();
    tracing::info!("stopped");
    Ok(())
}

fn error_policy(_: Arc<GitTargetObject>, _: &FinalizerError<ReconcileError>, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_secs(5))
}

impl Ctx {
    async fn served(&self) -> Result<Arc<Vec<Served>>, ReconcileError> {
        let mut cached = self.served.lock().await;
        if let Some((at, s)) = cached.as_ref()
            && at.elapsed() < REDISCOVER
        {
            return Ok(s.clone());
        }
        let served = runtime::mirror::served(&self.client)
            .await
            .map_err(|e| ReconcileError::Read(self.server.mirror_failure(&e)))?;
        let served = Arc::new(served);
        *cached = Some((Instant::now(), served.clone()));
        Ok(served)
    }

    async fn apply(&self, obj: &serde_json::Value) -> Result<(), ReconcileError> {
        let kind = obj["kind"].as_str().unwrap_or_default().to_owned();
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let fail = |message: String| ReconcileError::Apply { kind: kind.clone(), name: name.clone(), message };
        let ar = resource_of(&kind).ok_or_else(|| fail("not a kind the controller applies".into()))?;
        let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        };
        api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(obj))
            .await
            .map_err(|e| fail(self.server.failure(&e)))?;
        Ok(())
    }
}

async fn reconcile(target: Arc<GitTargetObject>, ctx: Arc<Ctx>) -> Result<Action, FinalizerError<ReconcileError>> {
    let (Some(ns), Some(name)) = (&target.metadata.namespace, &target.metadata.name) else {
        return Ok(Action::await_change());
    };
    if ctx.skip.contains(&format!("{ns}/{name}")) {
        return Ok(Action::await_change());
    }
    let api: Api<GitTargetObject> = Api::namespaced(ctx.client.clone(), ns);
    finalizer(&api, FINALIZER, target, |event| async {
        match event {
            FinalizerEvent::Apply(t) => apply(&t, &ctx).await,
            FinalizerEvent::Cleanup(t) => cleanup(&t, &ctx).await,
        }
    })
    .await
}

/// Removes every object serving GitTarget `t`, found by its uid's label.
async fn cleanup(t: &GitTargetObject, ctx: &Ctx) -> Result<Action, ReconcileError> {
    let Some(uid) = &t.metadata.uid else { return Ok(Action::await_change()) };
    let serving = applied(ctx, &format!("{TARGET_UID}={uid}")).await.map_err(ReconcileError::Read)?;
    for a in &serving {
        delete(ctx, a).await.map_err(ReconcileError::Read)?;
    }
    let removed = serving.len();
    ctx.wanted.lock().unwrap_or_else(|e| e.into_inner()).remove(uid);
    let target =
        format!("{}/{}", t.metadata.namespace.as_deref().unwrap_or(""), t.metadata.name.as_deref().unwrap_or(""));
    tracing::info!(target = %target, removed, "GitTarget {target} deleted: its mirror and RBAC are removed");
    Ok(Action::await_change())
}

async fn delete(ctx: &Ctx, a: &Applied) -> Result<(), String> {
    let ar = resource_of(&a.kind).expect("a kind the controller applies");
    let api: Api<DynamicObject> = match &a.namespace {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, &ar),
        None => Api::all_with(ctx.client.clone(), &ar),
    };
    match api.delete(&a.name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(format!("deleting {} {}: {}", a.kind, a.name, ctx.server.failure(&e))),
    }
}

/// Applies what serves GitTarget `target`.
async fn apply(target: &GitTargetObject, ctx: &Ctx) -> Result<Action, ReconcileError> {
    let meta = &target.metadata;
    let (Some(ns), Some(name), Some(uid)) = (&meta.namespace, &meta.name, &meta.uid) else {
        return Ok(Action::await_change());
    };
    let spec: GitTargetSpec = match serde_json::from_value(target.spec.clone()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("GitTarget {ns}/{name} does not have the shape of its CRD ({e}); not served");
            return Ok(Action::await_change());
        }
    };
    let read =
        |what: String| move |e: runtime::mirror::MirrorError| ReconcileError::Read(format!("reading {what}: {e}"));
    let provider_ar = configbutler("GitProvider", "gitproviders");
    let provider: Option<GitProvider> = Api::<DynamicObject>::namespaced_with(ctx.client.clone(), ns, &provider_ar)
        .get_opt(&spec.provider_ref.name)
        .await
        .map_err(|e| ReconcileError::Read(ctx.server.failure(&e)))?
        .and_then(|o| serde_json::to_value(o).ok())
        .and_then(|v| serde_json::from_value(v).ok());
    let cluster_provider: Option<ClusterProvider> =
        runtime::mirror::cluster_provider(&ctx.client, spec.cluster_provider())
            .await
            .map_err(read("the ClusterProvider".into()))?;
    let secret_ref = cluster_provider
        .as_ref()
        .and_then(|p| p.spec.kube_config.as_ref())
        .and_then(|k| k.secret_ref.as_ref())
        .map(|r| r.name.clone());
    let remote = secret_ref.as_deref().map(|secret| (ctx.settings.namespace.as_str(), secret));
    let resolved = if remote.is_some() {
        Default::default()
    } else {
        let served = ctx.served().await?;
        crate::watch::resolve_target(&ctx.client, ns, name, &served)
            .await
            .map_err(|e| ReconcileError::Read(format!("resolving its rules: {e}")))?
    };
    let t = Target {
        namespace: ns,
        name,
        uid,
        spec: &spec,
        provider: provider.as_ref().map(|p| &p.spec),
        resolved: &resolved,
        remote,
    };
    let desired = rules_controller::desired(&t, &ctx.settings);
    for obj in &desired {
        ctx.apply(obj).await?;
    }
    let wanted = rules_controller::identities(&desired);
    let first = ctx.wanted.lock().unwrap_or_else(|e| e.into_inner()).insert(uid.clone(), wanted).is_none();
    if first {
        tracing::info!(
            target = %format!("{ns}/{name}"),
            types = resolved.types.len(),
            "serving GitTarget {ns}/{name}: Deployment {}/{}",
            ctx.settings.namespace,
            rules_controller::mirror_name(&ctx.settings.prefix, ns, name)
        );
    }
    // Discovery may serve new types the rules name: look again now and then.
    Ok(Action::requeue(REDISCOVER))
}

/// Removes the labelled RBAC whose GitTarget is gone, or that it no longer
/// wants, every `every`.
async fn sweep(ctx: Arc<Ctx>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        if let Err(e) = sweep_once(&ctx).await {
            tracing::warn!(
                "removing RBAC no GitTarget claims: {e}; trying again in {}",
                runtime::kubeconfig::bounds::humanize(every)
            );
        }
    }
}

/// Every object of the kinds the controller applies that `selector`
/// selects, with the GitTarget uid its label names.
async fn applied(ctx: &Ctx, selector: &str) -> Result<Vec<Applied>, String> {
    let params = ListParams::default().labels(selector);
    let mut out = Vec::new();
    for kind in KINDS {
        let ar = resource_of(kind).expect("a kind the controller applies");
        let list = Api::<DynamicObject>::all_with(ctx.client.clone(), &ar)
            .list(&params)
            .await
            .map_err(|e| ctx.server.failure(&e))?;
        for o in list.items {
            let Some(uid) = o.metadata.labels.as_ref().and_then(|l| l.get(TARGET_UID)).cloned() else { continue };
            out.push(Applied {
                kind: kind.to_owned(),
                namespace: o.metadata.namespace.clone(),
                name: o.metadata.name.clone().unwrap_or_default(),
                uid,
            });
        }
    }
    Ok(out)
}

async fn sweep_once(ctx: &Ctx) -> Result<(), String> {
    let targets: Api<GitTargetObject> = Api::all(ctx.client.clone());
    let live: BTreeSet<String> = targets
        .list(&ListParams::default())
        .await
        .map_err(|e| ctx.server.failure(&e))?
        .items
        .into_iter()
        .filter_map(|t| t.metadata.uid)
        .collect();
    let applied = applied(ctx, &format!("app.kubernetes.io/managed-by={MANAGER}")).await?;
    let wanted = ctx.wanted.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for a in rules_controller::stale(&applied, &live, &wanted) {
        delete(ctx, a).await?;
        tracing::info!(kind = %a.kind, name = %a.name, "removed: no GitTarget claims it");
    }
    let mut wanted = ctx.wanted.lock().unwrap_or_else(|e| e.into_inner());
    wanted.retain(|uid, _| live.contains(uid));
    Ok(())
}
