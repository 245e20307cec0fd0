//! The model's input and output units: a [`Record`] (a GSO super-packet
//! described without its bytes) and the fates of its segments.
//!
//! Contract: the model impairs per TCP segment even when the kernel hands
//! over 64 KB super-packets (GSO, `IFF_VNET_HDR`), so a record is a
//! list of segments, segment `i` carrying `min(mss, payload − i·mss)` payload
//! bytes behind a copy of the same headers. Output is either exact
//! per-segment fates ([`SegmentFate`]) or runs of consecutive segment indices
//! that share a fate ([`Fate`]), which tell the emulator where to split or
//! truncate the super-packet: a run is the unit it writes back.

use longhaul_units::Nanos;
use serde::Serialize;

/// One IP packet as read from the TUN device, possibly a GSO super-packet of
/// `segments` TCP/UDP segments. Described by sizes only: the model never sees
/// bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Record {
    /// The caller's handle, echoed nowhere by the model (fates are returned
    /// per call) but useful to drivers.
    pub id: u64,
    /// Flow hash (5-tuple), for per-flow stages.
    pub flow: u64,
    /// Number of segments, ≥ 1.
    pub segments: u32,
    /// IP + transport header bytes repeated on every segment on the wire.
    pub header_bytes: u32,
    /// Total payload bytes over all segments.
    pub payload: u32,
    /// Payload bytes per full segment; the last segment may be shorter.
    pub mss: u32,
}

/// A record whose sizes do not describe segments, or an arrival out of time
/// order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// `segments` is zero.
    #[error("record {0}: zero segments")]
    NoSegments(u64),
    /// `payload` does not split into `segments` segments of at most `mss`
    /// bytes with only the last one short (and non-empty when there are
    /// several).
    #[error(
        "record {id}: payload {payload} B does not split into {segments} segments of mss {mss} B"
    )]
    BadSplit {
        /// The record's id.
        id: u64,
        /// Its payload.
        payload: u32,
        /// Its segment count.
        segments: u32,
        /// Its mss.
        mss: u32,
    },
    /// `now` is earlier than a previous arrival's.
    #[error("arrival at {now} ns is earlier than the previous one at {last} ns")]
    TimeWentBackwards {
        /// This arrival's time, ns.
        now: u64,
        /// The latest previous arrival time, ns.
        last: u64,
    },
}

impl Record {
    /// A record of one segment carrying `payload` bytes.
    pub fn single(id: u64, header_bytes: u32, payload: u32) -> Self {
        Self {
            id,
            flow: 0,
            segments: 1,
            header_bytes,
            payload,
            mss: payload,
        }
    }

    /// Checks that the sizes describe `segments` segments: all but the last
    /// carry exactly `mss` bytes, the last between 1 and `mss` (a single
    /// segment may be empty, a pure ACK).
    pub fn check(&self) -> Result<(), RecordError> {
        if self.segments == 0 {
            return Err(RecordError::NoSegments(self.id));
        }
        let full = u64::from(self.segments - 1) * u64::from(self.mss);
        let payload = u64::from(self.payload);
        let ok = if self.segments == 1 {
            payload <= u64::from(self.mss)
        } else {
            payload > full && payload <= full + u64::from(self.mss)
        };
        if ok {
            Ok(())
        } else {
            Err(RecordError::BadSplit {
                id: self.id,
                payload: self.payload,
                segments: self.segments,
                mss: self.mss,
            })
        }
    }

    /// Payload bytes of segment `i` (0-based): `min(mss, payload − i·mss)`.
    pub fn segment_payload(&self, i: u32) -> u32 {
        let before = u64::from(i) * u64::from(self.mss);
        (u64::from(self.payload).saturating_sub(before)).min(u64::from(self.mss)) as u32
    }

    /// IP bytes of segment `i`: headers plus its payload.
    pub fn segment_bytes(&self, i: u32) -> u32 {
        self.header_bytes + self.segment_payload(i)
    }

    /// Segment `i` as a one-segment record with the same id and flow: what
    /// the per-segment reference model is fed.
    pub fn segment(&self, i: u32) -> Self {
        Self {
            segments: 1,
            payload: self.segment_payload(i),
            mss: self.mss,
            ..*self
        }
    }
}

/// Why a segment was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum DropCause {
    /// The bottleneck queue was full (drop-tail).
    Queue,
    /// Bernoulli random loss.
    Random,
    /// Gilbert–Elliott burst loss.
    Burst,
    /// The AQM (CoDel) chose it.
    Aqm,
}

/// What happens to a segment, or to a run of segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum What {
    /// Delivered; `at` is the release time of the run's last segment (of the
    /// segment, for a [`SegmentFate`]) and `from` that of its first. Segments
    /// in between are released in order between the two, spaced by their
    /// serialization at the bottleneck; an emulator that writes the run as
    /// one packet at `at` is late by at most `at − from` and never early.
    Deliver {
        /// Release time of the first segment.
        from: Nanos,
        /// Release time of the last segment.
        at: Nanos,
    },
    /// A duplicate copy (stage 6), released like [`What::Deliver`] right
    /// after the original.
    Duplicate {
        /// Release time of the first segment.
        from: Nanos,
        /// Release time of the last segment.
        at: Nanos,
    },
    /// Delivered with damaged bytes (stage 7, [`crate::LinkConfig::corrupt`]): released like
    /// [`What::Deliver`], and dropped by the receiver's checksum. A run of it is one segment.
    Corrupt {
        /// Release time of the segment.
        from: Nanos,
        /// The same.
        at: Nanos,
    },
    /// Dropped.
    Drop {
        /// Why.
        cause: DropCause,
    },
}

