//! The text form of the calculator's reports: aligned tables and one line per figure, as
//! docs/calc.md shows them.

use std::fmt::Write as _;

use longhaul_models::calc::bdp::BdpReport;
use longhaul_models::calc::count;
use longhaul_models::calc::lsr::LsrReport;
use longhaul_models::calc::mathis::MathisReport;
use longhaul_models::calc::path::PathReport;
use longhaul_models::calc::responsiveness::{JUMBO_MSS, ResponsivenessReport};
use longhaul_topology::traceroute::TraceDistance;
use longhaul_units::models::{MATHIS_C_PER_ACK, MAX_TCP_WINDOW};
use longhaul_units::{Nanos, fmt_duration, fmt_km, fmt_rate, fmt_size, group_thousands as group};

/// `calc bdp`: the figures, the buffer sysctls, then the ceilings at common windows.
pub(super) fn bdp(r: &BdpReport) -> String {
    let mut s = String::new();
    let streams = if r.streams == 1 {
        "1 stream".to_owned()
    } else {
        format!("{} streams", r.streams)
    };
    let _ = writeln!(
        s,
        "Bandwidth-delay product of {} × {} RTT ({streams}, MSS {} B)",
        r.rate, r.rtt, r.mss_bytes
    );
    let _ = writeln!(
        s,
        "  BDP                {} = {} B",
        r.bdp,
        group(r.bdp_bytes)
    );
    if r.streams > 1 {
        let _ = writeln!(s, "  BDP per stream     {}", r.bdp_per_stream);
    }
    let _ = writeln!(
        s,
        "  window per stream  1 × BDP {} fills the path; 2 × BDP {} {}",
        r.window_1x,
        r.window_2x,
        if r.window_2x_bytes > MAX_TCP_WINDOW {
            "is over the 1 GiB window, so longhaul asks for 1 GiB"
        } else {
            "(what longhaul asks for)"
        }
    );
    let _ = writeln!(
        s,
        "  segments in flight {} of {} B",
        count(r.segments_in_flight),
        r.mss_bytes
    );
    let fits = if r.one_stream_fits {
        "fits"
    } else {
        "does NOT fit"
    };
    let _ = writeln!(
        s,
        "  one stream         {fits}: the 1 GiB RFC 7323 window carries at most {} at {}",
        r.max_window_ceiling, r.rtt
    );
    let _ = writeln!(
        s,
        "  streams needed     {} (window limit alone){}",
        r.streams_needed,
        if u64::from(r.streams) < r.streams_needed {
            format!("; -P {} is too few", r.streams)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "  buffer sysctls     net.core.rmem_max, wmem_max ≥ {} ({}); tcp_rmem, tcp_wmem max ≥ {} ({})",
        r.core_mem_max_bytes,
        fmt_size(r.core_mem_max_bytes),
        r.tcp_mem_max_bytes,
        fmt_size(r.tcp_mem_max_bytes)
    );
    for cmd in &r.sysctl_commands {
        let _ = writeln!(s, "    {cmd}");
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "One stream's ceiling at common windows ({} RTT):", r.rtt);
    let _ = writeln!(
        s,
        "  {:<10} {:>12} {:>9} {:>8}  what sets the window",
        "window", "ceiling", "of rate", "streams"
    );
    for c in &r.ceilings {
        let _ = writeln!(
            s,
            "  {:<10} {:>12} {:>8} {:>8}  {}",
            c.window,
            c.ceiling,
            percent(c.percent_of_rate),
            if c.streams_needed == u64::MAX {
                "-".to_owned()
            } else {
                group(c.streams_needed)
            },
            c.what
        );
    }
    s
}

/// "0.04%", "2.8%", "42%", "5,439%".
fn percent(p: f64) -> String {
    if p < 1.0 {
        format!("{p:.2}%")
    } else if p < 10.0 {
        format!("{p:.1}%")
    } else {
        format!("{}%", count(p))
    }
}

/// `calc mathis`: the ceiling or the loss needed, then the response functions compared.
pub(super) fn mathis(r: &MathisReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", r.model);
    let _ = writeln!(s, "  Note: {}.", r.caveat);
    let _ = writeln!(
        s,
        "  MSS {} B, RTT {}, C = {:.4}{}",
        r.mss_bytes,
        r.rtt,
        r.c,
        if (r.c - MATHIS_C_PER_ACK).abs() < 1e-12 {
            " (√(3/2): an ACK per segment; --c 0.87 for delayed ACKs)"
        } else {
            ""
        }
    );
    if r.mode == "ceiling" {
        let _ = writeln!(s, "  loss p             {}", r.loss);
        let _ = writeln!(s, "  Reno ceiling       {}", r.rate);
    } else {
        let _ = writeln!(s, "  rate               {}", r.rate);
        let _ = writeln!(s, "  loss p needed      ≤ {}", r.loss);
    }
    let _ = writeln!(s, "  between losses     {} at {}", r.between_losses, r.rate);
    let w = &r.windows;
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Average window at p = {:.2e} by response function (segments; rate at {}, MSS {} B):",
        w.loss_p, r.rtt, r.mss_bytes
    );
    for (name, seg, bps) in [
        ("Reno 1.2/√p (RFC 9438 table)", w.reno_segments, w.reno_bps),
        (
            "HighSpeed TCP 0.12/p^0.835 (RFC 3649)",
            w.hstcp_segments,
            w.hstcp_bps,
        ),
        (
            "CUBIC 1.054·RTT^¾/p^¾ (RFC 9438 §5.2)",
            w.cubic_segments,
            w.cubic_bps,
        ),
    ] {
        let _ = writeln!(s, "  {name:<40} {:>12}  {}", count(seg), fmt_rate(bps));
    }
    if let Some(n) = &r.loss_needed {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "Loss rate each tolerates at {} (window {} segments; RFC 9438 table 3):",
            r.rate,
            count(n.window_segments)
        );
        for (name, p) in [
            ("Reno 1.2/√p", n.reno_p),
            ("HighSpeed TCP", n.hstcp_p),
            ("CUBIC", n.cubic_p),
        ] {
            let _ = writeln!(s, "  {name:<14} p ≤ {p:.2e}");
        }
    }
    s
}

