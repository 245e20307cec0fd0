//! `longhaul test -u --find-rate`: line characterisation as RFC 2544 does it with a hardware tester.
//! Trials of the UDP test at rates a bisection picks (`longhaul_proto::rate_search`) find the
//! highest rate whose loss stays at or under the threshold; then three more trials at 50, 90 and
//! 100 % of that rate give the jitter, the delay variation and (with synchronised clocks) the
//! one-way delay at each load. Every trial is a whole test (its own set-up and streams), so a trial
//! that overloads the path leaves nothing behind for the next but a queue that drains in the pause
//! between them.

use std::time::Duration;

use longhaul_proto::rate_search::{OFFERED_MIN, RateSearch};
use longhaul_proto::report::{DelayMs, DelayVariation, Report};
use serde::Serialize;

use crate::EngineError;
use crate::client::{ClientConfig, Quiet, run_test};

/// Pause between trials, for the queues a failed trial filled to drain.
const PAUSE: Duration = Duration::from_millis(300);

/// What to search.
#[derive(Debug, Clone, Copy)]
pub struct FindRate {
    /// The highest rate to try, bit/s of payload, all streams together.
    pub upper_bps: u64,
    /// Loss (lost ÷ sent) a trial may have and pass.
    pub threshold: f64,
    /// Stop when the interval between passing and failing is this narrow, bit/s.
    pub resolution_bps: u64,
    /// Most trials of the search.
    pub max_trials: usize,
}

/// One trial's figures.
#[derive(Debug, Clone, Serialize)]
pub struct TrialResult {
    /// Rate asked, bit/s of payload (all streams).
    pub rate_bps: u64,
    /// The same at the IP layer (payload, UDP and IP headers).
    pub ip_rate_bps: u64,
    /// Rate the sender reached, bit/s of payload (the bytes it sent over the span in which the
    /// receiver saw data): below [`OFFERED_MIN`] of the rate asked, the trial fails (the host, not
    /// the path, fell short).
    pub offered_bps: f64,
    /// Rate received, bit/s of payload.
    pub received_bps: f64,
    /// Datagrams sent.
    pub sent: u64,
    /// Datagrams lost.
    pub lost: u64,
    /// lost ÷ sent.
    pub loss: f64,
    /// Whether the rate was offered and the loss was within the threshold (search trials).
    pub passed: bool,
    /// Receiver jitter (RFC 3550), ms: the streams' mean.
    pub jitter_ms: f64,
    /// Delay variation above the smallest transit (first stream).
    pub delay_variation: Option<DelayVariation>,
    /// One-way delay, when both clocks are synchronised (first stream).
    pub one_way_delay: Option<DelayMs>,
}

/// A trial at a share of the rate found.
#[derive(Debug, Clone, Serialize)]
pub struct LoadPoint {
    /// Percent of the rate found.
    pub percent: u32,
    /// The trial.
    pub trial: TrialResult,
}

/// The outcome of the search.
#[derive(Debug, Clone, Serialize)]
pub struct FindRateReport {
    /// Datagram payload, bytes.
    pub datagram_len: u32,
    /// Header bytes per datagram below the payload (UDP and IP).
    pub header_bytes: u32,
    /// Loss threshold.
    pub threshold: f64,
    /// The search's trials, in order.
    pub trials: Vec<TrialResult>,
    /// Highest rate that passed, bit/s of payload (0: none did).
    pub rate_bps: u64,
    /// The same at the IP layer.
    pub ip_rate_bps: u64,
    /// Trials at 50, 90 and 100 % of the rate found.
    pub load: Vec<LoadPoint>,
    /// A SIGINT or SIGTERM ([`ClientConfig::interrupt`]) ended the search: the trial it cut is
    /// left out, the rate is the highest that passed so far, and no trial after it ran.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// Runs the search against the server of `cfg` (a UDP test; its duration is each trial's), calling
/// `progress` after each trial.
pub fn find_rate(
    cfg: &ClientConfig,
    f: &FindRate,
    progress: &mut dyn FnMut(&TrialResult),
) -> Result<FindRateReport, EngineError> {
    if !cfg.params.is_udp() {
        return Err(EngineError::Unsupported(
            "--find-rate searches with UDP trials: add -u".into(),
        ));
    }
    let mut search = RateSearch::new(f.upper_bps, f.threshold, f.resolution_bps, f.max_trials);
    let mut trials = Vec::new();
    let mut shape = None;
    let mut interrupted = false;
    while let Some(rate) = search.next() {
        if !trials.is_empty() {
            std::thread::sleep(PAUSE);
        }
        let Some((report, t)) = uncut(cfg, trial(cfg, rate))? else {
            interrupted = true;
            break;
        };
        shape.get_or_insert_with(|| (report.start.test_start.blksize, header_bytes(&report)));
        let offered = t.offered_bps >= OFFERED_MIN * rate as f64;
        search.record(rate, t.loss, offered);
        let t = TrialResult {
            passed: offered && t.loss <= f.threshold,
            ..t
        };
        progress(&t);
        trials.push(t);
    }
    let found = search.found();
    let mut load = Vec::new();
    if found > 0 && !interrupted {
        for percent in [50u32, 90, 100] {
            std::thread::sleep(PAUSE);
            let rate = found / 100 * u64::from(percent) + found % 100 * u64::from(percent) / 100;
            let Some((_, t)) = uncut(cfg, trial(cfg, rate))? else {
                interrupted = true;
                break;
            };
            progress(&t);
            load.push(LoadPoint { percent, trial: t });
        }
    }
    let (datagram_len, header_bytes) = shape.unwrap_or((0, 28));
    Ok(FindRateReport {
        datagram_len,
        header_bytes,
        threshold: f.threshold,
        trials,
        rate_bps: found,
        ip_rate_bps: ip_rate(found, datagram_len, header_bytes),
        load,
        interrupted,
    })
}

/// A trial's outcome, or `None` when an interrupt cut it (or came before it): a trial that did
/// not run its whole time says nothing about its rate.
fn uncut(
    cfg: &ClientConfig,
    ran: Result<(Report, TrialResult), EngineError>,
) -> Result<Option<(Report, TrialResult)>, EngineError> {
    let asked = cfg
        .interrupt
        .as_ref()
        .is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst));
    match ran {
        Err(EngineError::Interrupted(_)) => Ok(None),
        Ok((r, _)) if r.end.longhaul.interrupted || asked => Ok(None),
        Ok(t) => Ok(Some(t)),
        Err(e) => Err(e),
    }
}

