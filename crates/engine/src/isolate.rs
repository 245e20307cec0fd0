//! `longhaul isolate` over real sockets (`longhaul_isolate` decides): find the reflectors of a
//! path, then bisect over them with trains of ICMP echo probes paced at the asked rate, and report
//! the segment where a fault first shows.
//!
//! Probes go out of one raw ICMP socket (IPv4 or ICMPv6 by the target's family; CAP_NET_RAW),
//! read back by a second thread on the same socket, time-stamped as they are read. The path is
//! found as `traceroute -I` finds it (echo requests with TTL 1, 2, …; each router's Time Exceeded
//! names it), then every router found is pinged: those that answer are the reflectors, the far end
//! last. A measurement of one reflector sends `trains` trains of probes at the rate, a gap of twice
//! a train's length between them, and waits two round trips after the last for the stragglers.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use longhaul_isolate::icmp::{self, ProbeId, Received};
use longhaul_isolate::{
    Bisection, Fault, Figures, Measured, Observations, Outcome, Probe, Reflector, Report,
    Thresholds, confidence,
};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::EngineError;

/// IPv4 and IPv6 header bytes the kernel puts in front of a probe.
const IPV4_HEADER: u32 = 20;
const IPV6_HEADER: u32 = 40;
/// Socket buffers: room for every reply of a measurement.
const SOCKET_BUFFER: usize = 8 << 20;
/// How long the reader blocks before it looks at its stop flag.
const READ_POLL: Duration = Duration::from_millis(20);
/// Rounds 0 and 1 are the path search and the echo check; measurements count from 2.
const ROUND_TRACE: u32 = 0;
const ROUND_ECHO: u32 = 1;
/// Echo requests per router when checking which routers answer.
const ECHO_CHECKS: u16 = 3;

/// What to do.
#[derive(Debug, Clone)]
pub struct IsolateConfig {
    /// The far end.
    pub target: IpAddr,
    /// The reflectors in path order (the far end is added last if absent); `None`: find them.
    pub reflectors: Option<Vec<IpAddr>>,
    /// The rate of each train, bit/s of IP bytes.
    pub rate_bps: u64,
    /// IP bytes of each probe.
    pub probe_bytes: u32,
    /// Probes per measurement (≤ 65,535).
    pub probes: u32,
    /// Trains per measurement.
    pub trains: u32,
    /// When a reflector counts as faulty.
    pub thresholds: Thresholds,
    /// Most hops searched.
    pub max_hops: u8,
    /// How long to wait for answers when searching the path.
    pub wait: Duration,
}