/// `calc responsiveness`: one row per algorithm, values aligned.
pub(super) fn responsiveness(r: &ResponsivenessReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Responsiveness: time to regain {} after one loss, RTT {}, MSS {} B (window {} segments)",
        r.rate,
        r.rtt,
        r.mss_bytes,
        count(r.window_segments)
    );
    let mut rows = vec![
        (
            "Reno".to_owned(),
            r.reno.clone(),
            format!(
                "ρ = C·RTT²/(2·MSS): halve, then +1 segment per RTT for {} RTTs",
                count(r.reno_rtts)
            ),
        ),
        (
            "CUBIC K".to_owned(),
            r.cubic_k.clone(),
            "∛(W·(1−β)/C), β = 0.7, C = 0.4 (RFC 9438 §4.2)".to_owned(),
        ),
        (
            "Scalable TCP".to_owned(),
            r.scalable.clone(),
            format!(
                "{:.2} RTT at any rate: ln(1/(1−b))/ln(1+a), a = 0.01, b = 0.125 (Kelly 2003)",
                r.scalable_rtts
            ),
        ),
    ];
    if r.mss_bytes != JUMBO_MSS {
        rows.push((
            "Reno, MSS 8960".to_owned(),
            r.reno_jumbo.clone(),
            "the same loss with jumbo frames (MTU 9000)".to_owned(),
        ));
    }
    let width = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0);
    for (name, value, how) in rows {
        let pad = width - value.chars().count();
        let _ = writeln!(s, "  {name:<15} {value}{}   {how}", " ".repeat(pad));
    }
    s
}

