//! One direction of a path: the stages in order, per segment.
//!
//! Contract: [`Link::arrive_each`] takes a record arriving at `now` (times
//! must not decrease between calls) and decides every segment in index
//! order, each through loss → cross traffic → bottleneck (drop-tail, CoDel)
//! → delay and jitter → reordering → duplication → corruption. All state (Markov chain,
//! queue, CoDel, FIFO clamp, random streams) advances once per segment and
//! the stages draw a fixed number of random values per segment, so a record
//! of N segments gets exactly the fates its N segments would get as N
//! one-segment records arriving at the same time. That equivalence is what
//! lets the emulator keep super-packets whole and split them lazily (only where
//! fates differ); `tests/equivalence.rs` checks it over many random
//! configurations.
//!
//! Release time of a delivered segment: `depart + D + jitter`, then (unless
//! `jitter_reorders`) clamped to be no earlier than the previous in-order
//! release, then `+ hold` for a displaced segment (which does not move the
//! clamp). Duplicates are released at the same time as their original.

use longhaul_units::Nanos;
use serde::{Deserialize, Serialize};

use crate::codel::Codel;
use crate::config::{Aqm, ConfigError, Jitter, LinkConfig, Loss};
use crate::queue::{Admit, Burst, Queue, units_to_bytes};
use crate::record::{DropCause, Fate, Record, RecordError, SegmentFate, What, coalesce};
use crate::rng::{
    STREAM_CORRUPT, STREAM_DUPLICATE, STREAM_JITTER, STREAM_LOSS, STREAM_REORDER, StageRng,
};

/// Per-direction counters (ARCHITECTURE.md: fidelity self-checks need drops
/// by cause and queue occupancy). Segment counts are per segment, so they do
/// not depend on how segments were grouped into records.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkStats {
    /// The seed this direction ran with (replay it with the same config).
    pub seed: u64,
    /// Records offered.
    pub records: u64,
    /// Segments offered.
    pub segments: u64,
    /// IP bytes offered (headers + payload).
    pub bytes: u64,
    /// Segments delivered (originals; duplicates counted apart).
    pub delivered: u64,
    /// IP bytes delivered (originals).
    pub delivered_bytes: u64,
    /// Segments dropped because the queue was full.
    pub drop_queue: u64,
    /// Segments dropped by Bernoulli loss.
    pub drop_random: u64,
    /// Segments dropped by Gilbert–Elliott loss.
    pub drop_burst: u64,
    /// Segments dropped by the AQM.
    pub drop_aqm: u64,
    /// Duplicate copies delivered.
    pub duplicates: u64,
    /// Segments displaced by the reordering stage.
    pub reordered: u64,
    /// Segments delivered damaged (counted in `delivered` too).
    #[serde(default)]
    pub corrupted: u64,
    /// Largest backlog after admitting a segment, bytes.
    pub queue_max_bytes: u64,
    /// Mean backlog seen by arriving segments (arrival-sampled, bytes).
    pub queue_mean_bytes: f64,
    /// Virtual cross-traffic bytes offered to the bottleneck.
    pub cross_bytes: u64,
    /// Virtual cross-traffic bytes dropped by the full queue.
    pub cross_dropped_bytes: u64,
}

/// Random loss state.
#[derive(Debug, Clone)]
struct LossState {
    model: Loss,
    bad: bool,
    rng: StageRng,
}

impl LossState {
    /// The loss verdict for the next segment.
    fn next(&mut self) -> Option<DropCause> {
        match self.model {
            Loss::None => None,
            Loss::Bernoulli { p } => self.rng.chance(p).then_some(DropCause::Random),
            Loss::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => {
                let lose = self
                    .rng
                    .chance(if self.bad { one_minus_h } else { one_minus_k });
                let flip = self.rng.chance(if self.bad { r } else { p });
                self.bad ^= flip;
                lose.then_some(DropCause::Burst)
            }
        }
    }
}

/// The link model of one direction. See the module docs for the contract.
#[derive(Debug, Clone)]
pub struct Link {
    cfg: LinkConfig,
    propagation: Nanos,
    overhead: u64,
    max_frame: u64,
    loss: LossState,
    queue: Option<Queue>,
    codel: Option<Codel>,
    jitter_rng: StageRng,
    reorder_rng: StageRng,
    dup_rng: StageRng,
    corrupt_rng: StageRng,
    last_now: Nanos,
    last_release: Nanos,
    run_gap: Nanos,
    backlog_sum: u128,
    backlog_samples: u64,
    stats: LinkStats,
    scratch: Vec<SegmentFate>,
}

