//! `longhaul send`, `longhaul get` and `longhaul keygen`: flags, the HOST:PATH syntax, key files,
//! progress (a bar on a terminal, JSON events otherwise) and the summary. The work is in
//! `longhaul_engine::transfer`.

use std::io::IsTerminal;
use std::net::IpAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use longhaul_engine::transfer::{DEFAULT_RATE_BPS, Endpoint, Event, Summary, TransferConfig};
use longhaul_engine::{DEFAULT_PORT, EngineError};
use longhaul_transfer::manifest::ModePolicy;
use longhaul_transfer::{Key, RelPath};
use longhaul_units::{fmt_rate, fmt_size, parse_size};

use crate::args;

/// Where `--key` is looked for when not given: $LONGHAUL_KEY, then this under $HOME.
const DEFAULT_KEY: &str = ".config/longhaul/key";

/// Flags shared by `send` and `get`: where the server is, the key, and the transfer's knobs.
#[derive(clap::Args, Debug)]
pub(crate) struct CommonArgs {
    /// Server port.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    pub(crate) port: u16,
    #[command(flatten)]
    pub(crate) ip: args::IpFamily,
    /// Local address to bind.
    #[arg(short = 'B', long)]
    pub(crate) bind: Option<IpAddr>,
    /// Key file shared with the server [default: $LONGHAUL_KEY, else ~/.config/longhaul/key].
    #[arg(long, value_name = "FILE")]
    pub(crate) key: Option<PathBuf>,
    /// How long to try connecting and to wait for each set-up step, seconds.
    #[arg(long, default_value_t = 10)]
    pub(crate) connect_timeout: u64,
    #[command(flatten)]
    pub(crate) encrypt: args::Encrypt,
    #[command(flatten)]
    pub(crate) knobs: TransferKnobs,
    /// "auto": find the bottleneck by packet trains to the server and govern the sending side's
    /// pacing from there, adjusting as the path changes, instead of pacing at --rate
    /// (docs/pacing.md).
    #[arg(long, value_name = "auto", value_parser = pace_auto)]
    pub(crate) pace: Option<args::Pace>,
    /// The path carries nothing else (a reserved or emulated path): open at --rate from the first
    /// round trip instead of slow start, with an initial window on a host route of this host's own
    /// to the server (root), buffers set before the handshake and pacing from the first packet;
    /// the route is removed afterwards (docs/pacing.md). `send` only; needs --rate.
    #[arg(long, requires = "rate", conflicts_with = "pace")]
    pub(crate) dedicated: bool,
    /// What carries the data: the kernel's TCP, or reliable, encrypted QUIC flows over UDP in
    /// user space, one per stream, with -C cubic (default), newreno, bbr or udt and windows sized from
    /// the path, needing no root; the same chunks, verification and resume either way, so a
    /// transfer begun over one finishes over the other (docs/transport.md).
    #[arg(long, value_enum, default_value = "tcp", conflicts_with_all = ["pace", "dedicated"])]
    pub(crate) transport: args::TransportArg,
}

/// `--pace` of a transfer: only `auto` (a transfer's fixed pacing rate is `--rate`).
fn pace_auto(s: &str) -> Result<args::Pace, String> {
    match args::pace(s)? {
        args::Pace::Auto => Ok(args::Pace::Auto),
        args::Pace::Rate(_) => Err("a transfer is paced at --rate; --pace takes \"auto\"".into()),
    }
}

/// How a transfer runs and reports, wherever it runs (`send`, `get`, and `copy` on its sending
/// server).
#[derive(clap::Args, Debug)]
pub(crate) struct TransferKnobs {
    #[command(flatten)]
    pub(crate) streams: args::TransferStreams,
    /// Target rate of the whole transfer, best the path's own (e.g. its bottleneck's payload
    /// rate): sizes windows, chunks and streams (no more than the windows it needs: one where one
    /// carries it) and paces the streams to it [default: the server's --path-rate, else 10G
    /// with at least 4 streams]
    #[arg(long, value_parser = args::rate)]
    pub(crate) rate: Option<u64>,
    /// Chunk size (a power of two, 1M to 64M) [default: one stream's share of one RTT].
    #[arg(long, value_parser = chunk)]
    pub(crate) chunk: Option<u64>,
    /// Replace existing files that differ (otherwise each such file fails).
    #[arg(long)]
    pub(crate) overwrite: bool,
    /// Make every file durable (fsync) before it is renamed into place.
    #[arg(long)]
    pub(crate) fsync: bool,
    /// Congestion control for the data connections (e.g. cubic, bbr).
    #[arg(short = 'C', long)]
    pub(crate) congestion: Option<String>,
    #[command(flatten)]
    pub(crate) json: args::Json,
    /// Print one JSON event per line (started, progress, file, summary) instead of a progress bar.
    #[arg(long, conflicts_with = "json")]
    pub(crate) json_stream: bool,
    /// Give up after this many seconds without any progress (a dead peer or a cut path); run the
    /// same command again to resume.
    #[arg(long, default_value_t = 60, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub(crate) idle_timeout: u64,
}

