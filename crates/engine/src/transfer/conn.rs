//! A transfer's control connection: `longhaul-transfer` messages on the engine's framed connection
//! ([`crate::control::Conn`]: reads with deadlines, a writer shared by the stream threads (chunk
//! verdicts) and the control thread (file results)). Also the client's connect and the mutual
//! challenge–response that opens every transfer.
//!
//! Once the handshake has derived the session keys, [`seal`] switches both halves to sealed frames
//! (`longhaul_transfer::session`): the writer numbers and tags each frame under the same lock that
//! writes it, so frames from several threads get consecutive numbers in the order they hit the wire.

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use longhaul_proto::frame::Framed;
use longhaul_transfer::auth::{Key, Nonce, Role, SessionKeys, TicketId, bind_nonce};
use longhaul_transfer::msg::{DataCookie, Direction, TRANSFER_VERSION};
use longhaul_transfer::session::{FrameOpener, FrameSealer};
use longhaul_transfer::{Message, WireError};

use crate::EngineError;
use crate::address::{self, Family};
use crate::channel::Channel;
use crate::control::{self, Conn};
use crate::tls::{ClientTlsConfig, Connector, Pinned};

/// A transfer's control connection.
pub(crate) type Ctl = Conn<Message>;
/// Its writing half, shareable between threads.
pub(crate) type Writer = control::Writer<Message>;

/// From now on, frames `me` sends are sealed and frames it receives must be (each direction
/// numbered from 0). Called where the protocol switches: right after `auth_response` (the client
/// once it has sent it, the server once it has received it). Transfers and jobs alike.
pub(crate) fn seal<M: Framed>(ctl: &mut Conn<M>, keys: &SessionKeys, me: Role)
where
    EngineError: From<M::Error>,
{
    let peer = match me {
        Role::Client => Role::Server,
        Role::Server => Role::Client,
    };
    ctl.seal(
        Box::new(FrameSealer::new(keys.sending(me).clone())),
        Box::new(FrameOpener::new(keys.receiving(me).clone(), peer)),
    );
}

impl Conn<Message> {
    /// Tells the peer why the transfer ends, then closes gracefully
    /// ([`crate::control::linger_close`]), so the peer reads the reason rather than a reset.
    pub(crate) fn refuse(&self, e: &EngineError) {
        let _ = self.send(&Message::Error {
            message: e.for_peer(),
        });
        control::linger_close(self.channel());
    }

    /// `failed` (a data stream's error) or, better, the reason the peer gives on this channel
    /// within `grace`: a peer that stops a transfer closes its data connections before (or as)
    /// it says why, so a writer here may meet a broken pipe before the reason is read. Messages
    /// still in flight before the reason are skipped; a channel that closes or stays silent
    /// leaves `failed`.
    pub(crate) fn reason_for(&mut self, failed: EngineError, grace: Duration) -> EngineError {
        let deadline = Instant::now() + grace;
        loop {
            match self.recv_until(deadline) {
                Ok(Some(_)) => {}
                Err(peer @ EngineError::Peer(_)) => return peer,
                Ok(None) | Err(_) => return failed,
            }
        }
    }
}

