//! `longhaul campaign FILE`: every pair of a campaign file tested at one instant (docs/fleet.md).
//! Each pair's sending server runs its test as a job (`longhaul_engine::JobClient`); this module
//! reaches them all, measures their clocks, picks the common start, prints each pair's intervals
//! and the campaign's sum as they come, and writes one result. A pair may be a third-party copy
//! instead (`longhaul_engine::run_remote_copy`), asked at the common start by this controller's
//! clock. The file and the arithmetic are `longhaul_fleet::campaign`'s.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use clap::Parser;
use longhaul_engine::job::unix_ns;
use longhaul_engine::{
    ClockOffset, CopyResult, JobClient, Observer, RemoteCopy, TestTo, run_remote_copy,
};
use longhaul_fleet::campaign::{
    AggregateInterval, PairKind, PairSpec, aggregate_intervals, parse_campaign, start_spread_ns,
};
use longhaul_proto::report::{IntervalReport, Report, Start};
use longhaul_transfer::report::{Event, Summary};
use longhaul_units::{Nanos, fmt_rate, fmt_rate_iperf, fmt_size, fmt_size_iperf};
use serde::Serialize;

use crate::args;
use crate::transfer::TransferKnobs;

/// `longhaul campaign`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "The file (TOML) lists the pairs: `[[pair]]` with `from` (the server that runs the \
test; its `--controllers` file lists this controller's key), `to`, optional ports, name and `args` \
(`longhaul test` flags, after the file's common `args`). A pair with `copy = [paths]` (and \
optionally `dest`) is a third-party copy instead (`longhaul copy` flags in its `args`, after the \
file's `copy_args`). Every sending server is reached and its clock \
measured first; then all start at one instant, `start_in` (default 3 s) later, each in its own clock. \
A pair that fails does not stop the others; the exit code is 1 if any failed.\n\n\
Example:\n  longhaul campaign sc2004.toml --key ops.key --json > result.json",
    mut_arg("json", |a| a.help("Print one JSON result at the end (every pair's report, the sum, the start spread)"))
)]
pub(crate) struct CampaignArgs {
    /// The campaign file.
    file: PathBuf,
    /// This controller's key file [default: $LONGHAUL_KEY, else ~/.config/longhaul/key].
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    #[command(flatten)]
    ip: args::IpFamily,
    /// Seconds to wait for each server at each step of the set-up.
    #[arg(long, default_value = "10", value_parser = crate::args::seconds)]
    connect_timeout: Nanos,
    /// --encrypt: every pair's test or copy, and this controller's connections, in TLS.
    #[command(flatten)]
    encrypt: args::Encrypt,
    #[command(flatten)]
    json: args::Json,
}

/// A copy pair's flags, parsed as `longhaul copy` parses its transfer flags.
#[derive(Parser, Debug)]
#[command(name = "longhaul copy", no_binary_name = true)]
struct CopyPairArgs {
    #[command(flatten)]
    knobs: TransferKnobs,
}

/// What a pair runs.
#[derive(Clone)]
enum Job {
    Test(TestTo),
    Copy(Box<RemoteCopy>),
}

/// Clock probes per server.
const PROBES: u32 = 8;

/// What happened to one pair.
#[derive(Serialize)]
struct PairResult {
    name: String,
    from: String,
    to: String,
    ok: bool,
    error: Option<String>,
    /// The server's clock minus ours, ns, and the probe round trip it was taken from.
    clock_offset_ns: Option<i64>,
    clock_rtt_ns: Option<u64>,
    /// When it started, Unix ns by our clock.
    started_unix_ns: Option<u64>,
    report: Option<Report>,
    /// A copy pair's two summaries (or why each side failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    copy: Option<CopyReport>,
}

/// A copy pair's ends, as `longhaul copy --json` prints them.
#[derive(Serialize)]
struct CopyReport {
    #[serde(serialize_with = "side")]
    sender: Result<Summary, String>,
    #[serde(serialize_with = "side")]
    receiver: Result<Summary, String>,
}

