//! A scope's facts in arrival order, linked through their slots.
//!
//! The link is the 4 bytes a slot had left over (see [`super::store`]), so
//! the order costs nothing per fact where a `VecDeque` of slot numbers cost
//! 4 bytes and more while its ring grew. A held fact is in at most one queue
//! (`live`, then `sticky_only`), which owns its link.

use super::store::{Fid, NONE, Store};

/// Facts oldest first; [`Queue::insert_by_seq`] keeps the arrival order.
#[derive(Debug)]
pub(super) struct Queue {
    head: Fid,
    tail: Fid,
    len: usize,
}

impl Default for Queue {
    fn default() -> Self {
        Self { head: NONE, tail: NONE, len: 0 }
    }
}

impl Queue {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn front(&self) -> Option<Fid> {
        (self.head != NONE).then_some(self.head)
    }

    pub fn push_back(&mut self, st: &mut Store, f: Fid) {
        st.set_next(f, NONE);
        if self.tail == NONE {
            self.head = f;
        } else {
            st.set_next(self.tail, f);
        }
        self.tail = f;
        self.len += 1;
    }

    pub fn pop_front(&mut self, st: &Store) -> Option<Fid> {
        let f = self.front()?;
        self.head = st.next(f);
        if self.head == NONE {
            self.tail = NONE;
        }
        self.len -= 1;
        Some(f)
    }

    /// Puts `f` before the first fact that arrived after it. A fact moves
    /// here from the front of `live`, so it is the latest arrival and goes
    /// at the back; the walk is for a queue that was not filled that way.
    pub fn insert_by_seq(&mut self, st: &mut Store, f: Fid) {
        let seq = st.get(f).seq();
        if self.tail == NONE || st.get(self.tail).seq() < seq {
            self.push_back(st, f);
            return;
        }
        let (mut prev, mut cur) = (NONE, self.head);
        while cur != NONE && st.get(cur).seq() < seq {
            (prev, cur) = (cur, st.next(cur));
        }
        st.set_next(f, cur);
        if prev == NONE {
            self.head = f;
        } else {
            st.set_next(prev, f);
        }
        self.len += 1;
    }

    /// The facts front to back, for tests.
    #[cfg(test)]
    fn to_vec(&self, st: &Store) -> Vec<Fid> {
        let mut out = Vec::with_capacity(self.len);
        let mut cur = self.head;
        while cur != NONE {
            out.push(cur);
            cur = st.next(cur);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use proptest::prelude::*;

    use super::*;
    use crate::attribution::Fact;

    proptest! {
        /// The queue does what the `VecDeque` it replaces did, the sorted
        /// insert included (`partition_point` by arrival, then `insert`).
        #[test]
        fn a_queue_is_a_deque_in_arrival_order(ops in prop::collection::vec((0..4u8, any::<usize>()), 0..200)) {
            let mut st = Store::default();
            let mut seq = 0;
            let f = Fact { author: "a".into(), ..Fact::default() };
            let (mut q, mut other) = (Queue::default(), Queue::default());
            let (mut model, mut other_model) = (VecDeque::new(), VecDeque::new());
            // Facts not in either queue, by arrival.
            let mut loose: Vec<Fid> = Vec::new();
            for (op, pick) in ops {
                match op {
                    0 => {
                        seq += 1;
                        let fid = st.alloc(&f, 0, seq, None);
                        q.push_back(&mut st, fid);
                        model.push_back(fid);
                    }
                    1 => {
                        let (a, b) = (q.pop_front(&st), model.pop_front());
                        prop_assert_eq!(a, b);
                        loose.extend(a);
                    }
                    2 if !loose.is_empty() => {
                        let fid = loose.remove(pick % loose.len());
                        other.insert_by_seq(&mut st, fid);
                        let s = st.get(fid).seq();
                        let at = other_model.partition_point(|&x| st.get(x).seq() < s);
                        other_model.insert(at, fid);
                    }
                    _ => {
                        let (a, b) = (other.pop_front(&st), other_model.pop_front());
                        prop_assert_eq!(a, b);
                        loose.extend(a);
                    }
                }
                prop_assert_eq!(q.len(), model.len());
                prop_assert_eq!(other.len(), other_model.len());
                prop_assert_eq!(q.front(), model.front().copied());
                prop_assert_eq!(other.front(), other_model.front().copied());
                prop_assert_eq!(q.to_vec(&st), Vec::from(model.clone()));
                prop_assert_eq!(other.to_vec(&st), Vec::from(other_model.clone()));
            }
        }
    }
}
