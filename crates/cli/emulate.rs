//! `longhaul emulate`: bring up two emulated hosts joined by a WAN path, run a command on the sending
//! host, print the emulator's fidelity report, tear everything down. Flags and output only; the work is
//! in `longhaul-emu`.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};
use longhaul_emu::link::{Bottleneck, LinkConfig, Loss, queue_for_bdp};
use longhaul_emu::{
    DirectionStats, HOST_A_V6, HOST_B_V4, HOST_B_V6, Report, Testbed, TestbedConfig,
};
use longhaul_units::{
    Nanos, TimeUnit, fmt_duration, fmt_rate, fmt_size, parse_duration, parse_rate, parse_size,
};

/// p99 lateness above which a run is flagged as not trustworthy.
const MAX_P99_LATENESS: Nanos = Nanos::MILLISECOND;

/// Flags of `longhaul emulate`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Runs CMD inside emulated host a (network namespace lh-<tag>-a, 10.201.0.1, \
fd00:4c48::1) with a path to host b (10.201.0.2, fd00:4c48::2), where `longhaul server` listens unless \
--no-server (on every address of host b). CMD finds the peer in $LH_PEER and $LH_PEER6. CMD's output goes to stdout; the emulator's \
report goes to stderr. The exit code is CMD's. Needs root.\n\nExamples:\n  \
sudo longhaul emulate --rtt 40ms --rate 500M -- sh -c 'ping -c 10 $LH_PEER'\n  \
sudo longhaul emulate --rtt 120ms --rate 1G -- longhaul test 10.201.0.2 -t 10"
)]
pub(crate) struct EmulateArgs {
    /// Round-trip propagation delay (half each way), e.g. 40ms, 0.12s.
    #[arg(long, default_value = "40ms", value_parser = duration)]
    rtt: Nanos,
    /// Bottleneck rate in each direction (IP bytes), e.g. 500M, 1G.
    #[arg(long, default_value = "1G", value_parser = rate)]
    rate: u64,
    /// Random (Bernoulli) loss per segment in each direction: a probability (0.001) or a percentage
    /// (0.1%).
    #[arg(long, default_value = "0", value_parser = loss)]
    loss: f64,
    /// MTU of the hosts' devices.
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u32).range(576..=9000))]
    mtu: u32,
    /// Bottleneck queue: `auto` (one BDP of the path, at least 4 MTUs) or a size (e.g. 4M).
    #[arg(long, default_value = "auto", value_parser = queue)]
    queue: QueueSize,
    /// Seed of the link model's random streams (record it to replay a run).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Do not start `longhaul server` on host b.
    #[arg(long)]
    no_server: bool,
    /// Print the emulator's report as JSON (on stderr, like the text report).
    #[arg(long)]
    json: bool,
    /// Run the forwarder threads with real-time priority (SCHED_FIFO 50).
    #[arg(long)]
    realtime: bool,
    /// The command to run on host a, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    cmd: Vec<String>,
}

fn duration(s: &str) -> Result<Nanos, String> {
    parse_duration(s, TimeUnit::Millis).map_err(|e| e.to_string())
}

fn rate(s: &str) -> Result<u64, String> {
    match parse_rate(s) {
        Ok(0) => Err("rate must be > 0".into()),
        Ok(r) => Ok(r),
        Err(e) => Err(e.to_string()),
    }
}

fn loss(s: &str) -> Result<f64, String> {
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
        Err(format!("{s:?}: loss must be between 0 and 1 (0% and 100%)"))
    }
}

/// `--queue`: sized from the BDP, or given.
#[derive(Clone, Copy, Debug, PartialEq)]
enum QueueSize {
    Auto,
    Bytes(u64),
}

fn queue(s: &str) -> Result<QueueSize, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(QueueSize::Auto);
    }
    parse_size(s)
        .map(QueueSize::Bytes)
        .map_err(|e| e.to_string())
}

/// One direction's link: half the RTT, the bottleneck, the loss.
fn direction(a: &EmulateArgs, seed: u64, queue_bytes: u64) -> LinkConfig {
    LinkConfig {
        seed,
        mtu: a.mtu,
        loss: if a.loss > 0.0 {
            Loss::Bernoulli { p: a.loss }
        } else {
            Loss::None
        },
        bottleneck: Some(Bottleneck {
            rate_bps: a.rate,
            queue_bytes,
            overhead_per_frame: 0,
            aqm: Default::default(),
        }),
        delay: Nanos(a.rtt.as_nanos() / 2),
        ..LinkConfig::default()
    }
}

