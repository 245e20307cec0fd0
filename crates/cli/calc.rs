//! `longhaul calc`: the TCP models of long fat paths, as a calculator.
//!
//! Subcommands: `bdp` (bandwidth-delay product, window, buffer sysctls,
//! ceilings at common windows), `mathis` (Reno's loss–throughput relation, with
//! HighSpeed TCP and CUBIC for comparison), `responsiveness` (time to recover
//! from one loss), `lsr` (Internet2 Land Speed Record metric), `distance`
//! (a path's distance from a traceroute listing and a site table) and `path`
//! (everything at once; also what `longhaul calc --rate R --rtt T` runs).
//!
//! The reports and their computations live in `longhaul_models::calc`, the
//! formulas in `longhaul_units::models`; this module holds the flags, parses
//! them into the models' inputs ([`compute`], with `inputs`) and prints the
//! report as text (`text`) or JSON. Inputs use the units crate's parsers:
//! rates ×1000 ("9.29G"), sizes ×1024 ("560G" = 560 GiB, iperf's GBytes;
//! "560GB" = 560 × 10^9), durations with units (a bare RTT is in ms).

use anyhow::{Context, Result, anyhow, bail};
use longhaul_models::calc::bdp::{self, BdpReport};
use longhaul_models::calc::lsr::{self, LsrReport};
use longhaul_models::calc::mathis::{self, MathisGiven, MathisReport};
use longhaul_models::calc::path::{self, PathReport};
use longhaul_models::calc::responsiveness::{self, ResponsivenessReport};
use longhaul_topology::sites_from_toml;
use longhaul_topology::traceroute::{Trace, TraceDistance, distance};
use longhaul_units::{TimeUnit, fmt_size, parse_distance, parse_duration, parse_size};
use serde::Serialize;

use crate::args;

use inputs::{Common, parse_c, parse_loss, parse_metric, parse_mss, parse_rtt, path_inputs};

mod inputs;
mod text;

#[cfg(test)]
mod tests;

const CALC_HELP: &str = "\
Units: rates in bit/s with k/m/g/t = ×1000 (10G, 9.29g, 100m); sizes with K/M/G/T = ×1024 like iperf \
(560G = 560 GiB), KB/MB/GB = ×1000 (560GB); durations with ns/us/ms/s/min/h (a bare --rtt is in ms, a \
bare --seconds in s); distances in km.

Examples:
  longhaul calc bdp --rate 9.29G --rtt 17ms
  longhaul calc mathis --mss 1460 --rtt 100ms --rate 10G
  longhaul calc responsiveness --rate 10G --rtt 120ms
  longhaul calc lsr --rate 4.00G --km 11539
  traceroute6 HOST | longhaul calc distance --sites sites.toml --from cern
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
    /// A path's distance from a traceroute or traceroute6 listing: each hop placed at a site (by
    /// address prefix or name), the great circles between them, and the Land Speed Record distance.
    #[command(
        after_help = "The site table is the [[site]] tables of a network file or preset (docs/topology.md): \
each with name, lat, lon and a match list of address prefixes (2001:468:ff::/48) and name fragments \
(\"iplsng-chinng\"). A hop no site matches, or that did not answer, is listed and skipped.\n\n\
Examples:\n  traceroute6 -n HOST | longhaul calc distance --sites my-sites.toml --from cern\n  \
longhaul calc distance seed001.txt --sites ipv6-lsr-2004-routers     # seed 001: 11,515 km\n  \
longhaul calc distance listing.txt --sites net.toml --json"
    )]
    Distance(DistanceArgs),
    /// Everything for one path: BDP and windows, Mathis, responsiveness.
    #[command(
        after_help = "Examples:\n  longhaul calc path --rate 10G --rtt 120ms\n  \
longhaul calc path --rate 10G --rtt 120ms --loss 1e-8 --mss 8960\n  longhaul calc --rate 10G --rtt 120ms   \
# the same without the word path"
    )]
    Path(PathArgs),
}

