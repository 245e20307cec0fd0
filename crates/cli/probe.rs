//! `longhaul probe HOST`: one probe stream to a `longhaul server` (the latency test of
//! `longhaul monitor`, run by hand, as owping or twping are): loss, duplicates, reordering, RTT,
//! jitter, and one-way delays when both clocks say they are synchronised (docs/monitor.md).

use std::process::ExitCode;

use longhaul_engine::{DEFAULT_PORT, ProbeConfig, run_probe};
use longhaul_proto::probe::{ProbeSummary, Spread};
use longhaul_units::{Nanos, fmt_duration};

use crate::args;

/// `longhaul probe`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "The server reflects the probes only for this session, only to this \
host's address, never with more bytes than came.\n\nExamples:\n  longhaul probe dtn.example.org\n  \
longhaul probe 10.201.0.2 -c 3000 -i 10ms --json"
)]
pub(crate) struct ProbeArgs {
    /// The server.
    host: String,
    /// Its port.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// How many probes.
    #[arg(short, long, default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    count: u64,
    /// Time between probes (at least 1ms).
    #[arg(short, long, default_value = "100ms", value_parser = args::duration)]
    interval: Nanos,
    /// Bytes of each probe (64 to 8972).
    #[arg(short = 'l', long, default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(64..=8972))]
    size: u32,
    /// Seconds to wait for the server at each step of the set-up.
    #[arg(long, default_value = "10", value_parser = args::seconds)]
    connect_timeout: Nanos,
    #[command(flatten)]
    ip: args::IpFamily,
    #[command(flatten)]
    json: args::Json,
}

fn spread(s: &Spread) -> String {
    format!(
        "min {} / median {} / p90 {} / max {}",
        fmt_duration(Nanos(s.min_ns)),
        fmt_duration(Nanos(s.median_ns)),
        fmt_duration(Nanos(s.p90_ns)),
        fmt_duration(Nanos(s.max_ns))
    )
}

fn text(host: &str, s: &ProbeSummary) -> String {
    let mut out = format!(
        "probes to {host}: {} sent, {} back, {} lost ({:.3} %), {} duplicates, {} reordered\n",
        s.sent,
        s.received,
        s.lost,
        s.loss * 100.0,
        s.duplicates,
        s.reordered
    );
    if let Some(b) = s.b_received {
        out += &format!(
            "  the server received {b}: {} lost on the way there\n",
            s.sent.saturating_sub(b)
        );
    }
    if let Some(r) = &s.rtt {
        out += &format!("  rtt     {}\n", spread(r));
    }
    if let Some(j) = s.jitter_ns {
        out += &format!("  jitter  {} (RFC 3550)\n", fmt_duration(Nanos(j)));
    }
    match (&s.forward, &s.backward) {
        (Some(f), Some(b)) => {
            out += &format!("  there   {}\n  back    {}\n", spread(f), spread(b));
        }
        _ => out += "  one-way delays: not given (the clocks are not both synchronised)\n",
    }
    out
}

pub(crate) fn run(a: &ProbeArgs) -> anyhow::Result<ExitCode> {
    let summary = run_probe(&ProbeConfig {
        host: a.host.clone(),
        port: a.port,
        family: a.ip.family(),
        interval: a.interval.to_duration(),
        size: a.size,
        count: a.count,
        timeout: a.connect_timeout.to_duration(),
    })?;
    if a.json.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", text(&a.host, &summary));
    }
    Ok(ExitCode::SUCCESS)
}
