//! The fact index (spec §3 "The index" and §4 "The tiers"): facts filed
//! under exactly the keys a query could reach them by, partitioned by
//! [`Scope`], bounded by a TTL decided on read and by total and per-type caps.
//!
//! Filing picks one branch, first match wins: uid+rv files `exact` and
//! `latest`; uid alone files `latest`; rv alone files the rv hatch; a name
//! alone files the name tier. A removal fact with a uid also takes the sticky
//! removal pointer, which no write fact may overwrite and the TTL does not
//! bound. A collection fact is filed under its namespace.
//!
//! Every last-writer-wins slot keeps the fact that is last in the object's
//! own order ([`order`]), not the one that arrived last, and a fact whose
//! auditID the scope already holds is a re-delivery and changes nothing: so
//! duplicates and reordering of facts never change a resolution.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::selector::Selector;
use super::{Fact, Scope, Tier};

pub mod order;
pub use order::{object_order, supersedes};

/// Caps and horizons of the index. Defaults are the sidecar's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexConfig {
    /// `--author-attribution-ttl`: facts older than this are never joined.
    pub ttl_ms: u64,
    /// `--author-attribution-collection-window`: how far apart a collection
    /// fact and a removal may be for the scope tier to join them.
    pub collection_window_ms: u64,
    /// `--author-attribution-max-facts`, across every scope.
    pub max_facts: usize,
    /// `--author-attribution-max-facts-per-type`, per scope.
    pub max_facts_per_type: usize,
}

impl Default for IndexConfig {
    fn default() -> Self {
        Self { ttl_ms: 600_000, collection_window_ms: 30_000, max_facts: 1_000_000, max_facts_per_type: 250_000 }
    }
}

/// A fact as the index holds it: `at_ms` is when it was appended to its
/// stream (the clock it ages on); `seq` is arrival order (what caps evict by).
#[derive(Debug, PartialEq)]
pub struct StoredFact {
    pub fact: Fact,
    pub at_ms: u64,
    seq: u64,
    /// Parsed once at filing; `None` for an unparseable selector, which
    /// then matches nothing (a wrong author is worse than no author).
    selector: Option<Selector>,
}

pub type FactRef = Arc<StoredFact>;

/// A key a fact is filed under, and so a key a waiter can wait on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IndexKey {
    /// `exact`: uid + resourceVersion.
    Exact(Box<str>, Box<str>),
    /// `latest` and the sticky removal pointer: uid.
    Uid(Box<str>),
    /// The rv-only hatch.
    Rv(Box<str>),
    /// The name tier: namespace + name.
    Name(Box<str>, Box<str>),
    /// Collection facts: namespace.
    Collection(Box<str>),
}

/// What a watch event asks of the index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pub uid: String,
    pub resource_version: String,
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// A removal: a DELETED event or the first observation of deletionTimestamp.
    pub removal: bool,
    /// When the watch event was observed, on the index clock.
    pub observed_at_ms: u64,
}

impl Query {
    /// A create or update presents the resourceVersion its own write
    /// produced: it may not fall through to the removal tiers.
    pub fn exact_capable(&self) -> bool {
        !self.removal && !self.uid.is_empty() && !self.resource_version.is_empty()
    }

    /// One key per tier this query could resolve through: what a resolver
    /// registers its waiter under before it reads.
    pub fn waiter_keys(&self) -> Vec<IndexKey> {
        let mut keys = Vec::with_capacity(5);
        if !self.uid.is_empty() && !self.resource_version.is_empty() {
            keys.push(IndexKey::Exact(self.uid.as_str().into(), self.resource_version.as_str().into()));
        }
        if self.removal {
            if !self.uid.is_empty() {
                keys.push(IndexKey::Uid(self.uid.as_str().into()));
            }
            keys.push(IndexKey::Collection(self.namespace.as_str().into()));
        }
        if !self.resource_version.is_empty() {
            keys.push(IndexKey::Rv(self.resource_version.as_str().into()));
        }
        keys.push(IndexKey::Name(self.namespace.as_str().into(), self.name.as_str().into()));
        keys
    }
}

/// A tier's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Match {
    pub tier: Tier,
    pub fact: FactRef,
}

/// The result of one read of the index.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Lookup {
    /// The strongest answer available now (`None`: absent).
    pub best: Option<Match>,
    /// Whether waiting longer could not improve on `best`. For a removal only
    /// a fact about the deletion settles it; a write fact is held as a
    /// fallback while the caller keeps waiting for delete evidence.
    pub settled: bool,
}

