//! Stalls (issue 22): stretches in which a forwarder wrote far behind its schedule, and the
//! bottleneck drops that followed them.
//!
//! A p99 over a 10-minute run cannot see two 2-second stalls (0.6 % of its writes), yet such a
//! stall holds the path's packets back, the receiver's ACKs then come in one burst, the sender
//! answers with a burst of its own and the bottleneck queue overflows: drops the path never made
//! (bench/RESULTS.md, "the record presets at MTU 1500"). So each forwarder notes every write later
//! than [`threshold_ns`], groups them into stalls (a stall ends at the first write on time again),
//! and counts its bottleneck drops from a stall's start until two round trips after its last late
//! write, in either direction (a stall of the ACKs overflows the data's queue). The verdict flags a
//! run in which a stall was followed by such drops. Each stall also says what the scheduler did
//! with the forwarder's thread meanwhile (run time, wait for a CPU, page faults, the machine's
//! steal time), so that the next one tells what stopped it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use longhaul_sys::{SchedSample, sched_sample};
use serde::{Deserialize, Serialize};

/// The least lateness that counts as a stall: 20 ms, 20 × the p99 bound of the fidelity verdict.
pub const MIN_STALL_NS: u64 = 20_000_000;
/// Stalls listed one by one in the report (all are counted).
pub const LISTED: usize = 16;
/// The shared window after a stall is moved on in steps of this much.
const EXTEND_STEP_NS: u64 = 10_000_000;

/// A write later than this starts or extends a stall: an eighth of the path's round trip, at
/// least [`MIN_STALL_NS`].
pub fn threshold_ns(rtt_ns: u64) -> u64 {
    (rtt_ns / 8).max(MIN_STALL_NS)
}

/// What the scheduler did with a forwarder's thread from its last sample before a stall to the
/// stall's end (see [`SchedSample`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StallSched {
    /// Milliseconds the interval lasted.
    pub interval_ms: f64,
    /// Milliseconds on a CPU.
    pub ran_ms: f64,
    /// Milliseconds runnable but waiting for a CPU.
    pub waited_for_cpu_ms: f64,
    /// Page faults served from memory.
    pub minor_faults: u64,
    /// Page faults that waited for I/O.
    pub major_faults: u64,
    /// Times the thread was switched out while it could still run.
    pub involuntary_switches: u64,
    /// Milliseconds the hypervisor gave this machine's CPUs to others (all CPUs together).
    pub steal_ms: f64,
}

/// One stall.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stall {
    /// When its first late write was due, seconds after the testbed came up.
    pub at_s: f64,
    /// From then to its last late write, milliseconds.
    pub lasted_ms: f64,
    /// The latest write, milliseconds behind its schedule.
    pub worst_ms: f64,
    /// Writes later than the threshold.
    pub late_writes: u64,
    /// The forwarder's thread meanwhile (`None` while the stall goes on, or if `/proc` could not
    /// be read).
    pub sched: Option<StallSched>,
}

/// One direction's stalls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StallStats {
    /// Lateness above which a write counts (see [`threshold_ns`]).
    pub threshold_ns: u64,
    /// Stalls seen (the last may still go on).
    pub count: u64,
    /// The first [`LISTED`] of them.
    pub list: Vec<Stall>,
    /// This direction's bottleneck drops from a stall's start (in either direction) until two
    /// round trips after its last late write.
    pub drops_after: u64,
}

impl StallStats {
    /// The worst stall listed.
    pub fn worst(&self) -> Option<&Stall> {
        self.list
            .iter()
            .max_by(|a, b| a.worst_ms.total_cmp(&b.worst_ms))
    }
}

/// Until when drops count as following a stall, shared by a testbed's forwarders.
#[derive(Debug, Default)]
pub(crate) struct StallShared {
    since_ns: AtomicU64,
    until_ns: AtomicU64,
}

impl StallShared {
    fn extend(&self, since: u64, until: u64) {
        if self.until_ns.load(Ordering::Relaxed) < since {
            // A new stall after the last one's window: its window starts afresh.
            self.since_ns.store(since, Ordering::Relaxed);
        }
        self.until_ns.fetch_max(until, Ordering::Relaxed);
    }

    fn covers(&self, from: u64, to: u64) -> bool {
        let until = self.until_ns.load(Ordering::Relaxed);
        until != 0 && to >= self.since_ns.load(Ordering::Relaxed) && from <= until
    }
}

#[derive(Debug)]
struct Open {
    due_ns: u64,
    last_ns: u64,
    worst_ns: u64,
    writes: u64,
    before: Option<(u64, SchedSample)>,
}

/// One forwarder's stall detector, fed every write and every counter tick.
#[derive(Debug)]
pub(crate) struct StallWatch {
    threshold_ns: u64,
    window_ns: u64,
    up_ns: u64,
    shared: Arc<StallShared>,
    open: Option<Open>,
    /// The thread's last sample (taken on every tick) and when.
    sample: Option<(u64, SchedSample)>,
    last_tick_ns: u64,
    last_drops: u64,
    /// The end of this forwarder's last window as told to `shared`.
    published_until: u64,
    stats: StallStats,
}

