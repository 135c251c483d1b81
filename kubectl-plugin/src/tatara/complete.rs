//! What `kubectl tatara` completes beyond flags and subcommands: `owners`'
//! Issues, MergeRequests and Tasks (bare or as issue/, mr/, task/NAME),
//! `takeover`'s merge requests by natural key, and `--project`'s Projects.

use futures::future::BoxFuture;
use kube::Api;
use rules::ownership::decision::Snapshot;
use rules::ownership::types::Project;
use runtime::ownership::executor::Executor;

use crate::common::complete::{Complete, Completions, Context};

/// `kubectl tatara`'s completions.
#[derive(Debug, Clone, Copy, Default)]
pub struct Completer;

async fn snapshot(ctx: &Context) -> Option<Snapshot> {
    let target = ctx.client().await?;
    Executor::new(target.client, &target.namespace).snapshot().await.ok()
}

impl Complete for Completer {
    fn positional<'a>(
        &'a self,
        ctx: &'a Context,
        path: &'a [String],
        prior: &'a [String],
        current: &'a str,
    ) -> BoxFuture<'a, Completions> {
        Box::pin(async move {
            if !prior.is_empty() {
                return Completions::none();
            }
            let Some(snap) = (match path.first().map(String::as_str) {
                Some("owners" | "takeover" | "why") => snapshot(ctx).await,
                _ => None,
            }) else {
                return Completions::none();
            };
            let values: Vec<String> = match path.first().map(String::as_str) {
                Some("takeover") => snap.merge_requests.iter().map(|m| m.key()).collect(),
                _ => match current.split_once('/').map(|(k, _)| k) {
                    Some(kind @ ("issue" | "issues" | "iss")) => {
                        snap.issues.iter().map(|i| format!("{kind}/{}", i.name())).collect()
                    }
                    Some(kind @ ("mr" | "mergerequest" | "mergerequests")) => {
                        snap.merge_requests.iter().map(|m| format!("{kind}/{}", m.name())).collect()
                    }
                    Some(kind @ ("task" | "tasks")) => {
                        snap.tasks.iter().map(|t| format!("{kind}/{}", t.name())).collect()
                    }
                    Some(_) => Vec::new(),
                    None => snap
                        .issues
                        .iter()
                        .map(|i| i.name().to_string())
                        .chain(snap.merge_requests.iter().map(|m| m.name().to_string()))
                        .chain(snap.tasks.iter().map(|t| t.name().to_string()))
                        .collect(),
                },
            };
            Completions::values(values).starting_with(current)
        })
    }

    fn flag_value<'a>(
        &'a self,
        ctx: &'a Context,
        id: &'a str,
        _current: &'a str,
    ) -> BoxFuture<'a, Option<Completions>> {
        Box::pin(async move {
            if id != "project" {
                return None;
            }
            let target = ctx.client().await?;
            let projects = Api::<Project>::namespaced(target.client, &target.namespace).list(&Default::default()).await;
            let names = projects.map(|l| l.items.iter().map(|p| p.name().to_string()).collect::<Vec<_>>());
            Some(Completions::values(names.unwrap_or_default()))
        })
    }
}
