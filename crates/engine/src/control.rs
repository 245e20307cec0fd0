//! A framed control connection over a blocking TCP socket, for any message type of the frame codec
//! (`longhaul_proto::frame`): the test's (`Control`) and the transfer's (`transfer::conn`).
//!
//! Reads go through one [`FrameDecoder`], which never buffers more than one frame, so a peer that sends
//! garbage, a giant length prefix or half a frame costs one bounded buffer and one clear error, never a
//! hang: every read has a deadline. Writes go through a [`Writer`], which any number of threads may hold
//! (a transfer's stream threads send verdicts while its control thread sends results): each frame is
//! encoded, sealed and written under one lock, so frames never interleave and, once [`Conn::seal`]
//! switched sealing on, their sequence numbers follow the order on the wire.

use std::io::{self, Read};
use std::marker::PhantomData;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use longhaul_proto::Message;
use longhaul_proto::frame::{FrameDecoder, FrameEncoder, FrameOpen, FrameSeal, Framed};
use longhaul_proto::wire::{PREAMBLE_LEN, Preamble};

use crate::EngineError;
use crate::channel::Channel;

/// One side of a test's control connection.
pub(crate) type Control = Conn<Message>;

/// The writing half of a connection, shareable between threads.
pub(crate) struct Writer<M> {
    sock: Arc<Channel>,
    enc: Arc<Mutex<FrameEncoder>>,
    peer: Arc<str>,
    msg: PhantomData<fn(&M)>,
}

impl<M> Clone for Writer<M> {
    fn clone(&self) -> Self {
        Self {
            sock: Arc::clone(&self.sock),
            enc: Arc::clone(&self.enc),
            peer: Arc::clone(&self.peer),
            msg: PhantomData,
        }
    }
}

impl<M: Framed> Writer<M> {
    /// Ends this side's stream (with TLS, close_notify first), between frames.
    pub(crate) fn close(&self) {
        let _enc = self.enc.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self.sock.shutdown_write();
    }

    /// Sends one message as one frame (sealed once the connection is). The frame is encoded, sealed
    /// and written under one lock, so frames from several threads neither interleave nor get their
    /// sequence numbers out of wire order.
    pub(crate) fn send(&self, msg: &M) -> Result<(), EngineError> {
        let mut enc = self.enc.lock().unwrap_or_else(|e| e.into_inner());
        let frame = enc.encode(msg);
        self.sock
            .write_all(&frame)
            .map_err(|e| EngineError::io(format!("send {} to {}", msg.kind(), self.peer), e))
    }
}

/// One side of a control connection: the reading half (one owner) and a [`Writer`].
pub(crate) struct Conn<M> {
    sock: Arc<Channel>,
    dec: FrameDecoder<M>,
    writer: Writer<M>,
}

