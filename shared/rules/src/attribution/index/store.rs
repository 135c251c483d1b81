//! The compact fact store behind the index: every held fact is one fixed
//! 56-byte slot plus one item in a byte slab for what is never joined on.
//!
//! A million facts is the default cap and a sidecar runs beside every
//! watcher, so a fact is held as small as it round-trips:
//! - authors, namespaces, verbs, display names and emails are few and
//!   repeated: interned (reference counted, so junk does not pile up);
//! - a uid or auditID in the canonical lowercase UUID form is 16 bytes, a
//!   canonical decimal resourceVersion a `u64`, a stageTimestamp that
//!   prints back identically a count of microseconds; anything else is kept
//!   as its text, so every fact reads back exactly as it was filed;
//! - the slot ([`Slot`], 56 bytes, in one `Vec`) holds what the joins read
//!   (uid, resourceVersion, namespace, author, verb, arrival order and
//!   time) and the link of its scope's arrival queue ([`super::queue`]);
//!   arrival order and time are 32-bit offsets from the store's [`Base`]
//!   (what every held fact spans fits: 4 billion arrivals, 49 days);
//! - the name, auditID, stageTimestamp, display name and email (and any
//!   uid or resourceVersion kept as text) are the fact's cold part, one
//!   byte string read for the name tier, for ordering and for `Explain`. It
//!   sits in the [`slab`](super::slab), in a size class with no allocation
//!   of its own: the slot keeps its item number and exact length (6 bytes,
//!   where a boxed slice took a 16-byte pointer and an allocator chunk
//!   rounded up to 64 bytes);
//! - the index's tables hold slot numbers and hash what the slot holds, so
//!   no key is a copy of a fact's strings.
//!
//! A freed slot and a freed cold item are reused by the next fact filed.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash};

use hashbrown::HashTable;

use super::order::stage_time_us;
use super::slab::{Item, Slab};
use crate::attribution::Fact;
use crate::attribution::selector::Selector;

/// A slot number.
pub(super) type Fid = u32;

/// No slot.
pub(super) const NONE: Fid = Fid::MAX;

const UID_UUID: u16 = 1;
const UID_TEXT: u16 = 1 << 1;
const RV_NUM: u16 = 1 << 2;
const RV_TEXT: u16 = 1 << 3;
const AUDIT_UUID: u16 = 1 << 4;
const AUDIT_TEXT: u16 = 1 << 5;
const TS_MICROS: u16 = 1 << 6;
const TS_TEXT: u16 = 1 << 7;
const DISPLAY: u16 = 1 << 8;
const EMAIL: u16 = 1 << 9;
const REMOVAL: u16 = 1 << 10;
const COLLECTION: u16 = 1 << 11;
const EXTRA: u16 = 1 << 12;

/// A uid, auditID or resourceVersion in its compact form. Two strings are
/// equal exactly when their keys are: the compact forms are taken only by
/// canonical spellings, which no text key can equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Key<'a> {
    Uuid([u8; 16]),
    Num(u64),
    Text(&'a str),
}

impl<'a> Key<'a> {
    /// A uid or auditID; `None` when empty.
    pub fn id(s: &'a str) -> Option<Self> {
        if s.is_empty() {
            return None;
        }
        Some(uuid(s).map_or(Key::Text(s), Key::Uuid))
    }

    /// A resourceVersion; `None` when empty.
    pub fn rv(s: &'a str) -> Option<Self> {
        if s.is_empty() {
            return None;
        }
        Some(canonical_u64(s).map_or(Key::Text(s), Key::Num))
    }

    fn to_text(self) -> String {
        match self {
            Key::Uuid(b) => uuid_string(&b),
            Key::Num(n) => n.to_string(),
            Key::Text(t) => t.to_owned(),
        }
    }
}

/// Where each of a UUID's 16 bytes sits in its `8-4-4-4-12` text.
const UUID_AT: [usize; 16] = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
/// Where its dashes sit.
const UUID_DASHES: [usize; 4] = [8, 13, 18, 23];

