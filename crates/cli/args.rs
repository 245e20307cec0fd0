//! The flags several subcommands share, defined once: the rate (`--rate`), the round-trip time
//! (`--rtt`), the stream count (`-P/--streams`), the address family (`-4/--ipv4`, `-6/--ipv6`)
//! and JSON output (`-J/--json`). A subcommand flattens the `Args` struct it needs, or names the
//! value parser here; help texts and value parsers live in this one place.
//!
//! Two kinds of subcommands check values at two times, and both are kept: `test`, `send`/`get` and
//! `emulate` refuse a bad value while parsing (clap's usage error, exit 2); `calc` and `doctor`
//! take the text and refuse it when computing, with a one-line error that starts with the flag's
//! name and status 2 ([`usage_error`]; their tests hold them to that). Both go through the same parser, so they accept the same
//! values. What differs on purpose: `emulate --rtt` is a delay and may be 0 ([`duration`]), a model's
//! RTT may not ([`rtt`]); a test allows up to 1024 streams (the protocol's limit), a transfer 256
//! (the transfer's memory bound), and the models any count from 1.

use longhaul_engine::Family;
use longhaul_units::{Nanos, TimeUnit, parse_duration, parse_rate};

/// A rate in bit/s (k/m/g/t = ×1000: 10G, 2.5g, 400M), above 0: the value parser of every rate
/// flag.
pub(crate) fn rate(s: &str) -> Result<u64, String> {
    match parse_rate(s) {
        Ok(0) => Err("must be above 0 bit/s".into()),
        Ok(r) => Ok(r),
        Err(e) => Err(e.to_string()),
    }
}

/// `--pace`: a total rate, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pace {
    /// Find the bottleneck by packet trains and govern the rate from there (docs/pacing.md).
    Auto,
    /// This total rate, bit/s.
    Rate(u64),
}

impl Pace {
    /// The hand-set rate, if that is what it is.
    pub(crate) fn rate(self) -> Option<u64> {
        match self {
            Pace::Rate(r) => Some(r),
            Pace::Auto => None,
        }
    }
}

/// `--transport`: what carries the data connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TransportArg {
    /// The kernel's TCP.
    Tcp,
    /// QUIC over UDP in user space (docs/transport.md).
    Udp,
}

impl From<TransportArg> for longhaul_proto::Transport {
    fn from(t: TransportArg) -> Self {
        match t {
            TransportArg::Tcp => Self::Tcp,
            TransportArg::Udp => Self::Quic,
        }
    }
}

/// `--pace auto` or `--pace RATE`.
pub(crate) fn pace(s: &str) -> Result<Pace, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(Pace::Auto);
    }
    rate(s)
        .map(Pace::Rate)
        .map_err(|e| format!("{e}; or \"auto\""))
}

/// A probability `0.001` or a percentage `0.1%` in [0, 1]; `what` names it in errors.
pub(crate) fn probability(s: &str, what: &str) -> Result<f64, String> {
    let (num, scale) = match s.strip_suffix('%') {
        Some(n) => (n, 100.0),
        None => (s, 1.0),
    };
    let p = num
        .trim()
        .parse::<f64>()
        .map_err(|_| format!("{s:?} is not a probability (0.001) or a percentage (0.1%)"))?
        / scale;
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!(
            "{s:?}: {what} must be between 0 and 1 (0% and 100%)"
        ))
    }
}

/// A share for `isolate`'s thresholds: a probability or a percentage.
pub(crate) fn share(s: &str) -> Result<f64, String> {
    probability(s, "a share")
}

/// A duration where a bare number is seconds (10, 90s, 1500ms): test lengths, intervals and
/// timeouts.
pub(crate) fn seconds(s: &str) -> Result<Nanos, String> {
    parse_duration(s, TimeUnit::Secs).map_err(|e| e.to_string())
}

/// A duration where a bare number is milliseconds (120, 120ms, 0.12s): the value parser of
/// delays such as `emulate --rtt`, `--jitter`, where 0 is allowed.
pub(crate) fn duration(s: &str) -> Result<Nanos, String> {
    parse_duration(s, TimeUnit::Millis).map_err(|e| e.to_string())
}

/// A round-trip time of a path to model (bare number = ms), above 0.
pub(crate) fn rtt(s: &str) -> Result<Nanos, String> {
    let d = duration(s)?;
    if d == Nanos::ZERO {
        return Err("must be above 0".into());
    }
    Ok(d)
}

/// Parses the text of `flag` as `calc` and `doctor` do, when computing: a one-line error that
/// starts with the flag's name.
pub(crate) fn named<T>(
    flag: &str,
    text: &str,
    parse: fn(&str) -> Result<T, String>,
) -> anyhow::Result<T> {
    parse(text).map_err(|e| anyhow::anyhow!("{flag}: {e}"))
}

/// A bad value found when computing ([`named`]): its one-line error, and status 2 as clap's usage
/// errors have, so that 1 keeps meaning "the command failed" to scripts.
pub(crate) fn usage_error(e: &anyhow::Error) -> std::process::ExitCode {
    eprintln!("longhaul: error: {}", crate::logging::error_line(e));
    std::process::ExitCode::from(2)
}