/// What the run is doing, for a caller that shows progress.
#[derive(Debug, Clone)]
pub enum Progress<'a> {
    /// The reflectors are known.
    Path(&'a [Reflector]),
    /// Routers found on the path that did not answer echo requests (not used as reflectors).
    Silent(&'a [IpAddr]),
    /// Measuring reflector `i` of the path.
    Measuring(usize, &'a Reflector),
    /// Its figures.
    Measured(usize, &'a Figures),
}

/// The raw socket and the run's probe identifier.
struct Prober {
    socket: Socket,
    v6: bool,
    ident: u16,
    epoch: Instant,
    message: Vec<u8>,
}

/// What the reader thread saw: when (ns since the epoch) and what.
type Heard = Vec<(u64, Received)>;

impl Prober {
    fn open(target: IpAddr) -> Result<Self, EngineError> {
        let v6 = target.is_ipv6();
        let (domain, proto) = if v6 {
            (Domain::IPV6, Protocol::ICMPV6)
        } else {
            (Domain::IPV4, Protocol::ICMPV4)
        };
        let socket = Socket::new(domain, Type::RAW, Some(proto)).map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
                " (isolate sends raw ICMP: run it as root or give the binary CAP_NET_RAW)"
            } else {
                ""
            };
            EngineError::io(format!("a raw ICMP socket{hint}"), e)
        })?;
        // Best effort: the kernel caps these at rmem_max / wmem_max without privilege.
        let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
        let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
        socket
            .set_read_timeout(Some(READ_POLL))
            .map_err(|e| EngineError::io("a read timeout on the ICMP socket", e))?;
        let mut seed = [0u8; 2];
        crate::random::fill(&mut seed, "the probe identifier")?;
        Ok(Self {
            socket,
            v6,
            ident: u16::from_ne_bytes(seed),
            epoch: Instant::now(),
            message: Vec::new(),
        })
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn set_ttl(&self, ttl: u8) -> Result<(), EngineError> {
        let r = if self.v6 {
            self.socket.set_unicast_hops_v6(u32::from(ttl))
        } else {
            self.socket.set_ttl_v4(u32::from(ttl))
        };
        r.map_err(|e| EngineError::io("setting the probes' TTL", e))
    }

    /// Sends probe `seq` of `round` to `to`, `bytes` IP bytes; returns when it went.
    fn send(&mut self, to: IpAddr, seq: u16, round: u32, bytes: u32) -> Result<u64, EngineError> {
        let header = if self.v6 { IPV6_HEADER } else { IPV4_HEADER };
        let id = ProbeId {
            ident: self.ident,
            seq,
        };
        icmp::echo_request(
            self.v6,
            id,
            round,
            bytes.saturating_sub(header) as usize,
            &mut self.message,
        );
        let addr = SockAddr::from(SocketAddr::new(to, 0));
        let at = self.now_ns();
        loop {
            match self.socket.send_to(&self.message, &addr) {
                Ok(_) => return Ok(at),
                // A full send buffer: wait for it to drain rather than lose the probe here.
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOBUFS.raw_os_error()) => {
                    std::thread::sleep(Duration::from_micros(50));
                }
                Err(e) => return Err(EngineError::io(format!("sending a probe to {to}"), e)),
            }
        }
    }

    /// Runs `send` while a second thread reads the socket, then keeps reading for `linger`.
    fn exchange(
        &mut self,
        linger: Duration,
        send: impl FnOnce(&mut Self) -> Result<(), EngineError>,
    ) -> Result<Heard, EngineError> {
        let reader = self
            .socket
            .try_clone()
            .map_err(|e| EngineError::io("cloning the ICMP socket", e))?;
        let stop = AtomicBool::new(false);
        let (v6, epoch) = (self.v6, self.epoch);
        std::thread::scope(|s| {
            let heard = s.spawn(|| read_until(&reader, v6, epoch, &stop));
            let sent = send(self);
            if sent.is_ok() {
                std::thread::sleep(linger);
            }
            stop.store(true, Ordering::Relaxed);
            let heard = heard.join().unwrap_or_default();
            sent.map(|()| heard)
        })
    }
}

/// Reads and parses everything the socket gets until `stop`.
fn read_until(socket: &Socket, v6: bool, epoch: Instant, stop: &AtomicBool) -> Heard {
    let mut heard = Vec::new();
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        match rustix::net::recvfrom(socket.as_fd(), &mut buf, rustix::net::RecvFlags::empty()) {
            Ok((n, _, from)) => {
                let at = epoch.elapsed().as_nanos() as u64;
                let bytes = &buf[..n.min(buf.len())];
                let got = if v6 {
                    match from.and_then(|a| SocketAddr::try_from(a).ok()) {
                        Some(a) => icmp::parse_v6(a.ip(), bytes),
                        None => Received::Other,
                    }
                } else {
                    icmp::parse_v4(bytes)
                };
                if got != Received::Other {
                    heard.push((at, got));
                }
            }
            Err(e) if e == rustix::io::Errno::AGAIN || e == rustix::io::Errno::INTR => {}
            Err(e) => {
                tracing::warn!("reading the ICMP socket: {e}");
                break;
            }
        }
    }
    heard
}

/// The host's ICMPv6 checksum-error counter (`Icmp6InCsumErrors` in /proc/net/snmp6), if readable.
fn icmp6_checksum_errors() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/snmp6").ok()?;
    text.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next()? == "Icmp6InCsumErrors").then(|| w.next()?.parse().ok())?
    })
}