/// Every byte's lowercase hex digit value, 16 for what is not one: a read
/// parses two of these per uuid byte, so a table rather than a match.
const HEX_VALUE: [u8; 256] = {
    let mut t = [16u8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// A lowercase `8-4-4-4-12` UUID as its 16 bytes.
fn uuid(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 || UUID_DASHES.iter().any(|&i| b[i] != b'-') {
        return None;
    }
    let mut out = [0u8; 16];
    for (o, &at) in out.iter_mut().zip(&UUID_AT) {
        let (hi, lo) = (HEX_VALUE[usize::from(b[at])], HEX_VALUE[usize::from(b[at + 1])]);
        if (hi | lo) > 15 {
            return None;
        }
        *o = hi << 4 | lo;
    }
    Some(out)
}

pub(super) fn uuid_string(b: &[u8; 16]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [b'-'; 36];
    for (&byte, &at) in b.iter().zip(&UUID_AT) {
        out[at] = HEX[usize::from(byte >> 4)];
        out[at + 1] = HEX[usize::from(byte & 15)];
    }
    ascii(&out)
}

/// Bytes known to be ASCII as a `String`: checked (the fast ASCII path of
/// `from_utf8`), never lossy.
fn ascii(b: &[u8]) -> String {
    std::str::from_utf8(b).map_or_else(|_| String::from_utf8_lossy(b).into_owned(), str::to_owned)
}

/// A decimal that prints back identically (no sign, no leading zero).
fn canonical_u64(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) || (b.len() > 1 && b[0] == b'0') {
        return None;
    }
    s.parse().ok()
}

/// Microseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (the
/// audit MicroTime form); `None` outside years 0..=9999.
pub(super) fn format_micros(us: i64) -> Option<String> {
    let (days, rem) = (us.div_euclid(86_400_000_000), us.rem_euclid(86_400_000_000));
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return None;
    }
    let (secs, micros) = ((rem / 1_000_000) as u32, (rem % 1_000_000) as u32);
    // Digit by digit into a fixed buffer: every read of a fact and every
    // filing (which checks the stamp prints back) formats one, and `format!`
    // costs several times more. Divisions by the constant 10 compile to
    // multiplications.
    let mut b = *b"0000-00-00T00:00:00.000000Z";
    for (n, at) in [
        (y as u32, 0..4),
        (m as u32, 5..7),
        (d as u32, 8..10),
        (secs / 3600, 11..13),
        (secs / 60 % 60, 14..16),
        (secs % 60, 17..19),
        (micros, 20..26),
    ] {
        digits(&mut b[at], n);
    }
    Some(ascii(&b))
}

/// `n` in decimal, right-aligned and zero-padded across `into`.
fn digits(into: &mut [u8], mut n: u32) {
    for c in into.iter_mut().rev() {
        *c = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// Inverse of `days_from_civil` (Howard Hinnant's `civil_from_days`).
pub(crate) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A stageTimestamp as microseconds when they print back identically.
pub(super) fn compact_timestamp(s: &str) -> Option<i64> {
    let us = stage_time_us(s)?;
    (format_micros(us).as_deref() == Some(s)).then_some(us)
}

pub(super) fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

pub(super) fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            break;
        }
        out.push(b | 0x80);
    }
}

/// Reads back what [`Slot::new`] wrote.
pub(super) struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn new(b: &'a [u8]) -> Self {
        Self { b }
    }

    pub(super) fn varint(&mut self) -> u64 {
        let (mut n, mut shift) = (0u64, 0);
        while let Some((&b, rest)) = self.b.split_first() {
            self.b = rest;
            if shift < 64 {
                n |= u64::from(b & 0x7f) << shift;
            }
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        n
    }

    pub(super) fn take(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.b.len());
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        head
    }

    pub(super) fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0u8; N];
        let head = self.take(N);
        a[..head.len()].copy_from_slice(head);
        a
    }

    pub(super) fn str(&mut self) -> &'a str {
        let (mut n, mut shift) = (0usize, 0);
        while let Some((&b, rest)) = self.b.split_first() {
            self.b = rest;
            n |= usize::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        text(self.take(n))
    }
}

