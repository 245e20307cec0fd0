//! `longhaul server`.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use longhaul_engine::{DEFAULT_PORT, Server, ServerConfig};

/// Flags of `longhaul server`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Serves control and data connections on one port (default 7067), IPv6 and IPv4 \
(dual-stack) unless -B picks one address. Each test gets its own threads; a bad client is logged and \
dropped without disturbing the others. Run as root so tests can ask for windows beyond \
net.core.rmem_max (SO_RCVBUFFORCE). With --root DIR --key FILE it also serves `longhaul send` and \
`longhaul get` (files under DIR only; clients must hold the key). Files clients send are created by and owned by \
the server's user, with the client's permission bits minus the server's umask and never \
setuid/setgid/sticky unless --keep-special-bits."
)]
pub(crate) struct ServerArgs {
    #[command(flatten)]
    config: crate::config::ConfigArgs,
    /// Port for control and data connections.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Bind to this address only (default: every IPv6 and IPv4 address).
    #[arg(short = 'B', long)]
    bind: Option<IpAddr>,
    /// Serve stock iperf3 clients (`iperf3 -c HOST`, TCP and UDP) on this port, many at once; "off"
    /// to not; 0 for any free port. A port already taken (by an iperf3 server) is skipped with a
    /// warning. Tests from iperf3 clients count against --max-tests.
    #[arg(long, value_name = "PORT|off", default_value = "5201", value_parser = iperf3_port)]
    iperf3_port: Iperf3Port,
    /// Highest rate one test may move, all streams and both directions (e.g. 1G): a UDP test asking
    /// for more (or for -b 0) is refused; a test measured above it is ended. Both protocols.
    #[arg(long, value_name = "RATE", value_parser = crate::args::rate)]
    max_rate: Option<u64>,
    /// Serve no UDP tests (`test -u`, `iperf3 -u`); they are refused with the reason.
    #[arg(long)]
    no_udp: bool,
    /// Serve tests (longhaul's and iperf3's) only to clients in these networks, e.g.
    /// 10.0.0.0/8,2001:db8::/32 (a bare address is one host). Others are refused with the reason.
    #[arg(long, value_name = "NET,...", value_delimiter = ',', value_parser = network)]
    allow_from: Vec<ipnet::IpNet>,
    /// Most tests served at once; the next client is told "busy, N tests running".
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_tests: u32,
    /// Most transfers (`send`/`get`) served at once, counted apart from tests.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_transfers: u32,
    /// Most probe streams (`longhaul monitor`'s latency tests) reflected at once, counted apart.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_probes: u32,
    /// Serve Prometheus metrics (tests, transfers, probe sessions and jobs running and done, bytes,
    /// refusals) at http://ADDR/metrics, e.g. 127.0.0.1:9467 (docs/monitor.md).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// Seconds a peer has for each whole set-up step (preamble and hello; pings and parameters;
    /// data connections; start), however it spreads its bytes.
    #[arg(long, default_value_t = 10, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..=300))]
    handshake_timeout: u64,
    /// Longest test in seconds (-t plus -O); longer tests are refused, and a test still running past
    /// its duration (a client that never stops it, or a byte count) is ended.
    #[arg(long, default_value_t = 86_400, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    max_duration: u64,
    /// End a running test in which no stream moved a byte for this many seconds.
    #[arg(long, default_value_t = 60, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    stall_timeout: u64,
    /// Most streams (-P) of one test (--bidir opens twice as many connections).
    #[arg(long, default_value_t = 128,
          value_parser = clap::value_parser!(u32).range(1..=longhaul_proto::msg::MAX_STREAMS as i64))]
    max_streams: u32,
    /// Most socket-buffer memory one test may make this server request, over all its connections
    /// (as the kernel grants it: twice each request; autotuned buffers are not counted).
    #[arg(long, default_value = "8G", value_name = "SIZE", value_parser = size)]
    max_test_memory: u64,
    /// Log level (error, warn, info, debug); RUST_LOG overrides.
    #[arg(long, default_value = "info")]
    log: String,
    /// Run in the background, detached from the terminal (logs go to --logfile, or nowhere).
    #[arg(short = 'D', long)]
    daemon: bool,
    /// Append logs to this file instead of standard error.
    #[arg(long)]
    logfile: Option<PathBuf>,
    /// Print each longhaul test's report from this server's side, an iperf3-shaped JSON document
    /// (as `iperf3 -s -J`), on standard output as the test ends; also when its client stopped it
    /// early (`end.longhaul.interrupted`).
    #[arg(short = 'J', long)]
    json: bool,
    /// Write the server's process id to this file (with --daemon: the background process).
    #[arg(short = 'I', long)]
    pidfile: Option<PathBuf>,
    /// Serve files to `longhaul send`/`get` from this directory; no path outside it is ever touched.
    #[arg(long, value_name = "DIR", requires = "key")]
    root: Option<PathBuf>,
    /// The key clients must prove they hold (create one with `longhaul keygen FILE`): for
    /// transfers (--root), and for tests with --require-key.
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    /// Serve tests only to clients that prove they hold --key (`longhaul test --key FILE`), over
    /// a fresh challenge per test; stock iperf3 clients, which cannot, are refused ("test
    /// authorization failed").
    #[arg(long, requires = "key")]
    require_key: bool,
    /// End a transfer that made no progress at all for this many seconds (a dead client or a cut
    /// path); its journal stays, so the client resumes.
    #[arg(long, default_value_t = 60, value_name = "SECS", requires = "root",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    idle_timeout: u64,
    /// The payload rate of the path between this server and its clients (its bottleneck, e.g.
    /// 9.4G on a dedicated 10 Gbit/s circuit), named to every transfer client: one given no
    /// --rate plans its streams and paces them at it, instead of hedging an unknown path with
    /// several unpaced streams that overrun the bottleneck's queue (docs/transfer.md).
    #[arg(long, value_name = "RATE", requires = "root", value_parser = path_rate)]
    path_rate: Option<u64>,
    /// Run jobs for the controllers listed in this TOML file (`[[controller]]` tables: name, key
    /// file, limits; docs/fleet.md): each may ask this server to test to another server
    /// (`longhaul test THIS --to OTHER`), within its limits.
    #[arg(long, value_name = "FILE")]
    controllers: Option<PathBuf>,
    /// Refuse plaintext connections: every test, transfer and job must come with --encrypt
    /// (encrypted connections are accepted in any case; docs/encryption.md).
    #[arg(long)]
    require_encryption: bool,
    /// The certificate chain (PEM) this server presents to --encrypt clients [default: a
    /// self-signed one, made at start].
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Ask every client for a certificate signed by a CA in this PEM file (mutual TLS); clients
    /// without one are refused in the handshake. Implies --require-encryption.
    #[arg(long, value_name = "PEM")]
    tls_client_ca: Option<PathBuf>,
    /// Modes of what clients send (see `longhaul send --help`): by default the client's permission
    /// bits minus this server's umask, never setuid, setgid or sticky, and existing directories keep
    /// theirs.
    #[command(flatten)]
    modes: crate::transfer::ModeArgs,
}

