//! The UDP flows of a test (`longhaul test -u`): set-up, the paced sender and the receiver.
//!
//! **Set-up.** A UDP flow joins its test as a TCP data connection does, by presenting the test's
//! cookie and its index: the client sends the 32-byte data preamble as a datagram to the server's
//! port (UDP, the same number as the TCP port), the server's acceptor routes it to the session that
//! issued the cookie, and the session answers from a socket of its own, bound to the server's address
//! and port and connected to the client's, echoing the preamble. The client repeats unanswered hellos
//! (datagrams get lost) until the set-up deadline. From then on each flow is a pair of connected
//! sockets, so the kernel hands each flow's datagrams to its own socket.
//!
//! **Sending** ([`send_loop`]): datagrams of the test's length, each with iperf3's header
//! (`longhaul_proto::udp`), paced to the stream's rate in bursts: a burst of `B` datagrams goes as
//! soon as `B` are due, where "due" is the rate times the time since the start, so the average rate is
//! exact whatever the timer's jitter, and a sender that fell behind catches up in bursts of at most
//! [`MAX_BATCH`]. Each burst is one `sendmmsg(2)` of messages cut into datagrams by UDP GSO where the
//! kernel and the path allow. When it stops, the sender sends its end marker ([`END_MARKERS`] times).
//!
//! **Receiving** ([`recv_loop`]): `recvmmsg(2)` with UDP GRO, the kernel's arrival stamps and its drop
//! counter; every datagram goes to the account of `longhaul_proto::udp::UdpReceiver`. The receiver
//! ends [`END_GRACE`] after the sender's end marker (stragglers of a reordering path still count), or
//! at the drain deadline the driver sets once the peer has stopped sending (every marker lost), or
//! when stopped.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use longhaul_proto::msg::{SocketSetup, UdpParams};
use longhaul_proto::udp::{DelaySpread, EndMarker, UdpCounts, UdpHeader, UdpReceiver};
use longhaul_proto::window::{BufferAction, WindowPlan};
use longhaul_proto::wire::is_preamble;
use longhaul_sys::udp::{MAX_GSO_SEGMENTS, MAX_UDP_PAYLOAD, RecvBatch, send_batch};
use longhaul_sys::{self as sys};

use crate::EngineError;
use crate::clock::{Clock, unix_ns};
use crate::payload::AlignedBuf;

/// Most datagrams one pacing step sends (a sender that fell behind catches up in steps this big).
pub(crate) const MAX_BATCH: usize = 1024;
/// How often the sender sends its end marker, [`END_MARKER_GAP`] apart (any one is enough).
pub(crate) const END_MARKERS: u32 = 3;
/// Time between the end markers.
pub(crate) const END_MARKER_GAP: Duration = Duration::from_millis(2);
/// How long a receiver keeps taking datagrams after the end marker: stragglers of a reordering path
/// are late, not lost.
pub(crate) const END_GRACE: Duration = Duration::from_millis(50);
/// The pacing step the sender aims for when it picks the burst itself (`--burst 0`): long enough for
/// the timer to keep up, short enough that a burst is a few tens of datagrams at 1 Gbit/s.
pub(crate) const AUTO_STEP: Duration = Duration::from_micros(100);
/// How long a side's UDP receivers may still take datagrams once the peer has stopped sending:
/// two round trips and a quarter second, for datagrams still queued on the path.
pub(crate) fn receive_grace(params: &longhaul_proto::TestParams) -> Duration {
    Duration::from_nanos(params.rtt_ns.saturating_mul(2)) + Duration::from_millis(250)
}

/// How often a client repeats an unanswered stream hello.
pub(crate) const HELLO_REPEAT: Duration = Duration::from_millis(200);
/// How long a blocked receive waits before the receiver looks at its stop flag and deadlines again.
const RECV_TICK: Duration = Duration::from_millis(50);
/// Messages per `recvmmsg(2)`.
const RECV_MESSAGES: usize = 32;

