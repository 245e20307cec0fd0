//! Flag values into the models' inputs. Every error is one line naming the flag.

use anyhow::{Result, anyhow, bail};
use longhaul_models::calc::PathInputs;
use longhaul_units::models::MATHIS_C_PER_ACK;
use longhaul_units::{Nanos, parse_size};

use crate::args::{self, ModelStreams};

/// Flags shared by the path-shaped subcommands.
#[derive(clap::Args, Debug)]
pub(super) struct Common {
    /// Round-trip time: 120ms, 0.12s, 17 ms; a bare number is milliseconds.
    #[arg(long, value_name = "DURATION", required = true)]
    pub(super) rtt: Option<String>,
    /// Segment payload in bytes: 1460 for MTU 1500, 8960 for MTU 9000.
    #[arg(long, value_name = "BYTES", default_value = "1460")]
    pub(super) mss: String,
    #[command(flatten)]
    pub(super) json: args::Json,
}

pub(super) fn parse_rtt(s: Option<&str>) -> Result<Nanos> {
    let s = s.ok_or_else(|| anyhow!("--rtt is required"))?;
    args::named("--rtt", s, args::rtt)
}

pub(super) fn parse_mss(s: &str) -> Result<u64> {
    let mss = parse_size(s).map_err(|e| anyhow!("--mss: {e}"))?;
    if mss == 0 {
        bail!("--mss: must be at least 1 byte");
    }
    Ok(mss)
}

pub(super) fn parse_c(c: Option<f64>) -> Result<f64> {
    match c {
        None => Ok(MATHIS_C_PER_ACK),
        Some(c) if c.is_finite() && c > 0.0 => Ok(c),
        Some(c) => bail!("--c: must be a positive number (1.22 or 0.87), got {c}"),
    }
}

/// A probability: "1e-7", "0.00001", or a percentage "0.001%".
pub(super) fn parse_loss(s: &str) -> Result<f64> {
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
pub(super) fn parse_metric(s: &str) -> Result<f64> {
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
pub(super) fn path_inputs(rate: &str, c: &Common, streams: ModelStreams) -> Result<PathInputs> {
    Ok(PathInputs {
        streams: streams.get()?,
        rate_bps: args::named("--rate", rate, args::rate)?,
        rtt: parse_rtt(c.rtt.as_deref())?,
        mss: parse_mss(&c.mss)?,
    })
}
