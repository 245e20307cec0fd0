//! `longhaul test`: flags (iperf3's where users know them), and the three output forms: human text,
//! `--json` (one iperf3-compatible document at the end) and `--json-stream` (one event per line, live).

use std::io::Write;
use std::net::IpAddr;
use std::process::ExitCode;

use longhaul_engine::{
    ClientConfig, DEFAULT_PORT, EngineError, Observer, RemoteTest, Server, ServerConfig,
    ServerProtocol, TestTo, run_remote_test, run_test,
};
use longhaul_proto::auto_pace::TrainTiming;
use longhaul_proto::msg::{AUTO_DATAGRAM_LEN, MAX_BURST, MAX_OMIT_NS, MAX_WRITE_LEN, UdpParams};
use longhaul_proto::report::{
    End, IntervalReport, LsrEntry, Report, Start, StreamEntry, SumEntry, UdpEntry, UdpReceived,
};
use longhaul_proto::{Direction, EndCondition, TestParams, WindowRequest};
use longhaul_units::models::{LSR_MAX_KM, fmt_lsr, lsr_capped_km, lsr_metric_from_rate};
use longhaul_units::{
    Nanos, ParseError, TimeUnit, fmt_rate_iperf, fmt_size_iperf, parse_distance, parse_duration,
    parse_size,
};

use crate::args;
use crate::interrupt::Interrupts;
use crate::iperf3_flags::{Iperf3Flags, fmt_rate_in};

/// Flags of `longhaul test`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Windows are sized automatically (-w auto): the RTT measured on the control \
connection times the target rate (--rate) gives the bandwidth-delay product, and both ends size their \
buffers to at least 2 x BDP per stream, using SO_*BUFFORCE as root. The report states requested vs \
granted vs cap and the rate ceiling that implies, with the sysctl that lifts a binding cap.\n\n\
Sizes use K/M/G = x1024 (-l 128K, -w 64M, -n 10G); rates use k/m/g = x1000 (--rate 10G, --pace 2.5g).\n\n\
Examples:\n  longhaul test dtn.example.org -P 4 -t 60\n  longhaul test ::1 -6 -R -C cubic --json\n  \
longhaul test 10.0.0.2 --pace 9G -P 8 --distance-km 11539\n  \
longhaul test dtn1.example.org --to dtn2.example.org --key ops.key -t 30   (third party)",
    mut_arg("json", |a| a.help("Print one iperf3-compatible JSON document at the end"))
)]
pub(crate) struct TestArgs {
    /// Server to test against; omit for a self-test against an in-process server on loopback.
    host: Option<String>,
    /// The server, as iperf3 -c takes it (the same as HOST).
    #[arg(
        short = 'c',
        long = "client",
        value_name = "HOST",
        conflicts_with = "host"
    )]
    client: Option<String>,
    /// Server port.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    port: u16,
    #[command(flatten)]
    streams: args::Streams,
    /// Test duration: seconds, or with a unit (10, 90s, 1500ms).
    #[arg(short = 't', long = "time", default_value = "10", value_parser = args::seconds, conflicts_with = "bytes")]
    time: Nanos,
    /// Omit the first SECS (e.g. slow start) from the totals, as iperf3 -O: the test runs SECS + -t,
    /// intervals in it are shown "(omitted)"; at most 600 s; not with -n.
    #[arg(short = 'O', long, value_name = "SECS", default_value = "0", value_parser = omit, conflicts_with = "bytes")]
    omit: Nanos,
    /// Send this many bytes per direction instead of running for a time (e.g. 10G).
    #[arg(short = 'n', long, value_parser = size)]
    bytes: Option<u64>,
    /// Seconds between interval reports; 0 turns them off.
    #[arg(short, long, default_value = "1", value_parser = args::seconds)]
    interval: Nanos,
    /// Reverse: the server sends, the client receives.
    #[arg(short = 'R', long, conflicts_with = "bidir")]
    reverse: bool,
    /// Both directions at once, on separate connections.
    #[arg(long)]
    bidir: bool,
    #[command(flatten)]
    ip: args::IpFamily,
    /// Local address to bind.
    #[arg(short = 'B', long)]
    bind: Option<IpAddr>,
    /// Congestion control for both ends (reno, cubic, bbr, ...); verified and reported.
    #[arg(short = 'C', long = "congestion")]
    congestion: Option<String>,
    /// Bytes per write [default: 1M; large writes halve the per-byte cost, iperf3 uses 128K]. With -u,
    /// the datagram payload [default: the control connection's MSS, as iperf3].
    #[arg(short = 'l', long = "length", value_parser = write_len)]
    length: Option<u32>,
    /// UDP test: paced datagrams (iperf3's header), reporting loss, order, duplicates, jitter and,
    /// with synchronised clocks, one-way delay (docs/udp.md).
    #[arg(short = 'u', long)]
    udp: bool,
    /// Rate of each stream, as iperf3's -b: with -u the datagram payload rate [default: 1M], 0 for
    /// as fast as the host sends; RATE/N sends bursts of N datagrams. Without -u, paces each TCP
    /// stream (the same as --pace RATE x -P).
    #[arg(short = 'b', long, value_name = "RATE[/N]", value_parser = bitrate)]
    bitrate: Option<(u64, u32)>,
    /// 64-bit datagram counters (iperf3's --udp-counters-64bit), for more than 2^32 datagrams.
    #[arg(long, requires = "udp")]
    udp_counters_64bit: bool,
    /// No UDP segmentation or receive offload (GSO/GRO) on either end: one datagram per message,
    /// still many per system call; for paths or NICs that mishandle them, and to see what they save.
    #[arg(long, requires = "udp")]
    no_gso: bool,
    /// Search for the highest rate whose loss stays at or under --loss-threshold (RFC 2544's
    /// throughput), from -b x -P or --rate down, each trial a -t long UDP test; then jitter and
    /// delay at 50, 90 and 100 % of it.
    #[arg(long, requires = "udp")]
    find_rate: bool,
    /// With --find-rate: the loss a trial may have and pass, percent.
    #[arg(long, value_name = "PERCENT", default_value = "0", requires = "find_rate", value_parser = percent)]
    loss_threshold: f64,
    /// With --find-rate: stop when passing and failing rates are this close [default: 1 % of the
    /// upper rate].
    #[arg(long, value_name = "RATE", requires = "find_rate", value_parser = args::rate)]
    resolution: Option<u64>,
    /// Window per stream: "auto" (from RTT and --rate), or the receive window each receiver holds (e.g.
    /// 64M; the kernel is made to advertise exactly that, docs/test.md).
    #[arg(short = 'w', long, default_value = "auto", value_parser = window)]
    window: WindowRequest,
    /// Target rate of all streams together, for -w auto (e.g. 10G, 400M) [default: 10G]. With -u
    /// and without -b: the total UDP rate, split across the streams.
    #[arg(long, value_parser = args::rate)]
    rate: Option<u64>,
    /// Pace all sending streams together at this total rate, split evenly (SO_MAX_PACING_RATE); or
    /// "auto": find the bottleneck by packet trains to the server and hold the highest rate that
    /// builds no queue and loses nothing, adjusting as the path changes (docs/pacing.md).
    #[arg(long, value_name = "RATE|auto", value_parser = args::pace)]
    pace: Option<args::Pace>,
    /// The path carries nothing else (a reserved or emulated path): open at --pace RATE from the
    /// first round trip instead of slow start, with an initial window on a host route of this
    /// host's own to the server (root), buffers set before the handshake on both sides and pacing
    /// from the first packet; the route is removed afterwards (docs/pacing.md). The client must
    /// send (not -R or --bidir).
    #[arg(long, requires = "pace", conflicts_with_all = ["reverse", "bidir", "udp"])]
    dedicated: bool,
    /// Zero-copy send (sendfile; see docs/test.md for the measurement behind the choice).
    #[arg(short = 'Z', long)]
    zerocopy: bool,
    /// What carries the data: the kernel's TCP, or reliable, encrypted QUIC streams over UDP in
    /// user space, one connection per stream, with -C cubic (default), newreno, bbr or udt and windows
    /// sized from the path, needing no root (docs/transport.md).
    #[arg(long, value_enum, default_value = "tcp", conflicts_with_all = ["udp", "zerocopy", "dedicated"])]
    transport: args::TransportArg,
    #[command(flatten)]
    json: args::Json,
    /// Print one JSON event per line as the test runs (start, interval, end, error).
    #[arg(long, conflicts_with = "json")]
    json_stream: bool,
    /// Path distance in km: adds the Land Speed Record metric (bit·m/s) to the summary.
    #[arg(long, value_parser = distance)]
    distance_km: Option<f64>,
    /// Seconds to wait for the server at each step of the set-up.
    #[arg(long, default_value = "10", value_parser = args::seconds)]
    connect_timeout: Nanos,
    /// Third party: ask HOST (a `longhaul server --controllers FILE` that lists this controller's
    /// key) to run this test to the server TO; only the report comes back here (docs/fleet.md).
    #[arg(long, value_name = "TO", conflicts_with = "bind")]
    to: Option<String>,
    /// With --to: TO's port.
    #[arg(long, value_name = "PORT", default_value_t = DEFAULT_PORT, requires = "to")]
    to_port: u16,
    /// The key file to prove to a server that serves tests only to its key's holders (`server
    /// --require-key`). With --to: this controller's key [default: $LONGHAUL_KEY, else
    /// ~/.config/longhaul/key].
    #[arg(long, value_name = "FILE")]
    key: Option<std::path::PathBuf>,
    #[command(flatten)]
    encrypt: args::Encrypt,
    /// Speak iperf3's protocol (a stock iperf3 server, or a longhaul server's iperf3 port) [default:
    /// on port 5201, or when the server answers as iperf3 does].
    #[arg(long, conflicts_with_all = ["longhaul", "to"])]
    iperf3: bool,
    /// Speak longhaul's protocol only, even on port 5201.
    #[arg(long)]
    longhaul: bool,
    #[command(flatten)]
    iperf3_flags: Iperf3Flags,
}

