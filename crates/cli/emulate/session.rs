//! Named testbeds that keep running between commands: `up` starts a background emulator (this
//! binary again, with `up --foreground`) and returns once the path is up; `exec` runs a command on
//! one of its hosts; `status` asks the emulator for its live counters over the control socket;
//! `down` has it tear down and prints the final counters. The state lives in
//! `longhaul_emu::session` (STATE_DIR/NAME.json, .sock, .log).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use longhaul_emu::host_memory::{HostShortage, Plan};
use longhaul_emu::session::{
    self as state, ControlSocket, DEFAULT_NAME, HostInfo, Request, Session,
};
use longhaul_emu::signals::stop_child;
use longhaul_emu::{
    Fabric, FabricConfig, HOST_A_V4, HOST_A_V6, HOST_B_V4, HOST_B_V6, LinkChange, Report,
    Termination, Testbed,
};
use longhaul_units::{Nanos, fmt_duration};

use super::flags::refuse;
use super::flags::{self, PathArgs, PathSummary};
use super::network;
use super::report;
use super::server::start_server;

/// How long `up` waits for the background emulator to report that the path is up.
const UP_TIMEOUT: Duration = Duration::from_secs(60);

/// `longhaul emulate up`.
#[derive(clap::Args, Debug)]
#[command(after_help = "The emulator keeps running in the background (its log: \
/run/longhaul/emulate/NAME.log) until `longhaul emulate down --name NAME`. Hosts: a = lh-NAME-a \
(10.201.0.1, fd00:4c48::1), b = lh-NAME-b (10.201.0.2, fd00:4c48::2), where `longhaul server` runs \
unless --no-server. Run commands on them with `longhaul emulate exec a|b -- CMD`.")]
#[command(mut_arg("json", |a| a.help("Print the testbed (name, pid, hosts, path) as JSON on stdout")))]
pub(crate) struct UpArgs {
    #[command(flatten)]
    path: PathArgs,
    /// The testbed's name: its namespaces are lh-NAME-a and lh-NAME-b.
    #[arg(long, default_value = DEFAULT_NAME)]
    name: String,
    /// Do not start `longhaul server` on host b.
    #[arg(long)]
    no_server: bool,
    /// Serve the links' counters for Prometheus at http://ADDR/metrics (docs/monitor.md).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// Stay in the foreground (until SIGINT/SIGTERM or `down`) instead of running in the background.
    #[arg(long)]
    foreground: bool,
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
    #[command(flatten)]
    ties: crate::testbed::TiesArgs,
}

/// `longhaul emulate exec`.
#[derive(clap::Args, Debug)]
pub(crate) struct ExecArgs {
    /// The testbed.
    #[arg(long, default_value = DEFAULT_NAME)]
    name: String,
    /// The host: `a` (10.201.0.1) or `b` (10.201.0.2), a network's host name, or its namespace.
    #[arg(value_name = "HOST")]
    host: String,
    /// The command, after `--`. Its environment: $LH_HOST_<NAME>, $LH_HOST6_<NAME> and
    /// $LH_NETNS_<NAME> (each host's addresses and namespace, the name upper-cased with '-' as '_'),
    /// $LH_HOSTS (the host names), $LH_HOST (its own), $LH_PEER and $LH_PEER6 (the first other
    /// host: the peer of a two-host testbed).
    #[arg(last = true, required = true, value_name = "CMD")]
    cmd: Vec<String>,
}

/// `longhaul emulate status`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("json", |a| a.help("As JSON: {\"testbeds\": [{name, pid, hosts, path, links: {a_to_b, b_to_a}, fidelity}, ...]}")))]
pub(crate) struct StatusArgs {
    /// Only this testbed (default: every running one).
    #[arg(long)]
    name: Option<String>,
    #[command(flatten)]
    json: crate::args::Json,
}

