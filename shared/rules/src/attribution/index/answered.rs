//! What answered last, per object (issue 30, rule 1): a fact that attributed
//! one version of an object never attributes a later version of it through
//! a weak tier (`name`, `resource_version`, `deletecollection_scope`).
//!
//! Why it is needed: the weak tiers are last-writer-wins by a key a later
//! change of the same object also reaches (its name, a collection's scope).
//! The watch event usually wins the race against its own audit batch (spec
//! §4 "The wait"), so on the first read the weak slot still holds the
//! EARLIER change's fact, and answering with it names a previous actor. The
//! strong tiers are keyed by what only this change carries and need no such
//! memory.
//!
//! The memory is one small entry per (scope, uid) that a fact answered,
//! bounded like the index: an entry lives one TTL after the resolution that
//! wrote it, and each scope holds at most the per-type cap of entries (the
//! oldest go first, counted). What is remembered is the answering fact's
//! place in the object's order ([`super::order`]), its arrival number, the
//! version it answered, and whether it was about a deletion.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use super::order::order_of;
use super::store::Key;
use crate::attribution::Scope;

/// The previous answer for one object, as a query carries it into a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Previous {
    /// Arrival number of the fact that answered (unique per held fact,
    /// increasing in arrival order).
    pub seq: u64,
    /// That fact's place in the object's order: resourceVersion as an
    /// integer and stageTimestamp in microseconds, where it had them.
    pub order: (Option<u64>, Option<i64>),
    /// Which version it answered (see [`version_key`]).
    pub version: u64,
    /// The fact was about a deletion: every later removal event of the same
    /// object (a finalizer's update while Terminating, the final DELETED) is
    /// the same deletion, which the same fact still answers (as the sticky
    /// pointer does for a uid-keyed delete fact).
    pub removal_fact: bool,
}

impl Previous {
    /// Why a weak-tier fact (arrival number `seq`, order `order`) may not
    /// answer a read of version `version` (`removal`: a removal event), or
    /// `None` when it may. The fact that answered, and any fact earlier in
    /// the object's order (or, when the order cannot tell, that arrived no
    /// later), is about an earlier change than the version asked.
    pub fn passes_over(&self, seq: u64, order: (Option<u64>, Option<i64>), version: u64, removal: bool) -> bool {
        if version == self.version || (removal && self.removal_fact) {
            return false;
        }
        match order_of(order, self.order) {
            Some(Ordering::Less) => true,
            Some(_) => false,
            None => seq <= self.seq,
        }
    }
}

/// A resourceVersion as the memory compares it: a canonical integer as
/// itself, anything else by a hash (a collision can only make two versions
/// read as one, which keeps today's answer, never a new wrong one).
pub fn version_key(rv: &str) -> u64 {
    match Key::rv(rv) {
        Some(Key::Num(n)) => n,
        Some(_) => VERSION_HASH.hash_one(rv) | (1 << 63),
        None => u64::MAX,
    }
}

/// Fixed keys: a version key must mean the same across every read.
static VERSION_HASH: std::sync::LazyLock<RandomState> = std::sync::LazyLock::new(RandomState::new);

/// A uid as the memory holds it: 16 bytes for the canonical UUID form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Uid {
    Uuid([u8; 16]),
    Text(Box<str>),
}

impl Uid {
    fn of(uid: &str) -> Option<Self> {
        Some(match Key::id(uid)? {
            Key::Uuid(b) => Uid::Uuid(b),
            _ => Uid::Text(uid.into()),
        })
    }
}

/// One remembered answer: 64 bytes, 88 with its key (asserted in the tests).
#[derive(Debug, Clone, Copy)]
struct Entry {
    previous: Previous,
    /// When the resolution that wrote it ended (it expires one TTL later).
    at_ms: u64,
}

/// The memory over every scope.
#[derive(Debug, Default)]
pub struct Answered {
    ttl_ms: u64,
    cap_per_scope: usize,
    by_scope: HashMap<Scope, HashMap<Uid, Entry>>,
    evicted: u64,
}

impl Answered {
    /// `ttl_ms` and `cap_per_scope` are the index's TTL and per-type cap.
    pub fn new(ttl_ms: u64, cap_per_scope: usize) -> Self {
        Self { ttl_ms, cap_per_scope: cap_per_scope.max(1), ..Self::default() }
    }

    /// The previous answer for `uid` in `scope`, unless it has expired.
    pub fn previous(&self, scope: &Scope, uid: &str, now_ms: u64) -> Option<Previous> {
        let e = self.by_scope.get(scope)?.get(&Uid::of(uid)?)?;
        (e.at_ms.saturating_add(self.ttl_ms) > now_ms).then_some(e.previous)
    }

