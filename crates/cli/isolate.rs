//! `longhaul isolate HOST`: find the segment of a path where a fault first shows (loss, burst
//! loss, a rate below the probes', damaged packets) by bisection over reflectors that answer ICMP
//! echo: the routers of an emulated network, hosts placed along a real path (docs/isolate.md).

use std::net::IpAddr;
use std::process::ExitCode;
use std::time::Duration;

use longhaul_engine::isolate::{IsolateConfig, Progress, resolve_target, run_isolate};
use longhaul_isolate::{Figures, Reflector, Report, Thresholds};
use longhaul_units::{Nanos, fmt_rate};

use crate::args;

/// Exit status when a fault was located (0: none at this rate).
const FAULT_FOUND: u8 = 3;

/// `longhaul isolate`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Finds the path to HOST as `traceroute -I` does (or takes --reflector), keeps the \
hops that answer ICMP echo as reflectors, then measures loss and rate to the far end and bisects: \
trains of echo requests paced at --rate go to the reflector halfway between the last clean one and \
the first faulty one, until they are neighbours. The report names that segment, what it shows, the \
figures of every reflector measured and a confidence. Needs root (raw ICMP sockets).\n\nExit \
status: 0 no fault at this rate, 3 a fault located, 1 an error, 2 bad usage.\n\nExamples:\n  \
longhaul isolate 10.201.0.2 --rate 50M\n  longhaul isolate dtn.example.org --reflector \
192.0.2.1,198.51.100.9 --json"
)]
pub(crate) struct IsolateArgs {
    /// The far end (a name or an address); it must answer ICMP echo.
    host: String,
    /// The rate each train of probes is sent at (IP bytes), e.g. 200M. A link slower than this
    /// shows as a fault; keep it below the path's nominal rate.
    #[arg(short, long, default_value = "100M", value_parser = args::rate)]
    rate: u64,
    /// The reflectors in path order, instead of finding the path (the far end is added last).
    #[arg(long, value_delimiter = ',', value_name = "ADDR,...")]
    reflector: Vec<IpAddr>,
    /// Probes per measurement (each reflector measured).
    #[arg(short = 'n', long, default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(16..=65_535))]
    probes: u32,
    /// Trains the probes are sent in (a gap of two trains' time between them).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1000))]
    trains: u32,
    /// IP bytes of each probe (keep it within the path's MTU).
    #[arg(short = 's', long, default_value_t = 1500,
          value_parser = clap::value_parser!(u32).range(64..=65_535))]
    size: u32,
    /// Loss above this (the lower end of its 99 % interval) is a fault: a probability (0.002) or a
    /// percentage (0.2%).
    #[arg(long, default_value = "0.2%", value_parser = args::share)]
    loss_threshold: f64,
    /// Replies spread below this share of the sending rate (median over trains) are a fault.
    #[arg(long, default_value = "80%", value_parser = args::share)]
    rate_threshold: f64,
    /// Most hops searched for the path.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u8).range(1..=64))]
    max_hops: u8,
    /// How long to wait for answers while finding the path and its reflectors.
    #[arg(long, default_value = "2s", value_parser = args::duration)]
    wait: Nanos,
    #[command(flatten)]
    ip: args::IpFamily,
    #[command(flatten)]
    json: args::Json,
}

fn hop(r: &Reflector) -> String {
    r.hop.map_or_else(|| "  ".into(), |h| format!("{h:>2}"))
}

fn rtt(ms: Option<f64>) -> String {
    ms.map_or_else(|| "—".into(), |ms| format!("{ms:.1} ms"))
}

/// One reflector's figures on one line.
fn figures_line(f: &Figures) -> String {
    let mut s = format!(
        "loss {:.2} % ({} of {}, {} events, longest {}), replies at {} of {} sent ({:.0} %)",
        f.loss * 100.0,
        f.lost,
        f.sent,
        f.loss_runs,
        f.longest_run,
        fmt_rate(f.back_bps as u64),
        fmt_rate(f.sent_bps as u64),
        f.ratio * 100.0
    );
    if f.damaged > 0 {
        s += &format!(", {} damaged", f.damaged);
    }
    s += &format!(", rtt {}", rtt(f.rtt_min_ms));
    s += &match f.fault {
        Some(k) => format!("  FAULT: {}", k.describe()),
        None => "  clean".into(),
    };
    s
}

fn verdict(r: &Report) -> String {
    let Some(f) = &r.fault else {
        return format!(
            "no fault: the far end {} is clean at {} ({:.1} s)\n",
            r.target,
            fmt_rate(r.rate_bps),
            r.elapsed_s
        );
    };
    let after = match (f.after, f.after_hop) {
        (None, _) => "this host".to_string(),
        (Some(a), Some(h)) => format!("hop {h} ({a})"),
        (Some(a), None) => a.to_string(),
    };
    let at = match f.at_hop {
        Some(h) => format!("hop {h} ({})", f.at),
        None => f.at.to_string(),
    };
    format!(
        "fault: between {after} and {at}: {}, confidence {:.1} % ({} measurements, {:.1} s)\n",
        f.kind.describe(),
        (f.confidence * 100.0).min(99.9),
        r.measured.len(),
        r.elapsed_s
    )
}

pub(crate) fn run(a: &IsolateArgs) -> anyhow::Result<ExitCode> {
    let target = resolve_target(&a.host, a.ip.family())?;
    if let Some(bad) = a.reflector.iter().find(|r| r.is_ipv4() != target.is_ipv4()) {
        anyhow::bail!("reflector {bad} is not of the far end's family ({target})");
    }
    let cfg = IsolateConfig {
        target,
        reflectors: (!a.reflector.is_empty()).then(|| a.reflector.clone()),
        rate_bps: a.rate,
        probe_bytes: a.size,
        probes: a.probes,
        trains: a.trains,
        thresholds: Thresholds {
            loss: a.loss_threshold,
            rate: a.rate_threshold,
        },
        max_hops: a.max_hops,
        wait: Duration::from_nanos(a.wait.as_nanos()),
    };
    let text = !a.json.json;
    if text {
        println!(
            "isolate {target} at {}: {} probes of {} B in {} trains per reflector",
            fmt_rate(a.rate),
            a.probes,
            a.size,
            a.trains
        );
    }
    let report = run_isolate(&cfg, &mut |p| {
        if !text {
            return;
        }
        match p {
            Progress::Path(rs) => {
                println!("reflectors ({}):", rs.len());
                for r in rs {
                    println!("  {}  {:<40} {}", hop(r), r.addr, rtt(r.rtt_ms));
                }
            }
            Progress::Silent(addrs) => {
                let list: Vec<String> = addrs.iter().map(ToString::to_string).collect();
                println!("not answering echo (not used): {}", list.join(", "));
            }
            Progress::Measuring(_, r) => print!("{} {:<40} ", hop(r), r.addr),
            Progress::Measured(_, f) => println!("{}", figures_line(f)),
        }
    })?;
    if text {
        print!("{}", verdict(&report));
    } else {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    Ok(if report.fault.is_some() {
        ExitCode::from(FAULT_FOUND)
    } else {
        ExitCode::SUCCESS
    })
}