/// The exact fate of one segment (or, for a duplicate, of its copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct SegmentFate {
    /// Segment index within the record.
    pub index: u32,
    /// What happens to it; for deliveries `from == at`.
    pub what: What,
}

/// The fate of a run of consecutive segments `first .. first + count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Fate {
    /// First segment index.
    pub first: u32,
    /// Number of segments, ≥ 1.
    pub count: u32,
    /// What happens to all of them.
    pub what: What,
}

/// Merges per-segment fates (in the order [`crate::Link::arrive_each`]
/// produces them) into runs, appending to `out`.
///
/// Originals and duplicates form separate runs, in that order. Consecutive
/// indices join a run when both are dropped for the same cause, or both
/// delivered with the second released no earlier than the first and at most
/// `gap` after it (the caller passes one frame's serialization time, so a
/// record served back to back at the bottleneck is one run).
pub fn coalesce(segs: &[SegmentFate], gap: Nanos, out: &mut Vec<Fate>) {
    for want_dup in [false, true] {
        let mut cur: Option<Fate> = None;
        for s in segs {
            if matches!(s.what, What::Duplicate { .. }) != want_dup {
                continue;
            }
            if let Some(run) = cur.as_mut() {
                if run.first + run.count == s.index && joins(run.what, s.what, gap) {
                    run.count += 1;
                    run.what = extend(run.what, s.what);
                    continue;
                }
                out.push(*run);
            }
            cur = Some(Fate {
                first: s.index,
                count: 1,
                what: s.what,
            });
        }
        out.extend(cur);
    }
}

fn joins(run: What, next: What, gap: Nanos) -> bool {
    match (run, next) {
        (What::Drop { cause: a }, What::Drop { cause: b }) => a == b,
        (What::Deliver { at, .. }, What::Deliver { from, .. })
        | (What::Duplicate { at, .. }, What::Duplicate { from, .. }) => {
            from >= at && from - at <= gap
        }
        _ => false,
    }
}

fn extend(run: What, next: What) -> What {
    match (run, next) {
        (What::Deliver { from, .. }, What::Deliver { at, .. }) => What::Deliver { from, at },
        (What::Duplicate { from, .. }, What::Duplicate { at, .. }) => What::Duplicate { from, at },
        (w, _) => w,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(segments: u32, payload: u32, mss: u32) -> Record {
        Record {
            id: 1,
            flow: 0,
            segments,
            header_bytes: 52,
            payload,
            mss,
        }
    }

    #[test]
    fn segment_sizes_and_checks() {
        let r = rec(3, 3000, 1448);
        r.check().unwrap();
        assert_eq!(
            (0..3).map(|i| r.segment_payload(i)).collect::<Vec<_>>(),
            [1448, 1448, 104]
        );
        assert_eq!(r.segment(2).payload, 104);
        assert_eq!(r.segment_bytes(0), 1500);
        assert!(rec(3, 2896, 1448).check().is_err());
        assert!(rec(3, 4345, 1448).check().is_err());
        assert!(rec(0, 0, 1448).check().is_err());
        rec(1, 0, 1448).check().unwrap();
        rec(3, 4344, 1448).check().unwrap();
    }

    #[test]
    fn coalesces_runs() {
        let d = |i, t| SegmentFate {
            index: i,
            what: What::Deliver {
                from: Nanos(t),
                at: Nanos(t),
            },
        };
        let x = |i, cause| SegmentFate {
            index: i,
            what: What::Drop { cause },
        };
        let dup = |i, t| SegmentFate {
            index: i,
            what: What::Duplicate {
                from: Nanos(t),
                at: Nanos(t),
            },
        };
        let segs = [
            d(0, 10),
            d(1, 20),
            dup(1, 20),
            d(2, 30),
            dup(2, 30),
            x(3, DropCause::Queue),
            x(4, DropCause::Queue),
            d(5, 500),
        ];
        let mut out = Vec::new();
        coalesce(&segs, Nanos(10), &mut out);
        let deliver = |from, at| What::Deliver {
            from: Nanos(from),
            at: Nanos(at),
        };
        assert_eq!(
            out,
            [
                Fate {
                    first: 0,
                    count: 3,
                    what: deliver(10, 30)
                },
                Fate {
                    first: 3,
                    count: 2,
                    what: What::Drop {
                        cause: DropCause::Queue
                    }
                },
                Fate {
                    first: 5,
                    count: 1,
                    what: deliver(500, 500)
                },
                Fate {
                    first: 1,
                    count: 2,
                    what: What::Duplicate {
                        from: Nanos(20),
                        at: Nanos(30)
                    }
                },
            ]
        );
    }
}
