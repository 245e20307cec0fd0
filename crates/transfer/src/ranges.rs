//! A compact set of chunk indices, kept as sorted, disjoint, non-adjacent half-open ranges.
//!
//! Resume state is "which chunks of this file are verified": for a 1 TiB file of 1 MiB chunks that is a
//! million indices, but in practice a few runs (everything before the crash point, plus the chunks other
//! streams had finished). Ranges keep the journal replay, the `Have` message and the scheduler's to-do
//! list proportional to the number of gaps, not the number of chunks.
//!
//! On the wire a set is a JSON array of `[start, end]` pairs (half-open). Deserialisation validates that
//! the pairs are non-empty, sorted and neither overlap nor touch, so a hostile peer cannot hand the
//! scheduler a set whose `len` or `contains` would lie.

use serde::{Deserialize, Serialize};

/// A set of `u64` indices as sorted, disjoint, non-adjacent half-open ranges `[start, end)`.
/// Indices are below `u64::MAX` (an end of 2^64 is not representable); chunk indices are below 2^30.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<[u64; 2]>", into = "Vec<[u64; 2]>")]
pub struct RangeSet {
    ranges: Vec<(u64, u64)>,
}

/// A list of pairs that is not a valid [`RangeSet`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid range list: {0}")]
pub struct RangeError(&'static str);

impl RangeSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The set `[0, total)`.
    pub fn full(total: u64) -> Self {
        let mut s = Self::new();
        s.insert_range(0, total);
        s
    }

    /// Adds one index; returns whether it was new.
    pub fn insert(&mut self, i: u64) -> bool {
        if self.contains(i) {
            return false;
        }
        debug_assert!(i < u64::MAX, "index u64::MAX is not representable");
        self.insert_range(i, i.saturating_add(1));
        true
    }

    /// Adds every index in `[start, end)` (nothing if `end <= start`).
    pub fn insert_range(&mut self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        // First range that ends at or after `start` (it may touch or overlap the new one).
        let lo = self.ranges.partition_point(|&(_, e)| e < start);
        // First range that starts strictly after `end` (neither overlaps nor touches).
        let hi = self.ranges.partition_point(|&(s, _)| s <= end);
        if lo == hi {
            self.ranges.insert(lo, (start, end));
            return;
        }
        let merged = (start.min(self.ranges[lo].0), end.max(self.ranges[hi - 1].1));
        self.ranges.splice(lo..hi, [merged]);
    }

    /// Removes one index; returns whether it was present.
    pub fn remove(&mut self, i: u64) -> bool {
        let k = self.ranges.partition_point(|&(_, e)| e <= i);
        match self.ranges.get(k) {
            Some(&(s, e)) if s <= i => {
                match (s == i, e == i + 1) {
                    (true, true) => {
                        self.ranges.remove(k);
                    }
                    (true, false) => self.ranges[k].0 = i + 1,
                    (false, true) => self.ranges[k].1 = i,
                    (false, false) => {
                        self.ranges[k].1 = i;
                        self.ranges.insert(k + 1, (i + 1, e));
                    }
                }
                true
            }
            _ => false,
        }
    }

    /// Removes and returns the smallest index.
    pub fn pop_first(&mut self) -> Option<u64> {
        let first = self.ranges.first()?.0;
        self.remove(first);
        Some(first)
    }

    /// Whether `i` is in the set.
    pub fn contains(&self, i: u64) -> bool {
        let k = self.ranges.partition_point(|&(_, e)| e <= i);
        self.ranges.get(k).is_some_and(|&(s, _)| s <= i)
    }

    /// Number of indices in the set.
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|&(s, e)| e - s).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The half-open ranges, ascending.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().copied()
    }

    /// Number of ranges (the size of the compact form).
    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }

    /// Largest index plus one (0 for the empty set).
    pub fn end(&self) -> u64 {
        self.ranges.last().map_or(0, |&(_, e)| e)
    }

    /// The indices in `[0, total)` that are not in the set, ascending.
    pub fn missing(&self, total: u64) -> impl Iterator<Item = u64> + '_ {
        self.missing_ranges(total).flat_map(|(s, e)| s..e)
    }

    /// The gaps of the set within `[0, total)`, as half-open ranges, ascending.
    pub fn missing_ranges(&self, total: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut cursor = 0u64;
        let mut inner = self.ranges.iter();
        std::iter::from_fn(move || {
            loop {
                if cursor >= total {
                    return None;
                }
                match inner.next() {
                    Some(&(s, e)) => {
                        let gap = (cursor, s.min(total));
                        cursor = e;
                        if gap.0 < gap.1 {
                            return Some(gap);
                        }
                    }
                    None => {
                        let gap = (cursor, total);
                        cursor = total;
                        return Some(gap);
                    }
                }
            }
        })
    }
}

