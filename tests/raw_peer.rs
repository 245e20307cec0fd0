//! A transfer peer written by hand, message by message: the hostile client or server of the security
//! tests. It speaks the wire protocol of `docs/transfer.md` with the library's own message types, so a
//! test can send whatever an attacker holding the key (or only sitting on the path) could send: a
//! manifest naming files nobody asked for, setuid modes, reserved names, oversized plans, chunks out of
//! step. Every step has a deadline, so a test whose peer stops answering fails instead of hanging.
//!
//! It speaks transfer version 2: after the handshake it seals every control frame and chunk header
//! with the session keys and proves them on its data connections, as a key holder would; what a test
//! sends is therefore judged by its content, not refused for want of a tag.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use longhaul_proto::wire::{ConnKind, PREAMBLE_LEN, Preamble};
use longhaul_transfer::auth::{Role, TicketId};
use longhaul_transfer::manifest::{Entry, EntryKind, ManifestEntry};
use longhaul_transfer::msg::{CHUNK_HEADER_LEN, ChunkHeader, Direction, TRANSFER_VERSION};
use longhaul_transfer::session::{DATA_PROOF_LEN, verify_data_proof};
use longhaul_transfer::{
    ChunkOpener, ChunkSealer, FrameOpener, FrameSealer, Key, Message, RelPath, SessionKeys,
};

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
    /// Which side the test plays.
    role: Role,
    /// The session keys, once the handshake has derived them.
    keys: Option<SessionKeys>,
    sealer: Option<FrameSealer>,
    opener: Option<FrameOpener>,
    /// Each data connection's stream index and chunk sealer/opener, by the socket's descriptor.
    streams: Mutex<HashMap<RawFd, DataStream>>,
}

/// The per-stream state of one data connection (its chunk headers are numbered per stream).
struct DataStream {
    sealer: ChunkSealer,
    opener: ChunkOpener,
}

impl RawPeer {
    /// Plays the client: connects to the server on `port`, sends the transfer preamble and hello,
    /// checks the server's proof and proves the key. Panics if the server refuses.
    pub(crate) fn connect(port: u16, key: &Key, direction: Direction) -> Self {
        Self::try_connect(port, key, None, direction).expect("the server accepts the key")
    }

    /// As [`RawPeer::connect`], presenting a copy ticket whose key is `key` if given; a refusal
    /// (or a server that does not prove `key`) is `Err` with its text.
    pub(crate) fn try_connect(
        port: u16,
        key: &Key,
        ticket: Option<TicketId>,
        direction: Direction,
    ) -> Result<Self, String> {
        let mut sock = TcpStream::connect(("127.0.0.1", port)).expect("connect to the server");
        sock.set_nodelay(true).ok();
        sock.write_all(&Preamble::transfer().encode())
            .expect("send preamble");
        let mut peer = Self::new(sock, [0; 16], Role::Client);
        let client_nonce = nonce();
        peer.send(&Message::TransferHello {
            version: TRANSFER_VERSION,
            direction,
            client_nonce,
            ticket,
            // Checks each digest as it comes, as clients older than early digests did.
            early_digest: false,
        });
        let Message::AuthChallenge {
            server_nonce,
            server_proof,
            ..
        } = peer.recv()?
        else {
            panic!("expected auth_challenge")
        };
        key.verify(Role::Server, &server_nonce, &client_nonce, &server_proof)
            .map_err(|e| e.to_string())?;
        peer.send(&Message::AuthResponse {
            client_proof: key.proof(Role::Client, &server_nonce, &client_nonce),
        });
        peer.keyed(key.session(direction, &server_nonce, &client_nonce));
        let Message::AuthOk { cookie } = peer.recv()? else {
            panic!("expected auth_ok")
        };
        peer.cookie = cookie;
        Ok(peer)
    }

    /// Plays the server: accepts the next control connection on `listener` (a real client connects
    /// to it), answers its hello with a proof of `key`, checks the client's proof and issues
    /// `cookie`. Returns the peer and the direction the client asked for.
    pub(crate) fn accept(listener: &TcpListener, key: &Key, cookie: [u8; 16]) -> (Self, Direction) {
        Self::accept_claiming(listener, key, cookie, None).expect("the client's proof")
    }

