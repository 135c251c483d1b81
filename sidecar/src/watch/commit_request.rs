//! CommitRequests (issue 27 item 2), the watcher's side. It watches the
//! GitTarget's namespace for CommitRequests naming the GitTarget (kube-runtime's
//! `watcher`: a list, then a watch, relisting on 410). It asks the sidecar
//! who created each one (`Resolve` of the request itself: its own audit
//! fact), writes the in-flight status, and hands the request to the commit
//! window, which carries it on a flush. The window sends back how it ended,
//! and this writes the final status. `rules::mirror::commit_request` makes
//! every decision.

use std::collections::HashSet;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use rules::mirror::commit_request::{Attribution, Finalize, Spec, is_terminal, status};
use runtime::mirror::configbutler;
use runtime::proto::attribution_client::AttributionClient;
use runtime::proto::{ResolveRequest, TypeRef};
use runtime::status::{Object, StatusWriter, conditions, now};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tonic::transport::Channel;

use super::status::raw_object;
use super::stream::Item;
use crate::apiserver::cr_watcher_config;

/// A CommitRequest handed to the commit window.
#[derive(Debug, Clone)]
pub struct Pending {
    pub object: Object,
    pub generation: i64,
    pub attribution: Attribution,
    /// The verbatim message (`None`: the generated one).
    pub message: Option<String>,
    /// When its close delay ends: the window flushes for it by then.
    pub finalize_at: Instant,
    /// The status written when it registered: the final one is applied over
    /// it (no read needed, so no `get` permission).
    pub status: Option<serde_json::Value>,
}

/// How a CommitRequest ended, for the status writer.
#[derive(Debug)]
pub struct Ended {
    pub pending: Pending,
    pub outcome: Finalize,
}

/// The CommitRequest kind.
pub fn resource() -> ApiResource {
    configbutler("CommitRequest", "commitrequests")
}

/// Which CommitRequests a watcher serves, and for what.
pub struct For {
    /// The GitTarget's namespace and name.
    pub namespace: String,
    pub target: String,
    /// Its branch, for `status.branch`.
    pub branch: String,
    /// The audit route the requests' facts arrive on.
    pub route: String,
}

/// Watches and serves the CommitRequests naming the GitTarget until the
/// window is gone.
pub async fn run(
    client: kube::Client,
    serving: For,
    sidecar: AttributionClient<Channel>,
    window: mpsc::Sender<Item>,
    mut ended: mpsc::Receiver<Ended>,
) {
    let For { namespace, target, branch, route } = serving;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource());
    let events = watcher::watcher(api, cr_watcher_config()).default_backoff();
    tokio::pin!(events);
    // CommitRequests handed over, by uid: a relist sees them again.
    let mut seen: HashSet<String> = HashSet::new();
    // One-shot objects do not flap: no rate limit on their status.
    let mut writer = StatusWriter::new(client.clone(), Duration::ZERO);
    // Requesters are resolved concurrently (each may wait out the grace for
    // its fact); a resolved one comes back here.
    let (attributed_tx, mut attributed) = mpsc::channel::<(Option<serde_json::Value>, Pending)>(64);
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(Event::Apply(obj) | Event::InitApply(obj))) => {
                    let Some(spec) = claim(&obj, &target, &mut seen) else { continue };
                    let (mut sidecar, route, tx) = (sidecar.clone(), route.clone(), attributed_tx.clone());
                    tokio::spawn(async move {
                        let attribution = requester(&obj, &mut sidecar, &route).await;
                        let pending = Pending {
                            object: raw_object(resource(), &obj),
                            generation: obj.metadata.generation.unwrap_or(1),
                            attribution,
                            message: spec.message(),
                            // Anchored at attribution, as the reference's worker does.
                            finalize_at: Instant::now() + Duration::from_secs(spec.close_delay_seconds()),
                            status: None,
                        };
                        let _ = tx.send((obj.data.get("status").cloned(), pending)).await;
                    });
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => tracing::warn!(error = %e, "watching CommitRequests failed; retrying"),
                None => return,
            },
            resolved = attributed.recv() => {
                let Some((current, mut pending)) = resolved else { return };
                let previous = conditions(current.as_ref());
                let next = status(&previous, pending.generation, &pending.attribution, None, &branch, &now());
                super::status::write(&mut writer, &pending.object, current.as_ref(), next.clone()).await;
                pending.status = Some(next);
                tracing::info!(
                    commit_request = %format!("{namespace}/{}", pending.object.name),
                    author = pending.attribution.author(),
                    "CommitRequest registered; its window is finalized when the close delay ends"
                );
                if window.send(Item::Request(pending)).await.is_err() {
                    return;
                }
            }
            done = ended.recv() => {
                let Some(Ended { pending, outcome }) = done else { return };
                let current = pending.status.clone();
                let previous = conditions(current.as_ref());
                let next = status(&previous, pending.generation, &pending.attribution, Some(&outcome), &branch, &now());
                super::status::write(&mut writer, &pending.object, current.as_ref(), next).await;
                tracing::info!(commit_request = %pending.object.name, outcome = outcome.reason(), "CommitRequest ended");
            }
        }
    }
}

/// The spec of a CommitRequest this watcher serves now: it names the
/// GitTarget, has not ended, and was not claimed already.
fn claim(obj: &DynamicObject, target: &str, seen: &mut HashSet<String>) -> Option<Spec> {
    let uid = obj.metadata.uid.clone().unwrap_or_default();
    let spec: Spec = obj.data.get("spec").and_then(|s| serde_json::from_value(s.clone()).ok())?;
    if spec.target_ref.name != target || !seen.insert(uid) {
        return None;
    }
    (!is_terminal(&conditions(obj.data.get("status")))).then_some(spec)
}

/// Who created the CommitRequest, by its own audit fact.
async fn requester(obj: &DynamicObject, sidecar: &mut AttributionClient<Channel>, route: &str) -> Attribution {
    let r = resource();
    let request = ResolveRequest {
        r#type: Some(TypeRef { route: route.into(), group: r.group, version: r.version, resource: r.plural }),
        event_type: "ADDED".into(),
        object_json: serde_json::to_vec(obj).unwrap_or_default(),
    };
    match sidecar.resolve(request).await {
        Ok(answer) => {
            let a = answer.into_inner();
            match a.tier.as_str() {
                "configured" => Attribution::NotAttempted,
                _ if a.author.is_empty() || a.tier == "absent" => Attribution::Unresolved,
                _ => Attribution::Resolved(a.author),
            }
        }
        Err(status) => {
            tracing::warn!(message = %status.message(), "resolving a CommitRequest's author failed; it claims no actor");
            Attribution::Unresolved
        }
    }
}
