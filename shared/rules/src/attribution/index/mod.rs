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
//!
//! Facts are held compactly ([`store`]); a read hands out the fact as it
//! was filed ([`StoredFact`]), built for the answer only.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use hashbrown::HashTable;

use super::selector::Selector;
use super::{Fact, Scope, ScopeHasher, Tier};

pub mod answered;
pub mod order;
mod packed;
mod queue;
mod slab;
pub(crate) mod store;
mod table;
pub use answered::{Answered, Previous, version_key};
pub use order::{object_order, supersedes};
pub use packed::PackedFacts;
use queue::Queue;
use store::{Fid, Hashes, Key, NONE, SlotRef, Store};
use table::insert_churned;

/// Why a weak tier passed a fact over, as `Explain` says it.
pub const BEFORE_CREATION: &str =
    "stamped before the object's creationTimestamp: it is about an earlier object of that name";
pub const ANSWERED_EARLIER: &str = "it, or a later fact, already answered an earlier version of this object: \
     it is about an earlier change (a weak tier never names the previous actor)";

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

/// A held fact as a read hands it out: `at_ms` is when it was appended to
/// its stream (the clock it ages on).
#[derive(Debug, PartialEq)]
pub struct StoredFact {
    pub fact: Fact,
    pub at_ms: u64,
    /// Arrival order: unique per held fact.
    seq: u64,
}

impl StoredFact {
    /// Whether two reads handed out the same held fact.
    pub fn same(&self, other: &StoredFact) -> bool {
        self.seq == other.seq
    }

