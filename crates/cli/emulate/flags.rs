//! The path flags shared by `longhaul emulate -- CMD` and `longhaul emulate up`: the path
//! (`PRESET|FILE`, `--rtt`, `--rate`, ...), its impairments, and how the emulator runs (capture,
//! priority, pinning, fidelity threshold); turned into a `TestbedConfig` by [`configure`].

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use longhaul_emu::link::{
    Aqm, Bottleneck, CrossTraffic, Jitter, LinkConfig, Loss, OnOff, Reorder, queue_for_bdp,
};
use longhaul_emu::{MAX_HOPS, TestbedConfig, evenly_spaced_hops};
use longhaul_topology::Overrides;
use longhaul_units::{Nanos, fmt_duration, fmt_rate, fmt_size, parse_size};

use super::path;
use crate::args::{duration, rate};

/// Flags that define the path and how it is emulated.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct PathArgs {
    /// The path: a preset name (see `longhaul emulate presets`) or a topology file (TOML). Without
    /// it: --rtt, --rate and --hops.
    #[arg(value_name = "PRESET|FILE")]
    pub(crate) path: Option<String>,
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
    /// Queue discipline of the bottleneck: `droptail` or `codel`.
    #[arg(long, default_value = "droptail", value_parser = aqm)]
    aqm: Aqm,
    /// CoDel's target standing delay (with --aqm codel; RFC 8289's default).
    #[arg(long, default_value = "5ms", value_parser = duration)]
    codel_target: Nanos,
    /// CoDel's interval, about one worst-case RTT (with --aqm codel).
    #[arg(long, default_value = "100ms", value_parser = duration)]
    codel_interval: Nanos,
    /// Constant-bit-rate cross traffic occupying the bottleneck in each direction (no packets are
    /// materialised), e.g. 200M; must be below --rate.
    #[arg(long, value_name = "RATE", value_parser = rate)]
    cross_traffic: Option<u64>,
    /// On/off cross traffic on the bottleneck in each direction: RATE while on, for ON, then off for
    /// OFF, repeating from the start, e.g. 800M,2s,10s (adds to --cross-traffic).
    #[arg(long, value_name = "RATE,ON,OFF", value_parser = on_off)]
    cross_on_off: Option<OnOff>,
    /// Draw the on and off periods of --cross-on-off from exponential distributions with those means
    /// (seeded) instead of fixed lengths.
    #[arg(long, requires = "cross_on_off")]
    cross_exponential: bool,
    /// Router hops: N routers evenly spaced along the path (hop1..hopN at 10.201.1.1.. and
    /// fd00:4c48:1::1..), each decrementing TTL / hop limit and answering ICMP time exceeded.
    #[arg(long, default_value_t = 0, value_name = "N", conflicts_with = "path")]
    hops: usize,
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
    pub(crate) host_defaults: bool,
    /// When the path needs more of the kernel's TCP memory (both ends' buffers) than
    /// net.ipv4.tcp_mem allows: `raise` it for the run and restore it after, `check` (change
    /// nothing; refuse, naming the sysctl to raise) or `ignore` (run anyway; the report names a
    /// collapse) [default: raise]. Two-host paths.
    #[arg(long, value_enum, value_name = "POLICY")]
    pub(crate) host_memory: Option<HostMemory>,
    /// Seed of the link model's random streams (record it to replay a run).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Run the forwarder threads with real-time priority (SCHED_FIFO 50).
    #[arg(long)]
    realtime: bool,
    /// Pin the forwarding threads to these CPUs: on a path the a→b and b→a forwarders (CPU,CPU, or
    /// one CPU for both); on a network switch i to the i-th CPU listed (round robin).
    #[arg(long, value_name = "CPU,...", value_delimiter = ',', value_parser = cpu)]
    pub(crate) pin: Option<Vec<usize>>,
    /// Capture what each receiving host is handed into DIR/a_to_b.pcap and DIR/b_to_a.pcap; on a
    /// network, every link direction into DIR/LINK.a_to_b.pcap and DIR/LINK.b_to_a.pcap (what
    /// leaves the link, at the time it leaves). Read them with tcpdump -r, tshark or Wireshark.
    /// The files must not exist yet, and DIR must not be a symbolic link.
    #[arg(long, value_name = "DIR")]
    pub(crate) pcap: Option<PathBuf>,
    /// Bytes kept per captured packet (headers only by default).
    #[arg(long, default_value_t = longhaul_emu::capture::DEFAULT_SNAPLEN, value_name = "BYTES",
          value_parser = clap::value_parser!(u32).range(40..=262_144), requires = "pcap")]
    pub(crate) pcap_snaplen: u32,
    /// p99 lateness (release time actually achieved minus the scheduled one) above which the run is
    /// flagged NOT TRUSTWORTHY.
    #[arg(long, default_value = "1ms", value_parser = duration)]
    pub(crate) max_lateness: Nanos,
}

