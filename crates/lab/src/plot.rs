//! Plots, PNG and SVG, rendered from result files only (never from live state), with the
//! `plotters` crate: per point a time series of the first repetition (throughput per stream and
//! summed, cwnd, RTT, retransmits per interval), and one summary per experiment: throughput vs
//! window with the model line and the BDP knee when the window is swept, recovery times per point
//! when the experiment has a burst, throughput vs random loss per congestion control with the
//! Mathis ceiling when the loss is swept, else measured vs predicted throughput per point. A line
//! characterisation (`[find_rate]`) plots per point its search's trials, and as its summary the
//! loss-free rate against the line rate and the datagrams per second it means.
//!
//! Text needs a TrueType font: plotters' `ab_glyph` backend is given DejaVu Sans read at run time
//! (`$LONGHAUL_FONT`, else the Debian package fonts-dejavu-core's
//! `/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf` or a few other usual places); no font is
//! embedded in the binary.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, anyhow};
use longhaul_experiments::Axis;
use longhaul_experiments::result::{PointResult, ResultFile};
use longhaul_experiments::spec::loss_flag;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::Serialize;
use serde_json::Value;

/// Where the font is looked for, after `$LONGHAUL_FONT`.
pub const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
];

/// Registers the font once; an error says how to get one.
pub fn font() -> anyhow::Result<()> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let candidates: Vec<PathBuf> = std::env::var_os("LONGHAUL_FONT")
            .map(PathBuf::from)
            .into_iter()
            .chain(FONT_PATHS.iter().map(PathBuf::from))
            .collect();
        for p in &candidates {
            if let Ok(bytes) = std::fs::read(p) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return Ok(());
                }
            }
        }
        Err(format!(
            "no TrueType font for the plots: install fonts-dejavu-core (apt-get install \
             fonts-dejavu-core) or set LONGHAUL_FONT to a .ttf file (looked in {})",
            FONT_PATHS.join(", ")
        ))
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

/// One rendered plot.
#[derive(Debug, Clone, Serialize)]
pub struct Plot {
    /// `summary` or `point-NN`.
    pub name: String,
    /// What it shows.
    pub title: String,
    /// The PNG file.
    pub png: PathBuf,
    /// The SVG file.
    pub svg: PathBuf,
}

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("plot: {e}")
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// A time series of one quantity: (label, points).
type Lines = Vec<(String, Vec<(f64, f64)>)>;

/// Per-interval series of one report: throughput per stream (+ sum), cwnd, RTT, retransmits.
#[derive(Debug, Default)]
struct Series {
    throughput: Lines,
    cwnd: Lines,
    rtt: Lines,
    retransmits: Vec<(f64, f64)>,
}