/// Bytes the store wrote from a `&str`.
fn text(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap_or_default()
}

/// What a slot keeps out of its fixed part, decoded.
struct Cold<'a> {
    display: u32,
    email: u32,
    audit: Option<Key<'a>>,
    ts_micros: Option<i64>,
    ts_text: &'a str,
    uid_text: &'a str,
    rv_text: &'a str,
    name: &'a str,
}

/// One held fact's fixed part: what the joins read. 56 bytes with no
/// padding (asserted below), so a million facts are 56 MB of slots.
#[derive(Debug)]
pub(super) struct Slot {
    /// Arrival order less [`Base::seq`], from 1; 0 marks a free slot.
    seq: u32,
    /// When the fact was appended to its stream (the clock it ages on),
    /// less [`Base::ms`].
    at_ms: u32,
    /// The resourceVersion when `RV_NUM`.
    rv: u64,
    /// The uid when `UID_UUID`.
    uid: [u8; 16],
    author: u32,
    namespace: u32,
    verb: u32,
    /// The next fact in the scope queue that holds this one ([`super::queue`]).
    next: Fid,
    /// Which forms the fields take and what the cold part holds (`UID_UUID`..).
    flags: u16,
    /// name, auditID, stageTimestamp, display name, email and any uid or
    /// resourceVersion kept as text, in the store's slab (see [`SlotRef::cold`]).
    cold: Item,
}

const _: () = assert!(size_of::<Slot>() == 56 && align_of::<Slot>() == 8);

impl Slot {
    const FREE: Slot = Slot {
        seq: 0,
        at_ms: 0,
        rv: 0,
        uid: [0; 16],
        author: 0,
        namespace: 0,
        verb: 0,
        next: NONE,
        flags: 0,
        cold: Item::EMPTY,
    };

    fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
}

/// What a slot's arrival order and append time count from. Every held
/// fact's are at most `u32::MAX` past these ([`Store::fits`]); when a new
/// fact's are not, [`Store::rebase`] moves the base up to what is held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Base {
    /// One less than the oldest held fact's arrival order (at most).
    seq: u64,
    /// At most the earliest held fact's append time.
    ms: u64,
}

/// How far before a fact's append time a base is set, so a fact from
/// another stream appended a little earlier still fits without a rebase.
const MS_SLACK: u64 = 3_600_000;

/// A held fact as the index reads it: its slot and, on demand, its cold part.
#[derive(Debug, Clone, Copy)]
pub(super) struct SlotRef<'a> {
    slot: &'a Slot,
    slab: &'a Slab,
    base: Base,
}

impl<'a> SlotRef<'a> {
    fn has(&self, flag: u16) -> bool {
        self.slot.has(flag)
    }

    /// Arrival order: unique per held fact.
    pub fn seq(&self) -> u64 {
        self.base.seq + u64::from(self.slot.seq)
    }

    /// When the fact was appended to its stream.
    pub fn at_ms(&self) -> u64 {
        self.base.ms + u64::from(self.slot.at_ms)
    }

    /// The interned namespace.
    pub fn namespace(&self) -> u32 {
        self.slot.namespace
    }

    pub fn is_removal(&self) -> bool {
        self.has(REMOVAL)
    }

    pub fn is_collection(&self) -> bool {
        self.has(COLLECTION)
    }