/// One candidate fact, for `Explain`: every fact the index holds for an
/// object, under which tier, and whether the tier rules allow it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub tier: Tier,
    pub fact: FactRef,
    /// `None` when usable; otherwise why the join would pass it by.
    pub excluded: Option<&'static str>,
}

/// Counters the index keeps for the caller to export.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evictions {
    pub per_type: u64,
    pub total: u64,
}

/// What filing one fact did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filed {
    /// The keys whose answer the fact changed: the waiters to wake.
    pub keys: Vec<IndexKey>,
    /// The scope already held a fact with this auditID: a re-delivery,
    /// ignored whole.
    pub duplicate: bool,
}

/// The uid tiers of one object, under one copy of its uid: `exact` (by
/// resourceVersion), `latest`, and the sticky removal pointer.
#[derive(Debug, Default)]
struct UidEntry {
    /// Few per object within a TTL, so a short list beats a map.
    exact: Vec<(Box<str>, FactRef)>,
    latest: Option<FactRef>,
    sticky: Option<FactRef>,
}

impl UidEntry {
    fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.latest.is_none() && self.sticky.is_none()
    }

    fn exact(&self, rv: &str) -> Option<&FactRef> {
        self.exact.iter().find(|(r, _)| &**r == rv).map(|(_, f)| f)
    }
}

#[derive(Debug, Default)]
struct ScopeIndex {
    by_uid: HashMap<Box<str>, UidEntry>,
    rv: HashMap<Box<str>, FactRef>,
    /// namespace -> name -> fact, so a read needs no allocation.
    name: HashMap<Box<str>, HashMap<Box<str>, FactRef>>,
    collections: HashMap<Box<str>, Vec<FactRef>>,
    /// TTL-bound facts in arrival order.
    live: VecDeque<FactRef>,
    /// Removal facts past their TTL, still held by the sticky pointer.
    sticky_only: VecDeque<FactRef>,
    /// Held facts by a hash of their auditID, to recognise a re-delivery.
    /// The fact itself confirms a match, so a hash collision only costs the
    /// check, never a fact.
    audit_ids: HashMap<u64, FactRef>,
}

fn audit_hash(audit_id: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    audit_id.hash(&mut h);
    h.finish()
}

/// Puts `f` in `slot` when the slot is empty or `f` supersedes what it holds.
fn take_slot(slot: &mut Option<FactRef>, f: &FactRef) -> bool {
    let take = slot.as_ref().is_none_or(|cur| supersedes(&f.fact, &cur.fact));
    if take {
        *slot = Some(f.clone());
    }
    take
}

/// [`take_slot`] for a map entry.
fn take_entry(map: &mut HashMap<Box<str>, FactRef>, key: Box<str>, f: &FactRef) -> bool {
    match map.entry(key) {
        std::collections::hash_map::Entry::Occupied(mut e) => {
            let take = supersedes(&f.fact, &e.get().fact);
            if take {
                e.insert(f.clone());
            }
            take
        }
        std::collections::hash_map::Entry::Vacant(e) => {
            e.insert(f.clone());
            true
        }
    }
}

/// The last of `facts` in the object's order (arrival order breaks ties:
/// `facts` come in arrival order).
fn latest<'a>(facts: impl Iterator<Item = &'a FactRef>) -> Option<&'a FactRef> {
    facts.fold(None, |best, f| match best {
        Some(b) if !supersedes(&f.fact, &b.fact) => Some(b),
        _ => Some(f),
    })
}

fn same(a: &Option<FactRef>, f: &FactRef) -> bool {
    a.as_ref().is_some_and(|cur| Arc::ptr_eq(cur, f))
}

impl ScopeIndex {
    fn len(&self) -> usize {
        self.live.len() + self.sticky_only.len()
    }

