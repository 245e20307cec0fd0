//! The runner: runs every point of an experiment (with its repetitions) on an emulated path by
//! driving this same binary as subprocesses, so the lab exercises exactly the commands a user
//! would type:
//!
//! 1. `longhaul emulate up --name NAME <point.emulate_args()> --json` (the default server runs on
//!    host b);
//!    and the run's own emulator flags ([`RunOptions::emulate_flags`], e.g. `--realtime --pin 0,1`);
//! 2. `longhaul emulate exec --name NAME a -- longhaul test 10.201.0.2 <point.test_args()>` (or
//!    host b's IPv6 address, `fd00:4c48::2`, for a point with `ip = 6`) with
//!    `--json-stream` instead of `--json`: the `interval` events show the live rate, and on the
//!    `start` event an experiment with an event schedules `longhaul emulate burst RATE LENGTH --in
//!    (at − elapsed)`, so the burst lands at the planned test time; the events are reassembled
//!    into the `--json` document (`start`, `intervals`, `end`);
//! 3. `longhaul emulate down --name NAME --json`, whose final counters give the repetition's
//!    fidelity (verdict, p99 lateness, drops by cause).
//!
//! The result file is written (and indexed in the archive) after every point with `complete =
//! false`, and marked complete only at the end: a run stopped by SIGINT/SIGTERM (the `stop` flag)
//! or killed outright stays listed as incomplete.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use longhaul_experiments::builtin::builtin;
use longhaul_experiments::predict::{Prediction, predict};
use longhaul_experiments::result::{
    Derived, Experiment, Fidelity, PointResult, Repetition, ResultFile,
};
use longhaul_experiments::spec::{duration_flag, rate_flag};
use longhaul_experiments::{Axis, PathSource, Point, Spec, SpecError, SpecWarning};
use longhaul_units::Nanos;
use serde_json::{Value, json};

use crate::archive::Archive;
use crate::{host, time};

/// Host b's address on every testbed.
pub const RECEIVER: &str = "10.201.0.2";
/// Host b's IPv6 address on every testbed (a point with `ip = 6` tests to it).
pub const RECEIVER_V6: &str = "fd00:4c48::2";

/// The address a point's test goes to: host b's, over the point's IP version.
pub fn receiver(point: &Point) -> &'static str {
    match point.ip {
        6 => RECEIVER_V6,
        _ => RECEIVER,
    }
}

/// An experiment ready to run: the checked spec and the texts it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The checked spec (full scale).
    pub spec: Spec,
    /// `builtin/NAME.toml` or the file as given.
    pub file: String,
    /// The file's text.
    pub text: String,
    /// A topology file's resolved path and text, when the path is a file.
    pub topology: Option<(PathBuf, String)>,
}

impl Loaded {
    /// Warnings the file deserves (unfamiliar congestion controls).
    pub fn warnings(&self) -> &[SpecWarning] {
        &self.spec.warnings
    }
}

/// Loads EXPERIMENT: a built-in name, or else an experiment file (TOML). Errors name the file,
/// the line and the field.
pub fn load(experiment: &str) -> Result<Loaded, SpecError> {
    let refuse = |file: &str, field: Option<&str>, message: String| SpecError {
        file: file.to_owned(),
        line: None,
        column: None,
        field: field.map(str::to_owned),
        message,
    };
    if let Some(b) = builtin(experiment) {
        return Ok(Loaded {
            spec: b.spec()?,
            file: format!("builtin/{}.toml", b.name),
            text: b.toml.to_owned(),
            topology: None,
        });
    }
    let text = std::fs::read_to_string(experiment).map_err(|e| {
        refuse(
            experiment,
            None,
            format!(
                "not a built-in experiment (see `longhaul lab builtins`) and cannot be read: {e}"
            ),
        )
    })?;
    let spec = Spec::parse(&text, experiment)?;
    let topology = match &spec.path.source {
        PathSource::Preset(_) => None,
        PathSource::File(f) => {
            let base = Path::new(experiment).parent().unwrap_or(Path::new("."));
            let p = base.join(f);
            let t = std::fs::read_to_string(&p).map_err(|e| {
                refuse(
                    experiment,
                    Some("path.file"),
                    format!("cannot read {}: {e}", p.display()),
                )
            })?;
            spec.topology(Some(&t))?;
            Some((p, t))
        }
    };
    Ok(Loaded {
        spec,
        file: experiment.to_owned(),
        text,
        topology,
    })
}

