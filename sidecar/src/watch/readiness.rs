//! Whether the watcher is following the cluster (`/readyz`), and how an
//! API server outage is logged: one warning naming the server and what
//! failed when it starts, quiet repeats, one line when it ends.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use rules::mirror::rule_status::StreamState;

/// What `/readyz` answers: ready once discovery and the rules were read
/// and every running watch has listed, and as long as none of them fails.
#[derive(Debug, Default)]
pub struct Readiness {
    /// Per concern (`discovery`, `rules`, one per watch): `None` while it
    /// works, else why not; and the stream state a rule's status reports.
    failing: Mutex<BTreeMap<String, (Option<String>, StreamState)>>,
}

impl Readiness {
    /// `concern` starts, not yet done once (a watch before its first list).
    pub fn pending(&self, concern: &str, what: &str) {
        self.lock().insert(concern.to_owned(), (Some(what.to_owned()), StreamState::Replaying));
    }

    pub fn ok(&self, concern: &str) {
        self.lock().insert(concern.to_owned(), (None, StreamState::Streaming));
    }

    /// `forbidden`: the server refused the call (403), which RBAC fixes,
    /// not a retry (the rule's status says `WatchNotPermitted`).
    pub fn failing(&self, concern: &str, why: &str, forbidden: bool) {
        let state = StreamState::Blocked { not_permitted: forbidden };
        self.lock().insert(concern.to_owned(), (Some(why.to_owned()), state));
    }

    /// The state of a watch, `None` when it is not running.
    pub fn stream(&self, concern: &str) -> Option<StreamState> {
        self.lock().get(concern).map(|(_, s)| *s)
    }

    /// `concern` is gone (a watch no rule asks for any more).
    pub fn forget(&self, concern: &str) {
        self.lock().remove(concern);
    }

    /// `Ok` when ready, else every reason.
    pub fn check(&self) -> Result<(), String> {
        let map = self.lock();
        let mut reasons: Vec<String> =
            map.iter().filter_map(|(k, (why, _))| why.as_ref().map(|w| format!("{k}: {w}"))).collect();
        if !map.contains_key(DISCOVERY) {
            // What holds discovery back (reading the GitTarget) comes first.
            reasons.push("discovery has not been read yet".into());
        }
        if reasons.is_empty() { Ok(()) } else { Err(reasons.join("\n")) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (Option<String>, StreamState)>> {
        // A panic elsewhere never leaves the map half-written: every
        // change is one insert or remove.
        self.failing.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The readiness concern of discovery.
pub const DISCOVERY: &str = "discovery";

/// One concern's outage: the first failure is a warning, the same failure
/// again is debug, and the recovery is one info line.
#[derive(Debug, Default)]
pub struct Outage {
    last: Option<String>,
    failures: u32,
}

impl Outage {
    /// Logs a failure: `context` says what it means (`nothing is watched
    /// yet`, `listing v1/configmaps everywhere`), `why` what failed.
    pub fn failed(&mut self, context: &str, why: &str, retry_in: Duration) {
        self.failures += 1;
        if self.last.as_deref() == Some(why) {
            tracing::debug!(failures = self.failures, "{context}: {why}");
        } else {
            tracing::warn!(
                "{context}: {why}; retrying in {} (the same failure again is logged at debug)",
                runtime::kubeconfig::bounds::humanize(retry_in)
            );
            self.last = Some(why.to_owned());
        }
    }

    /// Logs the recovery, when there was an outage.
    pub fn recovered(&mut self, what: &str) {
        if self.failures > 0 {
            tracing::info!("{what} works again, after {} failed attempt(s)", self.failures);
        }
        self.last = None;
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_after_discovery_and_while_nothing_fails() {
        let r = Readiness::default();
        assert!(r.check().unwrap_err().contains("discovery"));
        r.ok(DISCOVERY);
        assert_eq!(r.check(), Ok(()));
        r.pending("v1/configmaps", "not listed yet");
        assert_eq!(r.check(), Err("v1/configmaps: not listed yet".into()));
        assert_eq!(r.stream("v1/configmaps"), Some(StreamState::Replaying));
        r.ok("v1/configmaps");
        assert_eq!(r.stream("v1/configmaps"), Some(StreamState::Streaming));
        r.failing(DISCOVERY, "timed out", false);
        assert_eq!(r.check(), Err("discovery: timed out".into()));
        r.ok(DISCOVERY);
        r.failing("v1/configmaps", "refused", true);
        assert_eq!(r.stream("v1/configmaps"), Some(StreamState::Blocked { not_permitted: true }));
        r.forget("v1/configmaps");
        assert_eq!(r.stream("v1/configmaps"), None);
        assert_eq!(r.check(), Ok(()));
    }
}
