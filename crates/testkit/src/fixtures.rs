//! Fixtures shared by the crates' tests and the workspace's end-to-end tests: temporary directories,
//! a command that must succeed, and a throwaway PostgreSQL cluster (Debian's, whichever version is
//! installed).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A new empty directory named after `tag`.
    pub fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "lh-test-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("temp dir");
        Self(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A port, free a moment ago for TCP and UDP on every address, for a server whose port must be
/// written down before it starts (a configuration file, a stock iperf3). It lies below the kernel's
/// ephemeral range, so the outgoing connections of tests running beside it (which take their local
/// ports from that range, as do servers started with port 0) cannot take it in the meantime.
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, RandomState};
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (first, span) = (10_000u16, low.saturating_sub(10_000).max(1));
    let seed = RandomState::new();
    (0..1000u64)
        .map(|n| first + (seed.hash_one((std::process::id(), n)) % u64::from(span)) as u16)
        .find(|&port| {
            TcpListener::bind(("0.0.0.0", port)).is_ok()
                && std::net::UdpSocket::bind(("0.0.0.0", port)).is_ok()
        })
        .expect("a free port below the ephemeral range")
}

/// A TCP port on 127.0.0.1 that refuses every connection for as long as this value lives: bound
/// but never listening, so the kernel answers each SYN with a reset. Held, the port goes to no other
/// socket meanwhile: not to a server that a test running beside starts with port 0, and not to the
/// local end of an outgoing connection, which, aimed at a free port of the ephemeral range, may
/// otherwise be given that very port and connect to itself. (A listener bound and dropped at once
/// leaves the port to both.)
pub struct RefusingPort {
    _socket: socket2::Socket,
    /// The port.
    pub port: u16,
}

impl RefusingPort {
    /// A new one.
    pub fn new() -> Self {
        use socket2::{Domain, Socket, Type};
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a TCP socket");
        let any = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        socket.bind(&any.into()).expect("bind 127.0.0.1:0");
        let port = socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .expect("a bound IPv4 address")
            .port();
        Self {
            _socket: socket,
            port,
        }
    }
}

impl Default for RefusingPort {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs `cmd`, panicking with its stderr unless it succeeds; its stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A PostgreSQL cluster of our own: initdb into a temp dir owned by `postgres`, listening on
/// 127.0.0.1 at a free port with its socket in that dir; stopped and removed on drop.
pub struct Postgres {
    bin: PathBuf,
    dir: TempDir,
    port: u16,
}

/// Where Debian installs each PostgreSQL version's programs (`15/bin`, `16/bin`, ...).
pub const PG_LIB: &str = "/usr/lib/postgresql";

/// The programs of the newest PostgreSQL version installed.
fn pg_bin() -> Option<PathBuf> {
    let newest = std::fs::read_dir(PG_LIB)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .max()?;
    Some(Path::new(PG_LIB).join(newest.to_string()).join("bin"))
}

impl Postgres {
    /// The path of a PostgreSQL program (psql, createdb, ...).
    pub fn tool(&self, name: &str) -> PathBuf {
        self.bin.join(name)
    }

    /// The cluster. When none can be started here (no binaries, not root), the calling test fails
    /// with the reason ([`crate::cannot_run`]), or, opted out, this is `None` and the
    /// test returns.
    pub fn start() -> Option<Self> {
        let bin = pg_bin().unwrap_or_else(|| PathBuf::from(PG_LIB));
        if !crate::require(
            bin.join("initdb").exists(),
            format_args!("no PostgreSQL programs in {PG_LIB} (apt-get install postgresql)"),
        ) {
            return None;
        }
        let uid = run(Command::new("id").arg("-u"));
        if !crate::require(
            uid.trim() == "0",
            "starting PostgreSQL as the postgres user needs root",
        ) {
            return None;
        }
        let dir = TempDir::new("pg");
        run(Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir.0));
        let data = dir.0.join("data");
        let as_pg = |tool: &str| {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(bin.join(tool));
            c
        };
        run(as_pg("initdb")
            .args([
                "--auth=trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
                "-D",
            ])
            .arg(&data));
        // The port can be taken between free_port and the start: retry a few times.
        for _ in 0..5 {
            let port = free_port();
            let opts = format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
                dir.0.display()
            );
            let ok = as_pg("pg_ctl")
                .args(["-w", "-t", "60", "-D"])
                .arg(&data)
                .args(["-o", &opts, "-l"])
                .arg(dir.0.join("log"))
                .arg("start")
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return Some(Self { bin, dir, port });
            }
        }
        panic!(
            "pg_ctl start failed: {}",
            std::fs::read_to_string(dir.0.join("log")).unwrap_or_default()
        );
    }

    /// A fresh database in the cluster; its URL.
    pub fn database(&self) -> String {
        let name = format!("longhaul_{}", SEQ.fetch_add(1, Ordering::Relaxed));
        run(Command::new(self.bin.join("createdb")).args([
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
            &name,
        ]));
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Runs one SQL query with psql; its unaligned output.
    pub fn psql(&self, url: &str, sql: &str) -> String {
        run(Command::new(self.bin.join("psql")).args(["-X", "-A", "-t", "-d", url, "-c", sql]))
            .trim()
            .to_owned()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .args(["-m", "immediate", "-D"])
            .arg(self.dir.0.join("data"))
            .arg("stop")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusing_port_refuses_and_is_not_handed_out_again_while_held() {
        let held = RefusingPort::new();
        for _ in 0..3 {
            let e = std::net::TcpStream::connect(("127.0.0.1", held.port)).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
        }
        assert!(TcpListener::bind(("127.0.0.1", held.port)).is_err());
        drop(held);
    }
}
