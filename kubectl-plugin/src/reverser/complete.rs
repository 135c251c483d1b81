//! What `kubectl reverser` completes beyond flags and subcommands: `why`'s
//! TYPE/NAME (the types the API serves, then the objects of one), and
//! `--pod`'s pods.

use futures::future::BoxFuture;
use rules::attribution::why::{ApiResource, resolve_type};

use crate::common::complete::{Complete, Completions, Context};
use crate::common::discovery;

/// `kubectl reverser`'s completions.
#[derive(Debug, Clone, Copy, Default)]
pub struct Completer;

impl Complete for Completer {
    fn positional<'a>(
        &'a self,
        ctx: &'a Context,
        path: &'a [String],
        prior: &'a [String],
        current: &'a str,
    ) -> BoxFuture<'a, Completions> {
        Box::pin(async move {
            match path.first().map(String::as_str) {
                Some("why") => why_target(ctx, prior, current).await,
                _ => Completions::none(),
            }
        })
    }

    fn flag_value<'a>(
        &'a self,
        ctx: &'a Context,
        id: &'a str,
        _current: &'a str,
    ) -> BoxFuture<'a, Option<Completions>> {
        Box::pin(async move {
            if id != "pod" {
                return None;
            }
            let target = ctx.client().await?;
            let path = format!("/api/v1/namespaces/{}/pods", target.namespace);
            let pods = discovery::list_names(&target.client, &path).await;
            Some(Completions::values(pods.unwrap_or_default()))
        })
    }
}

/// A type's name as kubectl users type it: the plural, qualified by its
/// group when another group serves the same plural.
fn type_name(res: &ApiResource, served: &[ApiResource]) -> String {
    if served.iter().filter(|r| r.resource == res.resource).count() > 1 {
        res.qualified()
    } else {
        res.resource.clone()
    }
}

async fn why_target(ctx: &Context, prior: &[String], current: &str) -> Completions {
    let Some(target) = ctx.client().await else { return Completions::none() };
    let Ok((served, _)) = discovery::discover(&target.client).await else { return Completions::none() };
    let names = |type_: String| {
        let client = target.client.clone();
        let namespace = target.namespace.clone();
        let served = &served;
        async move {
            let Ok(res) = resolve_type(&type_, served) else { return Vec::new() };
            discovery::names(&client, res, &namespace).await.unwrap_or_default()
        }
    };
    match prior {
        [] => match current.split_once('/') {
            Some((type_, _)) => {
                let found = names(type_.to_string()).await;
                Completions::values(found.into_iter().map(|n| format!("{type_}/{n}"))).starting_with(current)
            }
            None => {
                let mut types: Vec<String> = served.iter().map(|r| type_name(r, &served)).collect();
                types.sort();
                types.dedup();
                Completions::values(types).starting_with(current)
            }
        },
        [type_] if !type_.contains('/') => Completions::values(names(type_.clone()).await).starting_with(current),
        _ => Completions::none(),
    }
}
