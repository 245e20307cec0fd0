//! Striped transfers: one dataset moved over several host pairs at once, senders sharing the source
//! storage and receivers sharing the destination (`longhaul copy --stripe`, docs/fleet.md).
//!
//! Every pair runs an ordinary transfer of the *whole* manifest, told which [`Stripe`] it is. The
//! manifest's chunks are numbered in one sequence (files in manifest order, each file's chunks in
//! order; an empty file counts as one unit) and unit `u` belongs to stripe `u mod count`
//! ([`Assignment`]): small files spread over the pairs whole, large files are split chunk by chunk.
//! Both ends of a pair compute the same assignment from the same manifest: the sender sends only its
//! stripe's chunks, the receiver refuses any other.
//!
//! Nothing a receiver keeps depends on the striping. Chunks are the transfer's chunks (one chunk size
//! for all stripes), so the file digest is the unstriped one; the temporary of a file is named by the
//! file's identity (`journal::temp_path`), so every receiver writes the same one; each stripe keeps
//! its own journal ([`journal_name`]), and a rerun (striped any way, or not at all) replays all of
//! them. A stripe re-checks the chunks those journals claim for it, records them in its own journal,
//! and receives the rest; the stripe that ends last puts the files in place (the engine's
//! `transfer::stripes`).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::digest::{hex_bytes, to_hex};
use crate::manifest::{EntryKind, ManifestEntry, check_chunk_size};
use crate::ranges::RangeSet;
use crate::reserved::JOURNAL_NAME;

/// Most stripes of one transfer.
pub const MAX_STRIPES: u32 = 64;

/// Which part of a striped transfer one pair moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stripe {
    /// The striped run this pair belongs to (16 random bytes from the controller; 32 hex digits):
    /// only journals of this run count when the files are put in place.
    pub run: RunId,
    /// This pair's index, below `count`.
    pub index: u32,
    /// Pairs in the run.
    pub count: u32,
    /// The run's chunk size (every pair uses the same).
    pub chunk_size: u64,
}

/// The name of a striped run.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(#[serde(with = "hex_bytes")] pub [u8; 16]);

impl std::fmt::Debug for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RunId({})", to_hex(&self.0))
    }
}

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&to_hex(&self.0))
    }
}

/// A stripe that breaks the rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad stripe: {0}")]
pub struct StripeError(String);

impl Stripe {
    /// Checks the bounds: 1 to [`MAX_STRIPES`] pairs, the index below the count, a valid chunk size.
    pub fn validate(&self) -> Result<(), StripeError> {
        if self.count == 0 || self.count > MAX_STRIPES {
            return Err(StripeError(format!(
                "{} pairs (1 to {MAX_STRIPES})",
                self.count
            )));
        }
        if self.index >= self.count {
            return Err(StripeError(format!(
                "index {} of {} pairs",
                self.index, self.count
            )));
        }
        check_chunk_size(self.chunk_size).map_err(|e| StripeError(e.to_string()))
    }

    /// The file name of this stripe's journal in the destination directory.
    pub fn journal_name(&self) -> String {
        journal_name(&self.run, self.index)
    }
}

/// The journal of stripe `index` of run `run`: `.longhaul-journal.<run>.<index>`.
pub fn journal_name(run: &RunId, index: u32) -> String {
    format!("{JOURNAL_NAME}.{run}.{index}")
}

/// The run and stripe index of a stripe journal's file name ([`journal_name`]).
pub fn parse_journal_name(name: &str) -> Option<(RunId, u32)> {
    let rest = name.strip_prefix(JOURNAL_NAME)?.strip_prefix('.')?;
    let (run, index) = rest.split_once('.')?;
    let run = crate::digest::parse_hex::<16>(run).ok()?;
    let canonical = index == "0" || !index.starts_with('0');
    if index.is_empty()
        || !index.bytes().all(|b| b.is_ascii_digit())
        || index.len() > 5
        || !canonical
    {
        return None;
    }
    Some((RunId(run), index.parse().ok()?))
}

/// Which chunks of which files each stripe moves, for one manifest and stripe count.
#[derive(Debug, Clone)]
pub struct Assignment {
    count: u32,
    /// Per file, in manifest order: its id, its first unit, its chunk count.
    files: Vec<(u32, u64, u64)>,
    /// Where each file id is in `files`.
    index: HashMap<u32, usize>,
}

impl Assignment {
    /// The assignment of `files` (id and chunk count, in manifest order) over `count` stripes.
    pub fn new(files: impl IntoIterator<Item = (u32, u64)>, count: u32) -> Self {
        let mut unit = 0u64;
        let files = files
            .into_iter()
            .map(|(id, chunks)| {
                let first = unit;
                unit = unit.saturating_add(chunks.max(1));
                (id, first, chunks)
            })
            .collect::<Vec<_>>();
        let index = files.iter().enumerate().map(|(i, f)| (f.0, i)).collect();
        Self {
            count: count.max(1),
            files,
            index,
        }
    }

