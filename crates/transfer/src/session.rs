//! The authenticated session that follows the handshake: sealed control frames, data-connection
//! proofs and sealed chunk headers, all keyed by the [`SessionKeys`](crate::auth::SessionKeys) the handshake derived.
//!
//! **Control frames.** From the server's first frame after `auth_challenge` (normally `auth_ok`) and the
//! client's first frame after `auth_response`, every frame is *sealed*:
//!
//! ```text
//! length u32 BE ‖ JSON (length bytes, ≤ 64 KiB) ‖ tag (32 bytes)
//! tag = MacKey(direction).frame_tag(seq, length ‖ JSON)
//! ```
//!
//! `seq` is implicit: each direction counts its sealed frames from 0, and the receiver expects exactly
//! the next number. A frame that is altered, injected, replayed, reordered, dropped (the next one then
//! carries an unexpected number) or reflected back to its sender (the other direction's key) fails, and
//! the connection ends with [`WireError::FrameAuth`]. The tag is checked before the JSON is parsed.
//! [`FrameSealer`] and [`FrameOpener`] are the authenticator hooks of the one frame codec
//! (`longhaul_proto::frame`, [`FrameSeal`] and [`FrameOpen`]): the codec places and checks the tags, the
//! keys and sequence numbers live here.
//!
//! **Data connections** present, right after their preamble, `data_proof(cookie, stream)` under the
//! client → server key ([`DATA_PROOF_LEN`] bytes): a cookie alone no longer admits a connection.
//!
//! **Chunk headers** grow a tag ([`CHUNK_HEADER_LEN`] = 64 bytes of fields + 32): the data sender's key
//! over the stream index, a per-stream sequence number (each stream counts its chunks from 0) and the
//! fields, which carry the payload's BLAKE3. A chunk moved to another stream, replayed, reordered or
//! with a rewritten header (say, another payload with its plain BLAKE3) fails with
//! [`WireError::ChunkAuth`]; a payload that does not match an authentic header's hash is a corrupt chunk
//! and is re-sent, as before. Cost: one keyed BLAKE3 of 77 bytes per chunk.
//!
//! None of this encrypts: the bytes stay readable on the path.

use longhaul_proto::frame::{self, FrameOpen, FrameSeal};

use crate::auth::{MacKey, Role};
use crate::digest::Digest;
use crate::msg::{CHUNK_FIELDS_LEN, CHUNK_HEADER_LEN, ChunkHeader, Message, WireError};

/// Bytes of the tag after each sealed control frame.
pub const FRAME_TAG_LEN: usize = 32;
/// Bytes of the proof a data connection sends after its preamble.
pub const DATA_PROOF_LEN: usize = 32;

/// Seals the control frames one side sends. The sequence number lives here, so whoever shares a
/// sealer (the I/O layer's writer, behind its lock) must seal and write each frame under one lock.
#[derive(Debug, Clone)]
pub struct FrameSealer {
    key: MacKey,
    next: u64,
}

impl FrameSealer {
    /// A sealer for the direction of `key`, starting at sequence number 0.
    pub fn new(key: MacKey) -> Self {
        Self { key, next: 0 }
    }

    /// The sealed frame of `m`.
    pub fn seal(&mut self, m: &Message) -> Vec<u8> {
        self.seal_frame(m.encode_frame())
    }

    /// Seals a frame already encoded (length prefix and body), whatever its content: the hand-written
    /// test peer uses it to send well-authenticated nonsense.
    pub fn seal_frame(&mut self, mut frame: Vec<u8>) -> Vec<u8> {
        self.append_tag(&mut frame);
        frame
    }
}

impl FrameSeal for FrameSealer {
    fn append_tag(&mut self, frame: &mut Vec<u8>) {
        let tag = self.key.frame_tag(self.next, frame);
        // 2^64 frames cannot be sent (584 years at 10^9 per second); wrapping is never reached.
        self.next = self.next.wrapping_add(1);
        frame.extend_from_slice(&tag.0);
    }
}

/// Opens the sealed control frames one side receives, in order.
#[derive(Debug, Clone)]
pub struct FrameOpener {
    key: MacKey,
    next: u64,
    from: Role,
}

impl FrameOpener {
    /// An opener for frames sent by `from` under `key`, expecting sequence number 0 first.
    pub fn new(key: MacKey, from: Role) -> Self {
        Self { key, next: 0, from }
    }