impl TryFrom<Vec<[u64; 2]>> for RangeSet {
    type Error = RangeError;

    fn try_from(pairs: Vec<[u64; 2]>) -> Result<Self, RangeError> {
        let mut ranges = Vec::with_capacity(pairs.len());
        let mut prev_end: Option<u64> = None;
        for [s, e] in pairs {
            if s >= e {
                return Err(RangeError("a range [start, end) must have start < end"));
            }
            if prev_end.is_some_and(|p| s <= p) {
                return Err(RangeError(
                    "ranges must be ascending and neither overlap nor touch",
                ));
            }
            prev_end = Some(e);
            ranges.push((s, e));
        }
        Ok(Self { ranges })
    }
}

impl From<RangeSet> for Vec<[u64; 2]> {
    fn from(set: RangeSet) -> Self {
        set.ranges.into_iter().map(|(s, e)| [s, e]).collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// xorshift64: a seeded PRNG for property-style tests without new dependencies.
    pub(crate) struct Rng(pub(crate) u64);

    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        pub(crate) fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn check_invariants(s: &RangeSet) {
        for w in s.ranges.windows(2) {
            assert!(w[0].1 < w[1].0, "ranges touch or overlap: {:?}", s.ranges);
        }
        for &(a, b) in &s.ranges {
            assert!(a < b, "empty range in {:?}", s.ranges);
        }
    }

    #[test]
    fn matches_a_reference_set_under_random_operations() {
        let mut rng = Rng(0x5EED_1234_ABCD_0001);
        for _ in 0..200 {
            let mut s = RangeSet::new();
            let mut reference = BTreeSet::new();
            let universe = 1 + rng.below(200);
            for _ in 0..300 {
                let i = rng.below(universe);
                match rng.below(4) {
                    0 => assert_eq!(s.insert(i), reference.insert(i)),
                    1 => assert_eq!(s.remove(i), reference.remove(&i)),
                    2 => {
                        let e = i + rng.below(10);
                        s.insert_range(i, e);
                        reference.extend(i..e);
                    }
                    _ => assert_eq!(s.pop_first(), reference.pop_first()),
                }
                check_invariants(&s);
            }
            assert_eq!(s.len(), reference.len() as u64);
            for i in 0..universe + 5 {
                assert_eq!(s.contains(i), reference.contains(&i), "index {i}");
            }
            let total = rng.below(universe + 10);
            let missing: Vec<u64> = s.missing(total).collect();
            let expect: Vec<u64> = (0..total).filter(|i| !reference.contains(i)).collect();
            assert_eq!(missing, expect, "missing({total}) of {:?}", s.ranges);
        }
    }

    #[test]
    fn adjacent_inserts_merge_into_one_range() {
        let mut s = RangeSet::new();
        for i in [3, 1, 2, 0, 5, 4] {
            s.insert(i);
        }
        assert_eq!(s.ranges().collect::<Vec<_>>(), vec![(0, 6)]);
        assert_eq!(s.range_count(), 1);
        assert_eq!(s.end(), 6);
    }

    #[test]
    fn full_and_missing_ranges() {
        let mut s = RangeSet::full(10);
        s.remove(4);
        s.remove(7);
        assert_eq!(
            s.missing_ranges(12).collect::<Vec<_>>(),
            vec![(4, 5), (7, 8), (10, 12)]
        );
        assert_eq!(s.missing_ranges(6).collect::<Vec<_>>(), vec![(4, 5)]);
        assert!(RangeSet::full(0).is_empty());
    }

    #[test]
    fn serde_round_trips_and_rejects_malformed_lists() {
        let mut s = RangeSet::new();
        s.insert_range(0, 3);
        s.insert_range(10, 11);
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, "[[0,3],[10,11]]");
        assert_eq!(serde_json::from_str::<RangeSet>(&json).unwrap(), s);
        for bad in [
            "[[3,3]]",
            "[[5,2]]",
            "[[0,3],[3,4]]",
            "[[0,5],[2,8]]",
            "[[10,11],[0,3]]",
        ] {
            assert!(
                serde_json::from_str::<RangeSet>(bad).is_err(),
                "{bad} accepted"
            );
        }
    }
}
