//! A transfer peer written by hand, message by message: the hostile client or server of the security
//! tests. It speaks the wire protocol of `docs/transfer.md` with the library's own message types, so a
//! test can send whatever an attacker holding the key (or only sitting on the path) could send: a
//! manifest naming files nobody asked for, setuid modes, reserved names, oversized plans, chunks out of
//! step. Every step has a deadline, so a test whose peer stops answering fails instead of hanging.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use longhaul_proto::wire::{ConnKind, PREAMBLE_LEN, Preamble};
use longhaul_transfer::auth::Role;
use longhaul_transfer::msg::{CHUNK_HEADER_LEN, ChunkHeader, Direction, TRANSFER_VERSION};
use longhaul_transfer::{Key, Message};

/// How long any one step may take before the test fails.
pub(crate) const STEP: Duration = Duration::from_secs(20);

/// The key in a key file written by `longhaul keygen`.
pub(crate) fn key_of(path: &std::path::Path) -> Key {
    let text = std::fs::read_to_string(path).expect("read key file");
    Key::parse(&text).expect("parse key file")
}

/// A fresh nonce for the hand-written handshake (unique per call; tests need no secrecy from it).
fn nonce() -> [u8; 32] {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64;
    let mut out = [0u8; 32];
    out[..8].copy_from_slice(&t.to_le_bytes());
    out[8..16].copy_from_slice(&N.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    out[16..20].copy_from_slice(&std::process::id().to_le_bytes());
    out
}

/// One authenticated transfer conversation, played by the test.
pub(crate) struct RawPeer {
    sock: TcpStream,
    buf: Vec<u8>,
    /// The transfer's cookie (the server issued it in `auth_ok`).
    pub(crate) cookie: [u8; 16],
}

impl RawPeer {
    /// Plays the client: connects to the server on `port`, sends the transfer preamble and hello,
    /// checks the server's proof and proves the key. Panics if the server refuses.
    pub(crate) fn connect(port: u16, key: &Key, direction: Direction) -> Self {
        let mut sock = TcpStream::connect(("127.0.0.1", port)).expect("connect to the server");
        sock.set_nodelay(true).ok();
        sock.write_all(&Preamble::transfer().encode())
            .expect("send preamble");
        let mut peer = Self {
            sock,
            buf: Vec::new(),
            cookie: [0; 16],
        };
        let client_nonce = nonce();
        peer.send(&Message::TransferHello {
            version: TRANSFER_VERSION,
            direction,
            client_nonce,
        });
        let Message::AuthChallenge {
            server_nonce,
            server_proof,
        } = peer.recv().expect("the server's challenge")
        else {
            panic!("expected auth_challenge")
        };
        key.verify(Role::Server, &server_nonce, &client_nonce, &server_proof)
            .expect("the server proves our key");
        peer.send(&Message::AuthResponse {
            client_proof: key.proof(Role::Client, &server_nonce, &client_nonce),
        });
        let Message::AuthOk { cookie } = peer.recv().expect("auth_ok") else {
            panic!("expected auth_ok")
        };
        peer.cookie = cookie;
        peer
    }

    /// Plays the server: accepts the next control connection on `listener` (a real client connects
    /// to it), answers its hello with a proof of `key`, checks the client's proof and issues
    /// `cookie`. Returns the peer and the direction the client asked for.
    pub(crate) fn accept(listener: &TcpListener, key: &Key, cookie: [u8; 16]) -> (Self, Direction) {
        let (mut sock, _) = accept_within(listener, STEP);
        let pre = read_preamble(&mut sock);
        assert_eq!(pre.kind, ConnKind::Transfer, "expected a transfer preamble");
        let mut peer = Self {
            sock,
            buf: Vec::new(),
            cookie,
        };
        let Message::TransferHello {
            direction,
            client_nonce,
            ..
        } = peer.recv().expect("transfer_hello")
        else {
            panic!("expected transfer_hello")
        };
        let server_nonce = nonce();
        peer.send(&Message::AuthChallenge {
            server_nonce,
            server_proof: key.proof(Role::Server, &server_nonce, &client_nonce),
        });
        let Message::AuthResponse { client_proof } = peer.recv().expect("auth_response") else {
            panic!("expected auth_response")
        };
        key.verify(Role::Client, &server_nonce, &client_nonce, &client_proof)
            .expect("the client proves the key");
        peer.send(&Message::AuthOk { cookie });
        (peer, direction)
    }

    /// Sends one control message.
    pub(crate) fn send(&mut self, m: &Message) {
        self.send_frame(&m.encode_frame());
    }

    /// Sends raw bytes on the control connection as they are (a forged or malformed frame).
    pub(crate) fn send_frame(&mut self, frame: &[u8]) {
        self.sock.write_all(frame).expect("send control frame");
    }

    /// The next control message; the peer's `error` message (or a closed connection) is `Err` with
    /// its text, so a test can assert on why it was refused.
    pub(crate) fn recv(&mut self) -> Result<Message, String> {
        let deadline = Instant::now() + STEP;
        loop {
            match longhaul_transfer::msg::decode_frame(&self.buf) {
                Ok(Some((m, used))) => {
                    self.buf.drain(..used);
                    return match m {
                        Message::Error { message } => Err(message),
                        m => Ok(m),
                    };
                }
                Ok(None) => {}
                Err(e) => return Err(format!("undecodable frame from the peer: {e}")),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no control message within {STEP:?}");
            self.sock.set_read_timeout(Some(left)).ok();
            let mut tmp = [0u8; 16 * 1024];
            match self.sock.read(&mut tmp) {
                Ok(0) => return Err("connection closed".into()),
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    }

    /// Receives messages until `want` matches one (returned) or the peer sends an error (`Err`).
    pub(crate) fn recv_until(
        &mut self,
        want: impl Fn(&Message) -> bool,
    ) -> Result<Message, String> {
        loop {
            let m = self.recv()?;
            if want(&m) {
                return Ok(m);
            }
        }
    }

    /// The client's data connection `stream` to the server on `port`, presenting this transfer's
    /// cookie.
    pub(crate) fn open_data(&self, port: u16, stream: u32) -> TcpStream {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect a data stream");
        s.write_all(&Preamble::data(self.cookie, stream).encode())
            .expect("send data preamble");
        s
    }

    /// As the server: the next data connection a real client opens to `listener`, with the stream
    /// index it presented. Panics unless it presents this transfer's cookie.
    pub(crate) fn accept_data(&self, listener: &TcpListener) -> (u32, TcpStream) {
        let (mut s, _) = accept_within(listener, STEP);
        let pre = read_preamble(&mut s);
        assert_eq!(pre.kind, ConnKind::Data, "expected a data preamble");
        assert_eq!(
            pre.cookie, self.cookie,
            "data connection with another cookie"
        );
        (pre.stream, s)
    }

    /// Sends chunk `chunk` of file `file` (its bytes `payload`, at `offset`) on a data stream.
    pub(crate) fn send_chunk(
        &self,
        data: &mut TcpStream,
        file: u32,
        chunk: u64,
        offset: u64,
        payload: &[u8],
    ) {
        let header = ChunkHeader {
            file,
            chunk,
            offset,
            len: u32::try_from(payload.len()).expect("chunk fits a u32"),
            hash: longhaul_transfer::digest::hash_chunk(payload),
        };
        data.write_all(&header.encode()).expect("send chunk header");
        data.write_all(payload).expect("send chunk payload");
    }

    /// Reads the next chunk (header and payload) from a data stream.
    pub(crate) fn recv_chunk(&self, data: &mut TcpStream) -> (ChunkHeader, Vec<u8>) {
        data.set_read_timeout(Some(STEP)).ok();
        let mut h = [0u8; CHUNK_HEADER_LEN];
        data.read_exact(&mut h).expect("read chunk header");
        let header = ChunkHeader::decode(&h).expect("a valid chunk header");
        let mut payload = vec![0u8; header.len as usize];
        data.read_exact(&mut payload).expect("read chunk payload");
        (header, payload)
    }
}

/// A listener on an ephemeral loopback port, for a hostile server.
pub(crate) fn listener() -> (TcpListener, u16) {
    let l = TcpListener::bind(("127.0.0.1", 0)).expect("bind a loopback port");
    let port = l.local_addr().expect("bound").port();
    (l, port)
}

fn accept_within(listener: &TcpListener, within: Duration) -> (TcpStream, std::net::SocketAddr) {
    listener
        .set_nonblocking(true)
        .expect("nonblocking listener");
    let deadline = Instant::now() + within;
    loop {
        match listener.accept() {
            Ok((s, a)) => {
                s.set_nonblocking(false).expect("blocking socket");
                s.set_nodelay(true).ok();
                return (s, a);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "no connection within {within:?}");
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

fn read_preamble(sock: &mut TcpStream) -> Preamble {
    sock.set_read_timeout(Some(STEP)).ok();
    let mut b = [0u8; PREAMBLE_LEN];
    sock.read_exact(&mut b).expect("read preamble");
    Preamble::decode(&b).expect("a valid preamble")
}