#[derive(clap::Args, Debug)]
struct BdpArgs {
    /// Bottleneck rate in bit/s: 10G, 9.29G, 100m (k/m/g/t = ×1000).
    #[arg(long, value_name = "RATE")]
    rate: String,
    #[command(flatten)]
    streams: args::ModelStreams,
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
    #[command(flatten)]
    json: args::Json,
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
    #[command(flatten)]
    streams: args::ModelStreams,
    /// Loss probability of the path, if known: adds Reno's ceiling at that loss.
    #[arg(long, value_name = "P")]
    loss: Option<String>,
    /// Mathis constant C (default √(3/2) ≈ 1.22).
    #[arg(long = "c", value_name = "C")]
    c: Option<f64>,
    #[command(flatten)]
    json: args::Json,
}

#[derive(clap::Args, Debug)]
struct DistanceArgs {
    /// The traceroute or traceroute6 listing ("-": standard input).
    #[arg(value_name = "LISTING", default_value = "-")]
    listing: String,
    /// The site table: a network preset's name or a network or site file ([[site]] tables).
    #[arg(long, value_name = "PRESET|FILE")]
    sites: String,
    /// The site of the host the listing was made on [default: the site of the listing's source
    /// address, as traceroute6 prints it].
    #[arg(long, value_name = "SITE")]
    from: Option<String>,
    #[command(flatten)]
    json: args::Json,
}

/// Largest listing `calc distance` reads: a traceroute of 255 hops is a few tens of KiB.
const MAX_LISTING: u64 = 1 << 20;

/// `calc distance`: reads the listing and the site table, places the hops.
fn distance_report(a: &DistanceArgs) -> Result<TraceDistance> {
    Ok(traceroute_distance(&a.listing, &a.sites, a.from.as_deref())?.1)
}

/// A traceroute listing (a file, or "-" for standard input) placed at the sites of a network
/// preset or file: the listing and its distance (also `lab records --check --traceroute`).
pub(crate) fn traceroute_distance(
    listing: &str,
    sites_from: &str,
    from: Option<&str>,
) -> Result<(Trace, TraceDistance)> {
    use std::io::Read;
    let mut text = String::new();
    let what = if listing == "-" {
        "standard input".to_owned()
    } else {
        listing.to_owned()
    };
    let read = if listing == "-" {
        std::io::stdin()
            .take(MAX_LISTING + 1)
            .read_to_string(&mut text)
    } else {
        std::fs::File::open(listing).and_then(|f| f.take(MAX_LISTING + 1).read_to_string(&mut text))
    };
    read.with_context(|| format!("cannot read the listing from {what}"))?;
    if text.len() as u64 > MAX_LISTING {
        bail!("{what}: more than 1 MiB: not a traceroute listing");
    }
    let trace = Trace::parse(&text).map_err(|e| anyhow!("{what}: {e}"))?;
    let sites = match longhaul_topology::network(sites_from) {
        Some(p) => sites_from_toml(p.toml, p.name)?,
        None => {
            let t = std::fs::read_to_string(sites_from).with_context(|| {
                format!("--sites {sites_from}: neither a network preset nor a readable file")
            })?;
            sites_from_toml(&t, sites_from)?
        }
    };
    if let Some(f) = from
        && !sites.iter().any(|s| s.name == f)
    {
        bail!("--from {f:?}: no such site in {sites_from}");
    }
    let d = distance(&trace, &sites, from)?;
    Ok((trace, d))
}