/// A copy's side as `longhaul copy --json` shows it: its summary, or `{"error": why}`.
fn side<S: serde::Serializer>(r: &Result<Summary, String>, s: S) -> Result<S::Ok, S::Error> {
    crate::copy::side_json(r).serialize(s)
}

impl CopyReport {
    fn ok(&self) -> bool {
        let ok = |s: &Result<Summary, String>| s.as_ref().is_ok_and(|s| s.failed.is_empty());
        ok(&self.sender) && ok(&self.receiver)
    }

    /// The receiving side's rate: what a copy adds to the campaign's sum.
    fn received_bps(&self) -> f64 {
        self.receiver.as_ref().map_or(0.0, |s| s.bits_per_second)
    }

    fn error(&self) -> Option<String> {
        let why = |side: &str, r: &Result<Summary, String>| match r {
            Err(e) => Some(format!("the {side} server {e}")),
            Ok(s) if !s.failed.is_empty() => Some(format!(
                "{} files failed at the {side} server",
                s.failed.len()
            )),
            Ok(_) => None,
        };
        let all: Vec<String> = [
            why("sending", &self.sender),
            why("receiving", &self.receiver),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!all.is_empty()).then(|| all.join("; "))
    }
}

/// What a pair's thread tells the main thread.
enum Note {
    /// A test pair reached its sending server (and measured its clock), or a copy pair is ready.
    Reached(usize, Result<Option<ClockOffset>, String>),
    Interval(usize, Box<IntervalReport>),
    Done(usize, Result<Box<(Report, u64)>, String>),
    /// A copy pair's progress.
    Progress(usize, Box<Event>),
    /// A copy pair's end, and when it was asked (Unix ns, our clock).
    Copied(usize, Result<Box<CopyResult>, String>, u64),
}

/// Forwards a pair's intervals to the main thread.
struct Forward {
    pair: usize,
    tx: mpsc::Sender<Note>,
}

impl Observer for Forward {
    fn start(&mut self, _: &Start) {}

    fn interval(&mut self, r: &IntervalReport) {
        let _ = self.tx.send(Note::Interval(self.pair, Box::new(r.clone())));
    }
}

