//! Host memory as part of the plan (issue 22): both emulated hosts are sockets of *this* kernel, so
//! a long fat path's windows at both ends count against one machine-wide `net.ipv4.tcp_mem`. At
//! 10 Gbit/s × 323 ms each end may hold ~1 GiB; the default limit here (2.2 GiB hard, 1.46 GiB
//! pressure, sized by the kernel from RAM) pushed such a stream into memory pressure and it
//! collapsed, with nothing to say why.
//!
//! Before the hosts come up, [`plan`] computes what the path makes TCP hold ([`Demand`]: per end,
//! the lesser of the hosts' buffer cap and twice what the path holds, since an autotuned buffer is
//! about twice the window it carries) and what the delay line holds, and compares them with
//! `tcp_mem` and the memory available ([`Machine`]). Then, by [`Policy`]:
//! - `Raise` (the default): `tcp_mem` is raised for the run under a [`Lease`] and put back when the
//!   last run that needed it ends. The lease is recorded in [`HOST_MEMORY_DIR`] (root's, mode 0700,
//!   never followed through a symbolic link): an emulator killed with SIGKILL leaves its record, and
//!   the next emulator (or `emulate status`/`down`) drops the dead holder and restores the value.
//!   Concurrent emulators share one lease under `flock`; the value set is the largest any live
//!   holder needs, and the original comes back only if nobody changed the sysctl meanwhile. Each
//!   write is recorded before it is made, so a kill between the two steps loses nothing.
//! - `Check`: nothing is changed; a path that needs more is refused with the exact `sysctl` line.
//! - `Ignore`: the run goes ahead; the report still names a collapse.
//!
//! When the machine's memory is short, windows are sized to what the path needs (BDP plus the
//! bottleneck queue a loss-based controller fills), not twice the path.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use longhaul_sys::{ShortOfMemory, TcpMem};
use longhaul_units::fmt_size;
use serde::{Deserialize, Serialize};

use crate::error::EmuError;
use longhaul_sys::process::process_start_ticks;

use crate::private_dir::{ensure_private_dir, open_private_dir};

/// Where the `tcp_mem` lease is recorded: machine-wide (the sysctl is), whatever
/// `LONGHAUL_EMULATE_DIR` says.
pub const HOST_MEMORY_DIR: &str = "/run/longhaul/host-memory";
const LEASE_FILE: &str = "tcp_mem.json";
/// Without a rate limit, the path's bytes are counted at this rate: above what the userspace
/// forwarder carries (19 Gbit/s on this class of machine, bench/RESULTS.md).
pub const UNLIMITED_RATE_BPS: u64 = 40_000_000_000;
/// Head room over the demand when raising the pressure threshold (an eighth).
const HEADROOM_DIV: u64 = 8;
/// Share of the available memory the run may plan to use (TCP and the delay line): nine tenths.
const AVAILABLE_SHARE: (u64, u64) = (9, 10);

/// What to do when the path needs more TCP memory than the kernel allows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Raise `net.ipv4.tcp_mem` for the run and restore it after.
    #[default]
    Raise,
    /// Change nothing; refuse a run that needs more, naming the sysctl to raise.
    Check,
    /// Change nothing and run anyway.
    Ignore,
}

/// What a run makes this machine hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Demand {
    /// TCP memory of both ends' sockets at their largest, bytes.
    pub tcp_bytes: u64,
    /// The emulator's delay-line buffers (user memory), bytes.
    pub emulator_bytes: u64,
}

/// What this machine allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Machine {
    /// `net.ipv4.tcp_mem` now.
    pub tcp_mem: TcpMem,
    /// Pages the machine's TCP sockets hold already.
    pub tcp_pages_in_use: u64,
    /// Bytes per page.
    pub page: u64,
    /// `MemAvailable`, bytes.
    pub available: u64,
}

impl Machine {
    /// This machine now (`/proc/sys` for `tcp_mem`).
    pub fn read(proc_sys: &Path) -> Result<Machine, EmuError> {
        Ok(Machine {
            tcp_mem: TcpMem::read_in(proc_sys)?,
            tcp_pages_in_use: longhaul_sys::tcp_memory::tcp_pages_in_use().unwrap_or(0),
            page: longhaul_sys::tcp_memory::page_size(),
            available: longhaul_sys::meminfo_bytes("MemAvailable").unwrap_or(u64::MAX),
        })
    }
}