/// A network in CIDR form, or one address.
fn network(s: &str) -> Result<ipnet::IpNet, String> {
    s.parse::<ipnet::IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("{s:?} is not a network (10.0.0.0/8, 2001:db8::/32) or an address"))
}

/// `--iperf3-port`: a port, or none ("off").
#[derive(Debug, Clone, Copy)]
struct Iperf3Port(Option<u16>);

fn iperf3_port(s: &str) -> Result<Iperf3Port, String> {
    if s.eq_ignore_ascii_case("off") {
        return Ok(Iperf3Port(None));
    }
    s.parse::<u16>()
        .map(|p| Iperf3Port(Some(p)))
        .map_err(|_| format!("{s:?} is not a port number (0-65535) or \"off\""))
}

fn size(s: &str) -> Result<u64, String> {
    let n = longhaul_units::parse_size(s).map_err(|e| e.to_string())?;
    if n == 0 {
        return Err("must be more than 0".into());
    }
    Ok(n)
}

pub(crate) fn run(a: &ServerArgs) -> anyhow::Result<ExitCode> {
    // Open the log file first: a path we cannot write is an error on the terminal, not in the void.
    let logfile = a
        .logfile
        .as_ref()
        .map(|p| crate::logging::open_append(p))
        .transpose()?;
    let files = match &a.root {
        Some(root) => {
            let meta =
                std::fs::metadata(root).with_context(|| format!("--root {}", root.display()))?;
            anyhow::ensure!(meta.is_dir(), "--root {}: not a directory", root.display());
            let key = crate::transfer::load_key(a.key.as_deref())?;
            Some(longhaul_engine::transfer::ServeFiles {
                root: root.clone(),
                key,
                idle_timeout: std::time::Duration::from_secs(a.idle_timeout),
                modes: longhaul_transfer::manifest::ModePolicy {
                    umask: longhaul_engine::transfer::process_umask(),
                    keep_special_bits: a.modes.keep_special_bits,
                },
                chmod_existing_dirs: a.modes.chmod_existing_dirs,
                path_rate_bps: a.path_rate,
            })
        }
        None => None,
    };
    anyhow::ensure!(
        a.key.is_none() || a.root.is_some() || a.require_key,
        "--key is used by --root (transfers) and --require-key (tests); give one of them"
    );
    let test_key = if a.require_key {
        Some(crate::transfer::load_key(a.key.as_deref())?)
    } else {
        None
    };
    let controllers = match &a.controllers {
        Some(file) => load_controllers(file)?,
        None => Default::default(),
    };
    let reports = a.json.then(std::sync::mpsc::channel);
    let cfg = ServerConfig {
        bind: a.bind,
        port: a.port,
        max_tests: a.max_tests,
        max_transfers: a.max_transfers,
        max_probes: a.max_probes,
        handshake_timeout: std::time::Duration::from_secs(a.handshake_timeout),
        max_duration: std::time::Duration::from_secs(a.max_duration),
        stall_timeout: std::time::Duration::from_secs(a.stall_timeout),
        max_streams: a.max_streams,
        max_test_memory: a.max_test_memory,
        files,
        controllers: std::sync::Arc::new(controllers),
        tls: longhaul_engine::tls::ServerTlsConfig {
            identity: a
                .tls_cert
                .clone()
                .zip(a.tls_key.clone())
                .map(|(cert, key)| longhaul_engine::tls::Identity { cert, key }),
            client_ca: a.tls_client_ca.clone(),
            required: a.require_encryption,
        },
        iperf3_port: a.iperf3_port.0,
        max_rate_bps: a.max_rate,
        allow_udp: !a.no_udp,
        allow_from: a.allow_from.clone(),
        test_key,
        reports: reports.as_ref().map(|(tx, _)| tx.clone()),
    };
    // Bind before detaching, so "address in use" reaches the user's terminal.
    // Before binding, which may warn (an iperf3 port taken). The subscriber starts no thread, so
    // daemonize() below may still fork.
    match logfile {
        Some(f) => crate::logging::to_file(&a.log, f),
        None => crate::logging::to_stderr(&a.log),
    }
    let server = Server::bind(cfg).context("cannot start the server")?;
    let metrics = a
        .metrics
        .map(longhaul_service::Endpoint::bind)
        .transpose()?;
    // Tell scripts where we are (useful with -p 0).
    eprintln!(
        "longhaul server listening on {} (max {} tests, {} transfers{})",
        server.local_addr(),
        a.max_tests,
        a.max_transfers,
        match (a.require_encryption, a.require_key) {
            (true, true) => ", encryption and key required",
            (true, false) => ", encryption required",
            (false, true) => ", key required for tests",
            (false, false) => "",
        }
    );
    crate::systemd::ready(&format!("serving on {}", server.local_addr()));
    if let Some(addr) = server.iperf3_addr() {
        eprintln!("iperf3 clients served on {addr}");
    }
    if a.daemon {
        // No thread has been started yet, as daemonize() requires.
        longhaul_sys::daemonize().context("cannot run in the background")?;
    }
    if let Some(p) = &a.pidfile {
        std::fs::write(p, format!("{}\n", std::process::id()))
            .with_context(|| format!("cannot write pid file {}", p.display()))?;
    }
    if let Some((_, rx)) = reports {
        std::thread::Builder::new()
            .name("lh-json".into())
            .spawn(move || {
                for r in rx {
                    // A closed standard output ends the server quietly (panic_hook), as iperf3's.
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&r).expect("a report serialises")
                    );
                }
            })
            .context("cannot start the JSON printer")?;
    }
    if let Some(m) = metrics {
        let at = m.local_addr()?;
        let stats = server.stats();
        let mut registry = longhaul_service::prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(longhaul_service::Snapshot(move || {
            server_metrics(&stats.snapshot())
        })));
        m.spawn(std::sync::Arc::new(registry))?;
        tracing::info!("metrics at http://{at}/metrics");
    }
    let stats = server.stats();
    crate::systemd::watchdog(move || stats.responsive());
    stop_on_sigterm(server.stats())?;
    server.run()?;
    Ok(ExitCode::SUCCESS)
}

