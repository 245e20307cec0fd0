//! `longhaul emulate`: two emulated hosts joined by a WAN path. One-shot (`emulate PATH -- CMD`: bring
//! the path up, run CMD on the sending host, print the fidelity report, tear down) or named and
//! persistent (`up`, `exec`, `status`, `down`), plus `presets`. Flags and output only; the work is in
//! `longhaul-emu`.

use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use longhaul_emu::signals::{stop_child, stop_process_group, wait_for};
use longhaul_emu::{HOST_A_V4, HOST_A_V6, HOST_B_V4, HOST_B_V6, Termination, Testbed};
use longhaul_units::{Nanos, fmt_size};

mod calibrate;
pub(crate) mod flags;
mod metrics;
mod network;
mod path;
mod report;
mod server;
mod session;

use flags::{PathArgs, Refusal, exit_code, refuse};
use server::start_server;

/// How long --b-cmd may keep running after CMD exits before it is stopped.
const B_CMD_LINGER: Duration = Duration::from_secs(1);

/// Flags and subcommands of `longhaul emulate`.
#[derive(clap::Args, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "PRESET|FILE picks the path: a preset (see `longhaul emulate presets`) or a topology \
file (docs/topology.md); its router hops answer traceroute and --rtt/--rate/--loss/--mtu/--queue \
override it. Without it, the path is --rtt/--rate with --hops evenly spaced routers.\n\n\
`longhaul emulate [PRESET|FILE] [FLAGS] -- CMD` runs CMD inside emulated host a (network namespace \
lh-<tag>-a, 10.201.0.1, fd00:4c48::1) with a path to host b (10.201.0.2, fd00:4c48::2), where \
`longhaul server` listens unless --no-server. CMD finds the peer in $LH_PEER and $LH_PEER6. CMD's \
output goes to stdout; the emulator's report goes to stderr. The exit code is CMD's; SIGINT/SIGTERM/\
SIGHUP stop CMD, tear the path down and exit with 128 + the signal. `up` keeps a named testbed running \
in the background for `exec`, `status` and `down`. Needs root (except `presets` and --describe).\n\n\
Examples:\n  \
longhaul emulate presets\n  \
longhaul emulate ipv6-lsr-2004 --describe\n  \
sudo longhaul emulate cern-starlight -- sh -c 'longhaul test $LH_PEER -t 20'\n  \
sudo longhaul emulate ipv6-lsr-2004 --rate 200M --no-server -- traceroute -n -q 1 10.201.0.2\n  \
sudo longhaul emulate --rtt 40ms --rate 500M -- sh -c 'ping -c 10 $LH_PEER'\n  \
sudo longhaul emulate --rtt 60ms --no-server --b-cmd 'iperf3 -s -1' -- iperf3 -c 10.201.0.2\n  \
sudo longhaul emulate up cern-starlight --rate 500M\n  \
sudo longhaul emulate exec a -- longhaul test 10.201.0.2 -t 10\n  \
sudo longhaul emulate status --json\n  \
sudo longhaul emulate down"
)]
pub(crate) struct EmulateArgs {
    #[command(subcommand)]
    action: Option<Action>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// List the presets: distance, RTT, default rate, router hops and source (no root needed).
    Presets(PresetsArgs),
    /// Bring a named testbed up and keep it running in the background (until `down`).
    Up(Box<session::UpArgs>),
    /// Run a command on a host of a running testbed (`a` or `b`, or a network's host name).
    Exec(session::ExecArgs),
    /// Show the running testbeds: hosts, addresses, path and live counters.
    Status(session::StatusArgs),
    /// Tear a running testbed down and print its final counters.
    Down(session::DownArgs),
    /// Cut a running testbed's path or a network's link (`down`: an outage, every packet
    /// dropped), restore it (`up`), or change a network's link (`set`).
    Link(session::LinkArgs),
    /// Pin a running network's route between two hosts through given routers.
    Route(session::RouteArgs),
    /// Add a burst of synthetic cross traffic to a running testbed's bottleneck.
    Burst(session::BurstArgs),
    /// Show how much this machine's network emulator holds faithfully (a short calibration,
    /// cached until reboot; run first if there is none).
    Calibrate(calibrate::CalibrateArgs),
}

