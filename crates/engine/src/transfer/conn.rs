//! A transfer's control connection: `longhaul-transfer` messages in length-prefixed frames, reads with
//! deadlines, writes through a shared handle so that stream threads (chunk verdicts) and the control
//! thread (file results) never interleave frames. Also the client's connect and the mutual
//! challenge–response that opens every transfer.
//!
//! Once the handshake has derived the session keys, [`Ctl::seal`] switches both halves to sealed frames
//! (`longhaul_transfer::session`): the writer numbers and tags each frame under the same lock that
//! writes it, so frames from several threads get consecutive numbers in the order they hit the wire.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use longhaul_proto::wire::MAX_FRAME_LEN;
use longhaul_transfer::auth::{Key, Role, SessionKeys};
use longhaul_transfer::msg::{Direction, TRANSFER_VERSION, decode_frame};
use longhaul_transfer::session::{FRAME_TAG_LEN, FrameOpener, FrameSealer};
use longhaul_transfer::{Message, WireError};

use crate::EngineError;
use crate::address::{self, Family};
use crate::control::is_timeout;

/// The socket's writing half and, once the session is keyed, its sealer: one lock for both.
struct WriteHalf {
    sock: TcpStream,
    sealer: Option<FrameSealer>,
}

/// The writing half, shareable between threads.
#[derive(Clone)]
pub(crate) struct Writer {
    half: Arc<Mutex<WriteHalf>>,
    peer: Arc<str>,
}

impl Writer {
    /// Sends one message as one frame (sealed once the session is keyed). The frame is numbered and
    /// written under one lock, so the sequence numbers follow the order on the wire.
    pub(crate) fn send(&self, msg: &Message) -> Result<(), EngineError> {
        let mut h = self.half.lock().unwrap_or_else(|e| e.into_inner());
        let frame = match &mut h.sealer {
            Some(s) => s.seal(msg),
            None => msg.encode_frame(),
        };
        h.sock
            .write_all(&frame)
            .map_err(|e| EngineError::io(format!("send to {}", self.peer), e))
    }
}

/// The reading half (one owner) and a writer.
pub(crate) struct Ctl {
    read: TcpStream,
    buf: Vec<u8>,
    opener: Option<FrameOpener>,
    writer: Writer,
}

impl Ctl {
    pub(crate) fn new(sock: TcpStream) -> Result<Self, EngineError> {
        let _ = sock.set_nodelay(true);
        let peer: Arc<str> = sock
            .peer_addr()
            .map_or_else(|_| "?".to_string(), |a| a.to_string())
            .into();
        let write = sock
            .try_clone()
            .map_err(|e| EngineError::io("clone the control socket", e))?;
        Ok(Self {
            read: sock,
            buf: Vec::new(),
            opener: None,
            writer: Writer {
                half: Arc::new(Mutex::new(WriteHalf {
                    sock: write,
                    sealer: None,
                })),
                peer,
            },
        })
    }

    /// From now on, frames `me` sends are sealed and frames it receives must be (each direction
    /// numbered from 0). Called where the protocol switches: right after `auth_response` (the client
    /// once it has sent it, the server once it has received it).
    fn seal(&mut self, keys: &SessionKeys, me: Role) {
        let peer = match me {
            Role::Client => Role::Server,
            Role::Server => Role::Client,
        };
        self.opener = Some(FrameOpener::new(keys.receiving(me).clone(), peer));
        self.writer
            .half
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .sealer = Some(FrameSealer::new(keys.sending(me).clone()));
    }

    pub(crate) fn writer(&self) -> Writer {
        self.writer.clone()
    }

    pub(crate) fn socket(&self) -> &TcpStream {
        &self.read
    }

    pub(crate) fn peer(&self) -> &str {
        &self.writer.peer
    }

    pub(crate) fn send(&self, msg: &Message) -> Result<(), EngineError> {
        self.writer.send(msg)
    }

    /// Tells the peer why the transfer ends, then closes gracefully
    /// ([`crate::control::linger_close`]), so the peer reads the reason rather than a reset.
    pub(crate) fn refuse(&self, e: &EngineError) {
        let _ = self.send(&Message::Error {
            message: e.to_string(),
        });
        crate::control::linger_close(&self.read);
    }