fn series(report: &Value, omit_s: f64) -> Series {
    let mut s = Series::default();
    let Some(intervals) = report["intervals"].as_array() else {
        return s;
    };
    let mut per: Vec<[Vec<(f64, f64)>; 3]> = Vec::new();
    let mut sum = Vec::new();
    for iv in intervals {
        let shift = if iv["sum"]["omitted"].as_bool() == Some(true) {
            0.0
        } else {
            omit_s
        };
        let t = iv["sum"]["end"].as_f64().unwrap_or(0.0) + shift;
        sum.push((
            t,
            iv["sum"]["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6,
        ));
        s.retransmits
            .push((t, iv["sum"]["retransmits"].as_f64().unwrap_or(0.0)));
        for (k, st) in iv["streams"].as_array().into_iter().flatten().enumerate() {
            if per.len() <= k {
                per.push(Default::default());
            }
            per[k][0].push((t, st["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6));
            if let Some(c) = st["snd_cwnd"].as_f64() {
                per[k][1].push((t, c / 1048576.0));
            }
            if let Some(r) = st["rtt"].as_f64() {
                per[k][2].push((t, r / 1000.0));
            }
        }
    }
    let many = per.len() > 1;
    for (k, [bps, cwnd, rtt]) in per.into_iter().enumerate() {
        let label = format!("stream {}", k + 1);
        if many {
            s.throughput.push((label.clone(), bps));
        }
        s.cwnd.push((label.clone(), cwnd));
        s.rtt.push((label, rtt));
    }
    s.throughput.insert(0, ("sum".into(), sum));
    s
}

fn bounds(lines: &Lines) -> (f64, f64, f64) {
    let pts = lines.iter().flat_map(|(_, p)| p.iter());
    let (mut xmax, mut ymax, mut ymin) = (1.0_f64, 0.0_f64, 0.0_f64);
    for &(x, y) in pts {
        xmax = xmax.max(x);
        ymax = ymax.max(y);
        ymin = ymin.min(y);
    }
    (xmax, ymin, if ymax > 0.0 { ymax * 1.1 } else { 1.0 })
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    caption: &str,
    (x_desc, y_desc): (&str, &str),
    lines: &Lines,
    xmax: f64,
    marks: &[(f64, f64)],
) -> anyhow::Result<()> {
    let (_, ymin, ymax) = bounds(lines);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..xmax, ymin..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(err)?;
    for &(a, b) in marks {
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(a, ymin), (b, ymax)],
                RGBColor(255, 200, 200).mix(0.5).filled(),
            )))
            .map_err(err)?;
    }
    for (i, (label, pts)) in lines.iter().enumerate() {
        let c = color(i);
        let width = if label == "sum" { 2 } else { 1 };
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(width)))
            .map_err(err)?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
    }
    if lines.len() > 1 && lines.len() <= 17 {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 11))
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

fn draw_point<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rf: &ResultFile,
    k: usize,
) -> anyhow::Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let p = &rf.points[k];
    if p.point.find_rate.is_some() {
        return draw_find_rate_point(root, rf, k);
    }
    let omit = p.point.omit.as_secs_f64();
    let rep = p.repetitions.first();
    let s = rep.map(|r| series(&r.report, omit)).unwrap_or_default();
    let marks: Vec<(f64, f64)> = p
        .point
        .event
        .map(|e| (e.at.as_secs_f64(), e.end().as_secs_f64()))
        .into_iter()
        .collect();
    let xmax = bounds(&s.throughput)
        .0
        .max((p.point.omit.saturating_add(p.point.duration)).as_secs_f64());
    let title = format!(
        "{} — point {}/{} {} (repetition 1 of {})",
        rf.experiment.name,
        k + 1,
        rf.points.len(),
        if p.point.id.is_empty() {
            "(single point)"
        } else {
            &p.point.id
        },
        p.repetitions.len()
    );
    let root = root.titled(&title, ("sans-serif", 18)).map_err(err)?;
    let areas = root.split_evenly((4, 1));
    let mut tp_caption = "throughput".to_owned();
    if let Some(pred) = &p.prediction {
        tp_caption += &format!(
            " (model: {:.0} Mbit/s{})",
            pred.expected_bps as f64 / 1e6,
            if pred.window_limited {
                ", window-limited"
            } else {
                ""
            }
        );
    }
    panel(
        &areas[0],
        &tp_caption,
        ("time (s)", "Mbit/s"),
        &s.throughput,
        xmax,
        &marks,
    )?;
    panel(
        &areas[1],
        "congestion window",
        ("time (s)", "MiB"),
        &s.cwnd,
        xmax,
        &marks,
    )?;
    panel(
        &areas[2],
        "smoothed RTT",
        ("time (s)", "ms"),
        &s.rtt,
        xmax,
        &marks,
    )?;
    panel(
        &areas[3],
        "retransmits per interval",
        ("time (s)", "segments"),
        &vec![("retransmits".into(), s.retransmits)],
        xmax,
        &marks,
    )?;
    root.present().map_err(err)?;
    Ok(())
}

/// The window axis, if the experiment sweeps it.
fn window_axis(rf: &ResultFile) -> bool {
    rf.experiment
        .spec
        .sweep
        .iter()
        .any(|a| matches!(a, Axis::Window(_)))
}