/// How long a side whose data stream failed waits for its peer's reason on the control channel.
pub(crate) const REASON_GRACE: Duration = Duration::from_secs(5);

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
    /// `--encrypt`: every connection in TLS 1.3, with these certificate settings.
    pub encrypt: Option<ClientTlsConfig>,
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
    fn connect_any(&self) -> Result<(TcpStream, SocketAddr), EngineError> {
        let mut last = None;
        for a in self.addrs()? {
            match self.connect(self.socket(a)?, a) {
                Ok(s) => return Ok((s, a)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("addrs returns at least one address"))
    }

    /// Opens a session's first connection (to the first address that accepts; in TLS with
    /// `--encrypt`). Returns it, the address, and with TLS the connector of the session's further
    /// connections.
    pub(crate) fn open(&self) -> Result<(Channel, SocketAddr, Option<Pinned>), EngineError> {
        let (sock, server) = self.connect_any()?;
        Ok(match &self.encrypt {
            Some(tls) => {
                let (c, p) = Connector::new(tls)?.connect(sock, &self.host, self.timeout)?;
                (c, server, Some(p))
            }
            None => (Channel::plain(sock), server, None),
        })
    }

    /// One of the session's further connections, in TLS as its first one.
    pub(crate) fn wrap(
        &self,
        sock: TcpStream,
        pinned: Option<&Pinned>,
    ) -> Result<Channel, EngineError> {
        match pinned {
            Some(p) => p.connect(sock, self.timeout),
            None => Ok(Channel::plain(sock)),
        }
    }
}

/// Both handshake nonces bound to the TLS session of `ctl` (unchanged without TLS): the proofs and
/// the session keys use these, so they hold only on this TLS session
/// (`longhaul_transfer::auth::bind_nonce`).
pub(crate) fn bound<M: Framed>(ctl: &Conn<M>, server: &Nonce, client: &Nonce) -> (Nonce, Nonce)
where
    EngineError: From<M::Error>,
{
    let b = ctl.channel().binding();
    (
        bind_nonce(server, b.as_ref()),
        bind_nonce(client, b.as_ref()),
    )
}

/// What else a failed proof on an encrypted connection can mean.
pub(crate) fn relay_hint<M: Framed>(ctl: &Conn<M>) -> &'static str
where
    EngineError: From<M::Error>,
{
    if ctl.channel().is_encrypted() {
        " or someone in the middle relays this TLS session"
    } else {
        ""
    }
}

/// A fresh 32-byte nonce.
fn nonce() -> Result<[u8; 32], EngineError> {
    let mut n = [0u8; 32];
    crate::random::fill(&mut n, "a handshake nonce")?;
    Ok(n)
}

/// The client's half of the handshake: hello, check the server's proof, prove. Returns the
/// session keys at once, without waiting for the server's answer to the proof: once the server
/// has proven it holds the key, the client may send its request right behind its own proof, sealed
/// under the session's keys (the server reads nothing after the proof until it has checked it), and
/// [`recv_auth_ok`] takes the answer, with the cookie, a round trip later. Also returns what the
/// server's challenge offered.
pub(crate) fn client_handshake(
    ctl: &mut Ctl,
    key: &Key,
    ticket: Option<TicketId>,
    direction: Direction,
    timeout: Duration,
) -> Result<(SessionKeys, Offer), EngineError> {
    let client_nonce = nonce()?;
    ctl.send(&Message::TransferHello {
        version: TRANSFER_VERSION,
        direction,
        client_nonce,
        ticket,
        early_digest: true,
    })?;
    let (server_nonce, server_proof, offer) = match ctl.recv(timeout, "the server's challenge")? {
        Message::AuthChallenge {
            server_nonce,
            server_proof,
            inline,
            cookie,
            early_digest,
            path_rate_bps,
        } => (
            server_nonce,
            server_proof,
            Offer {
                inline,
                cookie: cookie.map(|c| c.0),
                early_digest,
                path_rate_bps,
            },
        ),
        m => return Err(unexpected(&m, "the server's challenge")),
    };
    let (server_nonce, client_nonce) = bound(ctl, &server_nonce, &client_nonce);
    key.verify(Role::Server, &server_nonce, &client_nonce, &server_proof)
        .map_err(|_| {
            EngineError::Transfer(format!(
                "the server does not hold our key (wrong --key on one side?{}); nothing was sent",
                relay_hint(ctl)
            ))
        })?;
    ctl.send(&Message::AuthResponse {
        client_proof: key.proof(Role::Client, &server_nonce, &client_nonce),
    })?;
    let keys = key.session(direction, &server_nonce, &client_nonce);
    seal(ctl, &keys, Role::Client);
    Ok((keys, offer))
}

/// What a server's challenge offers a client, beyond the proof.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Offer {
    /// It takes a small transfer's files on the control connection.
    pub(crate) inline: bool,
    /// The cookie its data connections present, named before the client is authenticated: a
    /// sending client may open them in the flight of its proof.
    pub(crate) cookie: Option<[u8; 16]>,
    /// As the receiver of a `send`, it takes a file's digest before the file's chunks are all
    /// verified.
    pub(crate) early_digest: bool,
    /// The path's payload rate as the server's operator set it (`server --path-rate`), bit/s.
    pub(crate) path_rate_bps: Option<u64>,
}