/// The bytes a path holds in the data direction: rate × RTT plus the bottleneck queue (what a
/// loss-based controller's window reaches before the first drop).
pub fn path_bytes(rate_bps: Option<u64>, rtt_ns: u64, queue_bytes: u64) -> u64 {
    let rate = rate_bps.unwrap_or(UNLIMITED_RATE_BPS);
    let bdp = u128::from(rate) * u128::from(rtt_ns) / 8 / 1_000_000_000;
    u64::try_from(bdp)
        .unwrap_or(u64::MAX)
        .saturating_add(queue_bytes)
}

/// TCP memory both ends may hold on a path of `path_bytes` when each end's buffers are capped at
/// `tcp_max`: per end, the lesser of the cap and twice the path (an autotuned buffer is about twice
/// the window it carries).
pub fn tcp_demand(path_bytes: u64, tcp_max: u64) -> u64 {
    2 * tcp_max.min(path_bytes.saturating_mul(2))
}

/// The `tcp_mem` a demand wants: pressure above what is in use plus the demand and an eighth of
/// head room, the hard limit a third above that (the kernel's own ratio), `min` as it is; never
/// below the values now.
pub fn wanted_tcp_mem(d: &Demand, m: &Machine) -> TcpMem {
    let demand_pages = d.tcp_bytes.div_ceil(m.page);
    let pressure = m.tcp_pages_in_use + demand_pages + demand_pages / HEADROOM_DIV;
    let wanted = TcpMem {
        min: m.tcp_mem.min,
        pressure,
        max: pressure + pressure / 3,
    };
    m.tcp_mem.at_least(&wanted)
}

/// Whether the run fits in the memory available (TCP at its largest and the delay line).
pub fn fits_in_memory(d: &Demand, m: &Machine) -> bool {
    let (num, den) = AVAILABLE_SHARE;
    d.tcp_bytes.saturating_add(d.emulator_bytes) <= m.available / den * num
}

/// The `sysctl` command that sets `t`.
pub fn sysctl_fix(t: &TcpMem) -> String {
    format!("sysctl -w net.ipv4.tcp_mem=\"{}\"", t.value())
}

/// What the plan decided, for the report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The policy followed.
    pub policy: Policy,
    /// TCP memory both ends may hold, bytes.
    pub tcp_bytes: u64,
    /// The delay line's buffers, bytes.
    pub emulator_bytes: u64,
    /// `MemAvailable` when planned, bytes.
    pub available_bytes: u64,
    /// `net.ipv4.tcp_mem` before the run.
    pub tcp_mem_before: String,
    /// `net.ipv4.tcp_mem` the run needs (equal to before when it fits).
    pub tcp_mem_needed: String,
    /// Whether this run raised it (under a lease).
    pub raised: bool,
    /// Whether the hosts' buffers were cut to one path's worth because memory is short.
    pub windows_reduced: bool,
}

impl Plan {
    /// One line for the run's start, e.g. `host memory: TCP up to 2 GiB at both ends, delay line
    /// 1.2 GiB; net.ipv4.tcp_mem raised from "..." to "..." for the run`.
    pub fn line(&self) -> String {
        let what = if self.raised {
            format!(
                "net.ipv4.tcp_mem raised from \"{}\" to \"{}\" for the run",
                self.tcp_mem_before, self.tcp_mem_needed
            )
        } else if self.tcp_mem_needed != self.tcp_mem_before {
            format!(
                "net.ipv4.tcp_mem \"{}\" is short of \"{}\", left as it is (--host-memory ignore)",
                self.tcp_mem_before, self.tcp_mem_needed
            )
        } else {
            format!("net.ipv4.tcp_mem \"{}\" holds it", self.tcp_mem_before)
        };
        format!(
            "host memory: TCP up to {} at both ends, delay line {}, {} available{}; {what}",
            fmt_size(self.tcp_bytes),
            fmt_size(self.emulator_bytes),
            fmt_size(self.available_bytes),
            if self.windows_reduced {
                " (host buffers cut to one path's worth: memory is short)"
            } else {
                ""
            },
        )
    }
}

/// TCP's shortage counters of one emulated host over the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostShortage {
    /// The host's namespace.
    pub host: String,
    /// `TCPMemoryPressures`.
    pub memory_pressures: u64,
    /// `PruneCalled`.
    pub prune_called: u64,
    /// `RcvPruned`.
    pub rcv_pruned: u64,
    /// `OfoPruned`.
    pub ofo_pruned: u64,
    /// `TCPRcvQDrop`.
    pub rcv_q_drop: u64,
    /// The non-zero counters in words.
    pub description: String,
}

