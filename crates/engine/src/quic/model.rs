//! `-C bbr` of the UDP transport: a model-based controller after BBR (Cardwell, Cheng, Gunn,
//! Hassas Yeganeh and Jacobson, "BBR: Congestion-Based Congestion Control", ACM Queue 14(5), 2016).
//!
//! It keeps a model of the path: the bottleneck's rate (the highest delivery rate of the last
//! [`BW_ROUNDS`] rounds) and the round trip without a queue (the lowest RTT seen), and holds one
//! bandwidth-delay product in flight, probing for more one round in eight ([`GAINS`]). A loss alone
//! says nothing to it: on a long path with random loss (a dirty fibre, a radio hop) a loss-based
//! controller falls as Mathis's model says, this one keeps the rate the path delivers. Only a round
//! that loses more than [`LOSS_THRESHOLD`] of what it sent (BBRv2's 2 %: a queue overflowing, not
//! noise) brings the model down to what that round delivered.
//!
//! quinn paces every connection at 1.25 × window ÷ smoothed RTT, so the window is the one knob: set
//! to gain × rate × lowest RTT, the connection carries gain × rate while no queue builds, and less
//! as one does. quinn's own `BbrConfig` (its startup gain of 2.89 with a window of twice the BDP)
//! lost a third of its packets on an emulated 120 ms, 1 Gbit/s path with 1 % loss; see
//! docs/transport.md.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn::congestion::{Controller, ControllerFactory};
use quinn_proto::RttEstimator;

use super::controller::{Quinn, WindowControl};

/// Rounds over which the highest delivery rate is the bottleneck's (BBR's 10).
pub(crate) const BW_ROUNDS: usize = 10;
/// The window's gain in each round of a probing cycle: one round above the model to find more
/// room, one below to drain what it queued, six at the model.
pub(crate) const GAINS: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// The share of a round's packets it may lose before the model comes down (BBRv2's `loss_thresh`).
pub(crate) const LOSS_THRESHOLD: f64 = 0.02;
/// The fewest packets a round must lose to count as lossy: with a few dozen packets in flight, one
/// random loss is already above [`LOSS_THRESHOLD`].
const MIN_LOSSES: u64 = 8;
/// Startup ends when three rounds in a row raised the rate by less than this factor (BBR's 1.25).
const STARTUP_GROWTH: f64 = 1.25;
const STARTUP_FLAT_ROUNDS: u32 = 3;
/// Packets a startup round must deliver before its rate counts for the growth check.
const STARTUP_MIN_PACKETS: u64 = 200;
/// Startup also ends on the round whose lowest RTT is above the last round's by an eighth of the
/// connection's lowest, within these bounds (RFC 9406, HyStart++: `MIN_RTT_THRESH`,
/// `MAX_RTT_THRESH`, `MIN_RTT_DIVISOR`): a queue is forming, because the pipe is full or because
/// another flow is filling it. Beside a CUBIC flow in its own slow start, a startup that went on
/// (to 2.9 times the product) filled the queue itself, cut CUBIC's slow start short and kept 70-87 %
/// of a 1 Gbit/s bottleneck for the minute.
const DELAY_RISE_MIN: Duration = Duration::from_millis(4);
const DELAY_RISE_MAX: Duration = Duration::from_millis(16);
/// Startup's window is at most this many times the model's bandwidth-delay product: BBR's 2 / ln 2,
/// the least that doubles what is delivered each round trip when the model is the delivered rate
/// (half of what is sent while it doubles).
const STARTUP_GAIN: f64 = 2.885;
/// The most a lossy round lowers the model (BBRv2's `beta` is 0.7 of the window in flight).
const BETA: f64 = 0.85;
/// Rounds over which the lowest RTT is the path's ([`Model::path_rtt`]): two probing cycles.
const RTT_ROUNDS: usize = 2 * GAINS.len();
/// A round whose lowest RTT is this many times the connection's lowest ran behind a standing
/// queue: a loss in it is the queue overflowing, not noise.
const QUEUED_RTT: f64 = 1.25;
/// Packets the window holds beyond the model, for acknowledgements that come in batches.
const HEADROOM_PACKETS: u64 = 4;
/// The smallest window, in full-sized packets (BBR's 4). A receiver acknowledges every second
/// packet at once and a lone one only after its acknowledgement delay (25 ms by default): a
/// window of large packets that holds fewer than two (RFC 9002's initial window is two packets
/// of 9,000 bytes) sends one per 25 ms, measured on loopback as 3 Mbit/s that startup never left.
const MIN_WINDOW_PACKETS: u64 = 4;
/// The share of the bandwidth-delay product the window holds beyond the model. quinn paces at
/// the window over the smoothed RTT, so the window is also the rate: a round trip a few percent
/// longer than the lowest (the hosts' own delay, acknowledgements held back, a busy CPU) would
/// carry as many percent less. BBR holds twice the product for the same reason; a tenth costs a
/// queue of at most a tenth of the RTT where the bottleneck is full.
const HEADROOM_SHARE: f64 = 0.1;
/// Time at the model's rate the window also holds beyond the model: the delay the hosts add to
/// a round trip (acknowledgements held back, a scheduler's wake-up), which on a short path is
/// many times the path's own RTT. A window of the bare product there carries a fraction of the
/// rate, and the model follows the rounds down (measured on loopback: 3 Mbit/s).
const HOST_DELAY: Duration = Duration::from_millis(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Doubling each round (the window grows by what is acknowledged) until the rate stops growing.
    Startup,
    /// One round below the model, to drain what startup queued.
    Drain,
    /// Cycling through [`GAINS`].
    Cruise { cycle: usize },
}

