//! The HTML report of one or more runs: self-contained (every plot's SVG inline, no external
//! files), with per run the experiment and its parameters, a table of measured vs predicted per
//! point, the emulator's fidelity per repetition, the host facts and the plots. Built from
//! result files only; an incomplete or untrustworthy run says so at the top of its section.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use longhaul_experiments::analysis::{SWEEP_TOLERANCE, SweepPoint, window_sweep_check};
use longhaul_experiments::result::ResultFile;
use serde_json::Value;

use crate::lsr;
use crate::plot::{self, Plot};

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn mbps(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |b| format!("{:.1}", b / 1e6))
}

/// A point's recovery times, one per repetition ("0.5", "never"), joined by "/"; "–" without
/// an event.
pub fn recoveries(p: &longhaul_experiments::result::PointResult) -> String {
    if p.point.event.is_none() {
        return "–".into();
    }
    p.repetitions
        .iter()
        .map(|r| {
            r.derived
                .recovery_s
                .map_or_else(|| "never".to_owned(), |s| format!("{s:.1}"))
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The window-sweep check of a run (points with a fixed window and a measurement).
pub fn sweep_check(rf: &ResultFile) -> Vec<longhaul_experiments::analysis::Deviation> {
    let pts: Vec<SweepPoint> = rf
        .points
        .iter()
        .filter(|p| p.point.window.is_some())
        .filter_map(|p| {
            Some(SweepPoint {
                id: p.point.id.clone(),
                measured_bps: p.summary.mean_bps?,
                expected_bps: p.prediction.as_ref()?.expected_bps as f64,
            })
        })
        .collect();
    window_sweep_check(&pts, SWEEP_TOLERANCE)
}

/// One run's section.
fn section(rf: &ResultFile, plots: &[Plot]) -> anyhow::Result<String> {
    let mut h = String::new();
    let spec = &rf.experiment.spec;
    let _ = write!(
        h,
        "<section id=\"run-{id}\"><h2>{name}: {title} <small>run {id}</small></h2>",
        id = esc(&rf.run_id),
        name = esc(&rf.experiment.name),
        title = esc(&spec.title)
    );
    if !rf.complete {
        h += "<p class=\"bad\"><b>INCOMPLETE</b>: this run was interrupted or is still running; \
              its points are not a full experiment.</p>";
    }
    if rf.untrustworthy {
        h += "<p class=\"bad\"><b>UNTRUSTWORTHY</b>: the emulator flagged at least one repetition \
              (late releases or dropped packets of its own, or the test failed); see the fidelity table.</p>";
    }
    let _ = write!(
        h,
        "<table class=\"kv\"><tr><th>source</th><td>{}</td></tr><tr><th>original scale</th><td>{}</td></tr>\
         <tr><th>our scale</th><td>{}</td></tr><tr><th>file</th><td>{}{}</td></tr>\
         <tr><th>started / finished</th><td>{} / {}</td></tr><tr><th>duration / omit / interval</th><td>{} / {} / {}</td></tr>\
         <tr><th>repetitions</th><td>{}</td></tr><tr><th>longhaul</th><td>{}</td></tr><tr><th>seeds</th><td>{}</td></tr></table>",
        esc(&spec.source),
        esc(&spec.original_scale),
        esc(&spec.scale),
        esc(&rf.experiment.file),
        if rf.experiment.reduced {
            " (reduced CI variant)"
        } else {
            ""
        },
        esc(&rf.started),
        esc(rf.finished.as_deref().unwrap_or("–")),
        longhaul_units::fmt_duration(spec.duration),
        longhaul_units::fmt_duration(spec.omit),
        longhaul_units::fmt_duration(spec.interval),
        spec.repetitions,
        esc(&rf.longhaul_version),
        esc(&serde_json::to_string(&rf.seeds)?),
    );
    if !spec.notes.is_empty() {
        let _ = write!(h, "<p class=\"notes\">{}</p>", esc(&spec.notes));
    }
    if spec.find_rate.is_some() {
        h += &find_rate_table(rf);
    } else {
        h += &tcp_table(rf);
    }
    let check = sweep_check(rf);
    if !check.is_empty() && spec.sweep.iter().any(|a| a.name() == "window") {
        let ok = check.iter().filter(|d| d.within).count();
        let _ = write!(
            h,
            "<p>Window-sweep check (throughput ≈ min(window ÷ RTT, goodput) within {:.0} %): \
             <b>{ok} of {} points within</b>.</p>",
            SWEEP_TOLERANCE * 100.0,
            check.len()
        );
    }
    h += &lsr_table(rf);
    h += "<h3>Emulator fidelity</h3><table><tr><th>point</th><th>rep</th><th>started</th><th>fidelity</th>\
          <th>p99 lateness</th><th>drops</th><th>error</th></tr>";
    for p in &rf.points {
        for r in &p.repetitions {
            let drops: Vec<String> = r
                .fidelity
                .drops
                .iter()
                .filter(|(_, v)| **v > 0)
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{:.3} ms</td><td>{}</td><td>{}</td></tr>",
                esc(&p.point.id),
                r.repetition + 1,
                esc(&r.started),
                if r.fidelity.ok { "ok" } else { "bad" },
                if r.fidelity.ok {
                    "OK"
                } else {
                    "NOT TRUSTWORTHY"
                },
                r.fidelity.p99_lateness_ns as f64 / 1e6,
                esc(&drops.join(", ")),
                esc(r.error.as_deref().unwrap_or("")),
            );
        }
    }
    h += "</table><h3>Host</h3><table class=\"kv\">";
    let _ = write!(
        h,
        "<tr><th>kernel</th><td>{}</td></tr><tr><th>congestion controls</th><td>{}</td></tr>",
        esc(&rf.host.kernel),
        esc(&rf.host.congestion_available.join(" "))
    );
    for (k, v) in &rf.host.sysctls {
        let _ = write!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    }
    for (k, v) in &rf.host.offloads {
        let _ = write!(h, "<tr><th>offload {}</th><td>{}</td></tr>", esc(k), esc(v));
    }
    for (k, v) in &rf.host.other {
        let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
        let _ = write!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&v));
    }
    h += "</table><h3>Plots</h3>";
    for p in plots {
        let svg = std::fs::read_to_string(&p.svg)
            .with_context(|| format!("cannot read {}", p.svg.display()))?;
        let svg = svg.trim_start_matches(|c| c != '<');
        let svg = svg
            .strip_prefix("<?xml")
            .and_then(|s| s.split_once("?>").map(|x| x.1))
            .unwrap_or(svg);
        let _ = write!(
            h,
            "<figure id=\"plot-{id}-{name}\" data-plot=\"{name}\">{svg}<figcaption>{title} \
             (<code>{png}</code>)</figcaption></figure>",
            id = esc(&rf.run_id),
            name = esc(&p.name),
            title = esc(&p.title),
            png = esc(&p.png.display().to_string()),
        );
    }
    h += "</section>";
    Ok(h)
}

