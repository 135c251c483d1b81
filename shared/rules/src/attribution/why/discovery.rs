//! Resolving the `TYPE` of `why TYPE/NAME` through discovery, as kubectl
//! does: a kind, a plural, a singular or a short name, optionally qualified
//! `resource.group` (or `resource.version.group`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use serde::Serialize;

use crate::{Error, Result};

/// One resource type the API serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiResource {
    /// Empty for the core group.
    pub group: String,
    pub version: String,
    /// The plural, as in the API path (`configmaps`).
    pub resource: String,
    pub kind: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub namespaced: bool,
}

impl ApiResource {
    /// `configmaps` or `deployments.apps`, as kubectl names a type.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() { self.resource.clone() } else { format!("{}.{}", self.resource, self.group) }
    }

    /// The API path of the collection holding `name` (`namespace` is
    /// ignored for a cluster-scoped type).
    pub fn object_path(&self, namespace: &str, name: &str) -> String {
        let base = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if self.namespaced {
            format!("{base}/namespaces/{namespace}/{}/{name}", self.resource)
        } else {
            format!("{base}/{}/{name}", self.resource)
        }
    }

    fn names(&self) -> impl Iterator<Item = &str> {
        [self.resource.as_str(), self.singular.as_str()].into_iter().chain(self.short_names.iter().map(String::as_str))
    }
}

/// The top-level resources of one discovery document (`/api/v1`,
/// `/apis/<group>/<version>`); subresources (`pods/log`) are skipped.
pub fn resources_of(list: &APIResourceList) -> Vec<ApiResource> {
    let (group, version) = match list.group_version.split_once('/') {
        Some((g, v)) => (g.to_owned(), v.to_owned()),
        None => (String::new(), list.group_version.clone()),
    };
    list.resources
        .iter()
        .filter(|r| !r.name.contains('/'))
        .map(|r| ApiResource {
            group: group.clone(),
            version: version.clone(),
            resource: r.name.clone(),
            kind: r.kind.clone(),
            // Older servers leave singular empty; kubectl then uses the kind.
            singular: if r.singular_name.is_empty() { r.kind.to_lowercase() } else { r.singular_name.clone() },
            short_names: r.short_names.clone().unwrap_or_default(),
            namespaced: r.namespaced,
        })
        .collect()
}

/// The resource `input` names among `served` (every group's PREFERRED
/// version first, in discovery order). A name matches a plural, a singular
/// or a short name exactly, or a kind case-insensitively; `name.group` and
/// `name.version.group` pin the group (and version). Several groups
/// serving the name resolve to the core group when it is one of them, else
/// to the first in discovery order, as kubectl's priority does.
pub fn resolve_type<'a>(input: &str, served: &'a [ApiResource]) -> Result<&'a ApiResource> {
    let unknown = || Error::WhyUnknownType { input: input.to_owned() };
    if input.is_empty() {
        return Err(unknown());
    }
    let lower = input.to_lowercase();
    let by_name = |name: &str, r: &ApiResource| r.names().any(|n| n == name) || r.kind.eq_ignore_ascii_case(name);
    // Unqualified first: `configmaps`, `cm`, `ConfigMap`.
    if let Some(r) = pick(served.iter().filter(|r| by_name(&lower, r))) {
        return Ok(r);
    }
    // `name.group`, then `name.version.group`.
    if let Some((name, group)) = lower.split_once('.').filter(|(n, g)| !n.is_empty() && !g.is_empty()) {
        if let Some(r) = pick(served.iter().filter(|r| r.group == group && by_name(name, r))) {
            return Ok(r);
        }
        if let Some((version, group)) = group.split_once('.')
            && let Some(r) = served.iter().find(|r| r.group == group && r.version == version && by_name(name, r))
        {
            return Ok(r);
        }
    }
    Err(unknown())
}

fn pick<'a>(mut matches: impl Iterator<Item = &'a ApiResource>) -> Option<&'a ApiResource> {
    let first = matches.next()?;
    if first.group.is_empty() {
        return Some(first);
    }
    Some(matches.find(|r| r.group.is_empty()).unwrap_or(first))
}
