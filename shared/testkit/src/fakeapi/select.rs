//! The query of a LIST or WATCH: label and field selectors, paging
//! (`limit`, `continue`), `resourceVersion` semantics and the watch flags.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::error::ApiError;

/// One label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelReq {
    /// `key` (true) or `!key` (false).
    Exists(String, bool),
    /// `key=v`, `key==v` (true) or `key!=v` (false).
    Equals(String, bool, String),
    /// `key in (a,b)` (true) or `key notin (a,b)` (false).
    In(String, bool, Vec<String>),
}

/// Label and field selectors. Fields: `metadata.name`, `metadata.namespace`
/// on every type (plus what the API server supports per type: pods
/// `spec.nodeName`, `status.phase`; secrets `type`), with `=`, `==`, `!=`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selectors {
    pub fields: Vec<(String, bool, String)>,
    pub labels: Vec<LabelReq>,
}

/// Splits on commas outside parentheses (`a in (x,y),b`).
fn terms(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect()
}

fn split_term(term: &str) -> (String, bool, Option<String>) {
    if let Some((k, v)) = term.split_once("!=") {
        return (k.trim().into(), false, Some(v.trim().into()));
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return (k.trim().into(), true, Some(v.trim().into()));
    }
    (term.trim().into(), true, None)
}

fn set_term(term: &str) -> Option<LabelReq> {
    for (op, positive) in [(" notin ", false), (" in ", true)] {
        if let Some((k, rest)) = term.split_once(op) {
            let rest = rest.trim();
            let inner = rest.strip_prefix('(')?.strip_suffix(')')?;
            let values = inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect();
            return Some(LabelReq::In(k.trim().into(), positive, values));
        }
    }
    None
}

fn decode(v: &str) -> String {
    percent_encoding::percent_decode_str(&v.replace('+', " ")).decode_utf8_lossy().into_owned()
}

/// `key=value` pairs of a query string, percent-decoded.
pub fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

impl Selectors {
    /// Parse the query string of a LIST or WATCH request.
    pub fn from_query(query: &str) -> Result<Self, ApiError> {
        let mut sel = Selectors::default();
        for (k, v) in query_pairs(query) {
            match k.as_str() {
                "fieldSelector" => sel.add_fields(&v)?,
                "labelSelector" => sel.add_labels(&v)?,
                _ => {}
            }
        }
        Ok(sel)
    }

    /// Add a `fieldSelector` expression.
    pub fn add_fields(&mut self, expr: &str) -> Result<(), ApiError> {
        for term in terms(expr) {
            let (f, eq, val) = split_term(&term);
            let Some(val) = val else {
                return Err(ApiError::bad_request(format!("invalid selector: '{term}'; can't understand '{term}'")));
            };
            self.fields.push((f, eq, val));
        }
        Ok(())
    }

    /// Add a `labelSelector` expression.
    pub fn add_labels(&mut self, expr: &str) -> Result<(), ApiError> {
        for term in terms(expr) {
            if let Some(req) = set_term(&term) {
                self.labels.push(req);
            } else if let Some(k) = term.strip_prefix('!') {
                self.labels.push(LabelReq::Exists(k.trim().into(), false));
            } else {
                let (l, eq, val) = split_term(&term);
                self.labels.push(match val {
                    Some(v) => LabelReq::Equals(l, eq, v),
                    None => LabelReq::Exists(l, true),
                });
            }
        }
        Ok(())
    }

    /// Refuses field labels the API server does not index for `plural`.
    pub fn check_fields(&self, plural: &str) -> Result<(), ApiError> {
        for (f, _, _) in &self.fields {
            let ok = matches!(f.as_str(), "metadata.name" | "metadata.namespace")
                || (plural == "pods" && matches!(f.as_str(), "spec.nodeName" | "status.phase"))
                || (plural == "secrets" && f == "type");
            if !ok {
                return Err(ApiError::bad_request(format!("field label not supported: {f}")));
            }
        }
        Ok(())
    }

