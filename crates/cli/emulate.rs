//! `longhaul emulate`: bring up two emulated hosts joined by a WAN path, run a command on the sending
//! host, print the emulator's fidelity report, tear everything down. Flags and output only; the work is
//! in `longhaul-emu`.

use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};
use longhaul_emu::link::{
    Aqm, Bottleneck, CrossTraffic, Jitter, LinkConfig, Loss, Reorder, queue_for_bdp,
};
use longhaul_emu::signals::{stop_child, stop_process_group, wait_for};
use longhaul_emu::{
    DirectionStats, HOST_A_V6, HOST_B_V4, HOST_B_V6, MAX_HOPS, Report, Termination, Testbed,
    TestbedConfig, evenly_spaced_hops,
};
use longhaul_topology::Overrides;
use longhaul_units::{
    Nanos, TimeUnit, fmt_duration, fmt_rate, fmt_size, parse_duration, parse_rate, parse_size,
};

mod path;

/// p99 lateness above which a run is flagged as not trustworthy.
const MAX_P99_LATENESS: Nanos = Nanos::MILLISECOND;

/// How long --b-cmd may keep running after CMD exits before it is stopped.
const B_CMD_LINGER: Duration = Duration::from_secs(1);

/// Flags of `longhaul emulate`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "PRESET|FILE picks the path: a preset (list them with --list-presets) or a topology \
file (docs/topology.md); its router hops answer traceroute and --rtt/--rate/--loss/--mtu/--queue \
override it. Without it, the path is --rtt/--rate with --hops evenly spaced routers.\n\n\
Runs CMD inside emulated host a (network namespace lh-<tag>-a, 10.201.0.1, \
fd00:4c48::1) with a path to host b (10.201.0.2, fd00:4c48::2), where `longhaul server` listens unless \
--no-server (on every address of host b). CMD finds the peer in $LH_PEER and $LH_PEER6. CMD's output goes to stdout; the emulator's \
report goes to stderr. The exit code is CMD's; SIGINT/SIGTERM/SIGHUP stop CMD, tear the path down \
and exit with 128 + the signal. Needs root.\n\nExamples:\n  \
longhaul emulate --list-presets\n  \
longhaul emulate ipv6-lsr-2004 --describe\n  \
sudo longhaul emulate cern-starlight -- sh -c 'longhaul test $LH_PEER -t 20'\n  \
sudo longhaul emulate ipv6-lsr-2004 --rate 200M --no-server -- traceroute -n -q 1 10.201.0.2\n  \
sudo longhaul emulate --rtt 40ms --rate 500M -- sh -c 'ping -c 10 $LH_PEER'\n  \
sudo longhaul emulate --rtt 120ms --rate 1G -- longhaul test 10.201.0.2 -t 10\n  \
sudo longhaul emulate --rtt 40ms --hops 3 --no-server -- traceroute -n -q 1 10.201.0.2\n  \
sudo longhaul emulate --rtt 60ms --no-server --b-cmd 'iperf3 -s -1' -- iperf3 -c 10.201.0.2"
)]
pub(crate) struct EmulateArgs {
    /// The path: a preset name (see --list-presets) or a topology file (TOML). Without it: --rtt,
    /// --rate and --hops.
    #[arg(value_name = "PRESET|FILE")]
    path: Option<String>,
    /// List the presets (distance, RTT, default rate, router hops, source) and exit; with --json as
    /// JSON. Needs no CMD and no root.
    #[arg(long, conflicts_with = "path")]
    list_presets: bool,
    /// Print PRESET|FILE hop by hop (traceroute-style, with the overrides applied) and exit. Needs no
    /// CMD and no root.
    #[arg(long, requires = "path")]
    describe: bool,
    /// Round-trip propagation delay (half each way), e.g. 40ms, 0.12s [default: 40ms, or the
    /// preset's; with a preset every leg is scaled].
    #[arg(long, value_parser = duration)]
    rtt: Option<Nanos>,
    /// Bottleneck rate in each direction (IP bytes), e.g. 500M, 1G [default: 1G, or the preset's].
    #[arg(long, value_parser = rate)]
    rate: Option<u64>,
    /// Random (Bernoulli) loss per segment in each direction: a probability (0.001) or a percentage
    /// (0.1%) [default: 0, or the preset's].
    #[arg(long, value_parser = loss)]
    loss: Option<f64>,
    /// Gilbert–Elliott burst loss in each direction instead of --loss: `p,r[,1-h,1-k]` (probabilities
    /// or percentages: good→bad, bad→good, loss in the bad state (default 1), loss in the good state
    /// (default 0)).
    #[arg(long, value_name = "p,r[,1-h,1-k]", value_parser = loss_burst, conflicts_with = "loss")]
    loss_burst: Option<Loss>,
    /// Uniform jitter added to each segment's delay, up to this much (FIFO order kept unless
    /// --jitter-reorders), e.g. 1ms.
    #[arg(long, value_parser = duration)]
    jitter: Option<Nanos>,
    /// Let jitter reorder segments (by default a segment is never released before its predecessor).
    #[arg(long, requires = "jitter")]
    jitter_reorders: bool,
    /// Probability that a segment is displaced (held back by --reorder-hold, so later ones overtake it).
    #[arg(long, value_name = "P", value_parser = probability("--reorder"))]
    reorder: Option<f64>,
    /// How long a displaced segment is held back.
    #[arg(long, default_value = "2ms", value_parser = duration, requires = "reorder")]
    reorder_hold: Nanos,
    /// Probability that a segment is delivered twice.
    #[arg(long, value_name = "P", default_value = "0", value_parser = probability("--duplicate"))]
    duplicate: f64,
    /// Queue discipline of the bottleneck: `droptail` or `codel` (target 5 ms, interval 100 ms).
    #[arg(long, default_value = "droptail", value_parser = aqm)]
    aqm: Aqm,
    /// Constant-bit-rate cross traffic occupying the bottleneck in each direction (no packets are
    /// materialised), e.g. 200M; must be below --rate.
    #[arg(long, value_name = "RATE", value_parser = rate)]
    cross_traffic: Option<u64>,
    /// Router hops: N routers evenly spaced along the path (hop1..hopN at 10.201.1.1.. and
    /// fd00:4c48:1::1..), each decrementing TTL / hop limit and answering ICMP time exceeded.
    #[arg(long, default_value_t = 0, value_name = "N", conflicts_with = "path")]
    hops: usize,
    /// A command (run with `sh -c`) to start in the background on host b before CMD, e.g.
    /// "iperf3 -s -1"; stopped when CMD exits.
    #[arg(long, value_name = "SHELL-CMD")]
    b_cmd: Option<String>,
    /// How long to give --b-cmd to get ready before CMD starts.
    #[arg(long, default_value = "500ms", value_parser = duration)]
    b_cmd_wait: Nanos,
    /// MTU of the hosts' devices [default: 1500, or the preset's; with a preset 1500 or 9000].
    #[arg(long, value_parser = clap::value_parser!(u32).range(576..=9000))]
    mtu: Option<u32>,
    /// Bottleneck queue: `auto` (one BDP of the path, at least 4 MTUs) or a size (e.g. 4M)
    /// [default: auto, or the preset's].
    #[arg(long, value_parser = queue)]
    queue: Option<QueueSize>,
    /// Leave the hosts' TCP buffer limits at the kernel's defaults (tcp_rmem max 6 MiB, tcp_wmem max
    /// 4 MiB) instead of raising them to cover the path: an untuned host, as iperf3 gets it.
    #[arg(long)]
    host_defaults: bool,
    /// Seed of the link model's random streams (record it to replay a run).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Do not start `longhaul server` on host b.
    #[arg(long)]
    no_server: bool,
    /// Print the emulator's report as JSON (on stderr, like the text report); with --list-presets,
    /// the list as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Run the forwarder threads with real-time priority (SCHED_FIFO 50).
    #[arg(long)]
    realtime: bool,
    /// The command to run on host a, after `--`.
    #[arg(
        last = true,
        required_unless_present_any = ["list_presets", "describe"],
        value_name = "CMD"
    )]
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
    prob(s, "loss")
}