/// The loss axis's values, if the experiment sweeps it.
fn loss_axis(rf: &ResultFile) -> Option<&[f64]> {
    rf.experiment.spec.sweep.iter().find_map(|a| match a {
        Axis::Loss(v) => Some(v.as_slice()),
        _ => None,
    })
}

/// The point id without its `axis=` part (the group a summary's curve belongs to).
fn group_of(id: &str, axis: &str) -> String {
    let g: Vec<&str> = id
        .split(',')
        .filter(|p| p.split_once('=').is_none_or(|(k, _)| k != axis))
        .collect();
    if g.is_empty() {
        "measured".into()
    } else {
        g.join(",")
    }
}

fn draw_summary<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rf: &ResultFile,
) -> anyhow::Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let mut title = format!("{} — {}", rf.experiment.name, rf.experiment.spec.title);
    if !rf.complete {
        title += " [INCOMPLETE]";
    }
    if rf.untrustworthy {
        title += " [UNTRUSTWORTHY]";
    }
    let root = root.titled(&title, ("sans-serif", 18)).map_err(err)?;
    if rf.experiment.spec.find_rate.is_some() {
        draw_find_rate_summary(&root, rf)
    } else if window_axis(rf) {
        draw_window_summary(&root, rf)
    } else if rf.experiment.spec.event.is_some() {
        draw_recovery_summary(&root, rf)
    } else if let Some(losses) = loss_axis(rf) {
        draw_loss_summary(&root, rf, losses)
    } else {
        draw_points_summary(&root, rf)
    }
}

/// One curve of the window summary: its name, measured points and a prediction for the model.
type Group<'a> = (
    String,
    Vec<(f64, f64)>,
    Option<&'a longhaul_experiments::predict::Prediction>,
);

fn draw_window_summary<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rf: &ResultFile,
) -> anyhow::Result<()> {
    let mut groups: Vec<Group<'_>> = Vec::new();
    let mut xmax = 1.0_f64;
    let mut ymax = 1.0_f64;
    for p in &rf.points {
        let Some(w) = p.point.window else { continue };
        let x = w as f64 / 1048576.0;
        xmax = xmax.max(x * 1.1);
        let g = group_of(&p.point.id, "window");
        let i = match groups.iter().position(|(n, _, _)| *n == g) {
            Some(i) => i,
            None => {
                groups.push((g, Vec::new(), p.prediction.as_ref()));
                groups.len() - 1
            }
        };
        if let Some(m) = p.summary.mean_bps {
            groups[i].1.push((x, m / 1e6));
            ymax = ymax.max(m / 1e6 * 1.15);
        }
        if let Some(pr) = &p.prediction {
            ymax = ymax.max(pr.goodput_bps as f64 / 1e6 * 1.15);
        }
    }
    let mut chart = ChartBuilder::on(root)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..xmax, 0.0..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("window per stream (MiB)")
        .y_desc("throughput (Mbit/s)")
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(err)?;
    for (i, (name, pts, pred)) in groups.iter().enumerate() {
        let c = color(i);
        if let Some(pr) = pred {
            let rtt = pr.rtt.as_secs_f64();
            let streams = f64::from(pr.streams);
            let goodput = pr.goodput_bps as f64 / 1e6;
            let model: Vec<(f64, f64)> = (0..=200)
                .map(|k| {
                    let x = xmax * f64::from(k) / 200.0;
                    (x, (x * 1048576.0 * 8.0 * streams / rtt / 1e6).min(goodput))
                })
                .collect();
            chart
                .draw_series(DashedLineSeries::new(model, 6, 4, c.stroke_width(1)))
                .map_err(err)?
                .label(format!("{name}: model min(window/RTT, goodput)"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(1))
                });
            let knee = pr.knee_window as f64 / 1048576.0;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(knee, 0.0), (knee, ymax)],
                    c.mix(0.6).stroke_width(1),
                )))
                .map_err(err)?
                .label(format!("{name}: BDP knee {knee:.2} MiB"))
                .legend(move |(x, y)| PathElement::new(vec![(x + 8, y - 6), (x + 8, y + 6)], c));
        }
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
            .map_err(err)?
            .label(format!("{name}: measured"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(err)?;
    }
    legend_and_present(&mut chart, root, SeriesLabelPosition::LowerRight)
}

