//! Pack maintenance's decision: which of the clone's packs become one.
//!
//! Each commit window of at least a hundred changes lands in the clone as a
//! pack of its own. Every pack costs every object write: libgit2, on a new
//! object, rescans the pack directory and compares each file found with
//! each pack it holds (quadratic in the packs), and a lookup searches each
//! pack's index. A mirror at 500 changes/s held 529 packs after 13 minutes
//! and committed a third as fast as when it started (issue 31).
//!
//! The merge is size-tiered, as log-structured stores compact: a pack's tier
//! is `floor(log_FAN_IN(objects))`, and once a tier holds [`FAN_IN`] packs
//! they become one pack of a higher tier. Each object is rewritten once per
//! tier it climbs (a handful over the clone's life), and the clone holds at
//! most `FAN_IN - 1` packs per tier (fewer than fifty for a clone of a
//! million objects). git's `repack --geometric=2` keeps
//! fewer packs but rewrites an object once per doubling; it can afford that
//! by reusing deltas, which libgit2's pack builder does not (every rewrite
//! is a fresh delta search).

/// Packs of one tier merged at once; also the ratio between tiers.
pub const FAN_IN: u64 = 16;

/// The tier of a pack of `objects` objects: `floor(log_FAN_IN(objects))`
/// (an empty pack is tier 0).
pub fn tier(objects: u64) -> u32 {
    let mut tier = 0;
    let mut bound = FAN_IN;
    while objects >= bound {
        tier += 1;
        match bound.checked_mul(FAN_IN) {
            Some(next) => bound = next,
            None => break,
        }
    }
    tier
}

/// Which packs to merge, given each pack's object count (any order; kept
/// packs left out by the caller): the positions of every pack of the lowest
/// tier that holds at least [`FAN_IN`] packs, or `None` when no tier does.
/// Merged packs land a tier higher (`FAN_IN` packs of tier t hold at least
/// `FAN_IN^(t+1)` objects), so asking again after each merge cascades.
pub fn rollup(objects: &[u64]) -> Option<Vec<usize>> {
    let mut tiers: Vec<u32> = objects.iter().map(|&n| tier(n)).collect();
    tiers.sort_unstable();
    tiers.dedup();
    tiers.into_iter().find_map(|t| {
        let members: Vec<usize> = (0..objects.len()).filter(|&i| tier(objects[i]) == t).collect();
        (members.len() as u64 >= FAN_IN).then_some(members)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: u64 = FAN_IN;

    #[test]
    fn tiers_are_powers_of_the_fan_in() {
        assert_eq!(tier(0), 0);
        assert_eq!(tier(F - 1), 0);
        assert_eq!(tier(F), 1);
        assert_eq!(tier(F * F - 1), 1);
        assert_eq!(tier(F * F), 2);
        assert_eq!(tier(u64::MAX), (u64::MAX.ilog2() / F.ilog2()));
    }

    #[test]
    fn fewer_than_fan_in_packs_of_a_tier_stay() {
        let n = F as usize;
        assert_eq!(rollup(&[]), None);
        assert_eq!(rollup(&vec![1_000; n - 1]), None);
        // FAN_IN packs, but no tier holds FAN_IN.
        let mut packs = vec![1_000; n - 1];
        packs.insert(0, 1_000 * F * F);
        assert_eq!(rollup(&packs), None);
    }

    #[test]
    fn a_full_tier_merges_and_only_that_tier() {
        let n = F as usize;
        let mut packs = vec![1_000 * F * F];
        packs.extend(vec![1_000; n]);
        packs.push(1);
        assert_eq!(rollup(&packs), Some((1..=n).collect()));
    }

    #[test]
    fn the_lowest_full_tier_goes_first() {
        let n = F as usize;
        let mut packs = vec![1_000 * F; n];
        packs.extend(vec![1_000; n]);
        assert_eq!(rollup(&packs), Some((n..2 * n).collect()));
    }

    /// A steady stream of equal windows (500 changes: 1,150 objects), merged
    /// as the rule says after each: the packs stay few, and each object is
    /// rewritten about once per tier it climbs.
    #[test]
    fn a_steady_stream_keeps_few_packs_and_rewrites_each_object_a_few_times() {
        let window = 1_150;
        let windows = 6_000; // 500 changes/s for 100 minutes
        let mut packs: Vec<u64> = vec![100_000];
        let mut rewritten = 0;
        let mut most = 0;
        for _ in 0..windows {
            packs.push(window);
            while let Some(merge) = rollup(&packs) {
                let merged: u64 = merge.iter().map(|&i| packs[i]).sum();
                assert!(tier(merged) > tier(packs[merge[0]]), "a merge climbs a tier");
                rewritten += merged;
                packs = packs.iter().enumerate().filter(|(i, _)| !merge.contains(i)).map(|(_, &n)| n).collect();
                packs.push(merged);
            }
            most = most.max(packs.len());
        }
        let written = window * windows;
        let climbs = f64::from(tier(written) - tier(window));
        let times = rewritten as f64 / written as f64;
        assert!(most < 3 * F as usize, "at most {most} packs");
        assert!(times <= climbs + 0.1, "each object rewritten {times:.1} times, for {climbs} climbs");
    }
}
