//! `longhaul copy A:SRC... B:DEST`: a third-party copy. This controller asks server B for a
//! one-time ticket and server A to send its files to B with it; the data goes from A to B, and
//! only progress and the two summaries come here (`longhaul_engine::job::copy`, docs/fleet.md).

use std::process::ExitCode;
use std::time::Duration;

use longhaul_engine::{CopyResult, EngineError, RemoteCopy, run_remote_copy};
use longhaul_transfer::report::Summary;

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
Examples:\n  longhaul copy --key ops.key dtn1:run42 dtn2:incoming\n  \
longhaul copy -P 8 --rate 2G --to-port 7068 dtn1:a dtn1:b [2001:db8::7]:"
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
    #[command(flatten)]
    knobs: TransferKnobs,
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
        target_family: crate::test::target_family(a.ip.family()),
        key: load_key(a.key.as_deref())?,
        paths,
        dest,
        overwrite: k.overwrite,
        fsync: k.fsync,
        streams: k.streams.n,
        rate_bps: k.rate,
        chunk_size: k.chunk,
        congestion: k.congestion.clone(),
        idle_timeout: Duration::from_secs(k.idle_timeout),
        timeout: Duration::from_secs(a.connect_timeout.max(1)),
        encrypt: a.encrypt.config(),
    };
    let mut out = Output::new(k);
    let result = run_remote_copy(&cfg, &mut |e| out.event(e));
    finish(out, &cfg, result)
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
        let mut v = serde_json::json!({
            "from": cfg.from,
            "from_port": cfg.from_port,
            "to": cfg.to,
            "to_port": cfg.to_port,
            "ok": success,
            "sender": side_json(&r.sender),
            "receiver": side_json(&r.receiver),
        });
        if out.stream {
            v["event"] = "summary".into();
            out_line(&serde_json::to_string(&v)?);
        } else {
            out_line(&serde_json::to_string_pretty(&v)?);
        }
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