/// Throughput against random loss, one curve per group of the other axes (per congestion
/// control), on log scales: the loss as a decade scale with loss 0 a decade left of the smallest
/// loss swept, the rate from below the lowest figure to above the bottleneck. Beside them, dashed:
/// the Mathis ceiling 1.22·MSS/(RTT·√p) (each point's prediction at its loss, drawn between the
/// losses as the 1/√p it is) and the bottleneck's goodput.
fn draw_loss_summary<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rf: &ResultFile,
    losses: &[f64],
) -> anyhow::Result<()> {
    let lossy = || losses.iter().copied().filter(|p| *p > 0.0);
    let smallest = lossy().fold(f64::INFINITY, f64::min);
    let smallest = if smallest.is_finite() { smallest } else { 1e-4 };
    let largest = lossy().fold(smallest, f64::max);
    let x_of = |p: f64| {
        if p > 0.0 {
            p.log10()
        } else {
            smallest.log10() - 1.0
        }
    };
    let mut groups: Lines = Vec::new();
    // The Mathis ceiling per distinct (MSS, RTT, streams): its constant m·√p, in Mbit/s.
    let mut mathis: Vec<((u64, u64, u32), f64)> = Vec::new();
    let mut goodput = 0.0_f64;
    let (mut lo, mut hi) = (f64::INFINITY, 0.0_f64);
    for p in &rf.points {
        let g = group_of(&p.point.id, "loss");
        let i = match groups.iter().position(|(n, _)| *n == g) {
            Some(i) => i,
            None => {
                groups.push((g, Vec::new()));
                groups.len() - 1
            }
        };
        if let Some(m) = p.summary.mean_bps.filter(|m| *m > 0.0) {
            let loss = p.point.path.loss.unwrap_or(0.0);
            groups[i].1.push((x_of(loss), m / 1e6));
            lo = lo.min(m / 1e6);
            hi = hi.max(m / 1e6);
        }
        if let Some(pr) = &p.prediction {
            goodput = goodput.max(pr.goodput_bps as f64 / 1e6);
            let key = (pr.mss, pr.rtt.as_nanos(), pr.streams);
            if let Some(m) = pr.mathis_bps
                && !mathis.iter().any(|(k, _)| *k == key)
            {
                mathis.push((key, m / 1e6 * pr.loss.sqrt()));
            }
        }
    }
    for (_, k) in &mathis {
        lo = lo.min(k / largest.sqrt());
        hi = hi.max(k / smallest.sqrt());
    }
    let hi = hi.max(goodput).max(1e-3) * 3.0;
    // Room below the lowest figure for the legend.
    let lo = if lo.is_finite() { lo / 20.0 } else { hi / 1e4 };
    let x0 = x_of(0.0) - 0.4;
    let mut chart = ChartBuilder::on(root)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x_of(largest) + 0.4, (lo..hi).log_scale())
        .map_err(err)?;
    let label = |x: &f64| {
        losses
            .iter()
            .find(|p| (x_of(**p) - x).abs() < 0.02)
            .map_or_else(String::new, |p| loss_flag(*p))
    };
    // Ticks every tenth of a decade, labelled only at the losses swept.
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(((x_of(largest) - x0 + 0.4) * 10.0).round() as usize + 1)
        .x_label_formatter(&label)
        .x_desc("random loss (0 at the left, then a decade scale)")
        .y_desc("throughput (Mbit/s, log scale)")
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(err)?;
    let grey = RGBColor(90, 90, 90);
    if goodput > 0.0 {
        chart
            .draw_series(DashedLineSeries::new(
                [(x0, goodput), (x_of(largest) + 0.4, goodput)],
                6,
                4,
                grey.stroke_width(1),
            ))
            .map_err(err)?
            .label(format!("bottleneck goodput {goodput:.0} Mbit/s"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], grey.stroke_width(1))
            });
    }
    for ((mss, rtt, streams), k) in &mathis {
        let curve: Vec<(f64, f64)> = (0..=100)
            .map(|i| {
                let x = smallest.log10() + (largest / smallest).log10() * f64::from(i) / 100.0;
                (x, k / 10f64.powf(x).sqrt())
            })
            .collect();
        chart
            .draw_series(DashedLineSeries::new(curve, 3, 3, BLACK.stroke_width(2)))
            .map_err(err)?
            .label(format!(
                "Mathis (Reno): 1.22·MSS/(RTT·√p), MSS {mss}, RTT {:.1} ms{}",
                *rtt as f64 / 1e6,
                if *streams > 1 {
                    format!(", {streams} streams")
                } else {
                    String::new()
                }
            ))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK.stroke_width(2)));
    }
    for (i, (name, pts)) in groups.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(err)?;
    }
    legend_and_present(&mut chart, root, SeriesLabelPosition::LowerLeft)
}