/// `--host-memory`: what to do when the kernel's TCP memory is short for the path.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HostMemory {
    /// Raise net.ipv4.tcp_mem for the run, restore it after.
    Raise,
    /// Change nothing; refuse with the sysctl to raise.
    Check,
    /// Change nothing; run anyway.
    Ignore,
}

impl From<HostMemory> for longhaul_emu::host_memory::Policy {
    fn from(h: HostMemory) -> Self {
        match h {
            HostMemory::Raise => Self::Raise,
            HostMemory::Check => Self::Check,
            HostMemory::Ignore => Self::Ignore,
        }
    }
}

pub(crate) fn loss(s: &str) -> Result<f64, String> {
    crate::args::probability(s, "loss")
}

pub(crate) fn corrupt(s: &str) -> Result<f64, String> {
    crate::args::probability(s, "corrupt")
}

fn probability(what: &'static str) -> impl Fn(&str) -> Result<f64, String> + Clone {
    move |s| crate::args::probability(s, what)
}

pub(crate) fn loss_burst(s: &str) -> Result<Loss, String> {
    let parts: Vec<&str> = s.split(',').collect();
    if !(2..=4).contains(&parts.len()) {
        return Err(format!(
            "{s:?}: give p,r or p,r,1-h or p,r,1-h,1-k (comma-separated probabilities)"
        ));
    }
    let names = ["p", "r", "1-h", "1-k"];
    let mut v = [0.0, 0.0, 1.0, 0.0];
    for (i, part) in parts.iter().enumerate() {
        v[i] = crate::args::probability(part, names[i])?;
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

fn on_off(s: &str) -> Result<OnOff, String> {
    let parts: Vec<&str> = s.split(',').collect();
    let [r, on, off] = parts.as_slice() else {
        return Err(format!("{s:?}: give RATE,ON,OFF, e.g. 800M,2s,10s"));
    };
    let (on, off) = (duration(on)?, duration(off)?);
    if on == Nanos::ZERO {
        return Err(format!("{s:?}: the on period must be > 0"));
    }
    Ok(OnOff {
        rate_bps: rate(r)?,
        on,
        off,
        exponential: false,
    })
}

/// One CPU of `--pin`: an online one.
pub(crate) fn cpu(s: &str) -> Result<usize, String> {
    let n = longhaul_sys::online_cpus();
    match s.trim().parse::<usize>() {
        Ok(c) if c < n => Ok(c),
        _ => Err(format!(
            "{s:?} is not an online CPU (this machine has CPUs 0..{})",
            n - 1
        )),
    }
}

/// The two forwarders' CPUs of a path from `--pin` (one CPU serves both).
fn path_cpus(pin: &[usize]) -> Result<[usize; 2], Refusal> {
    match *pin {
        [x] => Ok([x, x]),
        [x, y] => Ok([x, y]),
        _ => Err(Refusal::Usage(format!(
            "--pin {}: a two-host path has two forwarders; give CPU,CPU (a→b, b→a) or one CPU \
for both",
            pin.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ))),
    }
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
        f if f.starts_with("cross.on_off") => "--cross-on-off",
        f if f.starts_with("cross") => "--cross-traffic",
        f if f.starts_with("jitter") => "--jitter",
        "reorder.hold" => "--reorder-hold",
        f if f.starts_with("reorder") => "--reorder",
        "duplicate" => "--duplicate",
        "bottleneck.queue_bytes" => "--queue",
        f if f.starts_with("bottleneck.aqm") => "--aqm/--codel-target/--codel-interval",
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

impl PathArgs {
    /// The impairment flags on top of one direction's base link (plain or compiled from a topology).
    fn impair(&self, seed: u64, base: LinkConfig) -> LinkConfig {
        let mut c = base;
        c.seed = seed;
        match (self.loss_burst, self.loss) {
            (Some(ge), _) => c.loss = ge,
            (None, Some(p)) if p > 0.0 => c.loss = Loss::Bernoulli { p },
            (None, Some(_)) => c.loss = Loss::None,
            (None, None) => {}
        }
        if let Some(b) = c.bottleneck.as_mut() {
            b.aqm = match self.aqm {
                Aqm::Codel { .. } => Aqm::Codel {
                    target: self.codel_target,
                    interval: self.codel_interval,
                },
                other => other,
            };
        }
        if self.cross_traffic.is_some() || self.cross_on_off.is_some() {
            c.cross = Some(CrossTraffic {
                cbr_bps: self.cross_traffic.unwrap_or(0),
                on_off: self.cross_on_off.map(|o| OnOff {
                    exponential: self.cross_exponential,
                    ..o
                }),
            });
        }
        c.jitter = self
            .jitter
            .map_or(Jitter::None, |max| Jitter::Uniform { max });
        c.jitter_reorders = self.jitter_reorders;
        c.reorder = self.reorder.map(|probability| Reorder {
            probability,
            hold: self.reorder_hold,
        });
        c.duplicate = self.duplicate;
        c
    }

    /// One line describing the impairments beyond delay and rate, if any.
    fn impairments(&self) -> String {
        let mut out = Vec::new();
        if let Some(Loss::GilbertElliott {
            p,
            r,
            one_minus_h,
            one_minus_k,
        }) = self.loss_burst
        {
            out.push(format!(
                "burst loss p={p} r={r} 1-h={one_minus_h} 1-k={one_minus_k}"
            ));
        }
        if let Some(j) = self.jitter {
            let reorders = if self.jitter_reorders {
                " (may reorder)"
            } else {
                ""
            };
            out.push(format!("jitter up to {}{reorders}", fmt_duration(j)));
        }
        if let Some(p) = self.reorder {
            out.push(format!(
                "reorder {p} hold {}",
                fmt_duration(self.reorder_hold)
            ));
        }
        if self.duplicate > 0.0 {
            out.push(format!("duplicate {}", self.duplicate));
        }
        if matches!(self.aqm, Aqm::Codel { .. }) {
            out.push(format!(
                "AQM CoDel target {} interval {}",
                fmt_duration(self.codel_target),
                fmt_duration(self.codel_interval)
            ));
        }
        if let Some(c) = self.cross_traffic {
            out.push(format!("cross traffic {}", fmt_rate(c)));
        }
        if let Some(o) = self.cross_on_off {
            out.push(format!(
                "on/off cross traffic {} for {} every {}{}",
                fmt_rate(o.rate_bps),
                fmt_duration(o.on),
                fmt_duration(Nanos(o.on.as_nanos() + o.off.as_nanos())),
                if self.cross_exponential {
                    " (exponential)"
                } else {
                    ""
                }
            ));
        }
        if self.hops > 0 {
            out.push(format!("{} router hops", self.hops));
        }
        if self.host_defaults {
            out.push("kernel-default TCP buffers".into());
        }
        if let Some(d) = &self.pcap {
            out.push(format!("capturing to {}", d.display()));
        }
        if out.is_empty() {
            String::new()
        } else {
            format!(", {}", out.join(", "))
        }
    }

    /// The path flags given that a network file does not take (its links carry their own rates,
    /// delays and impairments), as the user spelled them.
    pub(crate) fn path_only_flags(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut given = |on: bool, flag: &'static str| {
            if on {
                out.push(flag);
            }
        };
        given(self.rtt.is_some(), "--rtt");
        given(self.rate.is_some(), "--rate");
        given(self.loss.is_some(), "--loss");
        given(self.loss_burst.is_some(), "--loss-burst");
        given(self.jitter.is_some(), "--jitter");
        given(self.reorder.is_some(), "--reorder");
        given(self.duplicate > 0.0, "--duplicate");
        given(self.aqm != Aqm::DropTail, "--aqm");
        given(self.cross_traffic.is_some(), "--cross-traffic");
        given(self.cross_on_off.is_some(), "--cross-on-off");
        given(self.hops > 0, "--hops");
        given(self.mtu.is_some(), "--mtu");
        given(self.queue.is_some(), "--queue");
        given(self.host_memory.is_some(), "--host-memory");
        out
    }

    /// Whether the switches should run with real-time priority.
    pub(crate) fn realtime(&self) -> bool {
        self.realtime
    }

    /// `--rtt/--rate/--loss/--mtu/--queue` as topology overrides (`--queue auto` keeps the file's).
    pub(crate) fn overrides(&self) -> Overrides {
        Overrides {
            rtt: self.rtt,
            rate: self.rate,
            loss: self.loss,
            mtu: self.mtu,
            queue: match self.queue {
                Some(QueueSize::Bytes(b)) => Some(b),
                Some(QueueSize::Auto) | None => None,
            },
        }
    }
}

/// Why the emulator refuses to start: bad usage (exit code 2) or a refused value (1).
pub(crate) enum Refusal {
    Usage(String),
    Failed(String),
}

/// Prints a refusal: bad usage exits with 2, a refused value with 1.
pub(crate) fn refuse(r: Refusal) -> anyhow::Result<ExitCode> {
    match r {
        Refusal::Usage(m) => {
            eprintln!("longhaul: error: {m}");
            Ok(ExitCode::from(2))
        }
        Refusal::Failed(m) => bail!("{m}"),
    }
}

/// CMD's exit code as ours: its code, or 128 + the signal that ended it.
pub(crate) fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// What the testbed emulates, for the one-line description, the status and the state file.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct PathSummary {
    /// The preset or file, if any.
    pub(crate) preset: Option<String>,
    pub(crate) rtt_ns: u64,
    pub(crate) rate_bps: u64,
    pub(crate) queue_bytes: u64,
    pub(crate) mtu: u32,
    pub(crate) loss: String,
    pub(crate) seed: u64,
    pub(crate) router_hops: usize,
    /// Everything beyond delay and rate, as text ("" if nothing).
    pub(crate) impairments: String,
    /// "NAME (DISTANCE, N router hops), " for a preset or file, else "".
    #[serde(skip)]
    pub(crate) what: String,
}

impl PathSummary {
    /// "RTT .., rate .., queue .., loss .., MTU .., seed ..", then the impairments.
    pub(crate) fn line(&self) -> String {
        format!(
            "{}RTT {}, rate {}, queue {}, loss {}, MTU {}, seed {}",
            self.what,
            fmt_duration(Nanos(self.rtt_ns)),
            fmt_rate(self.rate_bps),
            fmt_size(self.queue_bytes),
            self.loss,
            self.mtu,
            self.seed
        )
    }
}

fn loss_text(l: Loss) -> String {
    match l {
        Loss::None => "0".into(),
        Loss::Bernoulli { p } => p.to_string(),
        Loss::GilbertElliott { .. } => "burst".into(),
    }
}

/// The testbed's configuration and a summary of the path, from the flags and PRESET|FILE.
pub(crate) fn configure(
    a: &PathArgs,
    tag: Option<String>,
) -> Result<(TestbedConfig, PathSummary), Refusal> {
    let (ab, ba, mtu, hops, what) = match &a.path {
        Some(spec) => {
            let c = path::compile(spec, &a.overrides()).map_err(|e| Refusal::Usage(e.0))?;
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
        tag,
        mtu,
        a_to_b: a.impair(a.seed, ab),
        b_to_a: a.impair(a.seed.wrapping_add(1), ba),
        realtime: a.realtime.then_some(50),
        cpus: a.pin.as_deref().map(path_cpus).transpose()?,
        pcap: a.pcap.clone().map(|d| (d, a.pcap_snaplen)),
        hops,
        host_tcp_defaults: a.host_defaults,
        host_memory: a.host_memory.unwrap_or(HostMemory::Raise).into(),
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
    let (rate_bps, queue_bytes) = cfg
        .a_to_b
        .bottleneck
        .map_or((0, 0), |b| (b.rate_bps, b.queue_bytes));
    let summary = PathSummary {
        preset: a.path.clone(),
        rtt_ns: cfg.a_to_b.delay.as_nanos() + cfg.b_to_a.delay.as_nanos(),
        rate_bps,
        queue_bytes,
        mtu: cfg.mtu,
        loss: loss_text(cfg.a_to_b.loss),
        seed: a.seed,
        router_hops: cfg.hops.len(),
        impairments: a.impairments(),
        what,
    };
    Ok((cfg, summary))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_loss_queue_on_off_and_cpus() {
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
        assert_eq!(flag_of("cross.on_off.rate_bps", false), "--cross-on-off");
        let o = on_off("800M,2s,10s").unwrap();
        assert_eq!(
            (o.rate_bps, o.on, o.off),
            (800_000_000, Nanos::from_secs(2), Nanos::from_secs(10))
        );
        assert!(on_off("800M,0s,1s").is_err());
        assert!(on_off("800M,2s").is_err());
        assert!(on_off("0,2s,1s").is_err());
        assert_eq!(path_cpus(&[0]).ok(), Some([0, 0]));
        assert_eq!(path_cpus(&[1, 0]).ok(), Some([1, 0]));
        assert!(path_cpus(&[0, 1, 0]).is_err());
        assert!(cpu("100000").unwrap_err().contains("not an online CPU"));
    }
}