impl TransferKnobs {
    /// `--rate`, or the default of a path nobody described.
    pub(crate) fn rate_bps(&self) -> u64 {
        self.rate.unwrap_or(DEFAULT_RATE_BPS)
    }
}

/// `longhaul send SRC... HOST:DEST`.
#[derive(clap::Args, Debug)]
#[command(
    override_usage = "longhaul send [OPTIONS] SRC... HOST:DEST",
    after_help = "Each SRC (a file, a directory tree or a symlink) lands in DEST, relative to \
the server's --root (created if missing; `HOST:` alone is the root), under its own name. IPv6 \
addresses go in brackets: [::1]:incoming. Files are cut into chunks sent over parallel streams, every \
chunk is verified (BLAKE3) and every file lands under a temporary name and is renamed into place only \
when its digest matches. Run the same command again after any failure: only what is missing moves.\n\n\
Examples:\n  longhaul send data/run42 dtn2.example.org:incoming\n  \
longhaul send -P 8 --rate 2G big.h5 [2001:db8::7]:\n  longhaul send --json-stream tree/ host:backup"
)]
pub(crate) struct SendArgs {
    /// Local files or directories to send, then HOST:DEST.
    #[arg(required = true, num_args = 2.., value_name = "PATH")]
    args: Vec<String>,
    #[command(flatten)]
    common: CommonArgs,
}

/// `longhaul get HOST:SRC... DEST`.
#[derive(clap::Args, Debug)]
#[command(
    override_usage = "longhaul get [OPTIONS] HOST:SRC... DEST",
    after_help = "Each SRC (relative to the server's --root) lands in the local directory DEST \
(created if missing) under its own name. The server may list only those names and what lies under \
them; anything else refuses the whole transfer before DEST is touched. Modes: the server's, minus \
your umask, without setuid/setgid/sticky (unless --keep-special-bits); existing directories keep \
theirs. A partial transfer leaves a journal (DEST/.longhaul-journal) and hidden .lh-*.part files; \
run the same command again to resume.\n\n\
Examples:\n  longhaul get dtn2.example.org:run42 /data\n  longhaul get host:a host:b/c ."
)]
pub(crate) struct GetArgs {
    /// HOST:SRC sources (one host), then the local DEST directory.
    #[arg(required = true, num_args = 2.., value_name = "PATH")]
    args: Vec<String>,
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    modes: ModeArgs,
}

/// The receiver's mode rules (`get`, and `server` for what clients send). Only the receiving side
/// sets them: no peer can turn them on.
#[derive(clap::Args, Debug)]
pub(crate) struct ModeArgs {
    /// Keep the setuid, setgid and sticky bits of received files and directories (dropped by
    /// default). Group and other bits always follow this process's umask.
    #[arg(long)]
    pub(crate) keep_special_bits: bool,
    /// With --overwrite (the sender's, for `server`): give directories that already exist the
    /// sender's mode too (by default they keep theirs).
    #[arg(long)]
    pub(crate) chmod_existing_dirs: bool,
}

/// `longhaul keygen FILE`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Writes a new random key (mode 0600). Give the same file to the server \
(`longhaul server --root DIR --key FILE`) and to clients (`--key FILE`, $LONGHAUL_KEY, or \
~/.config/longhaul/key); copy it over a channel you trust (e.g. scp)."
)]
pub(crate) struct KeygenArgs {
    /// Where to write the key.
    file: PathBuf,
    /// Replace an existing file.
    #[arg(long)]
    force: bool,
}

fn chunk(s: &str) -> Result<u64, String> {
    let n = parse_size(s).map_err(|e| e.to_string())?;
    longhaul_transfer::manifest::check_chunk_size(n).map_err(|e| e.to_string())?;
    Ok(n)
}

/// Splits `HOST:PATH` (`[v6]:PATH` for IPv6 literals).
pub(crate) fn host_path(s: &str) -> Option<(String, String)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, rest) = rest.split_once(']')?;
        let path = rest.strip_prefix(':')?;
        return Some((host.to_string(), path.to_string()));
    }
    let (host, path) = s.split_once(':')?;
    (!host.is_empty() && !host.contains('/')).then(|| (host.to_string(), path.to_string()))
}

