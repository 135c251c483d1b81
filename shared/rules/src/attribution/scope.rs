//! The scope: facts are partitioned by (audit route, group/resource), so a
//! fact from one route or type never names the author of another's object.
//! The type half is a partition and never a decision: no code reads it to
//! choose a behavior.

use std::fmt;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

/// A Kubernetes group and resource, e.g. `apps`/`deployments` or ``/`configmaps`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        Self { group: group.into(), resource: resource.into() }
    }

    /// API-path form: `configmaps` for the core group, `apps/deployments`
    /// otherwise (never `deployments.apps`).
    pub fn path_form(&self) -> String {
        if self.group.is_empty() { self.resource.clone() } else { format!("{}/{}", self.group, self.resource) }
    }

    /// Parses the API-path form back.
    pub fn from_path_form(s: &str) -> Self {
        match s.split_once('/') {
            Some((g, r)) => Self::new(g, r),
            None => Self::new("", s),
        }
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path_form())
    }
}

/// The hasher of the maps every `Resolve` hashes whose keys no API user
/// chooses: scopes (a route and a type, a few dozen per cluster, named by its
/// operators), routes, and the labels of a type's metrics. foldhash, seeded
/// per process; the fact tables, keyed by the uids and names every API user
/// chooses, keep SipHash.
pub type ScopeHasher = foldhash::fast::RandomState;

/// `factScope{route, groupResource}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Scope {
    pub route: String,
    pub group_resource: GroupResource,
}

/// In `<route>`, `%` is written `%25` and `:` is `%3A`; nothing else changes.
const ROUTE_ESCAPES: &AsciiSet = &CONTROLS.remove(0).add(b'%').add(b':');

/// The stream key prefix gitops-reverser uses by default.
pub const DEFAULT_STREAM_PREFIX: &str = "gitops-reverser";

/// The audit route every tool assumes when none is named: `serve`'s printed
/// curl posts to it, `kubectl reverser why --route` asks it, the chart prints
/// it.
pub const DEFAULT_ROUTE: &str = "default";

impl Scope {
    pub fn new(route: impl Into<String>, group_resource: GroupResource) -> Self {
        Self { route: route.into(), group_resource }
    }

    /// The Redis stream of this scope:
    /// `<prefix>:author:v2:audit:route:<route>:<group/resource>`.
    pub fn stream_key(&self, prefix: &str) -> String {
        let route: String = utf8_percent_encode(&self.route, ROUTE_ESCAPES).collect();
        format!("{prefix}:author:v2:audit:route:{route}:{}", self.group_resource.path_form())
    }

    /// Inverse of [`Scope::stream_key`]; `None` for a key of another shape.
    pub fn from_stream_key(prefix: &str, key: &str) -> Option<Self> {
        let rest = key.strip_prefix(prefix)?.strip_prefix(":author:v2:audit:route:")?;
        // The route is escaped, so its first raw ':' ends it.
        let (route, gr) = rest.split_once(':')?;
        let route = percent_encoding::percent_decode_str(route).decode_utf8().ok()?;
        Some(Self::new(route.into_owned(), GroupResource::from_path_form(gr)))
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.route, self.group_resource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_key_matches_the_wire_page() {
        let core = Scope::new("prod-eu-1", GroupResource::new("", "configmaps"));
        assert_eq!(
            core.stream_key(DEFAULT_STREAM_PREFIX),
            "gitops-reverser:author:v2:audit:route:prod-eu-1:configmaps"
        );
        let apps = Scope::new("a:b%c", GroupResource::new("apps", "deployments"));
        let key = apps.stream_key(DEFAULT_STREAM_PREFIX);
        assert_eq!(key, "gitops-reverser:author:v2:audit:route:a%3Ab%25c:apps/deployments");
        assert_eq!(Scope::from_stream_key(DEFAULT_STREAM_PREFIX, &key), Some(apps));
    }
}
