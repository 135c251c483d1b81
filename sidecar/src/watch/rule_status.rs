//! The status of the WatchRules and ClusterWatchRules naming the watcher's
//! GitTarget (issue 27 item 1), as gitops-reverser's rule controllers write
//! it: each report lists the rules, takes what the last pass resolved for
//! each and the state of the watches of its types, lets
//! `rules::mirror::rule_status` decide the conditions and the status writer
//! apply them (ref: gitops-reverser
//! `internal/controller/watchrule_controller.go:108-221`).

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::{Api, DynamicObject, ListParams};
use rules::mirror::config::{ClusterWatchRule, WatchRule};
use rules::mirror::rule_status::{self, Resolution, RuleObservation, StreamState};
use rules::mirror::status::{Condition, Streams};
use rules::mirror::watch_rules::{Resolved, RuleKind};
use runtime::mirror::configbutler;
use runtime::status::{StatusWriter, conditions};
use serde_json::json;

use super::Supervisor;
use super::status::{decode, raw_object, write};
use super::stream;

/// What the watcher last observed, handed to the status reporter after
/// every pass.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// The GitTarget's streams.
    pub streams: Streams,
    /// Whether the watch loop runs (before it, the rules are not judged).
    pub started: bool,
    /// What the rules last resolved to; `None` until discovery answered.
    pub resolved: Option<Arc<Resolved>>,
    /// The state of each running watch, by type key (one per scope).
    pub states: BTreeMap<String, Vec<StreamState>>,
    /// Whether the watched cluster is a remote, and what its discovery
    /// last answered.
    pub remote: bool,
    pub discovery: rules::mirror::source_cluster::Discovery,
}

impl Observed {
    pub(super) fn of(supervisor: &Supervisor) -> Self {
        let mut states: BTreeMap<String, Vec<StreamState>> = BTreeMap::new();
        for (key, scope) in supervisor.running.keys() {
            let concern = stream::concern(key, scope);
            // A watch without an entry has not reported yet: not listed.
            let state = supervisor.shared.readiness.stream(&concern).unwrap_or(StreamState::Replaying);
            states.entry(key.clone()).or_default().push(state);
        }
        Observed {
            streams: super::status::streams(supervisor),
            started: true,
            resolved: supervisor.last.clone(),
            states,
            remote: false,
            discovery: Default::default(),
        }
    }
}

fn kind_resource(kind: RuleKind) -> kube::api::ApiResource {
    match kind {
        RuleKind::WatchRule => configbutler("WatchRule", "watchrules"),
        RuleKind::ClusterWatchRule => configbutler("ClusterWatchRule", "clusterwatchrules"),
    }
}

/// Whether the rule `obj` (of `kind`) writes to GitTarget `namespace/name`.
fn names_target(kind: RuleKind, obj: &DynamicObject, namespace: &str, name: &str) -> bool {
    match kind {
        RuleKind::WatchRule => decode::<WatchRule>(obj).is_some_and(|r| r.targets(namespace, name)),
        RuleKind::ClusterWatchRule => decode::<ClusterWatchRule>(obj).is_some_and(|r| r.targets(namespace, name)),
    }
}

/// The rules naming GitTarget `namespace/name`, as stored (with their
/// status). ClusterWatchRules may not be readable (a namespaced mirror):
/// then none apply, as when the watcher resolves them.
async fn list(client: &kube::Client, namespace: &str, name: &str) -> Vec<(RuleKind, DynamicObject)> {
    let mut out = Vec::new();
    for kind in [RuleKind::WatchRule, RuleKind::ClusterWatchRule] {
        let api: Api<DynamicObject> = match kind {
            RuleKind::WatchRule => Api::namespaced_with(client.clone(), namespace, &kind_resource(kind)),
            RuleKind::ClusterWatchRule => Api::all_with(client.clone(), &kind_resource(kind)),
        };
        match api.list(&ListParams::default()).await {
            Ok(l) => {
                out.extend(l.items.into_iter().filter(|o| names_target(kind, o, namespace, name)).map(|o| (kind, o)))
            }
            Err(e) if kind == RuleKind::WatchRule => {
                tracing::warn!(error = %e, "listing the WatchRules for their status failed; retried next report")
            }
            Err(e) => tracing::debug!(error = %e, "ClusterWatchRules not readable; no status written on them"),
        }
    }
    out
}

/// Writes the status of every rule naming the GitTarget; `target` is the
/// GitTarget's conditions as just computed.
pub(super) async fn report(
    client: &kube::Client,
    writer: &mut StatusWriter,
    (namespace, name): (&str, &str),
    target: &[Condition],
    observed: &Observed,
    stamp: &str,
) {
    if !observed.started {
        return;
    }
    for (kind, raw) in list(client, namespace, name).await {
        let rule_ns = raw.metadata.namespace.clone().unwrap_or_default();
        let rule_name = raw.metadata.name.clone().unwrap_or_default();
        let resolved = observed.resolved.as_deref();
        let types =
            resolved.map(|r| r.rules.iter().find(|t| t.kind == kind && t.namespace == rule_ns && t.name == rule_name));
        let (resolution, streams) = match types {
            None => (Resolution::CatalogNotReady, Vec::new()),
            // Created since the last pass: the next report has it.
            Some(None) => continue,
            Some(Some(t)) => {
                let streams: Vec<(String, StreamState)> = t
                    .types
                    .iter()
                    .flat_map(|k| {
                        let states = observed.states.get(k).cloned().unwrap_or_else(|| vec![StreamState::Replaying]);
                        states.into_iter().map(move |s| (k.clone(), s))
                    })
                    .collect();
                (Resolution::Resolved { types: t.types.len(), problems: t.problems.clone() }, streams)
            }
        };
        let source = match kind {
            RuleKind::WatchRule => resolved.and_then(|r| r.source(&rule_ns, &rule_name)),
            RuleKind::ClusterWatchRule => None,
        };
        let obs = RuleObservation {
            kind,
            generation: raw.metadata.generation.unwrap_or_default(),
            target_namespace: namespace,
            target_name: name,
            target,
            source,
            resolution,
            streams: &streams,
        };
        let current = raw.data.get("status");
        let computed = rule_status::rule(&obs, &conditions(current), stamp);
        let mut next = json!({
            "observedGeneration": computed.observed_generation,
            "conditions": computed.conditions,
        });
        if let Some(s) = &computed.streams {
            next["streams"] = json!(s);
        }
        write(writer, &raw_object(kind_resource(kind), &raw), current, next).await;
    }
}