    fn oldest_seq(&self) -> Option<u64> {
        let a = self.live.front().map(|f| f.seq);
        let b = self.sticky_only.front().map(|f| f.seq);
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn uid(&self, uid: &str) -> Option<&UidEntry> {
        self.by_uid.get(uid)
    }

    fn name(&self, namespace: &str, name: &str) -> Option<&FactRef> {
        self.name.get(namespace)?.get(name)
    }

    /// The held fact with `f`'s auditID, if any: `f` is then a re-delivery.
    fn held_duplicate(&self, f: &Fact) -> bool {
        !f.audit_id.is_empty()
            && self.audit_ids.get(&audit_hash(&f.audit_id)).is_some_and(|held| held.fact.audit_id == f.audit_id)
    }

    fn remember_audit_id(&mut self, f: &FactRef) {
        if !f.fact.audit_id.is_empty() {
            // On a (astronomically rare) collision the first holder stays.
            self.audit_ids.entry(audit_hash(&f.fact.audit_id)).or_insert_with(|| f.clone());
        }
    }

    fn forget_audit_id(&mut self, f: &FactRef) {
        if f.fact.audit_id.is_empty() {
            return;
        }
        let h = audit_hash(&f.fact.audit_id);
        if self.audit_ids.get(&h).is_some_and(|held| Arc::ptr_eq(held, f)) {
            self.audit_ids.remove(&h);
        }
    }

    /// Files `f` under the keys of its one branch; returns the keys whose
    /// slot it took (none: a later fact already holds every slot it could
    /// fill, so it is not held at all).
    fn file(&mut self, f: &FactRef) -> Vec<IndexKey> {
        let fact = &f.fact;
        let mut keys = Vec::with_capacity(2);
        if fact.is_collection() {
            let ns: Box<str> = fact.namespace.as_str().into();
            self.collections.entry(ns.clone()).or_default().push(f.clone());
            keys.push(IndexKey::Collection(ns));
        } else if !fact.uid.is_empty() {
            let uid: Box<str> = fact.uid.as_str().into();
            let e = self.by_uid.entry(uid.clone()).or_default();
            if !fact.resource_version.is_empty() {
                let rv = fact.resource_version.as_str();
                let took = match e.exact.iter_mut().find(|(r, _)| &**r == rv) {
                    Some(slot) if supersedes(fact, &slot.1.fact) => {
                        slot.1 = f.clone();
                        true
                    }
                    Some(_) => false,
                    None => {
                        e.exact.push((rv.into(), f.clone()));
                        true
                    }
                };
                if took {
                    keys.push(IndexKey::Exact(uid.clone(), rv.into()));
                }
            }
            let mut took_uid = take_slot(&mut e.latest, f);
            if fact.is_removal() {
                // Only another removal fact may fill the sticky pointer.
                took_uid |= take_slot(&mut e.sticky, f);
            }
            if took_uid {
                keys.push(IndexKey::Uid(uid));
            }
        } else if !fact.resource_version.is_empty() {
            let rv: Box<str> = fact.resource_version.as_str().into();
            if take_entry(&mut self.rv, rv.clone(), f) {
                keys.push(IndexKey::Rv(rv));
            }
        } else if !fact.name.is_empty() {
            let (ns, name): (Box<str>, Box<str>) = (fact.namespace.as_str().into(), fact.name.as_str().into());
            if take_entry(self.name.entry(ns.clone()).or_default(), name.clone(), f) {
                keys.push(IndexKey::Name(ns, name));
            }
        }
        keys
    }

    /// Removes `f` from every TTL-bound structure that still points at it,
    /// and from the sticky pointer too when `with_sticky`.
    fn unfile(&mut self, f: &FactRef, with_sticky: bool) {
        let fact = &f.fact;
        if fact.is_collection() {
            if let Some(v) = self.collections.get_mut(fact.namespace.as_str()) {
                v.retain(|c| !Arc::ptr_eq(c, f));
                if v.is_empty() {
                    self.collections.remove(fact.namespace.as_str());
                }
            }
        } else if !fact.uid.is_empty() {
            if let Some(e) = self.by_uid.get_mut(fact.uid.as_str()) {
                e.exact.retain(|(_, cur)| !Arc::ptr_eq(cur, f));
                if same(&e.latest, f) {
                    e.latest = None;
                }
                if with_sticky && same(&e.sticky, f) {
                    e.sticky = None;
                }
                if e.is_empty() {
                    self.by_uid.remove(fact.uid.as_str());
                }
            }
        } else if !fact.resource_version.is_empty() {
            if self.rv.get(fact.resource_version.as_str()).is_some_and(|cur| Arc::ptr_eq(cur, f)) {
                self.rv.remove(fact.resource_version.as_str());
            }
        } else if let Some(names) = self.name.get_mut(fact.namespace.as_str()) {
            if names.get(fact.name.as_str()).is_some_and(|cur| Arc::ptr_eq(cur, f)) {
                names.remove(fact.name.as_str());
            }
            if names.is_empty() {
                self.name.remove(fact.namespace.as_str());
            }
        }
    }

    fn holds_sticky(&self, f: &FactRef) -> bool {
        !f.fact.uid.is_empty() && self.by_uid.get(f.fact.uid.as_str()).is_some_and(|e| same(&e.sticky, f))
    }

    /// Evicts the oldest fact entirely (caps): every key, sticky included.
    fn evict_oldest(&mut self) -> bool {
        let from_live = match (self.live.front(), self.sticky_only.front()) {
            (Some(a), Some(b)) => a.seq < b.seq,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return false,
        };
        let f = if from_live { self.live.pop_front() } else { self.sticky_only.pop_front() };
        if let Some(f) = f {
            self.unfile(&f, true);
            self.forget_audit_id(&f);
        }
        true
    }
}

/// The index over every scope.
#[derive(Debug, Default)]
pub struct Index {
    config: IndexConfig,
    scope_ids: HashMap<Scope, u32>,
    scopes: Vec<ScopeIndex>,
    /// Arrival order across scopes (seq, scope id), for the total cap.
    /// Entries of facts already gone are skipped lazily.
    arrivals: VecDeque<(u64, u32)>,
    next_seq: u64,
    total: usize,
    evictions: Evictions,
    duplicates: u64,
}

impl Index {
    pub fn new(config: IndexConfig) -> Self {
        Self { config, ..Self::default() }
    }