impl<M: Framed> Conn<M>
where
    EngineError: From<M::Error>,
{
    pub(crate) fn new(sock: Channel) -> Self {
        // Control messages are small and latency-sensitive (RTT pings, verdicts).
        let _ = sock.socket().set_nodelay(true);
        let peer: Arc<str> = sock
            .peer_addr()
            .map_or_else(|_| "?".to_string(), |a| a.to_string())
            .into();
        let sock = Arc::new(sock);
        Self {
            sock: Arc::clone(&sock),
            dec: FrameDecoder::new(),
            writer: Writer {
                sock,
                enc: Arc::new(Mutex::new(FrameEncoder::new())),
                peer,
                msg: PhantomData,
            },
        }
    }

    pub(crate) fn socket(&self) -> &TcpStream {
        self.sock.socket()
    }

    /// The channel (plain or TLS) the frames cross.
    pub(crate) fn channel(&self) -> &Channel {
        &self.sock
    }

    /// The peer's address, for messages.
    pub(crate) fn peer(&self) -> &str {
        &self.writer.peer
    }

    /// A writer that other threads may hold.
    pub(crate) fn writer(&self) -> Writer<M> {
        self.writer.clone()
    }

    pub(crate) fn send(&self, msg: &M) -> Result<(), EngineError> {
        self.writer.send(msg)
    }

    /// Accepts frames of up to `limit` bytes from now on (a test, once admitted:
    /// [`longhaul_proto::TestParams::frame_limit`]).
    pub(crate) fn set_frame_limit(&mut self, limit: usize) {
        self.dec.set_limit(limit);
    }

    /// From now on frames this side sends are sealed by `sealer`, and frames it receives must be sealed
    /// and pass `opener`. Called between frames, where the protocol switches.
    pub(crate) fn seal(&mut self, sealer: Box<dyn FrameSeal>, opener: Box<dyn FrameOpen>) {
        self.dec.open_with(opener);
        self.writer
            .enc
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .seal_with(sealer);
    }

    /// Waits for the next message until `deadline`; `Ok(None)` when the deadline passes first. A peer's
    /// error message becomes [`EngineError::Peer`].
    pub(crate) fn recv_until(&mut self, deadline: Instant) -> Result<Option<M>, EngineError> {
        loop {
            if let Some(m) = self.dec.next_message()? {
                if let Some(why) = m.peer_error() {
                    return Err(EngineError::Peer(why.to_string()));
                }
                return Ok(Some(m));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            // A zero timeout means "block forever" to the kernel: keep at least 1 ms.
            let wait = (deadline - now).max(Duration::from_millis(1));
            self.sock.socket().set_read_timeout(Some(wait)).ok();
            let mut buf = [0u8; 16 * 1024];
            // Never read past the current frame: the rest stays in the socket.
            let want = self.dec.wanted().min(buf.len());
            match self.sock.read(&mut buf[..want]) {
                Ok(0) => {
                    return Err(if self.dec.has_partial() {
                        EngineError::Truncated(self.peer().to_string())
                    } else {
                        EngineError::Closed(self.peer().to_string())
                    });
                }
                Ok(n) => self.dec.push(&buf[..n])?,
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(EngineError::io(
                        format!("read control from {}", self.peer()),
                        e,
                    ));
                }
            }
        }
    }

    /// Waits for the next message for at most `timeout`; a timeout is an error naming `what`.
    pub(crate) fn recv(&mut self, timeout: Duration, what: &str) -> Result<M, EngineError> {
        self.recv_by(Instant::now() + timeout, what)
    }

    /// Waits for the next message until `deadline`; passing it is an error naming `what`.
    pub(crate) fn recv_by(&mut self, deadline: Instant, what: &str) -> Result<M, EngineError> {
        self.recv_until(deadline)?
            .ok_or_else(|| EngineError::Timeout(format!("{what} from {}", self.peer())))
    }
}

/// How long [`linger_close`] waits for the peer to read an error and close.
const LINGER: Duration = Duration::from_secs(2);

/// Closes a connection gracefully after a fatal error was sent on it: our side is shut down, and
/// what the peer still sends is read and dropped until it closes too or [`LINGER`] passes. Closing a
/// socket with unread input makes the kernel answer with a reset, which can destroy the error
/// message in the peer's receive queue before it is read: the peer would report "connection reset"
/// instead of the reason.
pub(crate) fn linger_close(channel: &Channel) {
    // With TLS, close_notify first: the peer reads a clean end after the error, not a truncation.
    let _ = channel.shutdown_write();
    let mut sock = channel.socket();
    let deadline = Instant::now() + LINGER;
    let mut sink = [0u8; 16 * 1024];
    while let Some(left) = deadline
        .checked_duration_since(Instant::now())
        .filter(|l| !l.is_zero())
    {
        sock.set_read_timeout(Some(left)).ok();
        match sock.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

/// Reads the 32-byte preamble, all of it by `deadline`: a whole-step deadline, not one per read, so
/// a peer trickling a byte every few seconds is dropped when the step's time is up (issue 11).
pub(crate) fn read_preamble(sock: &Channel, deadline: Instant) -> Result<Preamble, EngineError> {
    let mut b = [0u8; PREAMBLE_LEN];
    let mut got = 0;
    while got < PREAMBLE_LEN {
        let now = Instant::now();
        if now >= deadline {
            return Err(EngineError::Timeout(format!(
                "connection preamble ({got} of {PREAMBLE_LEN} bytes by the handshake deadline)"
            )));
        }
        // A zero timeout means "block forever" to the kernel: keep at least 1 ms.
        sock.socket()
            .set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))))
            .ok();
        match sock.read(&mut b[got..]) {
            Ok(0) => {
                return Err(EngineError::io(
                    "read connection preamble",
                    io::ErrorKind::UnexpectedEof.into(),
                ));
            }
            Ok(n) => got += n,
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(EngineError::io("read connection preamble", e)),
        }
    }
    sock.socket().set_read_timeout(None).ok();
    Ok(Preamble::decode(&b)?)
}

pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}
