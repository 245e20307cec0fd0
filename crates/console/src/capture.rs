//! Reading consoles: one task per host for a console exposed on a TCP socket (QEMU's `-serial
//! tcp:`, ser2net, conserver), a Unix socket (QEMU's `-serial unix:`) or a device (a pty, a USB
//! serial adapter), reconnecting with backoff when it closes; and one task for Linux netconsole's
//! UDP stream, telling hosts apart by source address. Every line goes to the service's channel
//! timestamped and marked ([`crate::detect`]), at most [`Limits::lines_per_sec`] a second per host
//! (a flood is cut, and a line says how many were dropped).

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use jiff::Timestamp;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use crate::detect::{Mark, mark};
use crate::lines::Splitter;

/// Where a host's console is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A TCP socket (`tcp:HOST:PORT`).
    Tcp(String),
    /// A Unix socket (`unix:PATH`).
    Unix(PathBuf),
    /// A character device, opened for reading (`device:PATH`: a pty, `/dev/ttyUSB0`).
    Device(PathBuf),
}

impl Source {
    /// Parses `tcp:HOST:PORT`, `unix:PATH` or `device:PATH`.
    pub fn parse(s: &str) -> Result<Self, String> {
        if let Some(a) = s.strip_prefix("tcp:") {
            if a.rsplit_once(':')
                .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
            {
                return Err(format!("console {s:?}: tcp:HOST:PORT"));
            }
            Ok(Self::Tcp(a.to_owned()))
        } else if let Some(p) = s.strip_prefix("unix:").filter(|p| p.starts_with('/')) {
            Ok(Self::Unix(PathBuf::from(p)))
        } else if let Some(p) = s.strip_prefix("device:").filter(|p| p.starts_with('/')) {
            Ok(Self::Device(PathBuf::from(p)))
        } else {
            Err(format!(
                "console {s:?}: use tcp:HOST:PORT, unix:/PATH or device:/PATH (netconsole = \"ADDRESS\" for netconsole)"
            ))
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tcp(a) => write!(f, "tcp:{a}"),
            Self::Unix(p) => write!(f, "unix:{}", p.display()),
            Self::Device(p) => write!(f, "device:{}", p.display()),
        }
    }
}

/// One captured line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// The host's resource id.
    pub host: String,
    /// When it was read.
    pub at: Timestamp,
    /// The text, escaped ([`crate::lines`]).
    pub text: String,
    /// What it marks.
    pub mark: Option<Mark>,
}

/// How much a console may say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Lines a second kept on average, per host.
    pub lines_per_sec: u32,
    /// Lines kept in a burst (a boot prints a few hundred at once).
    pub burst: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            lines_per_sec: 200,
            burst: 5000,
        }
    }
}

/// A token bucket over lines, counting what it drops.
#[derive(Debug)]
struct Bucket {
    limits: Limits,
    tokens: f64,
    last: std::time::Instant,
    dropped: u64,
}

impl Bucket {
    fn new(limits: Limits) -> Self {
        Self {
            limits,
            tokens: f64::from(limits.burst),
            last: std::time::Instant::now(),
            dropped: 0,
        }
    }

    /// Whether a line may pass now; when lines were dropped before it, their number too.
    fn admit(&mut self) -> (bool, u64) {
        let now = std::time::Instant::now();
        let refill =
            now.duration_since(self.last).as_secs_f64() * f64::from(self.limits.lines_per_sec);
        self.tokens = (self.tokens + refill).min(f64::from(self.limits.burst));
        self.last = now;
        // One token for the line, one kept for the "dropped" notice.
        if self.tokens >= 2.0 || (self.dropped == 0 && self.tokens >= 1.0) {
            self.tokens -= 1.0;
            let dropped = std::mem::take(&mut self.dropped);
            if dropped > 0 {
                self.tokens -= 1.0;
            }
            (true, dropped)
        } else {
            self.dropped += 1;
            (false, 0)
        }
    }
}

/// Per host: its splitter and buckets; turns bytes into captured lines on `tx`. Marked lines (a
/// boot, an oops, a panic: what a flood must not hide) have a bucket of their own, 10 times
/// smaller.
struct Reader {
    host: String,
    splitter: Splitter,
    lines: Bucket,
    marked: Bucket,
}

impl Reader {
    fn new(host: String, limits: Limits) -> Self {
        let marked = Limits {
            lines_per_sec: (limits.lines_per_sec / 10).max(1),
            burst: (limits.burst / 10).max(1),
        };
        Self {
            host,
            splitter: Splitter::new(),
            lines: Bucket::new(limits),
            marked: Bucket::new(marked),
        }
    }

    /// Says how many lines were dropped, if any were.
    async fn notice(&mut self, dropped: u64, tx: &mpsc::Sender<Captured>) -> bool {
        if dropped == 0 {
            return true;
        }
        let text = format!(
            "[longhaul: {dropped} console lines dropped: over {} lines/s]",
            self.lines.limits.lines_per_sec
        );
        send(tx, &self.host, text, None).await
    }

    async fn emit(&mut self, text: String, tx: &mpsc::Sender<Captured>) -> bool {
        let m = mark(&text);
        let bucket = if m.is_some() {
            &mut self.marked
        } else {
            &mut self.lines
        };
        let (pass, dropped) = bucket.admit();
        if !self.notice(dropped, tx).await {
            return false;
        }
        !pass || send(tx, &self.host, text, m).await
    }

