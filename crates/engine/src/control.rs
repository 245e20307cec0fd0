//! The control connection: framed messages over a blocking TCP socket, with deadlines.
//!
//! Reads go through [`longhaul_proto::wire::FrameDecoder`], which never buffers more than one frame, so a
//! peer that sends garbage, a giant length prefix or half a frame costs the server one bounded buffer and
//! one clear error, never a hang: every read has a deadline.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use longhaul_proto::wire::{FrameDecoder, PREAMBLE_LEN, Preamble, encode_frame};
use longhaul_proto::{Message, ProtoError};

use crate::EngineError;

/// One side of a control connection.
pub(crate) struct Control {
    sock: TcpStream,
    dec: FrameDecoder,
    peer: String,
}

impl Control {
    pub(crate) fn new(sock: TcpStream) -> Self {
        let peer = sock
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into());
        // Control messages are small and latency-sensitive (RTT pings).
        let _ = sock.set_nodelay(true);
        Self {
            sock,
            dec: FrameDecoder::new(),
            peer,
        }
    }

    pub(crate) fn socket(&self) -> &TcpStream {
        &self.sock
    }

    pub(crate) fn send(&mut self, msg: &Message) -> Result<(), EngineError> {
        self.sock
            .write_all(&encode_frame(msg))
            .map_err(|e| EngineError::io(format!("send {} to {}", msg.kind(), self.peer), e))
    }

    /// Waits for the next message until `deadline`; `Ok(None)` when the deadline passes first.
    pub(crate) fn recv_until(&mut self, deadline: Instant) -> Result<Option<Message>, EngineError> {
        loop {
            if let Some(m) = self.dec.next_message()? {
                if let Message::Error { message } = m {
                    return Err(EngineError::Peer(message));
                }
                return Ok(Some(m));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            // A zero timeout means "block forever" to the kernel: keep at least 1 ms.
            let wait = (deadline - now).max(Duration::from_millis(1));
            self.sock.set_read_timeout(Some(wait)).ok();
            let mut buf = [0u8; 4096];
            let want = self.dec.wanted().min(buf.len());
            match self.sock.read(&mut buf[..want]) {
                Ok(0) => {
                    return Err(if self.dec.has_partial() {
                        EngineError::Truncated(self.peer.clone())
                    } else {
                        EngineError::Closed(self.peer.clone())
                    });
                }
                Ok(n) => self.dec.push(&buf[..n])?,
                Err(e) if is_timeout(&e) => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(EngineError::io(
                        format!("read control from {}", self.peer),
                        e,
                    ));
                }
            }
        }
    }

    /// Waits for the next message for at most `timeout`; a timeout is an error naming `what`.
    pub(crate) fn recv(
        &mut self,
        timeout: Duration,
        what: &'static str,
    ) -> Result<Message, EngineError> {
        self.recv_until(Instant::now() + timeout)?
            .ok_or_else(|| EngineError::Timeout(format!("{what} from {}", self.peer)))
    }
}

/// How long [`linger_close`] waits for the peer to read an error and close.
const LINGER: Duration = Duration::from_secs(2);

/// Closes a connection gracefully after a fatal error was sent on it: our side is shut down, and
/// what the peer still sends is read and dropped until it closes too or [`LINGER`] passes. Closing a
/// socket with unread input makes the kernel answer with a reset, which can destroy the error
/// message in the peer's receive queue before it is read: the peer would report "connection reset"
/// instead of the reason.
pub(crate) fn linger_close(mut sock: &TcpStream) {
    let _ = sock.shutdown(std::net::Shutdown::Write);
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
pub(crate) fn read_preamble(
    sock: &mut TcpStream,
    deadline: Instant,
) -> Result<Preamble, EngineError> {
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
        sock.set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))))
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
    sock.set_read_timeout(None).ok();
    Ok(Preamble::decode(&b)?)
}

pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// The error for a message that makes no sense in the current phase.
pub(crate) fn unexpected(m: &Message, phase: &'static str) -> EngineError {
    EngineError::Protocol(ProtoError::Unexpected {
        got: m.kind(),
        phase,
    })
}