/// Draws the legend of a summary chart's series at `position` and writes the picture out.
fn legend_and_present<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    root: &DrawingArea<DB, Shift>,
    position: SeriesLabelPosition,
) -> anyhow::Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 12))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// A chart with one slot per point on the x axis, labelled by point ids.
fn draw_per_point<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rf: &ResultFile,
    y_desc: &str,
    bars: &[(String, Vec<Option<f64>>)],
    line: Option<(&str, Vec<Option<f64>>)>,
    notes: &[Option<String>],
) -> anyhow::Result<()> {
    let n = rf.points.len().max(1);
    let ids: Vec<String> = rf
        .points
        .iter()
        .map(|p| {
            if p.point.id.is_empty() {
                "point".into()
            } else {
                p.point.id.clone()
            }
        })
        .collect();
    let mut ymax = 1e-9_f64;
    for v in bars
        .iter()
        .flat_map(|(_, v)| v)
        .chain(line.iter().flat_map(|(_, v)| v))
        .flatten()
    {
        ymax = ymax.max(*v);
    }
    ymax *= 1.2;
    let mut chart = ChartBuilder::on(root)
        .margin(12)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..(n as f64 - 0.5), 0.0..ymax)
        .map_err(err)?;
    let fmt = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 0.01 && i >= 0.0 {
            ids.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n.min(30) * 2 + 1)
        .x_label_formatter(&fmt)
        .y_desc(y_desc)
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(err)?;
    let k = bars.len().max(1) as f64;
    let w = 0.8 / k;
    for (j, (name, vals)) in bars.iter().enumerate() {
        let c = color(j);
        chart
            .draw_series(vals.iter().enumerate().filter_map(|(i, v)| {
                let v = (*v)?;
                let x0 = i as f64 - 0.4 + w * j as f64;
                Some(Rectangle::new([(x0, 0.0), (x0 + w * 0.9, v)], c.filled()))
            }))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
    }
    chart
        .draw_series(notes.iter().enumerate().filter_map(|(i, t)| {
            t.as_ref().map(|t| {
                Text::new(
                    t.clone(),
                    (i as f64 - 0.3, ymax * 0.08),
                    ("sans-serif", 16).into_font().color(&BLACK),
                )
            })
        }))
        .map_err(err)?;
    if let Some((name, vals)) = line {
        let pts: Vec<(f64, f64)> = vals
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (i as f64, v)))
            .collect();
        chart
            .draw_series(pts.iter().map(|&p| Cross::new(p, 7, BLACK.stroke_width(2))))
            .map_err(err)?
            .label(name.to_owned())
            .legend(|(x, y)| Cross::new((x + 5, y), 5, BLACK.stroke_width(2)));
    }
    legend_and_present(&mut chart, root, SeriesLabelPosition::UpperRight)
}

