//! `longhaul copy A:SRC... B:DEST`: a third-party copy. This controller asks server B for a
//! one-time ticket and server A to send its files to B with it; the data goes from A to B, and
//! only progress and the two summaries come here (`longhaul_engine::job::copy`, docs/fleet.md).

use std::process::ExitCode;
use std::time::Duration;

use longhaul_engine::{
    CopyResult, EngineError, RemoteCopy, StripePair, StripedResult, run_remote_copy,
    run_striped_copy,
};
use longhaul_transfer::report::{Event, Summary};

use std::path::PathBuf;

use longhaul_engine::DEFAULT_PORT;

use crate::args;
use crate::transfer::{
    Output, TransferKnobs, host_path, load_key, out_line, remote_path, summary_line, usage,
};

/// `longhaul copy A:SRC... B:DEST`.
#[derive(clap::Args, Debug)]
#[command(
    override_usage = "longhaul copy [OPTIONS] A:SRC... B:DEST",
    after_help = "Server A sends each SRC (relative to A's --root) to server B, where it lands in \
DEST (relative to B's --root) under its own name, exactly as `longhaul send` run on A would: every \
chunk verified, every file renamed into place only when its digest matches. Both servers must list \
this controller's key in their --controllers file and serve files (--root, --key); each checks its \
own limits for it. B issues a one-time ticket whose key only B, A and this controller know: A and B \
authenticate each other with it. The data never passes through here. Run the same command again \
after any failure: only what is missing moves. -p is A's port, --to-port B's.\n\n\
--stripe FROM=TO (repeatable) moves the same copy over more pairs at once, as a cluster with shared \
storage does: every FROM serves the same files as A, every TO writes into the same storage as B. \
Small files are spread over the pairs whole, large files chunk by chunk (--chunk, default 8M, the \
same for every pair); the receiver that ends last puts every file in place. If a pair fails, run \
the command again, with the same pairs or fewer: only what is missing moves.\n\n\
Examples:\n  longhaul copy --key ops.key dtn1:run42 dtn2:incoming\n  \
longhaul copy -P 8 --rate 2G --to-port 7068 dtn1:a dtn1:b [2001:db8::7]:\n  \
longhaul copy --stripe dtn3=dtn4 --stripe dtn5:7070=[2001:db8::6] dtn1:run42 dtn2:incoming"
)]
pub(crate) struct CopyArgs {
    /// A:SRC sources (one server), then B:DEST.
    #[arg(required = true, num_args = 2.., value_name = "PATH")]
    args: Vec<String>,
    /// The sending server's (A's) port.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// The receiving server's (B's) port [default: the same as A's, -p].
    #[arg(long, value_name = "PORT")]
    to_port: Option<u16>,
    #[command(flatten)]
    ip: args::IpFamily,
    /// This controller's key file, as both servers' --controllers files list it [default:
    /// $LONGHAUL_KEY, else ~/.config/longhaul/key].
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    /// How long to try connecting to A and B and to wait for each set-up step, seconds (A uses
    /// its own --handshake-timeout for B).
    #[arg(long, default_value_t = 10)]
    connect_timeout: u64,
    /// --encrypt: this controller's connections to A and B, and A's transfer to B, in TLS (A
    /// checks no certificate of B's: the ticket's key proofs, bound to the TLS session, do).
    #[command(flatten)]
    encrypt: crate::args::Encrypt,
    /// Stripe the copy over one more pair: FROM (sharing A's files) sends to TO (sharing B's
    /// storage). HOST or HOST:PORT ([IPv6]:PORT); ports default to -p and --to-port.
    #[arg(long = "stripe", value_name = "FROM=TO")]
    stripes: Vec<String>,
    #[command(flatten)]
    knobs: TransferKnobs,
}

