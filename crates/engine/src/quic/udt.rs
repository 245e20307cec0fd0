//! `-C udt` of the UDP transport: UDT's native congestion control, the DAIMD rate control that seed
//! 002 measured beside the TCP variants on the 10 GE Amsterdam–Geneva path.
//!
//! From Gu and Grossman, "UDT: UDP-based data transfer for high-speed wide area networks",
//! Computer Networks 51(7), 2007, and the UDT specification (draft-gg-udt-03, §6):
//!
//! - the rate is controlled every SYN = 0.01 s ([`SYN`]);
//! - slow start: the window grows by what is acknowledged until the first loss (or the flow's
//!   largest window), then the sending rate starts at the rate packets arrived at;
//! - increase, each SYN without a loss: `inc = max(10^⌈log10(B·MSS·8)⌉ · β / MSS, 1/MSS)` packets
//!   a SYN, β = 1.5 × 10⁻⁶ ([`BETA`]), B the link's spare capacity in packets a second (its
//!   capacity less the current rate; at most a ninth of the capacity while the rate is above the
//!   last decrease's); the increase is large far below the capacity and one byte a SYN at it;
//! - decrease, on a loss of a packet sent after the last decrease (a new congestion epoch): the
//!   packet period × 1.125 ([`DECREASE`]: the rate × 8/9);
//! - the flow window `W = W·0.875 + AS·(RTT + SYN)·0.125` (seed 002), AS the arrival rate.
//!
//! What QUIC changes:
//! - **The capacity** is measured as UDT measures it, by the dispersion of packets sent back to back
//!   (packet pairs), but from the acknowledgements at the sender: quinn's pacer sends bursts of 10
//!   or more packets at once, the bottleneck spaces them at its rate, and the receiver's
//!   acknowledgements come back as spaced. An acknowledgement whose packets were sent in less than
//!   half the time it took after the one before gives a sample, bytes over that time; the capacity
//!   is the median of the last [`CAPACITY_SAMPLES`] (UDT's receiver keeps 16 packet-pair
//!   intervals and takes their median too). It does not follow the sending rate, which is what
//!   the increase needs: a capacity taken from the delivery rate equals the rate and leaves an
//!   increase of one byte a SYN (measured: 1 Mbit/s on a clean 1 Gbit/s path).
//! - **Within an epoch**, UDT decreases again every `DecRandom` loss reports (at most 5 times); quinn
//!   reports one congestion event per recovery period and not the losses within it, so there is
//!   one decrease per epoch.
//! - **The rate** is carried by the window: quinn paces at 1.25 × window ÷ smoothed RTT and sends no
//!   more than the window per round trip, so a window of rate × smoothed RTT (plus the hosts' own
//!   delay) sends at the rate whatever queue builds, never more than the flow window.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn::congestion::{Controller, ControllerFactory};
use quinn_proto::RttEstimator;

use super::controller::{Quinn, WindowControl};

/// UDT's rate-control interval.
pub(crate) const SYN: Duration = Duration::from_millis(10);
/// UDT's increase parameter β (the increase is β × 10^⌈log10(spare bit/s)⌉ ÷ MSS packets a SYN).
pub(crate) const BETA: f64 = 0.000_001_5;
/// UDT's decrease: the packet period grows by 1/8 (the rate falls to 8/9).
pub(crate) const DECREASE: f64 = 1.125;
/// Dispersion samples whose median is the capacity (UDT's 16).
pub(crate) const CAPACITY_SAMPLES: usize = 16;
/// The fewest packets a train must carry beyond its first acknowledgement to give a sample:
/// acknowledgements of one or two are spaced as much by the hosts' scheduling as by the link. Four
/// leaves samples to a window of ten packets (slow start ended early by a loss).
const MIN_TRAIN_PACKETS: u32 = 4;
/// The shortest train that gives a sample: acknowledgements read in one batch come back at once.
const MIN_TRAIN_SPAN: Duration = Duration::from_micros(50);
/// Time at the rate the window holds beyond a round trip: the delay the hosts add (see the
/// same allowance in `model`).
const HOST_DELAY: Duration = Duration::from_millis(2);
/// The smallest window, in full-sized packets.
const MIN_WINDOW_PACKETS: u64 = 4;

/// UDT's packets per SYN to add when the link has `spare_bps` bit/s above the current rate, for
/// packets of `mss` bytes.
pub(crate) fn increase_packets(spare_bps: f64, mss: f64) -> f64 {
    if spare_bps <= 0.0 {
        return 1.0 / mss;
    }
    (10f64.powf(spare_bps.log10().ceil()) * BETA / mss).max(1.0 / mss)
}