/// One value per point of `rf` (a bar or mark of a per-point chart; `None` where it has none).
fn per_point(rf: &ResultFile, value: impl Fn(&PointResult) -> Option<f64>) -> Vec<Option<f64>> {
    rf.points.iter().map(value).collect()
}

fn draw_recovery_summary<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rf: &ResultFile,
) -> anyhow::Result<()> {
    let (top, bottom) = root.split_vertically(root.dim_in_pixel().1 / 2);
    let rec = per_point(rf, |p| p.summary.recovery_s);
    // A point that ran but never got back to the target within the test.
    let never: Vec<Option<String>> = rf
        .points
        .iter()
        .map(|p| {
            let n = p
                .repetitions
                .iter()
                .filter(|r| r.derived.pre_event_bps.is_some() && r.derived.recovery_s.is_none())
                .count();
            (n > 0).then(|| format!("{n} of {} never recovered", p.repetitions.len()))
        })
        .collect();
    draw_per_point(
        &top,
        rf,
        "recovery time to 95 % (s)",
        &[(
            "recovery time (mean of the repetitions that recovered)".into(),
            rec,
        )],
        None,
        &never,
    )?;
    let pre = per_point(rf, |p| p.summary.pre_event_bps.map(|b| b / 1e6));
    let mean = per_point(rf, |p| p.summary.mean_bps.map(|b| b / 1e6));
    draw_per_point(
        &bottom,
        rf,
        "Mbit/s",
        &[
            ("pre-burst mean".into(), pre),
            ("whole-test mean".into(), mean),
        ],
        None,
        &[],
    )
}

fn draw_points_summary<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rf: &ResultFile,
) -> anyhow::Result<()> {
    let mean = per_point(rf, |p| p.summary.mean_bps.map(|b| b / 1e6));
    let expected = per_point(rf, |p| {
        p.prediction.as_ref().map(|pr| pr.expected_bps as f64 / 1e6)
    });
    draw_per_point(
        root,
        rf,
        "throughput (Mbit/s)",
        &[("measured (mean of repetitions)".into(), mean)],
        Some(("model: min(window/RTT, goodput)", expected)),
        &[],
    )
}

/// A line characterisation's point: its search's trials in order (rate asked, offered by the
/// sender and received; the loss of each), then the delay figures at 50, 90 and 100 % of the rate
/// found.
fn draw_find_rate_point<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rf: &ResultFile,
    k: usize,
) -> anyhow::Result<()> {
    let p = &rf.points[k];
    let report = p.repetitions.first().map_or(&Value::Null, |r| &r.report);
    let trials: Vec<&Value> = report["trials"].as_array().into_iter().flatten().collect();
    let at = |key: &str, scale: f64| -> Vec<(f64, f64)> {
        trials
            .iter()
            .enumerate()
            .map(|(i, t)| ((i + 1) as f64, t[key].as_f64().unwrap_or(0.0) * scale))
            .collect()
    };
    let title = format!(
        "{} — point {}/{} {}: the search for the loss-free rate (repetition 1 of {})",
        rf.experiment.name,
        k + 1,
        rf.points.len(),
        p.point.id,
        p.repetitions.len()
    );
    let root = root.titled(&title, ("sans-serif", 18)).map_err(err)?;
    let areas = root.split_evenly((3, 1));
    let xmax = trials.len().max(1) as f64 + 0.5;
    let mut caption = format!(
        "trials: rate found {:.1} Mbit/s of payload",
        report["rate_bps"].as_f64().unwrap_or(0.0) / 1e6
    );
    if let Some(pred) = &p.prediction {
        caption += &format!(" (line rate: {:.1})", pred.expected_bps as f64 / 1e6);
    }
    panel(
        &areas[0],
        &caption,
        ("trial", "Mbit/s of payload"),
        &vec![
            ("asked".into(), at("rate_bps", 1e-6)),
            ("offered by the sender".into(), at("offered_bps", 1e-6)),
            ("received".into(), at("received_bps", 1e-6)),
        ],
        xmax,
        &[],
    )?;
    panel(
        &areas[1],
        "loss per trial",
        ("trial", "% of datagrams"),
        &vec![("lost".into(), at("loss", 100.0))],
        xmax,
        &[],
    )?;
    let load: Vec<&Value> = report["load"].as_array().into_iter().flatten().collect();
    let by_load = |f: &dyn Fn(&Value) -> Option<f64>| -> Vec<(f64, f64)> {
        load.iter()
            .filter_map(|l| Some((l["percent"].as_f64()?, f(&l["trial"])?)))
            .collect()
    };
    panel(
        &areas[2],
        "at 50, 90 and 100 % of the rate found",
        ("% of the rate found", "ms"),
        &vec![
            (
                "jitter (RFC 3550)".into(),
                by_load(&|t| t["jitter_ms"].as_f64()),
            ),
            (
                "delay variation p99".into(),
                by_load(&|t| t["delay_variation"]["p99_ms"].as_f64()),
            ),
        ],
        100.0 + 5.0,
        &[],
    )?;
    root.present().map_err(err)?;
    Ok(())
}

