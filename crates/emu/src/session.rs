//! Named, persistent testbeds (`longhaul emulate up/exec/status/down`): a testbed that outlives
//! the command that started it, run by a background emulator process and found again by name.
//!
//! Each running testbed `NAME` has, in [`STATE_DIR`]:
//! - `NAME.json`: its [`Session`] (emulator pid, hosts and their addresses, the path), written once
//!   the testbed is up and removed at teardown;
//! - `NAME.sock`: a Unix control socket. A client sends one request line ([`Request`]: `status`,
//!   `down`, `link-down`, `link-up`, `burst ...`, and for a network `link-state`, `link-set` and
//!   `route`) and
//!   reads one JSON document back ([`request`]). `down` answers after the teardown, with the final
//!   counters;
//! - `NAME.log`: the emulator's standard error.
//!
//! The state directory is private (issue 11, finding 11): it is created mode 0700 (an existing one
//! is set to 0700), never through a symbolic link, and must belong to the user running the emulator
//! (readers accept root's too); its files are created 0600 and the socket is set to 0600 right after
//! it is bound, so the umask never matters. The emulator also checks each control connection's peer
//! (`SO_PEERCRED`): only root and the uid that started it may control it; anyone else gets an error
//! document naming their uid, and nothing happens.
//!
//! Namespaces are `lh-NAME-a` and `lh-NAME-b`. Names are short (they end up in namespace names) and
//! never look like the one-shot emulator's `e<pid>-<n>` tags, so the two cleanups cannot collide.
//! When the emulator dies without tearing down (SIGKILL, a crash), its state file stays; [`reap`]
//! (called by the next `up`, `down` or `status`) stops what still runs in its namespaces (the
//! orphaned `longhaul server`), deletes them and its files — only those named in the state file and
//! only after checking that its process is gone.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::EmuError;
use crate::private_dir::{ensure_private_dir, open_private_dir};
pub use longhaul_sys::process::process_start_ticks;

/// Where running testbeds are recorded, unless `LONGHAUL_EMULATE_DIR` names another directory.
pub const STATE_DIR: &str = "/run/longhaul/emulate";
/// The environment variable that moves [`STATE_DIR`] (the tests use it to keep apart from the
/// machine's testbeds).
pub const STATE_DIR_ENV: &str = "LONGHAUL_EMULATE_DIR";
/// The name used when none is given.
pub const DEFAULT_NAME: &str = "wan";
/// Longest name (namespace names are limited, and `lh-` + name + `-a` must fit comfortably).
pub const MAX_NAME_LEN: usize = 16;
/// How long a client waits for an answer (a `down` includes the teardown).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest request line a control socket accepts (a route through many routers is long).
const MAX_REQUEST: u64 = 4096;

/// One emulated host of a running testbed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInfo {
    /// `a` (the sender) or `b` (the receiver, where `longhaul server` runs).
    pub host: String,
    /// Its network namespace.
    pub namespace: String,
    /// Its IPv4 address.
    pub ipv4: Ipv4Addr,
    /// Its IPv6 address.
    pub ipv6: Ipv6Addr,
}

/// A running testbed as recorded in `STATE_DIR/NAME.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// The testbed's name.
    pub name: String,
    /// The emulator process.
    pub pid: u32,
    /// When it came up, seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// The emulator process's start time in clock ticks since boot (`/proc/PID/stat` field 22): with
    /// the pid, it names the process even after the pid is recycled. 0 in files written before it.
    #[serde(default)]
    pub start_ticks: u64,
    /// Both hosts.
    pub hosts: Vec<HostInfo>,
    /// The path, as the front end describes it (preset, RTT, rate, queue, hops, ...).
    pub path: serde_json::Value,
    /// Whether `longhaul server` runs on host b.
    pub server: bool,
}

impl Session {
    /// The host called `host` (`a`, `b`, or its namespace name).
    pub fn host(&self, host: &str) -> Option<&HostInfo> {
        self.hosts
            .iter()
            .find(|h| h.host == host || h.namespace == host)
    }