/// `calc lsr`: the metric, the rounded and uncapped figures, the +10 % rule, and the report's own
/// notes (`LsrReport::notes`).
pub(super) fn distance(r: &TraceDistance) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>3}  {:<44} {:>9}  {:<16} {:>9}",
        "hop", "answered by", "rtt ms", "site", "leg km"
    );
    for p in &r.points {
        let who = match (&p.hop.name, p.hop.addr) {
            (Some(n), Some(a)) => format!("{n} ({a})"),
            (Some(n), None) => n.clone(),
            (None, Some(a)) => a.to_string(),
            (None, None) if p.hop.ttl == 0 => "(source)".into(),
            (None, None) => "*".into(),
        };
        let _ = writeln!(
            out,
            "{:>3}  {:<44} {:>9}  {:<16} {:>9}",
            p.hop.ttl,
            who,
            p.hop.rtt_ms.map_or(String::new(), |t| format!("{t:.3}")),
            p.site.as_deref().unwrap_or("?"),
            p.leg_km.map_or(String::new(), |k| format!("{k:.0}")),
        );
    }
    let legs = r.points.iter().filter(|p| p.leg_km.is_some()).count();
    let _ = writeln!(
        out,
        "\ndistance: {} (the great circles of {legs} legs between placed hops)",
        fmt_km(r.total_km)
    );
    let _ = writeln!(
        out,
        "Land Speed Record distance: {}{}",
        fmt_km(r.lsr_km),
        if r.capped {
            " (capped at 30,000 km by the rules)"
        } else {
            ""
        }
    );
    for p in r.points.iter().filter(|p| p.unplaced.is_some()) {
        let which = if p.hop.ttl == 0 {
            "the source".to_owned()
        } else {
            format!("hop {}", p.hop.ttl)
        };
        let _ = writeln!(out, "unplaced: {which}: {}", p.unplaced.unwrap_or(""));
    }
    out
}

pub(super) fn lsr(r: &LsrReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Internet2 Land Speed Record metric = rate × terrestrial distance"
    );
    if let (Some(b), Some(secs)) = (&r.bytes_display, r.seconds) {
        let _ = writeln!(
            s,
            "  moved        {b} in {}",
            fmt_duration(Nanos::from_secs_f64(secs))
        );
    }
    let _ = writeln!(
        s,
        "  rate         {} ({} bit/s)",
        r.rate,
        group(r.rate_bps.round() as u64)
    );
    let counted = if r.capped {
        format!("{}, counted as {} (cap)", r.distance, fmt_km(r.counted_km))
    } else {
        r.distance.clone()
    };
    let _ = writeln!(s, "  distance     {counted}");
    let _ = writeln!(s, "  metric       {}", r.metric);
    if r.rounded_rate_bps as f64 != r.rate_bps {
        let _ = writeln!(
            s,
            "  rounded      {} × {} = {}",
            r.rounded_rate,
            fmt_km(r.counted_km),
            r.rounded_metric
        );
    }
    if r.capped {
        let _ = writeln!(s, "  uncapped     {}", r.uncapped_metric);
    }
    if let Some(b) = &r.beats {
        let _ = writeln!(
            s,
            "  vs {}: {:+.1}%, a record needs ≥ {} (+10%): {}",
            b.old,
            b.gain_percent,
            b.needed,
            if b.beats {
                "BEATS it"
            } else {
                "does not beat it"
            }
        );
    }
    for n in &r.notes {
        let _ = writeln!(s, "  note: {n}");
    }
    s
}

/// `calc path`: bdp, responsiveness and mathis, one after another.
pub(super) fn path(r: &PathReport) -> String {
    format!(
        "{}\n{}\n{}",
        bdp(&r.bdp),
        responsiveness(&r.responsiveness),
        mathis(&r.mathis)
    )
}
