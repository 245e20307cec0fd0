//! Test helpers: a `longhaul server` child process on an ephemeral loopback port, runners for the
//! `longhaul` binary, and the checks a test that needs root or a program makes first (it fails with
//! the reason when it cannot run, or is skipped with `LONGHAUL_TEST_SKIP=1`: `longhaul_testkit`).

use std::cell::Cell;
use std::io::Write;
use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard, mpsc};
use std::time::{Duration, Instant};

use longhaul_testkit::fixtures::Postgres;

/// Tests share the machine's two cores: everything that burns CPU (servers pushing data over
/// loopback, a PostgreSQL cluster's initdb, a browser) holds it shared, the emulator's
/// timing-sensitive tests hold it alone, so that other work cannot make an emulated path's RTT or
/// rate look wrong.
static MACHINE: RwLock<()> = RwLock::new(());

thread_local! {
    /// Whether this thread already holds [`MACHINE`] (shared or alone): taking it again would
    /// deadlock behind a waiting writer, so a nested request is a no-op.
    static HELD: Cell<bool> = const { Cell::new(false) };
}

/// A hold on the machine, released when dropped; holds nothing when this thread held it already.
pub(crate) struct Machine {
    shared: Option<RwLockReadGuard<'static, ()>>,
    alone: Option<RwLockWriteGuard<'static, ()>>,
}

impl Drop for Machine {
    fn drop(&mut self) {
        if self.shared.take().is_some() || self.alone.take().is_some() {
            HELD.with(|h| h.set(false));
        }
    }
}

/// Shared use of the machine (many at once); a no-op inside a hold this thread has already.
pub(crate) fn machine_shared() -> Machine {
    let mut hold = Machine {
        shared: None,
        alone: None,
    };
    if !HELD.with(Cell::get) {
        hold.shared = Some(MACHINE.read().unwrap_or_else(|e| e.into_inner()));
        HELD.with(|h| h.set(true));
    }
    hold
}

/// Sole use of the machine (waits for every shared user to finish). A thread that holds it shared
/// must not ask for it alone: that would wait for itself.
pub(crate) fn machine_alone() -> Machine {
    assert!(
        !HELD.with(Cell::get),
        "machine_alone inside a hold of this thread"
    );
    let alone = MACHINE.write().unwrap_or_else(|e| e.into_inner());
    HELD.with(|h| h.set(true));
    Machine {
        shared: None,
        alone: Some(alone),
    }
}

/// Whether this process may create namespaces and TUN devices (`CAP_NET_ADMIN` and
/// `CAP_SYS_ADMIN`); when not, the test cannot run ([`longhaul_testkit::cannot_run`]).
pub(crate) fn netns_privileges() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    longhaul_testkit::require(
        longhaul_sys::has_net_admin() && longhaul_sys::has_capability(CAP_SYS_ADMIN),
        "needs CAP_NET_ADMIN and CAP_SYS_ADMIN (namespaces and TUN devices): run as root",
    )
}

/// For a test that makes namespaces and must have the machine to itself: the sole hold on the
/// machine ([`machine_alone`]), or `None` when the test cannot run ([`netns_privileges`]).
pub(crate) fn netns_alone() -> Option<Machine> {
    netns_privileges().then(machine_alone)
}

/// The whole machine's CPU over a span, from `/proc/stat`'s first line: the share of all CPU
/// time that was busy (any process, the kernel, interrupts) and the share the hypervisor gave to
/// other guests (steal).
struct CpuShare {
    busy: f64,
    steal: f64,
    /// The processes that used the most CPU over the span: (jiffies, pid, name).
    top: Vec<(u64, u32, String)>,
}

/// CPU time (user + system, in clock ticks) of every process now, by pid, with its name.
fn process_times() -> std::collections::HashMap<u32, (u64, String)> {
    let mut out = std::collections::HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ... utime stime: fields 14 and 15, counted after the comm.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let time = |i: usize| rest.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
        out.insert(pid, (time(11) + time(12), name));
    }
    out
}

