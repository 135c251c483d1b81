//! The watcher's metrics (spec/mirror.md, "What a user sees"): events
//! watched by type, events not sent (and why), commit windows, commits,
//! failed windows, watch restarts, rule problems, refused rules, and the lag from a watch
//! event to its pushed commit.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    pub group: String,
    pub version: String,
    pub resource: String,
    /// ADDED, MODIFIED, DELETED.
    pub r#type: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RestartLabels {
    pub resource: String,
    /// `dropped` (the connection ended), `gone` (410: relist), `error`.
    pub reason: String,
}

/// Every metric the watcher exposes on its `--metrics-listen`.
#[derive(Debug)]
pub struct WatchMetrics {
    pub events: Family<EventLabels, Counter>,
    pub skipped: Family<ReasonLabel, Counter>,
    pub windows: Counter,
    pub commits: Counter,
    pub window_failures: Counter,
    pub restarts: Family<RestartLabels, Counter>,
    pub reconciles: Counter,
    pub rule_problems: Gauge,
    pub refused_rules: Gauge,
    pub watched_types: Gauge,
    pub lag_seconds: Histogram,
}

impl Default for WatchMetrics {
    fn default() -> Self {
        WatchMetrics {
            events: Family::default(),
            skipped: Family::default(),
            windows: Counter::default(),
            commits: Counter::default(),
            window_failures: Counter::default(),
            restarts: Family::default(),
            reconciles: Counter::default(),
            rule_problems: Gauge::default(),
            refused_rules: Gauge::default(),
            watched_types: Gauge::default(),
            lag_seconds: Histogram::new([0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0]),
        }
    }
}

impl WatchMetrics {
    pub fn skip(&self, reason: &str) {
        self.skipped.get_or_create(&ReasonLabel { reason: reason.into() }).inc();
    }

    pub fn restart(&self, resource: &str, reason: &str) {
        self.restarts.get_or_create(&RestartLabels { resource: resource.into(), reason: reason.into() }).inc();
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut r = Registry::default();
        let p = "gitopsreverser_mirror";
        r.register(format!("{p}_events"), "watch events received, by type", self.events.clone());
        r.register(format!("{p}_events_skipped"), "watch events not sent on, by reason", self.skipped.clone());
        r.register(format!("{p}_windows"), "commit windows sent to the sidecar", self.windows.clone());
        r.register(format!("{p}_commits"), "commits the sidecar made for the windows", self.commits.clone());
        r.register(
            format!("{p}_window_failures"),
            "windows the sidecar could not commit or push; retried",
            self.window_failures.clone(),
        );
        r.register(format!("{p}_watch_restarts"), "watches restarted, by reason", self.restarts.clone());
        r.register(format!("{p}_reconciles"), "reconciles after a list", self.reconciles.clone());
        r.register(format!("{p}_rule_problems"), "rule items that could not be resolved", self.rule_problems.clone());
        r.register(
            format!("{p}_rules_refused"),
            "WatchRules the source-namespace gate refuses; nothing of them is watched",
            self.refused_rules.clone(),
        );
        r.register(format!("{p}_watched_types"), "types being watched", self.watched_types.clone());
        r.register(
            format!("{p}_lag_seconds"),
            "from a watch event's arrival to its pushed commit",
            self.lag_seconds.clone(),
        );
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &r).expect("writing to a String cannot fail");
        out
    }
}