    /// Opens the first sealed frame of `buf` through the frame codec
    /// ([`longhaul_proto::frame::decode`]): `Ok(None)` if more bytes are needed, else the message and
    /// the bytes it used. The length is bounded as soon as its prefix is in (never more than
    /// `4 + 64 KiB + 32` bytes buffered); the tag is checked before the JSON is parsed; the sequence
    /// number advances only on an authentic frame.
    pub fn open(&mut self, buf: &[u8]) -> Result<Option<(Message, usize)>, WireError> {
        frame::decode(buf, Some(self))
    }
}

impl FrameOpen for FrameOpener {
    fn tag_len(&self) -> usize {
        FRAME_TAG_LEN
    }

    fn check(&mut self, frame: &[u8], tag: &[u8]) -> Result<(), String> {
        let mut got = [0u8; FRAME_TAG_LEN];
        got.copy_from_slice(tag);
        if self.key.frame_tag(self.next, frame) != Digest(got) {
            return Err(format!(
                "frame {} from the {}: its tag does not match (altered, injected, replayed, reordered \
or dropped on the path, or not from this session)",
                self.next,
                match self.from {
                    Role::Client => "client",
                    Role::Server => "server",
                }
            ));
        }
        self.next = self.next.wrapping_add(1);
        Ok(())
    }
}

/// Seals the chunk headers of one data stream (the data sender's key).
#[derive(Debug, Clone)]
pub struct ChunkSealer {
    key: MacKey,
    stream: u32,
    next: u64,
}

impl ChunkSealer {
    /// A sealer for data stream `stream`, starting at sequence number 0.
    pub fn new(key: MacKey, stream: u32) -> Self {
        Self {
            key,
            stream,
            next: 0,
        }
    }

    /// The next header on this stream, fields and tag.
    pub fn seal(&mut self, h: &ChunkHeader) -> [u8; CHUNK_HEADER_LEN] {
        let fields = h.encode();
        let tag = self.key.chunk_tag(self.stream, self.next, &fields);
        self.next = self.next.wrapping_add(1);
        let mut out = [0u8; CHUNK_HEADER_LEN];
        out[..CHUNK_FIELDS_LEN].copy_from_slice(&fields);
        out[CHUNK_FIELDS_LEN..].copy_from_slice(&tag.0);
        out
    }
}

/// Opens the chunk headers of one data stream, in order.
#[derive(Debug, Clone)]
pub struct ChunkOpener {
    key: MacKey,
    stream: u32,
    next: u64,
}

impl ChunkOpener {
    /// An opener for data stream `stream`, expecting sequence number 0 first.
    pub fn new(key: MacKey, stream: u32) -> Self {
        Self {
            key,
            stream,
            next: 0,
        }
    }

    /// Checks the tag, then the fields ([`ChunkHeader::decode`]). The payload length is safe to read
    /// once this returns.
    pub fn open(&mut self, b: &[u8; CHUNK_HEADER_LEN]) -> Result<ChunkHeader, WireError> {
        let (fields, tag) = b.split_at(CHUNK_FIELDS_LEN);
        let fields: &[u8; CHUNK_FIELDS_LEN] = fields.try_into().expect("split at the fields");
        let mut got = [0u8; 32];
        got.copy_from_slice(tag);
        if self.key.chunk_tag(self.stream, self.next, fields) != Digest(got) {
            return Err(WireError::ChunkAuth {
                stream: self.stream,
                seq: self.next,
            });
        }
        self.next = self.next.wrapping_add(1);
        ChunkHeader::decode(fields)
    }
}