    /// What the answer memory ([`Answered`]) keeps of this fact once it
    /// answered `q`: its place in the object's order as the index reads it.
    pub fn answered(&self, q: &Query) -> Previous {
        let f = &self.fact;
        Previous {
            seq: self.seq,
            order: (f.resource_version.parse().ok(), order::stage_time_us(&f.stage_timestamp)),
            version: version_key(&q.resource_version),
            removal_fact: f.is_removal(),
        }
    }
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
    /// The object's `metadata.creationTimestamp` in microseconds (it has
    /// second precision): a weak-tier fact stamped before it is about an
    /// earlier object of the same name.
    pub created_at_us: Option<i64>,
    /// When this version was written, as far as the object says (its
    /// newest `managedFields` time, second precision), for a relisted
    /// object: its wait ends where a watch event seen at the write would
    /// have stopped waiting ([`crate::attribution::grace::deadline_ms`]).
    /// `None` for a watch event (it is seen at its write).
    pub written_at_us: Option<i64>,
    /// What answered this object's last resolution ([`Answered`]): a weak
    /// tier may not answer a later version with it or anything before it.
    pub previous: Option<Previous>,
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
    /// Oldest facts dropped because what is held would span more arrivals
    /// or time than a slot counts (4 billion, 49 days: see [`store`]). Only
    /// a removal fact kept past its TTL by its sticky pointer lives so long.
    pub span: u64,
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

/// The uid tiers of one object as a read finds them: `latest` and the
/// sticky removal pointer, [`NONE`] where the scope holds none.
#[derive(Debug, Clone, Copy)]
struct UidEntry {
    latest: Fid,
    sticky: Fid,
}

/// Every table holds slot numbers; a key is hashed from what its slot holds.
#[derive(Debug, Default)]
struct ScopeIndex {
    /// `latest`: by uid.
    latest: HashTable<Fid>,
    /// The sticky removal pointer, by uid. Only removal facts fill it, so it
    /// is its own table rather than a second pointer beside every `latest`.
    sticky: HashTable<Fid>,
    /// `exact`: by uid + resourceVersion.
    exact: HashTable<Fid>,
    rv: HashTable<Fid>,
    /// The name tier: by interned namespace + name.
    name: HashTable<Fid>,
    /// Collection facts by interned namespace.
    collections: HashMap<u32, Vec<Fid>>,
    /// TTL-bound facts in arrival order.
    live: Queue,
    /// Removal facts past their TTL, still held by the sticky pointer.
    sticky_only: Queue,
    /// Held facts by auditID, to recognise a re-delivery.
    audit_ids: HashTable<Fid>,
}

fn exact_hash(h: &Hashes, s: SlotRef<'_>) -> u64 {
    h.of((s.uid(), s.rv()))
}

fn name_hash(h: &Hashes, s: SlotRef<'_>) -> u64 {
    h.of((s.namespace(), s.name()))
}

/// Whether `new` may replace `cur` in a last-writer-wins slot.
fn supersedes_slot(st: &Store, new: Fid, cur: Fid) -> bool {
    cur == NONE || order::order_of(st.get(new).order(), st.get(cur).order()).is_none_or(|o| o == Ordering::Greater)
}

/// Puts `f` in `slot` when the slot is empty or `f` supersedes what it holds.
fn take_slot(st: &Store, slot: &mut Fid, f: Fid) -> bool {
    let take = supersedes_slot(st, f, *slot);
    if take {
        *slot = f;
    }
    take
}

/// The last of `facts` in the object's order (arrival order breaks ties:
/// `facts` come in arrival order).
fn latest(st: &Store, facts: impl Iterator<Item = Fid>) -> Option<Fid> {
    facts.fold(None, |best, f| match best {
        Some(b) if !supersedes_slot(st, f, b) => Some(b),
        _ => Some(f),
    })
}

/// A last-writer-wins table entry for `f` under `hash`, where `same` finds
/// the entry of `f`'s key and `rehash` hashes a held slot.
fn take_entry(
    st: &Store,
    table: &mut HashTable<Fid>,
    hash: u64,
    f: Fid,
    same: impl Fn(SlotRef<'_>) -> bool,
    rehash: impl Fn(SlotRef<'_>) -> u64,
) -> bool {
    match table.find_mut(hash, |&cur| same(st.get(cur))) {
        Some(cur) => take_slot(st, cur, f),
        None => {
            insert_churned(table, hash, f, |&cur| rehash(st.get(cur)));
            true
        }
    }
}

fn remove_entry(table: &mut HashTable<Fid>, hash: u64, f: Fid) {
    if let Ok(e) = table.find_entry(hash, |&cur| cur == f) {
        e.remove();
    }
}

impl ScopeIndex {
    fn len(&self) -> usize {
        self.live.len() + self.sticky_only.len()
    }

    fn oldest_seq(&self, st: &Store) -> Option<u64> {
        let a = self.live.front().map(|f| st.get(f).seq());
        let b = self.sticky_only.front().map(|f| st.get(f).seq());
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The uid tiers of `uid`; `None` when neither pointer is held.
    fn uid(&self, st: &Store, h: &Hashes, uid: Key<'_>) -> Option<UidEntry> {
        let hash = h.of(Some(uid));
        let find = |t: &HashTable<Fid>| t.find(hash, |&f| st.get(f).uid() == Some(uid)).copied();
        match (find(&self.latest), find(&self.sticky)) {
            (None, None) => None,
            (latest, sticky) => Some(UidEntry { latest: latest.unwrap_or(NONE), sticky: sticky.unwrap_or(NONE) }),
        }
    }

    fn exact(&self, st: &Store, h: &Hashes, uid: Key<'_>, rv: Key<'_>) -> Option<Fid> {
        let s = |f: &Fid| st.get(*f).uid() == Some(uid) && st.get(*f).rv() == Some(rv);
        self.exact.find(h.of((Some(uid), Some(rv))), s).copied()
    }

    fn rv(&self, st: &Store, h: &Hashes, rv: Key<'_>) -> Option<Fid> {
        self.rv.find(h.of(Some(rv)), |&f| st.get(f).rv() == Some(rv)).copied()
    }

    fn name(&self, st: &Store, h: &Hashes, namespace: Option<u32>, name: &str) -> Option<Fid> {
        let ns = namespace?;
        self.name.find(h.of((ns, name)), |&f| st.get(f).namespace() == ns && st.get(f).name() == name).copied()
    }

    /// Whether the scope holds a fact with `f`'s auditID: `f` is then a re-delivery.
    fn held_duplicate(&self, st: &Store, h: &Hashes, f: &Fact) -> bool {
        Key::id(&f.audit_id)
            .is_some_and(|a| self.audit_ids.find(h.of(Some(a)), |&x| st.get(x).audit() == Some(a)).is_some())
    }

    fn remember_audit_id(&mut self, st: &Store, h: &Hashes, f: Fid) {
        let Some(a) = st.get(f).audit() else { return };
        let hash = h.of(Some(a));
        // On a (vanishingly rare) second holder the first one stays.
        if self.audit_ids.find(hash, |&x| st.get(x).audit() == Some(a)).is_none() {
            insert_churned(&mut self.audit_ids, hash, f, |&x| h.of(st.get(x).audit()));
        }
    }

    fn forget_audit_id(&mut self, st: &Store, h: &Hashes, f: Fid) {
        if let Some(a) = st.get(f).audit() {
            remove_entry(&mut self.audit_ids, h.of(Some(a)), f);
        }
    }

    /// Files `f` under the keys of its one branch; returns the keys whose
    /// slot it took (none: a later fact already holds every slot it could
    /// fill, so it is not held at all). `fact` is `f` as it arrived.
    fn file(&mut self, st: &Store, h: &Hashes, f: Fid, fact: &Fact) -> Vec<IndexKey> {
        let slot = st.get(f);
        let mut keys = Vec::with_capacity(2);
        if slot.is_collection() {
            self.collections.entry(slot.namespace()).or_default().push(f);
            keys.push(IndexKey::Collection(fact.namespace.as_str().into()));
        } else if let Some(uid) = slot.uid() {
            if let Some(rv) = slot.rv() {
                let same = |s: SlotRef<'_>| s.uid() == Some(uid) && s.rv() == Some(rv);
                if take_entry(st, &mut self.exact, h.of((Some(uid), Some(rv))), f, same, |s| exact_hash(h, s)) {
                    keys.push(IndexKey::Exact(fact.uid.as_str().into(), fact.resource_version.as_str().into()));
                }
            }
            let hash = h.of(Some(uid));
            let same = |s: SlotRef<'_>| s.uid() == Some(uid);
            let mut took = take_entry(st, &mut self.latest, hash, f, same, |s| h.of(s.uid()));
            if slot.is_removal() {
                // Only another removal fact may fill the sticky pointer.
                took |= take_entry(st, &mut self.sticky, hash, f, same, |s| h.of(s.uid()));
            }
            if took {
                keys.push(IndexKey::Uid(fact.uid.as_str().into()));
            }
        } else if let Some(rv) = slot.rv() {
            if take_entry(st, &mut self.rv, h.of(Some(rv)), f, |s| s.rv() == Some(rv), |s| h.of(s.rv())) {
                keys.push(IndexKey::Rv(fact.resource_version.as_str().into()));
            }
        } else if !fact.name.is_empty() {
            let (ns, name) = (slot.namespace(), slot.name());
            let same = |s: SlotRef<'_>| s.namespace() == ns && s.name() == name;
            if take_entry(st, &mut self.name, h.of((ns, name)), f, same, |s| name_hash(h, s)) {
                keys.push(IndexKey::Name(fact.namespace.as_str().into(), fact.name.as_str().into()));
            }
        }
        keys
    }

    /// Removes `f` from every TTL-bound structure that still points at it,
    /// and from the sticky pointer too when `with_sticky`.
    fn unfile(&mut self, st: &Store, h: &Hashes, f: Fid, with_sticky: bool) {
        let slot = st.get(f);
        if slot.is_collection() {
            if let Some(v) = self.collections.get_mut(&slot.namespace()) {
                v.retain(|&c| c != f);
                if v.is_empty() {
                    self.collections.remove(&slot.namespace());
                }
            }
        } else if let Some(uid) = slot.uid() {
            if slot.rv().is_some() {
                remove_entry(&mut self.exact, exact_hash(h, slot), f);
            }
            let hash = h.of(Some(uid));
            remove_entry(&mut self.latest, hash, f);
            if with_sticky {
                remove_entry(&mut self.sticky, hash, f);
            }
        } else if let Some(rv) = slot.rv() {
            remove_entry(&mut self.rv, h.of(Some(rv)), f);
        } else {
            remove_entry(&mut self.name, name_hash(h, slot), f);
        }
    }

    fn holds_sticky(&self, st: &Store, h: &Hashes, f: Fid) -> bool {
        st.get(f).uid().is_some_and(|u| self.sticky.find(h.of(Some(u)), |&x| x == f).is_some())
    }
}

/// The index over every scope.
#[derive(Debug, Default)]
pub struct Index {
    config: IndexConfig,
    /// Every read hashes one (see [`ScopeHasher`] for why not SipHash).
    scope_ids: HashMap<Scope, u32, ScopeHasher>,
    scopes: Vec<ScopeIndex>,
    store: Store,
    hashes: Hashes,
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
        let (st, h) = (&mut self.store, &self.hashes);
        let s = &mut self.scopes[id as usize];
        if s.held_duplicate(st, h, &fact) {
            self.duplicates += 1;
            return Filed { keys: Vec::new(), duplicate: true };
        }
        let seq = self.next_seq + 1;
        while !self.store.fits(seq, at_ms) && !self.store.rebase(seq, at_ms) {
            // An empty store fits anything, so this ends.
            self.evict_globally_oldest();
            self.evictions.span += 1;
        }
        let (st, h) = (&mut self.store, &self.hashes);
        let s = &mut self.scopes[id as usize];
        let selector = if fact.is_collection() { Selector::parse(&fact.label_selector).ok() } else { None };
        let f = st.alloc(&fact, at_ms, seq, selector);
        let keys = s.file(st, h, f, &fact);
        if keys.is_empty() {
            st.free(f);
            return Filed::default();
        }
        s.remember_audit_id(st, h, f);
        self.next_seq += 1;
        let cap = self.config.max_facts_per_type.max(1);
        while s.len() >= cap && Self::evict_oldest(st, h, s) {
            self.total -= 1;
            self.evictions.per_type += 1;
        }
        s.live.push_back(st, f);
        self.total += 1;
        while self.total > self.config.max_facts.max(1) {
            if !self.evict_globally_oldest() {
                break;
            }
            self.evictions.total += 1;
        }
        Filed { keys, duplicate: false }
    }

    /// Evicts the oldest fact of `s` entirely (caps): every key, sticky included.
    fn evict_oldest(st: &mut Store, h: &Hashes, s: &mut ScopeIndex) -> bool {
        let from_live = match (s.live.front(), s.sticky_only.front()) {
            (Some(a), Some(b)) => st.get(a).seq() < st.get(b).seq(),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return false,
        };
        let f = if from_live { s.live.pop_front(st) } else { s.sticky_only.pop_front(st) };
        if let Some(f) = f {
            s.unfile(st, h, f, true);
            s.forget_audit_id(st, h, f);
            st.free(f);
        }
        true
    }

    fn evict_globally_oldest(&mut self) -> bool {
        let st = &self.store;
        let oldest = self.scopes.iter().enumerate().filter_map(|(id, s)| Some((s.oldest_seq(st)?, id))).min();
        let Some((_, id)) = oldest else { return false };
        Self::evict_oldest(&mut self.store, &self.hashes, &mut self.scopes[id]);
        self.total -= 1;
        true
    }

    /// Bounds memory: drops facts past the TTL from the TTL-bound tiers. A
    /// removal fact still named by its sticky pointer stays until the caps
    /// evict it. Correctness never depends on this running: expiry is
    /// decided on read.
    pub fn sweep(&mut self, now_ms: u64) {
        let ttl = self.config.ttl_ms;
        let (st, h) = (&mut self.store, &self.hashes);
        let mut dropped = 0;
        for s in &mut self.scopes {
            while let Some(f) = s.live.front().filter(|&f| st.get(f).at_ms().saturating_add(ttl) <= now_ms) {
                s.live.pop_front(st);
                s.unfile(st, h, f, false);
                if s.holds_sticky(st, h, f) {
                    s.sticky_only.insert_by_seq(st, f);
                } else {
                    s.forget_audit_id(st, h, f);
                    st.free(f);
                    dropped += 1;
                }
            }
        }
        self.total -= dropped;
    }

    fn live(&self, f: Option<Fid>, now_ms: u64) -> Option<Fid> {
        f.filter(|&f| self.store.get(f).at_ms().saturating_add(self.config.ttl_ms) > now_ms)
    }

    /// The fact in slot `f`, as it was filed.
    fn stored(&self, f: Fid) -> FactRef {
        let s = self.store.get(f);
        Arc::new(StoredFact { fact: self.store.fact(f), at_ms: s.at_ms(), seq: s.seq() })
    }

    /// Reads the tiers for `q` in the spec's precedence (§4 flowchart).
    pub fn lookup(&self, scope: &Scope, q: &Query, now_ms: u64) -> Lookup {
        let (best, settled) = self.resolve(scope, q, now_ms);
        Lookup { best: best.map(|(tier, f)| Match { tier, fact: self.stored(f) }), settled }
    }

    /// [`Index::lookup`] by slot: the winner and whether it settles.
    fn resolve(&self, scope: &Scope, q: &Query, now_ms: u64) -> (Option<(Tier, Fid)>, bool) {
        let Some(s) = self.scope(scope) else {
            return (None, false);
        };
        let (st, h) = (&self.store, &self.hashes);
        let (uid, rv) = (Key::id(&q.uid), Key::rv(&q.resource_version));
        let exact = match (uid, rv) {
            (Some(u), Some(r)) => self.live(s.exact(st, h, u, r), now_ms),
            _ => None,
        };
        let removal = |f: Fid| st.get(f).is_removal();
        if !q.removal
            && let Some(f) = exact
        {
            // A write's own version: nothing below is read.
            return (Some((Tier::Exact, f)), true);
        }
        let ns = st.find_string(&q.namespace);

        if q.removal {
            // A fact about the deletion, filed under any key, ends the wait;
            // a write fact is only ever held as a fallback.
            let mut fallback = None;
            let by_uid = uid.and_then(|u| s.uid(st, h, u));
            if let Some(f) = by_uid.map(|e| e.sticky).filter(|&f| f != NONE) {
                // Not TTL-bound: a uid is unique across space and time.
                return (Some((Tier::DeleteSticky, f)), true);
            }
            if let Some(f) = exact {
                if removal(f) {
                    return (Some((Tier::Exact, f)), true);
                }
                fallback = Some((Tier::Exact, f));
            }
            if uid.is_some()
                && let Some(f) = self.collection_with_uid(s, ns, q, now_ms)
            {
                return (Some((Tier::DeletecollectionBodyUid, f)), true);
            }
            if let Some(f) = self.live(by_uid.map(|e| e.latest).filter(|&f| f != NONE), now_ms) {
                if removal(f) {
                    return (Some((Tier::Latest, f)), true);
                }
                fallback = fallback.or(Some((Tier::Latest, f)));
            }
            let name = self.live(s.name(st, h, ns, &q.name), now_ms);
            if let Some(f) = name.filter(|&f| removal(f) && self.passed_over(f, q).is_none()) {
                return (Some((Tier::Name, f)), true);
            }
            if fallback.is_some() {
                return (fallback, false);
            }
            if let Some(f) = self.collection_covering(s, ns, q, now_ms) {
                return (Some((Tier::DeletecollectionScope, f)), true);
            }
        }

        // The rv hatch and the name tier: all an exact-capable event may
        // reach after `exact`, and the last resort of a removal.
        // Both are weak: a fact about an earlier change is passed over.
        let usable = |f: &Fid| self.passed_over(*f, q).is_none();
        let hatch = rv
            .and_then(|r| self.live(s.rv(st, h, r), now_ms))
            .filter(usable)
            .map(|f| (Tier::ResourceVersion, f))
            .or_else(|| self.live(s.name(st, h, ns, &q.name), now_ms).filter(usable).map(|f| (Tier::Name, f)));
        match hatch {
            Some((tier, f)) => (Some((tier, f)), !q.removal || removal(f)),
            None => (None, false),
        }
    }

    /// Collection facts of `q`'s namespace.
    fn collections<'a>(&'a self, s: &'a ScopeIndex, ns: Option<u32>) -> impl Iterator<Item = Fid> + 'a {
        ns.and_then(|ns| s.collections.get(&ns)).into_iter().flatten().copied()
    }

    /// Whether collection `c`'s uid set names `uid`.
    fn names_uid(&self, c: Fid, uid: &str) -> bool {
        self.store.extra(c).and_then(|e| e.uids.as_ref()).is_some_and(|u| u.iter().any(|x| x == uid))
    }

    fn collection_with_uid(&self, s: &ScopeIndex, ns: Option<u32>, q: &Query, now_ms: u64) -> Option<Fid> {
        let held =
            self.collections(s, ns).filter(|&c| self.live(Some(c), now_ms).is_some() && self.names_uid(c, &q.uid));
        latest(&self.store, held)
    }

    /// The scope tier: a collection request in the object's namespace whose
    /// selector selects it, within the collection window. A collection whose
    /// body named its uids is not a scope candidate: the API server said
    /// exactly which objects it deleted, and this one was not among them.
    fn collection_covering(&self, s: &ScopeIndex, ns: Option<u32>, q: &Query, now_ms: u64) -> Option<Fid> {
        let window = self.config.collection_window_ms;
        let held = self.collections(s, ns).filter(|&c| {
            let extra = self.store.extra(c);
            self.live(Some(c), now_ms).is_some()
                && extra.is_none_or(|e| e.uids.is_none())
                && self.store.get(c).at_ms().abs_diff(q.observed_at_ms) <= window
                && extra.and_then(|e| e.selector.as_ref()).is_some_and(|sel| sel.matches(&q.labels))
                && self.passed_over(c, q).is_none()
        });
        latest(&self.store, held)
    }

    /// Why a weak-tier fact may not answer `q` (issue 30), `None` when it
    /// may: it was stamped before the object existed, or it (or a fact
    /// before it) answered an earlier version of the object. The strong
    /// tiers are keyed by what only this change carries and never ask.
    fn passed_over(&self, f: Fid, q: &Query) -> Option<&'static str> {
        let slot = self.store.get(f);
        let order = slot.order();
        // creationTimestamp is cut to the second, so an instant in that
        // second is not "before"; the audit stamp is finer than that.
        if let (Some(created), Some(stamped)) = (q.created_at_us, order.1)
            && stamped < created
        {
            return Some(BEFORE_CREATION);
        }
        let version = version_key(&q.resource_version);
        if q.previous.is_some_and(|p| p.passes_over(slot.seq(), order, version, q.removal)) {
            return Some(ANSWERED_EARLIER);
        }
        None
    }

    /// Every fact the index holds for the object of `q`, tier by tier, with
    /// why a tier's fact would be passed by. The winner is [`Index::lookup`].
    pub fn explain(&self, scope: &Scope, q: &Query, now_ms: u64) -> Vec<Candidate> {
        let Some(s) = self.scope(scope) else {
            return Vec::new();
        };
        let (st, h) = (&self.store, &self.hashes);
        let mut out = Vec::new();
        let expired = |f: Fid| st.get(f).at_ms().saturating_add(self.config.ttl_ms) <= now_ms;
        let mut push = |tier: Tier, f: Fid, rule: Option<&'static str>| {
            let excluded =
                if expired(f) && tier != Tier::DeleteSticky { Some("expired: older than the TTL") } else { rule };
            out.push(Candidate { tier, fact: self.stored(f), excluded });
        };
        const WRITE_GATE: &str = "a write may not reach the removal tiers";
        let (uid, rv) = (Key::id(&q.uid), Key::rv(&q.resource_version));
        let ns = st.find_string(&q.namespace);
        let by_uid = uid.and_then(|u| s.uid(st, h, u));
        if let Some(f) = by_uid.map(|e| e.sticky).filter(|&f| f != NONE) {
            push(Tier::DeleteSticky, f, (!q.removal).then_some("only a removal consults the sticky pointer"));
        }
        if let (Some(u), Some(r)) = (uid, rv)
            && let Some(f) = s.exact(st, h, u, r)
        {
            push(Tier::Exact, f, None);
        }
        for c in self.collections(s, ns) {
            if uid.is_some() && self.names_uid(c, &q.uid) {
                push(Tier::DeletecollectionBodyUid, c, (!q.removal).then_some(WRITE_GATE));
                continue;
            }
            let extra = st.extra(c);
            let rule = if !q.removal {
                Some(WRITE_GATE)
            } else if extra.is_some_and(|e| e.uids.is_some()) {
                Some("the collection's uid set does not name this object")
            } else if st.get(c).at_ms().abs_diff(q.observed_at_ms) > self.config.collection_window_ms {
                Some("outside the collection window")
            } else if !extra.and_then(|e| e.selector.as_ref()).is_some_and(|sel| sel.matches(&q.labels)) {
                Some("the collection's selector does not select this object")
            } else {
                self.passed_over(c, q)
            };
            push(Tier::DeletecollectionScope, c, rule);
        }
        if let Some(f) = by_uid.map(|e| e.latest).filter(|&f| f != NONE) {
            let rule = if q.exact_capable() {
                Some("an exact-capable event may not fall through to the removal tiers")
            } else if !q.removal {
                Some("only a removal consults the latest pointer")
            } else {
                None
            };
            push(Tier::Latest, f, rule);
        }
        if let Some(f) = rv.and_then(|r| s.rv(st, h, r)) {
            push(Tier::ResourceVersion, f, self.passed_over(f, q));
        }
        if let Some(f) = s.name(st, h, ns, &q.name) {
            push(Tier::Name, f, self.passed_over(f, q));
        }
        out
    }
}

#[cfg(test)]
mod tests;