/// Runs `longhaul calc`: prints the report as text, or as JSON with `--json`.
/// Runs `longhaul calc`: a bad or missing value is a usage error (status 2), as doctor's.
pub(crate) fn run(args: &CalcArgs) -> Result<std::process::ExitCode> {
    let (report, json) = match compute(args) {
        Ok(r) => r,
        Err(e) => return Ok(crate::args::usage_error(&e)),
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).context("serialising the report")?
        );
    } else {
        print!("{}", report.text());
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// Parses the flags and computes the report; also says whether JSON was asked for.
fn compute(args: &CalcArgs) -> Result<(Report, bool)> {
    Ok(match &args.command {
        Some(CalcCommand::Bdp(a)) => {
            let p = path_inputs(&a.rate, &a.common, a.streams)?;
            (Report::Bdp(bdp::report(&p)), a.common.json.json)
        }
        Some(CalcCommand::Mathis(a)) => {
            let rtt = parse_rtt(a.common.rtt.as_deref())?;
            let mss = parse_mss(&a.common.mss)?;
            let c = parse_c(a.c)?;
            let given = match (&a.loss, &a.rate) {
                (Some(l), _) => MathisGiven::Loss(parse_loss(l)?),
                (None, Some(r)) => MathisGiven::Rate(args::named("--rate", r, args::rate)?),
                (None, None) => bail!("give --loss or --rate"),
            };
            (
                Report::Mathis(mathis::report(mss, rtt, c, given)),
                a.common.json.json,
            )
        }
        Some(CalcCommand::Responsiveness(a)) => {
            let p = path_inputs(&a.rate, &a.common, args::ModelStreams { n: 1 })?;
            (
                Report::Responsiveness(responsiveness::report(p.rate_bps, p.rtt, p.mss)),
                a.common.json.json,
            )
        }
        Some(CalcCommand::Lsr(a)) => (Report::Lsr(lsr_report(a)?), a.json.json),
        Some(CalcCommand::Distance(a)) => (Report::Distance(distance_report(a)?), a.json.json),
        Some(CalcCommand::Path(a)) => (Report::Path(Box::new(path_report(a)?)), a.json.json),
        None => (
            Report::Path(Box::new(path_report(&args.path)?)),
            args.path.json.json,
        ),
    })
}

/// One report per subcommand; serialises with a "command" tag.
#[derive(Debug, Serialize)]
#[serde(tag = "command", rename_all = "snake_case")]
enum Report {
    Bdp(BdpReport),
    Mathis(MathisReport),
    Responsiveness(ResponsivenessReport),
    Lsr(LsrReport),
    Distance(TraceDistance),
    Path(Box<PathReport>),
}

impl Report {
    fn text(&self) -> String {
        match self {
            Report::Bdp(r) => text::bdp(r),
            Report::Mathis(r) => text::mathis(r),
            Report::Responsiveness(r) => text::responsiveness(r),
            Report::Lsr(r) => text::lsr(r),
            Report::Distance(r) => text::distance(r),
            Report::Path(r) => text::path(r),
        }
    }
}

/// `calc lsr`: parses the run and the distance, computes the report, and notes
/// how a size suffix was read.
fn lsr_report(a: &LsrArgs) -> Result<LsrReport> {
    let km = parse_distance(&a.km).map_err(|e| anyhow!("--km: {e}"))?;
    if km <= 0.0 {
        bail!("--km: must be above 0 km");
    }
    let mut notes = Vec::new();
    let run = match (&a.bytes, &a.seconds, &a.rate) {
        (Some(b), Some(s), _) => {
            let bytes = parse_size(b).map_err(|e| anyhow!("--bytes: {e}"))?;
            let seconds = parse_duration(s, TimeUnit::Secs)
                .map_err(|e| anyhow!("--seconds: {e}"))?
                .as_secs_f64();
            if seconds <= 0.0 {
                bail!("--seconds: must be above 0");
            }
            lsr::Run::Moved { bytes, seconds }
        }
        (None, None, Some(r)) => lsr::Run::Rate(args::named("--rate", r, args::rate)?),
        _ => bail!("give --bytes and --seconds, or --rate"),
    };
    let old = a.beats.as_deref().map(parse_metric).transpose()?;
    let mut r = lsr::report(run, km, old);
    if let Some(b) = &a.bytes {
        // Say which reading of the suffix was used: the seeds' "560 GB" is
        // iperf's GBytes (2^30), the reading that reproduces the marks.
        let t = b.trim();
        let last = t.chars().last().unwrap_or(' ');
        if matches!(last.to_ascii_lowercase(), 'k' | 'm' | 'g' | 't' | 'p') {
            notes.push(format!(
                "{t:?} is read as iperf's unit (×1024: {}); write {t}B for ×1000",
                fmt_size(r.bytes.unwrap_or(0))
            ));
        }
    }
    notes.append(&mut r.notes);
    r.notes = notes;
    Ok(r)
}

/// `calc path` (and `calc` without a subcommand): parses the path and computes
/// the combined report.
fn path_report(a: &PathArgs) -> Result<PathReport> {
    let rate = a
        .rate
        .as_deref()
        .ok_or_else(|| anyhow!("--rate is required (or give a subcommand: bdp, mathis, ...)"))?;
    let common = Common {
        rtt: a.rtt.clone(),
        mss: a.mss.clone(),
        json: a.json,
    };
    let p = path_inputs(rate, &common, a.streams)?;
    let c = parse_c(a.c)?;
    let loss = a.loss.as_deref().map(parse_loss).transpose()?;
    Ok(path::report(&p, c, loss))
}
