//! `longhaul monitor`: watch a mesh of hosts continuously (docs/monitor.md). `run` drives the
//! schedule through the controller and archives every result (`longhaul_monitor_service`),
//! `check` reads a mesh file and says what it would run, `results` reads the archive back. The
//! mesh and the schedule are `longhaul_monitor`'s.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use longhaul_monitor::{Mesh, Status, TestKind};
use longhaul_monitor_service::archive::{is_postgres, path_text};
use longhaul_monitor_service::runner::Settings;
use longhaul_monitor_service::{Plan, ProbeShape, Record};
use longhaul_units::{Nanos, fmt_duration, fmt_rate};

use crate::args;

/// `longhaul monitor`.
#[derive(clap::Args, Debug)]
pub(crate) struct MonitorArgs {
    #[command(subcommand)]
    command: MonitorCommand,
}

#[derive(clap::Subcommand, Debug)]
enum MonitorCommand {
    /// Run the mesh's schedule until SIGINT or SIGTERM, archiving every result.
    #[command(
        after_help = "Every host of the mesh runs `longhaul server --controllers FILE` \
listing this monitor's key (docs/fleet.md): the monitor asks each pair's sending host for the test, \
the probe stream or the trace, as `longhaul test A --to B` would. Results go to the archive (SQLite \
by default, or --archive postgres://...), one row per run and window; a restarted monitor resumes \
the schedule where it stopped.\n\nExample:\n  longhaul monitor run lhc.toml --key ops.key"
    )]
    Run(RunArgs),
    /// Read a mesh file and print its hosts, tests, pairs and runs per day; exit 1 if it is bad.
    Check(CheckArgs),
    /// Print archived results.
    Results(ResultsArgs),
}

/// Where the archive is.
#[derive(clap::Args, Debug)]
struct ArchiveArg {
    /// The archive: a SQLite file (created if missing) or postgres://USER@HOST/DB [default:
    /// ~/.local/share/longhaul/monitor/MESH.sqlite].
    #[arg(long, value_name = "URL|FILE")]
    archive: Option<String>,
}

impl ArchiveArg {
    fn url(&self, mesh: &str) -> anyhow::Result<String> {
        if let Some(a) = &self.archive {
            return Ok(a.clone());
        }
        let dir = longhaul_sys::data_dir()
            .context("no --archive given and no $HOME for the default archive")?
            .join("monitor");
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(dir.join(format!("{mesh}.sqlite")).display().to_string())
    }
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    config: crate::config::ConfigArgs,
    /// The mesh file (TOML: hosts, groups, tests; docs/monitor.md).
    mesh: PathBuf,
    #[command(flatten)]
    archive: ArchiveArg,
    /// This monitor's controller key file [default: $LONGHAUL_KEY, else ~/.config/longhaul/key].
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    /// Seed of the schedule (each run's start within its slip) [default: from the mesh's name, so
    /// a restarted monitor plans the same instants].
    #[arg(long)]
    seed: Option<u64>,
    /// Keep results this long (e.g. 30d, 12h); older ones are pruned hourly [default: for ever].
    #[arg(long, value_parser = args::seconds)]
    retention: Option<Nanos>,
    /// Time between the probes of a latency stream.
    #[arg(long, default_value = "100ms", value_parser = args::duration)]
    probe_interval: Nanos,
    /// Bytes of each probe (64 to 8972).
    #[arg(long, default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(64..=8972))]
    probe_size: u32,
    /// Seconds to wait for each server at each step of a run's set-up.
    #[arg(long, default_value = "10", value_parser = args::seconds)]
    connect_timeout: Nanos,
    /// On SIGINT/SIGTERM, how long to wait for the runs under way before exiting.
    #[arg(long, default_value = "30", value_parser = args::seconds)]
    drain: Nanos,
    /// Serve /metrics (Prometheus) and the JSON API (/api/v1/results, /api/v1/events,
    /// /api/v1/mesh) here; port 0 picks a free one, printed at start.
    #[arg(long, default_value = "127.0.0.1:7069", value_name = "ADDR")]
    listen: std::net::SocketAddr,
    /// Serve nothing over HTTP.
    #[arg(long, conflicts_with = "listen")]
    no_listen: bool,
    /// Log level (error, warn, info, debug).
    #[arg(long, default_value = "info")]
    log: String,
    /// Print each result as one JSON line (JSON Lines) instead of text.
    #[command(flatten)]
    json: args::Json,
}