impl StallWatch {
    /// For a forwarder of a testbed that came up at `up_ns`, on a path of round trip `rtt_ns`.
    pub(crate) fn new(rtt_ns: u64, up_ns: u64, shared: Arc<StallShared>) -> Self {
        let threshold_ns = threshold_ns(rtt_ns);
        Self {
            threshold_ns,
            window_ns: 2 * rtt_ns,
            up_ns,
            shared,
            open: None,
            sample: None,
            last_tick_ns: up_ns,
            last_drops: 0,
            published_until: 0,
            stats: StallStats {
                threshold_ns,
                ..StallStats::default()
            },
        }
    }

    /// One write at `now`, `late_ns` behind its schedule.
    pub(crate) fn write(&mut self, now: u64, late_ns: u64) {
        if late_ns > self.threshold_ns {
            let due = now.saturating_sub(late_ns);
            let open = self.open.get_or_insert(Open {
                due_ns: due,
                last_ns: now,
                worst_ns: 0,
                writes: 0,
                before: self.sample,
            });
            if open.writes == 0 {
                self.stats.count += 1;
            }
            open.last_ns = now;
            open.worst_ns = open.worst_ns.max(late_ns);
            open.writes += 1;
            // The shared window moves in steps of 10 ms, not on every late write: an overloaded
            // forwarder writes late all the time, and the other direction's core reads it.
            let until = now + self.window_ns;
            if until > self.published_until + EXTEND_STEP_NS {
                self.shared.extend(open.due_ns, until + EXTEND_STEP_NS);
                self.published_until = until;
            }
        } else if let Some(open) = self.open.take() {
            // Listed stalls only: /proc is read at most LISTED times a run.
            if self.stats.list.len() < LISTED {
                let later = sched_sample().ok();
                let sched = later.zip(open.before).map(|(later, (then, before))| {
                    sched_of(now.saturating_sub(then), later - before)
                });
                // The next stall, if it comes before the next tick, counts from this one's end.
                self.sample = later.map(|l| (now, l));
                self.stats.list.push(self.stall_of(&open, sched));
            }
        }
    }

    fn stall_of(&self, open: &Open, sched: Option<StallSched>) -> Stall {
        Stall {
            at_s: open.due_ns.saturating_sub(self.up_ns) as f64 / 1e9,
            lasted_ms: open.last_ns.saturating_sub(open.due_ns) as f64 / 1e6,
            worst_ms: open.worst_ns as f64 / 1e6,
            late_writes: open.writes,
            sched,
        }
    }

    /// Now and then (every counter publication) with the direction's bottleneck drops so far:
    /// counts the drops since the last tick if a stall's window covers that interval, and
    /// samples the thread while stalls are still listed.
    pub(crate) fn tick(&mut self, now: u64, queue_drops: u64) {
        let new = queue_drops.saturating_sub(self.last_drops);
        if new > 0 && self.shared.covers(self.last_tick_ns, now) {
            self.stats.drops_after += new;
        }
        self.last_drops = queue_drops;
        self.last_tick_ns = now;
        if self.open.is_none() && self.stats.list.len() < LISTED {
            self.sample = sched_sample().ok().map(|s| (now, s));
        }
    }

    /// The stalls so far, the one going on included.
    pub(crate) fn stats(&self) -> StallStats {
        let mut s = self.stats.clone();
        if let Some(open) = &self.open
            && s.list.len() < LISTED
        {
            s.list.push(self.stall_of(open, None));
        }
        s
    }
}

/// `1 stall`, `2 stalls`.
pub fn stalls(n: u64) -> String {
    format!("{n} stall{}", if n == 1 { "" } else { "s" })
}

fn sched_of(interval_ns: u64, d: SchedSample) -> StallSched {
    let ms = |ns: u64| ns as f64 / 1e6;
    StallSched {
        interval_ms: ms(interval_ns),
        ran_ms: ms(d.run_ns),
        waited_for_cpu_ms: ms(d.runqueue_ns),
        minor_faults: d.minor_faults,
        major_faults: d.major_faults,
        involuntary_switches: d.involuntary_switches,
        steal_ms: ms(d.steal_ns),
    }
}

