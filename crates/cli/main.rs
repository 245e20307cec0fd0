//! The `longhaul` binary: flags (`args.rs` defines each shared flag once), logging (`logging.rs`), one
//! module per subcommand, and output (text, JSON). The work happens in the library crates: engine
//! (test, server, send, get, doctor's facts), models and units (calc, doctor's checks), emu and
//! topology (emulate), lab and experiments (lab), web and testbed (testbed), monitor and
//! monitor-service (monitor). Start at `Command` below.
//!
//! Exit codes: 0 success; 1 the command failed (a test error, a doctor check that fails); 2 bad usage
//! (clap's errors, and bad values found when computing: `args::usage_error`); 3 `isolate` located a
//! fault; 130/143 interrupted; each command's in README's table, held to it by tests/cli_exits.rs.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod agent;
mod args;
mod calc;
mod campaign;
mod config;
mod copy;
mod doctor;
mod emulate;
mod generate;
mod interrupt;
mod iperf3_flags;
mod isolate;
mod lab;
mod logging;
mod monitor;
mod panic_hook;
mod probe;
mod server;
mod systemd;
mod test;
mod testbed;
mod transfer;

/// Move bulk data at the full speed of long, fat networks, and prove it.
/// What `longhaul --version` prints: the version, the commit, the target, and what is built in
/// (longhaul has no optional features: every build carries all of it).
const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ncommit: ",
    env!("LONGHAUL_COMMIT"),
    "\ntarget: ",
    env!("LONGHAUL_TARGET"),
    "\nbuilt in: TCP and UDP tests, iperf3 protocol, TLS (rustls), QUIC/UDT data plane (quinn), \
     transfers, emulator, testbed service (SQLite, PostgreSQL), monitor, lab",
);

#[derive(Parser, Debug)]
#[command(
    name = "longhaul",
    version,
    long_version = LONG_VERSION,
    about,
    long_about = "longhaul measures and fills long fat networks (10-100 Gbit/s, 100-500 ms RTT) with no hand \
tuning: windows sized from the measured RTT, congestion control and pacing per test, TCP internals per \
interval, iperf3-compatible JSON.",
    after_help = "Examples:\n  longhaul server                      # serve tests on port 7067 (IPv4 and IPv6)\n  \
longhaul test 192.0.2.7 -P 4 -t 30    # 4 streams for 30 s\n  longhaul test                         # self-test on loopback\n  \
longhaul calc bdp --rate 10G --rtt 120ms\n  longhaul doctor --rate 10G --rtt 120ms"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve throughput tests: many clients at once, control and data on one port.
    Server(server::ServerArgs),
    /// Run a memory-to-memory throughput test against a longhaul server (iperf3-style flags).
    Test(Box<test::TestArgs>),
    /// Test many host pairs at one instant: each pair's sending server runs its test for this
    /// controller, and the results add up (docs/fleet.md).
    Campaign(campaign::CampaignArgs),
    /// TCP models for long fat paths: BDP, Mathis, responsiveness, Land Speed Record metric.
    Calc(calc::CalcArgs),
    /// Check this host's TCP settings for a target path and print the exact fixes.
    Doctor(doctor::DoctorArgs),
    /// Run a command across an emulated WAN path (two hosts in network namespaces; needs root).
    Emulate(Box<emulate::EmulateArgs>),
    /// Send files and directory trees to a `longhaul server --root`: parallel streams, every chunk
    /// verified, resumable.
    Send(Box<transfer::SendArgs>),
    /// Fetch files and directory trees from a `longhaul server --root`.
    Get(Box<transfer::GetArgs>),
    /// Third party: have server A send files to server B; only progress comes here (docs/fleet.md).
    Copy(Box<copy::CopyArgs>),
    /// Create a key file for `send`/`get` and `server --root`.
    Keygen(transfer::KeygenArgs),
    /// Run on a testbed host: register it with the testbed service (per-host key), report its facts
    /// and heartbeat (docs/testbed.md §11).
    Agent(agent::AgentArgs),
    /// Reserve testbed partitions: the reservation service (`serve`, `token add`) and its client
    /// (`reserve`, `list`, `confirm`, `cancel`, `release`).
    Testbed(testbed::TestbedArgs),
    /// Send a probe stream to a server: loss, reordering, RTT, jitter, one-way delays (the
    /// monitor's latency test, by hand).
    Probe(probe::ProbeArgs),
    /// Find the segment of a path where a fault first shows (loss, burst loss, a slow link, damaged
    /// packets) by bisection over reflectors that answer ping (needs root).
    Isolate(isolate::IsolateArgs),
    /// Watch a mesh of hosts continuously: scheduled throughput tests, latency and loss probes,
    /// traceroutes, an archive (docs/monitor.md).
    Monitor(monitor::MonitorArgs),
    /// Write manual pages or print shell completions (for packagers).
    #[command(hide = true)]
    Generate(generate::GenerateArgs),
    /// The seeds' experiments as data: run them on emulated paths, archive, plot, report, and
    /// check Land Speed Record rules.
    Lab(Box<lab::LabArgs>),
}

fn main() -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    panic_hook::install();
    // A daemon's configuration file becomes flags before the command line's (which win).
    let args = match config::plan(&Cli::command(), std::env::args_os().collect()) {
        Ok(config::Plan::Run(args)) => args,
        Ok(config::Plan::Print(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("longhaul: error: {e}");
            return ExitCode::from(2);
        }
    };
    let cli = match Cli::command()
        .try_get_matches_from(args)
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let result = match &cli.command {
        Command::Server(a) => server::run(a),
        Command::Generate(a) => generate::run(a, Cli::command()),
        Command::Agent(a) => agent::run(a),
        Command::Test(a) => test::run(a),
        Command::Campaign(a) => campaign::run(a),
        Command::Calc(a) => calc::run(a),
        Command::Doctor(a) => doctor::run(a),
        Command::Emulate(a) => emulate::run(a),
        Command::Send(a) => transfer::send(a),
        Command::Get(a) => transfer::get(a),
        Command::Copy(a) => copy::run(a),
        Command::Keygen(a) => transfer::keygen(a),
        Command::Testbed(a) => testbed::run(a),
        Command::Lab(a) => lab::run(a),
        Command::Monitor(a) => monitor::run(a),
        Command::Probe(a) => probe::run(a),
        Command::Isolate(a) => isolate::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("longhaul: error: {}", crate::logging::error_line(&e));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every subcommand's flags together: no two share a name or a short letter (the shared flags
    /// of `args` are flattened into many of them).
    #[test]
    fn clap_definition_is_valid() {
        Cli::command().debug_assert();
    }
}
