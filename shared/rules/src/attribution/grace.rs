//! Adaptive grace (opt-in, `--author-attribution-adaptive-grace`): a type
//! whose route has produced no fact for a long stretch makes every one of its
//! watch events wait the whole grace before `absent`. After a run of misses
//! with no fact seen for a (route, type), its events resolve at once on what
//! the index holds; the first fact of that type restores the full grace.
//!
//! Why this cannot change an author the full grace would have found when the
//! fact arrives before the watch event: the skip only replaces the wait, never
//! the lookup. A resolution still reads the index first, and a fact filed
//! before the event is there to be read; and filing any fact of the type ends
//! the streak, so the full grace is back for the events that follow it.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::Scope;

/// When a resolution stops waiting for its fact (on the index clock): one
/// grace after it was asked, and, for a relisted object that says when it
/// was written (`written_at_us`, second precision, so one second more), no
/// later than one grace after that write — where a watch event seen at the
/// write would have stopped waiting. A relist of objects written long ago
/// (a first start on a populated cluster) then answers on what the index
/// holds instead of waiting a grace per reconcile for facts that, if they
/// ever came, are already there.
///
/// Why this cannot name a wrong author: it only shortens the wait; every
/// answer is still read from the index with the same tiers and
/// exclusions, and a shorter wait can only turn a late name into `absent`.
pub fn deadline_ms(asked_ms: u64, grace_ms: u64, written_at_us: Option<i64>) -> u64 {
    let live = asked_ms.saturating_add(grace_ms);
    match written_at_us {
        Some(us) if us >= 0 => live.min((us as u64 / 1000).saturating_add(1000).saturating_add(grace_ms)),
        _ => live,
    }
}

/// The newest `metadata.managedFields[].time` of an object, in
/// microseconds: when its current version was written, to the second.
/// `None` without managed fields (a client that records none).
pub fn written_at_us(object: &serde_json::Value) -> Option<i64> {
    super::audit::metadata(object, "managedFields")?
        .as_array()?
        .iter()
        .filter_map(|f| f.get("time")?.as_str())
        .filter_map(crate::attribution::index::order::stage_time_us)
        .max()
}

/// The opt-in's setting: how many absent resolutions in a row, with no fact
/// of the type filed between them, before the grace is skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptiveGrace {
    /// At least 1 (the flag refuses 0: skipping from the first event would
    /// never wait for any fact at all).
    pub after_misses: u32,
}

impl Default for AdaptiveGrace {
    fn default() -> Self {
        Self { after_misses: DEFAULT_AFTER_MISSES }
    }
}

/// `--author-attribution-adaptive-grace-misses`' default: ten full graces
/// (30 s at the default grace) with nothing filed is no batching delay.
pub const DEFAULT_AFTER_MISSES: u32 = 10;

/// How long a resolution may wait for its fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Up to the grace (the spec's wait).
    Full,
    /// Not at all: answer with what the index holds now.
    Skip,
}

/// One (route, type)'s run of misses since its last fact.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Streak {
    /// Absent resolutions in a row with no fact of the type filed since.
    pub misses: u32,
}

/// The streaks of every (route, type) that has missed since its last fact;
/// a type with a fact since its last miss holds no entry.
#[derive(Debug, Clone, Default)]
pub struct Streaks {
    config: AdaptiveGrace,
    by_scope: HashMap<Scope, Streak>,
}

impl Streaks {
    pub fn new(config: AdaptiveGrace) -> Self {
        Self { config, by_scope: HashMap::new() }
    }

    pub fn config(&self) -> AdaptiveGrace {
        self.config
    }

    /// How long the next resolution in `scope` may wait.
    pub fn wait(&self, scope: &Scope) -> Wait {
        if self.streak(scope).misses >= self.config.after_misses { Wait::Skip } else { Wait::Full }
    }

    pub fn streak(&self, scope: &Scope) -> Streak {
        self.by_scope.get(scope).copied().unwrap_or_default()
    }

    /// A resolution in `scope` ended; `absent` when it named nobody.
    pub fn resolved(&mut self, scope: &Scope, absent: bool) {
        if !absent {
            // It matched a fact of the type, so one was seen.
            self.by_scope.remove(scope);
            return;
        }
        let streak = self.by_scope.entry(scope.clone()).or_default();
        streak.misses = streak.misses.saturating_add(1);
    }

    /// A fact of `scope`'s type was filed: the full grace is back.
    pub fn fact_filed(&mut self, scope: &Scope) {
        self.by_scope.remove(scope);
    }

    /// What `Explain` says about the type's grace.
    pub fn view(&self, scope: &Scope) -> GraceView {
        GraceView {
            misses_in_a_row: self.streak(scope).misses,
            after_misses: self.config.after_misses,
            skipping: self.wait(scope) == Wait::Skip,
        }
    }
}

/// The adaptive grace's state for one type, as `Explain` shows it; absent
/// from an explanation when the answering process does not adapt its grace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraceView {
    /// Absent resolutions in a row with no fact of the type seen since.
    pub misses_in_a_row: u32,
    /// The configured run after which the grace is skipped.
    pub after_misses: u32,
    /// Whether this type's watch events resolve without waiting now.
    pub skipping: bool,
}

#[cfg(test)]
mod tests;
