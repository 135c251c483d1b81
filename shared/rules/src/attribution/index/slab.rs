//! Variable-length byte strings held without an allocation each: the cold
//! part of every held fact (see [`super::store`]).
//!
//! A boxed slice per fact cost its 16-byte fat pointer plus the allocator's
//! rounding (a 37-byte part took a 64-byte chunk). Here a string up to
//! [`MAX_SMALL`] bytes is an item of the size class its length rounds up to
//! (4-byte steps), and the caller keeps the exact length beside the item
//! number ([`Item`], 6 bytes). A class is a list of fixed-size chunks, so a
//! growth allocates one more chunk and never moves what is held (no copy of
//! tens of MB under the index's write lock). A freed item goes on its
//! class's free list, threaded through the freed items themselves, and the
//! next string of that class takes it: nothing is ever compacted, and a class
//! whose last item goes gives its chunks back. Longer strings (which no
//! well-formed fact has) fall back to a boxed slice each.

/// The longest string held in a size class.
pub(super) const MAX_SMALL: usize = 512;

/// Size classes step by this many bytes: the least that still holds a
/// free item's 4-byte link. A typical cold part (41 bytes: a 17-byte name,
/// a uuid auditID, a timestamp) wastes 3 bytes in a 44-byte class where
/// 8-byte steps wasted 7.
const STEP: usize = 4;

/// The most bytes a chunk holds: its items are the largest power of two
/// that fits, so 2 to 4 KiB. Small, so a new chunk fits the holes that the
/// sidecar's short-lived allocations (decoded batches) leave in the heap:
/// with 1024-item chunks (40 KiB for a typical class) the sidecar held
/// 242 MiB at 1M facts, with these 235 MiB, for about 1 byte a fact of
/// chunk bookkeeping.
const CHUNK_BYTES: usize = 4096;

/// End of a free list.
const NIL: u32 = u32::MAX;

/// The length of an item held as a boxed slice.
const BIG: u16 = u16::MAX;

const _: () = assert!(MAX_SMALL < BIG as usize && MAX_SMALL.is_multiple_of(STEP) && STEP >= 4);

/// Where a string is held: its item number in the class its length picks
/// (in the boxed side store when `len` is [`BIG`]), and its exact length.
/// 6 bytes, 2-aligned (the number as two halves), so it fits beside a
/// slot's 2-byte flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Item {
    idx: [u16; 2],
    len: u16,
}

impl Item {
    /// The empty string, which holds nothing.
    pub const EMPTY: Item = Item { idx: [0; 2], len: 0 };

    fn new(idx: u32, len: u16) -> Self {
        Self { idx: [idx as u16, (idx >> 16) as u16], len }
    }

    fn idx(self) -> u32 {
        u32::from(self.idx[0]) | u32::from(self.idx[1]) << 16
    }
}

const _: () = assert!(size_of::<Item>() == 6 && align_of::<Item>() == 2);

/// One size class: items of `size` bytes, `1 << shift` to a chunk.
#[derive(Debug)]
struct Class {
    size: usize,
    shift: u32,
    /// Each is allocated at its full capacity once and filled as items are
    /// first handed out.
    chunks: Vec<Vec<u8>>,
    /// Items ever handed out since the class was last empty.
    next: u32,
    /// The first free item; each free item's first 4 bytes name the next.
    free: u32,
    /// Items held.
    live: u32,
}

impl Class {
    fn new(size: usize) -> Self {
        let shift = (CHUNK_BYTES / size).max(1).ilog2();
        Self { size, shift, chunks: Vec::new(), next: 0, free: NIL, live: 0 }
    }

    fn at(&self, idx: u32) -> (usize, usize) {
        ((idx >> self.shift) as usize, (idx as usize & ((1 << self.shift) - 1)) * self.size)
    }

    fn bytes(&self, idx: u32, len: usize) -> &[u8] {
        let (c, off) = self.at(idx);
        &self.chunks[c][off..off + len]
    }

    fn item_mut(&mut self, idx: u32) -> &mut [u8] {
        let (c, off) = self.at(idx);
        &mut self.chunks[c][off..off + self.size]
    }