fn cpu_times() -> Vec<u64> {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let first = stat.lines().next().unwrap_or_default();
    first
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect()
}

fn cpu_share(span: Duration) -> CpuShare {
    let before = cpu_times();
    let procs_before = process_times();
    std::thread::sleep(span);
    let after = cpu_times();
    let mut top: Vec<(u64, u32, String)> = process_times()
        .into_iter()
        .filter_map(|(pid, (t, name))| {
            let used = t.saturating_sub(procs_before.get(&pid).map_or(0, |b| b.0));
            (used > 0).then_some((used, pid, name))
        })
        .collect();
    top.sort_by(|a, b| b.cmp(a));
    top.truncate(3);
    let d: Vec<u64> = after
        .iter()
        .zip(before.iter().chain(std::iter::repeat(&0)))
        .map(|(a, b)| a.saturating_sub(*b))
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user already).
    let field = |i: usize| d.get(i).copied().unwrap_or(0) as f64;
    let total: f64 = (0..8).map(field).sum::<f64>().max(1.0);
    CpuShare {
        busy: (total - field(3) - field(4)) / total,
        steal: field(7) / total,
        top,
    }
}

impl CpuShare {
    /// "50 % busy, 2 % stolen (rustc 120 ticks, ...)".
    fn describe(&self) -> String {
        let top: Vec<String> = self
            .top
            .iter()
            .map(|(t, pid, name)| format!("{name}[{pid}] {t} ticks"))
            .collect();
        format!(
            "{:.0} % busy, {:.0} % stolen{}",
            100.0 * self.busy,
            100.0 * self.steal,
            if top.is_empty() {
                String::new()
            } else {
                format!(" (busiest: {})", top.join(", "))
            }
        )
    }
}

/// The diagnostic of a flagged run names what burned the CPU: a thread of this process spinning
/// for the whole span puts this process first.
#[test]
fn the_busiest_processes_are_named() {
    let _machine = machine_alone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spin = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    let share = cpu_share(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spin.join().unwrap();
    let me = std::process::id();
    assert_eq!(
        share.top.first().map(|t| t.1),
        Some(me),
        "{}",
        share.describe()
    );
    assert!(share.busy > 0.3, "{}", share.describe());
    assert!(
        share.describe().contains(&format!("[{me}]")),
        "{}",
        share.describe()
    );
}

/// Most a timing check waits, after a run the emulator flagged, for the machine to calm down.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

/// After an attempt of a timing check that the emulator flagged NOT TRUSTWORTHY (something else
/// had the CPU): waits until the machine is quiet — over one second under a quarter of its CPU
/// busy and under 5 % stolen by the hypervisor — or [`SETTLE_LIMIT`] has passed, so the next
/// attempt is not measured in the same storm. Returns what it saw, for the test's message: a
/// failure after every attempt then says whether the machine was busy or its CPU stolen.
pub(crate) fn settle_after_a_flagged_run() -> String {
    let started = Instant::now();
    let first = cpu_share(Duration::from_secs(1));
    let quiet = |c: &CpuShare| c.busy < 0.25 && c.steal < 0.05;
    let mut last = None;
    if !quiet(&first) {
        loop {
            let now = cpu_share(Duration::from_secs(1));
            let done = quiet(&now) || started.elapsed() >= SETTLE_LIMIT;
            last = Some(now);
            if done {
                break;
            }
        }
    }
    let mut text = format!("machine after the run: {}", first.describe());
    if let Some(l) = last {
        text.push_str(&format!(
            "; {} {:.0} s later",
            l.describe(),
            started.elapsed().as_secs_f64()
        ));
    }
    text
}

/// Whether `program` is installed (on `PATH`); when not, the test cannot run and says which Debian
/// `package` provides it.
pub(crate) fn program(program: &str, package: &str) -> bool {
    longhaul_testkit::program(program, package)
}

/// A throwaway PostgreSQL cluster ([`Postgres::start`]) that holds the machine shared from before
/// its initdb until it is stopped. Where none can be started the test fails with the reason, or,
/// opted out, this is `None` ([`Postgres::start`]).
pub(crate) struct SharedPostgres {
    pg: Postgres,
    _machine: Machine,
}

impl std::ops::Deref for SharedPostgres {
    type Target = Postgres;
    fn deref(&self) -> &Postgres {
        &self.pg
    }
}

pub(crate) fn postgres() -> Option<SharedPostgres> {
    let machine = machine_shared();
    Some(SharedPostgres {
        pg: Postgres::start()?,
        _machine: machine,
    })
}

/// Reads `stream` line by line on a thread of its own and sends the lines that `wanted` accepts.
/// With an `echo` tag every line is also written to stderr behind `[tag]` (the test's output shows
/// what the child said) until the stream ends; without one, reading stops once the receiver is gone.
pub(crate) fn read_lines(
    stream: impl Read + Send + 'static,
    echo: Option<&'static str>,
    wanted: fn(&str) -> bool,
) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let gone = wanted(&line) && tx.send(line.clone()).is_err();
            match echo {
                Some(tag) => eprintln!("[{tag}] {line}"),
                None if gone => break,
                None => {}
            }
        }
    });
    rx
}

