//! Live configuration (issue 27 item 3), the sidecar's half. When it serves
//! a GitTarget it watches that GitTarget, the GitProviders of its namespace
//! and, each by name, the Secrets they name (`credentials::reads`: the
//! credentials, the signing key, a known_hosts Secret, the encryption key),
//! with kube-runtime's `watcher`, and reloads when one changes (a new
//! `metadata.generation`, for a Secret a new `resourceVersion`; status
//! writes do not count). Templates,
//! placement, path, branch, prune mode, credentials and signing all come
//! from that reload. If the GitTarget can no longer be mirrored (it was
//! deleted, its branch left `allowedBranches`, its GitProvider is gone or
//! invalid) the sidecar holds: Commit and Reconcile are refused with the
//! reason, and the watcher keeps its window and retries until the
//! configuration is right again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api as KubeApi, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use rules::attribution::commit::AuthorMode;
use rules::mirror::credentials;
use runtime::attribution::commit::{GitWriter, WriterConfig};
use runtime::metrics::Metrics;
use runtime::mirror::configbutler;

use crate::api::Api;
use crate::apiserver::{Server, WATCH_SILENCE, cr_watcher_config};
use crate::error::{Error, Result};
use runtime::kubeconfig::Bounds;

/// Opens the writer a configuration describes (the clone stays: a reload
/// opens the same directory again).
pub async fn open_writer(
    mut config: WriterConfig,
    author_mode: AuthorMode,
    metrics: &Arc<Metrics>,
) -> Result<GitWriter> {
    config.author_mode = author_mode;
    let w = tokio::task::spawn_blocking(move || GitWriter::open(config))
        .await
        .map_err(|e| Error::Config(format!("opening the Git mirror stopped: {e}")))??;
    Ok(w.with_metrics(metrics.clone()))
}

/// What a reload is for.
pub struct Live {
    pub git: runtime::cli::Git,
    pub target: String,
    pub author_mode: AuthorMode,
    pub metrics: Arc<Metrics>,
    /// The Secrets the configuration loaded at start names ([`secrets_of`]).
    pub secrets: BTreeSet<String>,
}

/// The Secrets a loaded GitTarget and its GitProvider name: what is watched.
pub fn secrets_of(loaded: &runtime::mirror::Loaded) -> BTreeSet<String> {
    credentials::reads(&loaded.target.spec, Some(&loaded.provider.spec)).secrets
}

/// The versions last applied, by `kind/name`: a CR's generation (only a spec
/// change reloads), a Secret's resourceVersion (it has no generation).
type Seen = BTreeMap<String, String>;

fn key(kind: &str, obj: &DynamicObject) -> String {
    format!("{kind}/{}", obj.metadata.name.as_deref().unwrap_or(""))
}

/// Whether the event changes what is mirrored: a new generation, a new or
/// a deleted object. A status write keeps the generation.
fn changed(seen: &mut Seen, kind: &str, event: &Event<DynamicObject>) -> bool {
    match event {
        Event::Apply(o) | Event::InitApply(o) => {
            let version = match kind {
                "Secret" => o.metadata.resource_version.clone().unwrap_or_default(),
                _ => o.metadata.generation.unwrap_or(0).to_string(),
            };
            seen.insert(key(kind, o), version.clone()).as_ref() != Some(&version)
        }
        Event::Delete(o) => seen.remove(&key(kind, o)).is_some(),
        Event::Init | Event::InitDone => false,
    }
}

/// The Secrets the GitTarget and its GitProvider name now, read when a
/// reload could not load them (none when they cannot be read either).
async fn secret_names(client: &kube::Client, ns: &str, name: &str) -> BTreeSet<String> {
    match runtime::mirror::load(client, ns, name).await {
        Ok(l) => secrets_of(&l),
        Err(_) => BTreeSet::new(),
    }
}

