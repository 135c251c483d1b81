//! Replay (`spec/replay.md`): the real engine (publish side, index, waiters,
//! resolver) over a recorded timeline on a virtual clock. Deterministic: a
//! current-thread runtime with tokio's clock paused, so time only advances
//! when every task is waiting, and `biased` selects throughout.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::audit::{Event, Published, Rejection};
use super::clock::{Clock, TokioClock};
use super::index::IndexConfig;
use super::intent::{Action, IntentTracker};
use super::transport::FactBatch;
use super::watch::WatchEvent;
use super::{ActorKind, Engine, EngineConfig, GroupResource, Scope, Tier};
use crate::metrics::Metrics;
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
    fn bare(line: usize, action: Action) -> Self {
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

/// Runs the engine over `records` on a virtual clock.
pub fn run(records: Vec<(usize, Record)>, opts: ReplayOptions) -> Result<(Vec<Line>, Summary)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|source| Error::Io { context: "starting the replay runtime".into(), source })?;
    Ok(rt.block_on(drive(records, opts)))
}

async fn drive(records: Vec<(usize, Record)>, opts: ReplayOptions) -> (Vec<Line>, Summary) {
    let clock = TokioClock::starting_now();
    let config = EngineConfig { grace: Duration::from_millis(opts.grace_ms), index: opts.index };
    let engine = Arc::new(Engine::new(config, Arc::new(clock), Arc::new(Metrics::new())));
    let mut intent = IntentTracker::new(opts.index.ttl_ms);
    let mut summary = Summary::default();
    let mut lines = Vec::new();
    let mut pending = Vec::new();

    for (line, rec) in records {
        tokio::time::sleep_until(clock.base() + Duration::from_millis(rec.at_ms())).await;
        let now = clock.now_ms();
        match rec {
            Record::Audit { route, event, .. } => {
                summary.audit_records += 1;
                match engine.publish_event(&route, &event) {
                    Published::Fact { scope, fact, .. } => {
                        summary.facts_published += 1;
                        engine.apply_batch(FactBatch { scope, facts: vec![fact], at_ms: now });
                    }
                    Published::Rejected(r) => *summary.rejected.entry(Rejection::label(r)).or_default() += 1,
                }
            }
            Record::Watch { scope, version, event, .. } => {
                summary.watch_records += 1;
                let action = intent.observe(&scope, &event, now);
                if !matches!(action, Action::Write | Action::Delete) {
                    lines.push(Line::bare(line, action));
                    continue;
                }
                let q = event.query(action == Action::Delete, now);
                let engine = engine.clone();
                pending.push(tokio::spawn(async move {
                    let r = engine.resolve(&scope, &version, &q).await;
                    Line {
                        line,
                        action: action.label(),
                        tier: Some(r.tier),
                        author: Some(r.author().map(str::to_owned)),
                        actor_kind: Some(r.actor_kind()),
                        waited_ms: Some(r.waited.as_millis() as u64),
                    }
                }));
            }
        }
    }
    for p in pending {
        // A resolution task only panics on a bug; surface it rather than drop a line.
        let l = p.await.expect("a replay resolution panicked");
        *summary.resolutions.entry(l.tier.map_or("absent", Tier::label)).or_default() += 1;
        lines.push(l);
    }
    lines.sort_by_key(|l| l.line);
    (lines, summary)
}

#[cfg(test)]
mod tests;