/// How long the sessions may take to end after SIGTERM (each is told within a second) before the
/// server exits under them.
const TRANSFER_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// SIGTERM (systemctl stop) and SIGINT end the server cleanly: it refuses new conversations, ends
/// running tests and transfers telling each client why (a transfer's client resumes from its
/// journal), waits for them to unwind for up to [`TRANSFER_GRACE`], then exits 0
/// (`Restart=on-failure` leaves it stopped).
fn stop_on_sigterm(stats: longhaul_engine::ServerStats) -> anyhow::Result<()> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let flag = std::sync::Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, std::sync::Arc::clone(&flag))
            .context("cannot handle SIGTERM")?;
    }
    std::thread::Builder::new()
        .name("lh-shutdown".into())
        .spawn(move || {
            while !flag.load(Ordering::Acquire) {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            stats.stop_serving();
            let at = std::time::Instant::now();
            let running = |s: &longhaul_engine::ServerSnapshot| {
                s.tests_running + s.transfers_running + s.probes_running + s.jobs_running
            };
            let first = stats.snapshot();
            tracing::info!(
                tests = first.tests_running,
                transfers = first.transfers_running,
                "stopping (SIGTERM): new conversations refused, running tests and transfers ended"
            );
            loop {
                let now = stats.snapshot();
                let tests_done = now.tests_running + now.probes_running + now.jobs_running == 0;
                if running(&now) == 0
                    || tests_done && at.elapsed() >= TRANSFER_GRACE
                    || at.elapsed() >= TRANSFER_GRACE + std::time::Duration::from_secs(5)
                {
                    if now.transfers_running > 0 {
                        tracing::warn!(
                            transfers = now.transfers_running,
                            "stopped with transfers running: their clients resume them"
                        );
                    }
                    tracing::info!("stopped");
                    std::process::exit(0);
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        })
        .context("cannot start the shutdown thread")?;
    Ok(())
}

/// The controllers of a `--controllers` file, each with its key (key files relative to the
/// controllers file's directory; each must be readable by this user only).
fn load_controllers(file: &std::path::Path) -> anyhow::Result<longhaul_engine::Controllers> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read --controllers {}", file.display()))?;
    let specs = longhaul_fleet::parse_controllers(&text, &file.display().to_string())
        .map_err(anyhow::Error::msg)?;
    let dir = file.parent().unwrap_or(std::path::Path::new("."));
    let mut list = Vec::with_capacity(specs.len());
    for spec in specs {
        let key_file = dir.join(&spec.key_file);
        let key = crate::transfer::load_key(Some(&key_file))
            .with_context(|| format!("controller {} in {}", spec.name, file.display()))?;
        list.push((spec, key));
    }
    Ok(longhaul_engine::Controllers::new(list)?)
}

/// A server's counters as Prometheus metrics (`longhaul_server_*`).
fn server_metrics(s: &longhaul_engine::ServerSnapshot) -> Vec<longhaul_service::Family> {
    use longhaul_service::{Family, Kind};
    let labelled = |name, help, kind, samples: Vec<(&'static str, &'static str, u64)>| Family {
        name,
        help,
        kind,
        samples: samples
            .into_iter()
            .map(|(k, v, n)| (vec![(k, v.to_string())], n as f64))
            .collect(),
    };
    vec![
        labelled(
            "longhaul_server_running",
            "Sessions running now, by kind.",
            Kind::Gauge,
            vec![
                ("kind", "test", u64::from(s.tests_running)),
                ("kind", "transfer", u64::from(s.transfers_running)),
                ("kind", "probe", u64::from(s.probes_running)),
                ("kind", "job", u64::from(s.jobs_running)),
            ],
        ),
        labelled(
            "longhaul_server_refused_busy",
            "Sessions refused because their cap (--max-tests, --max-transfers, --max-probes) was reached.",
            Kind::Counter,
            vec![
                ("kind", "test", s.refused_busy[0]),
                ("kind", "transfer", s.refused_busy[1]),
                ("kind", "probe", s.refused_busy[2]),
                ("kind", "job", s.refused_busy[3]),
            ],
        ),
        Family::one(
            "longhaul_server_dropped_handshakes",
            "Connections dropped for holding too many handshake slots.",
            Kind::Counter,
            s.dropped_handshakes as f64,
        ),
        labelled(
            "longhaul_server_tests",
            "Tests ended, by result.",
            Kind::Counter,
            vec![
                ("result", "ok", s.tests_finished),
                ("result", "error", s.tests_failed),
            ],
        ),
        Family::one(
            "longhaul_server_test_bytes",
            "Bytes moved by the tests that ended (after their omit periods).",
            Kind::Counter,
            s.test_bytes as f64,
        ),
        labelled(
            "longhaul_server_transfers",
            "Transfers ended, by result.",
            Kind::Counter,
            vec![
                ("result", "ok", s.transfers_finished),
                ("result", "error", s.transfers_failed),
            ],
        ),
        labelled(
            "longhaul_server_transfer_bytes",
            "Bytes of the transfers that ended, verified, by direction as seen from this server.",
            Kind::Counter,
            vec![
                ("direction", "received", s.transfer_bytes_received),
                ("direction", "sent", s.transfer_bytes_sent),
            ],
        ),
        Family::one(
            "longhaul_server_transfer_files",
            "Files moved by the transfers that ended.",
            Kind::Counter,
            s.transfer_files as f64,
        ),
        Family::one(
            "longhaul_server_transfer_chunks_resent",
            "Chunks sent again (failed verification, a broken connection).",
            Kind::Counter,
            s.chunks_resent as f64,
        ),
        Family::one(
            "longhaul_server_transfer_chunks_verified",
            "Chunks of the transfers that ended verified by their receiver (BLAKE3).",
            Kind::Counter,
            s.chunks_verified as f64,
        ),
        Family::one(
            "longhaul_server_probe_sessions",
            "Probe sessions served (longhaul monitor's latency streams).",
            Kind::Counter,
            s.probe_sessions as f64,
        ),
        labelled(
            "longhaul_server_jobs",
            "Controllers' jobs ended, by result.",
            Kind::Counter,
            vec![
                ("result", "ok", s.jobs_finished),
                ("result", "error", s.jobs_failed),
            ],
        ),
    ]
}

/// `--path-rate`: a rate the clients can pace at, within what the protocol carries.
fn path_rate(s: &str) -> Result<u64, String> {
    use longhaul_proto::msg::{MAX_RATE_BPS, MIN_PACE_BPS};
    let r = crate::args::rate(s)?;
    if (MIN_PACE_BPS..=MAX_RATE_BPS).contains(&r) {
        Ok(r)
    } else {
        Err("must be 1k to 10T (bit/s)".into())
    }
}
