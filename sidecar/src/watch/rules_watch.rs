//! The rules are watched (issue 27 item 3): a WatchRule of the GitTarget's
//! namespace or a ClusterWatchRule created, changed or deleted wakes the
//! watcher's pass at once (kube-runtime's `watcher`), instead of waiting
//! for the next `--rescan`. The pass still lists and resolves them itself;
//! the rescan stays as the backstop and for discovery.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use runtime::mirror::configbutler;
use tokio::sync::Notify;

use crate::apiserver::cr_watcher_config;

/// Notifies `changed` on every change of the rules, until dropped.
pub async fn run(client: kube::Client, namespace: String, changed: Arc<Notify>) {
    let rules: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &configbutler("WatchRule", "watchrules"));
    let cluster_rules: Api<DynamicObject> =
        Api::all_with(client, &configbutler("ClusterWatchRule", "clusterwatchrules"));
    let rules = watcher::watcher(rules, cr_watcher_config()).default_backoff().boxed();
    let cluster_rules = watcher::watcher(cluster_rules, cr_watcher_config()).default_backoff().boxed();
    let mut events = futures::stream::select(rules, cluster_rules);
    // The first lists describe what the pass already read.
    let mut listed = 0;
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::InitDone) => listed += 1,
            Ok(Event::Init | Event::InitApply(_)) => {}
            Ok(Event::Apply(_) | Event::Delete(_)) if listed >= 2 => changed.notify_one(),
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "watching the rules failed; the rescan still reads them"),
        }
    }
}