/// A count of parallel streams in `1..=MAX`: the value parser of `-P` where it is checked while
/// parsing.
pub(crate) fn stream_count<const MAX: u32>(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if (1..=MAX).contains(&n) => Ok(n),
        _ => Err(format!("give 1 to {MAX} parallel streams")),
    }
}

/// The stream count of a test, `-P N`.
#[derive(clap::Args, Debug, Clone, Copy)]
pub(crate) struct Streams {
    /// Parallel streams (per direction with --bidir).
    #[arg(short = 'P', long = "streams", alias = "parallel", value_name = "N", default_value_t = 1,
          value_parser = stream_count::<{ longhaul_proto::msg::MAX_STREAMS }>)]
    pub(crate) n: u32,
}

/// The stream count of a transfer, `-P N`; unset lets the transfer choose.
#[derive(clap::Args, Debug, Clone, Copy)]
pub(crate) struct TransferStreams {
    /// Data streams [default: from the measured RTT and --rate, at least 4].
    #[arg(short = 'P', long = "streams", alias = "parallel", value_name = "N",
          value_parser = stream_count::<{ longhaul_transfer::manifest::MAX_STREAMS }>)]
    pub(crate) n: Option<u32>,
}

/// The stream count a model shares the rate among, `-P N` (checked by the model: at least 1).
#[derive(clap::Args, Debug, Clone, Copy)]
pub(crate) struct ModelStreams {
    /// Parallel streams sharing the rate (each needs its share of the BDP).
    #[arg(
        short = 'P',
        long = "streams",
        alias = "parallel",
        value_name = "N",
        default_value_t = 1
    )]
    pub(crate) n: u32,
}

impl ModelStreams {
    /// The count, at least 1.
    pub(crate) fn get(self) -> anyhow::Result<u32> {
        anyhow::ensure!(self.n > 0, "--streams: must be at least 1");
        Ok(self.n)
    }
}

/// `-4/--ipv4` and `-6/--ipv6`: which address family to connect over.
#[derive(clap::Args, Debug, Clone, Copy)]
pub(crate) struct IpFamily {
    /// Use IPv4 only.
    #[arg(
        short = '4',
        long = "ipv4",
        alias = "version4",
        conflicts_with = "ipv6"
    )]
    pub(crate) ipv4: bool,
    /// Use IPv6 only.
    #[arg(short = '6', long = "ipv6", alias = "version6")]
    pub(crate) ipv6: bool,
}

impl IpFamily {
    pub(crate) fn family(self) -> Family {
        if self.ipv4 {
            Family::V4
        } else if self.ipv6 {
            Family::V6
        } else {
            Family::Any
        }
    }
}

/// `-J/--json`: the result as JSON on stdout instead of text.
#[derive(clap::Args, Debug, Clone, Copy)]
pub(crate) struct Json {
    /// Print the result as JSON on stdout instead of text.
    #[arg(short = 'J', long)]
    pub(crate) json: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_positive_and_decimal() {
        assert_eq!(rate("10G"), Ok(10_000_000_000));
        assert_eq!(rate("2.5g"), Ok(2_500_000_000));
        assert!(rate("0").is_err());
        assert!(rate("fast").is_err());
    }

    #[test]
    fn rtts_are_positive_and_default_to_ms() {
        assert_eq!(rtt("17"), Ok(Nanos::from_millis(17)));
        assert_eq!(rtt("0.12s"), Ok(Nanos::from_millis(120)));
        assert!(rtt("0").is_err());
        assert_eq!(duration("0"), Ok(Nanos::ZERO));
    }

    #[test]
    fn stream_counts_are_bounded() {
        assert_eq!(stream_count::<8>("8"), Ok(8));
        assert!(stream_count::<8>("9").is_err());
        assert!(stream_count::<8>("0").is_err());
        assert!(stream_count::<8>("-1").is_err());
    }
}

/// `--encrypt` and its certificate files, on every command that connects to a server.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct Encrypt {
    /// Encrypt every connection in TLS 1.3 (docs/encryption.md). Without --tls-ca any server
    /// certificate is taken, and a transfer's or a controller's key proofs, bound to the TLS
    /// session, authenticate both ends.
    #[arg(long)]
    pub(crate) encrypt: bool,
    /// With --encrypt: check the server's certificate against the CA certificates in this PEM
    /// file, and its name against the host as given.
    #[arg(long, value_name = "PEM", requires = "encrypt")]
    pub(crate) tls_ca: Option<std::path::PathBuf>,
    /// With --encrypt: present this certificate chain (PEM) to a server that asks for one
    /// (`server --tls-client-ca`).
    #[arg(long, value_name = "PEM", requires_all = ["encrypt", "tls_key"])]
    pub(crate) tls_cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub(crate) tls_key: Option<std::path::PathBuf>,
}

impl Encrypt {
    /// The engine's settings, if encryption was asked for.
    pub(crate) fn config(&self) -> Option<longhaul_engine::tls::ClientTlsConfig> {
        self.encrypt.then(|| longhaul_engine::tls::ClientTlsConfig {
            ca: self.tls_ca.clone(),
            identity: self
                .tls_cert
                .clone()
                .zip(self.tls_key.clone())
                .map(|(cert, key)| longhaul_engine::tls::Identity { cert, key }),
        })
    }
}