    /// Whether nothing is selected on (every object matches).
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.labels.is_empty()
    }

    /// Whether `obj` matches every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let fields_ok = self.fields.iter().all(|(f, eq, val)| {
            let got = obj.pointer(&format!("/{}", f.replace('.', "/"))).and_then(Value::as_str).unwrap_or("");
            (got == val) == *eq
        });
        let label = |l: &str| obj.pointer("/metadata/labels").and_then(|m| m.get(l)).and_then(Value::as_str);
        let labels_ok = self.labels.iter().all(|req| match req {
            LabelReq::Exists(l, want) => label(l).is_some() == *want,
            LabelReq::Equals(l, eq, v) => (label(l) == Some(v.as_str())) == *eq,
            LabelReq::In(l, positive, vs) => {
                let inside = label(l).is_some_and(|got| vs.iter().any(|v| v == got));
                inside == *positive
            }
        });
        fields_ok && labels_ok
    }
}

/// A continue token as the API server mints it: base64 of
/// `{"v":"meta.k8s.io/v1","rv":<list RV>,"start":"<next key>"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continue {
    pub resource_version: u64,
    /// `namespace/name` of the last item returned, plus `\0` (the next key).
    pub start: String,
}

impl Continue {
    pub fn encode(&self) -> String {
        STANDARD.encode(json!({"v": "meta.k8s.io/v1", "rv": self.resource_version, "start": self.start}).to_string())
    }

    pub fn decode(token: &str) -> Result<Self, ApiError> {
        let bad = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
        let bytes = STANDARD.decode(token.trim()).map_err(|_| bad("not base64"))?;
        let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad("not JSON"))?;
        if v["v"] != "meta.k8s.io/v1" {
            return Err(bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"));
        }
        let resource_version = v["rv"].as_u64().ok_or_else(|| bad("no resourceVersion"))?;
        let start = v["start"].as_str().ok_or_else(|| bad("no start key"))?.to_string();
        Ok(Continue { resource_version, start })
    }
}

/// The query parameters of a LIST, WATCH or DELETE collection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    pub selectors: Selectors,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    /// `resourceVersion`: absent, `""`, `"0"` or a number.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`: `Exact` or `NotOlderThan`.
    pub resource_version_match: Option<String>,
    pub watch: bool,
    pub allow_bookmarks: bool,
    pub timeout_seconds: Option<u64>,
    pub send_initial_events: bool,
}

impl ListOptions {
    /// Parse a query string.
    pub fn from_query(query: &str) -> Result<Self, ApiError> {
        let mut o = ListOptions { selectors: Selectors::from_query(query)?, ..Default::default() };
        let truthy = |v: &str| matches!(v, "1" | "true" | "True");
        for (k, v) in query_pairs(query) {
            match k.as_str() {
                "limit" => {
                    let n: i64 = v.parse().map_err(|_| ApiError::bad_request(format!("invalid limit {v:?}")))?;
                    o.limit = (n > 0).then_some(n as usize);
                }
                "continue" => o.continue_token = Some(v).filter(|t| !t.is_empty()),
                "resourceVersion" => o.resource_version = Some(v),
                "resourceVersionMatch" => o.resource_version_match = Some(v).filter(|m| !m.is_empty()),
                "watch" => o.watch = truthy(&v),
                "allowWatchBookmarks" => o.allow_bookmarks = truthy(&v),
                "timeoutSeconds" => {
                    o.timeout_seconds =
                        Some(v.parse().map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {v:?}")))?)
                }
                "sendInitialEvents" => o.send_initial_events = truthy(&v),
                _ => {}
            }
        }
        if o.continue_token.is_some() && o.resource_version.as_deref().is_some_and(|rv| !rv.is_empty() && rv != "0") {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue".to_string(),
            ));
        }
        Ok(o)
    }

    /// The numeric `resourceVersion`, when one (other than `0`) was given.
    pub fn exact_version(&self) -> Result<Option<u64>, ApiError> {
        match self.resource_version.as_deref() {
            None | Some("") | Some("0") => Ok(None),
            Some(rv) => {
                rv.parse().map(Some).map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))
            }
        }
    }
}
