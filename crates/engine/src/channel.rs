//! A connection's byte stream: the TCP socket itself, or TLS 1.3 over it (`--encrypt`, set up by
//! `crate::tls`).
//!
//! Every conversation reads and writes through a [`Channel`] and sets socket options on
//! [`Channel::socket`], so the protocols do not know whether their bytes are encrypted. A channel is
//! used through `&self` from several threads at once, as a plain socket is: one reader (a control
//! connection's thread, a stream's worker) and any number of writers (a transfer's stream threads
//! send verdicts on the control connection while its thread sends results).
//!
//! With TLS, the reader never blocks while holding the TLS state: it reads ciphertext from the
//! socket into its own buffer (under the socket's read timeout, so deadlines work as on a plain
//! socket), then takes the lock only to hand those bytes to rustls and take plaintext out. Writers
//! encrypt and write under the lock, so records from several threads never interleave. A stopped
//! sender blocked in a write is woken, as on a plain socket, by shutting the socket down under it.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::{Mutex, MutexGuard};

/// Ciphertext read from the socket at a time.
const RAW_READ: usize = 64 * 1024;
/// The exporter label of [`Channel::binding`].
const BINDING_LABEL: &[u8] = b"EXPORTER-longhaul-channel-binding";
/// Plaintext a writer may hand to rustls before its records are written out.
const PLAINTEXT_BUFFER: usize = 1 << 20;

/// A connection's byte stream, plain or TLS.
pub(crate) struct Channel {
    sock: TcpStream,
    tls: Option<Tls>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("sock", &self.sock)
            .field("encrypted", &self.tls.is_some())
            .finish()
    }
}

struct Tls {
    conn: Mutex<rustls::Connection>,
    /// The reader's ciphertext not yet taken by rustls (only the reader locks it).
    raw: Mutex<RawBuf>,
    /// The socket again, for the close_notify of a dropped channel.
    closer: TcpStream,
}

#[derive(Default)]
struct RawBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Channel {
    /// A plain channel: the socket's bytes as they are.
    pub(crate) fn plain(sock: TcpStream) -> Self {
        Self { sock, tls: None }
    }

    /// A TLS channel over `sock` whose handshake is done (`crate::tls`).
    pub(crate) fn tls(sock: TcpStream, mut conn: rustls::Connection) -> io::Result<Self> {
        conn.set_buffer_limit(Some(PLAINTEXT_BUFFER));
        let closer = sock.try_clone()?;
        Ok(Self {
            sock,
            tls: Some(Tls {
                conn: Mutex::new(conn),
                raw: Mutex::new(RawBuf::default()),
                closer,
            }),
        })
    }

    /// The socket of a plain channel back (`None` for TLS).
    pub(crate) fn into_plain(self) -> Option<TcpStream> {
        match self.tls {
            None => Some(self.sock),
            Some(_) => None,
        }
    }

    /// Whether the connection is over IPv6 (its headers are 20 bytes longer).
    pub(crate) fn is_ipv6(&self) -> bool {
        self.socket().local_addr().is_ok_and(|a| a.is_ipv6())
    }

    /// The TCP socket under the channel, for socket options, `TCP_INFO`, timeouts and shutdown.
    pub(crate) fn socket(&self) -> &TcpStream {
        &self.sock
    }

    /// Whether the bytes cross the network encrypted.
    pub(crate) fn is_encrypted(&self) -> bool {
        self.tls.is_some()
    }

    /// This TLS session's channel binding (`None` on a plain channel): 32 bytes exported from the
    /// session's secrets (RFC 8446 §7.5, the `tls-exporter` binding of RFC 9266). Both ends of one
    /// TLS session compute the same bytes; the two halves of a relay in the middle do not. Folded
    /// into a handshake's key proofs, it makes them valid only on this TLS session.
    pub(crate) fn binding(&self) -> Option<[u8; 32]> {
        let tls = self.tls.as_ref()?;
        let conn = lock(&tls.conn);
        conn.export_keying_material([0u8; 32], BINDING_LABEL, None)
            .ok()
    }

    /// The TLS version and cipher suite, for reports (`None` on a plain channel).
    pub(crate) fn encryption(&self) -> Option<String> {
        let tls = self.tls.as_ref()?;
        let conn = lock(&tls.conn);
        let suite = conn.negotiated_cipher_suite()?;
        Some(format!("TLS 1.3 {:?}", suite.suite()))
    }