/// UDP and IP header bytes per datagram: 28 over IPv4, 48 over IPv6.
fn header_bytes(r: &Report) -> u32 {
    match r.start.connected.first() {
        Some(c) if c.remote_host.contains(':') && !c.remote_host.starts_with("::ffff:") => 48,
        _ => 28,
    }
}

fn ip_rate(payload_bps: u64, len: u32, header: u32) -> u64 {
    if len == 0 {
        return 0;
    }
    (u128::from(payload_bps) * u128::from(len + header) / u128::from(len)) as u64
}

/// The payload rate the senders offered: the bytes they sent over the receivers' span, first to
/// last datagram. The senders' own clock runs from the start to the stop and the end markers, a few
/// per cent longer than the sending in a 1-s trial; the receivers' span is the sending's, shifted by
/// the path's delay.
fn offered_bps(r: &Report) -> f64 {
    let span = r.end.sum_received.seconds;
    if span <= 0.0 {
        return 0.0;
    }
    r.end.sum_sent.bytes as f64 * 8.0 / span
}

/// One trial at `rate_bps` of payload, all streams together.
fn trial(cfg: &ClientConfig, rate_bps: u64) -> Result<(Report, TrialResult), EngineError> {
    let mut c = cfg.clone();
    let streams = u64::from(c.params.streams.max(1));
    if let Some(u) = c.params.udp.as_mut() {
        u.rate_bps = (rate_bps / streams).max(longhaul_proto::msg::MIN_PACE_BPS);
    }
    c.params.target_rate_bps = rate_bps.max(1);
    let report = run_test(&c, &mut Quiet)?;
    let udp: Vec<_> = report
        .end
        .streams
        .iter()
        .filter_map(|s| s.udp.as_ref())
        .collect();
    let sent: u64 = udp.iter().map(|u| u.packets).sum();
    let lost: u64 = udp.iter().map(|u| u.lost_packets).sum();
    let first = udp.first();
    let len = report.start.test_start.blksize;
    let t = TrialResult {
        rate_bps,
        ip_rate_bps: ip_rate(rate_bps, len, header_bytes(&report)),
        offered_bps: offered_bps(&report),
        received_bps: report.end.sum_received.bits_per_second,
        sent,
        lost,
        loss: if sent == 0 {
            1.0
        } else {
            lost as f64 / sent as f64
        },
        passed: false,
        jitter_ms: if udp.is_empty() {
            0.0
        } else {
            udp.iter().map(|u| u.jitter_ms).sum::<f64>() / udp.len() as f64
        },
        delay_variation: first.and_then(|u| u.one_way_delay.variation),
        one_way_delay: first.and_then(|u| u.one_way_delay.ms),
    };
    Ok((report, t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_rate_adds_the_headers_per_datagram() {
        // 1448-byte payloads in 1476-byte IPv4 packets.
        assert_eq!(ip_rate(981_029_810, 1448, 28), 999_999_999);
        assert_eq!(ip_rate(1_000, 0, 28), 0);
    }
}
