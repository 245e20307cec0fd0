//! `longhaul calc`: the TCP models of long fat paths, as a calculator.
//!
//! Subcommands: `bdp` (bandwidth-delay product, window, buffer sysctls,
//! ceilings at common windows), `mathis` (Reno's loss–throughput relation, with
//! HighSpeed TCP and CUBIC for comparison), `responsiveness` (time to recover
//! from one loss), `lsr` (Internet2 Land Speed Record metric) and `path`
//! (everything at once; also what `longhaul calc --rate R --rtt T` runs).
//!
//! The formulas live in `longhaul_units::models`, each with its source; this
//! module parses flags, computes one serialisable report per subcommand
//! ([`compute`]) and prints it as text or JSON. Inputs use the units crate's
//! parsers: rates ×1000 ("9.29G"), sizes ×1024 ("560G" = 560 GiB, iperf's
//! GBytes; "560GB" = 560 × 10^9), durations with units (a bare RTT is in ms).

use std::fmt::Write as _;

use anyhow::{Context, Result, anyhow, bail};
use longhaul_engine::doctor::{Target, buffer_sysctl_value};
use longhaul_units::models::{
    CUBIC_BETA, CUBIC_C, LSR_IMPROVEMENT, LSR_MAX_KM, LSR_MIN_KM, LSR_MIN_SECONDS,
    MATHIS_C_PER_ACK, MAX_TCP_WINDOW, SCALABLE_A, SCALABLE_B, bdp_bytes, bdp_segments,
    cubic_avg_window, cubic_k, fmt_lsr, hstcp_window, lsr_beats, lsr_capped_km,
    lsr_metric_from_rate, mathis_loss_for_rate, mathis_rate_bps, max_window_ceiling_bps,
    reno_avg_window, responsiveness, scalable_recovery_rtts, streams_needed,
    streams_needed_for_window, window_ceiling_bps,
};
use longhaul_units::{
    Nanos, TimeUnit, fmt_duration, fmt_km, fmt_rate, fmt_size, fmt_size_si, parse_distance,
    parse_duration, parse_rate, parse_size,
};
use serde::Serialize;

const CALC_HELP: &str = "\
Units: rates in bit/s with k/m/g/t = ×1000 (10G, 9.29g, 100m); sizes with K/M/G/T = ×1024 like iperf \
(560G = 560 GiB), KB/MB/GB = ×1000 (560GB); durations with ns/us/ms/s/min/h (a bare --rtt is in ms, a \
bare --seconds in s); distances in km.

Examples:
  longhaul calc bdp --rate 9.29G --rtt 17ms
  longhaul calc mathis --mss 1460 --rtt 100ms --rate 10G
  longhaul calc responsiveness --rate 10G --rtt 120ms
  longhaul calc lsr --rate 4.00G --km 11539
  longhaul calc --rate 10G --rtt 120ms          # = calc path: everything at once
  longhaul calc bdp --rate 100G --rtt 150ms -P 4 --json";

/// Flags of `longhaul calc`.
#[derive(clap::Args, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = CALC_HELP
)]
pub(crate) struct CalcArgs {
    #[command(subcommand)]
    command: Option<CalcCommand>,
    /// Without a subcommand: the `path` flags.
    #[command(flatten)]
    path: PathArgs,
}

#[derive(clap::Subcommand, Debug)]
enum CalcCommand {
    /// Bandwidth-delay product: window per stream, segments in flight, streams needed under the 1 GiB
    /// window, the buffer sysctls that allow it, and the ceiling at common default windows.
    #[command(
        after_help = "BDP = rate × RTT / 8. longhaul asks for 2 × BDP per stream.\n\n\
Examples:\n  longhaul calc bdp --rate 9.29G --rtt 17ms        # seed 002: 19.74 MB\n  \
longhaul calc bdp --rate 100G --rtt 300ms -P 8\n  longhaul calc bdp --rate 10G --rtt 120 --json   # bare RTT = ms"
    )]
    Bdp(BdpArgs),
    /// Mathis et al. 1997: Reno's throughput ceiling for a loss rate, or the loss rate a rate needs;
    /// with HighSpeed TCP and CUBIC average windows for comparison.
    #[command(
        after_help = "BW = (MSS × 8 / RTT) × C / √p (Mathis, Semke, Mahdavi, Ott, CCR 1997). A Reno \
reference: CUBIC and BBR do not follow 1/√p (Mathis & Mahdavi, CCR 2019).\n\n\
Examples:\n  longhaul calc mathis --mss 1460 --rtt 100ms --loss 1e-7\n  \
longhaul calc mathis --mss 1460 --rtt 100ms --rate 10G     # p ≈ 2.05e-10\n  \
longhaul calc mathis --mss 8960 --rtt 120ms --loss 0.001% --c 0.87"
    )]
    Mathis(MathisArgs),
    /// Time Reno needs to regain full rate after one loss, ρ = C·RTT²/(2·MSS), with CUBIC's K and
    /// Scalable TCP's recovery for comparison.
    #[command(
        after_help = "Examples:\n  longhaul calc responsiveness --rate 10G --rtt 120ms    \
# 6164 s (1 h 43 min)\n  longhaul calc responsiveness --rate 10G --rtt 120ms --mss 8960"
    )]
    Responsiveness(ResponsivenessArgs),
    /// Internet2 Land Speed Record metric (rate × distance, Tbit·m/s) from bytes and seconds or from a
    /// rate, with the 30,000 km cap and the +10 % rule.
    #[command(
        after_help = "Sizes parse as iperf prints them: 560G = 560 GBytes = 560 × 2^30 bytes; \
write 560GB for 560 × 10^9.\n\n\
Examples:\n  longhaul calc lsr --bytes 560G --seconds 1200 --km 11539   # seed 001\n  \
longhaul calc lsr --rate 4.00G --km 11539                   # 46,156 Tbit·m/s\n  \
longhaul calc lsr --rate 9.08G --km 32372                   # capped: 272,400\n  \
longhaul calc lsr --rate 6.9G --km 30000 --beats 272400"
    )]
    Lsr(LsrArgs),
    /// Everything for one path: BDP and windows, Mathis, responsiveness.
    #[command(
        after_help = "Examples:\n  longhaul calc path --rate 10G --rtt 120ms\n  \
longhaul calc path --rate 10G --rtt 120ms --loss 1e-8 --mss 8960\n  longhaul calc --rate 10G --rtt 120ms   \
# the same without the word path"
    )]
    Path(PathArgs),
}

/// Flags shared by the path-shaped subcommands.
#[derive(clap::Args, Debug)]
struct Common {
    /// Round-trip time: 120ms, 0.12s, 17 ms; a bare number is milliseconds.
    #[arg(long, value_name = "DURATION", required = true)]
    rtt: Option<String>,
    /// Segment payload in bytes: 1460 for MTU 1500, 8960 for MTU 9000.
    #[arg(long, value_name = "BYTES", default_value = "1460")]
    mss: String,
    /// Print one JSON object with every input and output (base units plus display strings).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct BdpArgs {
    /// Bottleneck rate in bit/s: 10G, 9.29G, 100m (k/m/g/t = ×1000).
    #[arg(long, value_name = "RATE")]
    rate: String,
    /// Parallel streams sharing the rate.
    #[arg(short = 'P', long, visible_alias = "parallel", default_value_t = 1)]
    streams: u32,
    #[command(flatten)]
    common: Common,
}