/// A probability `0.001` or a percentage `0.1%` in [0, 1]; `what` names it in errors.
fn prob(s: &str, what: &str) -> Result<f64, String> {
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

fn probability(what: &'static str) -> impl Fn(&str) -> Result<f64, String> + Clone {
    move |s| prob(s, what)
}

fn loss_burst(s: &str) -> Result<Loss, String> {
    let parts: Vec<&str> = s.split(',').collect();
    if !(2..=4).contains(&parts.len()) {
        return Err(format!(
            "{s:?}: give p,r or p,r,1-h or p,r,1-h,1-k (comma-separated probabilities)"
        ));
    }
    let names = ["p", "r", "1-h", "1-k"];
    let mut v = [0.0, 0.0, 1.0, 0.0];
    for (i, part) in parts.iter().enumerate() {
        v[i] = prob(part, names[i])?;
    }
    if v[1] == 0.0 && v[0] > 0.0 {
        return Err(format!(
            "{s:?}: r = 0 means the bad state is never left; use r > 0"
        ));
    }
    Ok(Loss::GilbertElliott {
        p: v[0],
        r: v[1],
        one_minus_h: v[2],
        one_minus_k: v[3],
    })
}

fn aqm(s: &str) -> Result<Aqm, String> {
    match s.to_ascii_lowercase().as_str() {
        "droptail" | "drop-tail" | "drop_tail" => Ok(Aqm::DropTail),
        "codel" => Ok(Aqm::codel()),
        _ => Err(format!("{s:?}: use `droptail` or `codel`")),
    }
}

/// The flag that sets a field of the link configuration, for error messages.
fn flag_of(field: &str, burst: bool) -> &'static str {
    match field {
        f if f.starts_with("loss") => {
            if burst {
                "--loss-burst"
            } else {
                "--loss"
            }
        }
        f if f.starts_with("cross") => "--cross-traffic",
        f if f.starts_with("jitter") => "--jitter",
        "reorder.hold" => "--reorder-hold",
        f if f.starts_with("reorder") => "--reorder",
        "duplicate" => "--duplicate",
        "bottleneck.queue_bytes" => "--queue",
        f if f.starts_with("bottleneck.aqm") => "--aqm",
        f if f.starts_with("bottleneck") => "--rate",
        "mtu" => "--mtu",
        _ => "--rtt",
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

/// One direction's link without a preset: half the RTT, the bottleneck.
fn plain_direction(rtt: Nanos, rate_bps: u64, queue_bytes: u64, mtu: u32) -> LinkConfig {
    LinkConfig {
        mtu,
        bottleneck: Some(Bottleneck {
            rate_bps,
            queue_bytes,
            overhead_per_frame: 0,
            aqm: Aqm::DropTail,
        }),
        delay: Nanos(rtt.as_nanos() / 2),
        ..LinkConfig::default()
    }
}

/// The impairment flags on top of one direction's base link (plain or compiled from a topology).
fn impair(a: &EmulateArgs, seed: u64, base: LinkConfig) -> LinkConfig {
    let mut c = base;
    c.seed = seed;
    match (a.loss_burst, a.loss) {
        (Some(ge), _) => c.loss = ge,
        (None, Some(p)) if p > 0.0 => c.loss = Loss::Bernoulli { p },
        (None, Some(_)) => c.loss = Loss::None,
        (None, None) => {}
    }
    if let Some(b) = c.bottleneck.as_mut() {
        b.aqm = a.aqm;
    }
    c.cross = a.cross_traffic.map(|cbr_bps| CrossTraffic {
        cbr_bps,
        on_off: None,
    });
    c.jitter = a.jitter.map_or(Jitter::None, |max| Jitter::Uniform { max });
    c.jitter_reorders = a.jitter_reorders;
    c.reorder = a.reorder.map(|probability| Reorder {
        probability,
        hold: a.reorder_hold,
    });
    c.duplicate = a.duplicate;
    c
}

fn loss_text(l: Loss) -> String {
    match l {
        Loss::None => "0".into(),
        Loss::Bernoulli { p } => p.to_string(),
        Loss::GilbertElliott { .. } => "burst".into(),
    }
}

/// One line describing the impairments beyond delay and rate, if any.
fn impairments(a: &EmulateArgs) -> String {
    let mut out = Vec::new();
    if let Some(Loss::GilbertElliott {
        p,
        r,
        one_minus_h,
        one_minus_k,
    }) = a.loss_burst
    {
        out.push(format!(
            "burst loss p={p} r={r} 1-h={one_minus_h} 1-k={one_minus_k}"
        ));
    }
    if let Some(j) = a.jitter {
        out.push(format!(
            "jitter up to {}{}",
            fmt_duration(j),
            if a.jitter_reorders {
                " (may reorder)"
            } else {
                ""
            }
        ));
    }
    if let Some(p) = a.reorder {
        out.push(format!("reorder {p} hold {}", fmt_duration(a.reorder_hold)));
    }
    if a.duplicate > 0.0 {
        out.push(format!("duplicate {}", a.duplicate));
    }
    if matches!(a.aqm, Aqm::Codel { .. }) {
        out.push("AQM CoDel".into());
    }
    if let Some(c) = a.cross_traffic {
        out.push(format!("cross traffic {}", fmt_rate(c)));
    }
    if a.hops > 0 {
        out.push(format!("{} router hops", a.hops));
    }
    if a.host_defaults {
        out.push("kernel-default TCP buffers".into());
    }
    if out.is_empty() {
        String::new()
    } else {
        format!(", {}", out.join(", "))
    }
}

/// The testbed's configuration and the path's one-line description, from the flags and PRESET|FILE.
fn configure(a: &EmulateArgs) -> Result<(TestbedConfig, String), Refusal> {
    let (ab, ba, mtu, hops, what) = match &a.path {
        Some(spec) => {
            let overrides = overrides(a)?;
            let c = path::compile(spec, &overrides).map_err(|e| Refusal::Usage(e.0))?;
            let what = format!(
                "{} ({}, {} router hops), ",
                c.name,
                longhaul_units::fmt_km(c.distance_km),
                c.router_hops()
            );
            let hops = path::emu_hops(&c);
            (c.forward, c.reverse, c.mtu, hops, what)
        }
        None => {
            let rtt = a.rtt.unwrap_or(Nanos::from_millis(40));
            let rate = a.rate.unwrap_or(1_000_000_000);
            let mtu = a.mtu.unwrap_or(1500);
            let queue_bytes = match a.queue.unwrap_or(QueueSize::Auto) {
                QueueSize::Auto => queue_for_bdp(rate, rtt, 1.0, 4 * u64::from(mtu)),
                QueueSize::Bytes(b) => b,
            };
            if queue_bytes < u64::from(mtu) {
                return Err(Refusal::Failed(format!(
                    "--queue {queue_bytes} B is smaller than one MTU ({mtu} B); use at least --queue {mtu}"
                )));
            }
            if a.hops > MAX_HOPS {
                return Err(Refusal::Failed(format!(
                    "--hops {}: at most {MAX_HOPS} router hops",
                    a.hops
                )));
            }
            let d = plain_direction(rtt, rate, queue_bytes, mtu);
            let hops = evenly_spaced_hops(a.hops, Nanos(rtt.as_nanos() / 2));
            (d.clone(), d, mtu, hops, String::new())
        }
    };
    if hops.len() > MAX_HOPS {
        return Err(Refusal::Failed(format!(
            "{} router hops; the emulator supports at most {MAX_HOPS}",
            hops.len()
        )));
    }
    let cfg = TestbedConfig {
        tag: None,
        mtu,
        a_to_b: impair(a, a.seed, ab),
        b_to_a: impair(a, a.seed.wrapping_add(1), ba),
        realtime: a.realtime.then_some(50),
        hops,
        host_tcp_defaults: a.host_defaults,
    };
    for d in [&cfg.a_to_b, &cfg.b_to_a] {
        if let Err(e) = d.validate() {
            return Err(Refusal::Failed(format!(
                "{}: {}",
                flag_of(e.field, a.loss_burst.is_some()),
                e
            )));
        }
    }
    Ok((cfg, what))
}

/// Why `longhaul emulate` refuses to start: bad usage (exit code 2) or a refused value (1).
enum Refusal {
    Usage(String),
    Failed(String),
}

/// `--rtt/--rate/--loss/--mtu/--queue` as topology overrides (`--queue auto` keeps the file's).
fn overrides(a: &EmulateArgs) -> Result<Overrides, Refusal> {
    Ok(Overrides {
        rtt: a.rtt,
        rate: a.rate,
        loss: a.loss,
        mtu: a.mtu,
        queue: match a.queue {
            Some(QueueSize::Bytes(b)) => Some(b),
            Some(QueueSize::Auto) | None => None,
        },
    })
}

pub(crate) fn run(a: &EmulateArgs) -> anyhow::Result<ExitCode> {
    crate::init_logging("warn");
    if a.list_presets {
        return match path::list(a.json) {
            Ok(text) => {
                print!("{text}");
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => bail!("{}", e.0),
        };
    }
    if a.describe {
        let spec = a.path.as_deref().unwrap_or_default();
        let shown =
            overrides(a).and_then(|o| path::show(spec, &o).map_err(|e| Refusal::Usage(e.0)));
        return match shown {
            Ok(text) => {
                print!("{text}");
                Ok(ExitCode::SUCCESS)
            }
            Err(Refusal::Usage(m)) => {
                eprintln!("longhaul: error: {m}");
                Ok(ExitCode::from(2))
            }
            Err(Refusal::Failed(m)) => bail!("{m}"),
        };
    }
    let (cfg, what) = match configure(a) {
        Ok(c) => c,
        Err(Refusal::Usage(m)) => {
            eprintln!("longhaul: error: {m}");
            return Ok(ExitCode::from(2));
        }
        Err(Refusal::Failed(m)) => bail!("{m}"),
    };
    let rtt = Nanos(cfg.a_to_b.delay.as_nanos() + cfg.b_to_a.delay.as_nanos());
    let (rate_bps, queue_bytes) = cfg
        .a_to_b
        .bottleneck
        .map_or((0, 0), |b| (b.rate_bps, b.queue_bytes));
    let (mtu, loss) = (cfg.mtu, loss_text(cfg.a_to_b.loss));
    // Caught from here on: a signal stops CMD and tears the testbed down.
    let term = Termination::install().context("cannot install signal handlers")?;
    let bed = Testbed::up(cfg).context("cannot bring up the emulated path")?;
    eprintln!(
        "emulate: {} (10.201.0.1, {HOST_A_V6}) <-> {} ({HOST_B_V4}, {HOST_B_V6}): {}RTT {}, rate {}, \
queue {}, loss {}, MTU {}, seed {}, TCP buffers up to {}{}",
        bed.host_a(),
        bed.host_b(),
        what,
        fmt_duration(rtt),
        fmt_rate(rate_bps),
        fmt_size(queue_bytes),
        loss,
        mtu,
        a.seed,
        fmt_size(bed.tcp_buffer_max()),
        impairments(a)
    );

    // On an error return `bed` is dropped, which deletes the namespaces.
    let mut server = None;
    let mut b_cmd = None;
    let mut status = None;
    if term.received().is_none() && !a.no_server {
        server = Some(start_server(bed.host_b())?);
    }
    if term.received().is_none()
        && let Some(cmd) = &a.b_cmd
    {
        // Its own process group, so that the shell's children can be stopped with it.
        b_cmd = Some(
            Command::new("ip")
                .args(["netns", "exec", bed.host_b(), "sh", "-c", cmd])
                .env("LH_PEER", "10.201.0.1")
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
    let report = bed.down();
    print_report(&report, a.json);
    if let Some(sig) = term.received() {
        eprintln!("emulate: stopped by signal {sig}; testbed torn down");
        return Ok(ExitCode::from(u8::try_from(128 + sig).unwrap_or(1)));
    }
    let (status, _) = status.context("CMD did not run")??;
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
{} duplicates, {} reordered, {} splits, {} unparseable, {} hop time-exceeded, {} hop drops; lateness p50 {} p99 {} max {} ({} writes); TUN tx drops {}",
        d.name,
        l.records,
        l.segments,
        l.delivered,
        fmt_size(l.delivered_bytes),
        l.drop_queue,
        l.drop_random,
        l.drop_burst,
        l.drop_aqm,
        l.duplicates,
        l.reordered,
        d.splits,
        d.unparseable,
        d.hop_time_exceeded,
        d.hop_drops,
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
        assert_eq!(
            loss_burst("1%,30%").unwrap(),
            Loss::GilbertElliott {
                p: 0.01,
                r: 0.3,
                one_minus_h: 1.0,
                one_minus_k: 0.0
            }
        );
        assert!(loss_burst("0.01").is_err());
        assert!(loss_burst("0.01,0").is_err());
        assert!(loss_burst("0.01,0.3,2").unwrap_err().contains("1-h"));
        assert_eq!(aqm("CoDel").unwrap(), Aqm::codel());
        assert!(aqm("red").is_err());
        assert_eq!(flag_of("reorder.hold", false), "--reorder-hold");
        assert_eq!(flag_of("loss.p", true), "--loss-burst");
        assert_eq!(flag_of("cross.cbr_bps", false), "--cross-traffic");
    }
}
