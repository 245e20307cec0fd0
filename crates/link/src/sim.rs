//! A deterministic virtual-time driver for the link model: the test and
//! benchmark half of "one link model, two drivers" (neqo's
//! `test-fixture/src/sim`, smoltcp's `tests/netsim.rs`).
//!
//! Contract: nothing here reads a clock. [`run`] feeds a time-ordered list
//! of [`Offer`]s to a [`Link`] and returns every segment's fate with its
//! record, index and wire size, deliveries sorted by release time (stable,
//! so equal times keep decision order). [`paced`] and [`burst`] build offer
//! patterns; [`Aimd`] is a closed-loop, Reno-like window flow (slow start,
//! +1 segment per RTT, halve once per RTT on loss) for experiments that need
//! a responsive sender, such as watching CoDel bring a standing queue down.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use longhaul_units::Nanos;

use crate::link::Link;
use crate::record::{DropCause, Record, RecordError, SegmentFate, What};

/// A record offered to the link at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    /// Arrival time.
    pub at: Nanos,
    /// The record.
    pub record: Record,
}

/// A delivered segment (or duplicate copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    /// The record's id.
    pub record: u64,
    /// Segment index in the record.
    pub segment: u32,
    /// When the record arrived.
    pub sent: Nanos,
    /// Release time.
    pub at: Nanos,
    /// IP bytes of the segment.
    pub bytes: u32,
    /// True for a duplicate copy.
    pub duplicate: bool,
    /// True when it arrives damaged (the receiver's checksum drops it).
    pub corrupt: bool,
}

/// A dropped segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    /// The record's id.
    pub record: u64,
    /// Segment index in the record.
    pub segment: u32,
    /// When the record arrived.
    pub sent: Nanos,
    /// Why.
    pub cause: DropCause,
}

/// Everything that happened in a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// Deliveries, sorted by release time (stable).
    pub delivered: Vec<Delivered>,
    /// Drops, in decision order.
    pub dropped: Vec<Dropped>,
}

impl Trace {
    fn record(&mut self, sent: Nanos, rec: &Record, segs: &[SegmentFate]) {
        for s in segs {
            match s.what {
                What::Deliver { at, .. }
                | What::Duplicate { at, .. }
                | What::Corrupt { at, .. } => {
                    self.delivered.push(Delivered {
                        record: rec.id,
                        segment: s.index,
                        sent,
                        at,
                        bytes: rec.segment_bytes(s.index),
                        duplicate: matches!(s.what, What::Duplicate { .. }),
                        corrupt: matches!(s.what, What::Corrupt { .. }),
                    });
                }
                What::Drop { cause } => self.dropped.push(Dropped {
                    record: rec.id,
                    segment: s.index,
                    sent,
                    cause,
                }),
            }
        }
    }
}

/// Feeds `offers` (in time order) to `link` and collects the fates.
pub fn run(link: &mut Link, offers: impl IntoIterator<Item = Offer>) -> Result<Trace, RecordError> {
    let mut trace = Trace::default();
    let mut segs = Vec::new();
    for o in offers {
        segs.clear();
        link.arrive_each(o.at, &o.record, &mut segs)?;
        trace.record(o.at, &o.record, &segs);
    }
    trace.delivered.sort_by_key(|d| d.at);
    Ok(trace)
}

/// `count` copies of `template` (ids 0, 1, …) offered from `start` at
/// `rate_bps`, counting the records' IP bytes: record k arrives at
/// `start + k·bytes·8/rate` (rounded down to the nanosecond).
pub fn paced(start: Nanos, rate_bps: u64, count: u64, template: Record) -> Vec<Offer> {
    let bytes = u128::from(template.segments) * u128::from(template.header_bytes)
        + u128::from(template.payload);
    (0..count)
        .map(|k| Offer {
            at: start
                + Nanos(
                    (u128::from(k) * bytes * 8_000_000_000 / u128::from(rate_bps.max(1))) as u64,
                ),
            record: Record { id: k, ..template },
        })
        .collect()
}

