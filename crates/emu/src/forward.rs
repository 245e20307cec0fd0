//! One direction's forwarder: read records from the source TUN, decide each
//! segment's fate with the link model, split super-packets where fates
//! differ, and write every record to the destination TUN at its release time.
//!
//! The loop: write whatever is due; wait on the source until it is readable
//! or the next release is due (`ppoll` with a nanosecond timeout and 1 ns
//! timer slack, spinning through the last [`spin_ns`]); drain up to
//! [`READ_BATCH`] records without blocking, writing whatever is due after
//! each one; repeat. Lateness (write time − scheduled release) goes into a
//! histogram per direction. Large records travel from `read` to `write` in
//! one recycled buffer ([`crate::pool`]): no allocation, no copy.

use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use longhaul_link::{Fate, Link, LinkStats, Nanos, Record, What};
use longhaul_packet::{
    ChecksumMode, HopAction, Parsed, RouterAddrs, damage, parse, process_hop, split,
};
use longhaul_sys::{
    Tun, VNET_HDR_LEN, monotonic_now_ns, pin_thread_to_cpu, set_realtime_priority,
    set_timer_slack_ns,
};
use serde::{Deserialize, Serialize};

use crate::arrival::{ArrivalClock, ArrivalStats};
use crate::capture::{Capture, CaptureStats};
use crate::fifo::ReleaseQueue;
use crate::pool::{BufPool, HANDOVER_MIN};
use longhaul_units::hist::Summary;

use crate::phase::{Lateness, PhaseClock, PhaseShared};
use crate::stall::{StallShared, StallStats, StallWatch};

/// Below this much remaining time the forwarder polls without sleeping, since
/// a sleeping wake-up is typically 50–300 µs late (measured on the 2-core
/// test VM with `PR_SET_TIMERSLACK` = 1 ns).
const SPIN_NS: u64 = 30_000;

/// How long before a release a forwarder stops sleeping and spins: `SPIN_NS` (30 µs), or nothing for a
/// real-time thread. A `SCHED_FIFO` thread wakes ~20 µs after its timer here, and one that spins
/// can use up the kernel's real-time budget (`kernel.sched_rt_runtime_us`, 95 % of each second):
/// the kernel then takes its CPU away for the rest of the second, tens of ms in which nothing is
/// read from the sending host, a delay the forwarder's own lateness cannot see (a 44.6 ms gap in
/// a `sched:sched_switch` trace; bench/RESULTS.md, "Record paths at 10 Gbit/s").
pub fn spin_ns(realtime: bool) -> u64 {
    if realtime { 0 } else { SPIN_NS }
}
/// Longest sleep, so a stop request is seen promptly.
const MAX_WAIT_NS: u64 = 20_000_000;
/// Records read per wake-up before the ICMP replies, the live counters and
/// the wait get another turn (due writes get one after every record).
pub const READ_BATCH: usize = 64;
/// How often a forwarder publishes its counters for `status` (live snapshots).
const PUBLISH_NS: u64 = 100_000_000;