/// The live counters of a UDP stream: its worker stores them after every batch, the control thread
/// reads them at each interval tick.
#[derive(Debug, Default)]
pub(crate) struct UdpLive {
    packets: AtomicU64,
    lost: AtomicU64,
    out_of_order: AtomicU64,
    duplicates: AtomicU64,
    malformed: AtomicU64,
    host_drops: AtomicU64,
    jitter_bits: AtomicU64,
    /// Clock time (ns) at which a receiver stops even without the end marker; 0: not set.
    drain_by_ns: AtomicU64,
}

impl UdpLive {
    fn store(&self, c: &UdpCounts) {
        let r = Ordering::Relaxed;
        self.packets.store(c.packets, r);
        self.lost.store(c.lost, r);
        self.out_of_order.store(c.out_of_order, r);
        self.duplicates.store(c.duplicates, r);
        self.malformed.store(c.malformed, r);
        self.host_drops.store(c.host_drops, r);
        self.jitter_bits.store(c.jitter_ns.to_bits(), r);
    }

    /// The counters as last stored.
    pub(crate) fn load(&self, bytes: u64) -> UdpCounts {
        let r = Ordering::Relaxed;
        UdpCounts {
            packets: self.packets.load(r),
            bytes,
            lost: self.lost.load(r),
            out_of_order: self.out_of_order.load(r),
            duplicates: self.duplicates.load(r),
            malformed: self.malformed.load(r),
            jitter_ns: f64::from_bits(self.jitter_bits.load(r)),
            host_drops: self.host_drops.load(r),
        }
    }

    /// A receiver stops at clock time `ns` at the latest (the peer has stopped sending).
    pub(crate) fn drain_by(&self, ns: u64) {
        let _ =
            self.drain_by_ns
                .compare_exchange(0, ns.max(1), Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// What a UDP worker shares with the control thread: the stop flag it watches, the bytes it moved
/// and its live counters.
pub(crate) struct UdpCounters<'a> {
    pub(crate) stop: &'a std::sync::atomic::AtomicBool,
    pub(crate) bytes: &'a AtomicU64,
    pub(crate) live: &'a UdpLive,
}

/// What a UDP receiver knows at its end, beyond the live counters.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct UdpEnd {
    pub(crate) counts: UdpCounts,
    /// Clock time (ns) of the last batch with a data datagram: the stream's end, for its rate.
    pub(crate) last_data_ns: Option<u64>,
    pub(crate) transit: Option<DelaySpread>,
    pub(crate) end_seen: bool,
}

/// How a UDP stream sends.
#[derive(Debug, Clone)]
pub(crate) struct UdpSend {
    /// Datagram payload bytes (the header included).
    pub(crate) len: usize,
    /// Payload bit/s; 0: as fast as the socket takes them.
    pub(crate) rate_bps: u64,
    /// Datagrams per pacing step; 0: picked from the rate ([`AUTO_STEP`]).
    pub(crate) burst: u32,
    pub(crate) counters_64: bool,
    /// Bytes to send in all (`-n`), if any.
    pub(crate) budget: Option<u64>,
    /// Payload bytes to fill the datagrams with (at least [`MAX_BATCH`] × `len`).
    pub(crate) payload: Arc<AlignedBuf>,
    /// Send the end marker when stopping (not to an iperf3 peer, which would take it for data).
    pub(crate) end_markers: bool,
    /// Cut datagrams in the kernel (UDP GSO) where it can.
    pub(crate) gso: bool,
}

impl UdpSend {
    pub(crate) fn new(
        params: &UdpParams,
        len: u32,
        budget: Option<u64>,
        repeating: bool,
    ) -> Result<Self, EngineError> {
        Ok(Self {
            len: len as usize,
            rate_bps: params.rate_bps,
            burst: params.burst,
            counters_64: params.counters_64bit,
            budget,
            payload: crate::payload::payload(MAX_BATCH * len as usize, repeating)?,
            end_markers: true,
            gso: !params.no_offload,
        })
    }

