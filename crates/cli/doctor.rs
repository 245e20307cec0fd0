//! `longhaul doctor`: checks this host's TCP settings for a target path and
//! prints the exact commands that fix each shortfall. It only reads: the
//! facts come from `longhaul_engine::doctor::gather`, the checks from
//! `longhaul_models::tuning`; this module parses the flags and prints.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::{Context, Result};
use longhaul_engine::doctor::gather;
use longhaul_models::tuning::{
    Finding, HostSnapshot, Status, Target, any_fail, count, evaluate, write_sysctl_file,
};
use longhaul_units::{fmt_size, fmt_size_si};
use serde::Serialize;

/// Flags of `longhaul doctor`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Checks net.core.rmem_max/wmem_max and tcp_rmem/tcp_wmem against 2 × BDP per stream, window scaling, \
timestamps, SACK, congestion controls, default qdisc, netdev_max_backlog, and for every interface that \
is up (loopback aside) its speed, MTU, root qdisc (tc) and TSO/GSO/GRO (ethtool). Nothing is changed: \
the commands under \"To fix\" are for you to run as root, and the sysctl.d snippet makes the sysctls \
permanent.

Exit status: 0 when no check fails (warnings allowed), 1 when at least one check fails, 2 on bad \
flags or values.

Examples:
  longhaul doctor                                # 10 Gbit/s over 120 ms, one stream
  longhaul doctor --rate 100G --rtt 150ms -P 8
  longhaul doctor --rate 1G --rtt 17 --json      # bare RTT = ms",
    mut_arg("json", |a| a.help("Print one JSON object: target, host snapshot, findings, sysctl.d snippet")))]
pub(crate) struct DoctorArgs {
    /// Target rate of the path, bit/s: 10G, 2.5g, 100G (k/m/g/t = ×1000).
    #[arg(long, value_name = "RATE", default_value = "10G")]
    rate: String,
    /// Round-trip time of the path: 120ms, 0.3s; a bare number is milliseconds.
    #[arg(long, value_name = "DURATION", default_value = "120ms")]
    rtt: String,
    #[command(flatten)]
    streams: crate::args::ModelStreams,
    #[command(flatten)]
    json: crate::args::Json,
}

/// What `--json` prints.
#[derive(Serialize)]
struct Output<'a> {
    target: &'a Target,
    target_display: String,
    bdp_per_stream_bytes: u64,
    wanted_window_bytes: u64,
    host: &'a HostSnapshot,
    findings: &'a [Finding],
    fails: usize,
    warnings: usize,
    sysctl_conf: String,
}