    /// Whether the emulator process is still running: the process with this pid started when the
    /// emulator did (a recycled pid belongs to a process started later), whatever the binary is called.
    pub fn alive(&self) -> bool {
        if self.start_ticks != 0 {
            return process_start_ticks(self.pid) == Some(self.start_ticks);
        }
        // Files without a start time: a longhaul process running `emulate`.
        std::fs::read(format!("/proc/{}/cmdline", self.pid)).is_ok_and(|c| {
            let args: Vec<&[u8]> = c.split(|&b| b == 0).collect();
            args.first().is_some_and(|a| a.ends_with(b"longhaul"))
                && args.iter().any(|a| *a == b"emulate")
        })
    }
}

/// Checks a testbed name: 1–16 characters, lower-case letters, digits and '-', starting with a
/// letter, and not of the one-shot emulator's form `e<digits>-<digits>`.
pub fn check_name(name: &str) -> Result<(), EmuError> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    let starts = name.chars().next().is_some_and(|c| c.is_ascii_lowercase());
    let ephemeral = name.strip_prefix('e').is_some_and(|rest| {
        let parts: Vec<&str> = rest.split('-').collect();
        parts.len() == 2
            && parts
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    });
    if name.is_empty() || name.len() > MAX_NAME_LEN || !ok_chars || !starts || ephemeral {
        return Err(EmuError::Config(format!(
            "testbed name {name:?}: use 1-{MAX_NAME_LEN} lower-case letters, digits and '-', starting \
with a letter (and not of the form e<digits>-<digits>)"
        )));
    }
    Ok(())
}

/// The state directory: `$LONGHAUL_EMULATE_DIR` if set (and not empty), else [`STATE_DIR`].
pub fn state_dir() -> PathBuf {
    match std::env::var_os(STATE_DIR_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(STATE_DIR),
    }
}

/// `STATE_DIR/NAME.json`.
pub fn state_file(name: &str) -> PathBuf {
    state_dir().join(format!("{name}.json"))
}

/// `STATE_DIR/NAME.sock`.
pub fn socket_file(name: &str) -> PathBuf {
    state_dir().join(format!("{name}.sock"))
}

/// `STATE_DIR/NAME.log`.
pub fn log_file(name: &str) -> PathBuf {
    state_dir().join(format!("{name}.log"))
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> EmuError {
    move |source| EmuError::Io { what, source }
}

/// Creates the state directory (mode 0700, its missing parents 0755) or makes an existing one
/// 0700, refusing a symbolic link, one owned by another user, and a parent others may write to
/// (they could swap the directory).
pub fn ensure_state_dir() -> Result<(), EmuError> {
    ensure_private_dir(&state_dir())
}

/// Opens the state directory without following a symbolic link and checks its owner: the user
/// running this process (and, unless `writer`, root). `None` when it does not exist.
fn open_state_dir(writer: bool) -> Result<Option<OwnedFd>, EmuError> {
    open_private_dir(&state_dir(), writer)
}

/// Creates `file` afresh, mode 0600 (an old one is removed first).
fn create_private(file: &std::path::Path) -> Result<std::fs::File, EmuError> {
    let _ = std::fs::remove_file(file);
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)
        .map_err(io(format!("create {}", file.display())))
}

/// Creates `NAME.log` (mode 0600) in the state directory, which it creates first if need be.
pub fn create_log(name: &str) -> Result<std::fs::File, EmuError> {
    ensure_state_dir()?;
    create_private(&log_file(name))
}

/// The recorded testbed `name`, if there is one (running or not).
pub fn load(name: &str) -> Result<Option<Session>, EmuError> {
    if open_state_dir(false)?.is_none() {
        return Ok(None);
    }
    let file = state_file(name);
    match std::fs::read_to_string(&file) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            EmuError::Config(format!(
                "{}: not a testbed state file ({e}); remove it",
                file.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(format!("read {}", file.display()))(e)),
    }
}