/// A line characterisation's summary: the loss-free rate of every point against the line rate,
/// and the packet rate it means (where the hosts' per-packet cost shows).
fn draw_find_rate_summary<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rf: &ResultFile,
) -> anyhow::Result<()> {
    let (top, bottom) = root.split_vertically(root.dim_in_pixel().1 / 2);
    let found = per_point(rf, |p| p.summary.mean_bps.map(|b| b / 1e6));
    let line = per_point(rf, |p| {
        p.prediction.as_ref().map(|pr| pr.expected_bps as f64 / 1e6)
    });
    draw_per_point(
        &top,
        rf,
        "loss-free rate (Mbit/s of payload)",
        &[("measured (mean of repetitions)".into(), found)],
        Some(("line rate in payload", line)),
        &[],
    )?;
    let pps = per_point(rf, |p| {
        let len = p.point.datagram_len()? as f64;
        p.summary.mean_bps.map(|b| b / (8.0 * len) / 1e3)
    });
    draw_per_point(
        &bottom,
        rf,
        "thousand datagrams per second",
        &[("at the loss-free rate".into(), pps)],
        None,
        &[],
    )
}

const POINT_SIZE: (u32, u32) = (1000, 1100);
const SUMMARY_SIZE: (u32, u32) = (1000, 620);