#[derive(clap::Args, Debug)]
struct CheckArgs {
    /// The mesh file.
    mesh: PathBuf,
}

#[derive(clap::Args, Debug)]
struct ResultsArgs {
    /// The mesh file (its name selects the results).
    mesh: PathBuf,
    #[command(flatten)]
    archive: ArchiveArg,
    /// Only results that started this long ago or later.
    #[arg(long, default_value = "1d", value_parser = args::seconds)]
    since: Nanos,
    #[command(flatten)]
    json: args::Json,
}

pub(crate) fn run(a: &MonitorArgs) -> anyhow::Result<ExitCode> {
    match &a.command {
        MonitorCommand::Run(r) => run_mesh(r),
        MonitorCommand::Check(c) => check(c),
        MonitorCommand::Results(r) => results(r),
    }
}

fn read_mesh(path: &Path) -> anyhow::Result<Mesh> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mesh = Mesh::from_toml(&text, &path.display().to_string())?;
    for t in &mesh.tests {
        if t.kind == TestKind::Throughput {
            test_params(&mesh, t)
                .with_context(|| format!("{}: test {:?}: args", path.display(), t.name))?;
        }
    }
    Ok(mesh)
}

fn test_params(
    mesh: &Mesh,
    t: &longhaul_monitor::TestSpec,
) -> anyhow::Result<longhaul_proto::TestParams> {
    let from = t
        .pairs
        .first()
        .map_or("", |&(f, _)| mesh.hosts[f].address.as_str());
    crate::test::file_flags(from, &t.args)
}