    /// The assignment of the files of manifest `entries` (in manifest order), cut into chunks of
    /// `chunk_size`, over `count` stripes: what both ends of every pair and the finish compute.
    pub fn for_manifest(entries: &[ManifestEntry], chunk_size: u64, count: u32) -> Self {
        let files = entries.iter().filter_map(|e| match e.entry.kind {
            EntryKind::File { size } => Some((e.id, size.div_ceil(chunk_size))),
            _ => None,
        });
        Self::new(files, count)
    }

    /// The stripes that own part of file `id` (an empty file: the one that owns its unit).
    pub fn owners(&self, id: u32) -> Vec<u32> {
        let Some(&(_, first, chunks)) = self.index.get(&id).map(|&i| &self.files[i]) else {
            return Vec::new();
        };
        let n = chunks.max(1).min(u64::from(self.count));
        (0..n)
            .map(|i| ((first + i) % u64::from(self.count)) as u32)
            .collect()
    }

    /// The files stripe `index` owns part of, each with the chunks it moves (empty for an empty
    /// file), in manifest order.
    pub fn of(&self, index: u32) -> Vec<(u32, RangeSet)> {
        let n = u64::from(self.count);
        let k = u64::from(index);
        let mut out = Vec::new();
        for &(id, first, chunks) in &self.files {
            let units = chunks.max(1);
            // The first unit of this file that is ours.
            let skip = (k + n - first % n) % n;
            if skip >= units {
                continue;
            }
            let mut set = RangeSet::new();
            let mut i = skip;
            while i < chunks {
                set.insert(i);
                i += n;
            }
            out.push((id, set));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_has_exactly_one_owner() {
        // Files of 0, 1, 3, 10 and 2 chunks over 1 to 5 stripes.
        let files = [(0u32, 0u64), (1, 1), (2, 3), (3, 10), (4, 2)];
        for count in 1..=5 {
            let a = Assignment::new(files, count);
            let parts: Vec<_> = (0..count).map(|k| a.of(k)).collect();
            for &(id, chunks) in &files {
                let holders: Vec<u32> = (0..count)
                    .filter(|&k| parts[k as usize].iter().any(|(f, _)| *f == id))
                    .collect();
                let mut owners = a.owners(id);
                owners.sort_unstable();
                assert_eq!(holders, owners, "file {id} over {count}");
                for c in 0..chunks {
                    let n = parts
                        .iter()
                        .filter(|p| p.iter().any(|(f, s)| *f == id && s.contains(c)))
                        .count();
                    assert_eq!(n, 1, "chunk {c} of file {id} over {count} stripes");
                }
                if chunks == 0 {
                    assert_eq!(holders.len(), 1, "an empty file has one owner");
                }
            }
        }
    }

    #[test]
    fn a_large_file_is_split_evenly_and_small_files_spread_whole() {
        let a = Assignment::new([(7u32, 1000u64)], 4);
        for k in 0..4 {
            let part = a.of(k);
            assert_eq!(part.len(), 1);
            assert_eq!(part[0].1.len(), 250);
        }
        let small: Vec<(u32, u64)> = (0..9).map(|i| (i, 1)).collect();
        let a = Assignment::new(small, 3);
        for k in 0..3 {
            assert_eq!(a.of(k).len(), 3);
        }
        // What stripe 2 of 3 held, rerun over 2 stripes, is split between them.
        let a3 = Assignment::new([(0u32, 300u64)], 3);
        let a2 = Assignment::new([(0u32, 300u64)], 2);
        let lost = &a3.of(2)[0].1;
        let first = a2.of(0)[0].1.clone();
        let over_first = (0..300)
            .filter(|&c| lost.contains(c) && first.contains(c))
            .count();
        assert_eq!(over_first, 50);
    }

    #[test]
    fn stripes_are_bounded_and_journal_names_round_trip() {
        let s = Stripe {
            run: RunId([0xab; 16]),
            index: 2,
            count: 3,
            chunk_size: 1 << 20,
        };
        assert!(s.validate().is_ok());
        assert_eq!(parse_journal_name(&s.journal_name()), Some((s.run, 2)));
        for bad in [
            Stripe { index: 3, ..s },
            Stripe {
                count: 0,
                index: 0,
                ..s
            },
            Stripe {
                count: MAX_STRIPES + 1,
                ..s
            },
            Stripe {
                chunk_size: 12345,
                ..s
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
        for name in [
            ".longhaul-journal",
            ".longhaul-journal.",
            ".longhaul-journal.abab.1",
            ".longhaul-journal.abababababababababababababababab.",
            ".longhaul-journal.abababababababababababababababab.1x",
            ".longhaul-journal.abababababababababababababababab.01",
        ] {
            assert_eq!(parse_journal_name(name), None, "{name}");
        }
    }
}