/// A remote path: empty or `.` means the root.
pub(crate) fn remote_path(p: &str, what: &str) -> anyhow::Result<Option<RelPath>> {
    let p = p.trim_end_matches('/');
    if p.is_empty() || p == "." {
        return Ok(None);
    }
    RelPath::parse(p)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("{what} {p:?}: {e}"))
}

/// Reads a key file (refusing one others can read).
pub(crate) fn load_key(given: Option<&Path>) -> anyhow::Result<Key> {
    let path = match given {
        Some(p) => p.to_path_buf(),
        None => match std::env::var_os("LONGHAUL_KEY") {
            Some(p) => PathBuf::from(p),
            None => {
                let home = std::env::var_os("HOME").context(
                    "no --key given and neither $LONGHAUL_KEY nor $HOME is set; create a key with \
`longhaul keygen FILE`",
                )?;
                PathBuf::from(home).join(DEFAULT_KEY)
            }
        },
    };
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read the key file {} (create one with `longhaul keygen {}`)",
            path.display(),
            path.display()
        )
    })?;
    let mode = std::fs::metadata(&path)
        .map(|m| m.permissions().mode())
        .unwrap_or(0);
    if mode & 0o077 != 0 {
        bail!(
            "key file {} is readable by others (mode {:o}); run `chmod 600 {}`",
            path.display(),
            mode & 0o777,
            path.display()
        );
    }
    Key::parse(&text).with_context(|| format!("key file {}", path.display()))
}