/// The server's answer to the client's proof (the first sealed frame): the transfer's cookie.
pub(crate) fn recv_auth_ok(ctl: &mut Ctl, timeout: Duration) -> Result<[u8; 16], EngineError> {
    match ctl.recv(timeout, "the server's authentication result")? {
        Message::AuthOk { cookie } => Ok(cookie),
        m => Err(unexpected(&m, "the authentication result")),
    }
}

/// The server's half: answers the hello with its proof and checks the client's before anything
/// else happens; everything after the client's proof is sealed. `key_for` gives the key the
/// client must hold: the server's own, or a copy ticket's when the hello names one (or refuses).
/// The challenge also names the path's rate when the operator set one (`path_rate_bps`).
/// Returns the direction asked for, the session keys and whether the client, as a `get`'s
/// receiver, takes a file's digest before the file's chunks are all verified.
pub(crate) fn server_handshake(
    ctl: &mut Ctl,
    key_for: &mut dyn FnMut(Option<TicketId>) -> Result<Key, EngineError>,
    cookie: [u8; 16],
    path_rate_bps: Option<u64>,
    timeout: Duration,
) -> Result<(Direction, SessionKeys, bool), EngineError> {
    // One deadline for the whole handshake, so a peer trickling its messages cannot stretch it.
    let deadline = Instant::now() + timeout;
    let (version, direction, client_nonce, ticket, early_digest) =
        match ctl.recv_by(deadline, "transfer hello")? {
            Message::TransferHello {
                version,
                direction,
                client_nonce,
                ticket,
                early_digest,
            } => (version, direction, client_nonce, ticket, early_digest),
            m => return Err(unexpected(&m, "transfer hello")),
        };
    if version != TRANSFER_VERSION {
        return Err(EngineError::Version {
            ours: TRANSFER_VERSION,
            theirs: version,
        });
    }
    let key = &key_for(ticket)?;
    let sent_nonce = nonce()?;
    let (server_nonce, client_nonce) = bound(ctl, &sent_nonce, &client_nonce);
    ctl.send(&Message::AuthChallenge {
        server_nonce: sent_nonce,
        server_proof: key.proof(Role::Server, &server_nonce, &client_nonce),
        inline: true,
        cookie: Some(DataCookie(cookie)),
        early_digest: true,
        path_rate_bps,
    })?;
    let proof = match ctl.recv_by(deadline, "the client's proof")? {
        Message::AuthResponse { client_proof } => client_proof,
        m => return Err(unexpected(&m, "the client's proof")),
    };
    // Every frame after `auth_response` is sealed, both ways: our answer to the proof already is.
    let keys = key.session(direction, &server_nonce, &client_nonce);
    seal(ctl, &keys, Role::Server);
    if key
        .verify(Role::Client, &server_nonce, &client_nonce, &proof)
        .is_err()
    {
        return Err(EngineError::Transfer(format!(
            "authentication failed: the client does not hold this server's key{}",
            relay_hint(ctl)
        )));
    }
    ctl.send(&Message::AuthOk { cookie })?;
    Ok((direction, keys, early_digest))
}

/// A message that does not belong at this point of the conversation.
pub(crate) fn unexpected(m: &Message, waiting_for: &str) -> EngineError {
    EngineError::Wire(WireError::Invalid(format!(
        "unexpected {} while waiting for {waiting_for}",
        m.kind()
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
        let (mut client, mut server) = (Ctl::new(Channel::plain(a)), Ctl::new(Channel::plain(b)));
        seal(&mut client, &keys, Role::Client);
        seal(&mut server, &keys, Role::Server);
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