/// How many network namespaces there are whose name starts with `prefix` (`ip netns list`).
pub(crate) fn namespaces_named(prefix: &str) -> usize {
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter(|l| l.starts_with(prefix))
        .count()
}

/// Takes the named emulated testbed down when dropped, so a failing test does not leave its
/// emulator running.
pub(crate) struct DownOnDrop(pub(crate) String);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        let _ = Command::new(bin())
            .args(["emulate", "down", "--name", &self.0])
            .output();
    }
}

/// A child process killed (SIGKILL) and reaped when dropped, so a failing test leaves none behind.
pub(crate) struct KillOnDrop(pub(crate) Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Path of the binary under test.
pub(crate) fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_longhaul")
}

/// A server child process; killed when dropped.
pub(crate) struct ServerProc {
    child: Child,
    /// The port it listens on.
    pub(crate) port: u16,
    /// The port where it serves iperf3 clients (`--iperf3-port` in `extra`; off otherwise, so that
    /// servers of concurrent tests do not contend for 5201).
    pub(crate) iperf3_port: Option<u16>,
    log: mpsc::Receiver<String>,
    seen: String,
    /// Standard output's lines, with `--json` in `extra` (else it goes nowhere).
    stdout: Option<mpsc::Receiver<String>>,
    printed: String,
    _machine: Machine,
}

impl ServerProc {
    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts `longhaul server -p 0` (unless `extra` gives `-p`) with extra arguments and waits for
    /// its listening line.
    pub(crate) fn start(extra: &[&str]) -> Self {
        let machine = machine_shared();
        let port: &[&str] = if extra.contains(&"-p") {
            &[]
        } else {
            &["-p", "0"]
        };
        let iperf3 = extra.contains(&"--iperf3-port");
        let json = extra.contains(&"--json");
        let mut child = Command::new(bin())
            .arg("server")
            .args(port)
            .args(if iperf3 {
                &[][..]
            } else {
                &["--iperf3-port", "off"]
            })
            .args(["--log", "info"])
            .args(extra)
            .stdout(if json { Stdio::piped() } else { Stdio::null() })
            .stderr(Stdio::piped())
            .spawn()
            .expect("start longhaul server");
        let stdout = child
            .stdout
            .take()
            .map(|out| read_lines(out, None, |_| true));
        let rx = read_lines(child.stderr.take().expect("stderr piped"), None, |_| true);
        let port = loop {
            let line = rx
                .recv_timeout(Duration::from_secs(20))
                .expect("server prints its address");
            if let Some(rest) = line.strip_prefix("longhaul server listening on ") {
                let addr = rest.split_whitespace().next().expect("address");
                break addr
                    .rsplit(':')
                    .next()
                    .expect("port")
                    .parse()
                    .expect("numeric port");
            }
        };
        let port_of = |addr: &str| -> u16 {
            addr.rsplit(':')
                .next()
                .and_then(|p| p.parse().ok())
                .expect("numeric port")
        };
        let iperf3_port = iperf3.then(|| {
            loop {
                let line = rx
                    .recv_timeout(Duration::from_secs(20))
                    .expect("server prints its iperf3 address");
                if let Some(rest) = line.strip_prefix("iperf3 clients served on ") {
                    break port_of(rest.trim());
                }
            }
        });
        Self {
            child,
            port,
            iperf3_port,
            log: rx,
            seen: String::new(),
            stdout,
            printed: String::new(),
            _machine: machine,
        }
    }