/// `HOST`, `HOST:PORT`, `[V6]` or `[V6]:PORT`.
fn host_port(s: &str, default: u16) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, rest) = rest
            .split_once(']')
            .ok_or_else(|| format!("{s:?}: a ']' must close the IPv6 address"))?;
        (h, rest.strip_prefix(':'))
    } else if s.matches(':').count() == 1 {
        let (h, p) = s.split_once(':').expect("one colon");
        (h, Some(p))
    } else {
        (s, None)
    };
    if host.is_empty() || host.contains('/') || host.contains(char::is_whitespace) {
        return Err(format!("{s:?}: name a server (HOST or HOST:PORT)"));
    }
    let port = match port {
        None => default,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| format!("{s:?}: the port must be 1 to 65535"))?,
    };
    Ok((host.to_string(), port))
}

/// A `--stripe FROM=TO` pair.
fn stripe_pair(s: &str, from_port: u16, to_port: u16) -> Result<StripePair, String> {
    let (from, to) = s
        .split_once('=')
        .ok_or_else(|| format!("--stripe {s:?}: give FROM=TO"))?;
    let (from, from_port) = host_port(from, from_port).map_err(|e| format!("--stripe {e}"))?;
    let (to, to_port) = host_port(to, to_port).map_err(|e| format!("--stripe {e}"))?;
    Ok(StripePair {
        from,
        from_port,
        to,
        to_port,
    })
}

pub(crate) fn run(a: &CopyArgs) -> anyhow::Result<ExitCode> {
    crate::logging::to_stderr("warn");
    let k = &a.knobs;
    let (target, sources) = a.args.split_last().expect("clap requires two arguments");
    let Some((to, dest)) = host_path(target) else {
        return usage(format!("{target:?}: the last argument must be B:DEST"));
    };
    let dest = match remote_path(&dest, "DEST") {
        Ok(d) => d,
        Err(e) => return usage(e.to_string()),
    };
    let mut from = None;
    let mut paths = Vec::new();
    for s in sources {
        let Some((h, p)) = host_path(s) else {
            return usage(format!("{s:?}: sources of `copy` are A:PATH"));
        };
        if from.as_ref().is_some_and(|x| *x != h) {
            return usage(format!("{s:?}: all sources must be on one server"));
        }
        from = Some(h);
        match remote_path(&p, "SRC") {
            Ok(Some(p)) => paths.push(p),
            Ok(None) => {
                return usage(format!("{s:?}: name a file or directory under A's root"));
            }
            Err(e) => return usage(e.to_string()),
        }
    }
    let from = from.expect("at least one source");
    let cfg = RemoteCopy {
        from,
        from_port: a.port,
        to,
        to_port: a.to_port.unwrap_or(a.port),
        family: a.ip.family(),
        target_family: longhaul_engine::job::target_family(a.ip.family()),
        key: load_key(a.key.as_deref())?,
        paths,
        dest,
        overwrite: k.overwrite,
        fsync: k.fsync,
        streams: k.streams.n,
        rate_bps: k.rate_bps(),
        chunk_size: k.chunk,
        congestion: k.congestion.clone(),
        idle_timeout: Duration::from_secs(k.idle_timeout),
        timeout: Duration::from_secs(a.connect_timeout.max(1)),
        encrypt: a.encrypt.config(),
        stripe: None,
    };
    if !a.stripes.is_empty() {
        let mut pairs = vec![StripePair {
            from: cfg.from.clone(),
            from_port: cfg.from_port,
            to: cfg.to.clone(),
            to_port: cfg.to_port,
        }];
        for s in &a.stripes {
            match stripe_pair(s, cfg.from_port, cfg.to_port) {
                Ok(p) if pairs.contains(&p) => {
                    return usage(format!("--stripe {s:?}: that pair is already in the copy"));
                }
                Ok(p) => pairs.push(p),
                Err(e) => return usage(e),
            }
        }
        return striped(&cfg, &pairs, Output::new(k));
    }
    let mut out = Output::new(k);
    let result = run_remote_copy(&cfg, &mut |e| out.event(e));
    finish(out, &cfg, result)
}

