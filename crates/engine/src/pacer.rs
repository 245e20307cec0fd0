//! `--pace auto` on a sending side: a thread that reads the sending sockets' `TCP_INFO` a few times
//! per round trip, feeds `longhaul_proto::auto_pace::Governor` and sets each socket's pacing cap
//! (`SO_MAX_PACING_RATE`) to its share of the governor's rate. Tests (`run`) and transfers start
//! one per sending side; it stops when asked and hands back what the governor did.

use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use longhaul_proto::auto_pace::{Governor, GovernorSummary, Reading, START_SHARE, payload_rate};
use longhaul_proto::msg::MAX_RATE_BPS;
use longhaul_proto::pacing::split_pacing;
use longhaul_sys as sys;

use crate::EngineError;
use crate::watcher::Watcher;

/// A sending TCP socket the pacer may read and pace (`None` once it is gone).
pub(crate) trait PacedSocket: Send + Sync {
    fn paced_fd(&self) -> Option<BorrowedFd<'_>>;
}

impl PacedSocket for std::net::TcpStream {
    fn paced_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(std::os::fd::AsFd::as_fd(self))
    }
}

/// The governor's thread.
pub(crate) struct Pacer(Watcher<GovernorSummary>);

/// The payload rate the governor starts at for a bottleneck of `wire_bps` (IP packets), streams of
/// `mss` bytes of payload per segment.
pub(crate) fn start_rate(wire_bps: u64, mss: u32, ipv6: bool) -> u64 {
    (payload_rate(wire_bps, mss, ipv6) as f64 * START_SHARE) as u64
}

impl Pacer {
    /// Starts pacing `socks` together at `start_bps` (payload, all of them) and governing from
    /// there.
    pub(crate) fn start(
        socks: Vec<Arc<dyn PacedSocket>>,
        start_bps: u64,
    ) -> Result<Self, EngineError> {
        Watcher::spawn("pace-auto", "the pacing governor's thread", move |stop| {
            govern(&socks, start_bps, stop)
        })
        .map(Self)
    }

    /// Asks the governor to stop (it ends within its next reading).
    pub(crate) fn halt(&self) {
        self.0.halt();
    }

    /// Stops the governor and returns what it did.
    pub(crate) fn finish(self) -> Option<GovernorSummary> {
        self.0.finish()
    }
}

fn apply(socks: &[Arc<dyn PacedSocket>], rate_bps: u64) {
    let n = u32::try_from(socks.len()).unwrap_or(u32::MAX);
    for (s, share) in socks.iter().zip(split_pacing(rate_bps, n)) {
        if let Some(fd) = s.paced_fd() {
            // A socket that closed under us is simply no longer paced.
            let _ = sys::set_max_pacing_rate(fd, share.max(1));
        }
    }
}

/// The streams together now; `None` before any of them has an RTT.
fn read(socks: &[Arc<dyn PacedSocket>], at_ns: u64) -> Option<Reading> {
    let mut r = Reading {
        at_ns,
        min_rtt_us: u32::MAX,
        ..Reading::default()
    };
    let (mut srtt_sum, mut n) = (0u64, 0u64);
    let mut bound = true;
    for s in socks {
        let Some(t) = s.paced_fd().and_then(|fd| sys::tcp_info(fd).ok()) else {
            continue;
        };
        if t.rtt_us == 0 {
            continue;
        }
        r.acked_bytes += t.bytes_acked.unwrap_or(0);
        r.retransmits += u64::from(t.total_retrans);
        srtt_sum += u64::from(t.rtt_us);
        n += 1;
        r.min_rtt_us = r.min_rtt_us.min(t.min_rtt_us.unwrap_or(t.rtt_us));
        bound &= held_by_pacing(&t);
    }
    (n > 0).then(|| {
        r.srtt_us = u32::try_from(srtt_sum / n).unwrap_or(u32::MAX);
        r.pacing_bound = bound;
        r
    })
}

/// Whether pacing is what holds this stream now (the governor's cap, or its congestion control's
/// own pacing, which follows what the cap let through): its congestion window and the peer's
/// receive window have room, and data waits to be sent (`Reading::pacing_bound`).
fn held_by_pacing(t: &sys::TcpInfo) -> bool {
    let in_flight = u64::from(t.unacked) * u64::from(t.snd_mss);
    t.unacked < t.snd_cwnd
        && t.notsent_bytes.is_some_and(|b| b > 0)
        && t.snd_wnd
            .is_some_and(|w| in_flight + 2 * u64::from(t.snd_mss) <= u64::from(w))
}

fn govern(socks: &[Arc<dyn PacedSocket>], start_bps: u64, stop: &AtomicBool) -> GovernorSummary {
    let mut g = Governor::new(start_bps, MAX_RATE_BPS);
    apply(socks, g.rate_bps());
    let origin = Instant::now();
    let mut wait = Duration::from_millis(5);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(wait);
        let at_ns = u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let Some(r) = read(socks, at_ns) else {
            continue;
        };
        wait = Duration::from_nanos(Governor::reading_interval_ns(&r));
        if let Some(rate) = g.observe(r) {
            apply(socks, rate);
        }
    }
    g.summary()
}