/// What one direction did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DirectionStats {
    /// "a→b" or "b→a".
    pub name: String,
    /// The link model's counters (segments, drops by cause, queue).
    pub link: LinkStats,
    /// Records read from the source TUN.
    pub records_read: u64,
    /// Records the packet parser refused; forwarded unchanged after the
    /// base delay.
    pub unparseable: u64,
    /// Super-packets split because their segments had different fates.
    pub splits: u64,
    /// Records written to the destination TUN.
    pub records_written: u64,
    /// Bytes written (virtio-net headers included).
    pub bytes_written: u64,
    /// Writes the destination TUN refused (or, for ICMP replies, the
    /// source TUN).
    pub write_errors: u64,
    /// Records that expired at a router hop and were answered with ICMP
    /// time exceeded (written back to the source after the round trip to
    /// that hop).
    pub hop_time_exceeded: u64,
    /// Records that expired at a router hop without an answer (ICMP errors,
    /// multicast, ...).
    pub hop_drops: u64,
    /// Most bytes waiting for release at once.
    pub backlog_max_bytes: u64,
    /// Records dropped because the path was cut (`longhaul emulate link down`).
    #[serde(default)]
    pub cut_drops: u64,
    /// Write time − scheduled release.
    pub lateness: Summary,
    /// The same before the path settled: slow start and the loss it may end in
    /// ([`crate::phase`]).
    #[serde(default)]
    pub lateness_ramp: Summary,
    /// The same once the path settled.
    #[serde(default)]
    pub lateness_steady: Summary,
    /// When the steady phase began, seconds after the testbed came up (`None`: not yet).
    #[serde(default)]
    pub steady_after_s: Option<f64>,
    /// Stretches of writes far behind schedule, and the bottleneck drops after them.
    #[serde(default)]
    pub stalls: StallStats,
    /// Bytes in the bottleneck queue (live snapshots; at teardown, at the
    /// end of the run).
    pub queue_bytes_now: u64,
    /// Packets the source TUN dropped itself (its queue overflowed because
    /// the forwarder did not read fast enough), read at teardown.
    pub tun_tx_dropped: Option<u64>,
    /// The capture file of this direction (`--pcap`), if any.
    pub capture: Option<CaptureStats>,
    /// Record buffers allocated and written before the run (the delay line's memory).
    #[serde(default)]
    pub pool_prefilled: u64,
    /// Record buffers allocated during the run because the prefilled ones were all in use.
    #[serde(default)]
    pub pool_allocated: u64,
    /// How the records' arrivals were timed: by a tap on the sending host's device, or at
    /// their read (which leaves their wait in that host's queue out of every figure above).
    #[serde(default)]
    pub arrival: ArrivalStats,
}

/// Cross-traffic bursts waiting to be handed to a forwarder's link model (the link is the
/// forwarder thread's own; it picks them up on its next turn).
#[derive(Debug, Default)]
pub(crate) struct Bursts {
    pending: AtomicBool,
    list: Mutex<Vec<longhaul_link::Burst>>,
}

impl Bursts {
    pub(crate) fn push(&self, b: longhaul_link::Burst) {
        self.list.lock().unwrap_or_else(|e| e.into_inner()).push(b);
        self.pending.store(true, Ordering::Release);
    }

    fn take(&self) -> Vec<longhaul_link::Burst> {
        if !self.pending.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut *self.list.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// One router hop as a direction's forwarder sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HopStage {
    /// Addresses its ICMP replies come from.
    pub(crate) addrs: RouterAddrs,
    /// Round trip from this direction's source to the hop: when its reply
    /// reaches the source after the probe left.
    pub(crate) reply_delay_ns: u64,
}

/// What the router hops did to a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HopsOutcome {
    /// Passed every hop (TTL reduced by their number), or not an IP packet
    /// the hops understand (forwarded unchanged).
    Forward,
    /// Expired at a hop; `reply` holds its ICMP answer, due after `delay_ns`.
    Answered { delay_ns: u64 },
    /// Expired at a hop with no answer allowed.
    Dropped,
}

/// Applies every hop in path order to `record`.
pub(crate) fn run_hops(hops: &[HopStage], record: &mut [u8], reply: &mut Vec<u8>) -> HopsOutcome {
    for h in hops {
        match process_hop(record, &h.addrs, reply) {
            Ok(HopAction::Forward) => {}
            Ok(HopAction::TimeExceeded) => {
                return HopsOutcome::Answered {
                    delay_ns: h.reply_delay_ns,
                };
            }
            Ok(HopAction::Drop) => return HopsOutcome::Dropped,
            Err(_) => return HopsOutcome::Forward,
        }
    }
    HopsOutcome::Forward
}

/// Everything a forwarder thread needs.
pub(crate) struct Forwarder {
    pub(crate) name: String,
    pub(crate) src: Arc<Tun>,
    pub(crate) dst: Arc<Tun>,
    pub(crate) link: Link,
    pub(crate) hops: Vec<HopStage>,
    pub(crate) stop: Arc<AtomicBool>,
    /// While set, every record read is dropped (an outage of the whole path).
    pub(crate) cut: Arc<AtomicBool>,
    /// Cross-traffic bursts scheduled from outside, handed to the link model.
    pub(crate) bursts: Arc<Bursts>,
    pub(crate) realtime: Option<i32>,
    /// CPU to pin the thread to.
    pub(crate) cpu: Option<usize>,
    /// Where the counters are published every [`PUBLISH_NS`] for live snapshots.
    pub(crate) live: Arc<Mutex<DirectionStats>>,
    /// Capture of every record written to the destination.
    pub(crate) capture: Option<Capture>,
    /// The path's round-trip time (the phase windows last four of them at least).
    pub(crate) rtt_ns: u64,
    /// The testbed's phase, shared by its forwarders.
    pub(crate) phase: Arc<PhaseShared>,
    /// The windows after the testbed's stalls, shared by its forwarders.
    pub(crate) stalls: Arc<StallShared>,
    /// When each record entered the sending host's device (its tap), as the link's arrival.
    pub(crate) arrivals: ArrivalClock,
}