    async fn bytes(&mut self, b: &[u8], tx: &mpsc::Sender<Captured>) -> bool {
        for line in self.splitter.feed(b) {
            if !self.emit(line.text, tx).await {
                return false;
            }
        }
        true
    }

    /// The end of a connection: the unterminated last line, and the count of what was dropped.
    async fn end(&mut self, tx: &mpsc::Sender<Captured>) -> bool {
        if let Some(l) = self.splitter.finish()
            && !self.emit(l.text, tx).await
        {
            return false;
        }
        let dropped =
            std::mem::take(&mut self.lines.dropped) + std::mem::take(&mut self.marked.dropped);
        self.notice(dropped, tx).await
    }
}

async fn send(tx: &mpsc::Sender<Captured>, host: &str, text: String, mark: Option<Mark>) -> bool {
    tx.send(Captured {
        host: host.to_owned(),
        at: Timestamp::now(),
        text,
        mark,
    })
    .await
    .is_ok()
}

async fn open(source: &Source) -> std::io::Result<Box<dyn tokio::io::AsyncRead + Unpin + Send>> {
    Ok(match source {
        Source::Tcp(a) => Box::new(tokio::net::TcpStream::connect(a).await?),
        Source::Unix(p) => Box::new(tokio::net::UnixStream::connect(p).await?),
        Source::Device(p) => Box::new(tokio::fs::File::open(p).await?),
    })
}

/// Reads `host`'s console at `source` until `tx` closes, reconnecting after 0.5 s, doubling to
/// 10 s while it fails.
pub async fn capture(host: String, source: Source, limits: Limits, tx: mpsc::Sender<Captured>) {
    let mut reader = Reader::new(host.clone(), limits);
    let mut backoff = Duration::from_millis(500);
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match open(&source).await {
            Ok(mut stream) => {
                tracing::info!(target: "longhaul::console", host, %source, "console connected");
                backoff = Duration::from_millis(500);
                loop {
                    match stream.read(&mut buf).await {
                        Ok(0) => break,
                        Ok(n) => {
                            if !reader.bytes(&buf[..n], &tx).await {
                                return;
                            }
                        }
                        Err(e) => {
                            tracing::warn!(target: "longhaul::console", host, %source, error = %e, "console read failed");
                            break;
                        }
                    }
                }
                if !reader.end(&tx).await {
                    return;
                }
                tracing::info!(target: "longhaul::console", host, %source, "console closed");
            }
            Err(e) => {
                tracing::debug!(target: "longhaul::console", host, %source, error = %e, "console not reachable");
            }
        }
        if tx.is_closed() {
            return;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(10));
    }
}

/// Reads netconsole datagrams on `socket` until `tx` closes: each source address in `hosts` is a
/// host; datagrams from any other address are dropped (counted in the log).
pub async fn netconsole(
    socket: tokio::net::UdpSocket,
    hosts: HashMap<IpAddr, String>,
    limits: Limits,
    tx: mpsc::Sender<Captured>,
) {
    let mut readers: HashMap<IpAddr, Reader> = HashMap::new();
    let mut strangers = 0u64;
    let mut buf = vec![0u8; 65536];
    loop {
        let (n, from) = match socket.recv_from(&mut buf).await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(target: "longhaul::console", error = %e, "netconsole receive failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let ip = match from.ip() {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        let Some(host) = hosts.get(&ip) else {
            strangers += 1;
            if strangers.is_power_of_two() {
                tracing::warn!(target: "longhaul::console", %from, strangers, "netconsole datagram from an unknown address dropped");
            }
            continue;
        };
        let reader = readers
            .entry(ip)
            .or_insert_with(|| Reader::new(host.clone(), limits));
        // A datagram is one message (or several), possibly without its newline.
        let mut data = buf[..n].to_vec();
        if data.last() != Some(&b'\n') {
            data.push(b'\n');
        }
        if !reader.bytes(&data, &tx).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[test]
    fn sources_parse() {
        assert_eq!(
            Source::parse("tcp:127.0.0.1:4555"),
            Ok(Source::Tcp("127.0.0.1:4555".into()))
        );
        assert_eq!(
            Source::parse("unix:/run/vm.sock"),
            Ok(Source::Unix("/run/vm.sock".into()))
        );
        assert!(Source::parse("tcp:host").is_err());
        assert!(Source::parse("unix:relative").is_err());
        assert!(Source::parse("ssh:x").is_err());
    }

    #[tokio::test]
    async fn a_console_that_floods_is_cut_and_says_so() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut c, _) = l.accept().await.unwrap();
            c.write_all(b"[    0.000000] Linux version 6.1.0\n")
                .await
                .unwrap();
            let flood = "spam spam spam\n".repeat(10_000);
            c.write_all(flood.as_bytes()).await.unwrap();
            c.write_all(b"[    9.000000] Kernel panic - not syncing: test\nno newline")
                .await
                .unwrap();
        });
        let (tx, mut rx) = mpsc::channel(100_000);
        let limits = Limits {
            lines_per_sec: 10,
            burst: 100,
        };
        let task = tokio::spawn(capture(
            "h".into(),
            Source::Tcp(addr.to_string()),
            limits,
            tx,
        ));
        let mut got = Vec::new();
        while let Ok(Some(c)) = tokio::time::timeout(Duration::from_secs(3), rx.recv()).await {
            got.push(c);
        }
        task.abort();
        assert_eq!(got[0].mark, Some(Mark::Boot));
        assert!(got.len() < 200, "the flood is bounded: {}", got.len());
        assert!(
            got.iter().any(|c| c.text.contains("console lines dropped")),
            "{got:?}"
        );
    }
}