impl Link {
    /// A link in its initial state (empty queue, good loss state) after
    /// validating `cfg`.
    pub fn new(cfg: LinkConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let seed = cfg.seed;
        let queue = cfg
            .bottleneck
            .as_ref()
            .map(|b| Queue::new(b, cfg.cross.as_ref(), seed));
        let codel = match cfg.bottleneck.map(|b| b.aqm) {
            Some(Aqm::Codel { target, interval }) => Some(Codel::new(target, interval)),
            _ => None,
        };
        let max_frame = cfg.max_frame();
        let run_gap = queue
            .as_ref()
            .map_or(Nanos::ZERO, |q| q.serialization(max_frame));
        Ok(Self {
            propagation: cfg.propagation(),
            overhead: cfg
                .bottleneck
                .map_or(0, |b| u64::from(b.overhead_per_frame)),
            max_frame,
            loss: LossState {
                model: cfg.loss,
                bad: false,
                rng: StageRng::new(seed, STREAM_LOSS),
            },
            queue,
            codel,
            jitter_rng: StageRng::new(seed, STREAM_JITTER),
            reorder_rng: StageRng::new(seed, STREAM_REORDER),
            dup_rng: StageRng::new(seed, STREAM_DUPLICATE),
            corrupt_rng: StageRng::new(seed, STREAM_CORRUPT),
            last_now: Nanos::ZERO,
            last_release: Nanos::ZERO,
            run_gap,
            backlog_sum: 0,
            backlog_samples: 0,
            stats: LinkStats {
                seed,
                ..LinkStats::default()
            },
            scratch: Vec::new(),
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> LinkStats {
        let mut s = self.stats.clone();
        if self.backlog_samples > 0 {
            s.queue_mean_bytes = self.backlog_sum as f64 / self.backlog_samples as f64;
        }
        if let Some(q) = &self.queue {
            s.cross_bytes = units_to_bytes(q.cross_offered);
            s.cross_dropped_bytes = units_to_bytes(q.cross_dropped);
        }
        s
    }

    /// Bottleneck backlog in bytes at `now` (zero without a bottleneck), as
    /// of the last arrival: cross traffic is advanced only by arrivals.
    pub fn backlog_bytes(&self, now: Nanos) -> u64 {
        self.queue.as_ref().map_or(0, |q| q.backlog_bytes(now))
    }

    /// Schedules a burst of cross traffic on the bottleneck (e.g. the loss-recovery experiment's
    /// 2-s burst). Refused without a bottleneck or with an empty span.
    pub fn add_burst(&mut self, burst: Burst) -> Result<(), ConfigError> {
        let Some(q) = self.queue.as_mut() else {
            return Err(ConfigError {
                field: "cross.burst",
                reason: "a burst of cross traffic needs a bottleneck".into(),
            });
        };
        if burst.until <= burst.from || burst.rate_bps == 0 {
            return Err(ConfigError {
                field: "cross.burst",
                reason: format!(
                    "a burst needs a span and a rate, got {:?}..{:?} at {} bit/s",
                    burst.from, burst.until, burst.rate_bps
                ),
            });
        }
        q.add_burst(burst);
        Ok(())
    }

    /// Largest gap between consecutive releases that [`Link::arrive`] still
    /// merges into one run: one MTU frame's serialization time at the
    /// bottleneck (zero without one).
    pub fn run_gap(&self) -> Nanos {
        self.run_gap
    }

    /// Decides the segments of `rec` arriving at `now`, appending one
    /// [`SegmentFate`] per segment in index order (and one more, right after
    /// it, per duplicate) to `out`.
    pub fn arrive_each(
        &mut self,
        now: Nanos,
        rec: &Record,
        out: &mut Vec<SegmentFate>,
    ) -> Result<(), RecordError> {
        rec.check()?;
        if now < self.last_now {
            return Err(RecordError::TimeWentBackwards {
                now: now.as_nanos(),
                last: self.last_now.as_nanos(),
            });
        }
        self.last_now = now;
        if let Some(q) = self.queue.as_mut() {
            q.advance(now);
        }
        self.stats.records += 1;
        for i in 0..rec.segments {
            let bytes = rec.segment_bytes(i);
            self.stats.segments += 1;
            self.stats.bytes += u64::from(bytes);
            match self.segment(now, u64::from(bytes)) {
                Err(cause) => {
                    match cause {
                        DropCause::Queue => self.stats.drop_queue += 1,
                        DropCause::Random => self.stats.drop_random += 1,
                        DropCause::Burst => self.stats.drop_burst += 1,
                        DropCause::Aqm => self.stats.drop_aqm += 1,
                    }
                    out.push(SegmentFate {
                        index: i,
                        what: What::Drop { cause },
                    });
                }
                Ok(Delivered { at, dup, corrupt }) => {
                    self.stats.delivered += 1;
                    self.stats.delivered_bytes += u64::from(bytes);
                    self.stats.corrupted += u64::from(corrupt);
                    out.push(SegmentFate {
                        index: i,
                        what: if corrupt {
                            What::Corrupt { from: at, at }
                        } else {
                            What::Deliver { from: at, at }
                        },
                    });
                    if dup {
                        self.stats.duplicates += 1;
                        out.push(SegmentFate {
                            index: i,
                            what: What::Duplicate { from: at, at },
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Decides the segments of `rec` arriving at `now` and appends their
    /// fates as runs to `out` (see [`coalesce`]; the gap is
    /// [`Link::run_gap`]). On a path with a bottleneck and delay only, a
    /// delivered record is one run.
    pub fn arrive(
        &mut self,
        now: Nanos,
        rec: &Record,
        out: &mut Vec<Fate>,
    ) -> Result<(), RecordError> {
        let mut segs = std::mem::take(&mut self.scratch);
        segs.clear();
        let r = self.arrive_each(now, rec, &mut segs);
        if r.is_ok() {
            coalesce(&segs, self.run_gap, out);
        }
        self.scratch = segs;
        r
    }

    /// One segment of `ip_bytes` through every stage: when and how it is
    /// delivered, or why it is dropped.
    fn segment(&mut self, now: Nanos, ip_bytes: u64) -> Result<Delivered, DropCause> {
        if let Some(cause) = self.loss.next() {
            return Err(cause);
        }
        let depart = match self.queue.as_mut() {
            None => now,
            Some(q) => {
                let wire = ip_bytes + self.overhead;
                let Admit::Serve { start, ahead_bytes } = q.offer(now, wire) else {
                    self.backlog_sum += u128::from(q.backlog_bytes(now));
                    self.backlog_samples += 1;
                    return Err(DropCause::Queue);
                };
                self.backlog_sum += u128::from(ahead_bytes);
                self.backlog_samples += 1;
                if let Some(c) = self.codel.as_mut() {
                    let sojourn = start.saturating_sub(now);
                    if c.on_dequeue(start, sojourn, ahead_bytes <= self.max_frame) {
                        return Err(DropCause::Aqm);
                    }
                }
                let depart = q.commit(now, wire);
                let backlog = q.backlog_bytes(now);
                self.stats.queue_max_bytes = self.stats.queue_max_bytes.max(backlog);
                depart
            }
        };
        let jitter = match self.cfg.jitter {
            Jitter::None => Nanos::ZERO,
            Jitter::Uniform { max } => Nanos(self.jitter_rng.upto(max.as_nanos())),
            Jitter::Normal { mean, sigma } => {
                let x = mean.as_nanos() as f64 + sigma.as_nanos() as f64 * self.jitter_rng.normal();
                // `as` saturates: negative values give 0 (the clamp).
                Nanos(x.round() as u64)
            }
        };
        let mut release = depart + self.propagation + jitter;
        if !self.cfg.jitter_reorders {
            release = release.max(self.last_release);
            self.last_release = release;
        }
        if let Some(r) = self.cfg.reorder
            && self.reorder_rng.chance(r.probability)
        {
            self.stats.reordered += 1;
            release += r.hold;
        }
        let dup = self.cfg.duplicate > 0.0 && self.dup_rng.chance(self.cfg.duplicate);
        let corrupt = self.cfg.corrupt > 0.0 && self.corrupt_rng.chance(self.cfg.corrupt);
        Ok(Delivered {
            at: release,
            dup,
            corrupt,
        })
    }
}

/// A delivered segment: its release time, whether a copy follows it, whether it is damaged.
struct Delivered {
    at: Nanos,
    dup: bool,
    corrupt: bool,
}