/// The link's capacity from the dispersion of acknowledgements for packets sent back to back.
#[derive(Debug, Clone, Default)]
pub(crate) struct Dispersion {
    /// The acknowledgement being gathered: when it came, what it acknowledged, and the latest
    /// send time among its packets.
    event: Option<(Instant, u32, u64, Instant)>,
    /// The train under way: acknowledgements of one burst.
    train: Option<Train>,
    samples: VecDeque<f64>,
}

/// Acknowledgements of packets that left in one burst: they came back spaced by the bottleneck.
#[derive(Debug, Clone, Copy)]
struct Train {
    /// When its first acknowledgement came, and the latest send time that one acknowledged.
    first_at: Instant,
    first_sent: Instant,
    /// Packets and bytes acknowledged after the first acknowledgement, and when the last one
    /// came.
    packets: u32,
    bytes: u64,
    last_at: Instant,
}

impl Dispersion {
    /// One packet acknowledged at `now` (all of one acknowledgement share `now`), sent at `sent`.
    pub(crate) fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64) {
        match &mut self.event {
            Some((at, n, b, latest)) if *at == now => {
                *n += 1;
                *b += bytes;
                *latest = (*latest).max(sent);
            }
            _ => {
                self.end_ack();
                self.event = Some((now, 1, bytes, sent));
            }
        }
    }

    /// The end of an acknowledgement. It belongs to the train under way if its packets left within
    /// half the time since the train's first acknowledgement (they were sent at least twice as
    /// fast as they came back: queued at the bottleneck, not paced); otherwise the train ends,
    /// giving a sample of its bytes over its time, and this acknowledgement starts the next.
    pub(crate) fn end_ack(&mut self) {
        let Some((now, packets, bytes, latest)) = self.event.take() else {
            return;
        };
        if let Some(t) = &mut self.train {
            let elapsed = now.saturating_duration_since(t.first_at);
            if latest.saturating_duration_since(t.first_sent) * 2 <= elapsed {
                t.packets += packets;
                t.bytes += bytes;
                t.last_at = now;
                return;
            }
            let span = t.last_at.saturating_duration_since(t.first_at);
            if t.packets >= MIN_TRAIN_PACKETS && span >= MIN_TRAIN_SPAN {
                if self.samples.len() == CAPACITY_SAMPLES {
                    self.samples.pop_front();
                }
                self.samples.push_back(t.bytes as f64 / span.as_secs_f64());
            }
        }
        self.train = Some(Train {
            first_at: now,
            first_sent: latest,
            packets: 0,
            bytes: 0,
            last_at: now,
        });
    }

    /// The capacity, bytes/s: the median of the samples within 8× of it (UDT's filter), or 0
    /// before any sample.
    pub(crate) fn capacity(&self) -> f64 {
        let median = |v: &mut Vec<f64>| -> f64 {
            if v.is_empty() {
                return 0.0;
            }
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let mut all: Vec<f64> = self.samples.iter().copied().collect();
        let m = median(&mut all);
        let mut near: Vec<f64> = all
            .into_iter()
            .filter(|s| *s <= 8.0 * m && *s >= m / 8.0)
            .collect();
        median(&mut near)
    }
}

/// The controller's state, independent of quinn's types.
#[derive(Debug, Clone)]
pub(crate) struct Udt {
    mss: f64,
    initial_window: u64,
    /// The flow's largest window (its flow-control window): slow start ends there too.
    max_window: u64,
    /// Slow start's window, bytes, until it ends.
    slow_start: Option<u64>,
    /// The sending rate after slow start, bytes/s.
    rate: f64,
    /// The rate before the last decrease, bytes/s.
    last_decrease_rate: f64,
    /// The flow window, bytes.
    flow_window: f64,
    link: Dispersion,
    last_tick: Option<Instant>,
    loss_since_tick: bool,
    /// When the last decrease was: a loss of a packet sent after it opens a new epoch.
    last_decrease: Option<Instant>,
    /// The arrival rate over the last round, bytes/s, and the round under way.
    arrival: f64,
    round_start: Option<Instant>,
    round_delivered: u64,
    srtt: Duration,
}