#[derive(clap::Args, Debug)]
struct MathisArgs {
    /// Loss (congestion-event) probability per packet: 1e-7, 0.00001, or a percentage: 0.001%.
    #[arg(
        long,
        value_name = "P",
        required_unless_present = "rate",
        conflicts_with = "rate"
    )]
    loss: Option<String>,
    /// Instead of --loss: the rate to reach; prints the loss rate it needs (10G, 2.5g).
    #[arg(long, value_name = "RATE")]
    rate: Option<String>,
    /// Mathis constant C: √(3/2) ≈ 1.22 with an ACK per segment (default), √(3/4) ≈ 0.87 with delayed ACKs.
    #[arg(long = "c", value_name = "C")]
    c: Option<f64>,
    #[command(flatten)]
    common: Common,
}

#[derive(clap::Args, Debug)]
struct ResponsivenessArgs {
    /// Rate the stream runs at before the loss, bit/s: 10G, 1g.
    #[arg(long, value_name = "RATE")]
    rate: String,
    #[command(flatten)]
    common: Common,
}

#[derive(clap::Args, Debug)]
struct LsrArgs {
    /// Bytes moved: 560G (= 560 GiB, iperf's GBytes), 560GB (= 560 × 10^9), 1.1TB.
    #[arg(
        long,
        value_name = "SIZE",
        requires = "seconds",
        required_unless_present = "rate"
    )]
    bytes: Option<String>,
    /// Duration of the run: 1200, 1200s, 20min (a bare number is seconds).
    #[arg(long, value_name = "DURATION", requires = "bytes")]
    seconds: Option<String>,
    /// Instead of --bytes and --seconds: the average rate, 4.00G.
    #[arg(long, value_name = "RATE", conflicts_with_all = ["bytes", "seconds"])]
    rate: Option<String>,
    /// Terrestrial distance, the sum of great-circle hops: 11539, 11,539 km.
    #[arg(long, value_name = "KM")]
    km: String,
    /// A standing mark to compare with, in Tbit·m/s (272400) or with a unit (272.4P, 272400 Tbit·m/s).
    #[arg(long, value_name = "METRIC")]
    beats: Option<String>,
    /// Print one JSON object with every input and output.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct PathArgs {
    /// Bottleneck rate in bit/s: 10G, 9.29G, 100m (k/m/g/t = ×1000).
    #[arg(long, value_name = "RATE", required = true)]
    rate: Option<String>,
    /// Round-trip time: 120ms, 0.12s; a bare number is milliseconds.
    #[arg(long, value_name = "DURATION", required = true)]
    rtt: Option<String>,
    /// Segment payload in bytes: 1460 for MTU 1500, 8960 for MTU 9000.
    #[arg(long, value_name = "BYTES", default_value = "1460")]
    mss: String,
    /// Parallel streams sharing the rate.
    #[arg(short = 'P', long, visible_alias = "parallel", default_value_t = 1)]
    streams: u32,
    /// Loss probability of the path, if known: adds Reno's ceiling at that loss.
    #[arg(long, value_name = "P")]
    loss: Option<String>,
    /// Mathis constant C (default √(3/2) ≈ 1.22).
    #[arg(long = "c", value_name = "C")]
    c: Option<f64>,
    /// Print one JSON object with every input and output.
    #[arg(long)]
    json: bool,
}

/// Runs `longhaul calc`: prints the report as text, or as JSON with `--json`.
pub(crate) fn run(args: &CalcArgs) -> Result<()> {
    let (report, json) = compute(args)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).context("serialising the report")?
        );
    } else {
        print!("{}", report.text());
    }
    Ok(())
}

/// Parses the flags and computes the report; also says whether JSON was asked for.
fn compute(args: &CalcArgs) -> Result<(Report, bool)> {
    Ok(match &args.command {
        Some(CalcCommand::Bdp(a)) => {
            let p = PathInputs::parse(&a.rate, &a.common, a.streams)?;
            (Report::Bdp(bdp(&p)), a.common.json)
        }
        Some(CalcCommand::Mathis(a)) => {
            let rtt = parse_rtt(a.common.rtt.as_deref())?;
            let mss = parse_mss(&a.common.mss)?;
            let c = parse_c(a.c)?;
            let given = match (&a.loss, &a.rate) {
                (Some(l), _) => MathisGiven::Loss(parse_loss(l)?),
                (None, Some(r)) => MathisGiven::Rate(parse_positive_rate(r)?),
                (None, None) => bail!("give --loss or --rate"),
            };
            (Report::Mathis(mathis(mss, rtt, c, given)), a.common.json)
        }
        Some(CalcCommand::Responsiveness(a)) => {
            let p = PathInputs::parse(&a.rate, &a.common, 1)?;
            (
                Report::Responsiveness(responsiveness_report(p.rate_bps, p.rtt, p.mss)),
                a.common.json,
            )
        }
        Some(CalcCommand::Lsr(a)) => (Report::Lsr(lsr(a)?), a.json),
        Some(CalcCommand::Path(a)) => (Report::Path(Box::new(path(a)?)), a.json),
        None => (Report::Path(Box::new(path(&args.path)?)), args.path.json),
    })
}

// ---------------------------------------------------------------------------
// Input parsing: every error is one line naming the flag.

fn parse_positive_rate(s: &str) -> Result<u64> {
    let r = parse_rate(s).map_err(|e| anyhow!("--rate: {e}"))?;
    if r == 0 {
        bail!("--rate: must be above 0 bit/s");
    }
    Ok(r)
}

fn parse_rtt(s: Option<&str>) -> Result<Nanos> {
    let s = s.ok_or_else(|| anyhow!("--rtt is required"))?;
    let rtt = parse_duration(s, TimeUnit::Millis).map_err(|e| anyhow!("--rtt: {e}"))?;
    if rtt == Nanos::ZERO {
        bail!("--rtt: must be above 0");
    }
    Ok(rtt)
}

fn parse_mss(s: &str) -> Result<u64> {
    let mss = parse_size(s).map_err(|e| anyhow!("--mss: {e}"))?;
    if mss == 0 {
        bail!("--mss: must be at least 1 byte");
    }
    Ok(mss)
}

fn parse_c(c: Option<f64>) -> Result<f64> {
    match c {
        None => Ok(MATHIS_C_PER_ACK),
        Some(c) if c.is_finite() && c > 0.0 => Ok(c),
        Some(c) => bail!("--c: must be a positive number (1.22 or 0.87), got {c}"),
    }
}

/// A probability: "1e-7", "0.00001", or a percentage "0.001%".
fn parse_loss(s: &str) -> Result<f64> {
    let t = s.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 0.01),
        None => (t, 1.0),
    };
    let p = number
        .parse::<f64>()
        .map(|v| v * scale)
        .map_err(|_| anyhow!("--loss: {s:?} is not a probability (use 1e-7, 0.00001 or 0.001%)"))?;
    if !(p > 0.0 && p <= 1.0) {
        bail!("--loss: {s:?} must be above 0 and at most 1 (100%)");
    }
    Ok(p)
}

