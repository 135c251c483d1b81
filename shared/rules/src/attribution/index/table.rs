//! Inserting into a table whose entries come and go.
//!
//! A fact table at steady state loses one entry for each it gains, and
//! hashbrown leaves a tombstone where an entry was erased from a full
//! probe group. Tombstones use up a table's room as entries do. When the
//! room runs out, hashbrown cleans the table where it stands only if it is
//! at most half full, and otherwise doubles it: so a table that settled
//! more than half full doubles minutes into steady state,
//! though it holds no more than before (4 MiB of 47 at 300,000 facts, a
//! quarter of an hour into the steady bench's load replayed on the index).
//! [`insert_churned`] rebuilds such a table at its own size instead.

use hashbrown::HashTable;

/// The entries `buckets` hold at most (hashbrown's load factor: 7/8).
fn full_capacity(buckets: usize) -> usize {
    if buckets < 8 { buckets.saturating_sub(1) } else { buckets / 8 * 7 }
}

/// `insert_unique`, except that a table whose room tombstones used up while
/// it held between half and fifteen sixteenths of its full capacity is
/// rebuilt at its size rather than doubled. Fuller than that it grows as
/// usual: a rebuild would leave room for too few inserts to pay for it (at
/// the bound, a rebuild moves 15 entries for each insert it makes room for;
/// a table of 3,000 facts at 84% moves 5). A bound of 7/8 instead left the
/// tables that drift past it to double one by one, still doing so two
/// hours into the replay.
pub(super) fn insert_churned<T>(table: &mut HashTable<T>, hash: u64, value: T, hasher: impl Fn(&T) -> u64) {
    if table.len() == table.capacity() {
        let full = full_capacity(table.num_buckets());
        let len = table.len();
        if len + 1 > full / 2 && len < full - full / 16 {
            let mut fresh = HashTable::with_capacity(full);
            for v in table.drain() {
                fresh.insert_unique(hasher(&v), v, &hasher);
            }
            *table = fresh;
        }
    }
    table.insert_unique(hash, value, hasher);
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    fn hash(v: &u64) -> u64 {
        foldhash::fast::FixedState::with_seed(7).hash_one(v)
    }

    type Insert = fn(&mut HashTable<u64>, u64, u64, fn(&u64) -> u64);

    /// Fills a table to `live` entries, then replaces the oldest entry with a
    /// new one `rounds` times; returns the bucket counts seen after the fill.
    fn churn(live: u64, rounds: u64, insert: Insert) -> Vec<usize> {
        let mut t = HashTable::new();
        for v in 0..live {
            insert(&mut t, hash(&v), v, hash);
        }
        let mut sizes = vec![t.num_buckets()];
        for v in live..live + rounds {
            let old = v - live;
            t.find_entry(hash(&old), |&x| x == old).unwrap().remove();
            insert(&mut t, hash(&v), v, hash);
            sizes.push(t.num_buckets());
            assert_eq!(t.len() as u64, live);
        }
        for v in rounds..live + rounds {
            assert_eq!(t.find(hash(&v), |&x| x == v), Some(&v), "entry {v} lost");
        }
        sizes
    }

    fn plain(t: &mut HashTable<u64>, h: u64, v: u64, hasher: fn(&u64) -> u64) {
        t.insert_unique(h, v, hasher);
    }

    fn churned(t: &mut HashTable<u64>, h: u64, v: u64, hasher: fn(&u64) -> u64) {
        insert_churned(t, h, v, hasher);
    }

    #[test]
    fn a_table_under_churn_keeps_its_size() {
        // 3,000 entries settle in 4,096 buckets (full at 3,584): 84% full.
        let sizes = churn(3_000, 100_000, churned);
        assert_eq!(sizes[0], 4_096);
        assert!(sizes.iter().all(|&b| b == 4_096), "grew to {:?}", sizes.iter().max());
        // What it guards against: hashbrown alone doubles the same table.
        let plain = churn(3_000, 100_000, plain);
        assert_eq!(plain[0], 4_096);
        assert_eq!(plain.last(), Some(&8_192));
    }

    #[test]
    fn a_table_past_fifteen_sixteenths_still_grows() {
        // 3,400 of 3,584 (95%): too full to pay for rebuilds; it doubles once and stays.
        let sizes = churn(3_400, 50_000, churned);
        assert_eq!(sizes[0], 4_096);
        assert_eq!(sizes.last(), Some(&8_192));
    }

    #[test]
    fn small_tables_churn_without_loss() {
        for live in 1..40 {
            let sizes = churn(live, 500, churned);
            assert!(sizes.iter().all(|&b| b == sizes[0] || b == 2 * sizes[0]), "{live}: {sizes:?}");
        }
    }
}