impl HostShortage {
    /// From a host's counters over the run.
    pub fn new(host: &str, c: &ShortOfMemory) -> HostShortage {
        HostShortage {
            host: host.to_string(),
            memory_pressures: c.memory_pressures,
            prune_called: c.prune_called,
            rcv_pruned: c.rcv_pruned,
            ofo_pruned: c.ofo_pruned,
            rcv_q_drop: c.rcv_q_drop,
            description: c.describe(),
        }
    }
}

/// Where the lease lives and which `/proc/sys` it changes (the tests use a temporary pair).
#[derive(Debug, Clone)]
pub struct Store {
    /// The lease's directory.
    pub dir: PathBuf,
    /// The sysctl tree.
    pub proc_sys: PathBuf,
}

impl Store {
    /// The machine's: [`HOST_MEMORY_DIR`] and `/proc/sys`.
    pub fn system() -> Store {
        Store {
            dir: PathBuf::from(HOST_MEMORY_DIR),
            proc_sys: PathBuf::from(longhaul_sys::PROC_SYS),
        }
    }
}

/// One emulator's claim on the raised `tcp_mem`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Holder {
    pid: u32,
    /// Which lease of that process (a process may run several testbeds).
    id: u64,
    start_ticks: u64,
    wants: [u64; 3],
}

impl Holder {
    fn alive(&self) -> bool {
        process_start_ticks(self.pid) == Some(self.start_ticks)
    }
}

/// The lease file: the value before the first raise, the value last written, the live claims.
///
/// It is written *before* the sysctl: a process killed between the two steps leaves a record the
/// next emulator can finish from (`replacing` holds the value the write was to replace, until the
/// write is known to be done).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct LeaseFile {
    original: [u64; 3],
    set: [u64; 3],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    replacing: Option<[u64; 3]>,
    holders: Vec<Holder>,
}

impl LeaseFile {
    /// A lease starting from the value `now`.
    fn new(now: [u64; 3]) -> LeaseFile {
        LeaseFile {
            original: now,
            set: now,
            replacing: None,
            holders: Vec::new(),
        }
    }

    /// Brings the record up to the sysctl's value `now`: a write the last writer recorded but did
    /// not live to make, or made, is settled; any other value was set by someone else since, and
    /// is theirs to come back to (returns `false`).
    fn settle(&mut self, now: [u64; 3]) -> bool {
        let ours = now == self.set || Some(now) == self.replacing;
        if !ours {
            self.original = now;
        }
        self.set = now;
        self.replacing = None;
        ours
    }

    /// The value the live holders need: the original, raised to each holder's wants.
    fn target(&self) -> TcpMem {
        self.holders
            .iter()
            .fold(tcp_mem(self.original), |t, h| t.at_least(&tcp_mem(h.wants)))
    }
}

fn triple(t: &TcpMem) -> [u64; 3] {
    [t.min, t.pressure, t.max]
}