/// Checks a data connection's proof (constant-time comparison).
pub fn verify_data_proof(
    key: &MacKey,
    cookie: &[u8; 16],
    stream: u32,
    proof: &[u8; DATA_PROOF_LEN],
) -> Result<(), WireError> {
    if key.data_proof(cookie, stream) == Digest(*proof) {
        Ok(())
    } else {
        Err(WireError::DataProof { stream })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{Key, SessionKeys};
    use crate::digest::hash_chunk;
    use crate::msg::MAX_FRAME_LEN;
    use crate::msg::tests::samples;

    fn keys(seed: u8) -> SessionKeys {
        Key::from_bytes([seed; 32]).session(crate::msg::Direction::Send, &[1; 32], &[2; 32])
    }

    fn pair() -> (FrameSealer, FrameOpener) {
        let k = keys(7);
        (
            FrameSealer::new(k.sending(Role::Client).clone()),
            FrameOpener::new(k.receiving(Role::Server).clone(), Role::Client),
        )
    }

    #[test]
    fn sealed_frames_round_trip_in_order() {
        let (mut s, mut o) = pair();
        let mut wire = Vec::new();
        for m in samples() {
            let f = s.seal(&m);
            assert_eq!(f.len(), m.encode_frame().len() + FRAME_TAG_LEN);
            // Any proper prefix is "need more", never an error or a message, and does not advance.
            for cut in 0..f.len() {
                assert_eq!(o.clone().open(&f[..cut]), Ok(None), "{m:?} cut at {cut}");
            }
            wire.extend_from_slice(&f);
        }
        let mut rest = &wire[..];
        for m in samples() {
            let (back, used) = o.open(rest).unwrap().unwrap();
            assert_eq!(back, m);
            rest = &rest[used..];
        }
        assert!(rest.is_empty());
    }

    fn is_auth_failure(r: Result<Option<(Message, usize)>, WireError>) -> bool {
        matches!(r, Err(WireError::FrameAuth(_)))
    }

    #[test]
    fn altered_replayed_reordered_dropped_and_reflected_frames_fail() {
        let msgs = samples();
        let (mut s, o) = pair();
        let frames: Vec<Vec<u8>> = msgs.iter().map(|m| s.seal(m)).collect();

        // Every single-bit change anywhere (length, JSON, tag) is refused or, in the length, at least
        // never yields a message.
        for i in 0..frames[4].len() {
            let mut f = frames[4].clone();
            f[i] ^= 0x10;
            let mut o = o.clone();
            for earlier in &frames[..4] {
                o.open(earlier).unwrap().unwrap();
            }
            let r = o.open(&f);
            assert!(!matches!(r, Ok(Some(_))), "bit flip at {i} accepted");
        }
        // A JSON rewrite with a recomputed length prefix (the relay attack).
        let json = String::from_utf8(msgs[6].encode_frame()[4..].to_vec()).unwrap();
        let evil = json.replace("incoming", "elsewhere/deeper");
        let mut f = (evil.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(evil.as_bytes());
        f.extend_from_slice(&frames[6][frames[6].len() - 32..]);
        let mut o6 = o.clone();
        for earlier in &frames[..6] {
            o6.open(earlier).unwrap().unwrap();
        }
        let err = o6.clone().open(&f).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("control frame failed authentication: frame 6 from the client"),
            "{err}"
        );
        assert_eq!(o6.open(&frames[6]).unwrap().unwrap().0, msgs[6]);

        // Replay: frame 0 again after frame 0.
        let mut r = o.clone();
        r.open(&frames[0]).unwrap().unwrap();
        assert!(is_auth_failure(r.open(&frames[0])));
        // Reorder: frame 1 before frame 0.
        assert!(is_auth_failure(o.clone().open(&frames[1])));
        // Deletion: frame 2 straight after frame 0.
        let mut d = o.clone();
        d.open(&frames[0]).unwrap().unwrap();
        assert!(is_auth_failure(d.open(&frames[2])));
        // Reflection: the client's own frame 0 presented to it as the server's.
        let k = keys(7);
        let mut at_client = FrameOpener::new(k.receiving(Role::Client).clone(), Role::Server);
        assert!(is_auth_failure(at_client.open(&frames[0])));
        // Another session (another key) or an unsealed frame.
        let mut other = FrameOpener::new(keys(8).receiving(Role::Server).clone(), Role::Client);
        assert!(is_auth_failure(other.open(&frames[0])));
        let mut plain = msgs[0].encode_frame();
        plain.extend_from_slice(&msgs[1].encode_frame());
        plain.extend_from_slice(&[0; 64]);
        assert!(is_auth_failure(o.clone().open(&plain)));
        // A failed frame does not advance the sequence: the genuine one still opens after it.
        let mut after = o.clone();
        assert!(is_auth_failure(after.open(&frames[1])));
        assert_eq!(after.open(&frames[0]).unwrap().unwrap().0, msgs[0]);
        // Bounds are checked from the prefix alone.
        let mut big = (MAX_FRAME_LEN as u32 + 1).to_be_bytes().to_vec();
        big.push(b'{');
        assert_eq!(
            o.clone().open(&big),
            Err(WireError::FrameTooLarge(MAX_FRAME_LEN + 1))
        );
        assert_eq!(o.clone().open(&[0; 4]), Err(WireError::EmptyFrame));
    }

    #[test]
    fn an_authentic_frame_with_a_bad_message_is_refused_by_validation() {
        let (mut s, mut o) = pair();
        let body = br#"{"type":"plan","streams":257,"chunk_size":1048576}"#;
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(body);
        assert!(matches!(
            o.open(&s.seal_frame(f)),
            Err(WireError::Invalid(_))
        ));
    }

    /// The fuzz target's invariant on a seeded corpus: whatever a mutated sealed stream yields before
    /// its first error is exactly the genuine messages, in order (nothing forged ever opens).
    #[test]
    fn seeded_mutations_of_sealed_frames_never_open_as_anything_else() {
        let msgs = samples();
        let (mut s, o) = pair();
        let valid: Vec<u8> = msgs.iter().flat_map(|m| s.seal(m)).collect();
        let mut rng = crate::ranges::tests::Rng(0x5EA1_ED00_F00D_0001);
        for _ in 0..500 {
            let mut bytes = valid.clone();
            for _ in 0..rng.below(3) + 1 {
                let i = rng.below(bytes.len() as u64) as usize;
                match rng.below(3) {
                    0 => bytes[i] ^= 1 << rng.below(8),
                    1 => bytes.insert(i, rng.next() as u8),
                    _ => bytes.truncate(i.max(1)),
                }
            }
            let (mut o, mut rest, mut k) = (o.clone(), &bytes[..], 0);
            while let Ok(Some((m, used))) = o.open(rest) {
                assert_eq!(m, msgs[k]);
                k += 1;
                rest = &rest[used..];
            }
        }
    }

    fn header(chunk: u64) -> ChunkHeader {
        ChunkHeader {
            file: 3,
            chunk,
            offset: chunk << 20,
            len: 9,
            hash: hash_chunk(b"123456789"),
        }
    }

    #[test]
    fn sealed_chunk_headers_are_bound_to_stream_sequence_and_fields() {
        let k = keys(7);
        let send = k.sending(Role::Client).clone();
        let recv = k.receiving(Role::Server).clone();
        let mut s = ChunkSealer::new(send.clone(), 2);
        let sealed: Vec<_> = (0..3).map(|c| s.seal(&header(c))).collect();
        let mut o = ChunkOpener::new(recv.clone(), 2);
        for (c, b) in sealed.iter().enumerate() {
            assert_eq!(o.open(b), Ok(header(c as u64)));
        }
        // On another stream, replayed, reordered, or dropped: refused.
        assert_eq!(
            ChunkOpener::new(recv.clone(), 1).open(&sealed[0]),
            Err(WireError::ChunkAuth { stream: 1, seq: 0 })
        );
        let mut r = ChunkOpener::new(recv.clone(), 2);
        r.open(&sealed[0]).unwrap();
        assert!(r.clone().open(&sealed[0]).is_err());
        assert!(r.open(&sealed[2]).is_err());
        // Another payload with its plain BLAKE3 in the header (the relay attack), or any bit flip.
        let mut evil = sealed[0];
        evil[32..64].copy_from_slice(&hash_chunk(b"987654321").0);
        let err = ChunkOpener::new(recv.clone(), 2).open(&evil).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("chunk header failed authentication: stream 2, header 0"),
            "{err}"
        );
        for i in 0..CHUNK_HEADER_LEN {
            let mut b = sealed[0];
            b[i] ^= 1;
            assert!(ChunkOpener::new(recv.clone(), 2).open(&b).is_err(), "{i}");
        }
        // The other direction's key (a reflected stream) does not open it.
        assert!(
            ChunkOpener::new(k.receiving(Role::Client).clone(), 2)
                .open(&sealed[0])
                .is_err()
        );
        // Fields are still checked once the tag is good.
        let mut bad = ChunkSealer::new(send, 0);
        let zero_len = ChunkHeader {
            len: 0,
            ..header(0)
        };
        assert!(matches!(
            ChunkOpener::new(recv, 0).open(&bad.seal(&zero_len)),
            Err(WireError::BadChunkHeader(_))
        ));
    }

    #[test]
    fn data_proofs_bind_session_cookie_and_stream() {
        let k = keys(7);
        let key = k.sending(Role::Client);
        let p = key.data_proof(&[9; 16], 4).0;
        assert_eq!(verify_data_proof(key, &[9; 16], 4, &p), Ok(()));
        assert_eq!(
            verify_data_proof(key, &[9; 16], 5, &p),
            Err(WireError::DataProof { stream: 5 })
        );
        assert!(verify_data_proof(key, &[8; 16], 4, &p).is_err());
        assert!(verify_data_proof(k.sending(Role::Server), &[9; 16], 4, &p).is_err());
        assert!(verify_data_proof(keys(8).sending(Role::Client), &[9; 16], 4, &p).is_err());
        assert!(verify_data_proof(key, &[9; 16], 4, &[0; 32]).is_err());
    }
}