#[derive(clap::Args, Debug)]
#[command(mut_arg("json", |a| a.help("As a JSON array")))]
struct PresetsArgs {
    #[command(flatten)]
    json: crate::args::Json,
}

/// `longhaul emulate [PRESET|FILE] -- CMD`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("json", |a| a.help("Print the emulator's report as JSON (on stderr, like the text report)")))]
struct RunArgs {
    #[command(flatten)]
    path: PathArgs,
    /// Print PRESET|FILE hop by hop (traceroute-style, with the overrides applied) and exit. Needs no
    /// CMD and no root.
    #[arg(long, requires = "path")]
    describe: bool,
    /// A command (run with `sh -c`) to start in the background on host b before CMD, e.g.
    /// "iperf3 -s -1"; stopped when CMD exits.
    #[arg(long, value_name = "SHELL-CMD")]
    b_cmd: Option<String>,
    /// How long to give --b-cmd to get ready before CMD starts.
    #[arg(long, default_value = "500ms", value_parser = crate::args::duration)]
    b_cmd_wait: Nanos,
    /// Do not start `longhaul server` on host b (with a network: on every other host).
    #[arg(long)]
    no_server: bool,
    /// With a network: the host CMD runs on [default: the network's first host].
    #[arg(long, value_name = "HOST")]
    on: Option<String>,
    /// With a network: forwarding threads (each reads a share of the hosts) [default: one per
    /// CPU, at most one per host].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    switches: Option<u32>,
    /// With a network: do not check its rated links against this machine's calibration (nor
    /// calibrate first when there is none; see `longhaul emulate calibrate`).
    #[arg(long)]
    no_calibration: bool,
    #[command(flatten)]
    json: crate::args::Json,
    /// The command to run on host a, after `--`.
    #[arg(last = true, required_unless_present = "describe", value_name = "CMD")]
    cmd: Vec<String>,
}