/// The controller's state, independent of quinn's types so that it can be driven by a model of a
/// path in the tests.
#[derive(Debug, Clone)]
pub(crate) struct Model {
    mtu: u64,
    initial_window: u64,
    window: u64,
    phase: Phase,
    /// The highest delivery rate of each of the last rounds, bytes/s.
    rates: Vec<f64>,
    /// Bytes acknowledged since the start.
    delivered: u64,
    round_start: Option<Instant>,
    round_delivered: u64,
    round_lost: u64,
    /// Whether quinn declared a congestion event (a loss after the last one's recovery) in the
    /// round.
    round_congested: bool,
    /// The rate at the last growth check of startup, and rounds since it grew.
    full_rate: f64,
    flat_rounds: u32,
    /// Whether a startup round saw its lowest RTT rise (HyStart++'s delay increase).
    startup_done: bool,
    /// Whether an overflowed round cut the model in this probing cycle.
    cut_in_cycle: bool,
    min_rtt: Option<Duration>,
    /// quinn's smoothed RTT at the last acknowledgement.
    srtt: Option<Duration>,
    /// The lowest RTT sample of the round under way, and of each of the last [`RTT_ROUNDS`].
    round_min_rtt: Option<Duration>,
    rtt_mins: std::collections::VecDeque<Duration>,
}

impl Model {
    pub(crate) fn new(initial_window: u64, mtu: u16) -> Self {
        Self {
            mtu: u64::from(mtu),
            initial_window,
            window: initial_window.max(MIN_WINDOW_PACKETS * u64::from(mtu)),
            phase: Phase::Startup,
            rates: Vec::with_capacity(BW_ROUNDS),
            delivered: 0,
            round_start: None,
            round_delivered: 0,
            round_lost: 0,
            round_congested: false,
            full_rate: 0.0,
            flat_rounds: 0,
            startup_done: false,
            cut_in_cycle: false,
            min_rtt: None,
            srtt: None,
            round_min_rtt: None,
            rtt_mins: std::collections::VecDeque::with_capacity(RTT_ROUNDS),
        }
    }

    /// The bottleneck's rate as the model has it, bytes/s.
    pub(crate) fn rate(&self) -> f64 {
        self.rates.iter().copied().fold(0.0, f64::max)
    }

    /// The bandwidth-delay product of the model: its rate over the path's RTT without this
    /// flow's queue ([`Self::path_rtt`]).
    fn bdp(&self) -> f64 {
        self.rate() * self.path_rtt().map_or(0.0, |r| r.as_secs_f64())
    }

    /// The lowest RTT of the last [`RTT_ROUNDS`] rounds. Each probing cycle drains this flow's
    /// own queue, so alone on a path this is the bare RTT; behind a queue this flow did not make
    /// (a loss-based flow beside it keeps the bottleneck's buffer full) it is that queue's RTT, and
    /// the window covers it: quinn paces at the window over the smoothed RTT, so a window of the
    /// bare product would halve the rate behind a queue of one RTT, the rounds would deliver half,
    /// and the model would follow them down to nothing. (BBR's minimum RTT expires after 10 s for
    /// the same reason.)
    fn path_rtt(&self) -> Option<Duration> {
        self.rtt_mins.iter().copied().min().or(self.min_rtt)
    }

