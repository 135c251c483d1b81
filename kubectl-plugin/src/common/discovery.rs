//! What the API server serves, read as kubectl reads it: `/api/v1`, then
//! each group's preferred version under `/apis`. `why` resolves a TYPE with
//! it; completion offers its types and their objects' names.

use http::Request;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroupList, APIResourceList};
use rules::attribution::why::{self, ApiResource};

use super::{Call, CliError, api_failure};

/// A GET of `path`, decoded.
pub async fn get<T: serde::de::DeserializeOwned>(client: &kube::Client, path: &str) -> Result<T, kube::Error> {
    let req = Request::get(path).body(Vec::new()).map_err(kube::Error::HttpError)?;
    client.request(req).await
}

/// Every version each group serves, for the Git layout paths.
pub type GroupVersions = Vec<(String, Vec<String>)>;

/// Every group's preferred version's resources (core first), and every
/// version each group serves.
pub async fn discover(client: &kube::Client) -> Result<(Vec<ApiResource>, GroupVersions), CliError> {
    // Discovery reads non-resource URLs: `kubectl auth can-i get /api/v1`.
    let failed = |path: &'static str| {
        move |e: kube::Error| api_failure(Call { verb: "get", resource: path, name: "", namespace: "" }, &e)
    };
    let core: APIResourceList = get(client, "/api/v1").await.map_err(failed("/api/v1"))?;
    let mut served = why::resources_of(&core);
    let mut versions_of: Vec<(String, Vec<String>)> = vec![(String::new(), vec!["v1".into()])];
    let groups: APIGroupList = get(client, "/apis").await.map_err(failed("/apis"))?;
    for g in &groups.groups {
        let preferred = g.preferred_version.as_ref().map(|v| v.group_version.clone());
        let Some(gv) = preferred.or_else(|| g.versions.first().map(|v| v.group_version.clone())) else {
            continue;
        };
        match get::<APIResourceList>(client, &format!("/apis/{gv}")).await {
            Ok(list) => served.extend(why::resources_of(&list)),
            // An unavailable aggregated API must not hide every other type.
            Err(e) => tracing::debug!(group_version = %gv, error = %e, "discovery of a group failed; skipped"),
        }
        versions_of.push((g.name.clone(), g.versions.iter().map(|v| v.version.clone()).collect()));
    }
    Ok((served, versions_of))
}

/// The names of the objects of `res` in `namespace` (ignored for a
/// cluster-scoped type).
pub async fn names(client: &kube::Client, res: &ApiResource, namespace: &str) -> Result<Vec<String>, kube::Error> {
    let path = res.object_path(namespace, "");
    list_names(client, path.trim_end_matches('/')).await
}

/// The names of the objects a LIST of `path` returns.
pub async fn list_names(client: &kube::Client, path: &str) -> Result<Vec<String>, kube::Error> {
    #[derive(serde::Deserialize)]
    struct List {
        #[serde(default)]
        items: Vec<Item>,
    }
    #[derive(serde::Deserialize)]
    struct Item {
        metadata: Meta,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(default)]
        name: String,
    }
    let list: List = get(client, path).await?;
    Ok(list.items.into_iter().map(|i| i.metadata.name).filter(|n| !n.is_empty()).collect())
}