/// What [`run`] reports as it goes (the CLI prints it on standard error).
#[derive(Debug, Clone)]
pub enum Progress {
    /// A repetition of a point starts.
    Point {
        /// 1-based point number.
        i: usize,
        /// Points in the run.
        n: usize,
        /// The point id.
        id: String,
        /// 1-based repetition.
        rep: u32,
        /// Repetitions per point.
        reps: u32,
    },
    /// An interval report of the running test.
    Interval {
        /// Seconds since the test started (end of the interval, omit period included).
        t: f64,
        /// Summed rate, bit/s.
        bps: f64,
        /// Retransmits in the interval.
        retransmits: u64,
    },
    /// The cross-traffic burst was scheduled.
    Burst {
        /// Rate, bit/s.
        rate_bps: u64,
        /// Seconds from now.
        in_s: f64,
    },
    /// A repetition finished.
    Done {
        /// Mean rate after the omit period.
        mean_bps: Option<f64>,
        /// The model's expectation.
        expected_bps: Option<u64>,
        /// Recovery time, with an event.
        recovery_s: Option<f64>,
        /// The emulator's verdict.
        fidelity_ok: bool,
        /// The test's error, if any.
        error: Option<String>,
    },
    /// The result file was written.
    Saved(PathBuf),
}

/// A flag set by SIGINT and SIGTERM (and SIGHUP): the runner stops at the next check, tears
/// the testbed down and leaves the run incomplete.
pub fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&flag))
            .with_context(|| format!("cannot install the handler of signal {sig}"))?;
    }
    Ok(flag)
}

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The `longhaul` executable to drive.
    pub exe: PathBuf,
    /// The archive directory.
    pub archive: PathBuf,
    /// Run the reduced (CI) variant.
    pub reduced: bool,
    /// Override the repetitions (1..=100).
    pub repetitions: Option<u32>,
    /// Keep at most this many points (see [`trim`]).
    pub max_points: Option<usize>,
    /// The testbed's name (`lab<pid>`).
    pub testbed: String,
    /// `longhaul --version`.
    pub version: String,
    /// Flags added to every `longhaul emulate up` of the run: how this machine runs the emulator
    /// (`--realtime`, `--pin CPUS`), not what the experiment asks of the path. Kept in the result
    /// file's host section as `emulate_flags`.
    pub emulate_flags: Vec<String>,
    /// Set by a signal handler: stop after tearing down, leave the run incomplete.
    pub stop: Arc<AtomicBool>,
}

/// What [`run`] did.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The run id.
    pub run_id: String,
    /// The result file.
    pub file: PathBuf,
    /// The result as written.
    pub result: ResultFile,
    /// Whether a signal stopped the run.
    pub interrupted: bool,
}

/// Keeps at most `max` points by dropping middle values of the longest sweep axis (its first
/// and last values stay) until the product fits; at least one value of each axis stays. The
/// notes say what was trimmed.
pub fn trim(spec: &mut Spec, max: usize) {
    let max = max.max(1);
    let before: Vec<(String, usize)> = spec
        .sweep
        .iter()
        .map(|a| (a.name().to_owned(), a.len()))
        .collect();
    while spec.sweep.iter().map(Axis::len).product::<usize>() > max {
        let Some(a) = spec
            .sweep
            .iter_mut()
            .filter(|a| a.len() > 1)
            .max_by_key(|a| a.len())
        else {
            break;
        };
        let i = if a.len() > 2 { a.len() / 2 } else { 1 };
        match a {
            Axis::Window(v) => drop(v.remove(i)),
            Axis::Streams(v) => drop(v.remove(i)),
            Axis::Congestion(v) => drop(v.remove(i)),
            Axis::Length(v) => drop(v.remove(i)),
            Axis::Mtu(v) => drop(v.remove(i)),
            Axis::Rate(v) => drop(v.remove(i)),
            Axis::Loss(v) => drop(v.remove(i)),
            Axis::Ip(v) => drop(v.remove(i)),
            Axis::Frame(v) => drop(v.remove(i)),
        }
    }
    let after: Vec<usize> = spec.sweep.iter().map(Axis::len).collect();
    let changed: Vec<String> = before
        .iter()
        .zip(&after)
        .filter(|((_, b), a)| b != *a)
        .map(|((n, b), a)| format!("{n} {b} -> {a} values"))
        .collect();
    if !changed.is_empty() {
        spec.notes = format!(
            "{}\n[trimmed to at most {max} points: {}]",
            spec.notes,
            changed.join(", ")
        )
        .trim_start()
        .to_owned();
    }
}