fn omit(s: &str) -> Result<Nanos, String> {
    let d = parse_duration(s, TimeUnit::Secs).map_err(|e| e.to_string())?;
    if d.0 > MAX_OMIT_NS {
        return Err(format!(
            "omit period must be at most {} s",
            MAX_OMIT_NS / 1_000_000_000
        ));
    }
    Ok(d)
}

fn size(s: &str) -> Result<u64, ParseError> {
    parse_size(s)
}

fn write_len(s: &str) -> Result<u32, String> {
    let n = parse_size(s).map_err(|e| e.to_string())?;
    match u32::try_from(n) {
        Ok(n) if (1..=MAX_WRITE_LEN).contains(&n) => Ok(n),
        _ => Err(format!("write length must be 1 B to 64 MiB, got {n}")),
    }
}

fn percent(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p / 100.0),
        _ => Err(format!("{s:?} is not a percentage from 0 to 100")),
    }
}

/// iperf3's `-b RATE[/BURST]`: a rate (0: unlimited) and datagrams per burst (0: picked).
fn bitrate(s: &str) -> Result<(u64, u32), String> {
    let (rate, burst) = match s.split_once('/') {
        Some((r, b)) => {
            let n: u32 = b
                .parse()
                .map_err(|_| format!("burst {b:?} after '/' must be a number of datagrams"))?;
            if n == 0 || n > MAX_BURST {
                return Err(format!("burst must be 1..={MAX_BURST} datagrams, got {n}"));
            }
            (r, n)
        }
        None => (s, 0),
    };
    let rate = longhaul_units::parse_rate(rate).map_err(|e| e.to_string())?;
    Ok((rate, burst))
}

fn window(s: &str) -> Result<WindowRequest, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(WindowRequest::Auto);
    }
    match parse_size(s) {
        Ok(bytes) if bytes > 0 && bytes <= 1 << 31 => Ok(WindowRequest::Fixed { bytes }),
        Ok(bytes) => Err(format!("window must be 1 B to 2 GiB, got {bytes}")),
        Err(e) => Err(format!("{e}; or \"auto\"")),
    }
}

fn distance(s: &str) -> Result<f64, String> {
    match parse_distance(s) {
        Ok(km) if km > 0.0 && km.is_finite() => Ok(km),
        Ok(km) => Err(format!(
            "distance must be a positive number of km, got {km}"
        )),
        Err(e) => Err(e.to_string()),
    }
}

impl TestArgs {
    /// The server: HOST or `-c HOST`.
    fn server(&self) -> Option<&String> {
        self.host.as_ref().or(self.client.as_ref())
    }

    /// Whether the flags ask for encryption.
    pub(crate) fn encrypts(&self) -> bool {
        self.encrypt.encrypt
    }
}