/// The routers between here and `target` as `traceroute -I` finds them, by hop, and the far end's
/// hop and round trip if it answered.
fn trace(p: &mut Prober, cfg: &IsolateConfig) -> Result<Vec<Reflector>, EngineError> {
    const TRIES: u16 = 2;
    let target = cfg.target;
    let mut sent_at = HashMap::new();
    let heard = p.exchange(cfg.wait, |p| {
        for ttl in 1..=cfg.max_hops {
            p.set_ttl(ttl)?;
            for t in 0..TRIES {
                let seq = u16::from(ttl) * TRIES + t;
                sent_at.insert(seq, p.send(target, seq, ROUND_TRACE, 64)?);
            }
        }
        p.set_ttl(64)
    })?;
    let mut hops: Vec<(u8, IpAddr, f64)> = Vec::new();
    let mut end: Option<(u8, f64)> = None;
    for (at, got) in heard {
        let (from, id, is_end) = match got {
            Received::TimeExceeded { from, id } => (from, id, false),
            Received::Echo {
                from, id, round, ..
            } if round == ROUND_TRACE && from == target => (from, id, true),
            _ => continue,
        };
        if id.ident != p.ident {
            continue;
        }
        let Some(&sent) = sent_at.get(&id.seq) else {
            continue;
        };
        let ttl = (id.seq / TRIES) as u8;
        let rtt = at.saturating_sub(sent) as f64 / 1e6;
        if is_end {
            if end.is_none_or(|(t, _)| ttl < t) {
                end = Some((ttl, rtt));
            }
        } else if !hops.iter().any(|h| h.0 == ttl) {
            hops.push((ttl, from, rtt));
        }
    }
    hops.sort_by_key(|h| h.0);
    let last = end.map_or(u8::MAX, |(t, _)| t);
    let mut path: Vec<Reflector> = Vec::new();
    for (ttl, addr, rtt) in hops.into_iter().filter(|h| h.0 < last && h.1 != target) {
        if path.last().is_none_or(|r| r.addr != addr) {
            path.push(Reflector {
                hop: Some(ttl),
                addr,
                rtt_ms: Some(rtt),
            });
        }
    }
    path.push(Reflector {
        hop: end.map(|(t, _)| t),
        addr: target,
        rtt_ms: end.map(|(_, r)| r),
    });
    Ok(path)
}

/// Which of `path`'s routers answer echo requests (the far end is kept whatever it does): the
/// reflectors, each with the smallest round trip of its answers, and the silent ones.
fn answering(
    p: &mut Prober,
    path: Vec<Reflector>,
    wait: Duration,
) -> Result<(Vec<Reflector>, Vec<IpAddr>), EngineError> {
    let mut sent_at = Vec::new();
    let heard = p.exchange(wait, |p| {
        for (i, r) in path.iter().enumerate() {
            for t in 0..ECHO_CHECKS {
                sent_at.push(p.send(r.addr, i as u16 * ECHO_CHECKS + t, ROUND_ECHO, 64)?);
            }
        }
        Ok(())
    })?;
    let mut rtt: Vec<Option<f64>> = vec![None; path.len()];
    for (at, got) in heard {
        if let Received::Echo {
            from, id, round, ..
        } = got
            && round == ROUND_ECHO
            && id.ident == p.ident
            && let Some(&sent) = sent_at.get(usize::from(id.seq))
            && let Some(slot) = rtt.get_mut(usize::from(id.seq / ECHO_CHECKS))
            && path[usize::from(id.seq / ECHO_CHECKS)].addr == from
        {
            let ms = at.saturating_sub(sent) as f64 / 1e6;
            *slot = Some(slot.map_or(ms, |m: f64| m.min(ms)));
        }
    }
    let n = path.len();
    let (mut keep, mut silent) = (Vec::new(), Vec::new());
    for (i, mut r) in path.into_iter().enumerate() {
        if rtt[i].is_some() {
            r.rtt_ms = rtt[i];
        }
        if i + 1 == n || rtt[i].is_some() {
            keep.push(r);
        } else {
            silent.push(r.addr);
        }
    }
    Ok((keep, silent))
}

/// One measurement of reflector `r`: `cfg.trains` trains at `cfg.rate_bps`.
fn measure(
    p: &mut Prober,
    cfg: &IsolateConfig,
    r: &Reflector,
    round: u32,
) -> Result<Figures, EngineError> {
    let per = cfg.probes.div_ceil(cfg.trains.max(1));
    let spacing_ns = f64::from(cfg.probe_bytes) * 8.0 / cfg.rate_bps as f64 * 1e9;
    let train_ns = spacing_ns * f64::from(per);
    let gap = Duration::from_nanos((2.0 * train_ns) as u64 + 5_000_000);
    // Stragglers: two round trips (as found, else a second) and a train's length.
    let rtt = Duration::from_secs_f64(r.rtt_ms.map_or(1.0, |ms| ms / 1e3));
    let linger = 2 * rtt + Duration::from_nanos(train_ns as u64) + Duration::from_millis(100);
    let csum_before = if p.v6 { icmp6_checksum_errors() } else { None };
    let mut probes: Vec<Probe> = Vec::with_capacity(cfg.probes as usize);
    let heard = p.exchange(linger, |p| {
        for k in 0..cfg.trains {
            let start = p.now_ns();
            for j in 0..per {
                let n = k * per + j;
                if n >= cfg.probes {
                    break;
                }
                wait_until(p, start + (f64::from(j) * spacing_ns) as u64);
                let sent = p.send(r.addr, n as u16, round, cfg.probe_bytes)?;
                probes.push(Probe {
                    train: k,
                    sent_ns: sent,
                    back_ns: None,
                });
            }
            if k + 1 < cfg.trains {
                std::thread::sleep(gap);
            }
        }
        Ok(())
    })?;
    let checksum_errors = match (csum_before, p.v6.then(icmp6_checksum_errors).flatten()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => 0,
    };
    let mut obs = Observations {
        probes,
        bytes: cfg.probe_bytes,
        damaged: 0,
        checksum_errors,
    };
    obs.account(&heard, r.addr, p.ident, round);
    Ok(Figures::of(&obs, &cfg.thresholds))
}

