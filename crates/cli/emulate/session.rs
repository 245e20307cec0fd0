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
use longhaul_emu::session::{
    self as state, ControlSocket, DEFAULT_NAME, HostInfo, Request, Session,
};
use longhaul_emu::signals::stop_child;
use longhaul_emu::{HOST_A_V4, HOST_A_V6, HOST_B_V4, HOST_B_V6, Report, Termination, Testbed};
use longhaul_units::{Nanos, fmt_duration};

use super::flags::refuse;
use super::flags::{self, PathArgs, PathSummary};
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
    /// Stay in the foreground (until SIGINT/SIGTERM or `down`) instead of running in the background.
    #[arg(long)]
    foreground: bool,
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
    /// The host: `a` (10.201.0.1) or `b` (10.201.0.2), or its namespace name.
    #[arg(value_name = "HOST")]
    host: String,
    /// The command, after `--`; $LH_PEER and $LH_PEER6 hold the other host's addresses.
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
    after_help = "`down` cuts the path in both directions: every packet is dropped (counted \
as cut drops) and connections across it see an outage with no error, as when a fibre is cut; `up` \
restores it. The hosts, their sockets and processes are untouched."
)]
pub(crate) struct LinkArgs {
    /// The testbed.
    #[arg(long, default_value = DEFAULT_NAME)]
    name: String,
    /// `down` (cut the path) or `up` (restore it).
    #[arg(value_parser = ["down", "up"])]
    state: String,
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
    if let Err(r) = flags::configure(&a.path, Some(a.name.clone())) {
        return refuse(r);
    }
    if !longhaul_sys::has_net_admin() {
        bail!(longhaul_emu::EmuError::NotPrivileged);
    }
    claim(&a.name)?;
    // The reservation check (docs/testbed.md, "Ties").
    let topologies = crate::testbed::topology_of(a.path.path.as_deref())?;
    crate::testbed::check_reservation(&a.ties, &topologies)?;
    if a.foreground {
        return serve(a);
    }
    let log_path = state::log_file(&a.name);
    let log = state::create_log(&a.name)?;
    let exe = std::env::current_exe().context("cannot find the longhaul executable")?;
    // The same command line, in the foreground, in its own process group (a terminal's Ctrl-C
    // does not reach it) with its standard error in the log.
    let mut child = Command::new(exe)
        .args(std::env::args_os().skip(1))
        .arg("--foreground")
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
            "run commands with `longhaul emulate exec{} a -- CMD`; stop it with `longhaul emulate down{}`",
            name_flag(&s.name),
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
    for h in &s.hosts {
        let server = if h.host == "b" && s.server {
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
        server = Some(start_server(bed.host_b())?);
    }
    let control = ControlSocket::bind(&a.name)?;
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

fn path_json(summary: &PathSummary, bed: &Testbed) -> serde_json::Value {
    let mut v = serde_json::to_value(summary).expect("the summary serialises");
    v["line"] = serde_json::Value::String(summary.line() + &summary.impairments);
    v["tcp_buffer_max"] = bed.tcp_buffer_max().into();
    v
}

/// The session plus the counters: `links` {a_to_b, b_to_a} and `fidelity`.
fn status_doc(s: &Session, r: &Report, max_p99: Nanos) -> serde_json::Value {
    let mut doc = serde_json::to_value(s).expect("a session serialises");
    doc["uptime_s"] = now_unix_s().saturating_sub(s.started_unix_s).into();
    doc["links"] = serde_json::json!({ "a_to_b": r.a_to_b, "b_to_a": r.b_to_a });
    doc["fidelity"] = report::fidelity(r, max_p99);
    doc
}

/// The emulator's text report from a status document.
fn counters_text(doc: &serde_json::Value) -> String {
    let mut out = String::new();
    for key in ["a_to_b", "b_to_a"] {
        if let Ok(d) = serde_json::from_value(doc["links"][key].clone()) {
            out += &format!("  {}\n", report::direction_line(&d));
        }
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
        println!(
            "testbed {} down after {}",
            a.name,
            fmt_duration(Nanos::from_secs(doc["uptime_s"].as_u64().unwrap_or(0)))
        );
        print!("{}", counters_text(&doc));
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn link(a: &LinkArgs) -> anyhow::Result<ExitCode> {
    state::check_name(&a.name)?;
    if state::load(&a.name)?.filter(Session::alive).is_none() {
        bail!("testbed {} is not up", a.name);
    }
    let req = if a.state == "up" {
        Request::LinkUp
    } else {
        Request::LinkDown
    };
    let doc = state::request(&a.name, req)?;
    println!(
        "testbed {}: path {}",
        a.name,
        if doc["link_up"].as_bool() == Some(true) {
            "up"
        } else {
            "cut (down)"
        }
    );
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
        bail!(
            "testbed {} has no host {:?}; its hosts are a and b",
            a.name,
            a.host
        );
    };
    let peer = s
        .hosts
        .iter()
        .find(|h| h.host != host.host)
        .context("the testbed has one host")?;
    let err = Command::new("ip")
        .args(["netns", "exec", &host.namespace])
        .args(&a.cmd)
        .env("LH_PEER", peer.ipv4.to_string())
        .env("LH_PEER6", peer.ipv6.to_string())
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
        assert!(describe(&s).contains("path: RTT 40 ms"));
    }
}
