//! How much this machine's network emulator holds faithfully (issue 13, item 6): a short
//! calibration, cached, and the warning `emulate` prints before a network whose links carry more.
//!
//! The calibration brings up a small network (host c1 - router r - host c2, both links 0.5 ms and
//! rated), runs `longhaul test` from c1 to a `longhaul server` on c2 for a couple of seconds at a
//! ladder of rates (1, 2, 4, 8, 16 Gbit/s, each on a fresh fabric), and keeps the highest rate at
//! which the flow received at least [`MIN_SHARE`] of the rate with the fabric's fidelity OK (p99
//! lateness within 1 ms, no TUN drops). It stops at the first rate that fails. The figure is what
//! one flow across two rated links held, with the flow's own TCP work on the same cores, as in a
//! real run; the forwarding work is per record, and a longer path costs little more
//! (bench/RESULTS.md, "The multi-host emulator").
//!
//! The result is cached in the emulator's private state directory (`calibration.cache`, mode
//! 0600, see `longhaul_emu::session`), keyed by the longhaul version, the number of online CPUs,
//! the kernel release and the CPU model; /run is cleared at boot, so a rebooted (or resized)
//! machine calibrates again. `longhaul emulate calibrate` shows it or runs it again.

use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, bail};
use longhaul_emu::signals::stop_child;
use longhaul_emu::{Fabric, FabricConfig, FabricReport, session};
use longhaul_topology::Network;
use longhaul_units::{Nanos, fmt_rate};
use serde::{Deserialize, Serialize};

use super::server::start_server;

/// The rates tried, bit/s, in order. It starts low so that a slow machine (or a debug build)
/// still gets a figure it holds, not none (a debug build here received 831 Mbit/s of 1 Gbit/s).
const LADDER: [u64; 7] = [
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_000_000_000,
    4_000_000_000,
    8_000_000_000,
    16_000_000_000,
];
/// Share of a rate the flow must receive for the step to pass (the payload ceiling of an IP-rate
/// bottleneck is 96.5 % at MTU 1500).
const MIN_SHARE: f64 = 0.9;
/// Seconds each step's `longhaul test` runs (after one omitted second of start-up).
const STEP_SECONDS: u32 = 2;
/// p99 lateness above which a step's fidelity fails (as the report's default).
const MAX_P99: Nanos = Nanos(1_000_000);
/// The cache file in the state directory (not `.json`: that suffix is a testbed's state).
const CACHE_FILE: &str = "calibration.cache";

/// What the calibration found on one machine.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Calibration {
    /// The machine it holds for.
    pub(crate) machine: MachineKey,
    /// When it ran (RFC 3339, UTC).
    pub(crate) measured_at: String,
    /// The highest rate held faithfully, bit/s (0 when even the first step failed).
    pub(crate) held_bps: u64,
    /// Every step run, in order.
    pub(crate) steps: Vec<CalibrationStep>,
}

/// One rate tried.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct CalibrationStep {
    /// The links' rate, bit/s.
    pub(crate) rate_bps: u64,
    /// What the flow received, bit/s.
    pub(crate) received_bps: f64,
    /// The switches' worst p99 lateness, ns.
    pub(crate) p99_lateness_ns: u64,
    /// Why it failed (empty when it held).
    pub(crate) problems: Vec<String>,
}

/// What makes a calibration stale.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct MachineKey {
    version: String,
    cpus: usize,
    kernel: String,
    cpu_model: String,
}

impl MachineKey {
    fn here() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
            .unwrap_or_default();
        Self {
            version: env!("CARGO_PKG_VERSION").to_string(),
            cpus: longhaul_sys::online_cpus(),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_string(),
            cpu_model,
        }
    }
}

/// The cached calibration of this machine, if there is one and it is for this machine.
pub(crate) fn cached() -> Option<Calibration> {
    let text = session::read_file(CACHE_FILE).ok()??;
    let c: Calibration = serde_json::from_str(&text).ok()?;
    (c.machine == MachineKey::here()).then_some(c)
}

/// Runs the calibration (needs root), caches and returns it; `progress` gets a line per step.
pub(crate) fn run(mut progress: impl FnMut(&str)) -> anyhow::Result<Calibration> {
    let mut steps = Vec::new();
    let mut held_bps = 0;
    for rate in LADDER {
        let step = try_rate(rate)?;
        let ok = step.problems.is_empty();
        progress(&format!(
            "{}: received {}, p99 lateness {:.3} ms: {}",
            fmt_rate(rate),
            fmt_rate(step.received_bps as u64),
            step.p99_lateness_ns as f64 / 1e6,
            if ok {
                "held".to_string()
            } else {
                step.problems.join("; ")
            }
        ));
        steps.push(step);
        if !ok {
            break;
        }
        held_bps = rate;
    }
    let c = Calibration {
        machine: MachineKey::here(),
        measured_at: jiff::Timestamp::now().to_string(),
        held_bps,
        steps,
    };
    let text = serde_json::to_string_pretty(&c).expect("a calibration serialises");
    session::save_file(CACHE_FILE, &text).context("cannot cache the calibration")?;
    Ok(c)
}