pub(crate) fn run(a: &EmulateArgs) -> anyhow::Result<ExitCode> {
    crate::logging::to_stderr("warn");
    match &a.action {
        Some(Action::Presets(p)) => match path::list(p.json.json) {
            Ok(text) => {
                print!("{text}");
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => bail!("{}", e.0),
        },
        Some(Action::Up(u)) => session::up(u),
        Some(Action::Exec(e)) => session::exec(e),
        Some(Action::Status(s)) => session::status(s),
        Some(Action::Down(d)) => session::down(d),
        Some(Action::Link(l)) => session::link(l),
        Some(Action::Route(r)) => session::route(r),
        Some(Action::Burst(b)) => session::burst(b),
        Some(Action::Calibrate(c)) => calibrate::calibrate(c),
        None => run_once(&a.run),
    }
}

/// The one-shot run: up, CMD on host a, report, down.
fn run_once(a: &RunArgs) -> anyhow::Result<ExitCode> {
    if let Some(spec) = a.path.path.as_deref() {
        let net = match network::load(spec) {
            Ok(n) => n,
            Err(e) => return refuse(Refusal::Usage(e.0)),
        };
        if let Some(net) = net {
            if a.describe {
                print!("{}", longhaul_topology::describe_network(&net));
                return Ok(ExitCode::SUCCESS);
            }
            if a.b_cmd.is_some() {
                return refuse(Refusal::Usage(
                    "--b-cmd is for two-host paths; with a network, CMD can reach every host \
(ip netns exec, or `emulate up` and `emulate exec HOST`)"
                        .into(),
                ));
            }
            return network::run_once(
                net,
                network::Once {
                    path: &a.path,
                    on: a.on.as_deref(),
                    switches: a.switches.map(|n| n as usize),
                    calibration: !a.no_calibration,
                    no_server: a.no_server,
                    json: a.json.json,
                    cmd: &a.cmd,
                },
            );
        }
    }
    if a.on.is_some() || a.switches.is_some() || a.no_calibration {
        return refuse(Refusal::Usage(
            "--on, --switches and --no-calibration are for networks (a network preset or file \
with [[host]] tables)"
                .into(),
        ));
    }
    if a.describe {
        let spec = a.path.path.as_deref().unwrap_or_default();
        return match path::show(spec, &a.path.overrides()) {
            Ok(text) => {
                print!("{text}");
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => refuse(Refusal::Usage(e.0)),
        };
    }
    let (cfg, summary) = match flags::configure(&a.path, None) {
        Ok(c) => c,
        Err(r) => return refuse(r),
    };
    // Caught from here on: a signal stops CMD and tears the testbed down.
    let term = Termination::install().context("cannot install signal handlers")?;
    let bed = Testbed::up(cfg).context("cannot bring up the emulated path")?;
    eprintln!(
        "emulate: {} ({HOST_A_V4}, {HOST_A_V6}) <-> {} ({HOST_B_V4}, {HOST_B_V6}): {}, TCP buffers up \
to {}{}",
        bed.host_a(),
        bed.host_b(),
        summary.line(),
        fmt_size(bed.tcp_buffer_max()),
        summary.impairments
    );
    eprintln!("emulate: {}", bed.plan().line());

    // On an error return `bed` is dropped, which deletes the namespaces.
    let mut server = None;
    let mut b_cmd = None;
    let mut status = None;
    if term.received().is_none() && !a.no_server {
        server = Some(start_server(bed.host_b(), "b")?);
    }
    if term.received().is_none()
        && let Some(cmd) = &a.b_cmd
    {
        // Its own process group, so that the shell's children can be stopped with it.
        b_cmd = Some(
            Command::new("ip")
                .args(["netns", "exec", bed.host_b(), "sh", "-c", cmd])
                .env("LH_PEER", HOST_A_V4.to_string())
                .env("LH_PEER6", HOST_A_V6.to_string())
                .stdin(Stdio::null())
                .process_group(0)
                .spawn()
                .with_context(|| format!("cannot start --b-cmd {cmd:?} in {}", bed.host_b()))?,
        );
        std::thread::sleep(Duration::from_nanos(a.b_cmd_wait.as_nanos()));
    }
    if term.received().is_none() {
        let child = Command::new("ip")
            .args(["netns", "exec", bed.host_a()])
            .args(&a.cmd)
            .env("LH_PEER", HOST_B_V4.to_string())
            .env("LH_PEER6", HOST_B_V6.to_string())
            .spawn()
            .with_context(|| format!("cannot run {:?} in {}", a.cmd.join(" "), bed.host_a()));
        status = Some(child.and_then(|mut c| {
            term.wait_child(&mut c)
                .with_context(|| format!("waiting for {:?}", a.cmd.join(" ")))
        }));
    }
    const SIGTERM: i32 = 15;
    if let Some(mut s) = server {
        let _ = stop_child(&mut s, SIGTERM);
    }
    if let Some(mut b) = b_cmd {
        // A command that finishes by itself (`iperf3 -s -1`) gets a moment to do so.
        if term.received().is_some() || matches!(wait_for(&mut b, B_CMD_LINGER), Ok(None)) {
            let _ = stop_process_group(&mut b, SIGTERM);
        }
    }
    let r = bed.down();
    report::print(&r, a.path.max_lateness, a.json.json);
    if let Some(sig) = term.received() {
        eprintln!("emulate: stopped by signal {sig}; testbed torn down");
        return Ok(ExitCode::from(u8::try_from(128 + sig).unwrap_or(1)));
    }
    let (status, _) = status.context("CMD did not run")??;
    Ok(exit_code(status))
}
