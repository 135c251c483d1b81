//! Replay (`spec/replay.md`): the timeline's records, the options, and the
//! lines and summary replay prints. The driver that runs the real engine
//! over a timeline on a virtual clock is the runtime's
//! (`runtime::attribution::replay`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::audit::Event;
use super::index::IndexConfig;
use super::intent::Action;
use super::watch::WatchEvent;
use super::{ActorKind, GroupResource, Scope, Tier};
use crate::{Error, Result};

/// One timeline record.
#[derive(Debug, Clone)]
pub enum Record {
    Audit { at_ms: u64, route: String, event: Box<Event> },
    Watch { at_ms: u64, scope: Scope, version: String, event: WatchEvent },
}

impl Record {
    pub fn at_ms(&self) -> u64 {
        match self {
            Record::Audit { at_ms, .. } | Record::Watch { at_ms, .. } => *at_ms,
        }
    }
}

#[derive(Deserialize)]
struct RawRecord {
    at_ms: u64,
    #[serde(default)]
    route: String,
    #[serde(default)]
    audit: Option<Value>,
    #[serde(default)]
    watch: Option<Value>,
    #[serde(default)]
    group: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    resource: String,
}

/// Parses a JSON Lines timeline. Every line is checked before anything is
/// applied, so a malformed line leaves nothing half-applied; blank lines are
/// skipped but still counted, so line numbers are the file's.
pub fn parse_timeline(text: &str) -> Result<Vec<(usize, Record)>> {
    let mut out = Vec::new();
    let mut last_at = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let bad = |message: String| Error::Timeline { line, message };
        let r: RawRecord = serde_json::from_str(raw).map_err(|e| bad(format!("not a timeline record: {e}")))?;
        if r.at_ms < last_at {
            return Err(bad(format!("at_ms {} goes back in time (previous record: {last_at})", r.at_ms)));
        }
        last_at = r.at_ms;
        let rec = match (r.audit, r.watch) {
            (Some(a), None) => {
                let event: Event = serde_json::from_value(a)
                    .map_err(|e| bad(format!("audit is not an audit.k8s.io/v1 Event: {e}")))?;
                Record::Audit { at_ms: r.at_ms, route: r.route, event: Box::new(event) }
            }
            (None, Some(w)) => {
                let event: WatchEvent =
                    serde_json::from_value(w).map_err(|e| bad(format!("watch is not a watch event: {e}")))?;
                if event.is_change() && r.resource.is_empty() {
                    return Err(bad("a watch record needs its type's \"resource\"".into()));
                }
                let scope = Scope::new(r.route, GroupResource::new(r.group, r.resource));
                Record::Watch { at_ms: r.at_ms, scope, version: r.version, event }
            }
            _ => {
                return Err(bad("a record carries exactly one of \"audit\" or \"watch\"".into()));
            }
        };
        out.push((line, rec));
    }
    Ok(out)
}

/// Replay options; defaults are the sidecar's.
#[derive(Debug, Clone, Copy)]
pub struct ReplayOptions {
    pub grace_ms: u64,
    pub index: IndexConfig,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self { grace_ms: 3000, index: IndexConfig::default() }
    }
}

/// One output line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Line {
    pub line: usize,
    pub action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
    /// `Some(None)` prints `null` (the tier is `absent`); `None` omits it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor_kind: Option<ActorKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<u64>,
}

impl Line {
    pub fn bare(line: usize, action: Action) -> Self {
        Line { line, action: action.label(), tier: None, author: None, actor_kind: None, waited_ms: None }
    }
}

/// What happened, for stderr.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub audit_records: usize,
    pub watch_records: usize,
    pub facts_published: usize,
    pub rejected: BTreeMap<&'static str, usize>,
    pub resolutions: BTreeMap<&'static str, usize>,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let join = |m: &BTreeMap<&str, usize>| {
            if m.is_empty() {
                "none".to_string()
            } else {
                m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
            }
        };
        write!(
            f,
            "replay: {} records read ({} audit, {} watch); {} facts published; rejected: {}; resolutions by tier: {}",
            self.audit_records + self.watch_records,
            self.audit_records,
            self.watch_records,
            self.facts_published,
            join(&self.rejected),
            join(&self.resolutions)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_lines_are_errors_naming_the_line() {
        const WATCH: &str = r#"{"at_ms": 0, "route": "lab", "group": "", "version": "v1", "resource": "configmaps", "watch": {"type": "ADDED", "object": {"metadata": {"name": "cm"}}}}"#;
        const LATER: &str = r#"{"at_ms": 5, "route": "lab", "group": "", "version": "v1", "resource": "configmaps", "watch": {"type": "ADDED", "object": {"metadata": {"name": "cm"}}}}"#;
        for (text, needle) in [
            (format!("{WATCH}\nnot json\n"), "timeline line 2: not a timeline record"),
            (format!("{LATER}\n{WATCH}\n"), "timeline line 2: at_ms 0 goes back in time"),
            (r#"{"at_ms": 1}"#.to_string(), "timeline line 1: a record carries exactly one"),
            (r#"{"at_ms": 1, "watch": {"type": "ADDED"}}"#.to_string(), "needs its type's \"resource\""),
            (r#"{"at_ms": 1, "watch": {"type": "RENAMED"}, "resource": "x"}"#.to_string(), "not a watch event"),
        ] {
            let err = parse_timeline(&text).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
    }
}