pub(crate) fn run(a: &EmulateArgs) -> anyhow::Result<ExitCode> {
    crate::init_logging("warn");
    let queue_bytes = match a.queue {
        QueueSize::Auto => queue_for_bdp(a.rate, a.rtt, 1.0, 4 * u64::from(a.mtu)),
        QueueSize::Bytes(b) => b,
    };
    if queue_bytes < u64::from(a.mtu) {
        bail!(
            "--queue {queue_bytes} B is smaller than one MTU ({} B); use at least --queue {}",
            a.mtu,
            a.mtu
        );
    }
    let cfg = TestbedConfig {
        tag: None,
        mtu: a.mtu,
        a_to_b: direction(a, a.seed, queue_bytes),
        b_to_a: direction(a, a.seed.wrapping_add(1), queue_bytes),
        realtime: a.realtime.then_some(50),
    };
    let bed = Testbed::up(cfg).context("cannot bring up the emulated path")?;
    eprintln!(
        "emulate: {} (10.201.0.1, {HOST_A_V6}) <-> {} ({HOST_B_V4}, {HOST_B_V6}): RTT {}, rate {}, \
queue {}, loss {}, MTU {}, seed {}, TCP buffers up to {}",
        bed.host_a(),
        bed.host_b(),
        fmt_duration(a.rtt),
        fmt_rate(a.rate),
        fmt_size(queue_bytes),
        a.loss,
        a.mtu,
        a.seed,
        fmt_size(bed.tcp_buffer_max())
    );

    // On an error return `bed` is dropped, which deletes the namespaces.
    let server = if a.no_server {
        None
    } else {
        Some(start_server(bed.host_b())?)
    };
    let status = Command::new("ip")
        .args(["netns", "exec", bed.host_a()])
        .args(&a.cmd)
        .env("LH_PEER", HOST_B_V4.to_string())
        .env("LH_PEER6", HOST_B_V6.to_string())
        .status()
        .with_context(|| format!("cannot run {:?} in {}", a.cmd.join(" "), bed.host_a()));
    if let Some(mut s) = server {
        let _ = s.kill();
        let _ = s.wait();
    }
    let report = bed.down();
    let status = status?;
    print_report(&report, a.json);
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// Starts `longhaul server` in host b and waits until it listens. It binds every address of host b
/// (dual-stack), which are only its own: 10.201.0.2, fd00:4c48::2 and loopback.
fn start_server(ns: &str) -> anyhow::Result<Child> {
    let exe = std::env::current_exe().context("cannot find the longhaul executable")?;
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(exe)
        .args(["server", "--log", "warn"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start longhaul server on host b")?;
    let stderr = child.stderr.take().context("server stderr")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut ready = Some(tx);
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("longhaul server listening on ") {
                if let Some(tx) = ready.take() {
                    let _ = tx.send(());
                }
            } else {
                eprintln!("server: {line}");
            }
        }
    });
    if rx.recv_timeout(Duration::from_secs(10)).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        bail!("longhaul server on host b did not start listening within 10 s");
    }
    Ok(child)
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

fn direction_line(d: &DirectionStats) -> String {
    let l = &d.link;
    let tun = d
        .tun_tx_dropped
        .map_or_else(|| "unknown".to_string(), |n| n.to_string());
    format!(
        "{}: {} records, {} segments, delivered {} ({}), drops queue {} random {} burst {} aqm {}, \
{} splits, {} unparseable; lateness p50 {} p99 {} max {} ({} writes); TUN tx drops {}",
        d.name,
        l.records,
        l.segments,
        l.delivered,
        fmt_size(l.delivered_bytes),
        l.drop_queue,
        l.drop_random,
        l.drop_burst,
        l.drop_aqm,
        d.splits,
        d.unparseable,
        ms(d.lateness.p50_ns),
        ms(d.lateness.p99_ns),
        ms(d.lateness.max_ns),
        d.lateness.samples,
        tun
    )
}

fn print_report(r: &Report, json: bool) {
    let problems = r.fidelity_problems(MAX_P99_LATENESS.as_nanos());
    if json {
        let doc = serde_json::json!({
            "emulator": r,
            "fidelity": {
                "ok": problems.is_empty(),
                "max_p99_lateness_ns": MAX_P99_LATENESS.as_nanos(),
                "problems": problems,
            },
        });
        eprintln!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("report serialises")
        );
        return;
    }
    eprintln!("{}", direction_line(&r.a_to_b));
    eprintln!("{}", direction_line(&r.b_to_a));
    if problems.is_empty() {
        eprintln!("fidelity: OK");
    } else {
        eprintln!("fidelity: NOT TRUSTWORTHY ({})", problems.join("; "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_loss_and_queue() {
        assert_eq!(loss("0.1%").unwrap(), 0.001);
        assert_eq!(loss("0.02").unwrap(), 0.02);
        assert!(loss("2").is_err());
        assert!(loss("-1%").is_err());
        assert!(loss("x").is_err());
        assert_eq!(queue("auto").unwrap(), QueueSize::Auto);
        assert_eq!(queue("4M").unwrap(), QueueSize::Bytes(4 << 20));
        assert!(rate("0").is_err());
    }
}
