//! Live configuration (issue 27 item 3), the sidecar's half. When it serves
//! a GitTarget it watches that GitTarget and the GitProviders of its
//! namespace (kube-runtime's `watcher`), and reloads when either changes
//! (a new `metadata.generation`; status writes do not count). Templates,
//! placement, path, branch, prune mode, credentials and signing all come
//! from that reload. If the GitTarget can no longer be mirrored (it was
//! deleted, its branch left `allowedBranches`, its GitProvider is gone or
//! invalid) the sidecar holds: Commit and Reconcile are refused with the
//! reason, and the watcher keeps its window and retries until the
//! configuration is right again.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api as KubeApi, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use rules::attribution::commit::AuthorMode;
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
}

/// The generations last applied, by `kind/name`: only a spec change reloads.
type Seen = BTreeMap<String, i64>;

fn key(kind: &str, obj: &DynamicObject) -> String {
    format!("{kind}/{}", obj.metadata.name.as_deref().unwrap_or(""))
}

/// Whether the event changes what is mirrored: a new generation, a new or
/// a deleted object. A status write keeps the generation.
fn changed(seen: &mut Seen, kind: &str, event: &Event<DynamicObject>) -> bool {
    match event {
        Event::Apply(o) | Event::InitApply(o) => {
            let generation = o.metadata.generation.unwrap_or(0);
            seen.insert(key(kind, o), generation) != Some(generation)
        }
        Event::Delete(o) => seen.remove(&key(kind, o)).is_some(),
        Event::Init | Event::InitDone => false,
    }
}

/// Watches until the process stops; every change reloads (or holds).
pub async fn run(live: Live, api: Arc<Api>) -> Result<()> {
    let (ns, name) = crate::target::parse_target(&live.target)?;
    let bounds = Bounds::new(live.git.request_timeout).with_read(WATCH_SILENCE);
    let (client, _) = Server::connect(live.git.kubeconfig.as_deref(), bounds).await?;
    let targets: KubeApi<DynamicObject> =
        KubeApi::namespaced_with(client.clone(), &ns, &configbutler("GitTarget", "gittargets"));
    let providers: KubeApi<DynamicObject> =
        KubeApi::namespaced_with(client.clone(), &ns, &configbutler("GitProvider", "gitproviders"));
    let targets = watcher::watcher(targets, cr_watcher_config().fields(&format!("metadata.name={name}")))
        .default_backoff()
        .boxed();
    let providers = watcher::watcher(providers, cr_watcher_config()).default_backoff().boxed();
    let mut events = futures::stream::select(targets.map(|e| ("GitTarget", e)), providers.map(|e| ("GitProvider", e)));
    let mut seen = Seen::new();
    // The start loaded the configuration: the initial lists only record it.
    let mut listed = 0;
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
        if listed < 2 || !is_change {
            continue;
        }
        reload(&live, &api).await;
    }
    Ok(())
}

/// Reads the GitTarget, its GitProvider and their Secrets again and
/// applies them, or holds with why they cannot be mirrored.
async fn reload(live: &Live, api: &Api) {
    match crate::target::writer_for(&live.git, &live.target).await {
        Ok((config, policy, loaded)) => {
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
                        "the GitTarget or its GitProvider changed; the next window is written with the new configuration"
                        );
                    }
                    Err(e) => tracing::warn!(error = %e.message(), "applying the changed configuration failed"),
                },
                Err(e) => hold(api, live, e.to_string()),
            }
        }
        Err(e) => hold(api, live, e.to_string()),
    }
}

fn hold(api: &Api, live: &Live, why: String) {
    tracing::warn!(target = %live.target, reason = %why, "the GitTarget cannot be mirrored now; nothing is committed or pushed until it can");
    live.metrics.mirror_held.set(1);
    api.hold(why);
}