/// An LSR metric: a bare number is Tbit·m/s; "T…" and "P…" units are
/// accepted ("272400", "272,400 Tbit·m/s", "272.4P", "272.4 Pb·m/s").
fn parse_metric(s: &str) -> Result<f64> {
    let err = || {
        anyhow!(
            "--beats: {s:?} is not an LSR metric (use Tbit·m/s: 272400, or 272.4P for Pbit·m/s)"
        )
    };
    let t = s.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | ',' | 'e' | 'E' | '+' | '-')))
        .unwrap_or(t.len());
    let value: f64 = t[..end].replace(',', "").parse().map_err(|_| err())?;
    let unit = t[end..].trim().to_lowercase().replace(['·', '-', ' '], "");
    let scale = match unit.as_str() {
        "" | "t" | "tbit" | "tbitm/s" | "tbm/s" | "tbps" => 1e12,
        "p" | "pbit" | "pbitm/s" | "pbm/s" | "pbps" => 1e15,
        _ => return Err(err()),
    };
    if !(value.is_finite() && value > 0.0) {
        return Err(err());
    }
    Ok(value * scale)
}

/// Rate, RTT, MSS and streams of a path.
#[derive(Debug, Clone, Copy)]
struct PathInputs {
    rate_bps: u64,
    rtt: Nanos,
    mss: u64,
    streams: u32,
}

impl PathInputs {
    fn parse(rate: &str, c: &Common, streams: u32) -> Result<PathInputs> {
        if streams == 0 {
            bail!("--streams: must be at least 1");
        }
        Ok(PathInputs {
            rate_bps: parse_positive_rate(rate)?,
            rtt: parse_rtt(c.rtt.as_deref())?,
            mss: parse_mss(&c.mss)?,
            streams,
        })
    }
}

// ---------------------------------------------------------------------------
// Reports

/// One report per subcommand; serialises with a "command" tag.
#[derive(Debug, Serialize)]
#[serde(tag = "command", rename_all = "snake_case")]
enum Report {
    Bdp(BdpReport),
    Mathis(MathisReport),
    Responsiveness(ResponsivenessReport),
    Lsr(LsrReport),
    Path(Box<PathReport>),
}

impl Report {
    fn text(&self) -> String {
        match self {
            Report::Bdp(r) => r.text(),
            Report::Mathis(r) => r.text(),
            Report::Responsiveness(r) => r.text(),
            Report::Lsr(r) => r.text(),
            Report::Path(r) => r.text(),
        }
    }
}

/// 19741250 → "19,741,250".
fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// "19.74 MB (18.83 MiB)"; exact below 1 kB.
fn both_sizes(bytes: u64) -> String {
    let si = fmt_size_si(bytes);
    let bin = fmt_size(bytes);
    if si == bin {
        si
    } else {
        format!("{si} ({bin})")
    }
}

/// A large count, whole with separators up to a billion, else in e-notation.
fn count(x: f64) -> String {
    if x.is_finite() && x < 1e9 {
        group(x.round() as u64)
    } else {
        format!("{x:.2e}")
    }
}

/// The rate a window of `segments` × `mss` carries per `rtt`, bit/s.
fn window_rate(segments: f64, mss: u64, rtt: Nanos) -> u64 {
    (segments * mss as f64 * 8.0 / rtt.as_secs_f64()) as u64
}

/// A rate that may be unbounded (`u64::MAX`).
fn rate_text(bps: u64) -> String {
    if bps == u64::MAX {
        "unbounded".to_owned()
    } else {
        fmt_rate(bps)
    }
}

/// The ceiling one stream has with a given window.
#[derive(Debug, Serialize)]
struct Ceiling {
    /// What sets this window.
    what: &'static str,
    window_bytes: u64,
    window: &'static str,
    /// One stream's ceiling at the path's RTT.
    ceiling_bps: u64,
    ceiling: String,
    /// The ceiling as a share of the path's rate, %.
    percent_of_rate: f64,
    /// Streams needed at this window to fill the path.
    streams_needed: u64,
}

#[derive(Debug, Serialize)]
struct BdpReport {
    rate_bps: u64,
    rate: String,
    rtt_ns: u64,
    rtt: String,
    streams: u32,
    mss_bytes: u64,
    bdp_bytes: u64,
    bdp: String,
    bdp_per_stream_bytes: u64,
    bdp_per_stream: String,
    /// Window per stream to just fill the path (1 × BDP).
    window_1x_bytes: u64,
    window_1x: String,
    /// Window per stream longhaul asks for (2 × BDP).
    window_2x_bytes: u64,
    window_2x: String,
    /// Segments of `mss_bytes` in flight on the whole path.
    segments_in_flight: f64,
    /// The RFC 7323 maximum window and the rate it allows one stream.
    max_window_bytes: u64,
    max_window_ceiling_bps: u64,
    max_window_ceiling: String,
    /// Whether one stream's window can cover the whole BDP.
    one_stream_fits: bool,
    /// Streams needed when every stream has the maximum window.
    streams_needed: u64,
    /// `net.core.rmem_max`/`wmem_max` that let each stream request 2 × BDP.
    core_mem_max_bytes: u64,
    /// `tcp_rmem[2]`/`tcp_wmem[2]` that let autotuning reach 1 × BDP of window.
    tcp_mem_max_bytes: u64,
    sysctl_commands: Vec<String>,
    ceilings: Vec<Ceiling>,
}

fn bdp(p: &PathInputs) -> BdpReport {
    let total = bdp_bytes(p.rate_bps, p.rtt);
    let target = Target {
        rate_bps: p.rate_bps,
        rtt: p.rtt,
        streams: p.streams,
    };
    let per_stream = target.bdp_per_stream();
    let two = per_stream.saturating_mul(2);
    let max_ceiling = max_window_ceiling_bps(p.rtt);
    // The same rules as `longhaul doctor` (engine::doctor): the core caps at
    // 2 × BDP per stream (at most the 1 GiB window), autotuning at 2 × BDP
    // since about half of an autotuned buffer is window.
    let core = buffer_sysctl_value(target.wanted_window());
    let tcp = buffer_sysctl_value(two);
    let sysctl_commands = vec![
        format!("sysctl -w net.core.rmem_max={core} net.core.wmem_max={core}"),
        format!(
            "sysctl -w net.ipv4.tcp_rmem=\"4096 131072 {tcp}\" net.ipv4.tcp_wmem=\"4096 16384 {tcp}\""
        ),
    ];
    // Windows that commonly cap a stream (notes/transfer-tools.md §2):
    // setsockopt clamps a request at rmem_max and doubles it, about half of
    // which is window, so a cap of N bytes gives about N of window; an
    // autotuned buffer also gives about half its maximum.
    let windows: [(&'static str, &'static str, u64); 6] = [
        (
            "64 KiB",
            "no window scaling (RFC 7323 off): 65,535 B",
            65_535,
        ),
        (
            "208 KiB",
            "rmem_max = 212,992, the long-standing Linux default",
            212_992,
        ),
        (
            "2 MiB",
            "OpenSSH channel window (scp, rsync over ssh)",
            2 << 20,
        ),
        (
            "4 MiB",
            "rmem_max/wmem_max = 4 MiB (the test VM's default)",
            4 << 20,
        ),
        (
            "16 MiB",
            "autotuning with tcp_rmem[2] = 32 MiB (half is window)",
            16 << 20,
        ),
        (
            "1 GiB",
            "RFC 7323 maximum window: 65,535 × 2^14 B",
            MAX_TCP_WINDOW,
        ),
    ];
    let ceilings = windows
        .into_iter()
        .map(|(label, what, window)| {
            let ceiling = window_ceiling_bps(window, p.rtt);
            Ceiling {
                what,
                window_bytes: window,
                window: label,
                ceiling_bps: ceiling,
                ceiling: rate_text(ceiling),
                percent_of_rate: ceiling as f64 * 100.0 / p.rate_bps as f64,
                streams_needed: streams_needed_for_window(p.rate_bps, p.rtt, window),
            }
        })
        .collect();
    BdpReport {
        rate_bps: p.rate_bps,
        rate: fmt_rate(p.rate_bps),
        rtt_ns: p.rtt.0,
        rtt: fmt_duration(p.rtt),
        streams: p.streams,
        mss_bytes: p.mss,
        bdp_bytes: total,
        bdp: both_sizes(total),
        bdp_per_stream_bytes: per_stream,
        bdp_per_stream: both_sizes(per_stream),
        window_1x_bytes: per_stream,
        window_1x: both_sizes(per_stream),
        window_2x_bytes: two,
        window_2x: both_sizes(two),
        segments_in_flight: bdp_segments(p.rate_bps, p.rtt, p.mss),
        max_window_bytes: MAX_TCP_WINDOW,
        max_window_ceiling_bps: max_ceiling,
        max_window_ceiling: rate_text(max_ceiling),
        one_stream_fits: total <= MAX_TCP_WINDOW,
        streams_needed: streams_needed(p.rate_bps, p.rtt),
        core_mem_max_bytes: core,
        tcp_mem_max_bytes: tcp,
        sysctl_commands,
        ceilings,
    }
}