pub(crate) fn keygen(a: &KeygenArgs) -> anyhow::Result<ExitCode> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .context("cannot read /dev/urandom")?;
    let key = Key::from_bytes(bytes);
    if let Some(dir) = a.file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).mode(0o600);
    if a.force {
        opts.create(true).truncate(true);
    } else {
        opts.create_new(true);
    }
    let mut f = opts.open(&a.file).with_context(|| {
        format!(
            "cannot create {}{}",
            a.file.display(),
            if a.file.exists() {
                " (it exists; --force replaces it)"
            } else {
                ""
            }
        )
    })?;
    std::io::Write::write_all(&mut f, key.to_file_text().as_bytes())
        .with_context(|| format!("cannot write {}", a.file.display()))?;
    eprintln!(
        "wrote a new key to {} (mode 0600); give the same file to the server and the clients",
        a.file.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn config(c: &CommonArgs, host: String) -> anyhow::Result<TransferConfig> {
    let k = &c.knobs;
    Ok(TransferConfig {
        endpoint: Endpoint {
            host,
            port: c.port,
            family: c.ip.family(),
            bind: c.bind,
            timeout: Duration::from_secs(c.connect_timeout.max(1)),
            encrypt: c.encrypt.config(),
        },
        key: load_key(c.key.as_deref())?,
        streams: k.streams.n,
        rate_bps: k.rate_bps(),
        rate_is_path: k.rate.is_some(),
        chunk_size: k.chunk,
        overwrite: k.overwrite,
        fsync: k.fsync,
        congestion: k.congestion.clone(),
        idle_timeout: Duration::from_secs(k.idle_timeout),
        // `send`: unused (the server applies its operator's rules).
        modes: ModePolicy {
            umask: longhaul_engine::transfer::process_umask(),
            keep_special_bits: false,
        },
        chmod_existing_dirs: false,
        ticket: None,
        time_limit: None,
        stripe: None,
        pace_auto: c.pace == Some(args::Pace::Auto),
        fast_start: c.dedicated,
        transport: c.transport.into(),
    })
}

/// Bad usage: one line, exit code 2.
pub(crate) fn usage(msg: String) -> anyhow::Result<ExitCode> {
    eprintln!("longhaul: error: {msg}");
    Ok(ExitCode::from(2))
}

pub(crate) fn send(a: &SendArgs) -> anyhow::Result<ExitCode> {
    crate::logging::to_stderr("warn");
    let (target, sources) = a.args.split_last().expect("clap requires two arguments");
    let Some((host, dest)) = host_path(target) else {
        return usage(format!("{target:?}: the last argument must be HOST:DEST"));
    };
    let dest = match remote_path(&dest, "DEST") {
        Ok(d) => d,
        Err(e) => return usage(e.to_string()),
    };
    let mut srcs = Vec::new();
    for s in sources {
        if host_path(s).is_some() && !Path::new(s).exists() {
            return usage(format!(
                "{s:?}: sources of `send` are local paths (use `longhaul get` to fetch)"
            ));
        }
        srcs.push(PathBuf::from(s));
    }
    let cfg = config(&a.common, host)?;
    crate::interrupt::end_with(RESUME)?;
    let mut out = Output::new(&a.common.knobs);
    let result = longhaul_engine::transfer::send(&cfg, &srcs, dest, &mut |e| out.event(e));
    out.finish(result)
}

pub(crate) fn get(a: &GetArgs) -> anyhow::Result<ExitCode> {
    crate::logging::to_stderr("warn");
    let (dest, sources) = a.args.split_last().expect("clap requires two arguments");
    let mut host = None;
    let mut paths = Vec::new();
    for s in sources {
        let Some((h, p)) = host_path(s) else {
            return usage(format!("{s:?}: sources of `get` are HOST:PATH"));
        };
        if host.as_ref().is_some_and(|x| *x != h) {
            return usage(format!("{s:?}: all sources must be on one host"));
        }
        host = Some(h);
        match remote_path(&p, "SRC") {
            Ok(Some(p)) => paths.push(p),
            Ok(None) => {
                return usage(format!(
                    "{s:?}: name a file or directory under the server's root"
                ));
            }
            Err(e) => return usage(e.to_string()),
        }
    }
    let mut cfg = config(&a.common, host.expect("at least one source"))?;
    cfg.modes.keep_special_bits = a.modes.keep_special_bits;
    cfg.chmod_existing_dirs = a.modes.chmod_existing_dirs;
    crate::interrupt::end_with(RESUME)?;
    let mut out = Output::new(&a.common.knobs);
    let result =
        longhaul_engine::transfer::get(&cfg, &paths, Path::new(dest), &mut |e| out.event(e));
    out.finish(result)
}

/// What `send` and `get` say when a signal ends them.
const RESUME: &str = "longhaul: interrupted; every chunk verified so far is kept: run the same \
command again to resume (only what is missing moves)";

/// Writes one line to stdout; a reader that went away (`| head`) is not an error of the transfer.
pub(crate) fn out_line(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

/// Progress and summary output.
pub(crate) struct Output {
    pub(crate) json: bool,
    pub(crate) stream: bool,
    pub(crate) bar: Option<ProgressBar>,
}

impl Output {
    pub(crate) fn new(c: &TransferKnobs) -> Self {
        let bar = (!c.json.json && !c.json_stream && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::new(0);
            b.set_style(
                ProgressStyle::with_template(
                    "{bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta} {msg}",
                )
                .expect("a valid template"),
            );
            b
        });
        Self {
            json: c.json.json,
            stream: c.json_stream,
            bar,
        }
    }

    pub(crate) fn event(&mut self, e: &Event) {
        if self.stream {
            out_line(&serde_json::to_string(e).expect("events serialise"));
            return;
        }
        match e {
            Event::Started {
                streams,
                chunk_size,
                files,
                bytes_total,
                bytes_to_send,
            } => {
                if !self.json {
                    // A small send opens no data connection: its bytes go with the request.
                    let carried = if *streams == 0 {
                        "on the control connection".to_string()
                    } else {
                        format!("{streams} streams, {} chunks", fmt_size(*chunk_size))
                    };
                    eprintln!(
                        "{files} files, {} ({} to move), {carried}",
                        fmt_size(*bytes_total),
                        fmt_size(*bytes_to_send),
                    );
                }
                if let Some(b) = &self.bar {
                    b.set_length(*bytes_to_send);
                }
            }
            Event::Progress { bytes, files, .. } => {
                if let Some(b) = &self.bar {
                    b.set_position(*bytes);
                    b.set_message(format!("{files} files"));
                }
            }
            Event::File {
                path,
                error: Some(err),
            } => {
                let line = format!("failed: {path}: {err}");
                match &self.bar {
                    Some(b) => b.println(line),
                    None if !self.json => eprintln!("{line}"),
                    None => {}
                }
            }
            Event::File { .. } => {}
        }
    }

    fn finish(self, result: Result<Summary, EngineError>) -> anyhow::Result<ExitCode> {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        let s = match result {
            Ok(s) => s,
            Err(e) => {
                if self.stream {
                    out_line(
                        &serde_json::json!({ "event": "error", "message": e.to_string() })
                            .to_string(),
                    );
                }
                return Err(e.into());
            }
        };
        if self.json || self.stream {
            let mut v = serde_json::to_value(&s)?;
            if self.stream {
                v["event"] = "summary".into();
                out_line(&serde_json::to_string(&v)?);
            } else {
                out_line(&serde_json::to_string_pretty(&v)?);
            }
        } else {
            for sk in &s.skipped {
                eprintln!("left out: {sk}");
            }
            eprintln!("{}", summary_line(&s));
        }
        if s.failed.is_empty() {
            Ok(ExitCode::SUCCESS)
        } else {
            if !self.json && !self.stream {
                eprintln!("longhaul: error: {} files failed", s.failed.len());
            }
            Ok(ExitCode::FAILURE)
        }
    }
}

/// A summary in one line of text.
pub(crate) fn summary_line(s: &Summary) -> String {
    format!(
        "{} {} files ({} failed), moved {} in {:.1} s = {}, {} streams × {} chunks (≤ {} of \
buffers), RTT {:.3} ms{}{}; {}",
        s.direction,
        s.files,
        s.failed.len(),
        fmt_size(s.bytes_moved),
        s.seconds,
        fmt_rate(s.bits_per_second as u64),
        s.streams,
        fmt_size(s.chunk_size),
        fmt_size(s.memory_bound),
        s.rtt_ns as f64 / 1e6,
        s.retransmits.map_or_else(String::new, |r| match s.udp {
            Some(_) => format!(", {r} packets lost and resent"),
            None => format!(", {r} retransmits"),
        }),
        if s.chunks_resent > 0 {
            format!(
                ", {} chunks re-sent after failing verification",
                s.chunks_resent
            )
        } else {
            String::new()
        },
        if s.verified {
            "every file verified (BLAKE3)"
        } else {
            "NOT all files verified"
        }
    ) + &s
        .encryption
        .as_ref()
        .map_or_else(String::new, |tls| format!("; encrypted ({tls})"))
        + &s.pace_auto
            .as_ref()
            .map_or_else(String::new, pace_auto_text)
        + &s.fast_start
            .as_ref()
            .map_or_else(String::new, fast_start_text)
        + &s.path_rate_bps.map_or_else(String::new, |r| {
            format!("; paced at {} (the server's --path-rate)", fmt_rate(r))
        })
        + &s.udp.as_ref().map_or_else(String::new, |u| {
            format!("; over QUIC/UDP ({} controller)", u.controller)
        })
}

/// `--dedicated` in a transfer's summary line: the window it opened with and how soon it carried
/// the rate.
fn fast_start_text(f: &longhaul_transfer::report::FastStartSummary) -> String {
    let reached = match f.to_rate_ms {
        Some(ms) => format!(
            "90 % of --rate after {:.0} ms ({:.1} RTTs)",
            ms,
            ms / f.rtt_ms.max(1e-3)
        ),
        None => "never at 90 % of --rate".into(),
    };
    format!(
        "; fast start: {} segments per stream from the first round trip, {reached}",
        f.initial_window_segments
    )
}

/// `--pace auto` in a transfer's summary line: the trains' estimate and the governor's account.
fn pace_auto_text(p: &longhaul_transfer::report::PaceAutoSummary) -> String {
    let mut t = String::new();
    if let Some(e) = &p.estimate {
        t += &format!(
            "; pace auto: bottleneck {} ({} of {} trains, {:.0} ms)",
            fmt_rate(e.rate_bps),
            e.trains_used,
            e.trains,
            e.took_ms
        );
    }
    match &p.governor {
        Some(g) => t += &format!(", {}", g.line()),
        None => t += ", governed by the server",
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_paths_parse() {
        assert_eq!(
            host_path("dtn:incoming/x"),
            Some(("dtn".into(), "incoming/x".into()))
        );
        assert_eq!(host_path("h:"), Some(("h".into(), String::new())));
        assert_eq!(host_path("[::1]:a"), Some(("::1".into(), "a".into())));
        assert_eq!(host_path("[::1]a"), None);
        assert_eq!(host_path("local/file"), None);
        assert_eq!(host_path("./a:b"), None);
        assert_eq!(remote_path("", "DEST").unwrap(), None);
        assert_eq!(remote_path("./", "DEST").unwrap(), None);
        assert!(remote_path("../etc", "DEST").is_err());
        assert!(remote_path("/etc", "DEST").is_err());
        assert_eq!(
            remote_path("a/b/", "DEST").unwrap().unwrap().as_str(),
            "a/b"
        );
        assert!(chunk("3M").is_err());
        assert_eq!(chunk("4M").unwrap(), 4 << 20);
    }
}