/// Sleeps, then spins, until the prober's clock reads `at`.
fn wait_until(p: &Prober, at: u64) {
    loop {
        let now = p.now_ns();
        if now >= at {
            return;
        }
        let left = at - now;
        if left > 300_000 {
            std::thread::sleep(Duration::from_nanos(left - 200_000));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Runs `isolate`: the path, the bisection, the report.
pub fn run_isolate(
    cfg: &IsolateConfig,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Report, EngineError> {
    let started = Instant::now();
    if cfg.rate_bps == 0 || cfg.probe_bytes < 64 {
        return Err(EngineError::Unsupported(format!(
            "probes of {} B at {} bit/s: give a rate above 0 and probes of at least 64 B",
            cfg.probe_bytes, cfg.rate_bps
        )));
    }
    if cfg.probes == 0 || cfg.probes > u32::from(u16::MAX) || cfg.trains == 0 {
        return Err(EngineError::Unsupported(format!(
            "{} probes in {} trains: give 1 to 65535 probes and at least one train",
            cfg.probes, cfg.trains
        )));
    }
    let mut p = Prober::open(cfg.target)?;
    let path = match &cfg.reflectors {
        Some(list) => {
            let mut path: Vec<Reflector> = list
                .iter()
                .filter(|&&a| a != cfg.target)
                .map(|&addr| Reflector {
                    hop: None,
                    addr,
                    rtt_ms: None,
                })
                .collect();
            path.push(Reflector {
                hop: None,
                addr: cfg.target,
                rtt_ms: None,
            });
            path
        }
        None => trace(&mut p, cfg)?,
    };
    let (reflectors, silent) = answering(&mut p, path, cfg.wait)?;
    progress(Progress::Path(&reflectors));
    if !silent.is_empty() {
        progress(Progress::Silent(&silent));
    }
    let mut search = Bisection::new(reflectors.len());
    let mut measured: Vec<Measured> = Vec::new();
    let mut round = ROUND_ECHO;
    while let Some(i) = search.next() {
        round += 1;
        progress(Progress::Measuring(i, &reflectors[i]));
        let f = measure(&mut p, cfg, &reflectors[i], round)?;
        progress(Progress::Measured(i, &f));
        search.record(i, f.fault.is_some());
        measured.push(Measured {
            reflector: i,
            addr: reflectors[i].addr,
            figures: f,
        });
    }
    let figures_of = |i: usize| {
        measured
            .iter()
            .rev()
            .find(|m| m.reflector == i)
            .map(|m| &m.figures)
    };
    let fault = match search.outcome() {
        Some(Outcome::Segment { after, at }) => {
            let hi = figures_of(at).expect("the faulty reflector was measured");
            let kind = hi.fault.expect("a faulty reflector has a kind");
            let lo = after.and_then(figures_of);
            Some(Fault {
                after: after.map(|a| reflectors[a].addr),
                at: reflectors[at].addr,
                after_hop: after.map_or(Some(0), |a| reflectors[a].hop),
                at_hop: reflectors[at].hop,
                kind,
                confidence: confidence(lo, hi, kind, &cfg.thresholds),
            })
        }
        _ => None,
    };
    Ok(Report {
        target: cfg.target,
        rate_bps: cfg.rate_bps,
        probe_bytes: cfg.probe_bytes,
        probes: cfg.probes,
        trains: cfg.trains,
        thresholds: cfg.thresholds,
        reflectors,
        measured,
        fault,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

/// The first address of `host` of `family` (a name or an address), for [`IsolateConfig::target`].
pub fn resolve_target(host: &str, family: crate::Family) -> Result<IpAddr, EngineError> {
    Ok(crate::address::resolve(host, 0, family, None)?[0].ip())
}