    pub fn config(&self) -> &IndexConfig {
        &self.config
    }

    /// Facts held across every scope (`fact_index_entries`).
    pub fn len(&self) -> usize {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    pub fn evictions(&self) -> Evictions {
        self.evictions
    }

    /// Re-delivered facts recognised by their auditID and ignored.
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    fn scope(&self, scope: &Scope) -> Option<&ScopeIndex> {
        self.scope_ids.get(scope).map(|&id| &self.scopes[id as usize])
    }

    /// Facts held for one scope (a type on a route), expired or not: zero
    /// means no fact of any kind arrived for the type within retention.
    pub fn scope_len(&self, scope: &Scope) -> usize {
        self.scope(scope).map_or(0, ScopeIndex::len)
    }

    /// Files a fact; returns the keys it filled (the waiters to wake). A fact
    /// that names no key (no uid, rv or name, not a collection) files
    /// nothing; nor does one a later fact already superseded everywhere, nor
    /// a re-delivery of a fact the scope holds (same auditID).
    pub fn insert(&mut self, scope: &Scope, fact: Fact, at_ms: u64) -> Vec<IndexKey> {
        self.file(scope, fact, at_ms).keys
    }

    /// [`Index::insert`], saying whether the fact was a re-delivery.
    pub fn file(&mut self, scope: &Scope, fact: Fact, at_ms: u64) -> Filed {
        let id = match self.scope_ids.get(scope) {
            Some(&id) => id,
            None => {
                let id = self.scopes.len() as u32;
                self.scopes.push(ScopeIndex::default());
                self.scope_ids.insert(scope.clone(), id);
                id
            }
        };
        let s = &mut self.scopes[id as usize];
        if s.held_duplicate(&fact) {
            self.duplicates += 1;
            return Filed { keys: Vec::new(), duplicate: true };
        }
        let selector = if fact.is_collection() { Selector::parse(&fact.label_selector).ok() } else { None };
        let seq = self.next_seq;
        let stored = Arc::new(StoredFact { fact, at_ms, seq, selector });
        let cap = self.config.max_facts_per_type.max(1);
        let keys = s.file(&stored);
        if keys.is_empty() {
            return Filed::default();
        }
        s.remember_audit_id(&stored);
        self.next_seq += 1;
        while s.len() >= cap && s.evict_oldest() {
            self.total -= 1;
            self.evictions.per_type += 1;
        }
        s.live.push_back(stored);
        self.total += 1;
        self.arrivals.push_back((seq, id));
        while self.total > self.config.max_facts.max(1) {
            if !self.evict_globally_oldest() {
                break;
            }
            self.evictions.total += 1;
        }
        Filed { keys, duplicate: false }
    }

    fn evict_globally_oldest(&mut self) -> bool {
        while let Some((seq, id)) = self.arrivals.pop_front() {
            let s = &mut self.scopes[id as usize];
            if s.oldest_seq() == Some(seq) {
                s.evict_oldest();
                self.total -= 1;
                return true;
            }
        }
        false
    }

    /// Bounds memory: drops facts past the TTL from the TTL-bound tiers. A
    /// removal fact still named by its sticky pointer stays until the caps
    /// evict it. Correctness never depends on this running: expiry is
    /// decided on read.
    pub fn sweep(&mut self, now_ms: u64) {
        let ttl = self.config.ttl_ms;
        let mut dropped = 0;
        for s in &mut self.scopes {
            while s.live.front().is_some_and(|f| f.at_ms.saturating_add(ttl) <= now_ms) {
                let f = s.live.pop_front().expect("front checked");
                s.unfile(&f, false);
                if s.holds_sticky(&f) {
                    let at = s.sticky_only.partition_point(|x| x.seq < f.seq);
                    s.sticky_only.insert(at, f);
                } else {
                    s.forget_audit_id(&f);
                    dropped += 1;
                }
            }
        }
        self.total -= dropped;
        // Forget arrival entries of facts that are gone, so the queue stays
        // proportional to what is held.
        if self.arrivals.len() > 2 * self.total + 1024 {
            let mut held: Vec<(u64, u32)> = self
                .scopes
                .iter()
                .enumerate()
                .flat_map(|(id, s)| s.live.iter().chain(&s.sticky_only).map(move |f| (f.seq, id as u32)))
                .collect();
            held.sort_unstable_by_key(|(seq, _)| *seq);
            self.arrivals = held.into();
        }
    }

    fn live<'a>(&self, f: Option<&'a FactRef>, now_ms: u64) -> Option<&'a FactRef> {
        f.filter(|f| f.at_ms.saturating_add(self.config.ttl_ms) > now_ms)
    }