impl Udt {
    pub(crate) fn new(initial_window: u64, max_window: u64, mss: u16) -> Self {
        Self {
            mss: f64::from(mss),
            initial_window,
            max_window: max_window.max(initial_window),
            slow_start: Some(initial_window),
            rate: 0.0,
            last_decrease_rate: 0.0,
            flow_window: initial_window as f64,
            link: Dispersion::default(),
            last_tick: None,
            loss_since_tick: false,
            last_decrease: None,
            arrival: 0.0,
            round_start: None,
            round_delivered: 0,
            srtt: Duration::from_millis(100),
        }
    }

    /// The sending rate, bytes/s (0 in slow start).
    #[cfg(test)]
    pub(crate) fn rate(&self) -> f64 {
        self.rate
    }

    /// The link's capacity as measured, bytes/s.
    pub(crate) fn capacity(&self) -> f64 {
        self.link.capacity()
    }

    pub(crate) fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64, srtt: Duration) {
        self.srtt = srtt;
        self.link.on_ack(now, sent, bytes);
        if let Some(w) = &mut self.slow_start {
            *w += bytes;
        }
        let Some(start) = self.round_start else {
            // The first acknowledgement opens the first round; what it acknowledged came before.
            self.round_start = Some(now);
            return;
        };
        self.round_delivered += bytes;
        let elapsed = now.saturating_duration_since(start);
        if elapsed >= srtt.max(SYN) {
            self.arrival = self.round_delivered as f64 / elapsed.as_secs_f64();
            let span = (srtt + SYN).as_secs_f64();
            self.flow_window = self.flow_window * 0.875 + self.arrival * span * 0.125;
            self.round_start = Some(now);
            self.round_delivered = 0;
        }
    }

    /// After each acknowledgement: the capacity sample, the end of slow start at the largest
    /// window, and every SYN without a loss UDT's increase.
    pub(crate) fn on_end_acks(&mut self, now: Instant) {
        self.link.end_ack();
        if self.slow_start.is_some_and(|w| w >= self.max_window) {
            self.leave_slow_start();
        }
        let last = *self.last_tick.get_or_insert(now);
        if now.saturating_duration_since(last) < SYN {
            return;
        }
        self.last_tick = Some(now);
        if std::mem::take(&mut self.loss_since_tick) || self.slow_start.is_some() {
            return;
        }
        let capacity = self.capacity();
        let mut spare = capacity - self.rate;
        if self.rate > self.last_decrease_rate && capacity / 9.0 < spare {
            spare = capacity / 9.0;
        }
        let inc = increase_packets(spare * 8.0, self.mss);
        self.rate += inc * self.mss / SYN.as_secs_f64();
    }

    fn leave_slow_start(&mut self) {
        if self.slow_start.take().is_some() {
            // The arrival rate, or before a round was measured the flow window's rate.
            self.rate = if self.arrival > 0.0 {
                self.arrival
            } else {
                self.flow_window / (self.srtt + SYN).as_secs_f64()
            };
        }
    }

    /// A congestion event for a packet sent at `sent`.
    pub(crate) fn on_loss(&mut self, now: Instant, sent: Instant, persistent: bool) {
        self.loss_since_tick = true;
        if persistent {
            let link = std::mem::take(&mut self.link);
            *self = Self {
                link,
                ..Self::new(self.initial_window, self.max_window, self.mss as u16)
            };
            return;
        }
        if let Some(w) = &mut self.slow_start {
            if self.link.samples.is_empty() {
                // Nothing measured of the link yet (a loss in the first round trips: too few
                // packets in flight for a train): UDT's increase would have nothing to climb
                // towards, so slow start goes on from half the window, as TCP's would.
                *w = (*w / 2).max(self.initial_window);
            } else {
                self.leave_slow_start();
            }
            return;
        }
        if self.last_decrease.is_none_or(|d| sent > d) {
            self.last_decrease_rate = self.rate;
            self.rate /= DECREASE;
            self.last_decrease = Some(now);
        }
    }

    /// The window quinn sends under: slow start's, then the rate over a round trip and the hosts'
    /// delay, never above the flow window's twice.
    pub(crate) fn window(&self) -> u64 {
        let floor = self
            .initial_window
            .max(MIN_WINDOW_PACKETS * self.mss as u64);
        let w = match self.slow_start {
            Some(w) => w as f64,
            None => {
                let by_rate = self.rate * (self.srtt + HOST_DELAY).as_secs_f64();
                by_rate.min(2.0 * self.flow_window)
            }
        };
        (w as u64).clamp(floor, self.max_window.max(floor))
    }
}