    /// Bytes acknowledged (`bytes`, sent at `sent`), with the lowest and the smoothed RTT of the
    /// connection.
    pub(crate) fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        min_rtt: Duration,
        srtt: Duration,
    ) {
        self.delivered += bytes;
        self.srtt = Some(srtt);
        let sample = now.saturating_duration_since(sent);
        self.round_min_rtt = Some(self.round_min_rtt.map_or(sample, |m| m.min(sample)));
        self.min_rtt = Some(self.min_rtt.map_or(min_rtt, |m| m.min(min_rtt)));
        if self.round_start.is_none() {
            // The first acknowledgement opens the first round; what it acknowledged came before.
            self.round_start = Some(now);
            self.round_delivered = self.delivered;
        }
        if self.phase == Phase::Startup {
            // Doubling each round, but never past twice what the model says the path holds:
            // the model lags a round behind, so that is still a doubling until the rate stops
            // growing. The product is over the smoothed RTT here, the one the rounds' rate was
            // measured over: where the hosts' delay makes it many times the path's lowest, a cap
            // over the lowest would hold the window below what it already carries.
            //
            // The model is the rates of rounds that ended, each of what was sent a round before
            // it: capped at twice that, the window grew √2 a round. What this round has
            // delivered so far (once it is half a round old, so that one early batch of
            // acknowledgements does not count for a rate) is a round fresher, and the window
            // doubles again.
            let rtt = self.path_rtt().max(self.srtt).unwrap_or_default();
            let running = self
                .round_start
                .map(|start| now.saturating_duration_since(start))
                .filter(|elapsed| *elapsed >= rtt / 2 && !elapsed.is_zero())
                .map_or(0.0, |elapsed| {
                    (self.delivered - self.round_delivered) as f64 / elapsed.as_secs_f64()
                });
            let cap = STARTUP_GAIN * self.rate().max(running) * rtt.as_secs_f64();
            self.window += bytes;
            if cap > 0.0 {
                self.window = self.window.min(cap as u64).max(self.min_window());
            }
        }
    }

    /// Bytes declared lost.
    pub(crate) fn on_loss(&mut self, bytes: u64, persistent: bool) {
        self.round_lost += bytes;
        self.round_congested = true;
        if persistent {
            // Everything in flight for a while was lost: the model is void, start again.
            *self = Self::new(self.initial_window, self.mtu as u16);
        }
    }

    /// The end of a batch of acknowledgements, with `in_flight` bytes unacknowledged: a round
    /// ends once one smoothed RTT has passed since it began. A draining round (gain below one)
    /// ends as soon as the flight is down to the model's bandwidth-delay product, as BBR's does:
    /// a whole round at three quarters of the rate would cost a quarter of a round's data each
    /// cycle once the queue is gone.
    pub(crate) fn on_end_acks(
        &mut self,
        now: Instant,
        srtt: Duration,
        in_flight: u64,
        app_limited: bool,
    ) {
        let Some(start) = self.round_start else {
            return;
        };
        if self.gain() < 1.0 && (in_flight as f64) <= self.bdp() {
            self.phase = self.next_phase(false, 0);
            self.set_window();
            return;
        }
        let elapsed = now.saturating_duration_since(start);
        if elapsed < srtt.max(Duration::from_millis(1)) {
            return;
        }
        let delivered = self.delivered - self.round_delivered;
        let rate = delivered as f64 / elapsed.as_secs_f64();
        let lost = self.round_lost;
        let lost_share = lost as f64 / (delivered + lost).max(1) as f64;
        self.round_start = Some(now);
        self.round_delivered = self.delivered;
        self.round_lost = 0;
        let congested = std::mem::take(&mut self.round_congested);
        let mut queued = false;
        let mut delay_rose = false;
        if let Some(rtt) = self.round_min_rtt.take() {
            queued = self
                .min_rtt
                .is_some_and(|min| rtt.as_secs_f64() > QUEUED_RTT * min.as_secs_f64());
            if let (Some(last), Some(min)) = (self.rtt_mins.back(), self.min_rtt) {
                delay_rose = rtt >= *last + (min / 8).clamp(DELAY_RISE_MIN, DELAY_RISE_MAX);
            }
            if self.rtt_mins.len() == RTT_ROUNDS {
                self.rtt_mins.pop_front();
            }
            self.rtt_mins.push_back(rtt);
        }
        let overflowed = congested && queued;
        if self.phase == Phase::Startup && delay_rose && delivered >= STARTUP_MIN_PACKETS * self.mtu
        {
            // A queue is forming: the pipe is full, or another flow is filling it.
            self.startup_done = true;
        }
        self.end_round(rate, delivered, lost, lost_share, overflowed, app_limited);
        tracing::debug!(rate, lost_share, app_limited, elapsed = ?elapsed, model = self.rate(), window = self.window, phase = ?self.phase, "round");
    }

    fn end_round(
        &mut self,
        rate: f64,
        delivered: u64,
        lost: u64,
        lost_share: f64,
        overflowed: bool,
        app_limited: bool,
    ) {
        // A round is lossy when it lost more than random loss would (BBRv2's threshold), or lost
        // anything behind a standing queue (a loss-based flow beside this one filled the buffer:
        // coming down as it does leaves it its share).
        let lossy = (lost_share > LOSS_THRESHOLD && lost >= MIN_LOSSES * self.mtu) || overflowed;
        if lossy {
            // A queue overflowed: the model comes down to what this round delivered, by at most
            // BETA a round (a round recovering its losses delivers less than the path holds).
            // Behind a queue that overflowed (a loss-based flow beside this one filled the
            // buffer), by BETA whatever the round delivered, once a probing cycle, as that flow
            // comes down once on the same losses: holding the rate the round delivered, it kept
            // three quarters of the bottleneck from a CUBIC flow that came after it; cut on every
            // such round, it kept a tenth.
            let model = if overflowed && !self.cut_in_cycle {
                self.cut_in_cycle = true;
                BETA * self.rate()
            } else {
                rate.max(BETA * self.rate())
            };
            self.rates.clear();
            self.rates.push(model);
        } else if !app_limited || rate > self.rate() {
            // Only the probing round and the two after it (whose acknowledgements carry what it
            // sent above the model) may raise the model, as in BBR, whose pacing holds every other
            // round to the model. Here the window is the only knob and holds a headroom above the
            // model, so behind a queue that another flow keeps full (the path RTT includes it) a
            // cruising round delivers up to the headroom more than the model: counted, the model
            // would grow by it every round and take the buffer from a CUBIC flow beside it.
            let rate = if self.probing() {
                rate
            } else {
                rate.min(self.rate())
            };
            if self.rates.len() == BW_ROUNDS {
                self.rates.remove(0);
            }
            self.rates.push(rate);
        }
        self.phase = self.next_phase(lossy, delivered);
        if self.phase == (Phase::Cruise { cycle: 0 }) {
            self.cut_in_cycle = false;
        }
        self.set_window();
    }

    /// Whether a round ending now may raise the model: startup and its drain, and the probing
    /// round of a cycle with the two after it.
    fn probing(&self) -> bool {
        match self.phase {
            Phase::Startup | Phase::Drain => true,
            Phase::Cruise { cycle } => cycle <= 2,
        }
    }

    /// The window's gain in the current phase (none in startup).
    fn gain(&self) -> f64 {
        match self.phase {
            Phase::Startup => 1.0,
            Phase::Drain => GAINS[1],
            Phase::Cruise { cycle } => GAINS[cycle],
        }
    }

    /// The phase after a round that was `lossy` and `delivered` bytes.
    fn next_phase(&mut self, lossy: bool, delivered: u64) -> Phase {
        match self.phase {
            Phase::Startup if lossy || self.startup_done => Phase::Drain,
            // A round of a few dozen packets says little (one burst acknowledged early reads
            // as a high rate): the growth check starts once a round carries enough.
            Phase::Startup if delivered < STARTUP_MIN_PACKETS * self.mtu => Phase::Startup,
            Phase::Startup => {
                let best = self.rate();
                if best >= self.full_rate * STARTUP_GROWTH {
                    self.full_rate = best;
                    self.flat_rounds = 0;
                } else {
                    self.flat_rounds += 1;
                }
                if self.flat_rounds >= STARTUP_FLAT_ROUNDS {
                    Phase::Drain
                } else {
                    Phase::Startup
                }
            }
            Phase::Drain => Phase::Cruise { cycle: 2 },
            Phase::Cruise { cycle } => Phase::Cruise {
                cycle: (cycle + 1) % GAINS.len(),
            },
        }
    }

    /// The window of the phase: its gain times the model's bandwidth-delay product (startup's
    /// grows as it is acknowledged instead).
    fn set_window(&mut self) {
        if self.phase == Phase::Startup {
            return;
        }
        let headroom = (HEADROOM_PACKETS * self.mtu)
            .max((HEADROOM_SHARE * self.bdp()) as u64)
            .max((self.rate() * HOST_DELAY.as_secs_f64()) as u64);
        self.window = ((self.gain() * self.bdp()) as u64 + headroom).max(self.min_window());
    }

    /// The window's floor: the initial window, and at least [`MIN_WINDOW_PACKETS`] packets.
    fn min_window(&self) -> u64 {
        self.initial_window.max(MIN_WINDOW_PACKETS * self.mtu)
    }

    pub(crate) fn window(&self) -> u64 {
        self.window
    }
}