    /// Reads the tiers for `q` in the spec's precedence (§4 flowchart).
    pub fn lookup(&self, scope: &Scope, q: &Query, now_ms: u64) -> Lookup {
        let Some(s) = self.scope(scope) else {
            return Lookup::default();
        };
        let found = |tier: Tier, f: &FactRef| Some(Match { tier, fact: f.clone() });
        let by_uid = if q.uid.is_empty() { None } else { s.uid(&q.uid) };
        let exact = if q.resource_version.is_empty() {
            None
        } else {
            self.live(by_uid.and_then(|e| e.exact(&q.resource_version)), now_ms)
        };

        if q.removal {
            // A fact about the deletion, filed under any key, ends the wait;
            // a write fact is only ever held as a fallback.
            let mut fallback: Option<Match> = None;
            if let Some(f) = by_uid.and_then(|e| e.sticky.as_ref()) {
                // Not TTL-bound: a uid is unique across space and time.
                return Lookup { best: found(Tier::DeleteSticky, f), settled: true };
            }
            if let Some(f) = exact {
                if f.fact.is_removal() {
                    return Lookup { best: found(Tier::Exact, f), settled: true };
                }
                fallback = found(Tier::Exact, f);
            }
            if !q.uid.is_empty()
                && let Some(f) = self.collection_with_uid(s, q, now_ms)
            {
                return Lookup { best: found(Tier::DeletecollectionBodyUid, f), settled: true };
            }
            if let Some(f) = self.live(by_uid.and_then(|e| e.latest.as_ref()), now_ms) {
                if f.fact.is_removal() {
                    return Lookup { best: found(Tier::Latest, f), settled: true };
                }
                fallback = fallback.or_else(|| found(Tier::Latest, f));
            }
            let name = self.live(s.name(&q.namespace, &q.name), now_ms);
            if let Some(f) = name.filter(|f| f.fact.is_removal()) {
                return Lookup { best: found(Tier::Name, f), settled: true };
            }
            if fallback.is_some() {
                return Lookup { best: fallback, settled: false };
            }
            if let Some(f) = self.collection_covering(s, q, now_ms) {
                return Lookup { best: found(Tier::DeletecollectionScope, f), settled: true };
            }
        } else if let Some(f) = exact {
            return Lookup { best: found(Tier::Exact, f), settled: true };
        }

        // The rv hatch and the name tier: all an exact-capable event may
        // reach after `exact`, and the last resort of a removal.
        let hatch = (!q.resource_version.is_empty())
            .then(|| self.live(s.rv.get(q.resource_version.as_str()), now_ms))
            .flatten()
            .map(|f| (Tier::ResourceVersion, f))
            .or_else(|| self.live(s.name(&q.namespace, &q.name), now_ms).map(|f| (Tier::Name, f)));
        match hatch {
            Some((tier, f)) => Lookup { best: found(tier, f), settled: !q.removal || f.fact.is_removal() },
            None => Lookup::default(),
        }
    }