    fn alloc(&mut self, b: &[u8]) -> u32 {
        self.live = self.live.checked_add(1).expect("fewer items than u32 slot numbers");
        if self.free != NIL {
            let idx = self.free;
            let item = self.item_mut(idx);
            let next = u32::from_le_bytes(item[..4].try_into().expect("items hold at least 4 bytes"));
            item[..b.len()].copy_from_slice(b);
            self.free = next;
            return idx;
        }
        let idx = self.next;
        self.next = idx.checked_add(1).filter(|&n| n != NIL).expect("fewer items than u32 slot numbers");
        let size = self.size;
        if (idx >> self.shift) as usize == self.chunks.len() {
            self.chunks.push(Vec::with_capacity(size << self.shift));
        }
        let chunk = self.chunks.last_mut().expect("the chunk of a new item exists");
        chunk.extend_from_slice(b);
        chunk.resize(chunk.len() + size - b.len(), 0);
        idx
    }

    fn free(&mut self, idx: u32) {
        self.live -= 1;
        if self.live == 0 {
            // Nothing left to keep: the chunks go back to the allocator.
            *self = Self::new(self.size);
            return;
        }
        let head = self.free;
        self.item_mut(idx)[..4].copy_from_slice(&head.to_le_bytes());
        self.free = idx;
    }
}

/// Byte strings by [`Item`].
#[derive(Debug)]
pub(super) struct Slab {
    classes: Vec<Class>,
    big: Vec<Box<[u8]>>,
    big_free: Vec<u32>,
}

impl Default for Slab {
    fn default() -> Self {
        Self {
            classes: (1..=MAX_SMALL / STEP).map(|k| Class::new(k * STEP)).collect(),
            big: Vec::new(),
            big_free: Vec::new(),
        }
    }
}

/// The class of a string of `len` (1..=MAX_SMALL) bytes.
fn class_of(len: usize) -> usize {
    (len - 1) / STEP
}

impl Slab {
    /// Holds a copy of `b`.
    pub fn alloc(&mut self, b: &[u8]) -> Item {
        match b.len() {
            0 => Item::EMPTY,
            n if n <= MAX_SMALL => Item::new(self.classes[class_of(n)].alloc(b), n as u16),
            _ => {
                let held = b.into();
                let idx = match self.big_free.pop() {
                    Some(idx) => {
                        self.big[idx as usize] = held;
                        idx
                    }
                    None => {
                        self.big.push(held);
                        u32::try_from(self.big.len() - 1).expect("fewer items than u32 slot numbers")
                    }
                };
                Item::new(idx, BIG)
            }
        }
    }

    /// The bytes of a held item.
    pub fn get(&self, item: Item) -> &[u8] {
        match item.len {
            0 => &[],
            BIG => &self.big[item.idx() as usize],
            n => self.classes[class_of(n.into())].bytes(item.idx(), n.into()),
        }
    }

    /// Lets a held item go; its place is reused.
    pub fn free(&mut self, item: Item) {
        match item.len {
            0 => {}
            BIG => {
                self.big[item.idx() as usize] = Box::default();
                self.big_free.push(item.idx());
            }
            n => self.classes[class_of(n.into())].free(item.idx()),
        }
    }