impl WindowControl for Model {
    fn acked(&mut self, now: Instant, sent: Instant, bytes: u64, rtt: &RttEstimator) {
        self.on_ack(now, sent, bytes, rtt.min(), rtt.get());
    }

    fn acks_ended(&mut self, now: Instant, in_flight: u64, app_limited: bool) {
        // A round lasts the smoothed RTT of the last acknowledgement. Not the lowest: behind
        // the queue of a CUBIC flow (120 ms of path, 100 ms of queue) rounds of the lowest RTT
        // measured alternately more and less than a round trip's delivery (27 and 37 MB/s on a
        // 33 MB/s flow), and the model, the highest of them, climbed a noise's worth each cycle
        // and took the bottleneck from CUBIC (from 844 to 309 Mbit/s in 28 s).
        let srtt = self
            .srtt
            .or(self.min_rtt)
            .unwrap_or(Duration::from_millis(100));
        self.on_end_acks(now, srtt, in_flight, app_limited);
    }

    fn congested(&mut self, _now: Instant, _sent: Instant, persistent: bool, lost_bytes: u64) {
        self.on_loss(lost_bytes, persistent);
    }

    fn mtu_changed(&mut self, mtu: u16) {
        self.mtu = u64::from(mtu);
    }

    fn current_window(&self) -> u64 {
        self.window()
    }