/// The points beside the Land Speed Records (`lsr = true`; empty otherwise).
fn lsr_table(rf: &ResultFile) -> String {
    let rows = lsr::rows(rf);
    if rows.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        "<h3>Beside the Land Speed Records</h3><p>Each point's best repetition: the receiver's \
         rate × the path's distance (capped at 30,000 km). An emulated path is never eligible; \
         the last column names the other rules a run like it would break.</p><table \
         class=\"lsr\"><tr><th>point</th><th>Gbit/s</th><th>km</th><th>metric</th><th>class</th>\
         <th>class record</th><th>share</th><th>other rules</th></tr>",
    );
    for row in &rows {
        let (record, share) = match row.record {
            Some((m, r)) => (
                format!("{} ({}, {})", lsr::pb(m), r.team, r.date),
                row.share()
                    .map_or_else(|| "–".to_owned(), |s| format!("{:.0} %", s * 100.0)),
            ),
            None => ("–".to_owned(), "–".to_owned()),
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{:.3}</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td></tr>",
            esc(&row.point),
            row.bps() / 1e9,
            row.candidate.km.min(30_000.0),
            esc(&lsr::pb(row.candidate.metric())),
            esc(&row.candidate.class().to_string()),
            esc(&record),
            esc(&share),
            esc(&lsr::broken_text(row)),
        );
    }
    h += "</table>";
    h
}