/// The default seed: the mesh's name, hashed (FNV-1a), so a restart plans the same instants.
fn name_seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn run_mesh(a: &RunArgs) -> anyhow::Result<ExitCode> {
    crate::logging::to_stderr(&a.log);
    let mesh = read_mesh(&a.mesh)?;
    let params = mesh
        .tests
        .iter()
        .map(|t| {
            (t.kind == TestKind::Throughput)
                .then(|| test_params(&mesh, t))
                .transpose()
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let url = a.archive.url(&mesh.name)?;
    let plan = Plan {
        key: crate::transfer::load_key(a.key.as_deref())?,
        params,
        timeout: a.connect_timeout.to_duration(),
        probe: ProbeShape {
            interval: a.probe_interval.to_duration(),
            size: a.probe_size,
        },
        mesh,
    };
    anyhow::ensure!(
        plan.probe.interval.as_nanos() >= u128::from(longhaul_proto::probe::MIN_INTERVAL_NS),
        "--probe-interval must be at least 1ms"
    );
    let settings = Settings {
        seed: a.seed.unwrap_or_else(|| name_seed(&plan.mesh.name)),
        retention: a.retention.map(Nanos::to_duration),
        drain: a.drain.to_duration(),
    };
    let json = a.json.json;
    let listen = (!a.no_listen).then_some(a.listen);
    let listening = |at| {
        eprintln!("longhaul monitor listening on http://{at}");
        crate::systemd::ready(&format!("monitoring; API on http://{at}"));
    };
    longhaul_monitor_service::monitor(plan, &url, settings, listen, listening, move |mesh, r| {
        let line = if json {
            r.to_json(mesh).to_string()
        } else {
            record_text(mesh, r)
        };
        let mut out = std::io::stdout().lock();
        // A closed output (a pipe whose reader left) stops the printing, not the monitor.
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    })?;
    Ok(ExitCode::SUCCESS)
}

fn record_text(mesh: &Mesh, r: &Record) -> String {
    let o = &r.outcome;
    let m = &o.measures;
    let who = format!(
        "{} {} -> {}",
        mesh.tests[o.run.test].name, mesh.hosts[o.run.from].name, mesh.hosts[o.run.to].name
    );
    let what = match o.status {
        Status::Down => format!(
            "DOWN ({})",
            o.down_host.map_or("?", |h| mesh.hosts[h].name.as_str())
        ),
        Status::Failed => format!("FAILED: {}", o.error.as_deref().unwrap_or("")),
        Status::Ok => {
            let mut parts = Vec::new();
            if let Some(b) = m.bits_per_second {
                parts.push(fmt_rate(b.round() as u64));
            }
            if let Some(r) = m.retransmits {
                parts.push(format!("{r} retransmits"));
            }
            if let Some(l) = m.loss {
                parts.push(format!("loss {:.2} %", l * 100.0));
            }
            if let Some(r) = m.rtt_ns {
                parts.push(format!("rtt {}", fmt_duration(Nanos(r))));
            }
            if let Some(j) = m.jitter_ns {
                parts.push(format!("jitter {}", fmt_duration(Nanos(j))));
            }
            if let Some(p) = &m.path {
                parts.push(format!("path {}", path_text(p)));
            }
            parts.join(", ")
        }
    };
    let mut line = format!("{who}: {what}");
    for e in &r.alerts {
        line += &format!(
            "\n  ALERT {} {}",
            mesh.alerts[e.rule].name,
            if e.firing { "FIRING" } else { "cleared" }
        );
    }
    if let Some(c) = &r.change {
        line += &format!(
            "\n  PATH CHANGED: {} => {}",
            path_text(&c.before),
            path_text(&c.after)
        );
    }
    line
}

fn check(a: &CheckArgs) -> anyhow::Result<ExitCode> {
    let mesh = read_mesh(&a.mesh)?;
    println!(
        "mesh {}: {} hosts, {} tests",
        mesh.name,
        mesh.hosts.len(),
        mesh.tests.len()
    );
    for t in &mesh.tests {
        let per_day = 86_400_000_000_000 / t.every.0.max(1) * t.pairs.len() as u64;
        println!(
            "  {:<24} {:<10} {:>6} pairs  every {:<8} slip {:<8} {} runs a day",
            t.name,
            t.kind.as_str(),
            t.pairs.len(),
            fmt_duration(t.every),
            fmt_duration(t.slip),
            per_day
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn results(a: &ResultsArgs) -> anyhow::Result<ExitCode> {
    let mesh = read_mesh(&a.mesh)?;
    let url = a.archive.url(&mesh.name)?;
    if !is_postgres(&url) {
        let path = url.strip_prefix("sqlite://").unwrap_or(&url);
        anyhow::ensure!(Path::new(path).exists(), "no archive at {path}");
    }
    let rows = longhaul_monitor_service::results(&url, &mesh.name, a.since.to_duration())?;
    match print_results(&rows, a.json.json) {
        // A reader that left (`| head`) ends the listing, quietly.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        r => r
            .map(|()| ExitCode::SUCCESS)
            .context("cannot print the results"),
    }
}

fn print_results(rows: &[longhaul_monitor_service::ResultRow], json: bool) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        return writeln!(out, "{}", serde_json::to_string_pretty(rows)?);
    }
    for r in rows {
        let at = jiff::Timestamp::from_nanosecond(i128::from(r.started_ns))
            .map_or_else(|_| r.started_ns.to_string(), |t| t.to_string());
        let figure = match (r.status.as_str(), r.bits_per_second, r.loss, &r.path) {
            ("ok", Some(b), ..) => fmt_rate(b.round() as u64),
            ("ok", None, Some(l), _) => format!("loss {:.2} %", l * 100.0),
            ("ok", None, None, Some(p)) => p.clone(),
            ("down", ..) => format!("DOWN ({})", r.down_host.as_deref().unwrap_or("?")),
            (s, ..) => s.to_uppercase(),
        };
        writeln!(out, "{at}  {:<16} {} -> {}: {figure}", r.test, r.src, r.dst)?;
    }
    out.flush()
}