    /// Datagrams per pacing step.
    fn burst(&self) -> u64 {
        if self.burst > 0 {
            return u64::from(self.burst);
        }
        if self.rate_bps == 0 {
            return MAX_BATCH as u64;
        }
        let per_step = u128::from(self.rate_bps) * AUTO_STEP.as_nanos() / 8 / 1_000_000_000;
        (per_step.div_ceil(self.len.max(1) as u128) as u64).clamp(1, MAX_BATCH as u64)
    }
}

/// Sends datagrams until stopped or the budget is spent, then the end marker.
pub(crate) fn send_loop(sock: &UdpSocket, cfg: &UdpSend, st: &UdpCounters<'_>) -> io::Result<()> {
    let live = st.live;
    let len = cfg.len.max(1);
    let fd = sock.as_fd();
    // GSO cuts a message of several datagrams in the kernel; only worth it when two or more fit one
    // message, and only where the kernel takes UDP_SEGMENT at all.
    let per_message = (MAX_UDP_PAYLOAD / len).min(MAX_GSO_SEGMENTS);
    let mut gso = cfg.gso
        && per_message > 1
        && u16::try_from(len)
            .ok()
            .is_some_and(|l| sys::udp::set_udp_segment(fd, l).is_ok());
    let burst = cfg.burst();
    // Page-aligned, as the TCP payload is (the kernel copies from it 3× faster, see `payload`).
    let mut aligned = AlignedBuf::zeroed(MAX_BATCH * len);
    aligned
        .as_mut_slice()
        .copy_from_slice(&cfg.payload.as_slice()[..MAX_BATCH * len]);
    let buf = aligned.as_mut_slice();
    let budget = cfg.budget.map(|b| b.div_ceil(len as u64));
    let _ = sys::set_timer_slack_ns(1);
    let start = sys::monotonic_now_ns();
    let mut sent: u64 = 0;
    let mut result = Ok(());
    while !st.stop.load(Ordering::Relaxed) {
        if budget.is_some_and(|b| sent >= b) {
            break;
        }
        let due = if cfg.rate_bps == 0 {
            sent + burst
        } else {
            let elapsed = sys::monotonic_now_ns().saturating_sub(start);
            let paced =
                u128::from(elapsed) * u128::from(cfg.rate_bps) / (8 * len as u128 * 1_000_000_000);
            paced as u64 + burst
        };
        if due < sent + burst.min(budget.map_or(u64::MAX, |b| b - sent)) {
            // The next burst is due when `sent` datagrams' worth of time has passed.
            let at = u128::from(sent) * 8 * len as u128 * 1_000_000_000 / u128::from(cfg.rate_bps);
            sys::sleep_until_ns(start.saturating_add(u64::try_from(at).unwrap_or(u64::MAX)));
            continue;
        }
        let mut n = (due - sent).min(MAX_BATCH as u64);
        if let Some(b) = budget {
            n = n.min(b - sent);
        }
        let n = n as usize;
        let stamp = unix_ns(SystemTime::now());
        for (i, d) in buf.chunks_mut(len).take(n).enumerate() {
            UdpHeader::new(stamp, sent + 1 + i as u64).write(d, cfg.counters_64);
        }
        let step = if gso { per_message } else { 1 };
        let messages: Vec<&[u8]> = buf[..n * len].chunks(step * len).collect();
        match send_batch(fd, &messages) {
            Ok(k) => {
                let went = messages[..k]
                    .iter()
                    .map(|m| m.len().div_ceil(len))
                    .sum::<usize>();
                sent += went as u64;
                st.bytes.fetch_add((went * len) as u64, Ordering::Relaxed);
                live.packets.store(sent, Ordering::Relaxed);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // A path MTU below the datagram: the kernel will not cut GSO segments that need IP
            // fragmentation. Send them one by one instead (the kernel fragments those).
            Err(e) if gso && e.raw_os_error() == Some(libc_einval()) => {
                let _ = sys::udp::set_udp_segment(fd, 0);
                gso = false;
            }
            Err(_) if st.stop.load(Ordering::Relaxed) => break,
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let marker = EndMarker { sent }.encode();
    for i in 0..if cfg.end_markers { END_MARKERS } else { 0 } {
        if i > 0 {
            std::thread::sleep(END_MARKER_GAP);
        }
        let _ = sock.send(&marker);
    }
    result
}

/// `EINVAL`, which the kernel returns for a GSO message it cannot cut.
fn libc_einval() -> i32 {
    io::Error::from(io::ErrorKind::InvalidInput)
        .raw_os_error()
        .unwrap_or(22)
}

/// Takes datagrams until the end (see the module doc); returns the receiver's final account.
pub(crate) fn recv_loop(
    sock: &UdpSocket,
    counters_64: bool,
    gro: bool,
    clock: Clock,
    st: &UdpCounters<'_>,
) -> io::Result<UdpEnd> {
    let live = st.live;
    let fd = sock.as_fd();
    let gro = gro && sys::udp::set_udp_gro(fd, true).is_ok();
    let _ = sys::udp::set_receive_info(fd);
    sock.set_read_timeout(Some(RECV_TICK))?;
    let capacity = if gro { MAX_UDP_PAYLOAD + 28 } else { 65_536 };
    let mut batch = RecvBatch::new(RECV_MESSAGES, capacity);
    let mut r = UdpReceiver::new(counters_64);
    let mut host_drops = 0u64;
    let mut end_by: Option<Instant> = None;
    let mut last_data_ns = None;
    loop {
        if st.stop.load(Ordering::Relaxed) || end_by.is_some_and(|t| Instant::now() >= t) {
            break;
        }
        let drain_by = live.drain_by_ns.load(Ordering::Relaxed);
        if drain_by != 0 && clock.now_ns() >= drain_by {
            break;
        }
        let n = match batch.recv(fd) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                        // An ICMP error for a datagram this socket never sent (a stray hello
                        // echo): nothing to do with what it receives.
                        | io::ErrorKind::ConnectionRefused
                ) =>
            {
                continue;
            }
            Err(_) if st.stop.load(Ordering::Relaxed) => break,
            Err(e) => return Err(e),
        };
        let fallback = unix_ns(SystemTime::now());
        for i in 0..n {
            let m = batch.message(i);
            if m.truncated {
                r.malformed += 1;
                continue;
            }
            host_drops = host_drops.max(u64::from(m.dropped));
            let arrived = m.kernel_ns.unwrap_or(fallback);
            for d in m.datagrams() {
                if let Some(end) = EndMarker::decode(d) {
                    r.end(end.sent);
                    end_by.get_or_insert_with(|| Instant::now() + END_GRACE);
                } else if !is_preamble(d) {
                    r.datagram(d, arrived);
                }
            }
        }
        if r.bytes != st.bytes.load(Ordering::Relaxed) {
            last_data_ns = Some(clock.now_ns());
        }
        let mut c = r.counts();
        c.host_drops = host_drops;
        live.store(&c);
        st.bytes.store(r.bytes, Ordering::Relaxed);
    }
    let mut counts = r.counts();
    counts.host_drops = host_drops;
    live.store(&counts);
    Ok(UdpEnd {
        counts,
        last_data_ns,
        transit: r.transit(),
        end_seen: r.ended.is_some(),
    })
}

/// Applies a UDP test's buffer plan to one socket (the role's buffer: send or receive).
pub(crate) fn apply_buffers(
    sock: &UdpSocket,
    plan: &WindowPlan,
    sender: bool,
    stream: u32,
) -> Result<(), EngineError> {
    let buf = if sender { &plan.send } else { &plan.recv };
    if let BufferAction::Set { request, force } = buf.action {
        let fd = sock.as_fd();
        let r = if sender {
            sys::set_send_buffer(fd, request, force)
        } else {
            sys::set_recv_buffer(fd, request, force)
        };
        r.map_err(|e| EngineError::Io {
            what: format!("stream {stream}: {e}"),
            source: e.into_io(),
        })?;
    }
    Ok(())
}

/// How the kernel set up a UDP flow's socket, for the report.
pub(crate) fn describe(sock: &UdpSocket, stream: u32, sender: bool) -> SocketSetup {
    let fd = sock.as_fd();
    let (tos, nodelay, dont_fragment) = crate::socket::read_flags(fd);
    SocketSetup {
        tos,
        nodelay,
        dont_fragment,
        stream,
        sender,
        congestion: String::new(),
        mss: 0,
        sndbuf: sys::send_buffer(fd).unwrap_or(0),
        rcvbuf: sys::recv_buffer(fd).unwrap_or(0),
        pacing: None,
        local: sock.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        remote: sock.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
    }
}

/// The client's side of the set-up: one socket per flow, bound to `bind` (or any address), set up
/// as planned and connected to `server`; each sends its hello until the server echoes it or
/// `timeout` passes.
pub(crate) fn open_flows(
    server: SocketAddr,
    bind: Option<IpAddr>,
    first_port: Option<u16>,
    hellos: &[([u8; 32], bool)],
    plan: &WindowPlan,
    timeout: Duration,
) -> Result<Vec<UdpSocket>, EngineError> {
    let mut socks = Vec::with_capacity(hellos.len());
    for (i, (_, sender)) in hellos.iter().enumerate() {
        let port = first_port.map_or(0, |p| p.saturating_add(i as u16));
        let s = flow_socket(server, bind, i as u32, port)?;
        apply_buffers(&s, plan, *sender, i as u32)?;
        s.set_nonblocking(true)
            .map_err(|e| EngineError::io("set a UDP socket non-blocking", e))?;
        socks.push(s);
    }
    let deadline = Instant::now() + timeout;
    let mut answered = vec![false; socks.len()];
    let mut next_send = Instant::now();
    let mut buf = [0u8; 64];
    while answered.iter().any(|a| !a) {
        let now = Instant::now();
        if now >= deadline {
            let missing = answered.iter().filter(|a| !**a).count();
            return Err(EngineError::Timeout(format!(
                "the server to answer {missing} of {} UDP stream hellos (is UDP port {} \
                 reachable?)",
                socks.len(),
                server.port()
            )));
        }
        if now >= next_send {
            for ((s, (hello, _)), done) in socks.iter().zip(hellos).zip(&answered) {
                if !done {
                    let _ = s.send(hello);
                }
            }
            next_send = now + HELLO_REPEAT;
        }
        for ((s, (hello, _)), done) in socks.iter().zip(hellos).zip(answered.iter_mut()) {
            while let Ok(n) = s.recv(&mut buf) {
                if &buf[..n] == hello {
                    *done = true;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    for s in &socks {
        s.set_nonblocking(false)
            .map_err(|e| EngineError::io("set a UDP socket blocking", e))?;
    }
    Ok(socks)
}

/// A client's socket for flow `index`: bound to `bind` (or any address of the server's family)
/// and connected to `server`.
pub(crate) fn flow_socket(
    server: SocketAddr,
    bind: Option<IpAddr>,
    index: u32,
    port: u16,
) -> Result<UdpSocket, EngineError> {
    let local = SocketAddr::new(
        bind.unwrap_or_else(|| crate::address::unspecified(server)),
        port,
    );
    let s = UdpSocket::bind(local)
        .map_err(|e| EngineError::io(format!("bind a UDP socket on {local}"), e))?;
    s.connect(server)
        .map_err(|e| EngineError::io(format!("connect UDP stream {index} to {server}"), e))?;
    Ok(s)
}

/// The server's socket for a flow whose hello came from `peer` to this server's `local` address:
/// bound to that address and the server's port (beside the acceptor), connected to `peer`.
pub(crate) fn accept_flow(local: SocketAddr, peer: SocketAddr) -> io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    if local.is_ipv6() {
        s.set_only_v6(false)?;
    }
    s.bind(&local.into())?;
    s.connect(&peer.into())?;
    Ok(s.into())
}

/// Echoes every stream hello waiting on `sock` (a repeat that reached the flow's own socket after
/// the server had answered the first): the client stops repeating once it hears one.
pub(crate) fn echo_hellos(sock: &UdpSocket) {
    let mut buf = [0u8; 64];
    if sock.set_nonblocking(true).is_err() {
        return;
    }
    while let Ok(n) = sock.recv(&mut buf) {
        if is_preamble(&buf[..n]) {
            let _ = sock.send(&buf[..n]);
        }
    }
    let _ = sock.set_nonblocking(false);
}