fn tcp_mem(v: [u64; 3]) -> TcpMem {
    TcpMem {
        min: v[0],
        pressure: v[1],
        max: v[2],
    }
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> EmuError {
    move |source| EmuError::Io { what, source }
}

/// This process's claim on a raised `tcp_mem`; given back when dropped (or by the next emulator,
/// after a SIGKILL).
#[derive(Debug)]
pub struct Lease {
    store: Store,
    pid: u32,
    id: u64,
}

static NEXT_LEASE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Lease {
    /// Sets `tcp_mem` to at least `wants` for as long as this lease lives, joining the lease of
    /// any other live emulator. A write the kernel refuses (not root, a read-only `/proc/sys`)
    /// is an error carrying the `sysctl` line to run instead, with the lease file as it was.
    pub fn take(store: &Store, wants: &TcpMem) -> Result<Lease, EmuError> {
        let pid = std::process::id();
        let id = NEXT_LEASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let holder = Holder {
            pid,
            id,
            start_ticks: process_start_ticks(pid).unwrap_or(0),
            wants: triple(wants),
        };
        let locked = LockedLease::lock(store)?;
        let before = locked.read()?;
        let now = TcpMem::read_in(&store.proc_sys)?;
        let mut lease = before.clone().unwrap_or(LeaseFile::new(triple(&now)));
        lease.settle(triple(&now));
        lease.holders.retain(Holder::alive);
        lease.holders.push(holder);
        let target = lease.target();
        if target != now {
            locked
                .set(&mut lease, &now, &target)
                .map_err(|failed| match failed {
                    SetFailed::Refused(refused) => {
                        // The record as it was: nothing changed.
                        if let Err(e) = locked.write(before.as_ref()) {
                            return e;
                        }
                        EmuError::Config(format!(
                            "this path needs more TCP memory than net.ipv4.tcp_mem \"{}\" allows \
and it cannot be raised here ({refused}); run `{}` first, or pass --host-memory ignore",
                            now.value(),
                            sysctl_fix(&target)
                        ))
                    }
                    SetFailed::Other(e) => e,
                })?;
        }
        locked.write(Some(&lease))?;
        Ok(Lease {
            store: store.clone(),
            pid,
            id,
        })
    }

    /// Gives the claim back now (what dropping the lease does), reporting a failure.
    pub fn release(self) -> Result<(), EmuError> {
        let r = release(&self.store, Some((self.pid, self.id)));
        std::mem::forget(self);
        r
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Err(e) = release(&self.store, Some((self.pid, self.id))) {
            tracing::warn!("host memory: {e}");
            eprintln!("longhaul: cannot restore net.ipv4.tcp_mem: {e}");
        }
    }
}

/// Drops the claims of emulators that are gone (killed without giving theirs back) and restores
/// `tcp_mem` when no claim is left. Nothing happens without a lease file.
pub fn reap(store: &Store) -> Result<(), EmuError> {
    if !store.dir.join(LEASE_FILE).exists() {
        return Ok(());
    }
    release(store, None)
}

/// Removes the claim `who` (pid, id) and every dead one, then sets what the rest need (the
/// original when none is left), unless someone else set the sysctl meanwhile.
fn release(store: &Store, who: Option<(u32, u64)>) -> Result<(), EmuError> {
    let locked = LockedLease::lock(store)?;
    let Some(mut lease) = locked.read()? else {
        return Ok(());
    };
    let before = lease.holders.len();
    lease
        .holders
        .retain(|h| Some((h.pid, h.id)) != who && h.alive());
    let unfinished = lease.replacing.is_some() || lease.holders.is_empty();
    if lease.holders.len() == before && who.is_none() && !unfinished {
        return Ok(());
    }
    let now = TcpMem::read_in(&store.proc_sys)?;
    if !lease.settle(triple(&now)) {
        // Someone set it since: theirs stands.
        tracing::warn!(
            "net.ipv4.tcp_mem is \"{}\", not the value the emulator set; left as it is",
            now.value()
        );
    }
    let target = lease.target();
    if target != now {
        locked.set(&mut lease, &now, &target)?;
    }
    locked.write(Some(&lease).filter(|l| !l.holders.is_empty()))
}

/// A failed [`LockedLease::set`].
enum SetFailed {
    /// The kernel refused the sysctl write: the lease file records a write that never happened.
    Refused(longhaul_sys::SysError),
    /// Recording it failed.
    Other(EmuError),
}

impl From<EmuError> for SetFailed {
    fn from(e: EmuError) -> SetFailed {
        SetFailed::Other(e)
    }
}

impl From<SetFailed> for EmuError {
    fn from(f: SetFailed) -> EmuError {
        match f {
            SetFailed::Refused(e) => e.into(),
            SetFailed::Other(e) => e,
        }
    }
}

/// The lease file under an exclusive `flock` of its directory, held until dropped.
struct LockedLease {
    /// The directory, open for as long as the lock is held.
    _dir: std::os::fd::OwnedFd,
    path: PathBuf,
    proc_sys: PathBuf,
}

impl LockedLease {
    fn lock(store: &Store) -> Result<LockedLease, EmuError> {
        ensure_private_dir(&store.dir)?;
        let dir = open_private_dir(&store.dir, true)?.expect("the directory exists");
        rustix::fs::flock(dir.as_fd(), rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| io(format!("lock {}", store.dir.display()))(e.into()))?;
        Ok(LockedLease {
            _dir: dir,
            path: store.dir.join(LEASE_FILE),
            proc_sys: store.proc_sys.clone(),
        })
    }

    fn read(&self) -> Result<Option<LeaseFile>, EmuError> {
        read_lease(&self.path)
    }

    /// Writes `lease` (replacing the file by a rename), or removes the file for `None`.
    fn write(&self, lease: Option<&LeaseFile>) -> Result<(), EmuError> {
        let Some(lease) = lease else {
            return match std::fs::remove_file(&self.path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io(format!("remove {}", self.path.display()))(e)),
            };
        };
        let tmp = self.path.with_extension("json.tmp");
        let _ = std::fs::remove_file(&tmp);
        let text = serde_json::to_string_pretty(lease).expect("a lease serialises");
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(io(format!("write {}", tmp.display())))?;
        std::fs::rename(&tmp, &self.path).map_err(io(format!("rename {}", tmp.display())))
    }

    /// Writes `target` to the sysctl (now `now`) for `lease`, recording the write first.
    fn set(&self, lease: &mut LeaseFile, now: &TcpMem, target: &TcpMem) -> Result<(), SetFailed> {
        lease.set = triple(target);
        lease.replacing = Some(triple(now));
        self.write(Some(lease))?;
        target
            .write_in(&self.proc_sys)
            .map_err(SetFailed::Refused)?;
        died_after_write()?;
        lease.replacing = None;
        Ok(())
    }
}