    /// Everything the server logged so far.
    pub(crate) fn log(&mut self) -> String {
        for line in self.log.try_iter() {
            self.seen.push_str(&line);
            self.seen.push('\n');
        }
        self.seen.clone()
    }

    /// Waits (up to 30 s) until the server has logged `needle`; the server handles each connection on
    /// its own thread, so its log can trail what a client sees.
    pub(crate) fn wait_for(&mut self, needle: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !self.log().contains(needle) {
            assert!(
                std::time::Instant::now() < deadline,
                "server never logged {needle:?}:\n{}",
                self.seen
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The JSON documents a `--json` server printed, once there are `n` (within 30 s).
    pub(crate) fn reports(&mut self, n: usize) -> Vec<serde_json::Value> {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let out = self.stdout.as_ref().expect("a server started with --json");
        loop {
            for line in out.try_iter() {
                self.printed.push_str(&line);
                self.printed.push('\n');
            }
            let docs: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&self.printed)
                .into_iter()
                .map_while(Result::ok)
                .collect();
            if docs.len() >= n {
                return docs;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server printed {} of {n} reports:\n{}",
                docs.len(),
                self.printed
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the process is still running.
    pub(crate) fn alive(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// How it ended after a SIGTERM sent earlier (within 20 s, or the test fails).
    pub(crate) fn ended(&mut self) -> ExitStatus {
        ended_within(&mut self.child, Duration::from_secs(20), "the server")
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `longhaul test HOST -p PORT ARGS...` to completion.
pub(crate) fn test_cmd(host: &str, port: u16, args: &[&str]) -> Output {
    let port = port.to_string();
    Command::new(bin())
        .args(["test", host, "-p", &port])
        .args(args)
        .output()
        .expect("run longhaul test")
}

/// Runs the binary with arbitrary arguments.
pub(crate) fn longhaul(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("run longhaul")
}

/// Runs a JSON test and parses its output, failing with the stderr if it did not succeed.
pub(crate) fn json_test(host: &str, port: u16, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = test_cmd(host, port, &all);
    assert!(
        out.status.success(),
        "longhaul test {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).expect("--json prints one JSON document")
}

/// Sends SIGTERM to `pid`, as `systemctl stop` and `kill` do.
pub(crate) fn sigterm(pid: u32) {
    let sent = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -TERM {pid}");
}

/// How `child` ended, waited for at most `within` after a signal: killed, and the test failed
/// naming `what`, if it is still running then.
pub(crate) fn ended_within(child: &mut Child, within: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still running {within:?} after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads all of a reader into a string (for child pipes).
pub(crate) fn read_all(mut r: impl Read) -> String {
    let mut s = String::new();
    let _ = r.read_to_string(&mut s);
    s
}

/// Runs `cmd` (standard input closed) to completion and prints what it said under `label`, so a
/// failing test shows every command it ran.
pub(crate) fn printed(cmd: &mut Command, label: &str) -> Output {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {label}: {e}"));
    println!(
        "$ {label} [{}]\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Whether the server closed `s` within `within`, writing one byte every `every` meanwhile.
pub(crate) fn closed_while_trickling(
    s: &mut TcpStream,
    bytes: &[u8],
    every: Duration,
    within: Duration,
) -> bool {
    let start = Instant::now();
    let mut sent = 0;
    while start.elapsed() < within {
        if sent < bytes.len() {
            // A write to a closed connection fails (or a read sees the close below).
            if s.write_all(&bytes[sent..sent + 1]).is_err() {
                return true;
            }
            sent += 1;
        }
        s.set_read_timeout(Some(every)).unwrap();
        let mut b = [0u8; 256];
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
    false
}

/// A named emulated testbed, taken down when dropped.
pub(crate) struct Testbed(pub(crate) DownOnDrop);

impl Testbed {
    pub(crate) fn up(args: &[&str]) -> Self {
        let name = format!("x{}", std::process::id() % 100_000);
        let out = Command::new(bin())
            .args(["emulate", "up", "--name", &name, "--no-server"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run longhaul emulate up");
        assert!(
            out.status.success(),
            "emulate up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self(DownOnDrop(name))
    }

    /// Brings a testbed up with `args` and runs `check` on it, up to [`crate::emulate::ATTEMPTS`] times, each on a
    /// fresh testbed: the rule of `emulate_checked` for a testbed that stays up. A check that fails
    /// while the emulator kept time fails the test at once; one that fails while the emulator fell
    /// behind its schedule (`emulate status`: NOT TRUSTWORTHY) says nothing about the transfer
    /// and is run again.
    pub(crate) fn checked(args: &[&str], check: impl Fn(&Testbed) -> Result<(), String>) {
        let mut flagged = Vec::new();
        for attempt in 1..=crate::emulate::ATTEMPTS {
            let bed = Self::up(args);
            let problem = match check(&bed) {
                Ok(()) => return,
                Err(problem) => problem,
            };
            let verdict = bed.fidelity_problems();
            assert!(
                !verdict.is_empty(),
                "attempt {attempt}: {problem} (and the emulator trusted this run)"
            );
            drop(bed);
            let machine = settle_after_a_flagged_run();
            println!(
                "attempt {attempt}: {problem}; the emulator flagged the run ({verdict}; {machine}), again"
            );
            flagged.push(format!(
                "attempt {attempt}: {problem} [{verdict}; {machine}]"
            ));
        }
        panic!(
            "every attempt was flagged NOT TRUSTWORTHY: the machine was too busy to measure the path\n{}",
            flagged.join("\n")
        );
    }

    /// What `emulate status` says made the testbed's timing untrustworthy since it came up; empty
    /// when it kept time.
    pub(crate) fn fidelity_problems(&self) -> String {
        let out = Command::new(bin())
            .args(["emulate", "status", "--json", "--name", &self.0.0])
            .output()
            .expect("run longhaul emulate status");
        assert!(
            out.status.success(),
            "emulate status: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let status: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("status as JSON");
        let fidelity = &status["testbeds"][0]["fidelity"];
        match fidelity["ok"].as_bool().expect("fidelity.ok") {
            true => String::new(),
            false => format!("NOT TRUSTWORTHY {}", fidelity["problems"]),
        }
    }

    /// Runs ARGS (a `longhaul server` command line) in host b and returns once its log says it
    /// listens; the server is killed when the handle is dropped. The log's receiver must be kept
    /// as long as the server runs: the server dies writing to a log no one reads.
    pub(crate) fn serve(&self, args: &[&str]) -> (KillOnDrop, mpsc::Receiver<String>) {
        let mut server = KillOnDrop(
            self.exec("b", args)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start the server in host b"),
        );
        let log = read_lines(server.0.stderr.take().unwrap(), None, |_| true);
        while !log
            .recv_timeout(Duration::from_secs(30))
            .expect("the server starts")
            .contains("listening on")
        {}
        (server, log)
    }

    /// `longhaul emulate exec --name NAME HOST -- ARGS...` as a command.
    pub(crate) fn exec(&self, host: &str, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(["emulate", "exec", "--name", &self.0.0, host, "--"])
            .args(args);
        c
    }
}

/// Sends SIGINT (a Ctrl-C) to `child`, which has not been waited for.
pub(crate) fn sigint(child: &Child) {
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(kill.success(), "kill -INT {}", child.id());
}