/// The part of a record's parse the link model needs.
pub(crate) fn record_of(id: u64, p: &Parsed) -> Record {
    let header = p.headers_len() as u32;
    let payload = p.payload_len as u32;
    if (p.is_tcp() || p.is_udp()) && p.segments > 1 {
        let r = Record {
            id,
            flow: p.flow_hash,
            segments: p.segments as u32,
            header_bytes: header,
            payload,
            mss: p.mss as u32,
        };
        if r.check().is_ok() {
            return r;
        }
    }
    Record {
        flow: p.flow_hash,
        ..Record::single(id, header, payload)
    }
}

/// Turns the fates of a parsed record into queued releases; returns whether
/// it had to be split. See [`release_runs`].
pub(crate) fn enqueue_fates(
    buf: &mut Vec<u8>,
    len: usize,
    p: &Parsed,
    segments: u32,
    fates: &[Fate],
    pool: &mut BufPool,
    queue: &mut ReleaseQueue,
) -> bool {
    debug_assert_eq!(segments, record_of(0, p).segments);
    release_runs(buf, len, p, fates, pool, true, |run| {
        queue.push(run.at, run.bytes)
    })
}

/// Buffers to allocate before the run for this direction's delay line: what the path holds in
/// flight at its rate over its propagation delay, plus its bottleneck queue, in full-size records;
/// at most an eighth of the memory available (each direction prefills alike: the one that carries
/// the data is not known in advance). None without a bottleneck rate.
pub(crate) fn delay_line_buffers(c: &longhaul_link::LinkConfig) -> usize {
    let Some(b) = c.bottleneck else { return 0 };
    let in_flight =
        u128::from(b.rate_bps) * u128::from(c.propagation().as_nanos()) / 8 / 1_000_000_000;
    let bytes = u64::try_from(in_flight)
        .unwrap_or(u64::MAX)
        .saturating_add(b.queue_bytes);
    let budget = longhaul_sys::meminfo_bytes("MemAvailable").unwrap_or(0) / 8;
    BufPool::buffers_for(bytes, budget)
}

/// A run of a record's segments with one fate that is released: the whole
/// record or a part cut out of it.
pub(crate) struct Run {
    /// Release of its first segment, monotonic ns.
    pub(crate) from: u64,
    /// Release of its last segment.
    pub(crate) at: u64,
    /// The record (whole) or the part, headers rewritten.
    pub(crate) bytes: Vec<u8>,
    /// Whether `bytes` is the record as it was (its parse still holds).
    pub(crate) whole: bool,
}