/// Runs `longhaul doctor`: exit status 0 without failures, 1 with any.
pub(crate) fn run(args: &DoctorArgs) -> Result<ExitCode> {
    // Bad values exit 2 like clap's usage errors, so that 1 always means
    // "a check failed" to scripts.
    let target = match target(args) {
        Ok(t) => t,
        Err(e) => return Ok(crate::args::usage_error(&e)),
    };
    let snap = gather();
    let findings = evaluate(&snap, &target);
    if args.json.json {
        let out = Output {
            target: &target,
            target_display: target.describe(),
            bdp_per_stream_bytes: target.bdp_per_stream(),
            wanted_window_bytes: target.wanted_window(),
            host: &snap,
            findings: &findings,
            fails: count(&findings, Status::Fail),
            warnings: count(&findings, Status::Warn),
            sysctl_conf: write_sysctl_file(&findings),
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&out).context("serialising the findings")?
        );
    } else {
        print!("{}", render(&target, &snap, &findings));
    }
    Ok(if any_fail(&findings) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn target(args: &DoctorArgs) -> Result<Target> {
    use crate::args::{named, rate, rtt};
    Ok(Target {
        rate_bps: named("--rate", &args.rate, rate)?,
        rtt: named("--rtt", &args.rtt, rtt)?,
        streams: args.streams.get()?,
    })
}

/// The human report: a table, the fixes with their reasons, the sysctl.d
/// snippet.
fn render(target: &Target, snap: &HostSnapshot, findings: &[Finding]) -> String {
    let mut s = String::new();
    let bdp = target.bdp_per_stream();
    let _ = writeln!(
        s,
        "Target: {}; BDP {} ({}) per stream, longhaul aims for 2 × BDP = {} per stream",
        target.describe(),
        fmt_size_si(bdp),
        fmt_size(bdp),
        fmt_size_si(target.wanted_window()),
    );
    let _ = writeln!(
        s,
        "Host: kernel {}, {}",
        snap.kernel_release.as_deref().unwrap_or("unknown"),
        if snap.net_admin {
            "running with CAP_NET_ADMIN"
        } else {
            "running unprivileged"
        }
    );
    let _ = writeln!(s);

    let headers = ["check", "status", "observed", "wanted"];
    let rows: Vec<[String; 4]> = findings
        .iter()
        .map(|f| {
            [
                f.check.clone(),
                f.status.to_string(),
                f.observed.clone(),
                f.wanted.clone(),
            ]
        })
        .collect();
    let mut width = headers.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 4]| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(width).enumerate() {
            if i == 3 {
                l.push_str(cell);
            } else {
                let pad = w - cell.chars().count();
                let _ = write!(l, "{cell}{}  ", " ".repeat(pad));
            }
        }
        l.trim_end().to_owned()
    };
    let _ = writeln!(s, "{}", line(headers));
    for row in &rows {
        let _ = writeln!(
            s,
            "{}",
            line([&row[0], &row[1], &row[2], &row[3]].map(String::as_str))
        );
    }

    let fixes: Vec<&Finding> = findings.iter().filter(|f| f.fix.is_some()).collect();
    let _ = writeln!(s);
    if fixes.is_empty() {
        let _ = writeln!(s, "Nothing to fix for this target.");
    } else {
        let _ = writeln!(s, "To fix (as root; longhaul doctor changed nothing):");
        for f in &fixes {
            let _ = writeln!(s, "  # {} ({}): {}", f.check, f.status, f.why);
            for cmd in f.fix.as_deref().unwrap_or_default().lines() {
                let _ = writeln!(s, "  {cmd}");
            }
        }
    }
    let conf = write_sysctl_file(findings);
    if !conf.is_empty() {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "To keep the sysctls across reboots, save this as /etc/sysctl.d/90-longhaul.conf:"
        );
        for l in conf.lines() {
            let _ = writeln!(s, "  {l}");
        }
    }
    if !snap.problems.is_empty() {
        let _ = writeln!(s);
        let _ = writeln!(s, "Could not read:");
        for p in &snap.problems {
            let _ = writeln!(s, "  {p}");
        }
    }
    let fails = count(findings, Status::Fail);
    let warns = count(findings, Status::Warn);
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{fails} failed, {warns} warning{}: {}",
        if warns == 1 { "" } else { "s" },
        if fails > 0 {
            "this host cannot fill the target path as configured"
        } else if warns > 0 {
            "the target is reachable; the warnings may cost throughput"
        } else {
            "ready for the target path"
        }
    );
    s
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};
    use longhaul_units::Nanos;

    use super::*;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        doctor: DoctorArgs,
    }

    fn parse(args: &[&str]) -> DoctorArgs {
        Cli::try_parse_from(std::iter::once("doctor").chain(args.iter().copied()))
            .unwrap()
            .doctor
    }

    #[test]
    fn clap_definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults_are_10g_120ms_one_stream() {
        let t = target(&parse(&[])).unwrap();
        assert_eq!(t.rate_bps, 10_000_000_000);
        assert_eq!(t.rtt, Nanos::from_millis(120));
        assert_eq!(t.streams, 1);
        let t = target(&parse(&["--rate", "100G", "--rtt", "150", "-P", "8"])).unwrap();
        assert_eq!(t.rtt, Nanos::from_millis(150));
        assert_eq!(t.streams, 8);
    }

    #[test]
    fn bad_flags_name_the_flag() {
        for (args, flag) in [
            (&["--rate", "fast"][..], "--rate"),
            (&["--rtt", "0"][..], "--rtt"),
            (&["-P", "0"][..], "--streams"),
        ] {
            let e = target(&parse(args)).unwrap_err().to_string();
            assert!(e.starts_with(flag), "{e}");
        }
    }

    #[test]
    fn report_has_table_fixes_and_snippet() {
        let snap = HostSnapshot {
            rmem_max: Some(4_194_304),
            wmem_max: Some(4_194_304),
            tcp_rmem: Some([4096, 131_072, 33_554_432]),
            tcp_wmem: Some([4096, 16_384, 4_194_304]),
            ..HostSnapshot::default()
        };
        let t = target(&parse(&[])).unwrap();
        let findings = evaluate(&snap, &t);
        let out = render(&t, &snap, &findings);
        assert!(out.contains("check"), "{out}");
        assert!(out.contains("FAIL"), "{out}");
        assert!(
            out.contains("\n  sysctl -w net.core.rmem_max=536870912\n"),
            "{out}"
        );
        assert!(out.contains("  net.core.rmem_max = 536870912\n"), "{out}");
        assert!(out.contains("cannot fill the target path"), "{out}");
    }
}