    fn first_window(&self) -> u64 {
        self.initial_window
    }
}

/// Makes a [`Model`] per connection, as quinn's controller.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ModelFactory {
    pub(crate) initial_window: u64,
}

impl ControllerFactory for ModelFactory {
    fn build(self: Arc<Self>, _now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Quinn(Model::new(self.initial_window, current_mtu)))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A path of `capacity` bytes/s with `rtt` of propagation, a `queue` of bytes and random loss
    /// `loss`, run one round at a time: the controller's window is sent (at most the capacity and
    /// the queue's room), a share `loss` of it is lost at random (deterministically spread), the
    /// rest acknowledged at the round's end.
    pub(crate) struct Path {
        pub(crate) capacity: f64,
        pub(crate) rtt: Duration,
        pub(crate) queue: f64,
        pub(crate) loss: f64,
        pub(crate) queued: f64,
        /// Delay the hosts add to every round trip but one acknowledgement in four (held-back
        /// acknowledgements, a scheduler's wake-up): not a queue, and not in the lowest RTT.
        pub(crate) host_delay: Duration,
        /// Bytes another flow keeps in flight through the same bottleneck (a loss-based flow
        /// between its losses): it shares the pipe and the queue with the controller's window,
        /// each carrying in proportion to what it has in flight.
        pub(crate) beside: f64,
        pub(crate) now: Instant,
        /// Bytes delivered and lost over all rounds.
        pub(crate) delivered: f64,
        pub(crate) lost: f64,
    }