fn read_lease(path: &Path) -> Result<Option<LeaseFile>, EmuError> {
    let mut text = String::new();
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_nofollow())
        .open(path)
    {
        Ok(mut f) => f
            .read_to_string(&mut text)
            .map_err(io(format!("read {}", path.display())))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(format!("open {}", path.display()))(e)),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        EmuError::Config(format!(
            "{}: not a tcp_mem lease ({e}); check net.ipv4.tcp_mem and remove the file",
            path.display()
        ))
    })
}

#[cfg(test)]
thread_local! {
    /// Set by a test: the process "dies" right after writing the sysctl.
    static DIE_AFTER_WRITE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Where a test kills the process: right after the sysctl is written (nothing in a build).
fn died_after_write() -> Result<(), EmuError> {
    #[cfg(test)]
    if DIE_AFTER_WRITE.with(std::cell::Cell::get) {
        return Err(EmuError::Config("killed by the test".into()));
    }
    Ok(())
}

fn libc_nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// The plan carried out: what the report says, the hosts' buffer cap (cut when memory is short)
/// and the lease that holds `tcp_mem` up for the run.
#[derive(Debug)]
pub struct Planned {
    /// For the report.
    pub plan: Plan,
    /// The `tcp_rmem`/`tcp_wmem` maximum to set in the hosts.
    pub tcp_max: u64,
    /// Held for the run (with [`Policy::Raise`]).
    pub lease: Option<Lease>,
}

/// Plans a run on a path holding `path_bytes` with the hosts' buffers capped at `tcp_max` and a
/// delay line of `emulator_bytes`, and carries out `policy`: an error (with the fix) when the run
/// cannot have what it needs.
pub fn prepare(
    policy: Policy,
    store: &Store,
    path_bytes: u64,
    tcp_max: u64,
    emulator_bytes: u64,
) -> Result<Planned, EmuError> {
    let m = Machine::read(&store.proc_sys)?;
    let mut tcp_max = tcp_max;
    let mut d = Demand {
        tcp_bytes: tcp_demand(path_bytes, tcp_max),
        emulator_bytes,
    };
    let mut windows_reduced = false;
    let one_path = path_bytes.max(crate::host::MIN_TCP_BUFFER);
    if !fits_in_memory(&d, &m) && one_path < tcp_max {
        tcp_max = one_path;
        d.tcp_bytes = tcp_demand(path_bytes, tcp_max);
        windows_reduced = true;
    }
    if !fits_in_memory(&d, &m) && policy != Policy::Ignore {
        return Err(EmuError::Config(format!(
            "this path needs up to {} of TCP memory at both ends and {} for the emulator's delay \
line, more than the {} this machine has available; lower --rate or the RTT, or pass \
--host-memory ignore",
            fmt_size(d.tcp_bytes),
            fmt_size(d.emulator_bytes),
            fmt_size(m.available)
        )));
    }
    let wanted = wanted_tcp_mem(&d, &m);
    let mut plan = Plan {
        policy,
        tcp_bytes: d.tcp_bytes,
        emulator_bytes,
        available_bytes: m.available,
        tcp_mem_before: m.tcp_mem.value(),
        tcp_mem_needed: wanted.value(),
        raised: false,
        windows_reduced,
    };
    let lease = match policy {
        Policy::Raise => match Lease::take(store, &wanted) {
            Ok(lease) => {
                plan.raised = wanted != m.tcp_mem;
                Some(lease)
            }
            // Nothing to raise, and no lease to be had (another user's emulator with the
            // capabilities but not root): the run goes ahead as the machine is.
            Err(e) if wanted == m.tcp_mem => {
                tracing::warn!("host memory: no lease on net.ipv4.tcp_mem ({e})");
                None
            }
            Err(e) => return Err(e),
        },
        Policy::Check if wanted != m.tcp_mem => {
            return Err(EmuError::Config(format!(
                "this path needs up to {} of TCP memory at both ends; above {} pages of {} bytes \
(net.ipv4.tcp_mem \"{}\") the kernel puts TCP under memory pressure and the stream collapses: run \
`{}` first, or let emulate raise it for the run (--host-memory raise)",
                fmt_size(d.tcp_bytes),
                m.tcp_mem.pressure,
                m.page,
                m.tcp_mem.value(),
                sysctl_fix(&wanted)
            )));
        }
        Policy::Check | Policy::Ignore => None,
    };
    Ok(Planned {
        plan,
        tcp_max,
        lease,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lease directory and a fake `/proc/sys` holding `net/ipv4/tcp_mem`, removed when dropped.
    struct Fake(PathBuf);

    impl Fake {
        fn new(tcp_mem: &str) -> Fake {
            let root = std::env::temp_dir().join(format!(
                "lh-host-memory-{}-{}",
                std::process::id(),
                NEXT_LEASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ));
            std::fs::create_dir_all(root.join("sys/net/ipv4")).unwrap();
            std::fs::write(root.join("sys/net/ipv4/tcp_mem"), tcp_mem).unwrap();
            Fake(root)
        }
        fn store(&self) -> Store {
            Store {
                dir: self.0.join("lease"),
                proc_sys: self.0.join("sys"),
            }
        }
        fn tcp_mem(&self) -> String {
            std::fs::read_to_string(self.0.join("sys/net/ipv4/tcp_mem")).unwrap()
        }
        fn set(&self, v: &str) {
            std::fs::write(self.0.join("sys/net/ipv4/tcp_mem"), v).unwrap();
        }
        fn lease(&self) -> Option<LeaseFile> {
            read_lease(&self.store().dir.join(LEASE_FILE)).unwrap()
        }
        fn write_lease(&self, file: &LeaseFile) {
            let locked = LockedLease::lock(&self.store()).unwrap();
            locked.write(Some(file)).unwrap();
        }
        /// What SIGKILL leaves: a lease taken for `wants`, never given back, whose holder's
        /// process is gone (the start time recorded no longer matches).
        fn killed_lease(&self, wants: &TcpMem) {
            std::mem::forget(Lease::take(&self.store(), wants).unwrap());
            let mut file = self.lease().unwrap();
            file.holders.last_mut().unwrap().start_ticks += 1;
            self.write_lease(&file);
        }
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn t(min: u64, pressure: u64, max: u64) -> TcpMem {
        TcpMem { min, pressure, max }
    }

    const GIB: u64 = 1 << 30;

    fn machine(tcp_mem: TcpMem, available: u64) -> Machine {
        Machine {
            tcp_mem,
            tcp_pages_in_use: 100,
            page: 4096,
            available,
        }
    }

    #[test]
    fn a_record_path_needs_more_than_this_machines_default_tcp_mem() {
        // tokyo-loop-30000km at 10 Gbit/s: 323 ms, a one-BDP queue; the hosts' cap 1 GiB.
        let path = path_bytes(Some(10_000_000_000), 323_000_000, 403_750_000);
        assert_eq!(path, 807_500_000);
        let d = Demand {
            tcp_bytes: tcp_demand(path, GIB),
            emulator_bytes: 1_200_000_000,
        };
        assert_eq!(d.tcp_bytes, 2 * GIB, "each end may grow to the cap");
        // This machine's default (24 GiB of RAM): pressure 1.46 GiB, hard limit 2.2 GiB.
        let m = machine(t(287_913, 383_885, 575_826), 20 * GIB);
        let w = wanted_tcp_mem(&d, &m);
        let demand_pages = 2 * GIB / 4096;
        assert_eq!(w.pressure, 100 + demand_pages + demand_pages / 8);
        assert_eq!(w.max, w.pressure + w.pressure / 3);
        assert_eq!(w.min, 287_913, "min stays");
        assert!(fits_in_memory(&d, &m));
        // A short path fits the default as it is.
        let small = Demand {
            tcp_bytes: tcp_demand(path_bytes(Some(1_000_000_000), 20_000_000, 2_500_000), GIB),
            emulator_bytes: 0,
        };
        assert_eq!(wanted_tcp_mem(&small, &m), m.tcp_mem);
        // An unlimited path is counted at UNLIMITED_RATE_BPS; a zero-delay one holds nothing.
        assert_eq!(path_bytes(None, 0, 0), 0);
        assert_eq!(path_bytes(None, 1_000_000_000, 0), UNLIMITED_RATE_BPS / 8);
        // Memory short: 2 GiB of TCP and 1.2 GB of delay line do not fit in 3 GiB available.
        assert!(!fits_in_memory(&d, &machine(m.tcp_mem, 3 * GIB)));
        assert_eq!(
            sysctl_fix(&t(1, 2, 3)),
            "sysctl -w net.ipv4.tcp_mem=\"1 2 3\""
        );
    }

    #[test]
    fn a_lease_raises_for_its_holders_and_restores_when_the_last_one_goes() {
        let f = Fake::new("100 200 300");
        let s = f.store();
        let a = Lease::take(&s, &t(100, 1000, 1500)).unwrap();
        assert_eq!(f.tcp_mem(), "100 1000 1500");
        let b = Lease::take(&s, &t(100, 2000, 2500)).unwrap();
        assert_eq!(f.tcp_mem(), "100 2000 2500");
        let c = Lease::take(&s, &t(100, 500, 600)).unwrap();
        assert_eq!(
            f.tcp_mem(),
            "100 2000 2500",
            "never lowered for a smaller need"
        );
        b.release().unwrap();
        assert_eq!(f.tcp_mem(), "100 1000 1500", "what the others still need");
        drop(a);
        assert_eq!(f.tcp_mem(), "100 500 600");
        drop(c);
        assert_eq!(f.tcp_mem(), "100 200 300", "the original is back");
        assert_eq!(f.lease(), None, "and the lease file is gone");
        let mode = std::fs::metadata(&s.dir).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o700
        );
    }

    #[test]
    fn a_killed_holder_is_reaped_and_the_original_restored() {
        let f = Fake::new("100 200 300");
        let s = f.store();
        f.killed_lease(&t(100, 1000, 1500));
        assert_eq!(f.tcp_mem(), "100 1000 1500");
        reap(&s).unwrap();
        assert_eq!(f.tcp_mem(), "100 200 300");
        assert_eq!(f.lease(), None);
        // Nothing to reap: nothing happens, no directory is made.
        let g = Fake::new("1 2 3");
        reap(&g.store()).unwrap();
        assert!(!g.store().dir.exists());
        // A new lease over a dead one starts from the original, not the dead one's value.
        f.killed_lease(&t(100, 1000, 1500));
        let small = Lease::take(&s, &t(100, 400, 500)).unwrap();
        assert_eq!(f.tcp_mem(), "100 400 500");
        drop(small);
        assert_eq!(f.tcp_mem(), "100 200 300");
    }

    /// Runs `f` as a process killed right after it writes the sysctl: whatever it recorded of its
    /// claim is marked dead.
    fn killed_after_writing<T: std::fmt::Debug>(
        f: &Fake,
        run: impl FnOnce() -> Result<T, EmuError>,
    ) {
        DIE_AFTER_WRITE.with(|d| d.set(true));
        let r = run();
        DIE_AFTER_WRITE.with(|d| d.set(false));
        assert!(r.is_err(), "{r:?}");
        if let Some(mut file) = f.lease() {
            for h in &mut file.holders {
                h.start_ticks += 1;
            }
            f.write_lease(&file);
        }
    }

    #[test]
    fn a_holder_killed_right_after_writing_the_sysctl_is_reaped_too() {
        // The first raise: killed before anything else happened.
        let f = Fake::new("100 200 300");
        let s = f.store();
        killed_after_writing(&f, || Lease::take(&s, &t(100, 1000, 1500)));
        assert_eq!(f.tcp_mem(), "100 1000 1500");
        reap(&s).unwrap();
        assert_eq!(f.tcp_mem(), "100 200 300", "the raise is put back");
        assert_eq!(f.lease(), None);
        // A raise above a live holder's: the next emulator lowers it to what the live one needs.
        let a = Lease::take(&s, &t(100, 1000, 1500)).unwrap();
        let a_file = f.lease().unwrap();
        killed_after_writing(&f, || Lease::take(&s, &t(100, 2000, 2500)));
        assert_eq!(f.tcp_mem(), "100 2000 2500");
        let mut file = f.lease().unwrap();
        file.holders.retain(|h| h.id == a.id);
        file.holders[0].start_ticks = a_file.holders[0].start_ticks;
        f.write_lease(&file);
        reap(&s).unwrap();
        assert_eq!(f.tcp_mem(), "100 1000 1500", "what the live one needs");
        drop(a);
        assert_eq!(f.tcp_mem(), "100 200 300");
        assert_eq!(f.lease(), None);
        // Killed right after lowering it for a live holder: that holder still restores it.
        let a = Lease::take(&s, &t(100, 1000, 1500)).unwrap();
        let b = Lease::take(&s, &t(100, 2000, 2500)).unwrap();
        let a_ticks = f.lease().unwrap().holders[0].start_ticks;
        killed_after_writing(&f, || b.release());
        assert_eq!(f.tcp_mem(), "100 1000 1500");
        let mut file = f.lease().unwrap();
        file.holders
            .iter_mut()
            .for_each(|h| h.start_ticks = a_ticks);
        f.write_lease(&file);
        drop(a);
        assert_eq!(f.tcp_mem(), "100 200 300", "the original is back");
        assert_eq!(f.lease(), None);
    }

    #[test]
    fn a_write_recorded_but_never_made_is_settled() {
        let f = Fake::new("100 200 300");
        let s = f.store();
        // What a SIGKILL between recording a raise and making it leaves.
        let mut file = LeaseFile::new([100, 200, 300]);
        file.set = [100, 1000, 1500];
        file.replacing = Some([100, 200, 300]);
        file.holders.push(Holder {
            pid: std::process::id(),
            id: u64::MAX,
            start_ticks: 0,
            wants: [100, 1000, 1500],
        });
        f.write_lease(&file);
        let a = Lease::take(&s, &t(100, 500, 600)).unwrap();
        assert_eq!(f.tcp_mem(), "100 500 600");
        assert_eq!(
            f.lease().unwrap().original,
            [100, 200, 300],
            "not taken as foreign"
        );
        drop(a);
        assert_eq!(f.tcp_mem(), "100 200 300");
        assert_eq!(f.lease(), None);
    }

    #[test]
    fn a_value_someone_else_set_meanwhile_is_left_as_it_is() {
        let f = Fake::new("100 200 300");
        let s = f.store();
        let lease = Lease::take(&s, &t(100, 1000, 1500)).unwrap();
        f.set("100 5000 6000");
        drop(lease);
        assert_eq!(f.tcp_mem(), "100 5000 6000");
        assert_eq!(f.lease(), None);
    }

    #[test]
    fn a_refused_write_names_the_sysctl_and_keeps_the_others_lease() {
        let f = Fake::new("100 200 300");
        let s = f.store();
        let a = Lease::take(&s, &t(100, 1000, 1500)).unwrap();
        let before = f.lease().unwrap();
        // The sysctl a read-only one (three integers that even root may not write): the write
        // fails as in a container's read-only /proc/sys.
        let tcp_mem = f.0.join("sys/net/ipv4/tcp_mem");
        std::fs::remove_file(&tcp_mem).unwrap();
        std::os::unix::fs::symlink("/proc/sys/fs/file-nr", &tcp_mem).unwrap();
        let err = Lease::take(&s, &t(100, 9000, 9999))
            .unwrap_err()
            .to_string();
        assert!(err.contains("net.ipv4.tcp_mem"), "{err}");
        assert_eq!(f.lease(), Some(before), "the lease file is untouched");
        std::fs::remove_file(&tcp_mem).unwrap();
        f.set("100 1000 1500");
        let err = Lease::take(&s, &t(100, 9000, 9999));
        assert!(err.is_ok());
        drop(err);
        drop(a);
        assert_eq!(f.tcp_mem(), "100 200 300");
    }

    #[test]
    fn a_planted_symbolic_link_is_not_followed() {
        let f = Fake::new("100 200 300");
        let s = f.store();
        let elsewhere = f.0.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &s.dir).unwrap();
        let err = Lease::take(&s, &t(100, 1000, 1500))
            .unwrap_err()
            .to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert_eq!(f.tcp_mem(), "100 200 300");
        std::fs::remove_file(&s.dir).unwrap();
        // A link planted where the lease file goes is refused, not read.
        std::fs::create_dir(&s.dir).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", s.dir.join(LEASE_FILE)).unwrap();
        assert!(Lease::take(&s, &t(100, 1000, 1500)).is_err());
        assert_eq!(f.tcp_mem(), "100 200 300");
    }
}
