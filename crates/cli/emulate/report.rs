//! The emulator's fidelity report: one line per direction and a verdict (text), or a JSON document.
//! Used at the end of `longhaul emulate -- CMD`, by `status` (live counters) and by `down`.

use longhaul_emu::arrival::ArrivalStats;
use longhaul_emu::capture::CaptureStats;
use longhaul_emu::host_memory::HostShortage;
use longhaul_emu::{DirectionStats, Report};
use longhaul_units::{Nanos, fmt_size};

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// `; captured N packets to FILE (...)`, or nothing without a capture.
pub(crate) fn captured(c: Option<&CaptureStats>) -> String {
    c.map_or_else(String::new, |c| {
        format!(
            "; captured {} packets to {}{}{}",
            c.packets,
            c.file.display(),
            if c.dropped > 0 {
                format!(" ({} left out: the writer fell behind)", c.dropped)
            } else {
                String::new()
            },
            c.error
                .as_ref()
                .map_or_else(String::new, |e| format!(" (write error: {e})"))
        )
    })
}

/// One direction's counters on one line.
pub(crate) fn direction_line(d: &DirectionStats) -> String {
    let l = &d.link;
    let tun = d
        .tun_tx_dropped
        .map_or_else(|| "unknown".to_string(), |n| n.to_string());
    let capture = captured(d.capture.as_ref());
    let pool = if d.pool_prefilled + d.pool_allocated > 0 {
        format!(
            "; record buffers {} prefilled, {} allocated in the run",
            d.pool_prefilled, d.pool_allocated
        )
    } else {
        String::new()
    };
    let phases = match d.steady_after_s {
        Some(s) => format!(
            " [ramp p99 {} ({} writes), steady from {s:.1} s p99 {} ({} writes)]",
            ms(d.lateness_ramp.p99_ns),
            d.lateness_ramp.samples,
            ms(d.lateness_steady.p99_ns),
            d.lateness_steady.samples
        ),
        None => " [not steady yet]".to_string(),
    };
    let stalls = match longhaul_emu::stall::describe(&d.stalls) {
        s if s.is_empty() => s,
        s => format!("; {s}"),
    };
    format!(
        "{}: {} records, {} segments, delivered {} ({}), drops queue {} random {} burst {} aqm {}, \
{} duplicates, {} reordered, {} splits, {} unparseable, {} hop time-exceeded, {} hop drops, {} cut drops; \
queue now {} max {}; lateness p50 {} p99 {} max {} ({} writes){phases}{stalls}; TUN tx drops {tun}; arrivals {}{pool}{capture}",
        d.name,
        l.records,
        l.segments,
        l.delivered,
        fmt_size(l.delivered_bytes),
        l.drop_queue,
        l.drop_random,
        l.drop_burst,
        l.drop_aqm,
        l.duplicates,
        l.reordered,
        d.splits,
        d.unparseable,
        d.hop_time_exceeded,
        d.hop_drops,
        d.cut_drops,
        fmt_size(d.queue_bytes_now),
        fmt_size(l.queue_max_bytes),
        ms(d.lateness.p50_ns),
        ms(d.lateness.p99_ns),
        ms(d.lateness.max_ns),
        d.lateness.samples,
        arrivals(&d.arrival),
    )
}

/// How a sender's records were timed: `tapped N (waited p99 .. max .. in the sender's queue),
/// timed at read M, tapped only K`, or `timed at read (no tap)`.
pub(crate) fn arrivals(a: &ArrivalStats) -> String {
    if !a.tapped {
        return "timed at read (no tap)".to_string();
    }
    format!(
        "tapped {} (waited p99 {} max {} in the sender's queue), timed at read {}, tapped only {}",
        a.from_tap,
        ms(a.read_lag.p99_ns),
        ms(a.read_lag.max_ns),
        a.at_read,
        a.tap_only
    )
}

/// The `fidelity` object: `ok`, the threshold and the problems found.
pub(crate) fn fidelity(r: &Report, max_p99: Nanos) -> serde_json::Value {
    let problems = r.fidelity_problems(max_p99.as_nanos());
    serde_json::json!({
        "ok": problems.is_empty(),
        "max_p99_lateness_ns": max_p99.as_nanos(),
        "problems": problems,
    })
}

/// One line per host where TCP ran short of memory, each after `indent`.
pub(crate) fn shortage_lines(hosts: &[HostShortage], indent: &str) -> String {
    hosts
        .iter()
        .map(|h| {
            format!(
                "{indent}host memory: TCP on {} ran short: {}\n",
                h.host, h.description
            )
        })
        .collect()
}

/// The report's text lines: both directions and the verdict.
pub(crate) fn text(r: &Report, max_p99: Nanos) -> String {
    let problems = r.fidelity_problems(max_p99.as_nanos());
    let verdict = if problems.is_empty() {
        "fidelity: OK".to_string()
    } else {
        format!("fidelity: NOT TRUSTWORTHY ({})", problems.join("; "))
    };
    let shortage: String = r
        .tcp_shortage
        .iter()
        .map(|h| {
            format!(
                "host memory: TCP on {} ran short: {}\n",
                h.host, h.description
            )
        })
        .collect();
    format!(
        "{}\n{}\n{shortage}{verdict}\n",
        direction_line(&r.a_to_b),
        direction_line(&r.b_to_a)
    )
}

/// Prints the report on standard error, as text or as `{"emulator": .., "fidelity": ..}`.
pub(crate) fn print(r: &Report, max_p99: Nanos, json: bool) {
    if json {
        let doc = serde_json::json!({ "emulator": r, "fidelity": fidelity(r, max_p99) });
        eprintln!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("report serialises")
        );
    } else {
        eprint!("{}", text(r, max_p99));
    }
}