    /// Bytes the classes have allocated (chunk capacity), for tests.
    #[cfg(test)]
    fn chunk_bytes(&self) -> usize {
        self.classes.iter().flat_map(|c| &c.chunks).map(Vec::capacity).sum()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn lengths_pick_their_class_and_read_back() {
        let mut s = Slab::default();
        for n in [0, 1, 3, 4, 7, 8, 9, 64, 511, 512, 513, 70_000] {
            let b: Vec<u8> = (0..n).map(|i| (i * 7 + n) as u8).collect();
            let item = s.alloc(&b);
            assert_eq!(s.get(item), &b[..], "{n} bytes");
            assert_eq!(item.len == BIG, n > MAX_SMALL);
        }
    }

    #[test]
    fn a_freed_item_is_reused_by_the_next_of_its_class() {
        let mut s = Slab::default();
        let a = s.alloc(b"0123456789");
        let b = s.alloc(b"abcdefghijk");
        s.free(a);
        // 10 and 11 bytes round to the same 12-byte class as 12.
        let c = s.alloc(b"ABCDEFGHIJKL");
        assert_eq!(c.idx(), a.idx());
        assert_eq!(s.get(c), b"ABCDEFGHIJKL");
        assert_eq!(s.get(b), b"abcdefghijk");
        // Another class does not take it.
        s.free(c);
        let d = s.alloc(b"0123456789abcdefg");
        assert_eq!(d.idx(), 0, "the first item of the 20-byte class");
        assert_eq!(s.get(b), b"abcdefghijk");
        let big = s.alloc(&[9; 600]);
        s.free(big);
        assert_eq!(s.alloc(&[8; 700]).idx(), big.idx());
    }

    #[test]
    fn chunks_fill_before_the_next_one_and_an_empty_class_lets_them_go() {
        let mut s = Slab::default();
        let per_chunk = CHUNK_BYTES / 8;
        let items: Vec<Item> = (0..per_chunk + 1).map(|i| s.alloc(&(i as u64).to_le_bytes())).collect();
        assert_eq!(s.chunk_bytes(), 2 * CHUNK_BYTES);
        for (i, &item) in items.iter().enumerate() {
            assert_eq!(s.get(item), (i as u64).to_le_bytes());
        }
        for &item in &items {
            s.free(item);
        }
        assert_eq!(s.chunk_bytes(), 0);
        assert_eq!(s.alloc(b"x").idx(), 0);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Alloc(Vec<u8>),
        /// Frees the held item at this position (modulo how many are held).
        Free(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => prop::collection::vec(any::<u8>(), 0..40).prop_map(Op::Alloc),
            1 => prop::collection::vec(any::<u8>(), 0..700).prop_map(Op::Alloc),
            4 => any::<usize>().prop_map(Op::Free),
        ]
    }

    /// Where an item lives: the boxed store (`None`) or a class.
    fn home(len: usize) -> Option<usize> {
        (len <= MAX_SMALL).then(|| class_of(len))
    }

    proptest! {
        #[test]
        fn random_allocs_and_frees_read_back_and_reuse_what_was_freed(ops in prop::collection::vec(op(), 0..400)) {
            let mut s = Slab::default();
            let mut held: Vec<(Item, Vec<u8>)> = Vec::new();
            // Per home: items freed and not yet reused.
            let mut freed: HashMap<Option<usize>, Vec<u32>> = HashMap::new();
            for op in ops {
                match op {
                    Op::Alloc(b) => {
                        let item = s.alloc(&b);
                        if !b.is_empty() {
                            let home = home(b.len());
                            let taken = held.iter().filter(|(_, c)| !c.is_empty() && self::home(c.len()) == home);
                            prop_assert!(taken.clone().all(|(h, _)| h.idx() != item.idx()), "item {} handed out twice", item.idx());
                            let f = freed.entry(home).or_default();
                            // A freed item is reused before a new one is taken.
                            if !f.is_empty() {
                                prop_assert!(f.contains(&item.idx()), "{} not among the freed {:?}", item.idx(), f);
                                f.retain(|&i| i != item.idx());
                            }
                        }
                        held.push((item, b));
                    }
                    Op::Free(i) if !held.is_empty() => {
                        let (item, b) = held.swap_remove(i % held.len());
                        s.free(item);
                        if !b.is_empty() {
                            let home = home(b.len());
                            if home.is_some() && !held.iter().any(|(_, c)| !c.is_empty() && self::home(c.len()) == home) {
                                // The class emptied: it starts over.
                                freed.remove(&home);
                            } else {
                                freed.entry(home).or_default().push(item.idx());
                            }
                        }
                    }
                    Op::Free(_) => {}
                }
                for (item, b) in &held {
                    prop_assert_eq!(s.get(*item), &b[..]);
                }
            }
            let empty = held.iter().all(|(_, b)| b.is_empty() || b.len() > MAX_SMALL);
            prop_assert!(!empty || s.chunk_bytes() == 0, "classes with nothing held keep no chunk");
        }
    }
}