    fn collection_with_uid<'a>(&self, s: &'a ScopeIndex, q: &Query, now_ms: u64) -> Option<&'a FactRef> {
        latest(s.collections.get(q.namespace.as_str())?.iter().filter(|c| {
            self.live(Some(c), now_ms).is_some() && c.fact.uids.as_ref().is_some_and(|u| u.contains(&q.uid))
        }))
    }

    /// The scope tier: a collection request in the object's namespace whose
    /// selector selects it, within the collection window. A collection whose
    /// body named its uids is not a scope candidate: the API server said
    /// exactly which objects it deleted, and this one was not among them.
    fn collection_covering<'a>(&self, s: &'a ScopeIndex, q: &Query, now_ms: u64) -> Option<&'a FactRef> {
        let window = self.config.collection_window_ms;
        latest(s.collections.get(q.namespace.as_str())?.iter().filter(|c| {
            self.live(Some(c), now_ms).is_some()
                && c.fact.uids.is_none()
                && c.at_ms.abs_diff(q.observed_at_ms) <= window
                && c.selector.as_ref().is_some_and(|sel| sel.matches(&q.labels))
        }))
    }

    /// Every fact the index holds for the object of `q`, tier by tier, with
    /// why a tier's fact would be passed by. The winner is [`Index::lookup`].
    pub fn explain(&self, scope: &Scope, q: &Query, now_ms: u64) -> Vec<Candidate> {
        let Some(s) = self.scope(scope) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let expired = |f: &FactRef| f.at_ms.saturating_add(self.config.ttl_ms) <= now_ms;
        let mut push = |tier: Tier, f: &FactRef, rule: Option<&'static str>| {
            let excluded =
                if expired(f) && tier != Tier::DeleteSticky { Some("expired: older than the TTL") } else { rule };
            out.push(Candidate { tier, fact: f.clone(), excluded });
        };
        const WRITE_GATE: &str = "a write may not reach the removal tiers";
        let by_uid = if q.uid.is_empty() { None } else { s.uid(&q.uid) };
        if let Some(f) = by_uid.and_then(|e| e.sticky.as_ref()) {
            push(Tier::DeleteSticky, f, (!q.removal).then_some("only a removal consults the sticky pointer"));
        }
        if let Some(f) = by_uid.and_then(|e| e.exact(&q.resource_version)) {
            push(Tier::Exact, f, None);
        }
        for c in s.collections.get(q.namespace.as_str()).into_iter().flatten() {
            if !q.uid.is_empty() && c.fact.uids.as_ref().is_some_and(|u| u.contains(&q.uid)) {
                push(Tier::DeletecollectionBodyUid, c, (!q.removal).then_some(WRITE_GATE));
                continue;
            }
            let rule = if !q.removal {
                Some(WRITE_GATE)
            } else if c.fact.uids.is_some() {
                Some("the collection's uid set does not name this object")
            } else if c.at_ms.abs_diff(q.observed_at_ms) > self.config.collection_window_ms {
                Some("outside the collection window")
            } else if !c.selector.as_ref().is_some_and(|sel| sel.matches(&q.labels)) {
                Some("the collection's selector does not select this object")
            } else {
                None
            };
            push(Tier::DeletecollectionScope, c, rule);
        }
        if let Some(f) = by_uid.and_then(|e| e.latest.as_ref()) {
            let rule = if q.exact_capable() {
                Some("an exact-capable event may not fall through to the removal tiers")
            } else if !q.removal {
                Some("only a removal consults the latest pointer")
            } else {
                None
            };
            push(Tier::Latest, f, rule);
        }
        if let Some(f) = s.rv.get(q.resource_version.as_str()) {
            push(Tier::ResourceVersion, f, None);
        }
        if let Some(f) = s.name(&q.namespace, &q.name) {
            push(Tier::Name, f, None);
        }
        out
    }
}

#[cfg(test)]
mod tests;