    impl Path {
        pub(crate) fn new(capacity: f64, rtt_ms: u64, queue_bdp: f64, loss: f64) -> Self {
            let rtt = Duration::from_millis(rtt_ms);
            Self {
                capacity,
                rtt,
                queue: queue_bdp * capacity * rtt.as_secs_f64(),
                loss,
                queued: 0.0,
                host_delay: Duration::ZERO,
                beside: 0.0,
                now: Instant::now(),
                delivered: 0.0,
                lost: 0.0,
            }
        }

        /// One round of the controller's window: beyond the pipe's bandwidth-delay product it
        /// queues, beyond the queue it is dropped; a share `loss` of what passes is lost at random
        /// and the rest acknowledged over the round, which lasts the RTT and the queue's delay.
        /// Returns the round's delivery rate, bytes/s.
        pub(crate) fn round(&mut self, m: &mut Model) -> f64 {
            let window = m.window() as f64;
            let round_trip = self.rtt + self.host_delay;
            let bdp = self.capacity * round_trip.as_secs_f64();
            let total = window + self.beside;
            self.queued = (total - bdp).clamp(0.0, self.queue);
            let overflow = (total - bdp - self.queue).max(0.0) * window / total;
            let through = window - overflow;
            let random = through * self.loss;
            let delivered = through - random;
            let srtt = round_trip + Duration::from_secs_f64(self.queued / self.capacity);
            for i in 0..4 {
                self.now += srtt / 4;
                // The first acknowledgement of a round comes without the hosts' delay.
                let sample = if i == 0 { srtt - self.host_delay } else { srtt };
                m.on_ack(
                    self.now,
                    self.now - sample,
                    (delivered / 4.0) as u64,
                    self.rtt,
                    srtt,
                );
            }
            // quinn reports a congestion event only when packets were lost.
            if overflow + random >= 1.0 {
                m.on_loss((overflow + random) as u64, false);
            }
            // In flight at the round's end: the pipe and the queue (a draining round ends early
            // only once the queue is gone).
            m.on_end_acks(
                self.now,
                srtt,
                (window.min(bdp + self.queued)) as u64,
                false,
            );
            self.delivered += delivered;
            self.lost += overflow + random;
            delivered / srtt.as_secs_f64()
        }
    }

    const GBIT: f64 = 125_000_000.0;

    fn run(p: &mut Path, m: &mut Model, rounds: usize) -> f64 {
        let mut last = 0.0;
        for _ in 0..rounds {
            last = p.round(m);
        }
        last
    }

    /// The mean rate over `rounds` rounds, bytes/s.
    fn mean(p: &mut Path, m: &mut Model, rounds: usize) -> f64 {
        (0..rounds).map(|_| p.round(m)).sum::<f64>() / rounds as f64
    }

    #[test]
    fn from_the_first_window_it_fills_a_clean_long_path() {
        let mut p = Path::new(GBIT, 120, 1.0, 0.0);
        let mut m = Model::new(14_720, 1472);
        run(&mut p, &mut m, 30);
        let mut queued = 0.0;
        let held = (0..40)
            .map(|_| {
                let rate = p.round(&mut m);
                queued += p.queued / 40.0;
                rate
            })
            .sum::<f64>()
            / 40.0;
        assert!(held > 0.95 * GBIT, "{held} of {GBIT}");
        assert!((m.rate() / GBIT - 1.0).abs() < 0.05, "{}", m.rate());
        // Cruising, it keeps the queue to its headroom and what one probing round in eight adds.
        assert!(queued < 0.2 * GBIT * 0.12, "{queued}");
    }

    #[test]
    fn startup_overflows_a_one_bdp_queue_by_little() {
        let mut p = Path::new(GBIT, 120, 1.0, 0.0);
        let mut m = Model::new(14_720, 1472);
        run(&mut p, &mut m, 40);
        let lost = p.lost / (p.lost + p.delivered);
        // Its last round doubles the window once the rate has stopped growing (the model lags a
        // round); the buffer takes most of it.
        assert!(lost < 0.05, "lost {lost} of what startup sent");
    }

    #[test]
    fn one_percent_of_random_loss_costs_about_one_percent() {
        let mut p = Path::new(GBIT, 120, 1.0, 0.01);
        let mut m = Model::new(14_720, 1472);
        run(&mut p, &mut m, 40);
        (p.delivered, p.lost) = (0.0, 0.0);
        let held = mean(&mut p, &mut m, 40);
        assert!(held > 0.93 * GBIT, "{held} of {GBIT}");
        // Cruising, it loses the path's 1 % and what its probing rounds overflow, little more.
        let lost = p.lost / (p.lost + p.delivered);
        assert!(lost < 0.015, "lost {lost}");
    }