/// Runs `loaded` as `opts` says, reporting progress to `progress`.
pub fn run(
    loaded: &Loaded,
    opts: &RunOptions,
    progress: &mut dyn FnMut(&Progress),
) -> anyhow::Result<RunOutcome> {
    let mut spec = if opts.reduced {
        loaded.spec.reduced()
    } else {
        loaded.spec.clone()
    };
    if let Some(r) = opts.repetitions {
        if !(1..=longhaul_experiments::spec::MAX_REPETITIONS).contains(&r) {
            bail!("--repetitions must be 1..=100, not {r}");
        }
        spec.repetitions = r;
    }
    if let Some(n) = opts.max_points {
        trim(&mut spec, n);
    }
    let archive = Archive::open(&opts.archive)?;
    let now = time::now_unix();
    let mut run_id = format!("{}-{}", time::stamp(now), spec.name);
    if archive.result_path(&run_id).exists() {
        run_id = format!("{run_id}-{}", std::process::id());
    }
    let topology = spec
        .topology(loaded.topology.as_ref().map(|(_, t)| t.as_str()))
        .ok();
    let mut rf = ResultFile::new(
        run_id.clone(),
        Experiment {
            name: spec.name.clone(),
            file: loaded.file.clone(),
            text: loaded.text.clone(),
            reduced: spec.reduced,
            spec: spec.clone(),
        },
        time::rfc3339(now),
        host::gather(),
        opts.version.clone(),
        BTreeMap::new(),
    );
    rf.host
        .other
        .insert("testbed".into(), Value::from(opts.testbed.clone()));
    if let Some(n) = opts.max_points {
        rf.host
            .other
            .insert("max_points".into(), Value::from(n as u64));
    }
    if !opts.emulate_flags.is_empty() {
        rf.host
            .other
            .insert("emulate_flags".into(), json!(opts.emulate_flags));
    }
    let file = archive.save(&rf)?;
    progress(&Progress::Saved(file.clone()));

    let points = spec.points();
    let n = points.len();
    let mut interrupted = false;
    'points: for point in &points {
        let compiled = topology.as_ref().and_then(|t| point.compile(t).ok());
        let prediction = compiled.as_ref().map(|c| predict(point, c));
        let mut args = point.emulate_args();
        if let Some((p, _)) = &loaded.topology {
            args[0] = p.display().to_string();
        }
        args.extend(opts.emulate_flags.iter().cloned());
        let mut reps = Vec::new();
        for r in 0..spec.repetitions {
            if opts.stop.load(Ordering::SeqCst) {
                interrupted = true;
                break 'points;
            }
            progress(&Progress::Point {
                i: point.index + 1,
                n,
                id: point.id.clone(),
                rep: r + 1,
                reps: spec.repetitions,
            });
            let need_offloads = rf.host.offloads.is_empty();
            let out = repetition(
                opts,
                point,
                &args,
                prediction.as_ref(),
                r,
                need_offloads,
                progress,
            );
            if let Some(s) = out.seed {
                rf.seeds.insert("emulator".into(), s);
            }
            if !out.offloads.is_empty() {
                rf.host.offloads = out.offloads;
            }
            if out.interrupted {
                interrupted = true;
                if !reps.is_empty() {
                    push(&mut rf, point, prediction.clone(), reps);
                }
                break 'points;
            }
            progress(&Progress::Done {
                mean_bps: out.rep.derived.mean_bps,
                expected_bps: prediction.as_ref().map(|p| p.expected_bps),
                recovery_s: out.rep.derived.recovery_s,
                fidelity_ok: out.rep.fidelity.ok,
                error: out.rep.error.clone(),
            });
            reps.push(out.rep);
        }
        push(&mut rf, point, prediction, reps);
        archive.save(&rf)?;
    }
    interrupted |= opts.stop.load(Ordering::SeqCst);
    if !interrupted {
        rf.finish(time::rfc3339(time::now_unix()));
    }
    let file = archive.save(&rf)?;
    progress(&Progress::Saved(file.clone()));
    Ok(RunOutcome {
        run_id,
        file,
        result: rf,
        interrupted,
    })
}