/// `longhaul emulate link`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "A two-host testbed: `link down` cuts the path in both directions (every packet \
is dropped, counted as cut drops; connections across it see an outage with no error, as when a fibre \
is cut) and `link up` restores it. A network: `link LINK down|up` does the same to one link, and \
`link LINK set --rate 500M --delay 30ms --loss 0.1% ...` changes it (both directions, or one with \
--direction), taking effect for the next packet that reaches it; packets already past it keep their \
times. Every change is logged with its time (`status` lists them). The hosts, their sockets and \
processes are untouched.\n\nExamples:\n  longhaul emulate link down\n  longhaul emulate link gva-chi down\n  \
longhaul emulate link gva-chi set --rate 200M --loss 0.01 --direction a-to-b"
)]
pub(crate) struct LinkArgs {
    /// The testbed.
    #[arg(long, default_value = DEFAULT_NAME)]
    name: String,
    /// `down`, `up` (a two-host testbed's path), or `LINK down|up|set` (a network's link).
    #[arg(value_name = "[LINK] down|up|set", num_args = 1..=2, required = true)]
    words: Vec<String>,
    /// With `set`: the serialization rate, e.g. 500M (0 or `unlimited`: no bottleneck).
    #[arg(long, value_parser = link_rate)]
    rate: Option<u64>,
    /// With `set`: the one-way delay, e.g. 30ms.
    #[arg(long, value_parser = crate::args::duration)]
    delay: Option<Nanos>,
    /// With `set`: random loss per segment, a probability (0.001) or a percentage (0.1%).
    #[arg(long, value_parser = flags::loss)]
    loss: Option<f64>,
    /// With `set`: Gilbert–Elliott burst loss instead of --loss, `p,r[,1-h,1-k]` (netem's gemodel:
    /// good→bad, bad→good, loss in the bad state (default 1), loss in the good state (default 0)).
    #[arg(long, value_name = "p,r[,1-h,1-k]", value_parser = flags::loss_burst, conflicts_with = "loss")]
    loss_burst: Option<longhaul_emu::link::Loss>,
    /// With `set`: the probability that a segment arrives damaged (one bit flipped after the sender's
    /// checksum; the receiver's checksum drops it, as with a bad fibre or transceiver), e.g. 0.5%.
    #[arg(long, value_parser = flags::corrupt)]
    corrupt: Option<f64>,
    /// With `set`: the queue's capacity, e.g. 4M.
    #[arg(long, value_parser = |s: &str| longhaul_units::parse_size(s).map_err(|e| e.to_string()))]
    queue: Option<u64>,
    /// With `set`: uniform jitter up to this much (0: none).
    #[arg(long, value_parser = crate::args::duration)]
    jitter: Option<Nanos>,
    /// With `set`: only this direction of the link (`a-to-b` is from its `a` end).
    #[arg(long, value_parser = ["a-to-b", "b-to-a"])]
    direction: Option<String>,
}

/// `link set --rate`: a rate, or 0 / `unlimited` for none.
fn link_rate(s: &str) -> Result<u64, String> {
    if s.trim() == "0" || s.trim().eq_ignore_ascii_case("unlimited") {
        Ok(0)
    } else {
        crate::args::rate(s)
    }
}

/// `longhaul emulate route`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Pins the route from host FROM to host TO of a running network through \
the routers --via, in order (each pair joined by a link), and the way back through them reversed \
unless --one-way. Records sent from then on take it (within a millisecond); packets on their way \
keep the route they started on. A route may not loop or pass through another host. The next \
traceroute shows it.\n\nExample:\n  longhaul emulate route cern1 star1 --via gva,ams,chi"
)]
pub(crate) struct RouteArgs {
    /// The testbed.
    #[arg(long, default_value = DEFAULT_NAME)]
    name: String,
    /// The sending host.
    from: String,
    /// The receiving host.
    to: String,
    /// The routers in between, in order, e.g. gva,ams,chi.
    #[arg(
        long,
        value_delimiter = ',',
        required = true,
        value_name = "ROUTER,..."
    )]
    via: Vec<String>,
    /// Leave the way back as it is.
    #[arg(long)]
    one_way: bool,
}

/// `longhaul emulate burst`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Adds RATE of synthetic cross traffic to the bottleneck for LENGTH, starting \
--in from now (no packets are made; the queue and the serializer are occupied as if they were). \
Example: a 2-s burst at 90 % of a 1 Gbit/s bottleneck, 10 s from now, in the direction host a sends: \
`longhaul emulate burst 900M 2s --in 10s`."
)]
pub(crate) struct BurstArgs {
    /// The testbed.
    #[arg(long, default_value = DEFAULT_NAME)]
    name: String,
    /// Cross-traffic rate during the burst, e.g. 900M.
    #[arg(value_parser = crate::args::rate)]
    rate: u64,
    /// How long, e.g. 2s.
    #[arg(value_parser = crate::args::duration)]
    length: Nanos,
    /// When, from now.
    #[arg(long = "in", default_value = "0s", value_parser = crate::args::duration)]
    delay: Nanos,
    /// On the b→a direction instead of a→b.
    #[arg(long)]
    reverse: bool,
}

/// `longhaul emulate down`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("json", |a| a.help("Print the final counters as JSON on stdout")))]
pub(crate) struct DownArgs {
    /// The testbed.
    #[arg(long, default_value = DEFAULT_NAME)]
    name: String,
    #[command(flatten)]
    json: crate::args::Json,
}