    pub fn uid(&self) -> Option<Key<'a>> {
        if self.has(UID_UUID) {
            Some(Key::Uuid(self.slot.uid))
        } else if self.has(UID_TEXT) {
            Some(Key::Text(self.cold().uid_text))
        } else {
            None
        }
    }

    pub fn rv(&self) -> Option<Key<'a>> {
        if self.has(RV_NUM) {
            Some(Key::Num(self.slot.rv))
        } else if self.has(RV_TEXT) {
            Some(Key::Text(self.cold().rv_text))
        } else {
            None
        }
    }

    pub fn audit(&self) -> Option<Key<'a>> {
        if self.has(AUDIT_UUID | AUDIT_TEXT) { self.cold().audit } else { None }
    }

    pub fn name(&self) -> &'a str {
        self.cold().name
    }

    /// What the object's own order reads: the resourceVersion as an
    /// integer and the stageTimestamp in microseconds, where they are.
    pub fn order(&self) -> (Option<u64>, Option<i64>) {
        let c = self.cold();
        let rv = if self.has(RV_NUM) { Some(self.slot.rv) } else { c.rv_text.parse().ok() };
        (rv, c.ts_micros.or_else(|| stage_time_us(c.ts_text)))
    }

    fn cold(&self) -> Cold<'a> {
        let mut r = Reader { b: self.slab.get(self.slot.cold) };
        let mut c = Cold {
            display: 0,
            email: 0,
            audit: None,
            ts_micros: None,
            ts_text: "",
            uid_text: "",
            rv_text: "",
            name: "",
        };
        if self.has(DISPLAY) {
            c.display = u32::from_le_bytes(r.array());
        }
        if self.has(EMAIL) {
            c.email = u32::from_le_bytes(r.array());
        }
        if self.has(AUDIT_UUID) {
            c.audit = Some(Key::Uuid(r.array()));
        } else if self.has(AUDIT_TEXT) {
            c.audit = Some(Key::Text(r.str()));
        }
        if self.has(TS_MICROS) {
            c.ts_micros = Some(i64::from_le_bytes(r.array()));
        } else if self.has(TS_TEXT) {
            c.ts_text = r.str();
        }
        if self.has(UID_TEXT) {
            c.uid_text = r.str();
        }
        if self.has(RV_TEXT) {
            c.rv_text = r.str();
        }
        c.name = text(r.b);
        c
    }
}

/// What only some facts carry (collection facts: the selector and the uid
/// set), held beside the slab so no other fact pays for it.
#[derive(Debug)]
pub(super) struct Extra {
    pub label_selector: String,
    pub uids: Option<Vec<String>>,
    /// Parsed once at filing, for collection facts; `None` for an
    /// unparseable selector, which then matches nothing.
    pub selector: Option<Selector>,
}

/// Interned strings, reference counted. Id 0 is the empty string.
#[derive(Debug)]
struct Interner {
    strings: Vec<Box<str>>,
    counts: Vec<u32>,
    free: Vec<u32>,
    table: HashTable<u32>,
    state: RandomState,
}

impl Default for Interner {
    fn default() -> Self {
        Self {
            strings: vec!["".into()],
            counts: vec![0],
            free: Vec::new(),
            table: HashTable::new(),
            state: RandomState::new(),
        }
    }
}

impl Interner {
    fn find(&self, s: &str) -> Option<u32> {
        if s.is_empty() {
            return Some(0);
        }
        self.table.find(self.state.hash_one(s), |&id| &*self.strings[id as usize] == s).copied()
    }

    fn intern(&mut self, s: &str) -> u32 {
        if s.is_empty() {
            return 0;
        }
        let hash = self.state.hash_one(s);
        if let Some(&id) = self.table.find(hash, |&id| &*self.strings[id as usize] == s) {
            self.counts[id as usize] += 1;
            return id;
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.strings[id as usize] = s.into();
                self.counts[id as usize] = 1;
                id
            }
            None => {
                self.strings.push(s.into());
                self.counts.push(1);
                (self.strings.len() - 1) as u32
            }
        };
        let (strings, state) = (&self.strings, &self.state);
        super::table::insert_churned(&mut self.table, hash, id, |&i| state.hash_one(&*strings[i as usize]));
        id
    }

    fn release(&mut self, id: u32) {
        if id == 0 {
            return;
        }
        let n = &mut self.counts[id as usize];
        *n -= 1;
        if *n > 0 {
            return;
        }
        let hash = self.state.hash_one(&*self.strings[id as usize]);
        if let Ok(e) = self.table.find_entry(hash, |&i| i == id) {
            e.remove();
        }
        self.strings[id as usize] = "".into();
        self.free.push(id);
    }

    fn get(&self, id: u32) -> &str {
        &self.strings[id as usize]
    }
}