    /// As [`RawPeer::accept`], naming `path_rate_bps` as the server's `--path-rate` in the
    /// challenge, whatever it is; `Err` (what went wrong) when the client answers it with
    /// anything but a valid proof, hanging up included.
    pub(crate) fn accept_claiming(
        listener: &TcpListener,
        key: &Key,
        cookie: [u8; 16],
        path_rate_bps: Option<u64>,
    ) -> Result<(Self, Direction), String> {
        let (mut sock, _) = accept_within(listener, STEP);
        let pre = read_preamble(&mut sock);
        assert_eq!(pre.kind, ConnKind::Transfer, "expected a transfer preamble");
        let mut peer = Self::new(sock, cookie, Role::Server);
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
            // This server takes data on data connections only: a client falls back to them.
            inline: false,
            // Nor does it name its cookie early: a client opens its data connections after
            // `auth_ok`, as it does with servers older than the early cookie.
            cookie: None,
            early_digest: false,
            path_rate_bps,
        });
        let client_proof = match peer.recv() {
            Ok(Message::AuthResponse { client_proof }) => client_proof,
            other => return Err(format!("expected auth_response, got {other:?}")),
        };
        key.verify(Role::Client, &server_nonce, &client_nonce, &client_proof)
            .map_err(|e| format!("the client's proof: {e:?}"))?;
        peer.keyed(key.session(direction, &server_nonce, &client_nonce));
        peer.send(&Message::AuthOk { cookie });
        Ok((peer, direction))
    }

    fn new(sock: TcpStream, cookie: [u8; 16], role: Role) -> Self {
        Self {
            sock,
            buf: Vec::new(),
            cookie,
            role,
            keys: None,
            sealer: None,
            opener: None,
            streams: Mutex::new(HashMap::new()),
        }
    }

    /// Switches to sealed frames (right after `auth_response`, both ways).
    fn keyed(&mut self, keys: SessionKeys) {
        let other = match self.role {
            Role::Client => Role::Server,
            Role::Server => Role::Client,
        };
        self.sealer = Some(FrameSealer::new(keys.sending(self.role).clone()));
        self.opener = Some(FrameOpener::new(keys.receiving(self.role).clone(), other));
        self.keys = Some(keys);
    }

    fn keys(&self) -> &SessionKeys {
        self.keys.as_ref().expect("the handshake is done")
    }

    /// Registers a data connection for stream `index`.
    fn add_stream(&self, s: &TcpStream, index: u32) {
        let keys = self.keys();
        self.streams.lock().unwrap().insert(
            s.as_raw_fd(),
            DataStream {
                sealer: ChunkSealer::new(keys.sending(self.role).clone(), index),
                opener: ChunkOpener::new(keys.receiving(self.role).clone(), index),
            },
        );
    }

    /// Sends one control message (sealed after the handshake).
    pub(crate) fn send(&mut self, m: &Message) {
        self.send_frame(&m.encode_frame());
    }

    /// Sends a frame built by hand (4-byte length and body, possibly malformed) on the control
    /// connection. After the handshake it is sealed with the session's next tag over exactly these
    /// bytes, as a peer holding the key would send it, so the receiver judges its content.
    pub(crate) fn send_frame(&mut self, frame: &[u8]) {
        let bytes = match &mut self.sealer {
            Some(s) => s.seal_frame(frame.to_vec()),
            None => frame.to_vec(),
        };
        self.sock.write_all(&bytes).expect("send control frame");
    }

    /// The next control message; the peer's `error` message (or a closed connection) is `Err` with
    /// its text, so a test can assert on why it was refused.
    pub(crate) fn recv(&mut self) -> Result<Message, String> {
        let deadline = Instant::now() + STEP;
        loop {
            let frame = match &mut self.opener {
                Some(o) => o.open(&self.buf),
                None => longhaul_proto::frame::decode(&self.buf, None),
            };
            match frame {
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

    /// Plays a `send` client up to its data: `send_to` (the root, `overwrite` as given), a plan of
    /// one stream with 1 MiB chunks, `entries` as one manifest batch; returns the server's answer (its
    /// last `have`, or the refusal as `Err`).
    pub(crate) fn offer(
        &mut self,
        overwrite: bool,
        entries: Vec<ManifestEntry>,
    ) -> Result<Message, String> {
        self.offer_streams(overwrite, entries, 1)
    }

    /// [`RawPeer::offer`] as a small send: a plan of 0 streams, whose chunks go on the control
    /// connection (`chunk_inline`).
    pub(crate) fn offer_small(
        &mut self,
        overwrite: bool,
        entries: Vec<ManifestEntry>,
    ) -> Result<Message, String> {
        self.offer_streams(overwrite, entries, 0)
    }

    fn offer_streams(
        &mut self,
        overwrite: bool,
        entries: Vec<ManifestEntry>,
        streams: u32,
    ) -> Result<Message, String> {
        self.send(&Message::SendTo {
            dest: None,
            overwrite,
            fsync: false,
            stripe: None,
        });
        self.send(&Message::Plan {
            streams,
            chunk_size: MIB,
            rtt_ns: 100_000,
            rate_bps: 1_000_000_000,
            pace_auto_bps: None,
            fast_start: false,
            transport: longhaul_proto::msg::Transport::Tcp,
            controller: None,
        });
        self.send(&Message::ManifestBatch {
            entries,
            last: true,
        });
        self.recv_until(|m| matches!(m, Message::Have { last: true, .. }))
    }

    /// After [`RawPeer::offer`]: sends each `(id, payload)` as one chunk on stream 0 of the server on
    /// `port`, its digest, and `done`; returns the server's answer to each file.
    pub(crate) fn deliver(&mut self, port: u16, files: &[(u32, &[u8])]) -> Vec<Message> {
        let mut data = self.open_data(port, 0);
        let mut results = Vec::new();
        for &(id, payload) in files {
            self.send_chunk(&mut data, id, 0, 0, payload);
            let verdict = self
                .recv_until(|m| matches!(m, Message::ChunkVerdict { .. }))
                .expect("a verdict");
            assert!(
                matches!(verdict, Message::ChunkVerdict { ok: true, .. }),
                "{verdict:?}"
            );
            self.send(&Message::FileDone {
                file: id,
                digest: one_chunk_digest(payload, MIB),
            });
            results.push(
                self.recv_until(|m| {
                    matches!(m, Message::FileVerified { .. } | Message::FileFailed { .. })
                })
                .expect("the file's result"),
            );
        }
        drop(data);
        self.done(files);
        results
    }

    /// Ends a transfer of `files` (id, content): sends `Done` with their count and bytes and waits
    /// for the other side's.
    pub(crate) fn done(&mut self, files: &[(u32, &[u8])]) {
        self.send(&Message::Done {
            files: files.len() as u64,
            bytes: files.iter().map(|f| f.1.len() as u64).sum(),
        });
        self.recv_until(|m| matches!(m, Message::Done { .. }))
            .expect("the other side's done");
    }

    /// The client's data connection `stream` to the server on `port`, presenting this transfer's
    /// cookie and the session's proof for it.
    pub(crate) fn open_data(&self, port: u16, stream: u32) -> TcpStream {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect a data stream");
        let mut hello = Preamble::data(self.cookie, stream).encode().to_vec();
        hello.extend_from_slice(
            &self
                .keys()
                .sending(Role::Client)
                .data_proof(&self.cookie, stream)
                .0,
        );
        s.write_all(&hello).expect("send data preamble");
        self.add_stream(&s, stream);
        s
    }

    /// As the server: the next data connection a real client opens to `listener`, with the stream
    /// index it presented. Panics unless it presents this transfer's cookie and the session's proof.
    pub(crate) fn accept_data(&self, listener: &TcpListener) -> (u32, TcpStream) {
        let (mut s, _) = accept_within(listener, STEP);
        let pre = read_preamble(&mut s);
        assert_eq!(pre.kind, ConnKind::Data, "expected a data preamble");
        assert_eq!(
            pre.cookie, self.cookie,
            "data connection with another cookie"
        );
        let mut proof = [0u8; DATA_PROOF_LEN];
        s.read_exact(&mut proof)
            .expect("read the data connection's proof");
        verify_data_proof(
            self.keys().receiving(Role::Server),
            &self.cookie,
            pre.stream,
            &proof,
        )
        .expect("the data connection proves the session key");
        self.add_stream(&s, pre.stream);
        (pre.stream, s)
    }

    /// The stream state of data connection `s` (opened or accepted by this peer).
    fn with_stream<T>(&self, s: &TcpStream, f: impl FnOnce(&mut DataStream) -> T) -> T {
        let mut streams = self.streams.lock().unwrap();
        let st = streams
            .get_mut(&s.as_raw_fd())
            .expect("a data connection opened or accepted by this peer");
        f(st)
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
        self.write_chunk(data, file, chunk, offset, payload)
            .expect("send chunk header and payload");
    }

    /// As [`RawPeer::send_chunk`], returning a failed write: towards a receiver that may refuse
    /// the chunk on its header and close the stream before the payload is through.
    pub(crate) fn write_chunk(
        &self,
        data: &mut TcpStream,
        file: u32,
        chunk: u64,
        offset: u64,
        payload: &[u8],
    ) -> std::io::Result<()> {
        let header = ChunkHeader {
            file,
            chunk,
            offset,
            len: u32::try_from(payload.len()).expect("chunk fits a u32"),
            hash: longhaul_transfer::digest::hash_chunk(payload),
        };
        let sealed = self.with_stream(data, |st| st.sealer.seal(&header));
        data.write_all(&sealed)?;
        data.write_all(payload)
    }

    /// Reads the next chunk (header and payload) from a data stream.
    pub(crate) fn recv_chunk(&self, data: &mut TcpStream) -> (ChunkHeader, Vec<u8>) {
        data.set_read_timeout(Some(STEP)).ok();
        let mut h = [0u8; CHUNK_HEADER_LEN];
        data.read_exact(&mut h).expect("read chunk header");
        let header = self
            .with_stream(data, |st| st.opener.open(&h))
            .expect("a valid, authentic chunk header");
        let mut payload = vec![0u8; header.len as usize];
        data.read_exact(&mut payload).expect("read chunk payload");
        (header, payload)
    }
}

/// The modification time of every entry a test's manifest offers.
pub(crate) const MTIME: i64 = 1_600_000_000_000_000_000;

/// `p` as a manifest path (a valid relative path).
pub(crate) fn path(p: &str) -> RelPath {
    RelPath::parse(p).expect("a valid test path")
}

/// A manifest's directory entry `id` at `p` with `mode`.
pub(crate) fn dir_entry(id: u32, p: &str, mode: u32) -> ManifestEntry {
    ManifestEntry {
        id,
        entry: Entry {
            path: path(p),
            kind: EntryKind::Dir,
            mode,
            mtime_ns: MTIME,
        },
    }
}

/// A manifest's file entry `id` at `p` with `mode` and `size` bytes.
pub(crate) fn file_entry(id: u32, p: &str, mode: u32, size: u64) -> ManifestEntry {
    ManifestEntry {
        id,
        entry: Entry {
            path: path(p),
            kind: EntryKind::File { size },
            mode,
            mtime_ns: MTIME,
        },
    }
}

/// The chunk size of [`RawPeer::offer`]'s plan.
pub(crate) const MIB: u64 = 1 << 20;

/// The file digest of a file sent as one chunk.
pub(crate) fn one_chunk_digest(payload: &[u8], chunk_size: u64) -> longhaul_transfer::Digest {
    let h = longhaul_transfer::digest::hash_chunk(payload);
    longhaul_transfer::digest::file_digest(payload.len() as u64, chunk_size, [&h])
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
