//! The evidence `Explain` returns, as one plain JSON shape shared by the
//! sidecar's gRPC `Explain`, its `GET /v1/explain` JSON endpoint, and the
//! plugin's own engine when it follows the streams with `--redis-url`. The
//! runtime builds it from its engine (`Engine::explanation`) and converts it
//! to and from the socket API's `ExplainResponse`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::attribution::grace::GraceView;
use crate::attribution::index::{Query, StoredFact};
use crate::attribution::{Fact, GroupResource, Scope, Tier};
use crate::{Error, Result};

/// One fact as `why` shows it: the wire fact plus when its entry was appended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceFact {
    #[serde(flatten)]
    pub fact: Fact,
    /// Unix milliseconds of the stream entry that carried it.
    pub appended_at_ms: u64,
}

impl From<&StoredFact> for EvidenceFact {
    fn from(s: &StoredFact) -> Self {
        Self { fact: s.fact.clone(), appended_at_ms: s.at_ms }
    }
}

/// One candidate: a fact the index holds for the object, under which tier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidateView {
    pub tier: Tier,
    /// What the tier asserts (the spec's tier table).
    pub asserts: String,
    pub fact: EvidenceFact,
    /// The one the resolver would return now.
    pub wins: bool,
    /// Why the join passes it by; `None` when usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded: Option<String>,
}

/// The resolver's per-route memory ("A misrouted provider is loud").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteHealthView {
    pub ever_resolved: bool,
    pub unresolved_in_a_row: u32,
    /// The "never resolved, five in a row" warning fired.
    pub misrouted: bool,
}

/// Everything the evidence says about one object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// The tier the resolver would answer with now (`absent` when none).
    pub winner_tier: Tier,
    /// Whether that answer is final, or a removal would keep waiting.
    pub settled: bool,
    pub candidates: Vec<CandidateView>,
    /// `None` when the answering process has resolved nothing on the route
    /// (a fresh process, or the plugin's own follower).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<RouteHealthView>,
    /// Whether the answering process follows the type's stream at all.
    pub following: bool,
    /// Unix seconds of the follower's last successful read (0: never).
    pub follower_last_success: f64,
    /// Facts held for the type on the route, for any object.
    pub facts_for_type: u64,
    /// The type's adaptive grace; `None` when the answering process waits
    /// the full grace always (`--author-attribution-adaptive-grace` off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace: Option<GraceView>,
}

impl Explanation {
    /// The winning candidate, if any.
    pub fn winner(&self) -> Option<&CandidateView> {
        self.candidates.iter().find(|c| c.wins)
    }
}

/// The tier a label names (`exact`, `delete_sticky`, ...).
pub fn parse_tier(label: &str) -> Result<Tier> {
    Tier::ALL.into_iter().find(|t| t.label() == label).ok_or_else(|| Error::WhyEvidence {
        message: format!("the evidence names an unknown tier {label:?}; upgrade the plugin to the sidecar's version"),
    })
}

/// What `Explain` is asked, as the query string of the sidecar's
/// `GET /v1/explain` (`route`, `group`, `version`, `resource`, `namespace`,
/// `name`, `uid`, `resourceVersion`, `removal`, and `labels` as `k=v,k=v`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExplainParams {
    pub route: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub removal: bool,
    /// The object's labels, `k=v` pairs joined by `,` (a collection's
    /// selector is matched against them).
    pub labels: String,
    /// The object's `metadata.creationTimestamp`: a weak-tier fact stamped
    /// before it is passed over (empty: not known, nothing passed over).
    pub creation_timestamp: String,
}

impl ExplainParams {
    /// The scope asked about; refuses a request naming no resource.
    pub fn scope(&self) -> Result<Scope> {
        if self.resource.is_empty() {
            return Err(Error::WhyEvidence { message: "explain needs a resource (e.g. resource=configmaps)".into() });
        }
        Ok(Scope::new(&self.route, GroupResource::new(&self.group, &self.resource)))
    }

    /// The index query, observed at `now_ms`.
    pub fn query(&self, now_ms: u64) -> Query {
        Query {
            uid: self.uid.clone(),
            resource_version: self.resource_version.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            labels: parse_labels(&self.labels),
            removal: self.removal,
            observed_at_ms: now_ms,
            created_at_us: crate::attribution::index::order::stage_time_us(&self.creation_timestamp),
            written_at_us: None,
            previous: None,
        }
    }

    /// The query string (percent-encoded) for `GET /v1/explain`.
    pub fn to_query_string(&self) -> String {
        use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
        let pairs = [
            ("route", self.route.as_str()),
            ("group", &self.group),
            ("version", &self.version),
            ("resource", &self.resource),
            ("namespace", &self.namespace),
            ("name", &self.name),
            ("uid", &self.uid),
            ("resourceVersion", &self.resource_version),
            ("removal", if self.removal { "true" } else { "false" }),
            ("labels", &self.labels),
            ("creationTimestamp", &self.creation_timestamp),
        ];
        pairs
            .iter()
            .map(|(k, v)| format!("{k}={}", utf8_percent_encode(v, NON_ALPHANUMERIC)))
            .collect::<Vec<_>>()
            .join("&")
    }
}

/// `k=v,k=v` as a map; a pair without `=` is a label with an empty value.
pub fn parse_labels(s: &str) -> BTreeMap<String, String> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (p.to_owned(), String::new()),
        })
        .collect()
}

/// The inverse of [`parse_labels`].
pub fn format_labels(labels: &BTreeMap<String, String>) -> String {
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}