    #[test]
    fn it_follows_the_bottleneck_down_and_up() {
        let mut p = Path::new(GBIT, 120, 0.5, 0.0);
        let mut m = Model::new(14_720, 1472);
        run(&mut p, &mut m, 40);
        p.capacity = 0.4 * GBIT;
        run(&mut p, &mut m, 12);
        let down = mean(&mut p, &mut m, 16);
        assert!((down / (0.4 * GBIT) - 1.0).abs() < 0.08, "{down}");
        assert!(m.rate() < 0.5 * GBIT, "{}", m.rate());
        p.capacity = GBIT;
        run(&mut p, &mut m, 60);
        let up = mean(&mut p, &mut m, 16);
        assert!(up > 0.9 * GBIT, "{up}");
    }

    /// Beside a loss-based flow (down to 0.7 of its window on a round that overflows the one-BDP
    /// buffer, up 1 % a round otherwise, as CUBIC near its last maximum), it neither starves nor
    /// takes more than two thirds. This round-by-round path does not reproduce the project CI's
    /// 24–31 % for CUBIC (both before and after `Model::probing` it keeps about 45 % here); the
    /// emulated path does (`transport_path::a_cubic_flow_beside_the_udp_transport_keeps_a_third`).
    #[test]
    fn beside_a_loss_based_flow_it_leaves_it_a_third() {
        let mut p = Path::new(GBIT, 120, 1.0, 0.0);
        let mut m = Model::new(14_720, 1472);
        run(&mut p, &mut m, 40);
        p.beside = 0.5 * GBIT * 0.12;
        let rounds = 50 * GAINS.len();
        let mut own = 0.0;
        for _ in 0..rounds {
            let lost = p.lost;
            own += p.round(&mut m) / rounds as f64;
            p.beside *= if p.lost > lost { 0.7 } else { 1.01 };
        }
        assert!(own < 2.0 / 3.0 * GBIT, "it kept {own} of {GBIT} bytes/s");
        assert!(own > 0.2 * GBIT, "it kept {own} of {GBIT} bytes/s");
    }

    /// A round trip that doubles (a route change, or a queue that another flow keeps full) is
    /// followed: with the lowest RTT ever seen, the window would carry half the rate, the rounds
    /// would deliver half, and the model would follow them down (to 5 Mbit/s beside a CUBIC flow
    /// on an emulated 120 ms, 1 Gbit/s path).
    #[test]
    fn it_keeps_the_rate_when_the_round_trip_grows() {
        let mut p = Path::new(GBIT, 120, 1.0, 0.0);
        let mut m = Model::new(14_720, 1472);
        run(&mut p, &mut m, 40);
        p.rtt = Duration::from_millis(240);
        run(&mut p, &mut m, 3 * RTT_ROUNDS);
        let held = mean(&mut p, &mut m, 16);
        assert!(held > 0.9 * GBIT, "{held} of {GBIT}");
    }

    /// A short path where the hosts' delay is most of the round trip (loopback: a 30 µs path
    /// and acknowledgements 2 ms late) is filled: with the window over the lowest RTT alone,
    /// startup was held at its first window and the test carried 3 Mbit/s.
    #[test]
    fn it_fills_a_short_path_where_the_hosts_delay_most_of_the_round_trip() {
        let mut p = Path::new(GBIT, 0, 1.0, 0.0);
        p.rtt = Duration::from_micros(30);
        p.host_delay = Duration::from_millis(2);
        let mut m = Model::new(14_720, 1472);
        run(&mut p, &mut m, 60);
        let held = mean(&mut p, &mut m, 40);
        assert!(held > 0.85 * GBIT, "{held} of {GBIT}");
    }