/// Renders the plots of each run into `plots_dir/<run-id>/` and returns the report.
pub fn report(runs: &[ResultFile], plots_dir: &Path) -> anyhow::Result<String> {
    let mut body = String::new();
    for rf in runs {
        let plots = plot::render(rf, &plots_dir.join(&rf.run_id))?;
        body += &section(rf, &plots)?;
    }
    let title = runs
        .iter()
        .map(|r| r.run_id.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>longhaul lab: {t}</title>\
         <style>body{{font-family:sans-serif;max-width:1100px;margin:auto}}table{{border-collapse:collapse;margin:.5em 0}}\
         td,th{{border:1px solid #ccc;padding:2px 6px;font-size:90%;text-align:left}}.bad{{color:#b00}}.ok{{color:#070}}\
         figure{{margin:1em 0}}svg{{max-width:100%;height:auto}}.notes{{white-space:pre-wrap;color:#444}}</style></head>\
         <body><h1>longhaul lab report</h1>{body}</body></html>\n",
        t = esc(&title)
    ))
}

/// The measured-vs-model table of a TCP experiment.
fn tcp_table(rf: &ResultFile) -> String {
    let mut h = String::from(
        "<h3>Measured vs predicted</h3><table><tr><th>#</th><th>point</th><th>measured Mbit/s</th>\
          <th>model Mbit/s</th><th>deviation</th><th>window-limited</th><th>BDP</th><th>knee window</th>\
          <th>Mathis Mbit/s</th><th>Reno ρ</th><th>CUBIC K</th><th>pre-burst Mbit/s</th><th>recovery s</th></tr>",
    );
    for (k, p) in rf.points.iter().enumerate() {
        let pr = p.prediction.as_ref();
        let dev = match (p.summary.mean_bps, pr) {
            (Some(m), Some(pr)) if pr.expected_bps > 0 => {
                format!("{:+.1} %", (m / pr.expected_bps as f64 - 1.0) * 100.0)
            }
            _ => "–".into(),
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{dev}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            k + 1,
            esc(&p.point.id),
            mbps(p.summary.mean_bps),
            mbps(pr.map(|p| p.expected_bps as f64)),
            pr.map_or("–", |p| if p.window_limited { "yes" } else { "no" }),
            pr.map_or_else(|| "–".into(), |p| longhaul_units::fmt_size(p.bdp_bytes)),
            pr.map_or_else(|| "–".into(), |p| longhaul_units::fmt_size(p.knee_window)),
            mbps(pr.and_then(|p| p.mathis_bps)),
            pr.map_or_else(
                || "–".into(),
                |p| longhaul_units::fmt_duration(p.responsiveness)
            ),
            pr.map_or_else(|| "–".into(), |p| longhaul_units::fmt_duration(p.cubic_k)),
            mbps(p.summary.pre_event_bps),
            recoveries(p),
        );
    }
    h += "</table>";
    h
}

/// The table of a line characterisation: per point the datagram, the loss-free rate (payload and
/// IP), the line rate, the packet rate, the trials, and the delay figures at the rate found.
fn find_rate_table(rf: &ResultFile) -> String {
    let mut h = String::from(
        "<h3>Loss-free rate vs line rate</h3><table><tr><th>#</th><th>point</th><th>datagram B</th>\
         <th>loss-free Mbit/s (payload)</th><th>IP Mbit/s</th><th>line rate Mbit/s (payload)</th>\
         <th>deviation</th><th>kpps</th><th>trials</th><th>jitter at 100 % (ms)</th>\
         <th>delay variation p99 at 100 % (ms)</th></tr>",
    );
    for (k, p) in rf.points.iter().enumerate() {
        let report = p.repetitions.first().map_or(&Value::Null, |r| &r.report);
        let len = report["datagram_len"].as_f64().filter(|l| *l > 0.0);
        let expected = p.prediction.as_ref().map(|pr| pr.expected_bps as f64);
        let dev = match (p.summary.mean_bps, expected) {
            (Some(m), Some(e)) if e > 0.0 => format!("{:+.1} %", (m / e - 1.0) * 100.0),
            _ => "–".into(),
        };
        let full = report["load"]
            .as_array()
            .and_then(|l| l.iter().find(|x| x["percent"].as_u64() == Some(100)))
            .map(|x| &x["trial"]);
        let ms = |v: Option<f64>| v.map_or_else(|| "–".into(), |x| format!("{x:.3}"));
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{dev}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            k + 1,
            esc(&p.point.id),
            len.map_or_else(|| "–".into(), |l| format!("{l:.0}")),
            mbps(p.summary.mean_bps),
            mbps(report["ip_rate_bps"].as_f64()),
            mbps(expected),
            match (p.summary.mean_bps, len) {
                (Some(b), Some(l)) => format!("{:.1}", b / (8.0 * l) / 1e3),
                _ => "–".into(),
            },
            report["trials"].as_array().map_or(0, Vec::len),
            ms(full.and_then(|t| t["jitter_ms"].as_f64())),
            ms(full.and_then(|t| t["delay_variation"]["p99_ms"].as_f64())),
        );
    }
    h += "</table>";
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsr::tests::run;

    #[test]
    fn the_record_paths_get_a_table_beside_the_records() {
        let h = lsr_table(&run(
            [9.0, 9.417, 8.5, 9.99],
            [600.0, 600.0, 30.0, 600.0],
            true,
        ));
        assert!(
            h.starts_with("<h3>Beside the Land Speed Records</h3>"),
            "{h}"
        );
        assert_eq!(h.matches("<tr><td>").count(), 4, "{h}");
        assert!(h.contains("<tr><td>cc=cubic,ip=6</td><td>9.417</td><td>30000</td><td>282.5 Pb·m/s</td><td>IPv6 single-stream</td>"), "{h}");
        assert!(h.contains("<td>104 %</td>"), "{h}");
        assert!(h.contains("<td>every other rule met</td>"), "{h}");
        let none = lsr_table(&run([9.0; 4], [600.0; 4], false));
        assert_eq!(none, "");
    }
}