/// Hands every released run of a parsed record to `release`, in fate order;
/// returns whether the record had to be split.
///
/// The record is `buf[..len]`. The last release that needs it whole takes
/// `buf` itself (a large record moves out and `buf` gets a buffer from
/// `pool` instead, full-length with `refill_full`, to read into; see
/// [`BufPool::hand_over`]); earlier whole
/// releases (a duplicate's original) and split runs are copies in pool
/// buffers.
pub(crate) fn release_runs(
    buf: &mut Vec<u8>,
    len: usize,
    p: &Parsed,
    fates: &[Fate],
    pool: &mut BufPool,
    refill_full: bool,
    mut release: impl FnMut(Run),
) -> bool {
    let segments = record_of(0, p).segments;
    let mut split_any = false;
    let last_release = fates
        .iter()
        .rposition(|f| !matches!(f.what, What::Drop { .. }));
    for (i, f) in fates.iter().enumerate() {
        let (from, at) = match f.what {
            What::Deliver { from, at }
            | What::Duplicate { from, at }
            | What::Corrupt { from, at } => (from.as_nanos(), at.as_nanos()),
            What::Drop { .. } => continue,
        };
        if let What::Corrupt { .. } = f.what {
            // One segment, checksums completed, one bit flipped: the receiver drops it.
            split_any |= segments > 1;
            let mut out = pool.take_empty();
            let made = if segments == 1 {
                out.extend_from_slice(&buf[..len]);
                Ok(())
            } else {
                split(
                    &buf[..len],
                    p,
                    f.first as usize,
                    1,
                    ChecksumMode::FullWhenSingle,
                    &mut out,
                )
            };
            match made.and_then(|()| damage(&mut out, from ^ u64::from(f.first))) {
                Ok(()) => release(Run {
                    from,
                    at,
                    bytes: sized(out, pool),
                    whole: false,
                }),
                Err(e) => {
                    pool.put(out);
                    tracing::debug!("cannot damage a segment: {e}");
                }
            }
            continue;
        }
        if f.first == 0 && f.count == segments {
            let bytes = if Some(i) == last_release {
                pool.hand_over(buf, len, refill_full)
            } else {
                pool.copy_of(&buf[..len])
            };
            release(Run {
                from,
                at,
                bytes,
                whole: true,
            });
        } else {
            split_any = true;
            let mut out = pool.take_empty();
            match split(
                &buf[..len],
                p,
                f.first as usize,
                f.count as usize,
                ChecksumMode::FullWhenSingle,
                &mut out,
            ) {
                Ok(()) => {
                    release(Run {
                        from,
                        at,
                        bytes: sized(out, pool),
                        whole: false,
                    });
                }
                Err(e) => {
                    pool.put(out);
                    tracing::debug!("cannot split record: {e}");
                }
            }
        }
    }
    split_any
}

/// A record built in the pool buffer `out`: kept when large, else copied to an exact-size `Vec`
/// and the buffer returned, so a queued record never holds a buffer far larger than itself.
fn sized(out: Vec<u8>, pool: &mut BufPool) -> Vec<u8> {
    if out.len() >= HANDOVER_MIN {
        out
    } else {
        let small = out.to_vec();
        pool.put(out);
        small
    }
}