/// `longhaul test` flags written in a file (a campaign pair's, a monitor test's `args`), parsed as
/// the command line parses them, for a test from `host`; the target, the key and encryption come
/// from the file and the command line, never from these flags.
pub(crate) fn file_flags(host: &str, words: &[String]) -> anyhow::Result<TestParams> {
    /// The flags alone, as `longhaul test` takes them.
    #[derive(clap::Parser, Debug)]
    #[command(name = "longhaul test", no_binary_name = true)]
    struct FileFlags {
        #[command(flatten)]
        test: TestArgs,
    }
    let words = std::iter::once(host).chain(words.iter().map(String::as_str));
    let args = <FileFlags as clap::Parser>::try_parse_from(words).map_err(|e| {
        let text = e.render().to_string();
        anyhow::anyhow!("{}", text.lines().next().unwrap_or("bad flags"))
    })?;
    anyhow::ensure!(
        args.test.to.is_none() && args.test.key.is_none(),
        "--to, --to-port and --key come from the file and the command line, not its args"
    );
    anyhow::ensure!(
        !args.test.encrypts(),
        "--encrypt comes from the command line, not a file's args"
    );
    anyhow::ensure!(
        args.test.pace != Some(args::Pace::Auto),
        "--pace auto runs from the command line only, not from a file's args"
    );
    if let Some(flag) = args.test.iperf3_flags.local_only() {
        anyhow::bail!(
            "{flag} shapes this host's output or process, not the test: give it on the command \
             line, not in a file's args"
        );
    }
    params(&args.test)
}

/// The target rate of a TCP test's window sizing when --rate is not given.
const DEFAULT_TARGET_BPS: u64 = 10_000_000_000;
/// A UDP stream's rate when neither -b nor --rate is given: iperf3's 1 Mbit/s.
const DEFAULT_UDP_BPS: u64 = 1_000_000;

/// The test parameters the flags ask for.
pub(crate) fn params(a: &TestArgs) -> anyhow::Result<TestParams> {
    let x = &a.iperf3_flags;
    let write_len = match (a.length, a.udp) {
        (Some(l), _) => l,
        (None, true) => AUTO_DATAGRAM_LEN,
        (None, false) => 1 << 20,
    };
    let end = match (a.bytes, x.blockcount) {
        (Some(bytes), _) => EndCondition::Bytes { bytes },
        (None, Some(blocks)) => {
            anyhow::ensure!(
                !a.udp || a.length.is_some(),
                "-k counts datagrams of -l bytes: with -u give -l too"
            );
            EndCondition::Bytes {
                bytes: blocks.saturating_mul(u64::from(write_len)),
            }
        }
        (None, None) => EndCondition::Time { ns: a.time.0 },
    };
    let streams = u64::from(a.streams.n);
    let udp = a.udp.then(|| UdpParams {
        rate_bps: match (a.bitrate, a.rate) {
            (Some((b, _)), _) => b,
            (None, Some(total)) => (total / streams).max(1),
            (None, None) => DEFAULT_UDP_BPS,
        },
        burst: a.bitrate.map_or(0, |(_, n)| n),
        counters_64bit: a.udp_counters_64bit,
        no_offload: a.no_gso,
    });
    // iperf3's -b and --fq-rate on a TCP test pace each stream at that rate (the lower, given
    // both, as the two pacers of iperf3 would).
    let per_stream = match (a.bitrate.map(|(b, _)| b).filter(|b| *b > 0), x.fq_rate) {
        _ if a.udp => {
            anyhow::ensure!(
                x.fq_rate.is_none(),
                "--fq-rate paces TCP streams; -u is paced by -b"
            );
            None
        }
        (Some(b), Some(f)) => Some(b.min(f)),
        (b, f) => b.or(f),
    };
    let pace = match (per_stream, a.pace.and_then(args::Pace::rate)) {
        (Some(_), Some(_)) => {
            anyhow::bail!(
                "-b/--fq-rate and --pace all pace a TCP test: give one (-b per stream, --pace total)"
            )
        }
        (Some(b), None) => Some(b.saturating_mul(streams)),
        (None, p) => p,
    };
    let target = match &udp {
        Some(u) if u.rate_bps > 0 => u.rate_bps.saturating_mul(streams),
        _ => a.rate.unwrap_or(DEFAULT_TARGET_BPS),
    };
    let p = TestParams {
        streams: a.streams.n,
        end,
        interval_ns: a.interval.0,
        direction: if a.bidir {
            Direction::Bidir
        } else if a.reverse {
            Direction::Reverse
        } else {
            Direction::Forward
        },
        congestion: a.congestion.clone(),
        window: a.window,
        target_rate_bps: target,
        pace_total_bps: pace,
        pace_auto: None,
        fast_start: a.dedicated,
        write_len,
        zerocopy: a.zerocopy,
        rtt_ns: 0,
        omit_ns: a.omit.0,
        udp,
        transport: a.transport.into(),
        sockets: x.sockets(),
    };
    p.validate_request()?;
    Ok(p)
}

