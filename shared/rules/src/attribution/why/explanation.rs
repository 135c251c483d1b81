//! The evidence `Explain` returns, as one plain JSON shape shared by the
//! sidecar's gRPC `Explain`, its `GET /v1/explain` JSON endpoint, and the
//! plugin's own engine when it follows the streams with `--redis-url`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::attribution::index::{Query, StoredFact};
use crate::attribution::{Engine, Fact, GroupResource, Scope, Tier};
use crate::proto;
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
}

impl Explanation {
    /// Asks `engine` about the object `q` describes. `following` and
    /// `follower_last_success` come from the process's follower.
    pub fn from_engine(engine: &Engine, scope: &Scope, q: &Query, following: bool) -> Self {
        let winner = engine.lookup(scope, q);
        let candidates = engine
            .explain(scope, q)
            .into_iter()
            .map(|c| CandidateView {
                wins: winner.best.as_ref().is_some_and(|w| w.tier == c.tier && Arc::ptr_eq(&w.fact, &c.fact)),
                tier: c.tier,
                asserts: c.tier.asserts().into(),
                fact: EvidenceFact::from(&*c.fact),
                excluded: c.excluded.map(str::to_owned),
            })
            .collect();
        Self {
            winner_tier: winner.best.as_ref().map_or(Tier::Absent, |m| m.tier),
            settled: winner.settled,
            candidates,
            route: engine.route_health(&scope.route).map(|h| RouteHealthView {
                ever_resolved: h.ever_resolved,
                unresolved_in_a_row: h.unresolved_in_a_row,
                misrouted: h.warned,
            }),
            following,
            follower_last_success: engine.metrics().fact_follower_last_success_timestamp_seconds.get(),
            facts_for_type: engine.facts_for_type(scope) as u64,
        }
    }

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

fn fact_from_proto(f: proto::Fact) -> EvidenceFact {
    EvidenceFact {
        fact: Fact {
            author: f.author,
            namespace: f.namespace,
            name: f.name,
            uid: f.uid,
            resource_version: f.resource_version,
            display_name: f.display_name,
            email: f.email,
            verb: f.verb,
            audit_id: f.audit_id,
            stage_timestamp: f.stage_timestamp,
            label_selector: f.label_selector,
            uids: f.has_uids.then_some(f.uids),
        },
        appended_at_ms: f.appended_at_ms,
    }
}

fn fact_to_proto(f: &EvidenceFact) -> proto::Fact {
    let x = &f.fact;
    proto::Fact {
        author: x.author.clone(),
        namespace: x.namespace.clone(),
        name: x.name.clone(),
        uid: x.uid.clone(),
        resource_version: x.resource_version.clone(),
        display_name: x.display_name.clone(),
        email: x.email.clone(),
        verb: x.verb.clone(),
        audit_id: x.audit_id.clone(),
        stage_timestamp: x.stage_timestamp.clone(),
        label_selector: x.label_selector.clone(),
        uids: x.uids.clone().unwrap_or_default(),
        has_uids: x.uids.is_some(),
        appended_at_ms: f.appended_at_ms,
    }
}

impl TryFrom<proto::ExplainResponse> for Explanation {
    type Error = Error;

    fn try_from(r: proto::ExplainResponse) -> Result<Self> {
        let candidates = r
            .candidates
            .into_iter()
            .map(|c| {
                Ok(CandidateView {
                    tier: parse_tier(&c.tier)?,
                    asserts: c.asserts,
                    fact: fact_from_proto(c.fact.unwrap_or_default()),
                    wins: c.wins,
                    excluded: (!c.excluded.is_empty()).then_some(c.excluded),
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            winner_tier: parse_tier(&r.winner_tier)?,
            settled: r.settled,
            candidates,
            route: r.route.map(|h| RouteHealthView {
                ever_resolved: h.ever_resolved,
                unresolved_in_a_row: h.unresolved_in_a_row,
                misrouted: h.misrouted,
            }),
            following: r.following,
            follower_last_success: r.follower_last_success,
            facts_for_type: r.facts_for_type,
        })
    }
}

impl From<&Explanation> for proto::ExplainResponse {
    fn from(e: &Explanation) -> Self {
        proto::ExplainResponse {
            winner_tier: e.winner_tier.label().into(),
            settled: e.settled,
            candidates: e
                .candidates
                .iter()
                .map(|c| proto::Candidate {
                    tier: c.tier.label().into(),
                    asserts: c.asserts.clone(),
                    fact: Some(fact_to_proto(&c.fact)),
                    wins: c.wins,
                    excluded: c.excluded.clone().unwrap_or_default(),
                })
                .collect(),
            route: e.route.map(|h| proto::RouteHealth {
                ever_resolved: h.ever_resolved,
                unresolved_in_a_row: h.unresolved_in_a_row,
                misrouted: h.misrouted,
            }),
            following: e.following,
            follower_last_success: e.follower_last_success,
            facts_for_type: e.facts_for_type,
        }
    }
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
        }
    }

    /// The gRPC request asking the same.
    pub fn to_proto(&self) -> proto::ExplainRequest {
        proto::ExplainRequest {
            r#type: Some(proto::TypeRef {
                route: self.route.clone(),
                group: self.group.clone(),
                version: self.version.clone(),
                resource: self.resource.clone(),
            }),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            resource_version: self.resource_version.clone(),
            removal: self.removal,
            labels: parse_labels(&self.labels).into_iter().collect(),
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