/// Every recorded testbed, by name.
pub fn list() -> Result<Vec<Session>, EmuError> {
    if open_state_dir(false)?.is_none() {
        return Ok(Vec::new());
    }
    let dir = state_dir();
    let dir = std::fs::read_dir(&dir).map_err(io(format!("list {}", dir.display())))?;
    let mut out: Vec<Session> = dir
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let name = name.strip_suffix(".json")?;
            load(name).ok().flatten()
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Records `s` (written to a temporary file and renamed, so readers never see half of it).
pub fn save(s: &Session) -> Result<(), EmuError> {
    let text = serde_json::to_string_pretty(s).expect("a session serialises");
    save_file(&format!("{}.json", s.name), &text)
}

/// Writes `text` to the state directory's file `file_name` (mode 0600, through a temporary file
/// renamed into place), creating the directory first if need be.
pub fn save_file(file_name: &str, text: &str) -> Result<(), EmuError> {
    ensure_state_dir()?;
    let file = state_dir().join(file_name);
    let tmp = state_dir().join(format!("{file_name}.tmp"));
    create_private(&tmp)?
        .write_all(text.as_bytes())
        .map_err(io(format!("write {}", tmp.display())))?;
    std::fs::rename(&tmp, &file).map_err(io(format!("rename {}", tmp.display())))
}

/// The state directory's file `file_name`, if the directory and the file exist (the directory
/// checked as for every state file; the file not followed if it is a symbolic link).
pub fn read_file(file_name: &str) -> Result<Option<String>, EmuError> {
    use rustix::fs::{Mode, OFlags};
    let Some(dir) = open_state_dir(false)? else {
        return Ok(None);
    };
    let path = state_dir().join(file_name);
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(&dir, file_name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(io(format!("open {}", path.display()))(e.into())),
    };
    let mut text = String::new();
    std::fs::File::from(fd)
        .read_to_string(&mut text)
        .map_err(io(format!("read {}", path.display())))?;
    Ok(Some(text))
}

/// Removes the state and socket files of `name` (the log stays for a post-mortem).
pub fn remove(name: &str) {
    for f in [state_file(name), socket_file(name)] {
        let _ = std::fs::remove_file(f);
    }
}

/// Cleans up after testbed `name` if its emulator died without tearing down: deletes its hosts'
/// namespaces (if they exist) and its files. Returns the namespaces deleted, or `None` when there
/// was nothing to reap (no record, or the emulator is running).
pub fn reap(name: &str) -> Result<Option<Vec<String>>, EmuError> {
    let Some(s) = load(name)? else {
        return Ok(None);
    };
    if s.alive() {
        return Ok(None);
    }
    let existing = longhaul_sys::ip(&["netns", "list"]).unwrap_or_default();
    let mut deleted = Vec::new();
    // The hosts' namespaces as recorded (a network has many), only those of this testbed's
    // naming; a two-host testbed's even when the record lists none.
    let prefix = format!("lh-{name}-");
    let mut namespaces: Vec<String> = s
        .hosts
        .iter()
        .map(|h| h.namespace.clone())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    for ns in [format!("lh-{name}-a"), format!("lh-{name}-b")] {
        if !namespaces.contains(&ns) {
            namespaces.push(ns);
        }
    }
    for ns in namespaces {
        let present = existing
            .lines()
            .any(|l| l.split_whitespace().next() == Some(ns.as_str()));
        if present {
            crate::testbed::delete_namespace(&ns)?;
            deleted.push(ns);
        }
    }
    remove(name);
    Ok(Some(deleted))
}

/// A request to a running testbed's emulator.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// The live counters.
    Status,
    /// Tear down and answer with the final counters.
    Down,
    /// Cut the path (drop everything) and answer with the status.
    LinkDown,
    /// Restore the path and answer with the status.
    LinkUp,
    /// A burst of cross traffic on one direction's bottleneck, `delay_ns` from now.
    Burst {
        /// The a→b direction (else b→a).
        a_to_b: bool,
        /// From the request's arrival to the burst's start.
        delay_ns: u64,
        /// Length.
        length_ns: u64,
        /// Rate, bit/s.
        rate_bps: u64,
    },
    /// A network's link cut (`up: false`) or restored.
    LinkState {
        /// The link's name.
        link: String,
        /// Restore (else cut).
        up: bool,
    },
    /// A network's link changed (one direction or both).
    LinkSet {
        /// The link's name.
        link: String,
        /// `Some(true)`: a→b only, `Some(false)`: b→a only, `None`: both.
        a_to_b: Option<bool>,
        /// What changes.
        change: LinkSetting,
    },
    /// A network's route from one host to another pinned through routers.
    Route {
        /// The sending host.
        from: String,
        /// The receiving host.
        to: String,
        /// The routers in between, in order.
        via: Vec<String>,
        /// The way back through the same routers, reversed.
        both: bool,
    },
}