pub(crate) fn run(a: &TestArgs) -> anyhow::Result<ExitCode> {
    let x = &a.iperf3_flags;
    crate::logging::to_stderr(match x.debug {
        None => "warn",
        Some(1) => "error",
        Some(2) => "warn",
        Some(3) => "info",
        Some(_) => "debug",
    });
    let params = params(a)?;
    x.pin()?;
    if a.pace == Some(args::Pace::Auto) {
        anyhow::ensure!(
            !a.udp && a.bitrate.is_none(),
            "--pace auto paces TCP streams: not with -u or -b"
        );
        anyhow::ensure!(
            a.transport == args::TransportArg::Tcp,
            "--pace auto governs TCP streams' pacing: with --transport udp give --pace RATE"
        );
        anyhow::ensure!(
            a.to.is_none(),
            "--pace auto runs from the host that sends, not through --to"
        );
    }
    anyhow::ensure!(
        !a.dedicated || params.pace_total_bps.is_some(),
        "--dedicated opens at a known rate: --pace RATE, not auto"
    );
    if a.find_rate {
        return find_rate(a, params);
    }
    anyhow::ensure!(
        a.to.is_none() || a.server().is_some(),
        "--to names the second server of a third-party test: give the first, HOST (or -c HOST)"
    );
    let mut out = Output::new(a)?;
    let ran = match &a.to {
        Some(to) => {
            let (host, port) = target(a)?;
            let interrupts = Interrupts::install()?;
            let cfg = RemoteTest {
                server: host,
                port,
                family: a.ip.family(),
                key: crate::transfer::load_key(a.key.as_deref())?,
                test: TestTo {
                    to: to.clone(),
                    port: a.to_port,
                    family: longhaul_engine::job::target_family(a.ip.family()),
                    params,
                    encrypt: a.encrypt.encrypt,
                },
                timeout: a.connect_timeout.to_duration(),
                encrypt: a.encrypt.config(),
                interrupt: Some(interrupts.asked()),
            };
            out.interrupts = Some(interrupts);
            run_remote_test(&cfg, &mut out)
        }
        None => {
            let interrupts = Interrupts::install()?;
            let cfg = client_config(a, params, Some(&interrupts))?;
            out.interrupts = Some(interrupts);
            run_test(&cfg, &mut out)
        }
    };
    match ran {
        Ok(mut report) => {
            if let Some(km) = a.distance_km {
                report.end.longhaul.lsr = Some(lsr(&report, km));
            }
            out.end(&report);
            if !report.end.longhaul.interrupted {
                return Ok(ExitCode::SUCCESS);
            }
            eprintln!(
                "longhaul: interrupted: the results cover the first {:.1} s of the test",
                report.end.sum_sent.seconds
            );
            Ok(out
                .interrupts
                .as_ref()
                .map_or(ExitCode::FAILURE, Interrupts::status))
        }
        Err(e @ EngineError::Interrupted(_)) => {
            out.error(&e.to_string());
            if out.mode == Mode::Human {
                eprintln!("longhaul: {e}");
            }
            Ok(out
                .interrupts
                .as_ref()
                .map_or(ExitCode::FAILURE, Interrupts::status))
        }
        Err(e) => {
            out.error(&e.to_string());
            // The human form prints the error in main; JSON forms already carry it.
            if out.mode == Mode::Human {
                return Err(e.into());
            }
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The server a test runs against: `a.host`, or without one, a server in this process on loopback
/// (the self-test).
fn target(a: &TestArgs) -> anyhow::Result<(String, u16)> {
    if let Some(h) = a.server() {
        return Ok((h.clone(), a.port));
    }
    let ip: IpAddr = if a.ip.ipv6 {
        "::1".parse()?
    } else {
        "127.0.0.1".parse()?
    };
    let server = Server::bind(ServerConfig {
        bind: Some(ip),
        port: 0,
        iperf3_port: None,
        ..Default::default()
    })?;
    let port = server.local_addr().port();
    std::thread::spawn(move || server.run());
    Ok((ip.to_string(), port))
}

/// The client configuration of a test from this host (not `--to`).
/// `interrupts`: SIGINT/SIGTERM end the running test with its results (else they end the process).
fn client_config(
    a: &TestArgs,
    params: TestParams,
    interrupts: Option<&Interrupts>,
) -> anyhow::Result<ClientConfig> {
    let (host, port) = target(a)?;
    Ok(ClientConfig {
        host,
        port,
        family: a.ip.family(),
        bind: a.bind,
        params,
        timeout: a.connect_timeout.to_duration(),
        start_at: None,
        encrypt: a.encrypt.config(),
        protocol: if a.iperf3 {
            ServerProtocol::Iperf3
        } else if a.longhaul {
            ServerProtocol::Longhaul
        } else {
            ServerProtocol::Auto
        },
        key: a
            .key
            .as_deref()
            .map(|k| crate::transfer::load_key(Some(k)))
            .transpose()?,
        pace_auto: a.pace == Some(args::Pace::Auto),
        interrupt: interrupts.map(Interrupts::asked),
        data_port: a.iperf3_flags.cport,
    })
}

/// `--find-rate`: the search, each trial as it ends, and the result (text, or one JSON document).
fn find_rate(a: &TestArgs, params: TestParams) -> anyhow::Result<ExitCode> {
    use longhaul_engine::find_rate::{FindRate, TrialResult};
    use longhaul_proto::rate_search::OFFERED_MIN;
    let streams = u64::from(params.streams);
    let upper = match (a.bitrate, a.rate) {
        (Some((b, _)), _) if b > 0 => b.saturating_mul(streams),
        (_, Some(r)) => r,
        _ => anyhow::bail!(
            "--find-rate needs the highest rate to try: -b RATE (per stream) or --rate RATE (all)"
        ),
    };
    anyhow::ensure!(a.to.is_none(), "--find-rate runs from this host: drop --to");
    // A signal ends the search after the trials that finished, with the best rate so far.
    let interrupts = Interrupts::install()?;
    interrupts.running();
    let cfg = client_config(a, params, Some(&interrupts))?;
    let json = a.json.json;
    let mut show = |t: &TrialResult| {
        if !json {
            println!(
                "trial {:>15} payload ({:>15} IP): {}{}/{} lost ({:.4}%), jitter {:.3} ms{}",
                fmt_rate_iperf(t.rate_bps),
                fmt_rate_iperf(t.ip_rate_bps),
                if t.offered_bps < OFFERED_MIN * t.rate_bps as f64 {
                    format!(
                        "NOT OFFERED (the sender reached {}), ",
                        fmt_rate_iperf(t.offered_bps as u64)
                    )
                } else {
                    String::new()
                },
                t.lost,
                t.sent,
                100.0 * t.loss,
                t.jitter_ms,
                match &t.delay_variation {
                    Some(v) => format!(
                        ", delay variation p50/p99 {:.3}/{:.3} ms",
                        v.p50_ms, v.p99_ms
                    ),
                    None => String::new(),
                }
            );
        }
    };
    let report = longhaul_engine::find_rate::find_rate(
        &cfg,
        &FindRate {
            upper_bps: upper,
            threshold: a.loss_threshold,
            resolution_bps: a.resolution.unwrap_or(upper / 100).max(1),
            max_trials: 32,
        },
        &mut show,
    )?;
    let ended = if report.interrupted {
        eprintln!(
            "longhaul: interrupted: the search stopped after {} trials; the rate is the highest \
             that passed so far",
            report.trials.len()
        );
        interrupts.status()
    } else {
        ExitCode::SUCCESS
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serialises")
        );
        return Ok(ended);
    }
    if report.rate_bps == 0 {
        println!(
            "no rate up to {} kept loss at or under {}%",
            fmt_rate_iperf(upper),
            100.0 * a.loss_threshold
        );
        return Ok(if report.interrupted {
            ended
        } else {
            ExitCode::FAILURE
        });
    }
    println!(
        "highest rate with loss at or under {}%: {} of payload = {} at the IP layer ({}-byte datagrams, {} bytes of headers each)",
        100.0 * a.loss_threshold,
        fmt_rate_iperf(report.rate_bps),
        fmt_rate_iperf(report.ip_rate_bps),
        report.datagram_len,
        report.header_bytes
    );
    for p in &report.load {
        let t = &p.trial;
        println!(
            "at {:>3}%: {:.4}% lost, jitter {:.3} ms, {}",
            p.percent,
            100.0 * t.loss,
            t.jitter_ms,
            match (&t.one_way_delay, &t.delay_variation) {
                (Some(d), _) => format!(
                    "one-way delay p50/p90/p99 {:.3}/{:.3}/{:.3} ms",
                    d.p50_ms, d.p90_ms, d.p99_ms
                ),
                (None, Some(v)) => format!(
                    "delay variation p50/p90/p99 {:.3}/{:.3}/{:.3} ms (clocks not synchronised: \
                     no one-way delay)",
                    v.p50_ms, v.p90_ms, v.p99_ms
                ),
                (None, None) => "no delay figures".into(),
            }
        );
    }
    Ok(ended)
}

fn lsr(r: &Report, km: f64) -> LsrEntry {
    let capped = lsr_capped_km(km);
    let bps = r.end.sum_received.bits_per_second;
    let metric = lsr_metric_from_rate(bps, capped);
    let mut display = fmt_lsr(metric);
    if km > LSR_MAX_KM {
        display.push_str(&format!(
            " (distance capped at {LSR_MAX_KM} km from {km} km)"
        ));
    }
    LsrEntry {
        distance_km: capped,
        bits_per_second: bps,
        bit_meters_per_second: metric,
        display,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Human,
    Json,
    JsonStream,
}

/// Writes a line of the text form into a [`Text`].
macro_rules! outln {
    ($o:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($o.out, $($arg)*);
    }};
}

/// The unit of the bitrate column: `-f`'s, or the one that fits each figure.
#[derive(Debug, Clone, Copy)]
struct Unit(Option<char>);

impl Unit {
    fn rate(self, bps: f64) -> String {
        match self.0 {
            Some(u) => fmt_rate_in(bps, u),
            None => fmt_rate_iperf(bps as u64),
        }
    }
}

/// Lines of the text form, written before they go out.
struct Text {
    out: String,
    unit: Unit,
    /// `-V`: the parameters and every data socket's set-up too.
    verbose: bool,
}

/// Where the output goes: standard output or `--logfile`, each line of text after `--timestamps`'
/// time and `-T`'s title (as iperf3 orders them), and flushed at once (iperf3's `--forceflush`
/// is always so).
struct Sink {
    title: Option<String>,
    timestamps: Option<String>,
    file: Option<std::fs::File>,
}

impl Sink {
    fn new(x: &Iperf3Flags) -> anyhow::Result<Self> {
        let file = match &x.logfile {
            Some(p) => Some(crate::logging::open_append(p)?),
            None => None,
        };
        if let Some(f) = &x.timestamps {
            stamp(f)?;
        }
        Ok(Self {
            title: x.title.clone(),
            timestamps: x.timestamps.clone(),
            file,
        })
    }

    /// Lines of text, each prefixed.
    fn text(&mut self, text: &str) {
        let mut out = String::with_capacity(text.len() + 64);
        for line in text.lines() {
            if let Some(f) = &self.timestamps {
                out.push_str(&stamp(f).unwrap_or_default());
            }
            if let Some(t) = &self.title {
                out.push_str(t);
                out.push_str(":  ");
            }
            out.push_str(line);
            out.push('\n');
        }
        self.raw(&out);
    }

    /// Text as it is (JSON).
    fn raw(&mut self, text: &str) {
        match &mut self.file {
            Some(f) => {
                if let Err(e) = f.write_all(text.as_bytes()) {
                    eprintln!("longhaul: --logfile: {e}");
                    std::process::exit(1);
                }
            }
            None => {
                // A closed standard output ends the process quietly (panic_hook), as print! does.
                print!("{text}");
                let _ = std::io::stdout().flush();
            }
        }
    }
}

/// The time now in strftime `format` (`--timestamps`), in the local time zone where the system
/// names one.
fn stamp(format: &str) -> anyhow::Result<String> {
    jiff::fmt::strtime::format(format, &jiff::Zoned::now())
        .map_err(|e| anyhow::anyhow!("--timestamps={format:?}: {e}"))
}

/// Prints the report as the test goes, in the chosen form.
struct Output {
    mode: Mode,
    streams: u32,
    start: Option<Start>,
    /// SIGINT/SIGTERM, told when the test starts (then a signal ends it with its results).
    interrupts: Option<Interrupts>,
    sink: Sink,
    unit: Unit,
    verbose: bool,
    /// Top-level members of the JSON document beside the report: `-T`'s "title", "extra_data".
    extra: serde_json::Map<String, serde_json::Value>,
    /// `-k`: the blocks asked for (the report's `test_start.blocks`).
    blocks: Option<u64>,
}

impl Output {
    fn new(a: &TestArgs) -> anyhow::Result<Self> {
        let mode = if a.json.json {
            Mode::Json
        } else if a.json_stream {
            Mode::JsonStream
        } else {
            Mode::Human
        };
        let x = &a.iperf3_flags;
        let mut extra = serde_json::Map::new();
        if let Some(t) = &x.title {
            extra.insert("title".into(), t.clone().into());
        }
        if let Some(d) = &x.extra_data {
            extra.insert("extra_data".into(), d.clone().into());
        }
        Ok(Self {
            mode,
            streams: a.streams.n,
            start: None,
            interrupts: None,
            sink: Sink::new(x)?,
            unit: Unit(x.format),
            verbose: x.verbose,
            extra,
            blocks: x.blockcount,
        })
    }

    fn text(&self) -> Text {
        Text {
            out: String::new(),
            unit: self.unit,
            verbose: self.verbose,
        }
    }

    fn event(&mut self, event: &str, data: &impl serde::Serialize) {
        let line = serde_json::json!({ "event": event, "data": data });
        self.sink.raw(&format!("{line}\n"));
    }

    /// The JSON document: the report, or what there is of one, with `extra`'s members.
    fn document(&mut self, doc: serde_json::Value) {
        let mut doc = doc;
        if let Some(m) = doc.as_object_mut() {
            m.extend(self.extra.clone());
        }
        let text = serde_json::to_string_pretty(&doc).expect("json");
        self.sink.raw(&format!("{text}\n"));
    }

    fn end(&mut self, r: &Report) {
        match self.mode {
            Mode::Json => {
                let mut r = r.clone();
                if let Some(k) = self.blocks {
                    r.start.test_start.blocks = k;
                }
                self.document(serde_json::to_value(&r).expect("report serialises"));
            }
            Mode::JsonStream => self.event("end", &r.end),
            Mode::Human => {
                let mut o = self.text();
                print_end(&mut o, r);
                self.sink.text(&o.out);
            }
        }
    }

    fn error(&mut self, msg: &str) {
        match self.mode {
            Mode::Json => {
                let mut doc =
                    serde_json::json!({ "start": self.start, "intervals": [], "end": {} });
                doc["error"] = serde_json::Value::String(msg.to_string());
                self.document(doc);
            }
            Mode::JsonStream => self.event("error", &msg),
            Mode::Human => {}
        }
    }
}

impl Observer for Output {
    fn start(&mut self, s: &Start) {
        if let Some(i) = &self.interrupts {
            i.running();
        }
        match self.mode {
            Mode::JsonStream => self.event("start", s),
            Mode::Human => {
                let mut o = self.text();
                print_start(&mut o, s);
                self.sink.text(&o.out);
            }
            Mode::Json => {}
        }
        self.start = Some(s.clone());
    }

    fn interval(&mut self, r: &IntervalReport) {
        match self.mode {
            Mode::JsonStream => self.event("interval", r),
            Mode::Human => {
                let auto = self
                    .start
                    .as_ref()
                    .is_some_and(|s| s.longhaul.pace_auto.is_some());
                let mut o = self.text();
                print_interval(&mut o, r, self.streams, auto);
                self.sink.text(&o.out);
            }
            Mode::Json => {}
        }
    }
}

fn print_start(o: &mut Text, s: &Start) {
    let x = &s.longhaul;
    outln!(
        o,
        "Connecting to host {}, port {}",
        s.connecting_to.host,
        s.connecting_to.port
    );
    for c in &s.connected {
        outln!(
            o,
            "[{:>3}] local {} port {} connected to {} port {}",
            c.socket,
            c.local_host,
            c.local_port,
            c.remote_host,
            c.remote_port
        );
    }
    if let Some(tls) = &s.longhaul.encryption {
        outln!(o, "encrypted: {tls}");
    }
    let cc_local = x
        .local_sockets
        .first()
        .map_or("?", |s| s.congestion.as_str());
    let cc_remote = x.remote_sockets.first().map_or(
        if x.server_protocol == "iperf3" {
            "not reported (an iperf3 server)"
        } else {
            "?"
        },
        |s| s.congestion.as_str(),
    );
    if x.server_protocol == "iperf3" {
        outln!(
            o,
            "the server speaks iperf3: it reports its totals at the end, nothing else"
        );
    }
    if s.test_start.protocol == "UDP" {
        outln!(o, "RTT {:.3} ms (control connection)", x.rtt_ms);
        if o.verbose {
            print_verbose_start(o, s);
        }
        print_udp_start(o, s);
        return;
    }
    if let Some(q) = &x.quic {
        let bdp = x.local_plan.window.bdp_per_stream.max(1);
        outln!(
            o,
            "RTT {:.3} ms (control connection); target {}; transport QUIC over UDP, {} controller; \
             flow-control window {} per stream = {:.1}× BDP; packets up to {} B of UDP payload",
            x.rtt_ms,
            fmt_rate_iperf(x.target_rate_bps),
            q.controller,
            fmt_size_iperf(q.window_bytes),
            q.window_bytes as f64 / bdp as f64,
            q.max_udp_payload
        );
        return;
    }
    outln!(
        o,
        "RTT {:.3} ms (control connection); target {}; congestion control: client {cc_local}, server {cc_remote}{}",
        x.rtt_ms,
        fmt_rate_iperf(x.target_rate_bps),
        match &x.congestion_requested {
            Some(c) if c != cc_local || c != cc_remote => format!(" (REQUESTED {c})"),
            Some(_) => " (as requested)".into(),
            None => " (kernel default)".into(),
        }
    );
    for (side, list) in [("client", &x.local_buffers), ("server", &x.remote_buffers)] {
        for b in list {
            outln!(o, "{side} {}", b.summary);
            if let Some(fix) = &b.fix {
                outln!(o, "    fix: {fix}");
            }
        }
    }
    for n in &x.local_plan.window.notes {
        outln!(o, "note: {n}");
    }
    if let Some(p) = x.pace_total_bps {
        outln!(
            o,
            "pacing: {} total, split across the sending streams (SO_MAX_PACING_RATE)",
            fmt_rate_iperf(p)
        );
    }
    if let Some(e) = &x.pace_auto {
        outln!(
            o,
            "pacing: auto; bottleneck {} (median of {} of {} packet trains of {} x {} B, {} to {}, \
             timed {}, in {:.0} ms); each sending side governs from under {}",
            fmt_rate_iperf(e.rate_bps),
            e.trains_used,
            e.trains,
            e.train_len,
            e.wire_bytes,
            fmt_rate_iperf(e.low_bps),
            fmt_rate_iperf(e.high_bps),
            match e.timing {
                TrainTiming::Forward => "at the server",
                TrainTiming::RoundTrip => "on the round trip",
            },
            e.took_ms,
            fmt_rate_iperf(e.start_bps)
        );
    }
    if o.verbose {
        print_verbose_start(o, s);
    }
    outln!(
        o,
        "[ ID] Interval           Transfer     Bitrate          Retr   Cwnd         RTT       rwnd-lim sndbuf-lim"
    );
}

/// `-V`: iperf3's "Starting Test" line, and every data socket of both ends as its kernel set
/// it up.
fn print_verbose_start(o: &mut Text, s: &Start) {
    let t = &s.test_start;
    let end = if t.bytes > 0 {
        format!("{} bytes to send", t.bytes)
    } else {
        format!("{} second test", t.duration)
    };
    outln!(
        o,
        "Starting Test: protocol: {}, {} streams, {} byte blocks, omitting {} seconds, {end}, tos {}",
        t.protocol,
        t.num_streams,
        t.blksize,
        t.omit,
        t.tos
    );
    let x = &s.longhaul;
    for (side, list) in [("client", &x.local_sockets), ("server", &x.remote_sockets)] {
        for k in list.iter() {
            outln!(
                o,
                "{side} socket {} ({}): {} -> {}, mss {}, tos {:#04x}, nodelay {}, {}sndbuf {}, rcvbuf {}{}",
                k.stream + 1,
                if k.sender { "sends" } else { "receives" },
                k.local,
                k.remote,
                k.mss,
                k.tos,
                if k.nodelay { "on" } else { "off" },
                if k.congestion.is_empty() {
                    String::new()
                } else {
                    format!("{}, ", k.congestion)
                },
                fmt_size_iperf(k.sndbuf),
                fmt_size_iperf(k.rcvbuf),
                if k.dont_fragment { ", DF" } else { "" }
            );
        }
    }
}

fn print_udp_start(o: &mut Text, s: &Start) {
    let rate = match s.test_start.target_bitrate {
        0 => "as fast as the host sends".to_string(),
        r => format!("{} per stream", fmt_rate_iperf(r)),
    };
    let buf = |list: &[longhaul_proto::msg::SocketSetup], sender: bool| {
        list.iter()
            .find(|k| k.sender == sender)
            .map(|k| fmt_size_iperf(if sender { k.sndbuf } else { k.rcvbuf }))
    };
    let x = &s.longhaul;
    outln!(
        o,
        "UDP: {}-byte datagrams, {rate}; socket buffers: client {}, server {}",
        s.test_start.blksize,
        buf(&x.local_sockets, true)
            .or_else(|| buf(&x.local_sockets, false))
            .unwrap_or_default(),
        buf(&x.remote_sockets, false)
            .or_else(|| buf(&x.remote_sockets, true))
            .unwrap_or_default(),
    );
    outln!(
        o,
        "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams"
    );
}

/// A UDP line's loss columns: jitter, lost/total (percent), and any out-of-order or duplicates;
/// without the receiver's account, the datagrams sent.
fn udp_columns(u: &UdpEntry) -> String {
    let Some(r) = &u.received else {
        return format!("{:>8}     {} datagrams sent", "", u.packets);
    };
    let mut out = format!(
        "{:>8.3} ms  {}/{} ({:.2}%)",
        r.jitter_ms,
        r.lost_packets,
        r.lost_packets.saturating_add(r.received_packets),
        r.lost_percent
    );
    if r.out_of_order > 0 {
        out.push_str(&format!("  {} out of order", r.out_of_order));
    }
    if r.duplicates > 0 {
        out.push_str(&format!("  {} duplicates", r.duplicates));
    }
    if r.host_drops > 0 {
        out.push_str(&format!(
            "  (receive buffer overflowed {} times)",
            r.host_drops
        ));
    }
    out
}

fn udp_line(
    unit: Unit,
    id: &str,
    start: f64,
    end: f64,
    bytes: u64,
    bps: f64,
    u: &UdpEntry,
) -> String {
    format!(
        "[{id:>3}] {start:6.2}-{end:<6.2} sec  {:>12}  {:>15}  {}",
        fmt_size_iperf(bytes),
        unit.rate(bps),
        udp_columns(u)
    )
}

fn pct(us: u64, seconds: f64) -> String {
    if seconds <= 0.0 {
        return "-".into();
    }
    format!("{:.0}%", (us as f64 / 1e4 / seconds).min(100.0))
}

/// iperf3's marker of intervals in the omit period.
fn omitted(yes: bool) -> &'static str {
    if yes { "  (omitted)" } else { "" }
}

fn stream_line(unit: Unit, id: &str, e: &StreamEntry) -> String {
    if !e.sender {
        // A receiver's view (the sender, an iperf3 server, reported none): bytes only.
        return format!(
            "[{id:>3}] {:6.2}-{:<6.2} sec  {:>12}  {:>15}  (received){}",
            e.start,
            e.end,
            fmt_size_iperf(e.bytes),
            unit.rate(e.bits_per_second),
            omitted(e.omitted),
        );
    }
    format!(
        "[{id:>3}] {:6.2}-{:<6.2} sec  {:>12}  {:>15}  {:>4}   {:>11}  {:>7}   {:>5}    {:>5}{}",
        e.start,
        e.end,
        fmt_size_iperf(e.bytes),
        unit.rate(e.bits_per_second),
        e.retransmits,
        fmt_size_iperf(e.snd_cwnd),
        format!("{:.2} ms", f64::from(e.rtt) / 1000.0),
        pct(e.rwnd_limited, e.seconds),
        pct(e.sndbuf_limited, e.seconds),
        omitted(e.omitted),
    )
}

fn sum_line(unit: Unit, id: &str, s: &SumEntry, suffix: &str) -> String {
    if let Some(u) = &s.udp {
        return format!(
            "{}  {suffix}",
            udp_line(unit, id, s.start, s.end, s.bytes, s.bits_per_second, u)
        );
    }
    format!(
        "[{id:>3}] {:6.2}-{:<6.2} sec  {:>12}  {:>15}  {:>4}  {suffix}",
        s.start,
        s.end,
        fmt_size_iperf(s.bytes),
        unit.rate(s.bits_per_second),
        s.retransmits.map_or(String::new(), |r| r.to_string()),
    )
}

fn print_interval(o: &mut Text, r: &IntervalReport, streams: u32, auto_pace: bool) {
    // With --pace auto, the sending streams' pacing rate closes the interval's last line.
    let pace = if auto_pace {
        let bps: u64 = r
            .streams
            .iter()
            .filter(|e| e.sender)
            .map(|e| e.pacing_rate)
            .sum();
        format!("  pace {}", fmt_rate_iperf(bps))
    } else {
        String::new()
    };
    let summed = streams > 1 || r.sum_bidir_reverse.is_some();
    for e in &r.streams {
        match &e.udp {
            Some(u) => outln!(
                o,
                "{}{}",
                udp_line(
                    o.unit,
                    &e.socket.to_string(),
                    e.start,
                    e.end,
                    e.bytes,
                    e.bits_per_second,
                    u
                ),
                omitted(e.omitted)
            ),
            None if summed => outln!(o, "{}", stream_line(o.unit, &e.socket.to_string(), e)),
            None => outln!(o, "{}{pace}", stream_line(o.unit, &e.socket.to_string(), e)),
        }
    }
    if summed {
        outln!(
            o,
            "{}{pace}",
            sum_line(o.unit, "SUM", &r.sum, omitted(r.sum.omitted).trim_start())
        );
        if let Some(rev) = &r.sum_bidir_reverse {
            let suffix = format!("(reverse){}", omitted(rev.omitted));
            outln!(o, "{}", sum_line(o.unit, "SUM", rev, &suffix));
        }
    }
}

fn print_udp_end(o: &mut Text, e: &End) {
    outln!(o, "- - - - - - - - - - - - - - - - - - - - - - - - -");
    outln!(
        o,
        "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams"
    );
    for s in &e.streams {
        let Some(u) = &s.udp else { continue };
        let rx = &s.receiver;
        outln!(
            o,
            "{}  sender",
            udp_line(
                o.unit,
                &u.socket.to_string(),
                0.0,
                u.seconds,
                u.bytes,
                u.bits_per_second,
                &UdpEntry {
                    packets: u.packets,
                    received: None,
                }
            )
        );
        outln!(
            o,
            "{}  receiver",
            udp_line(
                o.unit,
                &u.socket.to_string(),
                0.0,
                rx.seconds,
                rx.bytes,
                rx.bits_per_second,
                &UdpEntry {
                    packets: u.packets,
                    received: Some(UdpReceived {
                        received_packets: u.received_packets,
                        lost_packets: u.lost_packets,
                        lost_percent: u.lost_percent,
                        jitter_ms: u.jitter_ms,
                        out_of_order: u.out_of_order,
                        duplicates: u.duplicates,
                        host_drops: u.host_drops,
                    }),
                }
            )
        );
        let asked = match u.target_bits_per_second {
            0 => "as fast as it could".to_string(),
            t => format!("asked {}", fmt_rate_iperf(t)),
        };
        let owd = match (&u.one_way_delay.ms, u.one_way_delay.synchronized) {
            (Some(d), _) => format!(
                "one-way delay min/p50/p90/p99/max {:.3}/{:.3}/{:.3}/{:.3}/{:.3} ms",
                d.min_ms, d.p50_ms, d.p90_ms, d.p99_ms, d.max_ms
            ),
            (None, true) => "one-way delay: no figures (a datagram arrived before it was sent: \
                             the clocks disagree)"
                .into(),
            (None, false) => "one-way delay: not measured (clocks not both synchronised)".into(),
        };
        outln!(
            o,
            "      sender {asked}, sent {}; {}{owd}",
            fmt_rate_iperf(u.bits_per_second as u64),
            if u.end_marker_seen {
                ""
            } else {
                "no end marker (an iperf3 peer sends none): datagrams lost at the tail not \
                 counted; "
            }
        );
    }
    for (s, role) in [(&e.sum_sent, "sender"), (&e.sum_received, "receiver")] {
        if e.streams.len() > 1 {
            outln!(o, "{}", sum_line(o.unit, "SUM", s, role));
        }
    }
    if let (Some(s), Some(rv)) = (&e.sum_sent_bidir_reverse, &e.sum_received_bidir_reverse) {
        outln!(o, "{}", sum_line(o.unit, "SUM", s, "sender (reverse)"));
        outln!(o, "{}", sum_line(o.unit, "SUM", rv, "receiver (reverse)"));
    }
}

fn print_end(o: &mut Text, r: &Report) {
    let e = &r.end;
    if o.verbose {
        outln!(o, "Test Complete. Summary Results:");
    }
    if e.sum.is_some() {
        print_udp_end(o, e);
        print_cpu_and_notes(o, e);
        return;
    }
    outln!(o, "- - - - - - - - - - - - - - - - - - - - - - - - -");
    outln!(
        o,
        "[ ID] Interval           Transfer     Bitrate          Retr"
    );
    for s in &e.streams {
        let (tx, rx) = (&s.sender, &s.receiver);
        // An iperf3 server tells only its totals: no socket facts to show for its senders.
        let facts = if tx.mss > 0 {
            format!(
                "   ({}, mss {}, min/mean/max RTT {:.2}/{:.2}/{:.2} ms)",
                tx.congestion,
                tx.mss,
                f64::from(tx.min_rtt) / 1e3,
                f64::from(tx.mean_rtt) / 1e3,
                f64::from(tx.max_rtt) / 1e3,
            )
        } else {
            String::new()
        };
        outln!(
            o,
            "[{:>3}] {:6.2}-{:<6.2} sec  {:>12}  {:>15}  {:>4}  sender{facts}",
            tx.socket,
            0.0,
            tx.seconds,
            fmt_size_iperf(tx.bytes),
            o.unit.rate(tx.bits_per_second),
            tx.retransmits,
        );
        outln!(
            o,
            "[{:>3}] {:6.2}-{:<6.2} sec  {:>12}  {:>15}        receiver",
            rx.socket,
            0.0,
            rx.seconds,
            fmt_size_iperf(rx.bytes),
            o.unit.rate(rx.bits_per_second),
        );
    }
    let sums = [(&e.sum_sent, "sender"), (&e.sum_received, "receiver")];
    for (s, role) in sums {
        outln!(o, "{}", sum_line(o.unit, "SUM", s, role));
    }
    if let (Some(s), Some(rv)) = (&e.sum_sent_bidir_reverse, &e.sum_received_bidir_reverse) {
        outln!(o, "{}", sum_line(o.unit, "SUM", s, "sender (reverse)"));
        outln!(o, "{}", sum_line(o.unit, "SUM", rv, "receiver (reverse)"));
    }
    print_cpu_and_notes(o, e);
}

fn print_cpu_and_notes(o: &mut Text, e: &End) {
    let c = &e.cpu_utilization_percent;
    outln!(
        o,
        "CPU Utilization: local/client {:.1}% ({:.1}%u/{:.1}%s), remote/server {:.1}% ({:.1}%u/{:.1}%s)",
        c.host_total,
        c.host_user,
        c.host_system,
        c.remote_total,
        c.remote_user,
        c.remote_system
    );
    if e.sum.is_none() {
        let named = |c: &str| {
            if c.is_empty() {
                "(not reported)".to_string()
            } else {
                c.to_string()
            }
        };
        outln!(
            o,
            "congestion control: sender {}, receiver {}",
            named(&e.sender_tcp_congestion),
            named(&e.receiver_tcp_congestion)
        );
    }
    if let Some(l) = &e.longhaul.lsr {
        outln!(
            o,
            "Land Speed Record metric: {} ({} over {} km)",
            l.display,
            fmt_rate_iperf(l.bits_per_second as u64),
            l.distance_km
        );
    }
    if let Some(p) = &e.longhaul.pace_auto {
        for (side, g) in [("client", &p.client), ("server", &p.server)] {
            if let Some(g) = g {
                outln!(o, "pace auto ({side} sends): {}", g.line());
            }
        }
    }
    for w in &e.longhaul.warnings {
        outln!(o, "warning: {w}");
    }
}
