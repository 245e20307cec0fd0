//! Stream workers: one thread per data connection, sending or receiving as fast as the socket allows.
//!
//! One thread per stream (not one thread for all, as in iperf3 before 3.16) lets streams use every core
//! and keeps each loop a plain blocking `write`/`read`. The control thread watches the shared counters and
//! samples `TCP_INFO` on the same socket; it stops a sender by raising `stop` and, if the sender is stuck
//! in a write the path will never drain, by shutting the socket down under it.

use std::io;
use std::net::{Shutdown, UdpSocket};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use longhaul_proto::interval::TcpSample;
use longhaul_sys::{self as sys, CpuTime};

use crate::channel::Channel;
use crate::clock::Clock;
use crate::payload::AlignedBuf;
use crate::quic::QuicFlow;
use crate::udp::{UdpCounters, UdpEnd, UdpLive, UdpSend};
use crate::zerocopy::SendMethod;

/// A stream's socket: a TCP connection (plain or TLS), a connected UDP socket (`-u`), or a QUIC
/// connection (`--transport udp`).
#[derive(Debug)]
pub(crate) enum Flow {
    Tcp(Box<Channel>),
    Udp(UdpSocket),
    Quic(Box<QuicFlow>),
}

impl Flow {
    /// The TCP connection, if this is one.
    pub(crate) fn tcp(&self) -> Option<&Channel> {
        match self {
            Flow::Tcp(c) => Some(c),
            Flow::Udp(_) | Flow::Quic(_) => None,
        }
    }

    /// The sender's congestion state as a `TCP_INFO` reading (TCP and QUIC streams).
    pub(crate) fn sample(&self) -> Option<TcpSample> {
        match self {
            Flow::Tcp(c) => crate::socket::tcp_sample(c.as_fd()),
            Flow::Quic(q) => Some(q.sample()),
            Flow::Udp(_) => None,
        }
    }

    /// Wakes a worker blocked on the socket: a TCP socket is shut down under it, a QUIC connection
    /// closed; a UDP worker wakes by itself within its receive tick and sees its stop flag.
    pub(crate) fn shut_down(&self) {
        match self {
            Flow::Tcp(c) => {
                let _ = c.shutdown(Shutdown::Both);
            }
            Flow::Quic(q) => q.shut_down(),
            Flow::Udp(_) => {}
        }
    }
}

/// State shared between a stream's worker and the control thread.
#[derive(Debug)]
pub(crate) struct StreamState {
    pub(crate) index: u32,
    pub(crate) sender: bool,
    pub(crate) sock: Flow,
    /// A UDP stream's live counters.
    pub(crate) udp: Option<UdpLive>,
    /// Bytes written (sender) or read (receiver) so far.
    pub(crate) bytes: AtomicU64,
    /// Raised by the control thread to end a sender.
    pub(crate) stop: AtomicBool,
    /// Clock time (ns) at which the worker finished; 0 while it runs.
    pub(crate) finished_ns: AtomicU64,
}

impl StreamState {
    pub(crate) fn new(index: u32, sender: bool, sock: Flow) -> Arc<Self> {
        let udp = matches!(sock, Flow::Udp(_)).then(UdpLive::default);
        Arc::new(Self {
            index,
            sender,
            sock,
            udp,
            bytes: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            finished_ns: AtomicU64::new(0),
        })
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// What a UDP worker updates and watches.
    fn counters(&self) -> UdpCounters<'_> {
        UdpCounters {
            stop: &self.stop,
            bytes: &self.bytes,
            live: self.udp.as_ref().expect("a UDP stream has live counters"),
        }
    }

    /// What a QUIC worker updates and watches.
    fn quic_counters(&self) -> crate::quic::Counters<'_> {
        crate::quic::Counters {
            stop: &self.stop,
            bytes: &self.bytes,
        }
    }

    pub(crate) fn finished(&self) -> Option<u64> {
        match self.finished_ns.load(Ordering::Acquire) {
            0 => None,
            t => Some(t),
        }
    }
}

impl crate::pacer::PacedSocket for StreamState {
    fn paced_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.sock.tcp().map(|c| c.as_fd())
    }
}

/// What a worker does.
pub(crate) enum Job {
    /// Send until stopped or until `budget` bytes are sent.
    Send {
        method: SendMethod,
        write_len: usize,
        budget: Option<u64>,
    },
    /// Receive until end-of-stream; with `window`, hold the advertised window there.
    Recv {
        read_len: usize,
        window: Option<u64>,
    },
    /// Send paced UDP datagrams until stopped or the budget is spent.
    SendUdp(UdpSend),
    /// Take UDP datagrams until the sender's end (`crate::udp::recv_loop`).
    RecvUdp { counters_64: bool, gro: bool },
}

/// What a worker returns.
pub(crate) struct WorkerResult {
    pub(crate) cpu: CpuTime,
    pub(crate) error: Option<io::Error>,
    /// A UDP receiver's final account.
    pub(crate) udp_end: Option<UdpEnd>,
}

/// A running stream.
pub(crate) struct Worker {
    pub(crate) state: Arc<StreamState>,
    handle: JoinHandle<WorkerResult>,
}

