//! A transfer's data connection, whatever carries it: a TCP connection (plain or TLS, a
//! [`Channel`]) or, with `--transport udp`, the stream of a QUIC flow ([`QuicStream`]). Both
//! carry the same bytes (sealed chunk headers and chunks), so the sending and receiving workers
//! do not know which they use.

use std::io;
use std::net::TcpStream;
use std::time::Duration;

use std::os::fd::AsFd;

use crate::EngineError;
use crate::channel::Channel;
use crate::quic::{FlowHandle, QuicStream};

/// One data connection.
#[derive(Debug)]
pub(crate) enum DataConn {
    Tcp(Box<Channel>),
    Quic(Box<QuicStream>),
}

/// What stops a worker blocked on its data connection from another thread.
pub(crate) enum Waker {
    Tcp(TcpStream),
    Quic(FlowHandle),
}

impl Waker {
    /// Makes a blocked read or write on the connection fail at once.
    pub(crate) fn wake(&self) {
        match self {
            Waker::Tcp(s) => {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
            Waker::Quic(h) => h.close(),
        }
    }
}

impl DataConn {
    /// The TCP connection, for socket options and `TCP_INFO` (`None` over QUIC).
    pub(crate) fn tcp(&self) -> Option<&Channel> {
        match self {
            DataConn::Tcp(c) => Some(c),
            DataConn::Quic(_) => None,
        }
    }

    /// The QUIC flow's handle, for its losses (`None` over TCP).
    pub(crate) fn flow(&self) -> Option<FlowHandle> {
        match self {
            DataConn::Tcp(_) => None,
            DataConn::Quic(q) => Some(q.handle()),
        }
    }

    /// A [`Waker`] for this connection (`None` if the socket cannot be shared).
    pub(crate) fn waker(&self) -> Option<Waker> {
        match self {
            DataConn::Tcp(c) => c.socket().try_clone().ok().map(Waker::Tcp),
            DataConn::Quic(q) => Some(Waker::Quic(q.handle())),
        }
    }

    pub(crate) fn write_all(&self, buf: &[u8]) -> io::Result<()> {
        match self {
            DataConn::Tcp(c) => c.write_all(buf),
            DataConn::Quic(q) => q.write_all(buf),
        }
    }

    /// Reads as `Read::read` on a socket does: `Ok(0)` at the end, an error of kind
    /// `WouldBlock`/`TimedOut` after the read tick with nothing read.
    pub(crate) fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            DataConn::Tcp(c) => c.read(buf),
            DataConn::Quic(q) => q.read(buf),
        }
    }

    /// How long a read may block before it returns with a timeout, so the reader sees a stop.
    pub(crate) fn set_read_tick(&self, tick: Duration) {
        match self {
            DataConn::Tcp(c) => {
                let _ = c.socket().set_read_timeout(Some(tick));
            }
            DataConn::Quic(q) => q.set_read_tick(Some(tick)),
        }
    }

    /// Caps what this side sends at `bytes_per_sec`: TCP's `SO_MAX_PACING_RATE`, or the QUIC
    /// stream's writes held to the rate.
    pub(crate) fn set_pacing(&self, bytes_per_sec: u64) -> Result<(), EngineError> {
        match self {
            DataConn::Tcp(c) => crate::socket::apply_pacing(c.as_fd(), bytes_per_sec),
            DataConn::Quic(q) => {
                q.set_pacing(bytes_per_sec);
                Ok(())
            }
        }
    }

    /// The sending side is done with the connection: over QUIC, the stream is finished and held
    /// until the receiver has every byte (closing a QUIC connection drops what is still in
    /// flight; closing a TCP socket does not).
    pub(crate) fn finish_sending(&self) {
        if let DataConn::Quic(q) = self {
            q.finish();
        }
    }
}