/// The calibration network with both links at `rate`.
fn network(rate: u64) -> Network {
    let text = format!(
        r#"name = "calibration"
[[router]]
name = "r"
[[host]]
name = "c1"
[[host]]
name = "c2"
[[link]]
a = "c1"
b = "r"
delay = "0.5ms"
rate = "{rate}"
[[link]]
a = "r"
b = "c2"
delay = "0.5ms"
rate = "{rate}"
"#
    );
    Network::from_toml(&text, "calibration.toml").expect("the calibration network compiles")
}

/// One step: a fresh fabric at `rate`, a server on c2, `longhaul test` from c1.
fn try_rate(rate: u64) -> anyhow::Result<CalibrationStep> {
    let fabric = Fabric::up(FabricConfig {
        tag: None,
        network: network(rate),
        switches: None,
        cpus: None,
        realtime: None,
        host_tcp_defaults: false,
        pcap: None,
    })
    .context("cannot bring up the calibration network")?;
    let net = fabric.network();
    let ns = fabric.namespaces();
    let mut server = start_server(&ns[1], "c2")?;
    let exe = std::env::current_exe().context("cannot find the longhaul executable")?;
    let out = Command::new("ip")
        .args(["netns", "exec", &ns[0]])
        .arg(exe)
        .args(["test", &net.hosts[1].v4.to_string(), "-J", "-O", "1"])
        .args(["-t", &STEP_SECONDS.to_string(), "--rate", &rate.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("cannot run longhaul test for the calibration");
    const SIGTERM: i32 = 15;
    let _ = stop_child(&mut server, SIGTERM);
    let report = fabric.down();
    let out = out?;
    if !out.status.success() {
        bail!(
            "the calibration's longhaul test failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("the calibration's test printed no JSON")?;
    let received_bps = doc["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .context("the calibration's test reported no end.sum_received.bits_per_second")?;
    Ok(judge(rate, received_bps, &report))
}

/// A step's verdict from what the flow received and the fabric's report.
fn judge(rate: u64, received_bps: f64, report: &FabricReport) -> CalibrationStep {
    let mut problems = report.fidelity_problems(MAX_P99.as_nanos());
    if received_bps < MIN_SHARE * rate as f64 {
        problems.push(format!(
            "received {} < {:.0} % of {}",
            fmt_rate(received_bps as u64),
            MIN_SHARE * 100.0,
            fmt_rate(rate)
        ));
    }
    CalibrationStep {
        rate_bps: rate,
        received_bps,
        p99_lateness_ns: report
            .switches
            .iter()
            .map(|s| s.lateness.p99_ns)
            .max()
            .unwrap_or(0),
        problems,
    }
}

/// How much a network's links can carry at once: the sum over rated links of the faster
/// direction (data one way, its ACKs the other). Traffic between hosts whose route crosses no
/// rated link (hosts of one site, in the presets) is not bounded by it.
pub(crate) fn load(net: &Network) -> u64 {
    net.links
        .iter()
        .map(|l| {
            let r = |a_to_b| l.direction(a_to_b).bottleneck.map_or(0, |b| b.rate_bps);
            r(true).max(r(false))
        })
        .sum()
}

/// The warnings for running `net` on a machine calibrated as `c` (empty: none).
pub(crate) fn warnings(net: &Network, c: &Calibration) -> Vec<String> {
    let total = load(net);
    let mut out = Vec::new();
    if total == 0 {
        out.push(format!(
            "network {} has no rated link: its traffic is limited only by this machine, and the \
report's fidelity line decides whether the run can be trusted",
            net.name
        ));
    } else if total > c.held_bps {
        out.push(format!(
            "network {}'s rated links carry up to {} at once (each link's faster direction), more \
than the {} this machine's emulator held faithfully when calibrated ({}); the run may not be \
trustworthy: scale the rates down",
            net.name,
            fmt_rate(total),
            fmt_rate(c.held_bps),
            c.measured_at
        ));
    }
    out
}

/// Before a network runs: the cached calibration (or a new one, announced), and a warning line
/// on standard error for each way the network exceeds it. A calibration that cannot run is
/// reported and the network runs anyway.
pub(crate) fn check(net: &Network) {
    let c = match cached() {
        Some(c) => c,
        None => {
            eprintln!(
                "emulate: calibrating this machine's network emulator (once per boot, about 15 s; \
`--no-calibration` skips it)"
            );
            match run(|line| eprintln!("emulate: calibration: {line}")) {
                Ok(c) => {
                    eprintln!(
                        "emulate: calibration: this machine holds {} faithfully (cached in {})",
                        fmt_rate(c.held_bps),
                        session::state_dir().join(CACHE_FILE).display()
                    );
                    c
                }
                Err(e) => {
                    eprintln!("emulate: warning: calibration failed: {e:#}");
                    return;
                }
            }
        }
    };
    for w in warnings(net, &c) {
        eprintln!("emulate: warning: {w}");
    }
}

/// `longhaul emulate calibrate`: show the cached calibration, or run it (`--force`: again).
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Networks (`longhaul emulate NETWORK`) check their rated links against this \
figure before they run, calibrating first when there is no figure for this machine yet."
)]
pub(crate) struct CalibrateArgs {
    /// Run the calibration again even if this machine has one.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    json: crate::args::Json,
}

/// `longhaul emulate calibrate`.
pub(crate) fn calibrate(a: &CalibrateArgs) -> anyhow::Result<ExitCode> {
    let c = match cached().filter(|_| !a.force) {
        Some(c) => c,
        None => {
            if !longhaul_sys::has_net_admin() {
                bail!(longhaul_emu::EmuError::NotPrivileged);
            }
            let json = a.json.json;
            run(|line| {
                if !json {
                    eprintln!("{line}");
                }
            })?
        }
    };
    if a.json.json {
        println!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        println!(
            "this machine's network emulator holds {} faithfully (one flow over two rated links; \
calibrated {}, {} CPUs, kernel {})",
            fmt_rate(c.held_bps),
            c.measured_at,
            c.machine.cpus,
            c.machine.kernel
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(text: &str) -> Network {
        Network::from_toml(text, "t.toml").unwrap()
    }

    const TWO_SITES: &str = r#"name = "t"
[[router]]
name = "r"
[[host]]
name = "h1"
[[host]]
name = "h2"
[[host]]
name = "h3"
[[link]]
a = "h1"
b = "r"
rate = "1G"
[link.b_to_a]
rate = "300M"
[[link]]
a = "h2"
b = "r"
rate = "500M"
[[link]]
a = "h3"
b = "r"
"#;

    #[test]
    fn load_sums_each_rated_links_faster_direction() {
        // h1-r 1G (its b→a 300M is the slower), h2-r 500M, h3-r unrated.
        assert_eq!(load(&net(TWO_SITES)), 1_500_000_000);
        assert_eq!(load(&net(&TWO_SITES.replace("rate = ", "# rate = "))), 0);
    }

    fn calibration(held: u64) -> Calibration {
        Calibration {
            machine: MachineKey::here(),
            measured_at: "2026-11-26T00:00:00Z".into(),
            held_bps: held,
            steps: Vec::new(),
        }
    }

    #[test]
    fn a_network_above_the_calibrated_figure_is_warned_about_with_both_figures() {
        let n = net(TWO_SITES);
        assert!(warnings(&n, &calibration(2_000_000_000)).is_empty());
        assert!(warnings(&n, &calibration(1_500_000_000)).is_empty());
        let w = warnings(&n, &calibration(1_000_000_000));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("1.50 Gbit/s") && w[0].contains("1.00 Gbit/s"),
            "{w:?}"
        );
        let bare = net(&TWO_SITES.replace("rate = ", "# rate = "));
        let w = warnings(&bare, &calibration(8_000_000_000));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("network t has no rated link"), "{w:?}");
    }

    #[test]
    fn every_network_preset_fits_the_rate_it_is_documented_to_be_scaled_for() {
        // The presets are scaled to at most 2 Gbit/s of rated links, which this 2-core
        // reference machine holds (bench/RESULTS.md).
        for p in longhaul_topology::networks() {
            let total = load(&p.network().unwrap());
            assert!((1..=2_000_000_000).contains(&total), "{}: {total}", p.name);
        }
    }

    #[test]
    fn a_failed_step_says_why() {
        let report = FabricReport {
            network: "calibration".into(),
            tcp_buffer_max: 0,
            hosts: Vec::new(),
            links: Vec::new(),
            switches: Vec::new(),
            changes: Vec::new(),
        };
        let ok = judge(1_000_000_000, 0.95e9, &report);
        assert!(ok.problems.is_empty(), "{ok:?}");
        let slow = judge(1_000_000_000, 0.5e9, &report);
        assert_eq!(slow.problems.len(), 1);
        assert!(slow.problems[0].contains("< 90 %"), "{slow:?}");
    }
}