    /// Startup on an ACK-clocked path, as quinn runs it: what is sent in one round trip is
    /// acknowledged in the next, the window bounds what is in flight and quinn paces at 1.25 ×
    /// window ÷ smoothed RTT. Steps of 1 ms through a 120 ms, 1 Gbit/s path with a one-BDP queue;
    /// returns the delivery rate of each round trip, bytes/s.
    fn clocked_startup(m: &mut Model, round_trips: usize) -> Vec<f64> {
        const STEP: Duration = Duration::from_millis(1);
        let rtt = Duration::from_millis(120);
        let (capacity, steps) = (GBIT, 120);
        let queue = capacity * rtt.as_secs_f64();
        let start = Instant::now();
        let mut now = start;
        // Packets in flight: (sent, bytes, arrives), in order of sending.
        let mut flight: std::collections::VecDeque<(Instant, f64, Instant)> = Default::default();
        let (mut in_flight, mut busy_until, mut srtt) = (0.0, start, rtt);
        let mut rates = Vec::new();
        for _ in 0..round_trips {
            let mut delivered = 0.0;
            for _ in 0..steps {
                now += STEP;
                let mut acked = 0.0;
                while let Some(&(sent, bytes, arrives)) = flight.front() {
                    if arrives > now {
                        break;
                    }
                    flight.pop_front();
                    in_flight -= bytes;
                    acked += bytes;
                    let sample = now - sent;
                    srtt = (srtt * 7 + sample) / 8;
                    m.on_ack(now, sent, bytes as u64, rtt, srtt);
                }
                if acked > 0.0 {
                    m.on_end_acks(now, srtt, in_flight as u64, false);
                }
                delivered += acked;
                let window = m.window() as f64;
                let paced = 1.25 * window * STEP.as_secs_f64() / srtt.as_secs_f64();
                let send = (window - in_flight).clamp(0.0, paced);
                if send < 1.0 {
                    continue;
                }
                // Through the bottleneck: serialised after what is queued, dropped past the queue.
                let free = busy_until.max(now);
                let backlog = free.saturating_duration_since(now).as_secs_f64() * capacity;
                if backlog > queue {
                    continue;
                }
                busy_until = free + Duration::from_secs_f64(send / capacity);
                flight.push_back((now, send, busy_until + rtt));
                in_flight += send;
            }
            rates.push(delivered / rtt.as_secs_f64());
        }
        rates
    }

    /// Startup doubles what it delivers each round trip, as BBR's does, when acknowledgements
    /// come a round trip after their packets: a window capped at twice a model that lags two
    /// rounds (the round's rate is known at its end, and it measured what was sent a round
    /// earlier) grew √2 a round, 2.6 s to fill a 120 ms, 1 Gbit/s path (measured on the emulated
    /// one: the delivered rate doubled every second round).
    #[test]
    fn startup_doubles_each_round_trip_on_an_ack_clocked_path() {
        let mut m = Model::new(14_720, 1472);
        let rates = clocked_startup(&mut m, 30);
        let full = rates.iter().position(|&r| r > 0.9 * GBIT);
        let shown: Vec<String> = rates.iter().map(|r| format!("{:.1}", r * 8e-6)).collect();
        // From 14,720 bytes to a 15 MB product is ten doublings.
        assert!(
            full.is_some_and(|n| n <= 14),
            "Mbit/s per round trip: {}",
            shown.join(" ")
        );
    }

    /// RFC 9002's initial window for 9,000-byte packets is two of them; a receiver acknowledges
    /// a lone packet only after its delay, so the window never holds fewer than four.
    #[test]
    fn the_window_holds_four_packets_at_least() {
        let mut m = Model::new(17_944, 8972);
        assert_eq!(m.window(), 4 * 8972);
        let start = Instant::now();
        // A startup round that delivered one packet in 27 ms (the acknowledgement delay).
        m.on_ack(
            start + Duration::from_millis(27),
            start,
            8972,
            Duration::from_micros(30),
            Duration::from_millis(27),
        );
        m.on_end_acks(
            start + Duration::from_millis(27),
            Duration::from_millis(27),
            0,
            false,
        );
        assert!(m.window() >= 4 * 8972, "{}", m.window());
    }

    #[test]
    fn persistent_congestion_starts_it_again() {
        let mut p = Path::new(GBIT, 120, 1.0, 0.0);
        let mut m = Model::new(14_720, 1472);
        run(&mut p, &mut m, 30);
        assert!(m.window() > 1 << 20);
        m.on_loss(1 << 20, true);
        assert_eq!(m.window(), 14_720);
        assert_eq!(m.rate(), 0.0);
    }
}