/// The fields of a [`Request::LinkSet`] (absent ones stay as they are).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LinkSetting {
    /// Serialization rate, bit/s (0: unlimited).
    pub rate_bps: Option<u64>,
    /// One-way delay, ns.
    pub delay_ns: Option<u64>,
    /// Random (Bernoulli) loss probability.
    pub loss: Option<f64>,
    /// Gilbert–Elliott burst loss instead: p, r, 1-h, 1-k (netem's `gemodel`).
    pub loss_burst: Option<[f64; 4]>,
    /// Probability that a segment arrives damaged.
    pub corrupt: Option<f64>,
    /// Queue capacity, bytes.
    pub queue_bytes: Option<u64>,
    /// Largest uniform jitter, ns (0: none).
    pub jitter_ns: Option<u64>,
}

impl LinkSetting {
    fn words(&self) -> String {
        let mut w = Vec::new();
        if let Some(v) = self.rate_bps {
            w.push(format!("rate={v}"));
        }
        if let Some(v) = self.delay_ns {
            w.push(format!("delay={v}"));
        }
        if let Some(v) = self.loss {
            w.push(format!("loss={v}"));
        }
        if let Some([p, r, h, k]) = self.loss_burst {
            w.push(format!("burst={p},{r},{h},{k}"));
        }
        if let Some(v) = self.corrupt {
            w.push(format!("corrupt={v}"));
        }
        if let Some(v) = self.queue_bytes {
            w.push(format!("queue={v}"));
        }
        if let Some(v) = self.jitter_ns {
            w.push(format!("jitter={v}"));
        }
        w.join(" ")
    }

    fn parse(words: &[&str]) -> Option<Self> {
        fn prob(v: &str) -> Option<f64> {
            v.parse().ok().filter(|p: &f64| (0.0..=1.0).contains(p))
        }
        let mut s = Self::default();
        for w in words {
            let (k, v) = w.split_once('=')?;
            match k {
                "rate" => s.rate_bps = Some(v.parse().ok()?),
                "delay" => s.delay_ns = Some(v.parse().ok()?),
                "loss" => s.loss = Some(prob(v)?),
                "burst" => {
                    let p: Vec<f64> = v.split(',').map(prob).collect::<Option<_>>()?;
                    s.loss_burst = Some(p.try_into().ok()?);
                }
                "corrupt" => s.corrupt = Some(prob(v)?),
                "queue" => s.queue_bytes = Some(v.parse().ok()?),
                "jitter" => s.jitter_ns = Some(v.parse().ok()?),
                _ => return None,
            }
        }
        Some(s)
    }
}

/// A link, host or router name in a request: what a network file allows, and no more.
fn node_name(w: &str) -> Option<String> {
    (!w.is_empty()
        && w.len() <= 64
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
    .then(|| w.to_string())
}

impl Request {
    /// The request as one line of the control socket (without its newline).
    pub fn line(&self) -> String {
        match self {
            Self::Status => "status".into(),
            Self::Down => "down".into(),
            Self::LinkDown => "link-down".into(),
            Self::LinkUp => "link-up".into(),
            Self::Burst {
                a_to_b,
                delay_ns,
                length_ns,
                rate_bps,
            } => format!(
                "burst {} {delay_ns} {length_ns} {rate_bps}",
                if *a_to_b { "a-to-b" } else { "b-to-a" }
            ),
            Self::LinkState { link, up } => {
                format!("link-state {link} {}", if *up { "up" } else { "down" })
            }
            Self::LinkSet {
                link,
                a_to_b,
                change,
            } => format!(
                "link-set {link} {} {}",
                match a_to_b {
                    None => "both",
                    Some(true) => "a-to-b",
                    Some(false) => "b-to-a",
                },
                change.words()
            ),
            Self::Route {
                from,
                to,
                via,
                both,
            } => format!(
                "route {from} {to} {} {}",
                if *both { "both" } else { "one" },
                via.join(" ")
            ),
        }
    }

    /// A line read from the control socket, or `None` if it is not a request (the emulator answers
    /// with an error document). `parse(r.line())` gives back `r`.
    pub fn parse(line: &str) -> Option<Self> {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["status"] => Some(Self::Status),
            ["down"] => Some(Self::Down),
            ["link-down"] => Some(Self::LinkDown),
            ["link-up"] => Some(Self::LinkUp),
            ["burst", dir, delay, length, rate] => Some(Self::Burst {
                a_to_b: match *dir {
                    "a-to-b" => true,
                    "b-to-a" => false,
                    _ => return None,
                },
                delay_ns: delay.parse().ok()?,
                length_ns: length.parse().ok().filter(|&l| l > 0)?,
                rate_bps: rate.parse().ok().filter(|&r| r > 0)?,
            }),
            ["link-state", link, state] => Some(Self::LinkState {
                link: node_name(link)?,
                up: match *state {
                    "up" => true,
                    "down" => false,
                    _ => return None,
                },
            }),
            ["link-set", link, dir, rest @ ..] if !rest.is_empty() => Some(Self::LinkSet {
                link: node_name(link)?,
                a_to_b: match *dir {
                    "both" => None,
                    "a-to-b" => Some(true),
                    "b-to-a" => Some(false),
                    _ => return None,
                },
                change: LinkSetting::parse(rest)?,
            }),
            ["route", from, to, both, via @ ..] if via.len() <= 256 => Some(Self::Route {
                from: node_name(from)?,
                to: node_name(to)?,
                via: via.iter().map(|v| node_name(v)).collect::<Option<_>>()?,
                both: match *both {
                    "both" => true,
                    "one" => false,
                    _ => return None,
                },
            }),
            _ => None,
        }
    }
}