impl Forwarder {
    /// Runs until `stop` is set or a TUN fails; returns the counters.
    pub(crate) fn run(mut self) -> DirectionStats {
        if let Err(e) = set_timer_slack_ns(1) {
            tracing::warn!("{}: {e}", self.name);
        }
        if let Some(prio) = self.realtime
            && let Err(e) = set_realtime_priority(prio)
        {
            tracing::warn!("{}: no real-time priority: {e}", self.name);
        }
        if let Some(cpu) = self.cpu
            && let Err(e) = pin_thread_to_cpu(cpu)
        {
            tracing::warn!("{}: not pinned: {e}", self.name);
        }
        let base_delay = self.link.config().propagation().as_nanos();
        let mut stats = DirectionStats {
            name: self.name.clone(),
            ..DirectionStats::default()
        };
        let mut lateness = Lateness::new(
            PhaseClock::new(self.link.config(), self.rtt_ns),
            self.phase.clone(),
            StallWatch::new(self.rtt_ns, self.phase.up_ns(), self.stalls.clone()),
        );
        let mut queue = ReleaseQueue::new();
        // ICMP answers of the router hops, written back to the source.
        let mut replies = ReleaseQueue::new();
        let mut reply = Vec::new();
        let mut pool = BufPool::prefilled(delay_line_buffers(self.link.config()));
        stats.pool_prefilled = pool.allocated();
        let mut buf = pool.take_full();
        let mut fates: Vec<Fate> = Vec::new();
        let mut next_id = 0u64;
        let mut next_publish = 0u64;
        let spin = spin_ns(self.realtime.is_some());

        while !self.stop.load(Ordering::Relaxed) {
            // 1. Everything due.
            let mut now = self.write_due(
                &mut queue,
                &mut pool,
                &mut stats,
                &mut lateness,
                monotonic_now_ns(),
            );
            while let Some(p) = replies.pop_due(now) {
                if let Err(e) = self.src.write(&p.bytes) {
                    stats.write_errors += 1;
                    tracing::debug!("{}: ICMP reply: {e}", self.name);
                }
                now = monotonic_now_ns();
            }
            if now >= next_publish {
                next_publish = now + PUBLISH_NS;
                self.arrivals.resync();
                self.publish(&mut stats, &lateness, &queue, &pool, now);
                // The link's counters as just published: one read of them per turn.
                lateness.tick(now, stats.bytes_written, stats.link.drop_queue);
            }
            for b in self.bursts.take() {
                if let Err(e) = self.link.add_burst(b) {
                    tracing::warn!("{}: {e}", self.name);
                }
            }
            // 2. Wait for input or the next release.
            let next = match (queue.next_due(), replies.next_due()) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            };
            let wait = next
                .map_or(MAX_WAIT_NS, |due| due.saturating_sub(now))
                .min(MAX_WAIT_NS);
            let wait = wait.saturating_sub(spin);
            match self.src.wait_readable(Duration::from_nanos(wait)) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    tracing::error!("{}: {e}", self.name);
                    break;
                }
            }
            // 3. Drain a batch.
            for _ in 0..READ_BATCH {
                let n = match self.src.read(&mut buf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => {
                        tracing::error!("{}: {e}", self.name);
                        self.stop.store(true, Ordering::Relaxed);
                        break;
                    }
                };
                stats.records_read += 1;
                if self.cut.load(Ordering::Relaxed) {
                    // The path is cut (`longhaul emulate link down`): nothing gets through.
                    stats.cut_drops += 1;
                    continue;
                }
                let read_at = monotonic_now_ns();
                let packet = buf[..n].get(VNET_HDR_LEN..).unwrap_or_default();
                let now = Nanos(self.arrivals.arrival(packet, read_at));
                if !self.hops.is_empty() {
                    match run_hops(&self.hops, &mut buf[..n], &mut reply) {
                        HopsOutcome::Forward => {}
                        HopsOutcome::Answered { delay_ns } => {
                            stats.hop_time_exceeded += 1;
                            replies.push(now.as_nanos() + delay_ns, reply.clone());
                            continue;
                        }
                        HopsOutcome::Dropped => {
                            stats.hop_drops += 1;
                            continue;
                        }
                    }
                }
                let parsed = match parse(&buf[..n]) {
                    Ok(p) => p,
                    Err(e) => {
                        stats.unparseable += 1;
                        tracing::debug!("{}: unparseable record of {n} B: {e}", self.name);
                        queue.push(now.as_nanos() + base_delay, pool.copy_of(&buf[..n]));
                        continue;
                    }
                };
                let r = record_of(next_id, &parsed);
                next_id += 1;
                fates.clear();
                if let Err(e) = self.link.arrive(now, &r, &mut fates) {
                    // Cannot happen for records built by `record_of` and a
                    // monotonic clock; forward unchanged rather than lose it.
                    stats.unparseable += 1;
                    tracing::debug!("{}: {e}", self.name);
                    queue.push(now.as_nanos() + base_delay, pool.copy_of(&buf[..n]));
                    continue;
                }
                if enqueue_fates(
                    &mut buf, n, &parsed, r.segments, &fates, &mut pool, &mut queue,
                ) {
                    stats.splits += 1;
                }
                // Writes get a turn after every record, not after the batch:
                // a record due by now (at 0 ms RTT, the one read just before)
                // is written while its 64 KB are still in this core's cache,
                // and is not held back behind up to READ_BATCH reads. A fresh
                // clock, so lateness includes the parse and link-model time.
                let t = monotonic_now_ns();
                if queue.next_due().is_some_and(|due| due <= t) {
                    self.write_due(&mut queue, &mut pool, &mut stats, &mut lateness, t);
                }
            }
        }
        self.publish(&mut stats, &lateness, &queue, &pool, monotonic_now_ns());
        stats.capture = self.capture.take().map(Capture::finish);
        stats
    }

    /// Writes every record due at `now` (re-reading the clock after each
    /// write) and recycles its buffer; returns the time after the last.
    fn write_due(
        &mut self,
        queue: &mut ReleaseQueue,
        pool: &mut BufPool,
        stats: &mut DirectionStats,
        lateness: &mut Lateness,
        mut now: u64,
    ) -> u64 {
        while let Some(p) = queue.pop_due(now) {
            lateness.record(now, now - p.at);
            match self.dst.write(&p.bytes) {
                Ok(_) => {
                    stats.records_written += 1;
                    stats.bytes_written += p.bytes.len() as u64;
                    if let Some(c) = self.capture.as_mut() {
                        c.offer(now, p.bytes.get(VNET_HDR_LEN..).unwrap_or_default());
                    }
                }
                Err(e) => {
                    stats.write_errors += 1;
                    tracing::debug!("{}: {e}", self.name);
                }
            }
            pool.put(p.bytes);
            now = monotonic_now_ns();
        }
        now
    }

    /// Brings `stats` up to date and copies them where live snapshots read them.
    fn publish(
        &self,
        stats: &mut DirectionStats,
        lateness: &Lateness,
        queue: &ReleaseQueue,
        pool: &BufPool,
        now: u64,
    ) {
        stats.link = self.link.stats();
        (
            stats.lateness,
            stats.lateness_ramp,
            stats.lateness_steady,
            stats.steady_after_s,
        ) = lateness.summaries();
        stats.stalls = lateness.stalls();
        stats.backlog_max_bytes = queue.max_bytes() as u64;
        stats.pool_allocated = pool.allocated() - stats.pool_prefilled;
        stats.queue_bytes_now = self.link.backlog_bytes(Nanos(now));
        stats.arrival = self.arrivals.stats();
        if let Ok(mut live) = self.live.lock() {
            live.clone_from(stats);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_link::DropCause;
    use longhaul_packet::build;
    use longhaul_sys::MAX_RECORD_LEN;

    fn tcp_record(segments: usize) -> Vec<u8> {
        let mut spec = build::TcpSpec::new(build::Addrs::v4([10, 201, 0, 1], [10, 201, 0, 2]));
        spec.payload_len = segments * 1448;
        build::tcp_record(&spec)
    }

    /// A forwarder's buffers after a read: its pool, its release queue and the read buffer (a
    /// full-length one from the pool) holding a record at its start.
    struct Buffers {
        pool: BufPool,
        q: ReleaseQueue,
        rbuf: Vec<u8>,
    }

    impl Buffers {
        fn read(record: &[u8]) -> Self {
            let mut pool = BufPool::new();
            let mut rbuf = pool.take_full();
            rbuf[..record.len()].copy_from_slice(record);
            Self {
                pool,
                q: ReleaseQueue::new(),
                rbuf,
            }
        }

        /// [`enqueue_fates`] of the `len`-byte record in the read buffer, parsed as `p`.
        fn enqueue(&mut self, len: usize, p: &Parsed, segments: u32, fates: &[Fate]) -> bool {
            enqueue_fates(
                &mut self.rbuf,
                len,
                p,
                segments,
                fates,
                &mut self.pool,
                &mut self.q,
            )
        }
    }

    #[test]
    fn hops_decrement_ttl_and_the_expiring_hop_answers() {
        let addrs = build::Addrs::v4([10, 201, 0, 1], [10, 201, 0, 2]);
        let hops: Vec<HopStage> = (1..=3u8)
            .map(|i| HopStage {
                addrs: RouterAddrs {
                    v4: std::net::Ipv4Addr::new(10, 201, 1, i),
                    v6: std::net::Ipv6Addr::LOCALHOST,
                },
                reply_delay_ns: u64::from(i) * 10,
            })
            .collect();
        let mut reply = Vec::new();
        // TTL 64 passes all three hops and leaves with 61.
        let mut rec = build::udp_record(&addrs, 40000, 33434, 64, b"probe");
        assert_eq!(run_hops(&hops, &mut rec, &mut reply), HopsOutcome::Forward);
        let p = build::verify_record(&rec).unwrap();
        assert_eq!(rec[longhaul_sys::VNET_HDR_LEN + 8], 61);
        assert_eq!(p.payload_len, 5);
        // TTL 2 expires at the second hop, which answers from 10.201.1.2.
        for (ttl, delay, from) in [(1u8, 10, 1u8), (2, 20, 2), (3, 30, 3)] {
            let mut rec = build::udp_record(&addrs, 40000, 33434, ttl, b"probe");
            assert_eq!(
                run_hops(&hops, &mut rec, &mut reply),
                HopsOutcome::Answered { delay_ns: delay }
            );
            let r = build::verify_record(&reply).unwrap();
            assert_eq!(
                r.flow.src,
                std::net::IpAddr::from([10, 201, 1, from]),
                "TTL {ttl}"
            );
            assert_eq!(r.flow.dst, std::net::IpAddr::from([10, 201, 0, 1]));
        }
        // Not an IP packet: forwarded untouched.
        let mut junk = vec![0u8; 40];
        assert_eq!(run_hops(&hops, &mut junk, &mut reply), HopsOutcome::Forward);
        assert_eq!(junk, vec![0u8; 40]);
    }

    #[test]
    fn whole_and_split_runs_are_queued_with_their_times() {
        let buf = tcp_record(40);
        let p = parse(&buf).unwrap();
        assert_eq!(p.segments, 40);
        let r = record_of(7, &p);
        assert_eq!((r.segments, r.mss, r.payload), (40, 1448, 40 * 1448));
        let deliver = |first, count, at| Fate {
            first,
            count,
            what: What::Deliver {
                from: Nanos(at),
                at: Nanos(at),
            },
        };
        // The record sits at the start of a longer read buffer, as after a read.
        let mut b = Buffers::read(&buf);
        let ptr = b.rbuf.as_ptr();
        assert!(!b.enqueue(buf.len(), &p, 40, &[deliver(0, 40, 100)]));
        // Whole and large: the read buffer itself moved into the queue, and
        // the forwarder got another full-length one to read into.
        assert_ne!(b.rbuf.as_ptr(), ptr);
        assert_eq!(b.rbuf.len(), MAX_RECORD_LEN);
        let whole = b.q.pop_due(100).unwrap();
        assert_eq!(whole.bytes, buf);
        assert_eq!(whole.bytes.as_ptr(), ptr);
        b.pool.put(whole.bytes);

        b.rbuf[..buf.len()].copy_from_slice(&buf);
        let fates = [
            deliver(0, 1, 10),
            Fate {
                first: 1,
                count: 2,
                what: What::Drop {
                    cause: DropCause::Random,
                },
            },
            deliver(3, 37, 20),
        ];
        assert!(b.enqueue(buf.len(), &p, 40, &fates));
        assert_eq!(b.q.len(), 2);
        let first = b.q.pop_due(10).unwrap();
        let p0 = parse(&first.bytes).unwrap();
        assert_eq!((p0.segments, p0.payload_len), (1, 1448));
        let last = b.q.pop_due(20).unwrap();
        let p3 = parse(&last.bytes).unwrap();
        assert_eq!(p3.payload_len, 37 * 1448);
        assert_eq!(
            p3.tcp.unwrap().seq,
            p.tcp.unwrap().seq.wrapping_add(3 * 1448)
        );
    }

    #[test]
    fn a_duplicate_copies_and_the_last_release_takes_the_buffer() {
        let buf = tcp_record(40);
        let p = parse(&buf).unwrap();
        let mut b = Buffers::read(&buf);
        let ptr = b.rbuf.as_ptr();
        let at = |t| Nanos(t);
        let fates = [
            Fate {
                first: 0,
                count: 40,
                what: What::Deliver {
                    from: at(5),
                    at: at(5),
                },
            },
            Fate {
                first: 0,
                count: 40,
                what: What::Duplicate {
                    from: at(5),
                    at: at(5),
                },
            },
            Fate {
                first: 0,
                count: 40,
                what: What::Drop {
                    cause: DropCause::Random,
                },
            },
        ];
        assert!(!b.enqueue(buf.len(), &p, 40, &fates));
        let original = b.q.pop_due(5).unwrap();
        let duplicate = b.q.pop_due(5).unwrap();
        assert_eq!(original.bytes, buf);
        assert_eq!(duplicate.bytes, buf);
        assert_ne!(original.bytes.as_ptr(), ptr);
        assert_eq!(duplicate.bytes.as_ptr(), ptr);
        assert!(b.q.is_empty());

        // A small record (an ACK) is copied; the read buffer stays.
        let ack = tcp_record(0);
        let pa = parse(&ack).unwrap();
        b.rbuf[..ack.len()].copy_from_slice(&ack);
        let ptr = b.rbuf.as_ptr();
        let r = record_of(1, &pa);
        let fates = [Fate {
            first: 0,
            count: r.segments,
            what: What::Deliver {
                from: at(1),
                at: at(1),
            },
        }];
        b.enqueue(ack.len(), &pa, r.segments, &fates);
        assert_eq!(b.rbuf.as_ptr(), ptr);
        assert_eq!(b.q.pop_due(1).unwrap().bytes, ack);
    }
}