fn push(rf: &mut ResultFile, point: &Point, prediction: Option<Prediction>, reps: Vec<Repetition>) {
    rf.push_point(PointResult {
        point: point.clone(),
        prediction,
        repetitions: reps,
        summary: Derived::default(),
    });
}

struct RepOut {
    rep: Repetition,
    seed: Option<u64>,
    offloads: BTreeMap<String, String>,
    interrupted: bool,
}

/// Runs `exe ARGS`, returning stdout, or an error with the tail of stderr.
fn output(exe: &Path, args: &[String]) -> anyhow::Result<String> {
    let o = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", exe.display()))?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        bail!(
            "`longhaul {}` failed ({}): {}",
            args.join(" "),
            o.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        );
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

fn sv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| (*s).to_owned()).collect()
}

/// One repetition: up, test (with the burst), down.
fn repetition(
    opts: &RunOptions,
    point: &Point,
    emulate_args: &[String],
    prediction: Option<&Prediction>,
    r: u32,
    need_offloads: bool,
    progress: &mut dyn FnMut(&Progress),
) -> RepOut {
    let started = time::rfc3339(time::now_unix());
    let name = opts.testbed.as_str();
    let mut out = RepOut {
        rep: Repetition {
            repetition: r,
            started,
            report: Value::Null,
            error: None,
            fidelity: Fidelity {
                ok: false,
                untrustworthy: true,
                ..Fidelity::default()
            },
            derived: Derived::default(),
        },
        seed: None,
        offloads: BTreeMap::new(),
        interrupted: false,
    };
    let mut up = sv(&["emulate", "up", "--name", name]);
    up.extend(emulate_args.iter().cloned());
    up.push("--json".into());
    let session = match output(&opts.exe, &up) {
        Ok(s) => serde_json::from_str::<Value>(&s).unwrap_or(Value::Null),
        Err(e) => {
            out.rep.error = Some(format!("{e:#}"));
            return out;
        }
    };
    out.seed = session["path"]["seed"].as_u64();
    let bottleneck = session["path"]["rate_bps"]
        .as_u64()
        .or(prediction.map(|p| p.bottleneck_bps))
        .unwrap_or(0);
    if need_offloads
        && let Ok(t) = output(
            &opts.exe,
            &sv(&[
                "emulate", "exec", "--name", name, "a", "--", "ethtool", "-k", "lh0",
            ]),
        )
    {
        out.offloads = crate::host::parse_offloads(&t);
    }
    let ran = if point.find_rate.is_some() {
        find_rate(opts, point)
    } else {
        test(opts, point, bottleneck, progress)
    };
    match ran {
        Ok((report, interrupted)) => {
            out.interrupted = interrupted;
            if let Some(e) = report.get("error").and_then(Value::as_str) {
                out.rep.error = Some(e.to_owned());
            }
            if !report.is_null()
                && (report.get("end").is_some_and(|e| !e.is_null())
                    || report.get("rate_bps").is_some())
            {
                out.rep.derived = Derived::from_report(point, &report);
            }
            out.rep.report = report;
        }
        Err(e) => out.rep.error = Some(format!("{e:#}")),
    }
    match output(
        &opts.exe,
        &sv(&["emulate", "down", "--name", name, "--json"]),
    ) {
        Ok(s) => {
            if let Ok(doc) = serde_json::from_str::<Value>(&s) {
                out.rep.fidelity = fidelity(&doc);
            }
        }
        Err(e) => {
            let msg = format!("teardown: {e:#}");
            out.rep.error = Some(match out.rep.error.take() {
                Some(prev) => format!("{prev}; {msg}"),
                None => msg,
            });
        }
    }
    out
}

