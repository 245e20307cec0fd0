//! `longhaul lab`: the seeds' experiments as data. `run` runs an experiment (a built-in or a TOML
//! file) on the emulated testbed and archives its result file; `list`/`show` browse the archive;
//! `report` writes a self-contained HTML report with plots; `builtins` lists the built-in
//! experiments; `records` shows the Land Speed Record table and checks runs against the rules.
//! Flags and output only; the work is in `longhaul-lab` and `longhaul-experiments`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use longhaul_experiments::records::{
    self, RECORDS, Verdict, check, eligible, leaderboard, table_markdown,
};
use longhaul_experiments::result::ResultFile;
use longhaul_lab::runner::{self, Progress, RunOptions};
use longhaul_lab::{Archive, plot, report};
use serde_json::{Value, json};

/// Progress and notes on standard error; a closed standard error (a reader that went away) is
/// not a reason to stop a run.
macro_rules! note {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// `longhaul lab` subcommands.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "EXPERIMENT is a built-in name (`longhaul lab builtins`) or an experiment file \
(TOML, docs/lab.md). Runs are archived in $XDG_DATA_HOME/longhaul/lab (else ~/.local/share/longhaul/lab) \
unless --archive DIR; RUN is a run id, a unique prefix of one, an experiment name (its latest run) or a \
result file. `run` needs root (it brings up emulated testbeds).\n\nExamples:\n  \
longhaul lab builtins\n  \
sudo longhaul lab run window-sweep\n  \
sudo longhaul lab run loss-recovery --reduced\n  \
sudo longhaul lab run lsr-tokyo-loop --realtime --pin 0,1\n  \
longhaul lab list\n  \
longhaul lab report window-sweep -o window-sweep.html\n  \
longhaul lab records --check window-sweep"
)]
pub(crate) struct LabArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Run an experiment point by point on emulated testbeds and archive its result file.
    Run(RunArgs),
    /// List the archived runs (incomplete and untrustworthy ones marked).
    List(ListArgs),
    /// Show one run: points, measured vs predicted, fidelity.
    Show(ShowArgs),
    /// Write a self-contained HTML report (tables, metadata, plots) of one or more runs.
    Report(ReportArgs),
    /// Render a run's plots (PNG and SVG) into a directory.
    Plot(PlotArgs),
    /// List the built-in experiments.
    Builtins(BuiltinsArgs),
    /// The Land Speed Record table; with --check, a run against the contest rules and the leaderboard.
    Records(RecordsArgs),
}

#[derive(clap::Args, Debug)]
struct ArchiveArg {
    /// The archive directory.
    #[arg(long, value_name = "DIR")]
    archive: Option<PathBuf>,
}

impl ArchiveArg {
    fn dir(&self) -> PathBuf {
        self.archive.clone().unwrap_or_else(Archive::default_dir)
    }
    fn open(&self) -> anyhow::Result<Archive> {
        Archive::open(&self.dir())
    }
}

#[derive(clap::Args, Debug)]
#[command(mut_arg("json", |a| a.help("Print the outcome as JSON on stdout (progress stays on stderr)")))]
struct RunArgs {
    /// A built-in experiment name or an experiment file (TOML).
    experiment: String,
    /// The reduced (CI) variant: one repetition, no omit, at most 3 s per point.
    #[arg(long)]
    reduced: bool,
    /// Repetitions of each point (overrides the file), 1-100.
    #[arg(long, value_name = "N")]
    repetitions: Option<u32>,
    /// Keep at most N points (drops middle values of the longest sweep axis; noted in the result).
    #[arg(long, value_name = "N")]
    points: Option<usize>,
    /// Run every testbed's forwarder threads at real-time priority (`emulate up --realtime`);
    /// noted in the result. What the record paths at 10 Gbit/s need on a 2-core machine.
    #[arg(long)]
    realtime: bool,
    /// Pin every testbed's forwarder threads to these CPUs (`emulate up --pin`); noted in the
    /// result.
    #[arg(long, value_name = "CPU,...", value_delimiter = ',', value_parser = crate::emulate::flags::cpu)]
    pin: Option<Vec<usize>>,
    #[command(flatten)]
    archive: ArchiveArg,
    #[command(flatten)]
    json: crate::args::Json,
    #[command(flatten)]
    ties: crate::testbed::TiesArgs,
}