/// `longhaul campaign FILE`.
pub(crate) fn run(a: &CampaignArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&a.file)
        .with_context(|| format!("cannot read the campaign file {}", a.file.display()))?;
    let campaign = match parse_campaign(&text, &a.file.display().to_string()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("longhaul: error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let key = crate::transfer::load_key(a.key.as_deref())?;
    let mut tests = Vec::with_capacity(campaign.pairs.len());
    for (i, p) in campaign.pairs.iter().enumerate() {
        let job = match &p.kind {
            PairKind::Test => pair_test(p, a).map(Job::Test),
            PairKind::Copy { paths, dest } => {
                pair_copy(p, a, paths, dest, &key).map(|c| Job::Copy(Box::new(c)))
            }
        };
        match job {
            Ok(t) => tests.push(t),
            Err(e) => {
                eprintln!(
                    "longhaul: error: {}: pair[{i}] ({}).args: {e}",
                    a.file.display(),
                    p.name
                );
                return Ok(ExitCode::from(2));
            }
        }
    }
    let timeout = a.connect_timeout.to_duration();
    let family = a.ip.family();
    let encrypt = a.encrypt.config();

    // Every pair on its own thread: reach and measure the server, wait for the common start, run.
    let (tx, rx) = mpsc::channel();
    let mut starts = Vec::with_capacity(tests.len());
    for (i, t) in tests.iter().enumerate() {
        let (start_tx, start_rx) = mpsc::channel::<Option<u64>>();
        starts.push(start_tx);
        let (tx, key, t, encrypt) = (tx.clone(), key.clone(), t.clone(), encrypt.clone());
        let (server, port) = (campaign.pairs[i].from.clone(), campaign.pairs[i].from_port);
        std::thread::spawn(move || {
            let t = match t {
                Job::Test(t) => t,
                Job::Copy(c) => return copy_pair(i, &c, &tx, &start_rx),
            };
            let reached =
                JobClient::connect(&server, port, family, &key, timeout, encrypt.as_ref())
                    .and_then(|mut job| job.clock_offset(PROBES).map(|o| (job, o)));
            let (mut job, offset) = match reached {
                Ok(x) => x,
                Err(e) => {
                    let _ = tx.send(Note::Reached(i, Err(e.to_string())));
                    return;
                }
            };
            let _ = tx.send(Note::Reached(i, Ok(Some(offset))));
            // The common start by our clock, or `None` (no start: the campaign gave up).
            let Ok(Some(at)) = start_rx.recv() else {
                return;
            };
            let at_server = (i128::from(at) + i128::from(offset.offset_ns)).max(0) as u64;
            let mut fwd = Forward {
                pair: i,
                tx: tx.clone(),
            };
            let done = job
                .run_test(&t, Some(at_server), None, &mut fwd)
                .map(Box::new)
                .map_err(|e| e.to_string());
            let _ = tx.send(Note::Done(i, done));
        });
    }
    drop(tx);

    let n = tests.len();
    let mut results: Vec<PairResult> = campaign
        .pairs
        .iter()
        .map(|p| PairResult {
            name: p.name.clone(),
            from: p.from.clone(),
            to: p.to.clone(),
            ok: false,
            error: None,
            clock_offset_ns: None,
            clock_rtt_ns: None,
            started_unix_ns: None,
            report: None,
            copy: None,
        })
        .collect();
    let human = !a.json.json;
    let mut reached = 0;
    while reached < n {
        match rx.recv() {
            Ok(Note::Reached(i, r)) => {
                reached += 1;
                match r {
                    Ok(None) => {}
                    Ok(Some(o)) => {
                        results[i].clock_offset_ns = Some(o.offset_ns);
                        results[i].clock_rtt_ns = Some(o.rtt_ns);
                        if human {
                            println!(
                                "{}: reached {}, clock offset {:+.3} ms (probe RTT {:.3} ms)",
                                results[i].name,
                                results[i].from,
                                o.offset_ns as f64 / 1e6,
                                o.rtt_ns as f64 / 1e6
                            );
                        }
                    }
                    Err(e) => {
                        if human {
                            println!("{}: not reached: {e}", results[i].name);
                        }
                        results[i].error = Some(e);
                    }
                }
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let start_at = unix_ns(SystemTime::now() + Duration::from_nanos(campaign.start_in.0));
    for (i, s) in starts.iter().enumerate() {
        if results[i].error.is_none() {
            let _ = s.send(Some(start_at));
        }
    }
    drop(starts);
    if human {
        println!(
            "campaign {}: {} of {} pairs start in {}",
            campaign.name,
            results.iter().filter(|r| r.error.is_none()).count(),
            n,
            longhaul_units::fmt_duration(campaign.start_in)
        );
    }

    let mut intervals: Vec<Vec<IntervalReport>> = vec![Vec::new(); n];
    let mut printed = 0;
    for note in rx {
        match note {
            Note::Interval(i, r) => {
                if human {
                    println!("{}", interval_line(&results[i].name, &r.sum));
                }
                intervals[i].push(*r);
                // The campaign's interval k, once every running pair has reported it.
                let running: Vec<&Vec<IntervalReport>> = (0..n)
                    .filter(|&j| campaign.pairs[j].kind == PairKind::Test)
                    .filter(|&j| results[j].error.is_none() && results[j].report.is_none())
                    .map(|j| &intervals[j])
                    .collect();
                while human && running.iter().all(|v| v.len() > printed) && !running.is_empty() {
                    let these: Vec<&[IntervalReport]> =
                        running.iter().map(|v| &v[printed..=printed]).collect();
                    if let Some(sum) = aggregate_intervals(&these).first() {
                        println!("{}", aggregate_line(sum));
                    }
                    printed += 1;
                }
            }
            Note::Done(i, r) => match r.map(|b| *b) {
                Ok((report, started)) => {
                    let offset = results[i].clock_offset_ns.unwrap_or(0);
                    results[i].started_unix_ns =
                        Some((i128::from(started) - i128::from(offset)).max(0) as u64);
                    results[i].ok = true;
                    results[i].report = Some(report);
                }
                Err(e) => {
                    if human {
                        println!("{}: failed: {e}", results[i].name);
                    }
                    results[i].error = Some(e);
                }
            },
            Note::Progress(i, e) => {
                if human
                    && let Event::Progress {
                        bytes,
                        bytes_to_send,
                        files,
                        seconds,
                        bits_per_second,
                    } = *e
                {
                    println!(
                        "{:<24} {seconds:6.2} sec  {:>12}  {:>15}  copy: {} of {}, {files} files",
                        results[i].name,
                        fmt_size_iperf(bytes),
                        fmt_rate_iperf(bits_per_second as u64),
                        fmt_size(bytes),
                        fmt_size(bytes_to_send)
                    );
                }
            }
            Note::Copied(i, r, asked) => {
                results[i].started_unix_ns = Some(asked);
                match r {
                    Ok(c) => {
                        let c = CopyReport {
                            sender: c.sender,
                            receiver: c.receiver,
                        };
                        results[i].ok = c.ok();
                        results[i].error = c.error();
                        results[i].copy = Some(c);
                    }
                    Err(e) => results[i].error = Some(e),
                }
                if human && let Some(e) = &results[i].error {
                    println!("{}: failed: {e}", results[i].name);
                }
            }
            Note::Reached(..) => {}
        }
    }

    let done: Vec<&PairResult> = results
        .iter()
        .filter(|r| r.ok && r.report.is_some())
        .collect();
    let copied: Vec<&CopyReport> = results
        .iter()
        .filter(|r| r.ok)
        .filter_map(|r| r.copy.as_ref())
        .collect();
    let reports: Vec<&[IntervalReport]> = done
        .iter()
        .map(|r| {
            r.report
                .as_ref()
                .expect("ok has a report")
                .intervals
                .as_slice()
        })
        .collect();
    let aggregate = aggregate_intervals(&reports);
    let sum = |f: fn(&Report) -> f64| -> f64 {
        done.iter()
            .map(|r| f(r.report.as_ref().expect("ok has a report")))
            .sum()
    };
    let copies_received: f64 = copied.iter().map(|c| c.received_bps()).sum();
    let sum_received = sum(|r| r.end.sum_received.bits_per_second) + copies_received;
    let sum_sent = sum(|r| r.end.sum_sent.bits_per_second)
        + copied
            .iter()
            .map(|c| c.sender.as_ref().map_or(0.0, |s| s.bits_per_second))
            .sum::<f64>();
    let spread = start_spread_ns(
        &done
            .iter()
            .filter_map(|r| r.started_unix_ns.map(|s| (s, 0)))
            .collect::<Vec<_>>(),
    );
    let failed = results.iter().filter(|r| !r.ok).count();
    if a.json.json {
        let doc = serde_json::json!({
            "campaign": campaign.name,
            "start_at_unix_ns": start_at,
            "start_spread_ns": spread,
            "pairs": results,
            "aggregate": {
                "intervals": aggregate,
                "sum_received_bits_per_second": sum_received,
                "sum_sent_bits_per_second": sum_sent,
                "pairs_ok": done.len() + copied.len(),
                "pairs_failed": failed,
                "copies_received_bits_per_second": copies_received,
            },
        });
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!("- - - - - - - - - - - - - - - - - - - - - - - - -");
        for r in &results {
            match (&r.report, &r.copy, &r.error) {
                (_, _, Some(e)) => println!("{:<24} FAILED: {e}", r.name),
                (Some(rep), _, None) => println!(
                    "{:<24} {} received, {} sent",
                    r.name,
                    fmt_rate(rep.end.sum_received.bits_per_second as u64),
                    fmt_rate(rep.end.sum_sent.bits_per_second as u64)
                ),
                (None, Some(c), None) => {
                    if let Ok(rx) = &c.receiver {
                        println!(
                            "{:<24} {} received (copy: {} files, {} moved, every file verified)",
                            r.name,
                            fmt_rate(rx.bits_per_second as u64),
                            rx.files,
                            fmt_size(rx.bytes_moved)
                        );
                    }
                }
                (None, None, None) => println!("{:<24} FAILED", r.name),
            }
        }
        println!(
            "{:<24} {} received in all by {} of {} pairs; start spread {:.3} ms",
            "SUM",
            fmt_rate(sum_received as u64),
            done.len() + copied.len(),
            n,
            spread as f64 / 1e6
        );
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// A pair's test from its flags.
fn pair_test(p: &PairSpec, a: &CampaignArgs) -> anyhow::Result<TestTo> {
    Ok(TestTo {
        to: p.to.clone(),
        port: p.to_port,
        family: longhaul_engine::job::target_family(a.ip.family()),
        params: crate::test::file_flags(&p.from, &p.args)?,
        encrypt: a.encrypt.encrypt,
    })
}

/// A copy pair's flags and what it copies.
fn pair_copy(
    p: &PairSpec,
    a: &CampaignArgs,
    paths: &[longhaul_transfer::RelPath],
    dest: &Option<longhaul_transfer::RelPath>,
    key: &longhaul_transfer::Key,
) -> anyhow::Result<RemoteCopy> {
    let args = CopyPairArgs::try_parse_from(&p.args).map_err(|e| {
        let text = e.render().to_string();
        anyhow::anyhow!("{}", text.lines().next().unwrap_or("bad flags"))
    })?;
    let k = args.knobs;
    anyhow::ensure!(
        !k.json.json && !k.json_stream,
        "--json and --json-stream come from the command line, not a pair's args"
    );
    Ok(RemoteCopy {
        from: p.from.clone(),
        from_port: p.from_port,
        to: p.to.clone(),
        to_port: p.to_port,
        family: a.ip.family(),
        target_family: longhaul_engine::job::target_family(a.ip.family()),
        key: key.clone(),
        paths: paths.to_vec(),
        dest: dest.clone(),
        overwrite: k.overwrite,
        fsync: k.fsync,
        streams: k.streams.n,
        rate_bps: k.rate_bps(),
        chunk_size: k.chunk,
        congestion: k.congestion,
        idle_timeout: Duration::from_secs(k.idle_timeout),
        timeout: a.connect_timeout.to_duration(),
        encrypt: a.encrypt.config(),
        stripe: None,
    })
}

/// A copy pair's thread: ready at once, then at the common start (our clock) asks for the copy
/// and forwards its progress and its end.
fn copy_pair(
    i: usize,
    c: &RemoteCopy,
    tx: &mpsc::Sender<Note>,
    start_rx: &mpsc::Receiver<Option<u64>>,
) {
    let _ = tx.send(Note::Reached(i, Ok(None)));
    let Ok(Some(at)) = start_rx.recv() else {
        return;
    };
    let at = std::time::UNIX_EPOCH + Duration::from_nanos(at);
    if let Ok(wait) = at.duration_since(SystemTime::now()) {
        std::thread::sleep(wait);
    }
    let asked = unix_ns(SystemTime::now());
    let mut forward = |e: &Event| {
        if matches!(e, Event::Progress { .. }) {
            let _ = tx.send(Note::Progress(i, Box::new(e.clone())));
        }
    };
    let r = run_remote_copy(c, &mut forward)
        .map(Box::new)
        .map_err(|e| e.to_string());
    let _ = tx.send(Note::Copied(i, r, asked));
}

fn interval_line(name: &str, s: &longhaul_proto::report::SumEntry) -> String {
    format!(
        "{name:<24} {:6.2}-{:<6.2} sec  {:>12}  {:>15}{}",
        s.start,
        s.end,
        fmt_size_iperf(s.bytes),
        fmt_rate_iperf(s.bits_per_second as u64),
        if s.omitted { "  (omitted)" } else { "" }
    )
}

fn aggregate_line(s: &AggregateInterval) -> String {
    format!(
        "{:<24} {:6.2}-{:<6.2} sec  {:>12}  {:>15}  ({} pairs)",
        "SUM",
        s.start,
        s.end,
        fmt_size_iperf(s.bytes),
        fmt_rate_iperf(s.bits_per_second as u64),
        s.pairs
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Parser)]
    #[command(no_binary_name = true)]
    struct Cmd {
        #[command(flatten)]
        a: CampaignArgs,
    }

    /// A bare `--connect-timeout` is seconds, as for `longhaul test` (it was read as milliseconds:
    /// every server beyond a 10 ms round trip timed out).
    #[test]
    fn a_bare_connect_timeout_is_seconds() {
        let c = Cmd::try_parse_from(["f.toml", "--connect-timeout", "10"]).unwrap();
        assert_eq!(c.a.connect_timeout, Nanos::from_secs(10));
        let d = Cmd::try_parse_from(["f.toml"]).unwrap();
        assert_eq!(d.a.connect_timeout, Nanos::from_secs(10));
    }

    #[test]
    fn pair_flags_parse_as_longhaul_test_and_refuse_third_party_ones() {
        let c = Cmd::try_parse_from(["f.toml"]).unwrap();
        let pair = |args: &[&str]| PairSpec {
            name: "p".into(),
            from: "a".into(),
            from_port: 7067,
            to: "b".into(),
            to_port: 7068,
            kind: PairKind::Test,
            args: args.iter().map(|s| s.to_string()).collect(),
        };
        let t = pair_test(&pair(&["-t", "5", "-P", "3"]), &c.a).unwrap();
        assert_eq!((t.to.as_str(), t.port, t.params.streams), ("b", 7068, 3));
        for flags in [&["--to", "c"], &["--key", "k"]] {
            let e = pair_test(&pair(flags), &c.a).unwrap_err();
            assert!(
                e.to_string()
                    .contains("come from the file and the command line"),
                "{e}"
            );
        }
        let e = pair_test(&pair(&["-P", "0"]), &c.a).unwrap_err();
        assert!(e.to_string().contains("streams"), "{e}");
        // iperf3's socket flags are the test's; its output and process flags are this host's.
        let t = pair_test(&pair(&["-M", "1000", "-S", "0x28", "-k", "10"]), &c.a).unwrap();
        assert_eq!(
            (t.params.sockets.mss, t.params.sockets.tos),
            (Some(1000), Some(0x28))
        );
        for flags in [
            &["-T", "x"][..],
            &["--cport", "5000"],
            &["-A", "0"],
            &["--logfile", "f"],
        ] {
            let e = pair_test(&pair(flags), &c.a).unwrap_err();
            assert!(
                e.to_string().contains("on the command line"),
                "{flags:?}: {e}"
            );
        }
        // A copy pair's flags are `longhaul copy`'s; output flags belong to the command line.
        let key = longhaul_transfer::Key::from_bytes([1; 32]);
        let c2 = pair_copy(&pair(&["-P", "3", "--chunk", "2M"]), &c.a, &[], &None, &key).unwrap();
        assert_eq!((c2.streams, c2.chunk_size), (Some(3), Some(2 << 20)));
        let e = pair_copy(&pair(&["--json"]), &c.a, &[], &None, &key).unwrap_err();
        assert!(e.to_string().contains("command line"), "{e}");
        assert!(pair_copy(&pair(&["-t", "5"]), &c.a, &[], &None, &key).is_err());
    }
}