impl BdpReport {
    fn text(&self) -> String {
        let mut s = String::new();
        let streams = if self.streams == 1 {
            "1 stream".to_owned()
        } else {
            format!("{} streams", self.streams)
        };
        let _ = writeln!(
            s,
            "Bandwidth-delay product of {} × {} RTT ({streams}, MSS {} B)",
            self.rate, self.rtt, self.mss_bytes
        );
        let _ = writeln!(
            s,
            "  BDP                {} = {} B",
            self.bdp,
            group(self.bdp_bytes)
        );
        if self.streams > 1 {
            let _ = writeln!(s, "  BDP per stream     {}", self.bdp_per_stream);
        }
        let _ = writeln!(
            s,
            "  window per stream  1 × BDP {} fills the path; 2 × BDP {} {}",
            self.window_1x,
            self.window_2x,
            if self.window_2x_bytes > MAX_TCP_WINDOW {
                "is over the 1 GiB window, so longhaul asks for 1 GiB"
            } else {
                "(what longhaul asks for)"
            }
        );
        let _ = writeln!(
            s,
            "  segments in flight {} of {} B",
            count(self.segments_in_flight),
            self.mss_bytes
        );
        let fits = if self.one_stream_fits {
            "fits"
        } else {
            "does NOT fit"
        };
        let _ = writeln!(
            s,
            "  one stream         {fits}: the 1 GiB RFC 7323 window carries at most {} at {}",
            self.max_window_ceiling, self.rtt
        );
        let _ = writeln!(
            s,
            "  streams needed     {} (window limit alone){}",
            self.streams_needed,
            if u64::from(self.streams) < self.streams_needed {
                format!("; -P {} is too few", self.streams)
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            s,
            "  buffer sysctls     net.core.rmem_max, wmem_max ≥ {} ({}); tcp_rmem, tcp_wmem max ≥ {} ({})",
            self.core_mem_max_bytes,
            fmt_size(self.core_mem_max_bytes),
            self.tcp_mem_max_bytes,
            fmt_size(self.tcp_mem_max_bytes)
        );
        for cmd in &self.sysctl_commands {
            let _ = writeln!(s, "    {cmd}");
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "One stream's ceiling at common windows ({} RTT):",
            self.rtt
        );
        let _ = writeln!(
            s,
            "  {:<10} {:>12} {:>9} {:>8}  what sets the window",
            "window", "ceiling", "of rate", "streams"
        );
        for c in &self.ceilings {
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

/// What the Mathis calculation starts from.
#[derive(Debug, Clone, Copy)]
enum MathisGiven {
    Loss(f64),
    Rate(u64),
}

/// Average windows (segments) of three response functions at one loss rate,
/// and the rate each carries at the path's RTT and MSS.
#[derive(Debug, Serialize)]
struct ResponseWindows {
    loss_p: f64,
    /// Reno, W = 1.2/√p (RFC 3649 and RFC 9438 tables).
    reno_segments: f64,
    reno_bps: u64,
    /// HighSpeed TCP, W = 0.12/p^0.835 (RFC 3649 §5).
    hstcp_segments: f64,
    hstcp_bps: u64,
    /// CUBIC, W = 1.054 × RTT^0.75 / p^0.75 (RFC 9438 §5.2).
    cubic_segments: f64,
    cubic_bps: u64,
}

/// The loss rate each response function tolerates at a given window
/// (RFC 9438 table 3 style).
#[derive(Debug, Serialize)]
struct LossNeeded {
    window_segments: f64,
    reno_p: f64,
    hstcp_p: f64,
    cubic_p: f64,
}

#[derive(Debug, Serialize)]
struct MathisReport {
    model: &'static str,
    caveat: &'static str,
    mss_bytes: u64,
    rtt_ns: u64,
    rtt: String,
    c: f64,
    /// "ceiling" (from --loss) or "loss_for_rate" (from --rate).
    mode: &'static str,
    loss_p: f64,
    loss: String,
    /// The ceiling (mode ceiling) or the given rate (mode loss_for_rate).
    rate_bps: u64,
    rate: String,
    packets_between_losses: f64,
    /// At `rate_bps`, how long between two losses.
    seconds_between_losses: f64,
    between_losses: String,
    windows: ResponseWindows,
    loss_needed: Option<LossNeeded>,
}

fn windows_at(p: f64, mss: u64, rtt: Nanos) -> ResponseWindows {
    let reno = reno_avg_window(p);
    let hstcp = hstcp_window(p);
    let cubic = cubic_avg_window(rtt, p, CUBIC_C, CUBIC_BETA);
    ResponseWindows {
        loss_p: p,
        reno_segments: reno,
        reno_bps: window_rate(reno, mss, rtt),
        hstcp_segments: hstcp,
        hstcp_bps: window_rate(hstcp, mss, rtt),
        cubic_segments: cubic,
        cubic_bps: window_rate(cubic, mss, rtt),
    }
}

/// Inverts the three response functions at window `w` segments:
/// Reno p = (1.2/W)²; HSTCP p = (0.12/W)^(1/0.835); CUBIC
/// p = (k/W)^(4/3) × RTT with k = ∜(C(3+β)/(4(1−β))) (RFC 9438 §5.2).
/// 10G, 100 ms, 1500 B (W = 83,333) gives RFC 9438 table 3: 2.0e-10,
/// 1.0e-7, 2.9e-8.
fn loss_needed(w: f64, rtt: Nanos) -> LossNeeded {
    let k = (CUBIC_C * (3.0 + CUBIC_BETA) / (4.0 * (1.0 - CUBIC_BETA))).powf(0.25);
    LossNeeded {
        window_segments: w,
        reno_p: (1.2 / w).powi(2),
        hstcp_p: (0.12 / w).powf(1.0 / 0.835),
        cubic_p: (k / w).powf(4.0 / 3.0) * rtt.as_secs_f64(),
    }
}

/// "2.05e-10 (one loss per 4.88e9 packets)".
fn loss_text(p: f64) -> String {
    format!("{p:.2e} (one loss per {} packets)", count(1.0 / p))
}

fn mathis(mss: u64, rtt: Nanos, c: f64, given: MathisGiven) -> MathisReport {
    let (mode, p, rate) = match given {
        MathisGiven::Loss(p) => {
            let bps = mathis_rate_bps(mss, rtt, p, c);
            (
                "ceiling",
                p,
                if bps.is_finite() {
                    bps as u64
                } else {
                    u64::MAX
                },
            )
        }
        MathisGiven::Rate(bps) => ("loss_for_rate", mathis_loss_for_rate(bps, mss, rtt, c), bps),
    };
    let packets = 1.0 / p;
    let pps = rate as f64 / (8.0 * mss as f64);
    let secs = packets / pps;
    let loss_needed = match given {
        MathisGiven::Rate(bps) => Some(loss_needed(bdp_segments(bps, rtt, mss), rtt)),
        MathisGiven::Loss(_) => None,
    };
    MathisReport {
        model: "Mathis et al. 1997, BW = (MSS × 8 / RTT) × C / √p: the Reno reference",
        caveat: "CUBIC and BBR do not follow 1/√p (Mathis & Mahdavi, \"Deprecating the TCP \
                 Macroscopic Model\", CCR 49(5), 2019)",
        mss_bytes: mss,
        rtt_ns: rtt.0,
        rtt: fmt_duration(rtt),
        c,
        mode,
        loss_p: p,
        loss: loss_text(p),
        rate_bps: rate,
        rate: rate_text(rate),
        packets_between_losses: packets,
        seconds_between_losses: secs,
        between_losses: fmt_duration(Nanos::from_secs_f64(secs)),
        windows: windows_at(p, mss, rtt),
        loss_needed,
    }
}

impl MathisReport {
    fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{}", self.model);
        let _ = writeln!(s, "  Note: {}.", self.caveat);
        let _ = writeln!(
            s,
            "  MSS {} B, RTT {}, C = {:.4}{}",
            self.mss_bytes,
            self.rtt,
            self.c,
            if (self.c - MATHIS_C_PER_ACK).abs() < 1e-12 {
                " (√(3/2): an ACK per segment; --c 0.87 for delayed ACKs)"
            } else {
                ""
            }
        );
        if self.mode == "ceiling" {
            let _ = writeln!(s, "  loss p             {}", self.loss);
            let _ = writeln!(s, "  Reno ceiling       {}", self.rate);
        } else {
            let _ = writeln!(s, "  rate               {}", self.rate);
            let _ = writeln!(s, "  loss p needed      ≤ {}", self.loss);
        }
        let _ = writeln!(
            s,
            "  between losses     {} at {}",
            self.between_losses, self.rate
        );
        let w = &self.windows;
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "Average window at p = {:.2e} by response function (segments; rate at {}, MSS {} B):",
            w.loss_p, self.rtt, self.mss_bytes
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
        if let Some(n) = &self.loss_needed {
            let _ = writeln!(s);
            let _ = writeln!(
                s,
                "Loss rate each tolerates at {} (window {} segments; RFC 9438 table 3):",
                self.rate,
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
}

#[derive(Debug, Serialize)]
struct ResponsivenessReport {
    rate_bps: u64,
    rate: String,
    rtt_ns: u64,
    rtt: String,
    mss_bytes: u64,
    /// The window before the loss, segments: rate × RTT / (8 × MSS).
    window_segments: f64,
    /// Reno: ρ = C × RTT² / (2 × MSS × 8).
    reno_ns: u64,
    reno: String,
    /// Round trips Reno needs: W / 2.
    reno_rtts: f64,
    /// CUBIC's K for that window (RFC 9438 §4.2).
    cubic_k_ns: u64,
    cubic_k: String,
    /// Scalable TCP: 13.42 round trips whatever the rate (Kelly 2003).
    scalable_rtts: f64,
    scalable_ns: u64,
    scalable: String,
    /// Reno with jumbo frames (MSS 8960), for comparison.
    reno_jumbo_ns: u64,
    reno_jumbo: String,
}

fn responsiveness_report(rate_bps: u64, rtt: Nanos, mss: u64) -> ResponsivenessReport {
    let w = bdp_segments(rate_bps, rtt, mss);
    let reno = responsiveness(rate_bps, rtt, mss);
    let k = cubic_k(w, CUBIC_BETA, CUBIC_C);
    let n = scalable_recovery_rtts(SCALABLE_A, SCALABLE_B);
    let scalable = Nanos::from_secs_f64(n * rtt.as_secs_f64());
    let jumbo = responsiveness(rate_bps, rtt, 8960);
    ResponsivenessReport {
        rate_bps,
        rate: fmt_rate(rate_bps),
        rtt_ns: rtt.0,
        rtt: fmt_duration(rtt),
        mss_bytes: mss,
        window_segments: w,
        reno_ns: reno.0,
        reno: fmt_duration(reno),
        reno_rtts: w / 2.0,
        cubic_k_ns: k.0,
        cubic_k: fmt_duration(k),
        scalable_rtts: n,
        scalable_ns: scalable.0,
        scalable: fmt_duration(scalable),
        reno_jumbo_ns: jumbo.0,
        reno_jumbo: fmt_duration(jumbo),
    }
}

impl ResponsivenessReport {
    fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Responsiveness: time to regain {} after one loss, RTT {}, MSS {} B (window {} segments)",
            self.rate,
            self.rtt,
            self.mss_bytes,
            count(self.window_segments)
        );
        let mut rows = vec![
            (
                "Reno".to_owned(),
                self.reno.clone(),
                format!(
                    "ρ = C·RTT²/(2·MSS): halve, then +1 segment per RTT for {} RTTs",
                    count(self.reno_rtts)
                ),
            ),
            (
                "CUBIC K".to_owned(),
                self.cubic_k.clone(),
                "∛(W·(1−β)/C), β = 0.7, C = 0.4 (RFC 9438 §4.2)".to_owned(),
            ),
            (
                "Scalable TCP".to_owned(),
                self.scalable.clone(),
                format!(
                    "{:.2} RTT at any rate: ln(1/(1−b))/ln(1+a), a = 0.01, b = 0.125 (Kelly 2003)",
                    self.scalable_rtts
                ),
            ),
        ];
        if self.mss_bytes != 8960 {
            rows.push((
                "Reno, MSS 8960".to_owned(),
                self.reno_jumbo.clone(),
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
}

#[derive(Debug, Serialize)]
struct LsrReport {
    /// Bytes moved (when given).
    bytes: Option<u64>,
    bytes_display: Option<String>,
    /// Seconds of the run (when given).
    seconds: Option<f64>,
    /// The exact average rate, bit/s (from bytes and seconds, or as given).
    rate_bps: f64,
    rate: String,
    /// The rate rounded to three figures as records quote it.
    rounded_rate_bps: u64,
    rounded_rate: String,
    km: f64,
    distance: String,
    /// The distance the LSR counts: at most 30,000 km.
    counted_km: f64,
    capped: bool,
    /// rate × counted distance, bit·m/s: the mark.
    metric_bit_m_per_s: f64,
    metric: String,
    /// The rounded rate × counted distance (the press figure).
    rounded_metric_bit_m_per_s: f64,
    rounded_metric: String,
    /// rate × the full distance (differs from the mark only when capped).
    uncapped_metric_bit_m_per_s: f64,
    uncapped_metric: String,
    /// Rule checks: at least 10 minutes and 100 km.
    long_enough: Option<bool>,
    far_enough: bool,
    notes: Vec<String>,
    beats: Option<Beats>,
}

/// Comparison with a standing mark under the +10 % rule.
#[derive(Debug, Serialize)]
struct Beats {
    old_bit_m_per_s: f64,
    old: String,
    needed_bit_m_per_s: f64,
    needed: String,
    /// (new − old) / old, %.
    gain_percent: f64,
    beats: bool,
}

fn lsr(a: &LsrArgs) -> Result<LsrReport> {
    let km = parse_distance(&a.km).map_err(|e| anyhow!("--km: {e}"))?;
    if km <= 0.0 {
        bail!("--km: must be above 0 km");
    }
    let mut notes = Vec::new();
    let (bytes, seconds, rate) = match (&a.bytes, &a.seconds, &a.rate) {
        (Some(b), Some(s), _) => {
            let bytes = parse_size(b).map_err(|e| anyhow!("--bytes: {e}"))?;
            let secs = parse_duration(s, TimeUnit::Secs)
                .map_err(|e| anyhow!("--seconds: {e}"))?
                .as_secs_f64();
            if secs <= 0.0 {
                bail!("--seconds: must be above 0");
            }
            (Some(bytes), Some(secs), bytes as f64 * 8.0 / secs)
        }
        (None, None, Some(r)) => (None, None, parse_positive_rate(r)? as f64),
        _ => bail!("give --bytes and --seconds, or --rate"),
    };
    let old = a.beats.as_deref().map(parse_metric).transpose()?;
    let mut r = lsr_report(bytes, seconds, rate, km, old);
    if let Some(b) = &a.bytes {
        // Say which reading of the suffix was used: the seeds' "560 GB" is
        // iperf's GBytes (2^30), the reading that reproduces the marks.
        let t = b.trim();
        let last = t.chars().last().unwrap_or(' ');
        if matches!(last.to_ascii_lowercase(), 'k' | 'm' | 'g' | 't' | 'p') {
            notes.push(format!(
                "{t:?} is read as iperf's unit (×1024: {}); write {t}B for ×1000",
                fmt_size(bytes.unwrap_or(0))
            ));
        }
    }
    notes.append(&mut r.notes);
    r.notes = notes;
    Ok(r)
}

fn lsr_report(
    bytes: Option<u64>,
    seconds: Option<f64>,
    rate: f64,
    km: f64,
    old: Option<f64>,
) -> LsrReport {
    let counted = lsr_capped_km(km);
    let capped = counted < km;
    // Three significant figures, as fmt_rate prints and records quote
    // ("4.00 Gbit/s"); parsing the printed form back gives the rounded rate.
    let exact_bps = rate.round() as u64;
    let rounded = parse_rate(&fmt_rate(exact_bps)).unwrap_or(exact_bps);
    let metric = lsr_metric_from_rate(rate, counted);
    let rounded_metric = lsr_metric_from_rate(rounded as f64, counted);
    let uncapped = lsr_metric_from_rate(rate, km);
    let mut notes = Vec::new();
    if capped {
        notes.push(format!(
            "distance capped at {} (LSR rule): {} measured",
            fmt_km(LSR_MAX_KM),
            fmt_km(km)
        ));
    }
    if bytes.is_some() && rounded != exact_bps {
        notes.push(
            "marks use exact bytes and seconds; press figures use the rounded rate (seed 001: \
             560 GiB in 1200 s gives 46,256, its 46,156 is 4.00 Gbit/s × 11,539 km)"
                .to_owned(),
        );
    }
    let long_enough = seconds.map(|s| s >= LSR_MIN_SECONDS);
    if long_enough == Some(false) {
        notes.push("shorter than the 10-minute minimum run".to_owned());
    }
    let far_enough = km >= LSR_MIN_KM;
    if !far_enough {
        notes.push("shorter than the 100 km minimum distance".to_owned());
    }
    let beats = old.map(|old| {
        let needed = old * (1.0 + LSR_IMPROVEMENT);
        Beats {
            old_bit_m_per_s: old,
            old: fmt_lsr(old),
            needed_bit_m_per_s: needed,
            needed: fmt_lsr(needed),
            gain_percent: (metric - old) * 100.0 / old,
            beats: lsr_beats(metric, old),
        }
    });
    LsrReport {
        bytes,
        bytes_display: bytes
            .map(|b| format!("{} B = {} = {}", group(b), fmt_size(b), fmt_size_si(b))),
        seconds,
        rate_bps: rate,
        rate: fmt_rate(exact_bps),
        rounded_rate_bps: rounded,
        rounded_rate: fmt_rate(rounded),
        km,
        distance: fmt_km(km),
        counted_km: counted,
        capped,
        metric_bit_m_per_s: metric,
        metric: fmt_lsr(metric),
        rounded_metric_bit_m_per_s: rounded_metric,
        rounded_metric: fmt_lsr(rounded_metric),
        uncapped_metric_bit_m_per_s: uncapped,
        uncapped_metric: fmt_lsr(uncapped),
        long_enough,
        far_enough,
        notes,
        beats,
    }
}

impl LsrReport {
    fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Internet2 Land Speed Record metric = rate × terrestrial distance"
        );
        if let (Some(b), Some(secs)) = (&self.bytes_display, self.seconds) {
            let _ = writeln!(
                s,
                "  moved        {b} in {}",
                fmt_duration(Nanos::from_secs_f64(secs))
            );
        }
        let _ = writeln!(
            s,
            "  rate         {} ({} bit/s)",
            self.rate,
            group(self.rate_bps.round() as u64)
        );
        let counted = if self.capped {
            format!(
                "{}, counted as {} (cap)",
                self.distance,
                fmt_km(self.counted_km)
            )
        } else {
            self.distance.clone()
        };
        let _ = writeln!(s, "  distance     {counted}");
        let _ = writeln!(s, "  metric       {}", self.metric);
        if self.rounded_rate_bps as f64 != self.rate_bps {
            let _ = writeln!(
                s,
                "  rounded      {} × {} = {}",
                self.rounded_rate,
                fmt_km(self.counted_km),
                self.rounded_metric
            );
        }
        if self.capped {
            let _ = writeln!(s, "  uncapped     {}", self.uncapped_metric);
        }
        if let Some(b) = &self.beats {
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
        for n in &self.notes {
            let _ = writeln!(s, "  note: {n}");
        }
        s
    }
}

#[derive(Debug, Serialize)]
struct PathReport {
    bdp: BdpReport,
    mathis: MathisReport,
    responsiveness: ResponsivenessReport,
}

fn path(a: &PathArgs) -> Result<PathReport> {
    let rate = a
        .rate
        .as_deref()
        .ok_or_else(|| anyhow!("--rate is required (or give a subcommand: bdp, mathis, ...)"))?;
    let common = Common {
        rtt: a.rtt.clone(),
        mss: a.mss.clone(),
        json: a.json,
    };
    let p = PathInputs::parse(rate, &common, a.streams)?;
    let c = parse_c(a.c)?;
    let given = match &a.loss {
        Some(l) => MathisGiven::Loss(parse_loss(l)?),
        None => MathisGiven::Rate(p.rate_bps),
    };
    Ok(PathReport {
        bdp: bdp(&p),
        mathis: mathis(p.mss, p.rtt, c, given),
        responsiveness: responsiveness_report(p.rate_bps, p.rtt, p.mss),
    })
}

impl PathReport {
    fn text(&self) -> String {
        format!(
            "{}\n{}\n{}",
            self.bdp.text(),
            self.responsiveness.text(),
            self.mathis.text()
        )
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    /// `longhaul calc` as a stand-alone parser.
    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        calc: CalcArgs,
    }

    fn report(args: &[&str]) -> Result<(Report, bool)> {
        let argv = std::iter::once("calc").chain(args.iter().copied());
        let cli = Cli::try_parse_from(argv).map_err(|e| anyhow!("{e}"))?;
        compute(&cli.calc)
    }

    fn text(args: &[&str]) -> String {
        report(args).unwrap().0.text()
    }

    fn json(args: &[&str]) -> serde_json::Value {
        let (r, json) = report(args).unwrap();
        assert!(json, "--json was not set");
        serde_json::to_value(&r).unwrap()
    }

    #[test]
    fn clap_definition_is_valid() {
        Cli::command().debug_assert();
    }

    /// Seed 002: 9.29 Gbit/s × 17 ms = 19.74 MB.
    #[test]
    fn bdp_of_seed_002_is_19_74_mb() {
        let out = text(&["bdp", "--rate", "9.29G", "--rtt", "17ms"]);
        assert!(out.contains("19.74 MB (18.83 MiB) = 19,741,250 B"), "{out}");
        assert!(out.contains("sysctl -w net.core.rmem_max=67108864 net.core.wmem_max=67108864"));
        let v = json(&["bdp", "--rate", "9.29G", "--rtt", "17", "--json"]);
        assert_eq!(v["command"], "bdp");
        assert_eq!(v["bdp_bytes"], 19_741_250);
        assert_eq!(v["bdp"], "19.74 MB (18.83 MiB)");
        assert_eq!(v["rtt_ns"], 17_000_000);
        assert_eq!(v["window_2x_bytes"], 39_482_500);
        assert_eq!(v["one_stream_fits"], true);
        assert_eq!(v["streams_needed"], 1);
    }

    #[test]
    fn bdp_ceilings_at_common_windows() {
        let v = json(&["bdp", "--rate", "10G", "--rtt", "120ms", "--json"]);
        let ceilings = v["ceilings"].as_array().unwrap();
        let find = |bytes: u64| {
            ceilings
                .iter()
                .find(|c| c["window_bytes"] == bytes)
                .unwrap()
        };
        // 2 MiB OpenSSH window at 120 ms: 140 Mbit/s (transfer-tools §2).
        assert_eq!(find(2 << 20)["ceiling"], "140 Mbit/s");
        // 4 MiB: ≈ 0.28 Gbit/s (transfer-tools §2).
        assert_eq!(find(4 << 20)["ceiling"], "280 Mbit/s");
        assert_eq!(find(MAX_TCP_WINDOW)["ceiling"], "71.6 Gbit/s");
        // 10G × 120 ms: 2 × BDP = 300 MB → 512 MiB, as doctor says.
        assert_eq!(v["core_mem_max_bytes"], 536_870_912);
    }

    #[test]
    fn bdp_past_the_1_gib_window_needs_streams() {
        let v = json(&["bdp", "--rate", "100G", "--rtt", "300ms", "--json"]);
        assert_eq!(v["one_stream_fits"], false);
        assert_eq!(v["streams_needed"], 4);
        assert_eq!(v["max_window_ceiling"], "28.6 Gbit/s");
        let out = text(&["bdp", "--rate", "100G", "--rtt", "300ms"]);
        assert!(out.contains("does NOT fit"), "{out}");
        assert!(out.contains("-P 1 is too few"), "{out}");
        assert!(out.contains("longhaul asks for 1 GiB"), "{out}");
    }

    /// Notes §3.10: 10 Gbit/s, 100 ms, MSS 1460 → p ≈ 2.05e-10.
    #[test]
    fn mathis_loss_for_10g_100ms_1460_is_2_05e_minus_10() {
        let args = ["mathis", "--mss", "1460", "--rtt", "100ms", "--rate", "10G"];
        let out = text(&args);
        assert!(out.contains("≤ 2.05e-10"), "{out}");
        assert!(out.contains("Reno reference"), "{out}");
        assert!(out.contains("Mathis & Mahdavi"), "{out}");
        let mut with_json = args.to_vec();
        with_json.push("--json");
        let v = json(&with_json);
        let p = v["loss_p"].as_f64().unwrap();
        assert!((p - 2.05e-10).abs() < 0.005e-10, "{p}");
        assert_eq!(v["mode"], "loss_for_rate");
        // RFC 9438 table 3 uses 1500-byte packets: HSTCP 1.0e-7, CUBIC 2.9e-8.
        let v = json(&[
            "mathis", "--mss", "1500", "--rtt", "100ms", "--rate", "10G", "--json",
        ]);
        let needed = &v["loss_needed"];
        assert_eq!(
            format!("{:.1e}", needed["hstcp_p"].as_f64().unwrap()),
            "1.0e-7"
        );
        assert_eq!(
            format!("{:.1e}", needed["cubic_p"].as_f64().unwrap()),
            "2.9e-8"
        );
        assert_eq!(
            format!("{:.1e}", needed["reno_p"].as_f64().unwrap()),
            "2.1e-10"
        );
    }

    #[test]
    fn mathis_ceiling_for_a_loss_rate_with_response_functions() {
        let v = json(&[
            "mathis", "--mss", "1460", "--rtt", "100ms", "--loss", "1e-7", "--json",
        ]);
        assert_eq!(v["mode"], "ceiling");
        // 1460 × 8 / 0.1 × 1.2247 / √1e-7 = 452.3 Mbit/s.
        assert_eq!(v["rate"], "452 Mbit/s");
        // RFC 9438 tables at p = 1e-7, RTT 100 ms.
        assert_eq!(
            v["windows"]["hstcp_segments"].as_f64().unwrap().round(),
            83_981.0
        );
        assert_eq!(
            v["windows"]["cubic_segments"].as_f64().unwrap().round(),
            33_325.0
        );
        // The same loss as a percentage.
        let v = json(&[
            "mathis", "--mss", "1460", "--rtt", "100", "--loss", "0.00001%", "--json",
        ]);
        assert_eq!(v["rate"], "452 Mbit/s");
    }

    /// Notes §3.3: 10 G, 120 ms, 1460 B → 6,164 s.
    #[test]
    fn responsiveness_10g_120ms_is_6164_s() {
        let out = text(&["responsiveness", "--rate", "10G", "--rtt", "120ms"]);
        assert!(out.contains("6164 s (1 h 43 min)"), "{out}");
        assert!(out.contains("13.42 RTT"), "{out}");
        let v = json(&[
            "responsiveness",
            "--rate",
            "10G",
            "--rtt",
            "120ms",
            "--json",
        ]);
        let secs = v["reno_ns"].as_u64().unwrap() as f64 / 1e9;
        assert!((secs - 6164.0).abs() < 0.5, "{secs}");
        assert_eq!(v["reno_jumbo"], "1004 s (16 min 44 s)");
        // K = ∛(102,740 × 0.3 / 0.4) = 42.55 s.
        assert_eq!(v["cubic_k"], "42.6 s");
    }

    /// Seeds 000/001: 4.00 Gbit/s × 11,539 km = 46,156 Tbit·m/s.
    #[test]
    fn lsr_rate_4_00g_over_11539_km_is_46156() {
        let out = text(&["lsr", "--rate", "4.00G", "--km", "11539"]);
        assert!(out.contains("46,156 Tbit·m/s"), "{out}");
        let v = json(&["lsr", "--rate", "4.00G", "--km", "11,539 km", "--json"]);
        assert_eq!(v["metric_bit_m_per_s"].as_f64().unwrap(), 46_156e12);
        assert_eq!(v["capped"], false);
    }

    /// 560 GiB in 1200 s is 46,256 exact; the seed's 46,156 is the rounded
    /// 4.00 Gbit/s: both shown, with the one-line reason.
    #[test]
    fn lsr_560g_in_1200_s_shows_exact_and_rounded() {
        let out = text(&[
            "lsr",
            "--bytes",
            "560G",
            "--seconds",
            "1200",
            "--km",
            "11539",
        ]);
        assert!(out.contains("46,256 Tbit·m/s"), "{out}");
        assert!(
            out.contains("its 46,156 is 4.00 Gbit/s × 11,539 km"),
            "{out}"
        );
        assert!(out.contains("601,295,421,440 B"), "{out}");
        assert!(out.contains("iperf's unit"), "{out}");
        let v = json(&[
            "lsr",
            "--bytes",
            "560G",
            "--seconds",
            "1200",
            "--km",
            "11539",
            "--json",
        ]);
        assert_eq!(v["bytes"], 560u64 << 30);
        assert_eq!(v["long_enough"], true);
        assert_eq!(v["rounded_rate"], "4.01 Gbit/s");
    }

    /// Tokyo, Dec 2006: 9.08 Gbit/s over 32,372 km counted as 30,000 km →
    /// 272,400 Tbit·m/s.
    #[test]
    fn lsr_cap_at_30000_km() {
        let out = text(&["lsr", "--rate", "9.08G", "--km", "32372"]);
        assert!(out.contains("272,400 Tbit·m/s"), "{out}");
        assert!(out.contains("distance capped at 30,000 km"), "{out}");
        let v = json(&["lsr", "--rate", "9.08G", "--km", "32372", "--json"]);
        assert_eq!(v["capped"], true);
        assert_eq!(v["counted_km"], 30_000.0);
        assert_eq!(v["metric_bit_m_per_s"].as_f64().unwrap(), 272_400e12);
    }

    #[test]
    fn lsr_ten_percent_rule() {
        // 185,400 over 167,400 (+10.75 %) was a record (notes §2.2).
        let v = json(&[
            "lsr", "--rate", "6.18G", "--km", "30000", "--beats", "167400", "--json",
        ]);
        assert_eq!(v["beats"]["beats"], true);
        let v = json(&[
            "lsr", "--rate", "9.08G", "--km", "30000", "--beats", "264.147P", "--json",
        ]);
        // +3.1 %: not enough.
        assert_eq!(v["beats"]["beats"], false);
        let out = text(&[
            "lsr", "--rate", "9.08G", "--km", "30000", "--beats", "264147",
        ]);
        assert!(out.contains("does not beat it"), "{out}");
    }

    #[test]
    fn lsr_rules_on_short_runs() {
        let v = json(&[
            "lsr",
            "--bytes",
            "625MB",
            "--seconds",
            "13",
            "--km",
            "50",
            "--json",
        ]);
        assert_eq!(v["long_enough"], false);
        assert_eq!(v["far_enough"], false);
    }

    #[test]
    fn path_is_the_default_and_combines_everything() {
        let out = text(&["--rate", "10G", "--rtt", "120ms"]);
        assert!(out.contains("150 MB (143.05 MiB)"), "{out}");
        assert!(out.contains("6164 s (1 h 43 min)"), "{out}");
        assert!(out.contains("loss p needed"), "{out}");
        let v = json(&[
            "path", "--rate", "10G", "--rtt", "120ms", "--loss", "1e-8", "--json",
        ]);
        assert_eq!(v["command"], "path");
        assert_eq!(v["bdp"]["bdp_bytes"], 150_000_000);
        assert_eq!(v["mathis"]["mode"], "ceiling");
        assert_eq!(v["responsiveness"]["reno"], "6164 s (1 h 43 min)");
    }

    #[test]
    fn bad_input_is_a_one_line_error_naming_the_flag() {
        for (args, flag) in [
            (&["bdp", "--rate", "12Q", "--rtt", "17ms"][..], "--rate"),
            (&["bdp", "--rate", "10G", "--rtt", "fast"][..], "--rtt"),
            (&["bdp", "--rate", "0", "--rtt", "17ms"][..], "--rate"),
            (&["bdp", "--rate", "10G", "--rtt", "0"][..], "--rtt"),
            (&["mathis", "--rtt", "100ms", "--loss", "2"][..], "--loss"),
            (&["mathis", "--rtt", "100ms", "--loss", "x"][..], "--loss"),
            (
                &["mathis", "--rtt", "100ms", "--rate", "1G", "--c", "0"][..],
                "--c",
            ),
            (&["lsr", "--rate", "4G", "--km", "far"][..], "--km"),
            (
                &["lsr", "--rate", "4G", "--km", "11539", "--beats", "lots"][..],
                "--beats",
            ),
            (
                &["lsr", "--bytes", "1G", "--seconds", "0", "--km", "200"][..],
                "--seconds",
            ),
        ] {
            let e = report(args).unwrap_err().to_string();
            assert!(e.starts_with(flag), "{args:?}: {e}");
            assert!(!e.contains('\n'), "{args:?}: {e}");
        }
        // Clap refuses missing or conflicting flags before compute.
        assert!(report(&["mathis", "--rtt", "100ms"]).is_err());
        assert!(report(&["lsr", "--bytes", "1G", "--km", "200"]).is_err());
        assert!(report(&["lsr", "--rate", "1G", "--seconds", "600", "--km", "200"]).is_err());
        assert!(report(&[]).is_err());
    }

    #[test]
    fn metric_units() {
        assert_eq!(parse_metric("272400").unwrap(), 272_400e12);
        assert_eq!(parse_metric("272,400 Tbit·m/s").unwrap(), 272_400e12);
        assert!((parse_metric("272.4P").unwrap() / 272.4e15 - 1.0).abs() < 1e-12);
        assert!((parse_metric("272.4 Pb·m/s").unwrap() / 272.4e15 - 1.0).abs() < 1e-12);
        assert!(parse_metric("-1").is_err());
        assert!(parse_metric("5 km").is_err());
    }

    #[test]
    fn grouping() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(19_741_250), "19,741,250");
    }
}