    /// A resolution of `uid` ended at `now_ms` naming a fact: remember it.
    pub fn record(&mut self, scope: &Scope, uid: &str, previous: Previous, now_ms: u64) {
        let Some(uid) = Uid::of(uid) else { return };
        let (ttl, cap) = (self.ttl_ms, self.cap_per_scope);
        let map = match self.by_scope.get_mut(scope) {
            Some(m) => m,
            None => self.by_scope.entry(scope.clone()).or_default(),
        };
        if map.len() >= cap && !map.contains_key(&uid) {
            map.retain(|_, e| e.at_ms.saturating_add(ttl) > now_ms);
            if map.len() >= cap {
                // Drop the oldest eighth at once, so a full scope pays one
                // pass per cap/8 resolutions rather than one per resolution.
                let mut ages: Vec<u64> = map.values().map(|e| e.at_ms).collect();
                let k = (ages.len() / 8).max(1) - 1;
                let (_, &mut cut, _) = ages.select_nth_unstable(k);
                let before = map.len();
                map.retain(|_, e| e.at_ms > cut);
                self.evicted += (before - map.len()) as u64;
            }
        }
        map.insert(uid, Entry { previous, at_ms: now_ms });
    }

    /// Drops entries past their TTL (memory only: expiry is decided on read).
    pub fn sweep(&mut self, now_ms: u64) {
        let ttl = self.ttl_ms;
        self.by_scope.retain(|_, m| {
            m.retain(|_, e| e.at_ms.saturating_add(ttl) > now_ms);
            !m.is_empty()
        });
    }

    /// Objects remembered across every scope.
    pub fn len(&self) -> usize {
        self.by_scope.values().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by_scope.is_empty()
    }

    /// Entries dropped by the cap before their TTL.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::GroupResource;

    fn scope() -> Scope {
        Scope::new("lab", GroupResource::new("", "secrets"))
    }

    fn prev(seq: u64, ts: i64, rv: &str) -> Previous {
        Previous { seq, order: (None, Some(ts)), version: version_key(rv), removal_fact: false }
    }

    #[test]
    fn the_answering_fact_and_earlier_ones_are_passed_over_for_a_later_version() {
        let p = prev(5, 1_000, "10");
        let v11 = version_key("11");
        assert!(p.passes_over(5, (None, Some(1_000)), v11, false), "the fact that answered v10");
        assert!(p.passes_over(3, (None, Some(900)), v11, false), "an earlier change");
        assert!(!p.passes_over(7, (None, Some(1_100)), v11, false), "a later change answers");
        assert!(!p.passes_over(5, (None, Some(1_000)), version_key("10"), false), "v10 asked again");
        // Unordered facts: arrival decides.
        let q = Previous { order: (None, None), ..p };
        assert!(q.passes_over(4, (None, None), v11, false));
        assert!(!q.passes_over(6, (None, None), v11, false));
    }

    #[test]
    fn a_delete_fact_keeps_answering_the_same_deletion() {
        let p = Previous { removal_fact: true, ..prev(5, 1_000, "12") };
        assert!(!p.passes_over(5, (None, Some(1_000)), version_key("13"), true), "the final DELETED");
        assert!(p.passes_over(5, (None, Some(1_000)), version_key("13"), false), "not a write");
    }

    #[test]
    fn entries_expire_with_the_ttl_and_the_cap_drops_the_oldest() {
        let mut a = Answered::new(1_000, 16);
        a.record(&scope(), "u0", prev(1, 1, "1"), 0);
        assert!(a.previous(&scope(), "u0", 999).is_some());
        assert!(a.previous(&scope(), "u0", 1_000).is_none(), "expired on read");
        assert!(a.previous(&scope(), "", 0).is_none());
        a.sweep(1_000);
        assert!(a.is_empty());
        for i in 0..40u64 {
            a.record(&scope(), &format!("u{i}"), prev(i, 1, "1"), i);
            assert!(a.len() <= 16);
        }
        assert!(a.evicted() > 0);
        assert!(a.previous(&scope(), "u39", 39).is_some(), "the newest stays");
        assert!(a.previous(&scope(), "u0", 39).is_none(), "the oldest went first");
    }

    #[test]
    fn an_entry_is_small() {
        assert_eq!(size_of::<(Uid, Entry)>(), 88);
    }

    #[test]
    fn version_keys_tell_versions_apart() {
        assert_eq!(version_key("10"), 10);
        assert_ne!(version_key("abc"), version_key("abd"));
        assert_ne!(version_key("010"), 10, "not the canonical spelling");
        assert_eq!(version_key(""), u64::MAX);
    }
}