/// One line on a direction's stalls: `stalls 2 (writes late by > 33.000 ms; worst 1746.2 ms at
/// 120.3 s for 2141 ms, the forwarder ran 12 ms, waited 3 ms for a CPU, 0 faults, steal 0 ms;
/// 11745 bottleneck drops followed)`, or nothing.
pub fn describe(s: &StallStats) -> String {
    let Some(w) = s.worst() else {
        return String::new();
    };
    let sched = w.sched.map_or_else(String::new, |c| {
        format!(
            "; in the {:.0} ms around it the forwarder ran {:.1} ms, waited {:.1} ms for a CPU, \
             {} minor and {} major faults, {} preemptions, steal {:.0} ms",
            c.interval_ms,
            c.ran_ms,
            c.waited_for_cpu_ms,
            c.minor_faults,
            c.major_faults,
            c.involuntary_switches,
            c.steal_ms
        )
    });
    format!(
        "{} (writes late by > {:.0} ms; worst {:.1} ms late at {:.1} s, {} late writes over {:.0} ms{sched}); \
         {} bottleneck drops followed",
        stalls(s.count),
        s.threshold_ns as f64 / 1e6,
        w.worst_ms,
        w.at_s,
        w.late_writes,
        w.lasted_ms,
        s.drops_after
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000 * MS;

    fn watch(shared: &Arc<StallShared>) -> StallWatch {
        // 264 ms round trip: threshold 33 ms, window 528 ms.
        StallWatch::new(264 * MS, 10 * S, shared.clone())
    }

    /// Writes every `step` from `from` to `to`, each `late` behind.
    fn writes(w: &mut StallWatch, from: u64, to: u64, step: u64, late: impl Fn(u64) -> u64) {
        let mut t = from;
        while t < to {
            w.write(t, late(t));
            t += step;
        }
    }

    #[test]
    fn a_stall_is_listed_with_when_how_late_and_what_the_thread_did() {
        let shared = Arc::new(StallShared::default());
        let mut w = watch(&shared);
        assert_eq!(w.stats.threshold_ns, 33 * MS);
        w.tick(11 * S, 0);
        writes(&mut w, 11 * S, 12 * S, MS, |_| 100_000);
        // Nothing written from 12.0 s to 14.0 s; then the backlog, late by 2 s falling to 0.
        writes(&mut w, 14 * S, 16 * S, MS, |t| (16 * S - t).min(2 * S));
        let s = w.stats();
        assert_eq!(s.count, 1);
        let st = &s.list[0];
        assert!((st.at_s - 2.0).abs() < 1e-6, "{st:?}");
        assert!((st.worst_ms - 2_000.0).abs() < 1e-6, "{st:?}");
        // Late by > 33 ms until 15.967 s.
        assert_eq!(st.late_writes, 1_967);
        assert!((st.lasted_ms - 3_966.0).abs() < 1.0, "{st:?}");
        let sched = st.sched.expect("sampled at the tick before and at the end");
        assert!((sched.interval_ms - 4_967.0).abs() < 1.0, "{sched:?}");
        assert_eq!(s.drops_after, 0, "nothing dropped");
        // A second stall before the next tick counts its thread from the first one's end
        // (15.967 s), not from the tick at 11 s.
        w.write(16 * S, 50 * MS);
        w.write(16 * S + 10 * MS, 0);
        let second = w.stats().list[1].sched.expect("sampled");
        assert!((second.interval_ms - 43.0).abs() < 1.0, "{second:?}");
        assert!(
            describe(&s).contains("1 stall (writes late by > 33 ms; worst 2000.0 ms late at 2.0 s")
        );
    }

    #[test]
    fn drops_count_after_a_stall_in_either_direction_and_not_long_after() {
        let shared = Arc::new(StallShared::default());
        let mut acks = watch(&shared);
        let mut data = watch(&shared);
        // Drops before any stall do not count.
        data.tick(11 * S, 500);
        // The ACK direction stalls: 300 ms late at 12 s.
        acks.write(12 * S, 300 * MS);
        acks.write(12 * S + MS, 0);
        // The data direction drops 40 in the next 100 ms, 60 more by 12.5 s, inside the window
        // (12.001 s + 528 ms) ...
        data.tick(12 * S + 100 * MS, 540);
        data.tick(12 * S + 500 * MS, 600);
        // ... and 1,000 a second later, outside it.
        data.tick(12 * S + 600 * MS, 600);
        data.tick(13 * S + 600 * MS, 1_600);
        assert_eq!(data.stats().drops_after, 100);
        assert_eq!(data.stats().count, 0);
        assert_eq!(acks.stats().count, 1);
        // A later stall opens a new window.
        data.write(20 * S, 50 * MS);
        data.tick(20 * S + 100 * MS, 1_610);
        assert_eq!(data.stats().drops_after, 110);
        assert_eq!(data.stats().count, 1);
    }

    #[test]
    fn late_writes_under_the_threshold_and_a_stall_going_on() {
        let shared = Arc::new(StallShared::default());
        let mut w = StallWatch::new(0, 0, shared.clone());
        assert_eq!(w.stats.threshold_ns, MIN_STALL_NS);
        writes(&mut w, S, 2 * S, MS, |_| 19 * MS);
        assert_eq!(w.stats().count, 0);
        assert!(describe(&w.stats()).is_empty());
        w.write(3 * S, 25 * MS);
        let s = w.stats();
        assert_eq!((s.count, s.list.len()), (1, 1));
        assert_eq!(s.list[0].sched, None, "still going on");
        // Only LISTED are kept, all are counted.
        for i in 0..40 {
            w.write(4 * S + i * S, 30 * MS);
            w.write(4 * S + i * S + MS, 0);
        }
        let s = w.stats();
        // The first of these extends the stall still going on.
        assert_eq!((s.count, s.list.len()), (40, LISTED));
    }
}