impl Worker {
    pub(crate) fn spawn(state: Arc<StreamState>, clock: Clock, job: Job) -> io::Result<Self> {
        let st = Arc::clone(&state);
        let handle = std::thread::Builder::new()
            .name(format!("lh-stream-{}", state.index))
            .spawn(move || {
                let mut udp_end = None;
                let outcome = match (job, &st.sock) {
                    (
                        Job::Send {
                            method,
                            write_len,
                            budget,
                        },
                        Flow::Tcp(c),
                    ) => send_loop(&st, c, &method, write_len, budget),
                    (Job::Recv { read_len, window }, Flow::Tcp(c)) => {
                        recv_loop(&st, c, read_len, window)
                    }
                    (
                        Job::Send {
                            method,
                            write_len,
                            budget,
                        },
                        Flow::Quic(q),
                    ) => {
                        let payload = match &method {
                            SendMethod::Copy(buf) => Arc::clone(buf),
                            SendMethod::ZeroCopy(src) => src.payload(),
                        };
                        q.send_loop(&st.quic_counters(), payload.as_slice(), write_len, budget)
                    }
                    (Job::Recv { .. }, Flow::Quic(q)) => q.recv_loop(&st.quic_counters()),
                    (Job::SendUdp(cfg), Flow::Udp(s)) => {
                        crate::udp::send_loop(s, &cfg, &st.counters())
                    }
                    (Job::RecvUdp { counters_64, gro }, Flow::Udp(s)) => {
                        crate::udp::recv_loop(s, counters_64, gro, clock, &st.counters()).map(
                            |end| {
                                udp_end = Some(end);
                            },
                        )
                    }
                    _ => Err(io::Error::other("stream job does not match its socket")),
                };
                st.finished_ns
                    .store(clock.now_ns().max(1), Ordering::Release);
                WorkerResult {
                    cpu: sys::thread_cpu_time().unwrap_or_default(),
                    error: outcome.err(),
                    udp_end,
                }
            })?;
        Ok(Self { state, handle })
    }

    pub(crate) fn join(self) -> WorkerResult {
        self.handle.join().unwrap_or_else(|_| WorkerResult {
            cpu: CpuTime::default(),
            error: Some(io::Error::other("stream thread panicked")),
            udp_end: None,
        })
    }
}

/// The longest a sender's write blocks before it looks at its stop flag again.
const STOP_CHECK: Duration = Duration::from_millis(100);

fn send_loop(
    st: &StreamState,
    sock: &Channel,
    method: &SendMethod,
    write_len: usize,
    budget: Option<u64>,
) -> io::Result<()> {
    let mut sent = 0u64;
    // TLS encrypts in user space: `-Z` on an encrypted stream writes the same payload by copy.
    let method = match method {
        SendMethod::ZeroCopy(src) if sock.is_encrypted() => &SendMethod::Copy(src.payload()),
        m => m,
    };
    let mut zc = match method {
        SendMethod::ZeroCopy(src) => Some(src.sender(sock.as_fd())?),
        SendMethod::Copy(_) => None,
    };
    // A write the path drains slowly returns (what it copied, or `WouldBlock`) at least this often,
    // so that a stop is seen within it, not when a crawling path has taken the whole write.
    sock.socket().set_write_timeout(Some(STOP_CHECK))?;
    while !st.stop.load(Ordering::Relaxed) {
        let len = match budget {
            Some(b) if b <= sent => break,
            Some(b) => (b - sent).min(write_len as u64) as usize,
            None => write_len,
        };
        let r = match (method, zc.as_mut()) {
            (SendMethod::Copy(buf), _) => sock.write(&buf.as_slice()[..len]),
            (SendMethod::ZeroCopy(_), Some(z)) => z.send(sock.as_fd(), len),
            (SendMethod::ZeroCopy(_), None) => unreachable!("zero-copy sender set up above"),
        };
        match r {
            Ok(n) => {
                sent += n as u64;
                st.bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // A stop that had to shut the socket down under a blocked write is not an error.
            Err(_) if st.stop.load(Ordering::Relaxed) => break,
            // The write timeout ([`STOP_CHECK`]) with nothing copied: look at the stop flag again.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
    // End-of-stream tells the receiver the exact end; ignore errors on an already-dead socket.
    let _ = sock.shutdown_write();
    Ok(())
}

/// How often a receiver with a fixed window checks that the kernel still advertises it
/// ([`crate::socket::hold_window`]).
const WINDOW_CHECK: Duration = Duration::from_millis(200);

fn recv_loop(
    st: &StreamState,
    sock: &Channel,
    read_len: usize,
    window: Option<u64>,
) -> io::Result<()> {
    let mut buf = AlignedBuf::zeroed(read_len);
    let buf = buf.as_mut_slice();
    let mut next_check = Instant::now();
    loop {
        match sock.read(buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                st.bytes.fetch_add(n as u64, Ordering::Relaxed);
                if let Some(w) = window
                    && Instant::now() >= next_check
                {
                    crate::socket::hold_window(sock.as_fd(), w).map_err(|e| e.into_io())?;
                    next_check = Instant::now() + WINDOW_CHECK;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) if st.stop.load(Ordering::Relaxed) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}