impl WindowControl for Udt {
    fn acked(&mut self, now: Instant, sent: Instant, bytes: u64, rtt: &RttEstimator) {
        self.on_ack(now, sent, bytes, rtt.get());
    }

    fn acks_ended(&mut self, now: Instant, _in_flight: u64, _app_limited: bool) {
        self.on_end_acks(now);
    }

    fn congested(&mut self, now: Instant, sent: Instant, persistent: bool, _lost_bytes: u64) {
        self.on_loss(now, sent, persistent);
    }

    fn mtu_changed(&mut self, mtu: u16) {
        self.mss = f64::from(mtu);
    }

    fn current_window(&self) -> u64 {
        self.window()
    }

    fn first_window(&self) -> u64 {
        self.initial_window
    }
}

/// Makes a [`Udt`] per connection, as quinn's controller.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UdtFactory {
    pub(crate) initial_window: u64,
    /// The flow-control window: the most a connection may have in flight.
    pub(crate) max_window: u64,
}

impl ControllerFactory for UdtFactory {
    fn build(self: Arc<Self>, _now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Quinn(Udt::new(
            self.initial_window,
            self.max_window,
            current_mtu,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u16 = 1472;

    #[test]
    fn the_increase_is_udts_table() {
        // UDT's paper, Table 1: with 1,500-byte packets, the increase per SYN by spare bandwidth.
        let mss = 1500.0;
        let inc = |mbps: f64| increase_packets(mbps * 1e6, mss) * mss;
        assert!((inc(1_000.0) - 1500.0).abs() < 1e-6, "{}", inc(1_000.0)); // 1 packet
        assert!((inc(150.0) - 1500.0).abs() < 1e-6); // ⌈log10(1.5e8)⌉ = 9: 1 packet
        assert!((inc(50.0) - 150.0).abs() < 1e-6); // 0.1 packet
        assert!((inc(10_000.0) - 15_000.0).abs() < 1e-6); // 10 packets
        assert!((inc(0.5) - 1.5).abs() < 1e-9); // 0.001 packet: 1.5 bytes
        assert_eq!(increase_packets(0.0, mss), 1.0 / mss);
        assert_eq!(increase_packets(-5e6, mss), 1.0 / mss);
    }

    /// A link of `capacity` bytes/s with a one-way delay of half `rtt`, fed by bursts of `burst`
    /// packets sent at once every `period`: each burst's packets are acknowledged two at a time as
    /// the link delivers them.
    fn bursts(
        link: &mut Dispersion,
        t0: Instant,
        capacity: f64,
        burst: u32,
        period: Duration,
        n: u32,
    ) {
        let pkt = u64::from(MSS);
        let serial = Duration::from_secs_f64(pkt as f64 / capacity);
        for i in 0..n {
            let sent = t0 + period * i;
            for k in (0..burst).step_by(2) {
                let now = sent + Duration::from_millis(60) + serial * (k + 2);
                link.on_ack(now, sent, pkt);
                link.on_ack(now, sent, pkt);
                link.end_ack();
            }
        }
    }

    #[test]
    fn the_capacity_is_the_links_whatever_the_rate() {
        // 1 Gbit/s, sent at a tenth of it (10-packet bursts every 1.2 ms) and at nearly all of it.
        for period_us in [1_200, 130] {
            let mut link = Dispersion::default();
            bursts(
                &mut link,
                Instant::now(),
                125e6,
                10,
                Duration::from_micros(period_us),
                100,
            );
            let c = link.capacity();
            assert!((c / 125e6 - 1.0).abs() < 0.02, "{period_us} µs: {c}");
        }
    }

    #[test]
    fn evenly_paced_packets_give_no_sample() {
        // One packet every 24 µs at a 125 MB/s link (12 µs each): the acknowledgements follow the
        // sending, not the link.
        let mut link = Dispersion::default();
        let t0 = Instant::now();
        for i in 0..1000u32 {
            let sent = t0 + Duration::from_micros(24) * i;
            link.on_ack(sent + Duration::from_millis(60), sent, u64::from(MSS));
            link.end_ack();
        }
        assert_eq!(link.capacity(), 0.0);
    }

    #[test]
    fn an_outlier_does_not_move_the_capacity() {
        let mut link = Dispersion::default();
        let t0 = Instant::now();
        let pkt = u64::from(MSS);
        bursts(&mut link, t0, 125e6, 10, Duration::from_millis(1), 20);
        let before = link.capacity();
        // A receiver that read a burst late acknowledges 40 packets 60 µs after the first...
        let at = t0 + Duration::from_secs(1);
        let sent = at - Duration::from_millis(60);
        link.on_ack(at, sent, pkt);
        for _ in 0..40 {
            link.on_ack(at + Duration::from_micros(60), sent, pkt);
        }
        link.end_ack();
        // ... and the next burst's first acknowledgement ends that train.
        link.on_ack(
            at + Duration::from_millis(1),
            sent + Duration::from_millis(1),
            pkt,
        );
        link.end_ack();
        assert_eq!(link.samples.len(), CAPACITY_SAMPLES);
        assert!(link.samples.back().is_some_and(|s| *s > 7.0 * 125e6));
        assert_eq!(link.capacity(), before);
    }

    /// Slow start ended by a loss at 100 MB/s on a link of 125 MB/s.
    fn started() -> (Udt, Instant) {
        let t0 = Instant::now();
        let mut u = Udt::new(14_720, 1 << 30, MSS);
        bursts(&mut u.link, t0, 125e6, 10, Duration::from_millis(1), 20);
        // Three seconds of it: the flow window, smoothed by an eighth a round, has caught up.
        let mut now = t0;
        for _ in 0..300 {
            now += SYN;
            u.on_ack(now, now, 1_000_000, Duration::from_millis(100));
            u.on_end_acks(now);
        }
        u.on_loss(now, now - Duration::from_millis(50), false);
        (u, now)
    }

    #[test]
    fn the_first_loss_ends_slow_start_at_the_arrival_rate() {
        let (u, _) = started();
        assert!((u.rate() / 1e8 - 1.0).abs() < 0.01, "{}", u.rate());
        // The window carries the rate over a round trip (100 ms) and the hosts' delay.
        assert!(
            (u.window() as f64 / (1e8 * 0.102) - 1.0).abs() < 0.01,
            "{}",
            u.window()
        );
    }

    #[test]
    fn slow_start_ends_at_the_largest_window_without_a_loss() {
        let mut u = Udt::new(14_720, 1_000_000, MSS);
        let mut now = Instant::now();
        for _ in 0..200 {
            now += SYN;
            u.on_ack(now, now, 10_000, Duration::from_millis(100));
            u.on_end_acks(now);
        }
        assert!(u.slow_start.is_none());
        assert!(u.rate() > 0.0);
        assert!(u.window() <= 1_000_000);
    }

    #[test]
    fn a_new_epoch_decreases_by_one_ninth_and_an_old_one_not_again() {
        let (mut u, mut now) = started();
        now += Duration::from_millis(200);
        let before = u.rate();
        // A packet sent after the last decrease: a new epoch.
        u.on_loss(now, now - Duration::from_millis(100), false);
        assert!((u.rate() - before / DECREASE).abs() < 1.0);
        let epoch = u.rate();
        // Losses of packets sent before it are the same epoch.
        for _ in 0..100 {
            u.on_loss(now, now - Duration::from_secs(1), false);
        }
        assert_eq!(u.rate(), epoch);
    }

    #[test]
    fn without_loss_it_climbs_to_the_capacity_fast_far_below_and_slowly_near_it() {
        let (mut u, mut now) = started();
        let mut rates = Vec::new();
        for _ in 0..1000 {
            now += SYN;
            u.on_end_acks(now);
            rates.push(u.rate());
        }
        // Above the last decrease the spare counts for at most a ninth of 1 Gbit/s: 10^9 × β =
        // 1,500 bytes a SYN, +15 MB/s a second, then less as the spare falls below 100 Mbit/s.
        assert!(rates[99] > 110e6 && rates[99] < 118e6, "{}", rates[99]);
        // Within 10 Mbit/s of the capacity the increase is 15 bytes a SYN: it creeps, never
        // overshoots.
        assert!(rates[999] > 123e6, "{}", rates[999]);
        assert!(rates[999] < 125.5e6, "{}", rates[999]);
    }

    #[test]
    fn persistent_congestion_starts_slow_start_again_and_keeps_the_capacity() {
        let (mut u, now) = started();
        let capacity = u.capacity();
        u.on_loss(now, now, true);
        assert!(u.slow_start.is_some());
        assert_eq!(u.window(), 14_720.max(4 * u64::from(MSS)));
        assert_eq!(u.capacity(), capacity);
    }
}