    /// The certificate the peer presented (its end-entity certificate), on a TLS channel.
    pub(crate) fn peer_certificate(&self) -> Option<rustls::pki_types::CertificateDer<'static>> {
        let tls = self.tls.as_ref()?;
        let conn = lock(&tls.conn);
        conn.peer_certificates()?.first().cloned()
    }

    /// The peer's address (for messages).
    pub(crate) fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.sock.peer_addr()
    }

    /// Reads plaintext, as `Read::read` on a socket: `Ok(0)` at the end of the stream, the socket's
    /// read timeout as an error of kind `WouldBlock`/`TimedOut`. With TLS, a connection closed without
    /// TLS's close_notify is an error (a truncation on the path), never a clean end.
    pub(crate) fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(tls) = &self.tls else {
            return (&self.sock).read(buf);
        };
        let mut raw = lock(&tls.raw);
        loop {
            {
                let mut conn = lock(&tls.conn);
                while raw.start < raw.end {
                    let mut pending = &raw.buf[raw.start..raw.end];
                    let taken = conn.read_tls(&mut pending);
                    match taken {
                        Ok(n) => raw.start += n,
                        // rustls holds as much plaintext as it will: read it out first.
                        Err(_) if !conn.wants_read() => break,
                        Err(e) => return Err(e),
                    }
                    conn.process_new_packets().map_err(|e| tls_io(e, "read"))?;
                    if !conn.wants_read() {
                        break;
                    }
                }
                match conn.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                // Answers rustls owes the peer (alerts, key updates).
                while conn.wants_write() {
                    conn.write_tls(&mut &self.sock)?;
                }
            }
            if raw.start == raw.end {
                raw.start = 0;
                raw.end = 0;
            }
            if raw.buf.len() < RAW_READ {
                raw.buf.resize(RAW_READ, 0);
            }
            let RawBuf { buf: b, end, .. } = &mut *raw;
            if *end == b.len() {
                // A partial record fills the buffer: give it room (records are at most ~16 KiB).
                b.resize(b.len() * 2, 0);
            }
            let n = (&self.sock).read(&mut b[*end..])?;
            if n == 0 {
                // End of the TCP stream: rustls says whether TLS closed cleanly.
                let mut conn = lock(&tls.conn);
                conn.read_tls(&mut io::empty())?;
                conn.process_new_packets().map_err(|e| tls_io(e, "read"))?;
                return match conn.reader().read(buf) {
                    Ok(n) => Ok(n),
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::UnexpectedEof
                        ) =>
                    {
                        Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the connection closed without TLS's close_notify (cut on the path?)",
                        ))
                    }
                    Err(e) => Err(e),
                };
            }
            *end += n;
        }
    }

    /// Writes some of `buf`, as `Write::write` on a socket.
    pub(crate) fn write(&self, buf: &[u8]) -> io::Result<usize> {
        let Some(tls) = &self.tls else {
            return (&self.sock).write(buf);
        };
        let mut conn = lock(&tls.conn);
        let n = conn.writer().write(buf)?;
        match flush(&mut conn, &self.sock) {
            // The socket's write timeout (a sender looking at its stop flag) after rustls took the
            // bytes: their records wait in rustls and go out with the next write.
            Err(e) if n > 0 && is_timeout(&e) => Ok(n),
            Err(e) => Err(e),
            Ok(()) => Ok(n),
        }
    }

    /// Writes all of `buf`; with TLS, every record is on the socket when it returns.
    pub(crate) fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        let Some(tls) = &self.tls else {
            return (&self.sock).write_all(buf);
        };
        let mut conn = lock(&tls.conn);
        while !buf.is_empty() {
            let n = conn.writer().write(buf)?;
            flush(&mut conn, &self.sock)?;
            buf = &buf[n..];
        }
        Ok(())
    }

    /// Ends this side's stream: with TLS, close_notify first (so the peer reads a clean end), then
    /// the socket's write half.
    pub(crate) fn shutdown_write(&self) -> io::Result<()> {
        if let Some(tls) = &self.tls {
            let mut conn = lock(&tls.conn);
            conn.send_close_notify();
            if let Err(e) = flush(&mut conn, &self.sock)
                && is_timeout(&e)
            {
                // Records still wait in rustls (a sender stopped on a path that crawls): a FIN
                // now would cut one in half, which the peer reads as a truncation. Its receiver
                // is cut after the tail grace instead.
                return Ok(());
            }
        }
        self.sock.shutdown(Shutdown::Write)
    }

    /// Shuts the socket down under whatever blocks on it (stopping a stuck sender or reader).
    pub(crate) fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.sock.shutdown(how)
    }
}

/// A TLS channel dropped by its owner says so first (close_notify), so the peer reads a clean end
/// rather than a truncation; within a short write timeout, so a dead path never holds the drop.
impl Drop for Tls {
    fn drop(&mut self) {
        let conn = self.conn.get_mut().unwrap_or_else(|e| e.into_inner());
        if !conn.is_handshaking() {
            let _ = self.closer.set_write_timeout(Some(CLOSE_TIMEOUT));
            conn.send_close_notify();
            let _ = flush(conn, &self.closer);
        }
    }
}

/// How long a dropped TLS channel tries to send its close_notify.
const CLOSE_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(200);

impl AsFd for Channel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl Read for &Channel {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Channel::read(self, buf)
    }
}

impl Write for &Channel {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Channel::write(self, buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        Channel::write_all(self, buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes every record rustls holds to the socket.
fn flush(conn: &mut rustls::Connection, mut sock: &TcpStream) -> io::Result<()> {
    while conn.wants_write() {
        conn.write_tls(&mut sock)?;
    }
    Ok(())
}

/// A socket timeout (`SO_SNDTIMEO`/`SO_RCVTIMEO` expired).
fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A TLS failure as an I/O error naming it.
pub(crate) fn tls_io(e: rustls::Error, what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS {what}: {e}"))
}