/// Watches until the process stops; every change reloads (or holds). The
/// Secrets are watched by name, so a reload that names others watches those.
pub async fn run(live: Live, api: Arc<Api>) -> Result<()> {
    let (ns, name) = crate::target::parse_target(&live.target)?;
    let bounds = Bounds::new(live.git.request_timeout).with_read(WATCH_SILENCE);
    let (client, _) = Server::connect(live.git.kubeconfig.as_deref(), bounds).await?;
    let mut names = live.secrets.clone();
    let mut seen = Seen::new();
    loop {
        let targets: KubeApi<DynamicObject> =
            KubeApi::namespaced_with(client.clone(), &ns, &configbutler("GitTarget", "gittargets"));
        let providers: KubeApi<DynamicObject> =
            KubeApi::namespaced_with(client.clone(), &ns, &configbutler("GitProvider", "gitproviders"));
        let targets = watcher::watcher(targets, cr_watcher_config().fields(&format!("metadata.name={name}")))
            .default_backoff()
            .map(|e| ("GitTarget", e))
            .boxed();
        let providers =
            watcher::watcher(providers, cr_watcher_config()).default_backoff().map(|e| ("GitProvider", e)).boxed();
        let secrets = names.iter().map(|secret| {
            let api: KubeApi<DynamicObject> = KubeApi::namespaced_with(client.clone(), &ns, &secret_resource());
            watcher::watcher(api, cr_watcher_config().fields(&format!("metadata.name={secret}")))
                .default_backoff()
                .map(|e| ("Secret", e))
                .boxed()
        });
        let mut events = futures::stream::select_all([targets, providers].into_iter().chain(secrets));
        // The start (or the reload before this) read the configuration: the
        // initial lists only record it.
        let streams = 2 + names.len();
        let mut listed = 0;
        let mut renamed = false;
        while let Some((kind, event)) = events.next().await {
            let event = match event {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!(error = %e, "watching the {kind}s for configuration changes failed; retrying");
                    continue;
                }
            };
            let is_change = changed(&mut seen, kind, &event);
            if matches!(event, Event::InitDone) {
                listed += 1;
                continue;
            }
            if listed < streams || !is_change {
                continue;
            }
            let now = match reload(&live, &api, kind).await {
                Some(loaded) => loaded,
                None => secret_names(&client, &ns, &name).await,
            };
            if now != names {
                names = now;
                renamed = true;
                break;
            }
        }
        if !renamed {
            return Ok(());
        }
    }
}

fn secret_resource() -> kube::api::ApiResource {
    kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&())
}

/// Reads the GitTarget, its GitProvider and their Secrets again and
/// applies them, or holds with why they cannot be mirrored. Returns the
/// Secrets the configuration it loaded names (`None`: it loaded none).
async fn reload(live: &Live, api: &Api, kind: &str) -> Option<BTreeSet<String>> {
    match crate::target::writer_for(&live.git, &live.target).await {
        Ok((config, policy, loaded)) => {
            let secrets = secrets_of(&loaded);
            let branch = config.branch.clone();
            match open_writer(config, live.author_mode, &live.metrics).await {
                Ok(writer) => match api.reconfigure(writer, policy).await {
                    Ok(()) => {
                        live.metrics.mirror_config_reloads.inc();
                        live.metrics.mirror_held.set(0);
                        tracing::info!(
                        target = %live.target,
                        provider = %loaded.provider.metadata.name,
                        %branch,
                        changed = kind,
                        "the configuration changed (the GitTarget, its GitProvider or a Secret they name); the next \
                         window is written with it"
                        );
                    }
                    Err(e) => tracing::warn!(error = %e.message(), "applying the changed configuration failed"),
                },
                Err(e) => hold(api, live, e.to_string()),
            }
            Some(secrets)
        }
        Err(e) => {
            hold(api, live, e.to_string());
            None
        }
    }
}

fn hold(api: &Api, live: &Live, why: String) {
    tracing::warn!(target = %live.target, reason = %why, "the GitTarget cannot be mirrored now; nothing is committed or pushed until it can");
    live.metrics.mirror_held.set(1);
    api.hold(why);
}