    /// The next message before `deadline`, `Ok(None)` when the deadline passes first. A peer's
    /// `error` message becomes [`EngineError::Peer`].
    pub(crate) fn recv_until(&mut self, deadline: Instant) -> Result<Option<Message>, EngineError> {
        loop {
            let frame = match &mut self.opener {
                Some(o) => o.open(&self.buf)?,
                None => decode_frame(&self.buf)?,
            };
            if let Some((m, used)) = frame {
                self.buf.drain(..used);
                if let Message::Error { message } = m {
                    return Err(EngineError::Peer(message));
                }
                return Ok(Some(m));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let wait = (deadline - now).max(Duration::from_millis(1));
            self.read.set_read_timeout(Some(wait)).ok();
            // Never buffer more than one frame: read at most up to the end of the current one.
            let want = if self.buf.len() < 4 {
                4 - self.buf.len()
            } else {
                let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
                let tag = if self.opener.is_some() {
                    FRAME_TAG_LEN
                } else {
                    0
                };
                (4 + (len as usize).min(MAX_FRAME_LEN) + tag).saturating_sub(self.buf.len())
            };
            let mut tmp = [0u8; 16 * 1024];
            let want = want.clamp(1, tmp.len());
            match self.read.read(&mut tmp[..want]) {
                Ok(0) => {
                    return Err(if self.buf.is_empty() {
                        EngineError::Closed(self.peer().to_string())
                    } else {
                        EngineError::Truncated(self.peer().to_string())
                    });
                }
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
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

    /// The next message within `timeout`; a timeout is an error naming `what`.
    pub(crate) fn recv(&mut self, timeout: Duration, what: &str) -> Result<Message, EngineError> {
        self.recv_by(Instant::now() + timeout, what)
    }

    /// The next message before `deadline`; passing it is an error naming `what`.
    pub(crate) fn recv_by(
        &mut self,
        deadline: Instant,
        what: &str,
    ) -> Result<Message, EngineError> {
        self.recv_until(deadline)?
            .ok_or_else(|| EngineError::Timeout(format!("{what} from {}", self.peer())))
    }
}

/// Where a client connects.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
    /// Address family.
    pub family: Family,
    /// Local address to bind.
    pub bind: Option<IpAddr>,
    /// Connect timeout and the deadline of each handshake step.
    pub timeout: Duration,
}

impl Endpoint {
    fn addrs(&self) -> Result<Vec<SocketAddr>, EngineError> {
        address::resolve(&self.host, self.port, self.family, self.bind)
    }

    /// A socket for `server`, bound to `bind` if asked.
    pub(crate) fn socket(&self, server: SocketAddr) -> Result<socket2::Socket, EngineError> {
        let s = socket2::Socket::new(
            socket2::Domain::for_address(server),
            socket2::Type::STREAM,
            None,
        )
        .map_err(|e| EngineError::io("create socket", e))?;
        if let Some(ip) = self.bind {
            s.bind(&SocketAddr::new(ip, 0).into())
                .map_err(|e| EngineError::io(format!("bind {ip}"), e))?;
        }
        Ok(s)
    }

    /// Connects `s` to `server` within the timeout.
    pub(crate) fn connect(
        &self,
        s: socket2::Socket,
        server: SocketAddr,
    ) -> Result<TcpStream, EngineError> {
        s.connect_timeout(&server.into(), self.timeout)
            .map_err(|source| EngineError::Connect {
                target: server.to_string(),
                source,
                hint: " (is `longhaul server --root DIR` running there, on that port, and reachable?)",
            })?;
        Ok(s.into())
    }

    /// The first address that accepts a connection.
    pub(crate) fn connect_any(&self) -> Result<(TcpStream, SocketAddr), EngineError> {
        let mut last = None;
        for a in self.addrs()? {
            match self.connect(self.socket(a)?, a) {
                Ok(s) => return Ok((s, a)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("addrs returns at least one address"))
    }
}

/// A fresh 32-byte nonce.
fn nonce() -> Result<[u8; 32], EngineError> {
    let mut n = [0u8; 32];
    crate::random::fill(&mut n, "a handshake nonce")?;
    Ok(n)
}

/// The client's half of the handshake: hello, check the server's proof, prove, get the cookie (in
/// the first sealed frame). Returns the cookie and the session keys.
pub(crate) fn client_handshake(
    ctl: &mut Ctl,
    key: &Key,
    direction: Direction,
    timeout: Duration,
) -> Result<([u8; 16], SessionKeys), EngineError> {
    let client_nonce = nonce()?;
    ctl.send(&Message::TransferHello {
        version: TRANSFER_VERSION,
        direction,
        client_nonce,
    })?;
    let (server_nonce, server_proof) = match ctl.recv(timeout, "the server's challenge")? {
        Message::AuthChallenge {
            server_nonce,
            server_proof,
        } => (server_nonce, server_proof),
        m => return Err(unexpected(&m, "the server's challenge")),
    };
    key.verify(Role::Server, &server_nonce, &client_nonce, &server_proof)
        .map_err(|_| {
            EngineError::Transfer(
                "the server does not hold our key (wrong --key on one side?); nothing was sent"
                    .into(),
            )
        })?;
    ctl.send(&Message::AuthResponse {
        client_proof: key.proof(Role::Client, &server_nonce, &client_nonce),
    })?;
    let keys = key.session(direction, &server_nonce, &client_nonce);
    ctl.seal(&keys, Role::Client);
    match ctl.recv(timeout, "the server's authentication result")? {
        Message::AuthOk { cookie } => Ok((cookie, keys)),
        m => Err(unexpected(&m, "the authentication result")),
    }
}

/// The server's half: answers the hello with its proof and checks the client's before anything
/// else happens; everything after the client's proof is sealed. Returns the direction asked for
/// and the session keys.
pub(crate) fn server_handshake(
    ctl: &mut Ctl,
    key: Option<&Key>,
    cookie: [u8; 16],
    timeout: Duration,
) -> Result<(Direction, SessionKeys), EngineError> {
    // One deadline for the whole handshake, so a peer trickling its messages cannot stretch it.
    let deadline = Instant::now() + timeout;
    let (version, direction, client_nonce) = match ctl.recv_by(deadline, "transfer hello")? {
        Message::TransferHello {
            version,
            direction,
            client_nonce,
        } => (version, direction, client_nonce),
        m => return Err(unexpected(&m, "transfer hello")),
    };
    if version != TRANSFER_VERSION {
        return Err(EngineError::Version {
            ours: TRANSFER_VERSION,
            theirs: version,
        });
    }
    let Some(key) = key else {
        return Err(EngineError::Transfer(
            "this server does not serve files (start it with --root DIR --key FILE)".into(),
        ));
    };
    let server_nonce = nonce()?;
    ctl.send(&Message::AuthChallenge {
        server_nonce,
        server_proof: key.proof(Role::Server, &server_nonce, &client_nonce),
    })?;
    let proof = match ctl.recv_by(deadline, "the client's proof")? {
        Message::AuthResponse { client_proof } => client_proof,
        m => return Err(unexpected(&m, "the client's proof")),
    };
    // Every frame after `auth_response` is sealed, both ways: our answer to the proof already is.
    let keys = key.session(direction, &server_nonce, &client_nonce);
    ctl.seal(&keys, Role::Server);
    if key
        .verify(Role::Client, &server_nonce, &client_nonce, &proof)
        .is_err()
    {
        return Err(EngineError::Transfer(
            "authentication failed: the client does not hold this server's key".into(),
        ));
    }
    ctl.send(&Message::AuthOk { cookie })?;
    Ok((direction, keys))
}

/// A message that does not belong at this point of the conversation.
pub(crate) fn unexpected(m: &Message, waiting_for: &str) -> EngineError {
    let kind = serde_json::to_value(m)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string))
        .unwrap_or_else(|| "?".into());
    EngineError::Wire(WireError::Invalid(format!(
        "unexpected {kind} while waiting for {waiting_for}"
    )))
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    /// Stream threads and the control thread share one writer: every frame they send concurrently
    /// arrives sealed with consecutive numbers, so the peer opens all of them in wire order.
    #[test]
    fn frames_sent_from_many_threads_are_numbered_in_wire_order() {
        let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let keys = Key::from_bytes([3; 32]).session(Direction::Send, &[1; 32], &[2; 32]);
        let (mut client, mut server) = (Ctl::new(a).unwrap(), Ctl::new(b).unwrap());
        client.seal(&keys, Role::Client);
        server.seal(&keys, Role::Server);
        let (threads, each) = (8u32, 200u64);
        let senders: Vec<_> = (0..threads)
            .map(|t| {
                let w = client.writer();
                std::thread::spawn(move || {
                    for chunk in 0..each {
                        w.send(&Message::ChunkVerdict {
                            file: t,
                            chunk,
                            ok: true,
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        let mut next = vec![0u64; threads as usize];
        for _ in 0..u64::from(threads) * each {
            match server.recv(Duration::from_secs(20), "a verdict").unwrap() {
                Message::ChunkVerdict { file, chunk, .. } => {
                    // Each thread's own frames keep their order.
                    assert_eq!(chunk, next[file as usize]);
                    next[file as usize] += 1;
                }
                m => panic!("{m:?}"),
            }
        }
        for s in senders {
            s.join().unwrap();
        }
        // And the other direction is sealed with the other key.
        server.send(&Message::Done { files: 0, bytes: 0 }).unwrap();
        assert_eq!(
            client.recv(Duration::from_secs(20), "done").unwrap(),
            Message::Done { files: 0, bytes: 0 }
        );
    }
}