fn now_unix_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Refuses when `name` is already running; cleans up after it if its emulator died.
fn claim(name: &str) -> anyhow::Result<()> {
    state::check_name(name)?;
    if let Some(deleted) = state::reap(name)? {
        eprintln!(
            "emulate: testbed {name}'s emulator had died; cleaned up {}",
            if deleted.is_empty() {
                "its state files".to_string()
            } else {
                deleted.join(", ")
            }
        );
    }
    if let Some(s) = state::load(name)? {
        bail!(
            "testbed {name} is already up (emulator pid {}); `longhaul emulate down --name {name}` first, \
or pick another --name",
            s.pid
        );
    }
    Ok(())
}

pub(crate) fn up(a: &UpArgs) -> anyhow::Result<ExitCode> {
    // Refuse bad flags, a bad name or a running testbed here, before anything starts.
    let net = match a.path.path.as_deref().map(network::load) {
        Some(Err(e)) => return refuse(flags::Refusal::Usage(e.0)),
        Some(Ok(n)) => n,
        None => None,
    };
    let checked = match &net {
        Some(n) => network::check(n, &a.path, None).map(|_| ()),
        None if a.switches.is_some() || a.no_calibration => Err(flags::Refusal::Usage(
            "--switches and --no-calibration are for networks (a network preset or file with \
[[host]] tables)"
                .into(),
        )),
        None => flags::configure(&a.path, Some(a.name.clone())).map(|_| ()),
    };
    if let Err(r) = checked {
        return refuse(r);
    }
    if !longhaul_sys::has_net_admin() {
        bail!(longhaul_emu::EmuError::NotPrivileged);
    }
    claim(&a.name)?;
    // The reservation check (docs/testbed.md, "Ties").
    let topologies = crate::testbed::topology_of(a.path.path.as_deref())?;
    crate::testbed::check_reservation(&a.ties, &topologies)?;
    if let Some(n) = net.as_ref().filter(|_| !a.no_calibration) {
        super::calibrate::check(n);
    }
    if a.foreground {
        return match net {
            Some(n) => serve_network(a, n),
            None => serve(a),
        };
    }
    let log_path = state::log_file(&a.name);
    let log = state::create_log(&a.name)?;
    let exe = std::env::current_exe().context("cannot find the longhaul executable")?;
    // The same command line, in the foreground, in its own process group (a terminal's Ctrl-C
    // does not reach it) with its standard error in the log.
    let mut child = Command::new(exe)
        .args(std::env::args_os().skip(1))
        .arg("--foreground")
        .args(
            net.is_some()
                .then_some("--no-calibration")
                .filter(|_| !a.no_calibration),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .process_group(0)
        .spawn()
        .context("cannot start the background emulator")?;
    let stdout = child.stdout.take().context("emulator stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(UP_TIMEOUT).unwrap_or_default();
    let Ok(s) = serde_json::from_str::<Session>(line.trim()) else {
        let _ = child.kill();
        let _ = child.wait();
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        let why = log
            .lines()
            .rev()
            .find(|l| l.contains("error"))
            .unwrap_or("no reason logged");
        bail!(
            "testbed {} did not come up: {why} (log: {})",
            a.name,
            log_path.display()
        );
    };
    if a.json.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{}", describe(&s));
        println!(
            "run commands with `longhaul emulate exec{} {} -- CMD`; stop it with `longhaul emulate down{}`",
            name_flag(&s.name),
            s.hosts.first().map_or("a", |h| h.host.as_str()),
            name_flag(&s.name)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn name_flag(name: &str) -> String {
    if name == DEFAULT_NAME {
        String::new()
    } else {
        format!(" --name {name}")
    }
}

/// Who the testbed is, in a few lines.
fn describe(s: &Session) -> String {
    let mut out = format!(
        "testbed {}: emulator pid {}, up {} s\n",
        s.name,
        s.pid,
        now_unix_s().saturating_sub(s.started_unix_s)
    );
    if let Some(line) = s.path.get("line").and_then(|l| l.as_str()) {
        out += &format!("  path: {line}\n");
    }
    if let Some(plan) = s
        .path
        .get("host_memory")
        .and_then(|p| serde_json::from_value::<Plan>(p.clone()).ok())
    {
        out += &format!("  {}\n", plan.line());
    }
    for h in &s.hosts {
        let server = if (h.host == "b" || is_network(s)) && s.server {
            ", longhaul server on port 7067"
        } else {
            ""
        };
        out += &format!(
            "  host {}: {} {} {}{server}\n",
            h.host, h.namespace, h.ipv4, h.ipv6
        );
    }
    out
}

/// The background emulator: brings the testbed up, answers `status` and `down`, tears down.
fn serve(a: &UpArgs) -> anyhow::Result<ExitCode> {
    let (cfg, summary) = match flags::configure(&a.path, Some(a.name.clone())) {
        Ok(c) => c,
        Err(r) => return refuse(r),
    };
    let term = Termination::install().context("cannot install signal handlers")?;
    let bed = Testbed::up(cfg).context("cannot bring up the emulated path")?;
    let mut server = None;
    if !a.no_server {
        server = Some(start_server(bed.host_b(), "b")?);
    }
    let control = ControlSocket::bind(&a.name)?;
    if let Some(at) = a.metrics {
        super::metrics::serve(at, &a.name)?;
    }
    let session = Session {
        name: a.name.clone(),
        pid: std::process::id(),
        started_unix_s: now_unix_s(),
        start_ticks: longhaul_emu::session::process_start_ticks(std::process::id()).unwrap_or(0),
        hosts: vec![
            HostInfo {
                host: "a".into(),
                namespace: bed.host_a().into(),
                ipv4: HOST_A_V4,
                ipv6: HOST_A_V6,
            },
            HostInfo {
                host: "b".into(),
                namespace: bed.host_b().into(),
                ipv4: HOST_B_V4,
                ipv6: HOST_B_V6,
            },
        ],
        path: path_json(&summary, &bed),
        server: server.is_some(),
    };
    state::save(&session)?;
    eprintln!("emulate: testbed {} up: {}", a.name, summary.line());
    eprintln!("emulate: {}", bed.plan().line());
    // The line `up` waits for.
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", serde_json::to_string(&session)?)?;
    out.flush()?;
    drop(out);

    let mut pending_down = None;
    while term.received().is_none() {
        match control.poll() {
            Some((Request::Status, stream)) => {
                let mut doc = status_doc(&session, &bed.snapshot(), a.path.max_lateness);
                doc["link_up"] = bed.link_up().into();
                let _ = state::reply(stream, &doc);
            }
            Some((req @ (Request::LinkDown | Request::LinkUp), stream)) => {
                let up = req == Request::LinkUp;
                bed.set_link(up);
                eprintln!(
                    "emulate: testbed {}: path {}",
                    a.name,
                    if up { "restored" } else { "cut" }
                );
                let mut doc = status_doc(&session, &bed.snapshot(), a.path.max_lateness);
                doc["link_up"] = up.into();
                let _ = state::reply(stream, &doc);
            }
            Some((Request::Down, stream)) => {
                pending_down = Some(stream);
                break;
            }
            Some((
                Request::Burst {
                    a_to_b,
                    delay_ns,
                    length_ns,
                    rate_bps,
                },
                stream,
            )) => {
                let from = longhaul_sys::monotonic_now_ns().saturating_add(delay_ns);
                bed.schedule_burst(a_to_b, from, Nanos(length_ns), rate_bps);
                eprintln!(
                    "emulate: testbed {}: cross-traffic burst of {} for {} in {} s",
                    a.name,
                    longhaul_units::fmt_rate(rate_bps),
                    fmt_duration(Nanos(length_ns)),
                    delay_ns as f64 / 1e9
                );
                let doc = status_doc(&session, &bed.snapshot(), a.path.max_lateness);
                let _ = state::reply(stream, &doc);
            }
            Some((
                Request::LinkState { .. } | Request::LinkSet { .. } | Request::Route { .. },
                stream,
            )) => {
                let why = format!(
                    "testbed {} is a two-host path: it has no named links or routes \
(`longhaul emulate link down|up` cuts or restores its path)",
                    a.name
                );
                let _ = state::reply(stream, &serde_json::json!({ "error": why }));
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    const SIGTERM: i32 = 15;
    if let Some(mut s) = server {
        let _ = stop_child(&mut s, SIGTERM);
    }
    let r = bed.down();
    state::remove(&a.name);
    drop(control);
    eprintln!("emulate: testbed {} down", a.name);
    report::print(&r, a.path.max_lateness, false);
    if let Some(stream) = pending_down {
        let _ = state::reply(stream, &status_doc(&session, &r, a.path.max_lateness));
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether a running testbed is a network (its hosts are named by the network file).
fn is_network(s: &Session) -> bool {
    s.path.get("kind").and_then(|k| k.as_str()) == Some("network")
}

/// The background emulator of a network: brings the fabric up with a `longhaul server` on every
/// host, answers `status`, link and route changes and `down`, tears down.
fn serve_network(a: &UpArgs, net: longhaul_topology::Network) -> anyhow::Result<ExitCode> {
    let term = Termination::install().context("cannot install signal handlers")?;
    let fabric = Fabric::up(FabricConfig {
        tag: Some(a.name.clone()),
        network: net,
        switches: a.switches.map(|n| n as usize),
        cpus: a.path.pin.clone(),
        realtime: a.path.realtime().then_some(50),
        host_tcp_defaults: a.path.host_defaults,
        pcap: a.path.pcap.clone().map(|d| (d, a.path.pcap_snaplen)),
    })
    .context("cannot bring up the emulated network")?;
    let net = fabric.network();
    let namespaces = fabric.namespaces();
    let mut servers = Vec::new();
    if !a.no_server {
        for (ns, h) in namespaces.iter().zip(&net.hosts) {
            servers.push(start_server(ns, &h.name)?);
        }
    }
    let control = ControlSocket::bind(&a.name)?;
    if let Some(at) = a.metrics {
        super::metrics::serve(at, &a.name)?;
    }
    let line = format!(
        "network {}: {} hosts, {} routers, {} links",
        net.name,
        net.hosts.len(),
        net.routers.len(),
        net.links.len()
    );
    let session = Session {
        name: a.name.clone(),
        pid: std::process::id(),
        started_unix_s: now_unix_s(),
        start_ticks: longhaul_emu::session::process_start_ticks(std::process::id()).unwrap_or(0),
        hosts: net
            .hosts
            .iter()
            .zip(&namespaces)
            .map(|(h, ns)| HostInfo {
                host: h.name.clone(),
                namespace: ns.clone(),
                ipv4: h.v4,
                ipv6: h.v6,
            })
            .collect(),
        path: serde_json::json!({
            "kind": "network",
            "network": net.name,
            "line": line,
            "routes": network::routes(&net).lines().collect::<Vec<_>>(),
            "tcp_buffer_max": fabric.tcp_buffer_max(),
        }),
        server: !servers.is_empty(),
    };
    state::save(&session)?;
    eprintln!("emulate: testbed {} up: {line}", a.name);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", serde_json::to_string(&session)?)?;
    out.flush()?;
    drop(out);

    let max = a.path.max_lateness;
    let status = |r: &longhaul_emu::FabricReport| network_status_doc(&session, r, max);
    let mut pending_down = None;
    while term.received().is_none() {
        let Some((req, stream)) = control.poll() else {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        let done = match req {
            Request::Status => Ok(()),
            Request::Down => {
                pending_down = Some(stream);
                break;
            }
            Request::LinkState { link, up } => fabric.set_link_up(&link, up),
            Request::LinkSet {
                link,
                a_to_b,
                change,
            } => fabric.change_link(&link, a_to_b, &link_change(&change)),
            Request::Route {
                from,
                to,
                via,
                both,
            } => fabric.set_route(&from, &to, &via, both),
            Request::LinkDown | Request::LinkUp | Request::Burst { .. } => {
                Err(longhaul_emu::EmuError::Config(format!(
                    "testbed {} is a network: name the link (`longhaul emulate link LINK down|up`; \
links: {})",
                    a.name,
                    net.links
                        .iter()
                        .map(|l| l.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
        };
        let doc = match done {
            Ok(()) => status(&fabric.snapshot()),
            Err(e) => {
                eprintln!("emulate: testbed {}: {e}", a.name);
                serde_json::json!({ "error": e.to_string() })
            }
        };
        let _ = state::reply(stream, &doc);
    }
    const SIGTERM: i32 = 15;
    for mut s in servers {
        let _ = stop_child(&mut s, SIGTERM);
    }
    let r = fabric.down();
    state::remove(&a.name);
    drop(control);
    eprintln!("emulate: testbed {} down", a.name);
    network::print(&r, max, false);
    if let Some(stream) = pending_down {
        let _ = state::reply(stream, &status(&r));
    }
    Ok(ExitCode::SUCCESS)
}

/// A request's link setting as the fabric takes it.
fn link_change(s: &state::LinkSetting) -> LinkChange {
    LinkChange {
        rate_bps: s.rate_bps,
        delay: s.delay_ns.map(Nanos),
        loss: match (s.loss_burst, s.loss) {
            (Some([p, r, one_minus_h, one_minus_k]), _) => {
                Some(longhaul_emu::link::Loss::GilbertElliott {
                    p,
                    r,
                    one_minus_h,
                    one_minus_k,
                })
            }
            (None, Some(0.0)) => Some(longhaul_emu::link::Loss::None),
            (None, Some(p)) => Some(longhaul_emu::link::Loss::Bernoulli { p }),
            (None, None) => None,
        },
        corrupt: s.corrupt,
        queue_bytes: s.queue_bytes,
        jitter: s.jitter_ns.map(|j| {
            if j == 0 {
                longhaul_emu::link::Jitter::None
            } else {
                longhaul_emu::link::Jitter::Uniform { max: Nanos(j) }
            }
        }),
    }
}

/// A network's session plus its counters: `network` (every link, switch and change) and
/// `fidelity`.
fn network_status_doc(
    s: &Session,
    r: &longhaul_emu::FabricReport,
    max_p99: Nanos,
) -> serde_json::Value {
    let mut doc = serde_json::to_value(s).expect("a session serialises");
    doc["uptime_s"] = now_unix_s().saturating_sub(s.started_unix_s).into();
    doc["network"] = serde_json::to_value(r).expect("a report serialises");
    doc["fidelity"] = network::fidelity(r, max_p99);
    doc
}

fn path_json(summary: &PathSummary, bed: &Testbed) -> serde_json::Value {
    let mut v = serde_json::to_value(summary).expect("the summary serialises");
    v["line"] = serde_json::Value::String(summary.line() + &summary.impairments);
    v["tcp_buffer_max"] = bed.tcp_buffer_max().into();
    v["host_memory"] = serde_json::to_value(bed.plan()).expect("the plan serialises");
    v
}

/// The session plus the counters: `links` {a_to_b, b_to_a} and `fidelity`.
fn status_doc(s: &Session, r: &Report, max_p99: Nanos) -> serde_json::Value {
    let mut doc = serde_json::to_value(s).expect("a session serialises");
    doc["uptime_s"] = now_unix_s().saturating_sub(s.started_unix_s).into();
    doc["links"] = serde_json::json!({ "a_to_b": r.a_to_b, "b_to_a": r.b_to_a });
    doc["fidelity"] = report::fidelity(r, max_p99);
    doc["host_memory"] = serde_json::to_value(&r.host_memory).expect("the plan serialises");
    doc["tcp_shortage"] = serde_json::to_value(&r.tcp_shortage).expect("counters serialise");
    doc
}

/// The emulator's text report from a status document.
fn counters_text(doc: &serde_json::Value) -> String {
    if let Ok(r) = serde_json::from_value::<longhaul_emu::FabricReport>(doc["network"].clone()) {
        let max = Nanos(
            doc["fidelity"]["max_p99_lateness_ns"]
                .as_u64()
                .unwrap_or(1_000_000),
        );
        return network::text(&r, max)
            .lines()
            .map(|l| format!("  {l}\n"))
            .collect();
    }
    let mut out = String::new();
    for key in ["a_to_b", "b_to_a"] {
        if let Ok(d) = serde_json::from_value(doc["links"][key].clone()) {
            out += &format!("  {}\n", report::direction_line(&d));
        }
    }
    if let Ok(hosts) = serde_json::from_value::<Vec<HostShortage>>(doc["tcp_shortage"].clone()) {
        out += &report::shortage_lines(&hosts, "  ");
    }
    let f = &doc["fidelity"];
    if f["ok"].as_bool() == Some(true) {
        out += "  fidelity: OK\n";
    } else {
        let problems: Vec<String> = f["problems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str().map(str::to_string))
            .collect();
        out += &format!("  fidelity: NOT TRUSTWORTHY ({})\n", problems.join("; "));
    }
    out
}

pub(crate) fn status(a: &StatusArgs) -> anyhow::Result<ExitCode> {
    let names: Vec<String> = match &a.name {
        Some(n) => {
            state::check_name(n)?;
            vec![n.clone()]
        }
        None => state::list()?.into_iter().map(|s| s.name).collect(),
    };
    let mut docs = Vec::new();
    let mut text = String::new();
    for name in &names {
        if let Some(deleted) = state::reap(name)? {
            text += &format!(
                "testbed {name}: its emulator had died; cleaned up {}\n",
                deleted.join(", ")
            );
            continue;
        }
        let Some(s) = state::load(name)? else {
            continue;
        };
        let doc = state::request(name, Request::Status)?;
        text += &describe(&s);
        text += &counters_text(&doc);
        docs.push(doc);
    }
    if a.json.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "testbeds": docs }))?
        );
    } else if docs.is_empty() && text.is_empty() {
        println!("no testbed is up");
    } else {
        print!("{text}");
    }
    if let Some(n) = &a.name
        && docs.is_empty()
    {
        bail!("testbed {n} is not up");
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn down(a: &DownArgs) -> anyhow::Result<ExitCode> {
    state::check_name(&a.name)?;
    if let Some(deleted) = state::reap(&a.name)? {
        println!(
            "testbed {}: its emulator had died; cleaned up {}",
            a.name,
            if deleted.is_empty() {
                "its state files".to_string()
            } else {
                deleted.join(", ")
            }
        );
        return Ok(ExitCode::SUCCESS);
    }
    let Some(s) = state::load(&a.name)? else {
        bail!("testbed {} is not up", a.name);
    };
    let doc = state::request(&a.name, Request::Down)?;
    // The emulator answers after the teardown; wait for it to exit too.
    for _ in 0..100 {
        if !s.alive() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // A clean teardown needs no post-mortem: the log goes with it (a crashed emulator's stays).
    let _ = std::fs::remove_file(state::log_file(&a.name));
    if a.json.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        // The start is recorded to the second.
        let up = match doc["uptime_s"].as_u64().unwrap_or(0) {
            0 => "under a second".to_string(),
            s => fmt_duration(Nanos::from_secs(s)),
        };
        println!("testbed {} down after {up}", a.name);
        print!("{}", counters_text(&doc));
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn link(a: &LinkArgs) -> anyhow::Result<ExitCode> {
    state::check_name(&a.name)?;
    let Some(s) = state::load(&a.name)?.filter(Session::alive) else {
        bail!("testbed {} is not up", a.name);
    };
    let setting = state::LinkSetting {
        rate_bps: a.rate,
        delay_ns: a.delay.map(Nanos::as_nanos),
        loss: a.loss,
        loss_burst: a.loss_burst.map(|l| match l {
            longhaul_emu::link::Loss::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => [p, r, one_minus_h, one_minus_k],
            _ => unreachable!("flags::loss_burst gives a Gilbert–Elliott model"),
        }),
        corrupt: a.corrupt,
        queue_bytes: a.queue,
        jitter_ns: a.jitter.map(Nanos::as_nanos),
    };
    let (link, verb) = match a.words.as_slice() {
        [verb] => (None, verb.as_str()),
        [link, verb] => (Some(link.as_str()), verb.as_str()),
        _ => bail!("give `down`, `up`, or `LINK down|up|set`"),
    };
    let setting_given = setting != state::LinkSetting::default() || a.direction.is_some();
    if verb != "set" && setting_given {
        return refuse(flags::Refusal::Usage(
            "--rate, --delay, --loss, --loss-burst, --corrupt, --queue, --jitter and --direction \
go with `LINK set`"
                .into(),
        ));
    }
    let req = match (link, verb, is_network(&s)) {
        (None, "up" | "down", false) => {
            if verb == "up" {
                Request::LinkUp
            } else {
                Request::LinkDown
            }
        }
        (None, _, true) => {
            return refuse(flags::Refusal::Usage(format!(
                "testbed {} is a network: name the link (`longhaul emulate link LINK {verb}`)",
                a.name
            )));
        }
        (Some(_), _, false) => {
            return refuse(flags::Refusal::Usage(format!(
                "testbed {} is a two-host path: `longhaul emulate link down|up` cuts or restores it",
                a.name
            )));
        }
        (Some(l), "up" | "down", true) => Request::LinkState {
            link: l.to_owned(),
            up: verb == "up",
        },
        (Some(l), "set", true) => {
            if setting == state::LinkSetting::default() {
                return refuse(flags::Refusal::Usage(
                    "`set` needs at least one of --rate, --delay, --loss, --loss-burst, --corrupt, \
--queue, --jitter"
                        .into(),
                ));
            }
            Request::LinkSet {
                link: l.to_owned(),
                a_to_b: a.direction.as_deref().map(|d| d == "a-to-b"),
                change: setting,
            }
        }
        (_, other, _) => {
            return refuse(flags::Refusal::Usage(format!(
                "{other:?}: give down, up or (with a link) set"
            )));
        }
    };
    let doc = state::request(&a.name, req)?;
    if let Some(e) = doc.get("error").and_then(|e| e.as_str()) {
        bail!("{e}");
    }
    match link {
        None => println!(
            "testbed {}: path {}",
            a.name,
            if doc["link_up"].as_bool() == Some(true) {
                "up"
            } else {
                "cut (down)"
            }
        ),
        Some(_) => println!("testbed {}: {}", a.name, last_change(&doc)),
    }
    Ok(ExitCode::SUCCESS)
}

/// The newest change a network's status document lists.
fn last_change(doc: &serde_json::Value) -> String {
    doc["network"]["changes"]
        .as_array()
        .and_then(|c| c.last())
        .map_or_else(String::new, |c| {
            format!(
                "{} (at {})",
                c["what"].as_str().unwrap_or_default(),
                c["at"].as_str().unwrap_or_default()
            )
        })
}

pub(crate) fn route(a: &RouteArgs) -> anyhow::Result<ExitCode> {
    state::check_name(&a.name)?;
    let Some(s) = state::load(&a.name)?.filter(Session::alive) else {
        bail!("testbed {} is not up", a.name);
    };
    if !is_network(&s) {
        return refuse(flags::Refusal::Usage(format!(
            "testbed {} is a two-host path: it has one route",
            a.name
        )));
    }
    let doc = state::request(
        &a.name,
        Request::Route {
            from: a.from.clone(),
            to: a.to.clone(),
            via: a.via.clone(),
            both: !a.one_way,
        },
    )?;
    if let Some(e) = doc.get("error").and_then(|e| e.as_str()) {
        bail!("{e}");
    }
    println!("testbed {}: {}", a.name, last_change(&doc));
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn burst(a: &BurstArgs) -> anyhow::Result<ExitCode> {
    state::check_name(&a.name)?;
    if state::load(&a.name)?.filter(Session::alive).is_none() {
        bail!("testbed {} is not up", a.name);
    }
    if a.length == Nanos::ZERO {
        bail!("the burst's LENGTH must be > 0");
    }
    state::request(
        &a.name,
        Request::Burst {
            a_to_b: !a.reverse,
            delay_ns: a.delay.as_nanos(),
            length_ns: a.length.as_nanos(),
            rate_bps: a.rate,
        },
    )?;
    println!(
        "testbed {}: cross-traffic burst of {} for {} in {}",
        a.name,
        longhaul_units::fmt_rate(a.rate),
        fmt_duration(a.length),
        fmt_duration(a.delay)
    );
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn exec(a: &ExecArgs) -> anyhow::Result<ExitCode> {
    state::check_name(&a.name)?;
    let Some(s) = state::load(&a.name)?.filter(Session::alive) else {
        bail!(
            "testbed {} is not up; start it with `longhaul emulate up{}`",
            a.name,
            name_flag(&a.name)
        );
    };
    let Some(host) = s.host(&a.host) else {
        let names: Vec<&str> = s.hosts.iter().map(|h| h.host.as_str()).collect();
        bail!(
            "testbed {} has no host {:?}; its hosts are {}",
            a.name,
            a.host,
            names.join(", ")
        );
    };
    let hosts: Vec<network::EnvHost> = s
        .hosts
        .iter()
        .map(|h| network::EnvHost {
            name: h.host.clone(),
            v4: h.ipv4,
            v6: h.ipv6,
            namespace: h.namespace.clone(),
        })
        .collect();
    let me = s
        .hosts
        .iter()
        .position(|h| h.host == host.host)
        .context("the host is the testbed's")?;
    let env = network::host_env(&hosts, me);
    let err = Command::new("ip")
        .args(["netns", "exec", &host.namespace])
        .args(&a.cmd)
        .envs(env)
        .exec();
    bail!("cannot run `ip netns exec {}`: {err}", host.namespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_text_shows_both_directions_and_the_verdict() {
        let r = Report {
            host_a: "lh-x-a".into(),
            host_b: "lh-x-b".into(),
            tcp_buffer_max: 1 << 22,
            a_to_b: longhaul_emu::DirectionStats {
                name: "a→b".into(),
                ..Default::default()
            },
            b_to_a: longhaul_emu::DirectionStats {
                name: "b→a".into(),
                tun_tx_dropped: Some(3),
                ..Default::default()
            },
            host_memory: None,
            tcp_shortage: vec![HostShortage::new(
                "lh-x-b",
                &longhaul_sys::ShortOfMemory {
                    ofo_pruned: 12,
                    ..Default::default()
                },
            )],
        };
        let s = Session {
            name: "x".into(),
            pid: 1,
            started_unix_s: now_unix_s(),
            start_ticks: 0,
            hosts: Vec::new(),
            path: serde_json::json!({ "line": "RTT 40 ms" }),
            server: false,
        };
        let doc = status_doc(&s, &r, Nanos::MILLISECOND);
        let text = counters_text(&doc);
        assert!(text.contains("  a→b: 0 records"), "{text}");
        assert!(text.contains("TUN tx drops 3"), "{text}");
        assert!(
            text.contains("NOT TRUSTWORTHY (b→a: the TUN device dropped 3 packets itself)"),
            "{text}"
        );
        assert_eq!(doc["links"]["b_to_a"]["tun_tx_dropped"], 3);
        assert!(
            text.contains(
                "  host memory: TCP on lh-x-b ran short: 12 out-of-order packets dropped (OfoPruned)"
            ),
            "{text}"
        );
        assert_eq!(doc["tcp_shortage"][0]["ofo_pruned"], 12);
        assert!(describe(&s).contains("path: RTT 40 ms"));
    }
}