/// `count` copies of `template` (ids 0, 1, …) all offered at `at`.
pub fn burst(at: Nanos, count: u64, template: Record) -> Vec<Offer> {
    (0..count)
        .map(|k| Offer {
            at,
            record: Record { id: k, ..template },
        })
        .collect()
}

/// A closed-loop bulk flow of one-segment records over `link`, Reno-like:
/// slow start from 10 segments, then +1 segment per window of ACKs; on a
/// loss, learnt one base RTT after the send, the window halves (at most once
/// per RTT). ACKs return `return_delay` after release.
#[derive(Debug, Clone)]
pub struct Aimd {
    /// Segment IP size (headers included).
    pub segment_bytes: u32,
    /// Header bytes within `segment_bytes`.
    pub header_bytes: u32,
    /// Delay of the ACK path.
    pub return_delay: Nanos,
    /// Base RTT used to time loss detection.
    pub base_rtt: Nanos,
}

/// One sample of the [`Aimd`] flow: a delivered segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowSample {
    /// When it was sent.
    pub sent: Nanos,
    /// When it was released by the link.
    pub released: Nanos,
}

/// What an [`Aimd`] run observed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowTrace {
    /// Delivered segments in send order.
    pub samples: Vec<FlowSample>,
    /// Segments lost, with the send time and cause.
    pub losses: Vec<(Nanos, DropCause)>,
    /// Send times of the segments delivered damaged (lost to the receiver's checksum).
    pub corrupted: Vec<Nanos>,
}

impl Aimd {
    /// Runs the flow over `link` from time zero until `until`.
    pub fn run(&self, link: &mut Link, until: Nanos) -> Result<FlowTrace, RecordError> {
        #[derive(PartialEq, Eq, PartialOrd, Ord)]
        enum Ev {
            Ack,
            Loss,
        }
        let rec = Record::single(0, self.header_bytes, self.segment_bytes - self.header_bytes);
        let mut events: BinaryHeap<Reverse<(Nanos, Ev)>> = BinaryHeap::new();
        let mut trace = FlowTrace::default();
        let mut cwnd = 10.0_f64;
        let mut ssthresh = f64::INFINITY;
        let mut in_flight = 0u64;
        let mut recover_until = Nanos::ZERO;
        let mut now = Nanos::ZERO;
        let mut segs = Vec::new();
        let mut id = 0u64;
        while now < until {
            while (in_flight as f64) < cwnd {
                segs.clear();
                link.arrive_each(now, &Record { id, ..rec }, &mut segs)?;
                id += 1;
                in_flight += 1;
                for s in &segs {
                    match s.what {
                        What::Deliver { at, .. } => {
                            trace.samples.push(FlowSample {
                                sent: now,
                                released: at,
                            });
                            events.push(Reverse((at + self.return_delay, Ev::Ack)));
                        }
                        What::Duplicate { .. } => {}
                        What::Corrupt { .. } => {
                            trace.corrupted.push(now);
                            events.push(Reverse((now + self.base_rtt, Ev::Loss)));
                        }
                        What::Drop { cause } => {
                            trace.losses.push((now, cause));
                            events.push(Reverse((now + self.base_rtt, Ev::Loss)));
                        }
                    }
                }
            }
            let Some(Reverse((t, ev))) = events.pop() else {
                break;
            };
            now = t;
            in_flight -= 1;
            match ev {
                Ev::Ack if cwnd < ssthresh => cwnd += 1.0,
                Ev::Ack => cwnd += 1.0 / cwnd,
                Ev::Loss => {
                    if now >= recover_until {
                        cwnd = (cwnd / 2.0).max(2.0);
                        ssthresh = cwnd;
                        recover_until = now + self.base_rtt;
                    }
                }
            }
        }
        Ok(trace)
    }
}