#[derive(clap::Args, Debug)]
#[command(mut_arg("json", |a| a.help("As JSON: {\"archive\", \"runs\": [{id, experiment, started, finished, complete, trustworthy, reduced, points, file}]}")))]
struct ListArgs {
    #[command(flatten)]
    archive: ArchiveArg,
    #[command(flatten)]
    json: crate::args::Json,
    /// Rebuild the index from the result files first.
    #[arg(long)]
    reindex: bool,
}

#[derive(clap::Args, Debug)]
#[command(mut_arg("json", |a| a.help("Print the whole result file")))]
struct ShowArgs {
    /// Run id (or unique prefix, experiment name, result file).
    run: String,
    #[command(flatten)]
    archive: ArchiveArg,
    #[command(flatten)]
    json: crate::args::Json,
}

#[derive(clap::Args, Debug)]
struct ReportArgs {
    /// Runs to report.
    #[arg(required = true)]
    runs: Vec<String>,
    /// The HTML file (default: <first run id>.html).
    #[arg(short = 'o', long, value_name = "FILE.html")]
    output: Option<PathBuf>,
    /// Where the PNG and SVG plots go (default: <archive>/plots), one directory per run.
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
    #[command(flatten)]
    archive: ArchiveArg,
}

#[derive(clap::Args, Debug)]
struct PlotArgs {
    /// The run.
    run: String,
    /// Output directory (default: <archive>/plots/<run id>).
    #[arg(short = 'o', long, value_name = "DIR")]
    output: Option<PathBuf>,
    #[command(flatten)]
    archive: ArchiveArg,
}

#[derive(clap::Args, Debug)]
#[command(mut_arg("json", |a| a.help("As JSON")))]
struct BuiltinsArgs {
    #[command(flatten)]
    json: crate::args::Json,
}

#[derive(clap::Args, Debug)]
#[command(mut_arg("json", |a| a.help("As JSON")))]
struct RecordsArgs {
    /// Check these runs against the rules and rank them (emulated runs are never eligible).
    #[arg(long, value_name = "RUN")]
    check: Vec<String>,
    /// With --check: take the distance and the forward router hops from this traceroute or
    /// traceroute6 listing, placed at the sites of --sites (as `longhaul calc distance` does).
    #[arg(long, value_name = "LISTING", requires_all = ["check", "sites"])]
    traceroute: Option<String>,
    /// With --traceroute: the site table, a network preset or file ([[site]] tables with match
    /// lists).
    #[arg(long, value_name = "PRESET|FILE", requires = "traceroute")]
    sites: Option<String>,
    /// With --traceroute: the site of the host the listing was made on [default: its source
    /// address's].
    #[arg(long, value_name = "SITE", requires = "traceroute")]
    from: Option<String>,
    #[command(flatten)]
    archive: ArchiveArg,
    #[command(flatten)]
    json: crate::args::Json,
}