/// Sends `req` to testbed `name` and returns its JSON answer.
pub fn request(name: &str, req: Request) -> Result<serde_json::Value, EmuError> {
    let file = socket_file(name);
    let mut s = UnixStream::connect(&file).map_err(io(format!(
        "connect to testbed {name}'s emulator at {}",
        file.display()
    )))?;
    s.set_read_timeout(Some(REQUEST_TIMEOUT))
        .and_then(|()| s.write_all(format!("{}\n", req.line()).as_bytes()))
        .map_err(io(format!("send {} to testbed {name}", req.line())))?;
    let mut text = String::new();
    s.read_to_string(&mut text)
        .map_err(io(format!("read testbed {name}'s answer")))?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        EmuError::Config(format!(
            "testbed {name} answered {} with something that is not JSON ({e})",
            req.line()
        ))
    })?;
    if let Some(why) = doc.get("error").and_then(|e| e.as_str()) {
        return Err(EmuError::Config(format!(
            "testbed {name}'s emulator refused `{}`: {why}",
            req.line()
        )));
    }
    Ok(doc)
}

/// The emulator's end of the control socket.
#[derive(Debug)]
pub struct ControlSocket {
    listener: UnixListener,
    path: PathBuf,
    name: String,
}

impl ControlSocket {
    /// Binds `STATE_DIR/NAME.sock` (replacing a stale one), mode 0600, non-blocking.
    pub fn bind(name: &str) -> Result<Self, EmuError> {
        ensure_state_dir()?;
        let path = socket_file(name);
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(io(format!("bind {}", path.display())))?;
        // bind(2) applies the umask; the 0700 directory keeps others out until this chmod.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(io(format!("chmod 0600 {}", path.display())))?;
        listener
            .set_nonblocking(true)
            .map_err(io(format!("set {} non-blocking", path.display())))?;
        Ok(Self {
            listener,
            path,
            name: name.to_string(),
        })
    }