/// The largest scratch buffer [`Store::alloc`] keeps for the next fact.
const SCRATCH_KEPT: usize = 4096;

/// The slots, their cold parts, the interner, and the rare extras.
#[derive(Debug, Default)]
pub(super) struct Store {
    slots: Vec<Slot>,
    free: Vec<Fid>,
    base: Base,
    cold: Slab,
    strings: Interner,
    extras: HashMap<Fid, Extra>,
    /// Where [`Store::alloc`] writes a cold part before the slab copies it:
    /// one buffer reused, not an allocation per fact (kept only up to
    /// [`SCRATCH_KEPT`], so one huge fact does not pin its size).
    scratch: Vec<u8>,
}

impl Store {
    pub fn get(&self, fid: Fid) -> SlotRef<'_> {
        SlotRef { slot: &self.slots[fid as usize], slab: &self.cold, base: self.base }
    }

    /// Slots in use.
    fn held(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Whether a fact of arrival order `seq` appended at `at_ms` can be
    /// held against the current base ([`Store::alloc`] requires it).
    pub fn fits(&self, seq: u64, at_ms: u64) -> bool {
        let fits = |v: u64, base: u64, floor: u64| v >= floor && v - base <= u64::from(u32::MAX);
        self.held() == 0 || (fits(seq, self.base.seq, self.base.seq + 1) && fits(at_ms, self.base.ms, self.base.ms))
    }

    /// Moves the base to what the held facts and the new one span, so the
    /// new one [`fits`](Store::fits). O(slots), and due at most once per
    /// 4 billion arrivals or 49 days less what is held. `false` (nothing
    /// changed) when they span more than 32 bits: the caller evicts the
    /// oldest fact and asks again; an empty store always fits.
    pub fn rebase(&mut self, seq: u64, at_ms: u64) -> bool {
        let (mut lo_seq, mut lo_ms, mut hi_ms) = (seq, at_ms, at_ms);
        for s in self.slots.iter().filter(|s| s.seq != 0) {
            let r = SlotRef { slot: s, slab: &self.cold, base: self.base };
            lo_seq = lo_seq.min(r.seq());
            lo_ms = lo_ms.min(r.at_ms());
            hi_ms = hi_ms.max(r.at_ms());
        }
        let span = u64::from(u32::MAX);
        if seq - lo_seq >= span || hi_ms - lo_ms > span {
            return false;
        }
        let base = Base { seq: lo_seq - 1, ms: lo_ms - MS_SLACK.min(span - (hi_ms - lo_ms)).min(lo_ms) };
        let old = self.base;
        for s in self.slots.iter_mut().filter(|s| s.seq != 0) {
            s.seq = (old.seq + u64::from(s.seq) - base.seq) as u32;
            s.at_ms = (old.ms + u64::from(s.at_ms) - base.ms) as u32;
        }
        self.base = base;
        true
    }

    /// The fact after `fid` in its scope queue.
    pub fn next(&self, fid: Fid) -> Fid {
        self.slots[fid as usize].next
    }

    pub fn set_next(&mut self, fid: Fid, next: Fid) {
        self.slots[fid as usize].next = next;
    }

    /// The interned id of `s`, if any held fact uses it.
    pub fn find_string(&self, s: &str) -> Option<u32> {
        self.strings.find(s)
    }

    pub fn extra(&self, fid: Fid) -> Option<&Extra> {
        if self.slots[fid as usize].has(EXTRA) { self.extras.get(&fid) } else { None }
    }

    /// Holds `f`; `selector` is the parsed selector of a collection fact.
    /// `seq` is above every held fact's; the caller has made it and `at_ms`
    /// [`fit`](Store::fits).
    pub fn alloc(&mut self, f: &Fact, at_ms: u64, seq: u64, selector: Option<Selector>) -> Fid {
        if self.held() == 0 {
            self.base = Base { seq: seq - 1, ms: at_ms.saturating_sub(MS_SLACK) };
        }
        assert!(self.fits(seq, at_ms), "fact {seq} at {at_ms} ms does not fit the store's base {:?}", self.base);
        let mut flags = 0u16;
        let mut cold = std::mem::take(&mut self.scratch);
        cold.clear();
        let (mut uid, mut rv) = ([0u8; 16], 0u64);
        match Key::id(&f.uid) {
            Some(Key::Uuid(b)) => (flags, uid) = (flags | UID_UUID, b),
            Some(_) => flags |= UID_TEXT,
            None => {}
        }
        match Key::rv(&f.resource_version) {
            Some(Key::Num(n)) => (flags, rv) = (flags | RV_NUM, n),
            Some(_) => flags |= RV_TEXT,
            None => {}
        }
        let display = self.strings.intern(&f.display_name);
        if display != 0 {
            flags |= DISPLAY;
            cold.extend_from_slice(&display.to_le_bytes());
        }
        let email = self.strings.intern(&f.email);
        if email != 0 {
            flags |= EMAIL;
            cold.extend_from_slice(&email.to_le_bytes());
        }
        match Key::id(&f.audit_id) {
            Some(Key::Uuid(b)) => {
                flags |= AUDIT_UUID;
                cold.extend_from_slice(&b);
            }
            Some(_) => {
                flags |= AUDIT_TEXT;
                put_str(&mut cold, &f.audit_id);
            }
            None => {}
        }
        if let Some(us) = compact_timestamp(&f.stage_timestamp) {
            flags |= TS_MICROS;
            cold.extend_from_slice(&us.to_le_bytes());
        } else if !f.stage_timestamp.is_empty() {
            flags |= TS_TEXT;
            put_str(&mut cold, &f.stage_timestamp);
        }
        if flags & UID_TEXT != 0 {
            put_str(&mut cold, &f.uid);
        }
        if flags & RV_TEXT != 0 {
            put_str(&mut cold, &f.resource_version);
        }
        cold.extend_from_slice(f.name.as_bytes());
        if f.is_removal() {
            flags |= REMOVAL;
        }
        if f.is_collection() {
            flags |= COLLECTION;
        }
        let extra = (!f.label_selector.is_empty() || f.uids.is_some() || selector.is_some()).then(|| Extra {
            label_selector: f.label_selector.clone(),
            uids: f.uids.clone(),
            selector,
        });
        if extra.is_some() {
            flags |= EXTRA;
        }
        let slot = Slot {
            seq: (seq - self.base.seq) as u32,
            at_ms: (at_ms - self.base.ms) as u32,
            rv,
            uid,
            author: self.strings.intern(&f.author),
            namespace: self.strings.intern(&f.namespace),
            verb: self.strings.intern(&f.verb),
            next: NONE,
            flags,
            cold: self.cold.alloc(&cold),
        };
        if cold.capacity() <= SCRATCH_KEPT {
            self.scratch = cold;
        }
        let fid = match self.free.pop() {
            Some(fid) => {
                self.slots[fid as usize] = slot;
                fid
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as Fid
            }
        };
        if let Some(e) = extra {
            self.extras.insert(fid, e);
        }
        fid
    }

    /// Lets the slot go (every table must have forgotten it already).
    pub fn free(&mut self, fid: Fid) {
        let s = std::mem::replace(&mut self.slots[fid as usize], Slot::FREE);
        let c = SlotRef { slot: &s, slab: &self.cold, base: self.base }.cold();
        for id in [s.author, s.namespace, s.verb, c.display, c.email] {
            self.strings.release(id);
        }
        self.cold.free(s.cold);
        if s.has(EXTRA) {
            self.extras.remove(&fid);
        }
        self.free.push(fid);
    }

    /// The fact as it was filed.
    pub fn fact(&self, fid: Fid) -> Fact {
        let s = self.get(fid);
        let c = s.cold();
        let extra = self.extra(fid);
        Fact {
            author: self.strings.get(s.slot.author).to_owned(),
            namespace: self.strings.get(s.slot.namespace).to_owned(),
            name: c.name.to_owned(),
            uid: s.uid().map(Key::to_text).unwrap_or_default(),
            resource_version: s.rv().map(Key::to_text).unwrap_or_default(),
            display_name: self.strings.get(c.display).to_owned(),
            email: self.strings.get(c.email).to_owned(),
            verb: self.strings.get(s.slot.verb).to_owned(),
            audit_id: c.audit.map(Key::to_text).unwrap_or_default(),
            stage_timestamp: match c.ts_micros {
                Some(us) => format_micros(us).unwrap_or_default(),
                None => c.ts_text.to_owned(),
            },
            label_selector: extra.map(|e| e.label_selector.clone()).unwrap_or_default(),
            uids: extra.and_then(|e| e.uids.clone()),
        }
    }
}