pub(crate) fn run(a: &LabArgs) -> anyhow::Result<ExitCode> {
    crate::logging::to_stderr("warn");
    match &a.action {
        Action::Run(r) => run_experiment(r),
        Action::List(l) => list(l),
        Action::Show(s) => show(s),
        Action::Report(r) => html(r),
        Action::Plot(p) => plots(p),
        Action::Builtins(b) => builtins(b),
        Action::Records(r) => records_cmd(r),
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

fn mbps(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |b| format!("{:.1}", b / 1e6))
}

/// The `emulate up` flags of `--realtime` and `--pin`.
fn emulate_flags(a: &RunArgs) -> Vec<String> {
    let mut flags = Vec::new();
    if a.realtime {
        flags.push("--realtime".to_owned());
    }
    if let Some(cpus) = &a.pin {
        let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
        flags.extend(["--pin".to_owned(), list.join(",")]);
    }
    flags
}

fn run_experiment(a: &RunArgs) -> anyhow::Result<ExitCode> {
    let loaded = match runner::load(&a.experiment) {
        Ok(l) => l,
        Err(e) => {
            note!("longhaul: error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    for w in loaded.warnings() {
        note!("longhaul: {w}");
    }
    if !is_root() {
        anyhow::bail!(
            "`longhaul lab run` brings up emulated testbeds (network namespaces, TUN devices) and needs \
             root: run it with sudo"
        );
    }
    // The reservation check (docs/testbed.md, "Ties").
    let topology = loaded.topology.as_ref().map(|(_, t)| t.as_str());
    crate::testbed::check_reservation(&a.ties, &[loaded.spec.topology(topology)?])?;
    let stop = runner::stop_flag()?;
    let opts = RunOptions {
        exe: std::env::current_exe().context("cannot find the longhaul executable")?,
        archive: a.archive.dir(),
        reduced: a.reduced,
        repetitions: a.repetitions,
        max_points: a.points,
        testbed: format!("lab{}", std::process::id() % 10_000_000),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        emulate_flags: emulate_flags(a),
        stop,
    };
    let mut last_point = String::new();
    let mut progress = |p: &Progress| match p {
        Progress::Point {
            i,
            n,
            id,
            rep,
            reps,
        } => {
            last_point = format!(
                "point {i}/{n} {id}{}",
                if *reps > 1 {
                    format!(" rep {rep}/{reps}")
                } else {
                    String::new()
                }
            );
            note!("lab: {last_point}: starting");
        }
        Progress::Interval {
            t,
            bps,
            retransmits,
        } => {
            note!(
                "lab: {last_point}: t={t:5.1} s {:8.1} Mbit/s {retransmits} retr",
                bps / 1e6
            );
        }
        Progress::Burst { rate_bps, in_s } => note!(
            "lab: {last_point}: cross-traffic burst of {} in {in_s:.2} s",
            longhaul_units::fmt_rate(*rate_bps)
        ),
        Progress::Done {
            mean_bps,
            expected_bps,
            recovery_s,
            fidelity_ok,
            error,
        } => {
            let mut s = format!(
                "lab: {last_point}: {} Mbit/s (model {}), fidelity {}",
                mbps(*mean_bps),
                mbps(expected_bps.map(|e| e as f64)),
                if *fidelity_ok {
                    "OK"
                } else {
                    "NOT TRUSTWORTHY"
                }
            );
            if let Some(r) = recovery_s {
                s += &format!(", recovery {r:.1} s");
            }
            if let Some(e) = error {
                s += &format!(", error: {e}");
            }
            note!("{s}");
        }
        Progress::Saved(f) => note!("lab: result file {}", f.display()),
    };
    let out = runner::run(&loaded, &opts, &mut progress)?;
    let rf = &out.result;
    if a.json.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&outcome_json(rf, &out.file, out.interrupted))?
        );
    } else {
        print!("{}", summary_text(rf));
        println!("result file: {}", out.file.display());
    }
    if out.interrupted {
        note!("lab: interrupted; run {} is marked incomplete", out.run_id);
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

fn outcome_json(rf: &ResultFile, file: &std::path::Path, interrupted: bool) -> Value {
    json!({
        "run_id": rf.run_id,
        "experiment": rf.experiment.name,
        "file": file.display().to_string(),
        "complete": rf.complete,
        "interrupted": interrupted,
        "untrustworthy": rf.untrustworthy,
        "points": rf.points.iter().map(|p| json!({
            "id": p.point.id,
            "mean_bps": p.summary.mean_bps,
            "expected_bps": p.prediction.as_ref().map(|x| x.expected_bps),
            "pre_event_bps": p.summary.pre_event_bps,
            "recovery_s": p.summary.recovery_s,
            "fidelity_ok": p.repetitions.iter().all(|r| r.fidelity.ok),
            "errors": p.repetitions.iter().filter_map(|r| r.error.clone()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "window_sweep_check": report::sweep_check(rf),
    })
}

fn summary_text(rf: &ResultFile) -> String {
    let mut s = format!(
        "run {} ({}{}): {}{}\n",
        rf.run_id,
        rf.experiment.name,
        if rf.experiment.reduced {
            ", reduced"
        } else {
            ""
        },
        if rf.complete {
            "complete"
        } else {
            "INCOMPLETE"
        },
        if rf.untrustworthy {
            ", UNTRUSTWORTHY (emulator fidelity not OK)"
        } else {
            ""
        }
    );
    s += &format!(
        "{:<4} {:<32} {:>10} {:>10} {:>8} {:>10} {:>14}  {}\n",
        "#", "point", "Mbit/s", "model", "dev", "pre-burst", "recov s", "fidelity"
    );
    for (k, p) in rf.points.iter().enumerate() {
        let exp = p.prediction.as_ref().map(|x| x.expected_bps as f64);
        let dev = match (p.summary.mean_bps, exp) {
            (Some(m), Some(e)) if e > 0.0 => format!("{:+.1}%", (m / e - 1.0) * 100.0),
            _ => "-".into(),
        };
        let fid: Vec<&str> = p
            .repetitions
            .iter()
            .map(|r| if r.fidelity.ok { "OK" } else { "BAD" })
            .collect();
        s += &format!(
            "{:<4} {:<32} {:>10} {:>10} {:>8} {:>10} {:>14}  {}\n",
            k + 1,
            if p.point.id.is_empty() {
                "-"
            } else {
                &p.point.id
            },
            mbps(p.summary.mean_bps),
            mbps(exp),
            dev,
            mbps(p.summary.pre_event_bps),
            report::recoveries(p).replace('–', "-"),
            fid.join(" ")
        );
    }
    let check = report::sweep_check(rf);
    if rf
        .experiment
        .spec
        .sweep
        .iter()
        .any(|a| a.name() == "window")
        && !check.is_empty()
    {
        s += &format!(
            "window-sweep check (within 10 % of min(window/RTT, goodput)): {} of {} points\n",
            check.iter().filter(|d| d.within).count(),
            check.len()
        );
    }
    s += &longhaul_lab::lsr::text(rf);
    s
}

fn list(a: &ListArgs) -> anyhow::Result<ExitCode> {
    let ar = a.archive.open()?;
    if a.reindex {
        let (n, bad) = ar.reindex()?;
        note!("lab: indexed {n} result files");
        for b in bad {
            note!("lab: skipped {b}");
        }
    }
    let rows = ar.list()?;
    if a.json.json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({ "archive": ar.dir().display().to_string(), "runs": rows })
            )?
        );
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("no runs in {}", ar.dir().display());
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<44} {:<14} {:<21} {:>6}  status",
        "run", "experiment", "started", "points"
    );
    for r in rows {
        println!(
            "{:<44} {:<14} {:<21} {:>6}  {}{}",
            r.id,
            r.experiment,
            r.started,
            r.points,
            r.status(),
            if r.reduced { " (reduced)" } else { "" }
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn show(a: &ShowArgs) -> anyhow::Result<ExitCode> {
    let rf = a.archive.open()?.load(&a.run)?;
    if a.json.json {
        println!("{}", rf.to_json());
    } else {
        print!("{}", summary_text(&rf));
        println!(
            "started {}, finished {}; host kernel {}; longhaul {}; seeds {}",
            rf.started,
            rf.finished.as_deref().unwrap_or("-"),
            rf.host.kernel,
            rf.longhaul_version,
            serde_json::to_string(&rf.seeds)?
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn html(a: &ReportArgs) -> anyhow::Result<ExitCode> {
    let ar = a.archive.open()?;
    let runs = a
        .runs
        .iter()
        .map(|r| ar.load(r))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for r in runs.iter().filter(|r| !r.complete) {
        note!(
            "lab: note: run {} is INCOMPLETE; the report says so",
            r.run_id
        );
    }
    let plots = a.plots.clone().unwrap_or_else(|| ar.dir().join("plots"));
    let html = report::report(&runs, &plots)?;
    let out = a
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.html", runs[0].run_id)));
    std::fs::write(&out, html).with_context(|| format!("cannot write {}", out.display()))?;
    println!("report: {} (plots in {})", out.display(), plots.display());
    Ok(ExitCode::SUCCESS)
}

fn plots(a: &PlotArgs) -> anyhow::Result<ExitCode> {
    let ar = a.archive.open()?;
    let rf = ar.load(&a.run)?;
    let dir = a
        .output
        .clone()
        .unwrap_or_else(|| ar.dir().join("plots").join(&rf.run_id));
    for p in plot::render(&rf, &dir)? {
        println!("{} {}", p.png.display(), p.svg.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn builtins(a: &BuiltinsArgs) -> anyhow::Result<ExitCode> {
    let mut all = Vec::new();
    for b in longhaul_experiments::builtin::builtins() {
        let spec = b.spec().map_err(|e| anyhow::anyhow!("{e}"))?;
        let reduced = spec.reduced();
        all.push(json!({
            "name": spec.name,
            "title": spec.title,
            "source": spec.source,
            "scale": spec.scale,
            "points": spec.points().len(),
            "repetitions": spec.repetitions,
            "test_time_s": spec.test_time().as_secs_f64(),
            "reduced_test_time_s": reduced.test_time().as_secs_f64(),
        }));
    }
    if a.json.json {
        println!("{}", serde_json::to_string_pretty(&all)?);
    } else {
        println!(
            "{:<14} {:>6} {:>5} {:>9} {:>9}  title (source)",
            "name", "points", "reps", "full", "reduced"
        );
        for b in &all {
            println!(
                "{:<14} {:>6} {:>5} {:>8.0}s {:>8.0}s  {} ({})",
                b["name"].as_str().unwrap_or(""),
                b["points"].as_u64().unwrap_or(0),
                b["repetitions"].as_u64().unwrap_or(0),
                b["test_time_s"].as_f64().unwrap_or(0.0),
                b["reduced_test_time_s"].as_f64().unwrap_or(0.0),
                b["title"].as_str().unwrap_or(""),
                b["source"].as_str().unwrap_or("")
            );
        }
        println!(
            "(times are test time only; each point also brings a testbed up and down, ~2-4 s)"
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn records_cmd(a: &RecordsArgs) -> anyhow::Result<ExitCode> {
    let rows = records::records();
    let mut cands = Vec::new();
    let mut checks = Vec::new();
    let traced = match (&a.traceroute, &a.sites) {
        (Some(listing), Some(sites)) => Some(crate::calc::traceroute_distance(
            listing,
            sites,
            a.from.as_deref(),
        )?),
        _ => None,
    };
    if !a.check.is_empty() {
        let ar = a.archive.open()?;
        for key in &a.check {
            let rf = ar.load(key)?;
            let Some(mut c) = rf.lsr_candidate() else {
                anyhow::bail!("run {} has no finished test to check", rf.run_id);
            };
            if let Some((trace, d)) = &traced {
                // Every hop before the destination is a router hop, answered or not.
                c.km = d.total_km;
                c.hops_forward = u32::try_from(trace.hops.len().saturating_sub(1)).unwrap_or(0);
            }
            let results = check(&c);
            checks.push((c.clone(), results));
            cands.push(c);
        }
    }
    if a.json.json {
        let table: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "row": serde_json::to_value(r).unwrap_or(Value::Null),
                    "recomputed": records::recompute(r).map(|m| serde_json::to_value(m).unwrap_or(Value::Null)),
                    "units": records::units_check(r).map(|u| serde_json::to_value(u).unwrap_or(Value::Null)),
                })
            })
            .collect();
        let doc = json!({
            "records": table,
            "checks": checks.iter().map(|(c, r)| json!({
                "candidate": c, "metric_bit_m_per_s": c.metric(), "rules": r, "eligible": eligible(r)
            })).collect::<Vec<_>>(),
            "leaderboard": if cands.is_empty() { Value::Null } else { serde_json::to_value(leaderboard(&cands, RECORDS))? },
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    if checks.is_empty() {
        print!("{}", table_markdown(rows));
        return Ok(ExitCode::SUCCESS);
    }
    for (c, results) in &checks {
        println!(
            "{}: {} bytes in {:.1} s over {:.0} km = {:.1} Tb·m/s ({})",
            c.label,
            c.bytes,
            c.seconds,
            c.km,
            c.metric() / 1e12,
            c.class()
        );
        for r in results {
            let v = match r.verdict {
                Verdict::Pass => "pass",
                Verdict::Fail => "FAIL",
                Verdict::Capped => "capped",
            };
            println!("  {:<12} {:<6} {}", format!("{:?}", r.rule), v, r.detail);
        }
        println!(
            "  => {}",
            if eligible(results) {
                "eligible"
            } else {
                "NOT eligible"
            }
        );
    }
    println!();
    for board in leaderboard(&cands, RECORDS) {
        if !board
            .standings
            .iter()
            .any(|s| matches!(s.origin, records::Origin::Run))
        {
            continue;
        }
        println!("{}:", board.class);
        for s in &board.standings {
            let is_run = matches!(s.origin, records::Origin::Run);
            if !is_run && s.rank.is_some_and(|r| r > 5) {
                continue;
            }
            println!(
                "  {:>4} {:>10.1} Tb·m/s  {}{}",
                s.rank
                    .map_or_else(|| format!("({})", s.place), |r| r.to_string()),
                s.metric / 1e12,
                s.label,
                if s.eligible {
                    String::new()
                } else {
                    format!("  [not eligible: {}]", s.reason)
                }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