/// Progress of a striped copy: every pair's sender, summed for the bar; with --json-stream each
/// event carries its pair's index (`stripe`).
struct StripedOutput {
    out: Output,
    to_send: Vec<u64>,
    moved: Vec<u64>,
    files: Vec<u64>,
}

impl StripedOutput {
    fn event(&mut self, k: usize, e: &Event) {
        if self.out.stream {
            let mut v = serde_json::to_value(e).expect("events serialise");
            v["stripe"] = k.into();
            out_line(&v.to_string());
            return;
        }
        match e {
            Event::Started { bytes_to_send, .. } => self.to_send[k] = *bytes_to_send,
            Event::Progress { bytes, files, .. } => {
                self.moved[k] = *bytes;
                self.files[k] = *files;
            }
            Event::File { .. } => self.out.event(e),
        }
        if let Some(b) = &self.out.bar {
            b.set_length(self.to_send.iter().sum());
            b.set_position(self.moved.iter().sum());
            b.set_message(format!(
                "{} parts of files, {} pairs",
                self.files.iter().sum::<u64>(),
                self.moved.len()
            ));
        }
    }
}

/// A copy striped over `pairs` (the first is A and B).
fn striped(cfg: &RemoteCopy, pairs: &[StripePair], out: Output) -> anyhow::Result<ExitCode> {
    let n = pairs.len();
    let shown = std::sync::Mutex::new(StripedOutput {
        out,
        to_send: vec![0; n],
        moved: vec![0; n],
        files: vec![0; n],
    });
    let started = std::time::Instant::now();
    let result = run_striped_copy(cfg, pairs, &|k, e| {
        shown.lock().unwrap_or_else(|e| e.into_inner()).event(k, e);
    });
    let seconds = started.elapsed().as_secs_f64();
    let out = shown.into_inner().unwrap_or_else(|e| e.into_inner()).out;
    if let Some(b) = &out.bar {
        b.finish_and_clear();
    }
    let r = result?;
    report_striped(&out, &r, seconds)?;
    Ok(if r.complete() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn report_striped(out: &Output, r: &StripedResult, seconds: f64) -> anyhow::Result<()> {
    let bytes: u64 = r
        .pairs
        .iter()
        .filter_map(|(_, c)| c.as_ref().ok())
        .filter_map(|c| c.sender.as_ref().ok())
        .map(|s| s.bytes_moved)
        .sum();
    let rate = bytes as f64 * 8.0 / seconds.max(1e-9);
    let in_place = r
        .pairs
        .iter()
        .filter_map(|(_, c)| c.as_ref().ok()?.receiver.as_ref().ok()?.stripe.clone())
        .find(|s| s.finished);
    let name = |p: &StripePair| {
        (
            format!("{} port {}", p.from, p.from_port),
            format!("{} port {}", p.to, p.to_port),
        )
    };
    if out.json || out.stream {
        let pairs: Vec<serde_json::Value> = r
            .pairs
            .iter()
            .map(|(p, c)| {
                let mut v = serde_json::json!({
                    "from": p.from, "from_port": p.from_port, "to": p.to, "to_port": p.to_port,
                });
                match c {
                    Ok(c) => {
                        v["sender"] = side_json(&c.sender);
                        v["receiver"] = side_json(&c.receiver);
                    }
                    Err(e) => v["error"] = e.clone().into(),
                }
                v
            })
            .collect();
        let v = serde_json::json!({
            "run": r.run,
            "chunk_size": r.chunk_size,
            "ok": r.complete(),
            "files_in_place": in_place.as_ref().map(|s| s.files_in_place),
            "bytes_moved": bytes,
            "seconds": seconds,
            "bits_per_second": rate,
            "pairs": pairs,
        });
        print_summary(out.stream, v)?;
    } else {
        for (p, c) in &r.pairs {
            let (from, to) = name(p);
            if let Ok(CopyResult { sender: Ok(s), .. }) = c {
                eprintln!("{from} → {to}: {}", summary_line(s));
            }
        }
        eprintln!(
            "striped over {} pairs: moved {} in {seconds:.1} s = {} together",
            r.pairs.len(),
            longhaul_units::fmt_size(bytes),
            longhaul_units::fmt_rate(rate as u64)
        );
        match &in_place {
            Some(s) if r.complete() => eprintln!(
                "{} files in place, every chunk verified at its receiver and every file's parts (BLAKE3); put in place by the receiver of pair {}",
                s.files_in_place,
                s.index + 1
            ),
            _ => eprintln!(
                "the copy is incomplete: run the same command again (with these pairs or fewer) to resume"
            ),
        }
    }
    for (p, c) in &r.pairs {
        let (from, to) = name(p);
        match c {
            Err(e) => eprintln!("longhaul: error: pair {from} → {to}: {e}"),
            Ok(c) => {
                if let Err(e) = &c.sender {
                    eprintln!("longhaul: error: the sending server {e}");
                }
                match &c.receiver {
                    Err(e) => eprintln!("longhaul: error: the receiving server {e}"),
                    Ok(s) => {
                        for f in &s.failed {
                            eprintln!("longhaul: error: {to}: {f}");
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// The JSON result: one `summary` event line with --json-stream, else pretty.
fn print_summary(stream: bool, mut v: serde_json::Value) -> anyhow::Result<()> {
    if stream {
        v["event"] = "summary".into();
        out_line(&serde_json::to_string(&v)?);
    } else {
        out_line(&serde_json::to_string_pretty(&v)?);
    }
    Ok(())
}

/// A side's result as JSON: its summary, or `{"error": why}`.
pub(crate) fn side_json(r: &Result<Summary, String>) -> serde_json::Value {
    match r {
        Ok(s) => serde_json::to_value(s).expect("summaries serialise"),
        Err(e) => serde_json::json!({ "error": e }),
    }
}

fn finish(
    out: Output,
    cfg: &RemoteCopy,
    result: Result<CopyResult, EngineError>,
) -> anyhow::Result<ExitCode> {
    let from = format!("{} port {}", cfg.from, cfg.from_port);
    let to = format!("{} port {}", cfg.to, cfg.to_port);
    if let Some(b) = &out.bar {
        b.finish_and_clear();
    }
    let r = match result {
        Ok(r) => r,
        Err(e) => {
            if out.stream {
                out_line(
                    &serde_json::json!({ "event": "error", "message": e.to_string() }).to_string(),
                );
            }
            return Err(e.into());
        }
    };
    let ok = |s: &Result<Summary, String>| s.as_ref().is_ok_and(|s| s.failed.is_empty());
    let success = ok(&r.sender) && ok(&r.receiver);
    if out.json || out.stream {
        let v = serde_json::json!({
            "from": cfg.from,
            "from_port": cfg.from_port,
            "to": cfg.to,
            "to_port": cfg.to_port,
            "ok": success,
            "sender": side_json(&r.sender),
            "receiver": side_json(&r.receiver),
        });
        print_summary(out.stream, v)?;
    } else {
        if let Ok(s) = &r.sender {
            for sk in &s.skipped {
                eprintln!("left out: {sk}");
            }
            eprintln!("{from} → {to}: {}", summary_line(s));
        }
        if let Ok(s) = &r.receiver {
            eprintln!(
                "{to} received {} files in place ({} failed){}",
                s.files,
                s.failed.len(),
                if s.verified {
                    ", every file verified there (BLAKE3)"
                } else {
                    ", NOT all files verified"
                }
            );
        }
    }
    // Whatever the output format, a side that failed says why on stderr.
    if let Err(e) = &r.sender {
        eprintln!("longhaul: error: the sending server {e}");
    }
    if let Err(e) = &r.receiver {
        eprintln!("longhaul: error: the receiving server {e}");
    }
    Ok(if success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