/// A repetition's fidelity from `emulate down --json`: the verdict, the worse direction's p99
/// lateness and the drops by cause summed over both directions.
pub fn fidelity(doc: &Value) -> Fidelity {
    let ok = doc["fidelity"]["ok"].as_bool().unwrap_or(false);
    let mut drops = BTreeMap::new();
    let mut p99 = 0;
    for dir in ["a_to_b", "b_to_a"] {
        let d = &doc["links"][dir];
        p99 = p99.max(d["lateness"]["p99_ns"].as_u64().unwrap_or(0));
        for (cause, v) in [
            ("queue", &d["link"]["drop_queue"]),
            ("random", &d["link"]["drop_random"]),
            ("burst", &d["link"]["drop_burst"]),
            ("aqm", &d["link"]["drop_aqm"]),
            ("cut", &d["cut_drops"]),
            ("tun_tx", &d["tun_tx_dropped"]),
            ("write_errors", &d["write_errors"]),
        ] {
            *drops.entry(cause.to_owned()).or_insert(0) += v.as_u64().unwrap_or(0);
        }
    }
    Fidelity {
        ok,
        p99_lateness_ns: p99,
        drops,
        untrustworthy: !ok,
    }
}

/// Starts `longhaul test RECEIVER TEST_ARGS` on host a, its output piped.
fn test_on_a(
    opts: &RunOptions,
    point: &Point,
    test_args: Vec<String>,
) -> anyhow::Result<std::process::Child> {
    let exe = opts.exe.display().to_string();
    let mut args = sv(&["emulate", "exec", "--name", &opts.testbed, "a", "--"]);
    args.extend([exe, "test".into(), receiver(point).into()]);
    args.extend(test_args);
    Command::new(&opts.exe)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start longhaul test")
}

/// Reads all of a child's pipe on a thread of its own (so neither pipe can fill and stall it).
fn read_all(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = pipe.read_to_string(&mut s);
        s
    })
}