/// The hash of a key, for every table of one index.
#[derive(Debug, Default)]
pub(super) struct Hashes(RandomState);

impl Hashes {
    pub fn of(&self, k: impl Hash) -> u64 {
        self.0.hash_one(k)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn round_trip(f: &Fact) -> Fact {
        let mut st = Store::default();
        let fid = st.alloc(f, 5, 1, None);
        st.fact(fid)
    }

    #[test]
    fn compact_forms_round_trip_and_text_stays_text() {
        let f = Fact {
            author: "system:serviceaccount:ns:sa".into(),
            namespace: "team-a".into(),
            name: "web-7f9c8d6b5-x2x4q".into(),
            uid: "0f8e2c1a-3b4d-4e5f-8a9b-0c1d2e3f4a5b".into(),
            resource_version: "184467440737".into(),
            display_name: "Alice".into(),
            email: "alice@example.com".into(),
            verb: "patch".into(),
            audit_id: "5b6c7d8e-0000-4000-8000-000000000001".into(),
            stage_timestamp: "2026-11-29T12:00:00.123456Z".into(),
            label_selector: String::new(),
            uids: None,
        };
        let mut st = Store::default();
        let fid = st.alloc(&f, 5, 1, None);
        let s = st.get(fid);
        assert!(s.has(UID_UUID) && s.has(RV_NUM) && s.has(AUDIT_UUID) && s.has(TS_MICROS));
        assert_eq!(st.fact(fid), f);
        // Spellings the compact forms would not print back stay text.
        for (uid, rv, ts) in [
            ("0F8E2C1A-3B4D-4E5F-8A9B-0C1D2E3F4A5B", "007", "2026-11-29T12:00:00.1Z"),
            ("u1", "+5", "2026-11-29T12:00:00Z"),
            ("0f8e2c1a-3b4d-4e5f-8a9b-0c1d2e3f4a5", "18446744073709551616", "2026-11-29T12:00:60.000000Z"),
        ] {
            let g = Fact {
                uid: uid.into(),
                resource_version: rv.into(),
                stage_timestamp: ts.into(),
                audit_id: uid.into(),
                ..f.clone()
            };
            assert_eq!(round_trip(&g), g);
        }
    }

    #[test]
    fn interned_strings_are_released_with_their_last_fact() {
        let mut st = Store::default();
        let f = Fact { author: "alice".into(), namespace: "ns".into(), verb: "update".into(), ..Fact::default() };
        let a = st.alloc(&f, 0, 1, None);
        let b = st.alloc(&f, 0, 2, None);
        st.free(a);
        assert!(st.find_string("alice").is_some());
        st.free(b);
        assert_eq!(st.find_string("alice"), None);
        // The slot and the string id are reused.
        let c = st.alloc(&Fact { author: "bob".into(), ..f }, 0, 3, None);
        assert_eq!(st.fact(c).author, "bob");
        assert!(c == a || c == b);
    }

    proptest! {
        /// The digit-by-digit MicroTime is what `format!` prints.
        #[test]
        fn micro_time_is_printed_as_format_prints_it(us in -1_000_000_000_000_000i64..300_000_000_000_000_000) {
            let reference = {
                let (days, rem) = (us.div_euclid(86_400_000_000), us.rem_euclid(86_400_000_000));
                let (y, m, d) = civil_from_days(days);
                let (secs, micros) = (rem / 1_000_000, rem % 1_000_000);
                (0..=9999).contains(&y).then(|| {
                    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z", secs / 3600, secs / 60 % 60, secs % 60)
                })
            };
            prop_assert_eq!(format_micros(us), reference);
        }
    }

    #[test]
    fn timestamps_print_back_as_micro_time() {
        for s in ["1970-01-01T00:00:00.000000Z", "2026-02-28T23:59:59.999999Z", "2024-02-29T00:00:00.000001Z"] {
            assert_eq!(format_micros(stage_time_us(s).unwrap()).as_deref(), Some(s));
        }
        assert_eq!(compact_timestamp("2026-11-29T12:00:00+01:00"), None);
    }

    proptest! {
        #[test]
        fn a_uuid_parses_back_from_its_text_and_no_other_spelling_does(
            bytes in any::<[u8; 16]>(), at in 0usize..36, c in any::<char>(),
        ) {
            let text = uuid_string(&bytes);
            prop_assert_eq!(uuid(&text), Some(bytes));
            // One character changed: still a uuid only if it is another
            // lowercase hex digit in a digit's place.
            let changed: String =
                text.chars().enumerate().map(|(i, t)| if i == at { c } else { t }).collect();
            let still = if UUID_DASHES.contains(&at) { c == '-' } else { c.is_ascii_digit() || ('a'..='f').contains(&c) };
            prop_assert_eq!(uuid(&changed).is_some(), still, "{}", changed);
        }
    }

    fn text_of() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            "[a-z0-9:-]{0,12}",
            "[0-9]{1,21}",
            "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9](\\.[0-9]{1,9})?(Z|[+-]0[0-9]:[0-5][0-9])",
            any::<String>(),
        ]
    }

    proptest! {
        #[test]
        fn every_fact_reads_back_as_it_was_filed(
            author in text_of(), namespace in text_of(), name in text_of(), uid in text_of(),
            rv in text_of(), display in text_of(), email in text_of(), verb in text_of(),
            audit in text_of(), ts in text_of(), selector in text_of(),
            uids in prop::option::of(prop::collection::vec(text_of(), 0..3)),
        ) {
            let f = Fact {
                author, namespace, name, uid, resource_version: rv, display_name: display, email, verb,
                audit_id: audit, stage_timestamp: ts, label_selector: selector, uids,
            };
            prop_assert_eq!(round_trip(&f), f);
        }

        #[test]
        fn facts_filed_and_freed_in_any_order_read_back_as_filed(
            ops in prop::collection::vec(
                (any::<bool>(), any::<usize>(), "[a-c]{0,2}", "[a-z0-9.-]{0,60}", text_of(), text_of()), 0..60,
            ),
        ) {
            // Freed slots and cold items are reused by later facts of other
            // shapes: every fact still held reads back exactly.
            let mut st = Store::default();
            let mut held: Vec<(Fid, Fact)> = Vec::new();
            for (seq, (free, pick, author, name, uid, audit)) in ops.into_iter().enumerate() {
                if free && !held.is_empty() {
                    let (fid, _) = held.swap_remove(pick % held.len());
                    st.free(fid);
                } else {
                    let f = Fact { author, namespace: "ns".into(), name, uid, audit_id: audit, ..Fact::default() };
                    let fid = st.alloc(&f, seq as u64, seq as u64 + 1, None);
                    prop_assert_eq!(&st.fact(fid), &f);
                    held.push((fid, f));
                }
            }
            for (fid, f) in &held {
                prop_assert_eq!(&st.fact(*fid), f);
            }
        }
    }
}