/// Renders every plot of `rf` into `dir` (created): `summary.{png,svg}` and
/// `point-NN.{png,svg}`.
pub fn render(rf: &ResultFile, dir: &Path) -> anyhow::Result<Vec<Plot>> {
    font()?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut out = Vec::new();
    let stem = dir.join("summary");
    let (png, svg) = (stem.with_extension("png"), stem.with_extension("svg"));
    draw_summary(
        &BitMapBackend::new(&png, SUMMARY_SIZE).into_drawing_area(),
        rf,
    )?;
    draw_summary(&SVGBackend::new(&svg, SUMMARY_SIZE).into_drawing_area(), rf)?;
    out.push(Plot {
        name: "summary".into(),
        title: format!("{}: summary", rf.experiment.name),
        png,
        svg,
    });
    for k in 0..rf.points.len() {
        let name = format!("point-{:02}", k + 1);
        let stem = dir.join(&name);
        let (png, svg) = (stem.with_extension("png"), stem.with_extension("svg"));
        draw_point(
            &BitMapBackend::new(&png, POINT_SIZE).into_drawing_area(),
            rf,
            k,
        )?;
        draw_point(
            &SVGBackend::new(&svg, POINT_SIZE).into_drawing_area(),
            rf,
            k,
        )?;
        out.push(Plot {
            name,
            title: format!(
                "{}: point {} {}",
                rf.experiment.name,
                k + 1,
                rf.points[k].point.id
            ),
            png,
            svg,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use longhaul_experiments::builtin::builtin;
    use longhaul_experiments::predict::predict;
    use longhaul_experiments::result::{
        Derived, Experiment, Fidelity, HostFacts, PointResult, Repetition,
    };
    use serde_json::json;

    use super::*;

    /// The reduced transport-loss run with synthetic figures: each control at its Mathis
    /// ceiling (capped at the goodput) times its index, so every curve differs.
    fn transport_loss() -> ResultFile {
        let b = builtin("transport-loss").expect("builtin");
        let spec = b.spec().expect("spec").reduced();
        let topo = spec.topology(None).expect("topology");
        let mut rf = ResultFile::new(
            "20261128-120000-transport-loss",
            Experiment {
                name: spec.name.clone(),
                file: "builtin/transport-loss.toml".into(),
                text: b.toml.into(),
                reduced: true,
                spec: spec.clone(),
            },
            "2026-11-28T12:00:00Z",
            HostFacts::default(),
            "0.1.0",
            BTreeMap::new(),
        );
        for p in spec.points() {
            let pr = predict(&p, &p.compile(&topo).expect("path"));
            let k = (p.index / 4 + 1) as f64;
            let bps = pr.mathis_bps.map_or(pr.goodput_bps as f64, |m| {
                (m * k).min(pr.goodput_bps as f64)
            });
            // A QUIC report's stream shape: the connection's window, RTT and losses.
            let report = json!({"intervals": [{"sum": {"start": 0.0, "end": 1.0,
                "bits_per_second": bps, "retransmits": 3, "omitted": false},
                "streams": [{"bits_per_second": bps, "snd_cwnd": 8_000_000, "rtt": 127_500,
                "retransmits": 3}]}], "start": {}, "end": {}});
            rf.push_point(PointResult {
                prediction: Some(pr),
                repetitions: vec![Repetition {
                    repetition: 0,
                    started: "2026-11-28T12:00:01Z".into(),
                    report,
                    error: None,
                    fidelity: Fidelity {
                        ok: true,
                        ..Fidelity::default()
                    },
                    derived: Derived {
                        mean_bps: Some(bps),
                        ..Derived::default()
                    },
                }],
                summary: Derived::default(),
                point: p,
            });
        }
        rf
    }

    #[test]
    fn a_loss_sweep_plots_throughput_against_loss_per_control_with_mathis() {
        let rf = transport_loss();
        assert_eq!(loss_axis(&rf), Some(&[0.0, 1e-4, 1e-3, 1e-2][..]));
        assert_eq!(group_of("cc=quic-bbr,loss=0.1%", "loss"), "cc=quic-bbr");
        assert_eq!(group_of("loss=1%", "loss"), "measured");
        let s = series(&rf.points[27].repetitions[0].report, 0.0);
        assert_eq!(s.cwnd[0].1, vec![(1.0, 8_000_000.0 / 1048576.0)]);
        assert_eq!(s.rtt[0].1, vec![(1.0, 127.5)]);
        let dir = std::env::temp_dir().join(format!("lh-lab-plot-{}", std::process::id()));
        let plots = render(&rf, &dir).expect("render");
        assert_eq!(plots.len(), 1 + 28);
        let svg = std::fs::read_to_string(dir.join("summary.svg")).expect("summary.svg");
        // Each label is a text element of its own: one line of the SVG.
        let lines: Vec<&str> = svg.lines().map(str::trim).collect();
        for text in ["cc=reno", "cc=quic-udt", "0%", "0.01%", "0.1%", "1%"] {
            assert!(lines.contains(&text), "{text} not in the summary");
        }
        for text in [
            "Mathis (Reno): 1.22·MSS/(RTT·√p), MSS 1460, RTT 127.2 ms",
            "bottleneck goodput 483 Mbit/s",
        ] {
            assert!(svg.contains(text), "{text} not in the summary");
        }
        assert!(
            std::fs::read(dir.join("summary.png"))
                .expect("summary.png")
                .starts_with(b"\x89PNG")
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