/// Runs a line characterisation (`longhaul test -u --find-rate --json`) on host a; returns its
/// document and whether the stop flag ended it.
fn find_rate(opts: &RunOptions, point: &Point) -> anyhow::Result<(Value, bool)> {
    let mut child = test_on_a(opts, point, point.test_args())?;
    let out_thread = read_all(child.stdout.take().context("test stdout")?);
    let err_thread = read_all(child.stderr.take().context("test stderr")?);
    // Each trial is a whole test with its set-up; a search takes at most 32 of them, plus 3.
    let per_trial = point.duration.saturating_add(Nanos::from_secs(5));
    let limit = Duration::from_nanos(per_trial.as_nanos().saturating_mul(35));
    let begun = Instant::now();
    let status = loop {
        if opts.stop.load(Ordering::SeqCst) {
            let _ = child.kill();
            let _ = child.wait();
            return Ok((Value::Null, true));
        }
        if let Some(status) = child.try_wait().context("waiting for longhaul test")? {
            break status;
        }
        if begun.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            bail!("the search did not finish within {} s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = out_thread.join().unwrap_or_default();
    let stderr = err_thread.join().unwrap_or_default();
    match serde_json::from_str::<Value>(&stdout) {
        Ok(doc) if status.success() => Ok((doc, false)),
        _ => {
            let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
            bail!(
                "longhaul test --find-rate ended without a report ({status}): {}",
                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
            )
        }
    }
}

/// Runs the test on host a; returns the reassembled `--json` document and whether the stop flag
/// ended it.
fn test(
    opts: &RunOptions,
    point: &Point,
    bottleneck_bps: u64,
    progress: &mut dyn FnMut(&Progress),
) -> anyhow::Result<(Value, bool)> {
    let args = point.test_args().into_iter().map(|a| {
        if a == "--json" {
            "--json-stream".to_owned()
        } else {
            a
        }
    });
    let mut child = test_on_a(opts, point, args.collect())?;
    let stdout = child.stdout.take().context("test stdout")?;
    let err_thread = read_all(child.stderr.take().context("test stderr")?);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let plan = point.event_plan(bottleneck_bps);
    let omit = point.omit.as_secs_f64();
    let limit = Duration::from_nanos(
        point
            .omit
            .saturating_add(point.duration)
            .saturating_add(Nanos::from_secs(90))
            .as_nanos(),
    );
    let begun = Instant::now();
    let (mut start, mut intervals, mut end, mut error) =
        (Value::Null, Vec::new(), Value::Null, None);
    let mut interrupted = false;
    loop {
        if opts.stop.load(Ordering::SeqCst) {
            interrupted = true;
            let _ = child.kill();
            break;
        }
        if begun.elapsed() > limit {
            let _ = child.kill();
            error = Some(format!(
                "the test did not finish within {} s",
                limit.as_secs()
            ));
            break;
        }
        let line = match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(l) => l,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let Ok(ev) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let data = ev["data"].clone();
        match ev["event"].as_str() {
            Some("start") => {
                let t0 = Instant::now();
                start = data;
                if let Some(p) = plan {
                    let at = p.start.as_secs_f64() - t0.elapsed().as_secs_f64();
                    let at = at.max(0.0);
                    let length = p.end.saturating_sub(p.start);
                    let ms = format!("{}ms", (at * 1000.0).round() as u64);
                    let burst = sv(&[
                        "emulate",
                        "burst",
                        "--name",
                        &opts.testbed,
                        &rate_flag(p.rate_bps),
                        &duration_flag(length),
                        "--in",
                        &ms,
                    ]);
                    match output(&opts.exe, &burst) {
                        Ok(_) => progress(&Progress::Burst {
                            rate_bps: p.rate_bps,
                            in_s: at,
                        }),
                        Err(e) => error = Some(format!("cannot schedule the burst: {e:#}")),
                    }
                }
            }
            Some("interval") => {
                let sum = &data["sum"];
                let omitted = sum["omitted"].as_bool() == Some(true);
                let t = sum["end"].as_f64().unwrap_or(0.0) + if omitted { 0.0 } else { omit };
                progress(&Progress::Interval {
                    t,
                    bps: sum["bits_per_second"].as_f64().unwrap_or(0.0),
                    retransmits: sum["retransmits"].as_u64().unwrap_or(0),
                });
                intervals.push(data);
            }
            Some("end") => end = data,
            Some("error") => error = data.as_str().map(str::to_owned),
            _ => {}
        }
    }
    let status = child.wait().context("waiting for longhaul test")?;
    let stderr = err_thread.join().unwrap_or_default();
    if interrupted {
        return Ok((Value::Null, true));
    }
    if end.is_null() && error.is_none() {
        let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
        error = Some(format!(
            "longhaul test ended without a report ({status}): {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        ));
    }
    let mut doc = json!({ "start": start, "intervals": intervals, "end": end });
    if let Some(e) = error {
        doc["error"] = Value::from(e);
    }
    Ok((doc, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trim_keeps_the_ends_of_the_longest_axis() {
        let mut s = load("window-sweep").expect("builtin").spec;
        let n0 = s.points().len();
        assert!(n0 > 4);
        trim(&mut s, 4);
        assert!(s.points().len() <= 4, "{}", s.points().len());
        assert!(s.notes.contains("trimmed to at most 4 points"));
        let mut one = load("loss-recovery").expect("builtin").spec;
        trim(&mut one, 1);
        assert_eq!(one.points().len(), 1);
    }

    #[test]
    fn fidelity_sums_drops_and_takes_the_worse_p99() {
        let doc = json!({
            "fidelity": {"ok": false},
            "links": {
                "a_to_b": {"lateness": {"p99_ns": 500}, "link": {"drop_queue": 3, "drop_random": 1},
                           "tun_tx_dropped": 2, "cut_drops": 0, "write_errors": 0},
                "b_to_a": {"lateness": {"p99_ns": 2_000_000}, "link": {"drop_queue": 1},
                           "tun_tx_dropped": null}
            }
        });
        let f = fidelity(&doc);
        assert!(!f.ok && f.untrustworthy);
        assert_eq!(f.p99_lateness_ns, 2_000_000);
        assert_eq!(f.drops["queue"], 4);
        assert_eq!(f.drops["tun_tx"], 2);
    }

    #[test]
    fn a_broken_file_names_file_line_and_field() {
        let dir = std::env::temp_dir().join(format!("lh-lab-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let f = dir.join("x.toml");
        std::fs::write(
            &f,
            "name = \"x\"\nduration = \"10s\"\n[path]\npreset = \"cern-starlight\"\n[sweep]\nwindow = [\"1M\", \"4Q\"]\n",
        )
        .expect("write");
        let e = load(f.to_str().expect("utf-8")).expect_err("refused");
        assert_eq!(e.line, Some(6));
        assert!(e.to_string().contains("sweep.window[1]"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