    /// The next well-formed request of an allowed peer, if one is waiting; malformed ones, and
    /// any request of a peer other than root and this process's user, are answered with an error
    /// document and dropped.
    pub fn poll(&self) -> Option<(Request, UnixStream)> {
        loop {
            let (stream, _) = self.listener.accept().ok()?;

            if stream.set_nonblocking(false).is_err()
                || stream
                    .set_read_timeout(Some(Duration::from_secs(2)))
                    .is_err()
            {
                continue;
            }
            let mut line = String::new();
            let read = BufReader::new((&stream).take(MAX_REQUEST)).read_line(&mut line);
            // The line is read first so that a refused peer gets its answer, not a reset.
            let me = rustix::process::geteuid().as_raw();
            match rustix::net::sockopt::socket_peercred(&stream) {
                Ok(peer) if peer.uid.as_raw() == 0 || peer.uid.as_raw() == me => {}
                Ok(peer) => {
                    let why = format!(
                        "uid {} may not control testbed {} (only root and uid {me}, which \
started its emulator, may)",
                        peer.uid.as_raw(),
                        self.name
                    );
                    eprintln!(
                        "emulate: testbed {}: {why} (pid {})",
                        self.name,
                        peer.pid.as_raw_nonzero()
                    );
                    let _ = reply(stream, &serde_json::json!({ "error": why }));
                    continue;
                }
                Err(_) => continue,
            }
            match read.ok().and_then(|_| Request::parse(&line)) {
                Some(r) => return Some((r, stream)),
                None => {
                    let doc = serde_json::json!({ "error": "unknown request; send `status`, `down`, `link-down`, `link-up`, `burst DIR DELAY_NS LENGTH_NS RATE_BPS`, `link-state LINK up|down`, `link-set LINK both|a-to-b|b-to-a KEY=VALUE...` or `route FROM TO both|one VIA...`" });
                    let _ = reply(stream, &doc);
                }
            }
        }
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Writes `doc` as the answer to a request.
pub fn reply(mut stream: UnixStream, doc: &serde_json::Value) -> std::io::Result<()> {
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    stream.write_all(
        serde_json::to_string(doc)
            .expect("JSON serialises")
            .as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_plain_and_never_ephemeral_tags() {
        for ok in ["wan", "lab-1", "cern", "e1", "e1-x", "abcdefghijklmnop"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "WAN",
            "1wan",
            "-x",
            "a/b",
            "a b",
            "e12-3",
            "e0-0",
            "abcdefghijklmnopq",
            "ä",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn requests_parse_and_hosts_are_found_by_letter_or_namespace() {
        assert_eq!(Request::parse("status\n"), Some(Request::Status));
        assert_eq!(Request::parse(" down "), Some(Request::Down));
        assert_eq!(Request::parse("rm -rf /"), None);
        let b = Request::Burst {
            a_to_b: true,
            delay_ns: 5,
            length_ns: 2_000_000_000,
            rate_bps: 900_000_000,
        };
        assert_eq!(Request::parse(&b.line()), Some(b));
        assert_eq!(Request::parse("burst a-to-b 0 0 1"), None);
        assert_eq!(Request::parse("burst sideways 0 1 1"), None);
        // A network's requests go over the socket and back unchanged.
        for r in [
            Request::LinkState {
                link: "gva-chi".into(),
                up: false,
            },
            Request::LinkSet {
                link: "gva-chi".into(),
                a_to_b: Some(false),
                change: LinkSetting {
                    rate_bps: Some(500_000_000),
                    delay_ns: Some(60_000_000),
                    loss: Some(0.01),
                    loss_burst: Some([0.01, 0.25, 1.0, 0.0]),
                    corrupt: Some(0.001),
                    queue_bytes: Some(1 << 20),
                    jitter_ns: Some(0),
                },
            },
            Request::Route {
                from: "cern1".into(),
                to: "star1".into(),
                via: vec!["gva".into(), "ams".into(), "chi".into()],
                both: true,
            },
        ] {
            assert_eq!(Request::parse(&r.line()), Some(r.clone()), "{}", r.line());
        }
        for bad in [
            "link-state gva-chi sideways",
            "link-state ../x down",
            "link-set gva both",
            "link-set gva both rate=fast",
            "link-set gva both loss=2",
            "link-set gva both burst=0.1,0.2",
            "link-set gva both burst=0.1,0.2,1,2",
            "link-set gva both corrupt=-1",
            "link-set gva both colour=red",
            "link-set gva north rate=1",
            "route a b maybe r1",
            "route a b/c both",
        ] {
            assert_eq!(Request::parse(bad), None, "{bad}");
        }
        let s = Session {
            name: "wan".into(),
            pid: u32::MAX,
            started_unix_s: 0,
            start_ticks: 0,
            hosts: vec![HostInfo {
                host: "a".into(),
                namespace: "lh-wan-a".into(),
                ipv4: Ipv4Addr::new(10, 201, 0, 1),
                ipv6: Ipv6Addr::LOCALHOST,
            }],
            path: serde_json::json!({}),
            server: true,
        };
        assert_eq!(s.host("a"), s.host("lh-wan-a"));
        assert!(s.host("a").is_some() && s.host("c").is_none());
        // No such process: not alive.
        assert!(!s.alive());
        // This process, under whatever name the test binary has, by its start time; a different
        // start time (a recycled pid) is another process.
        let me = Session {
            pid: std::process::id(),
            start_ticks: process_start_ticks(std::process::id()).unwrap(),
            ..s.clone()
        };
        assert!(me.alive());
        assert!(
            !Session {
                start_ticks: me.start_ticks + 1,
                ..me.clone()
            }
            .alive()
        );
        let back: Session = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }
}
