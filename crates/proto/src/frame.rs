//! The frame codec of every control connection: length-prefixed JSON messages, optionally sealed.
//!
//! ```text
//! frame  = length (u32, big-endian, 1 ..= MAX_FRAME_LEN) ‖ JSON (length bytes, one message)
//! sealed = frame ‖ tag (FrameOpen::tag_len bytes, over the whole frame)
//! ```
//!
//! The codec is generic over the message type ([`Framed`]): the test's [`crate::Message`] and the
//! transfer's messages (crate `longhaul-transfer`) travel in the same frames. Sealing is a hook: the
//! codec places and checks the tag ([`FrameSeal`], [`FrameOpen`]); what the tag is (a MAC, and the
//! implicit sequence number it covers) belongs to whoever implements the hook, so this crate holds no
//! key and no cryptography.
//!
//! Everything received is untrusted. [`decode`] (and the incremental [`FrameDecoder`] built on it)
//! refuses a length outside `1 ..= MAX_FRAME_LEN` as soon as its four bytes are in, before anything is
//! buffered for it; checks the tag, when the frame is sealed, before the JSON is parsed; and hands the
//! JSON to [`Framed::from_json`], which parses and validates it. The decoder never holds more than one
//! frame: [`FrameDecoder::wanted`] tells the reader how many bytes the current frame still needs, so
//! bytes beyond it stay in the socket.

use std::marker::PhantomData;

use serde::Serialize;

/// Largest frame body accepted (64 KiB) unless the protocol raises its decoder's limit
/// ([`FrameDecoder::set_limit`]): every handshake message and a transfer's manifest batches stay well
/// below this. A test raises it once admitted, for its per-stream messages ([`crate::msg::TestParams::frame_limit`]).
pub const MAX_FRAME_LEN: usize = 64 * 1024;

/// Bytes of the length prefix.
const PREFIX_LEN: usize = 4;

/// A message that travels in frames: serialised with serde, parsed and validated by the protocol.
pub trait Framed: Serialize + Sized {
    /// The protocol's error for bytes from a peer; frame-level errors convert into it.
    type Error: From<FrameError>;

    /// Parses and validates one message from a frame's JSON body.
    fn from_json(bytes: &[u8]) -> Result<Self, Self::Error>;

    /// Short name of the message's kind (its JSON `type`), for errors and logs.
    fn kind(&self) -> &'static str;

    /// The reason, if this is the protocol's fatal error message (the peer ends the conversation).
    fn peer_error(&self) -> Option<&str>;
}

/// What can be wrong with a frame before its message is parsed. Exhaustive on purpose: every
/// protocol's error type maps each case (`From<FrameError>`), and a new case must be mapped everywhere.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The length prefix announced more bytes than the decoder's limit ([`MAX_FRAME_LEN`] unless
    /// raised).
    #[error("control frame of {len} bytes exceeds the {} KiB limit", limit / 1024)]
    TooLarge {
        /// The length announced.
        len: usize,
        /// The limit it exceeds.
        limit: usize,
    },
    /// A length prefix of zero.
    #[error("empty control frame")]
    Empty,
    /// A sealed frame whose tag did not verify; the text says which frame and from whom.
    #[error("control frame failed authentication: {0}")]
    Auth(String),
}

/// Seals the frames one side sends (the authenticator's sending half).
pub trait FrameSeal: Send {
    /// Appends the tag of `frame` (length prefix and JSON), the next of this direction. Whoever shares
    /// a sealer must seal and write each frame under one lock, so tags follow the order on the wire.
    fn append_tag(&mut self, frame: &mut Vec<u8>);
}

/// Checks the tags of the frames one side receives (the authenticator's receiving half).
pub trait FrameOpen: Send {
    /// Bytes of the tag after each frame.
    fn tag_len(&self) -> usize;

    /// Checks `tag` against `frame` (length prefix and JSON). On success the authenticator moves on to
    /// the next frame; on failure it stays where it was and says why, in one line.
    fn check(&mut self, frame: &[u8], tag: &[u8]) -> Result<(), String>;
}

/// The frame of `msg`, unsealed.
pub fn encode_frame<M: Framed>(msg: &M) -> Vec<u8> {
    let mut out = vec![0; PREFIX_LEN];
    serde_json::to_writer(&mut out, msg).expect("messages always serialise");
    let len = u32::try_from(out.len() - PREFIX_LEN).expect("a message is far below 4 GiB");
    out[..PREFIX_LEN].copy_from_slice(&len.to_be_bytes());
    out
}

/// The sending half of a connection's framing: encodes messages, and seals them once
/// [`FrameEncoder::seal_with`] switched sealing on.
#[derive(Default)]
pub struct FrameEncoder {
    sealer: Option<Box<dyn FrameSeal>>,
}

impl FrameEncoder {
    /// An encoder of plain frames.
    pub fn new() -> Self {
        Self::default()
    }

    /// From now on every frame is sealed by `sealer`.
    pub fn seal_with(&mut self, sealer: Box<dyn FrameSeal>) {
        self.sealer = Some(sealer);
    }

    /// The frame of `msg`, sealed if sealing is on.
    pub fn encode<M: Framed>(&mut self, msg: &M) -> Vec<u8> {
        self.finish(encode_frame(msg))
    }

    /// Seals (if sealing is on) a frame built by hand, whatever its content: test peers use it to send
    /// well-authenticated nonsense.
    pub fn finish(&mut self, mut frame: Vec<u8>) -> Vec<u8> {
        if let Some(s) = &mut self.sealer {
            s.append_tag(&mut frame);
        }
        frame
    }
}

impl std::fmt::Debug for FrameEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameEncoder")
            .field("sealed", &self.sealer.is_some())
            .finish()
    }
}

/// The body length announced by the frame at the start of `buf`, checked as soon as its prefix is in;
/// `Ok(None)` before that.
fn body_len(buf: &[u8], limit: usize) -> Result<Option<usize>, FrameError> {
    let Some(prefix) = buf.first_chunk::<PREFIX_LEN>() else {
        return Ok(None);
    };
    match u32::from_be_bytes(*prefix) as usize {
        0 => Err(FrameError::Empty),
        len if len > limit => Err(FrameError::TooLarge { len, limit }),
        len => Ok(Some(len)),
    }
}

/// Decodes the first frame of `buf`, sealed if `opener` is given: `Ok(None)` while more bytes are
/// needed (a proper prefix of a frame is never an error, and does not move the opener on), else the
/// message and the bytes it used. The length is checked from the prefix alone, the tag before the JSON
/// is parsed; the opener moves on with every authentic frame, even one whose message is then refused.
pub fn decode<M: Framed>(
    buf: &[u8],
    opener: Option<&mut dyn FrameOpen>,
) -> Result<Option<(M, usize)>, M::Error> {
    decode_within(buf, opener, MAX_FRAME_LEN)
}

/// [`decode`] with a frame body of at most `limit` bytes.
fn decode_within<M: Framed>(
    buf: &[u8],
    opener: Option<&mut dyn FrameOpen>,
    limit: usize,
) -> Result<Option<(M, usize)>, M::Error> {
    let Some(len) = body_len(buf, limit)? else {
        return Ok(None);
    };
    let tag_len = opener.as_ref().map_or(0, |o| o.tag_len());
    let Some(frame) = buf.get(..PREFIX_LEN + len) else {
        return Ok(None);
    };
    let Some(tag) = buf.get(PREFIX_LEN + len..PREFIX_LEN + len + tag_len) else {
        return Ok(None);
    };
    if let Some(o) = opener {
        o.check(frame, tag).map_err(FrameError::Auth)?;
    }
    // `?` on `M::Error` itself would pick the `From<FrameError>` bound: map explicitly.
    M::from_json(&frame[PREFIX_LEN..]).map(|msg| Some((msg, frame.len() + tag_len)))
}

/// The receiving half of a connection's framing: feed it the bytes that arrived, take out whole
/// messages. Reading at most [`FrameDecoder::wanted`] bytes at a time, it never buffers more than one
/// frame (at most 4 + its limit + the tag; the limit is [`MAX_FRAME_LEN`] unless raised), whatever
/// the peer sends.
pub struct FrameDecoder<M> {
    buf: Vec<u8>,
    limit: usize,
    opener: Option<Box<dyn FrameOpen>>,
    msg: PhantomData<fn() -> M>,
}

impl<M: Framed> FrameDecoder<M> {
    /// A decoder of plain frames with nothing buffered.
    pub fn new() -> Self {
        Self {
            buf: Vec::new(),
            limit: MAX_FRAME_LEN,
            opener: None,
            msg: PhantomData,
        }
    }

    /// Accepts frame bodies of up to `limit` bytes from now on (the protocol raises it once the peer
    /// is admitted to send larger messages; it is never lowered below [`MAX_FRAME_LEN`]).
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit.max(MAX_FRAME_LEN);
    }

    /// From the next frame on, every frame must be sealed and is checked by `opener`. Switch between
    /// frames (the protocol knows where); bytes of a frame already buffered are then read as sealed.
    pub fn open_with(&mut self, opener: Box<dyn FrameOpen>) {
        self.opener = Some(opener);
    }

    /// How many more bytes the current frame needs (at least 1): the caller reads at most this much, so
    /// bytes beyond the current frame stay in the socket.
    pub fn wanted(&self) -> usize {
        let tag_len = self.opener.as_ref().map_or(0, |o| o.tag_len());
        let need = match self.buf.first_chunk::<PREFIX_LEN>() {
            None => PREFIX_LEN,
            Some(p) => PREFIX_LEN + (u32::from_be_bytes(*p) as usize).min(self.limit) + tag_len,
        };
        need.saturating_sub(self.buf.len()).max(1)
    }

    /// Appends received bytes. Errors as soon as the current frame's length prefix is out of range.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), M::Error> {
        self.buf.extend_from_slice(bytes);
        body_len(&self.buf, self.limit)
            .map(drop)
            .map_err(M::Error::from)
    }

    /// The next whole message, if one is buffered ([`decode`]).
    pub fn next_message(&mut self) -> Result<Option<M>, M::Error> {
        let opener = self.opener.as_mut().map(|o| &mut **o as &mut dyn FrameOpen);
        let decoded = decode_within::<M>(&self.buf, opener, self.limit);
        decoded.map(|frame| {
            frame.map(|(msg, used)| {
                self.buf.drain(..used);
                msg
            })
        })
    }

    /// Whether part of a frame is buffered (a peer that closes now has truncated a message).
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty()
    }
}

impl<M: Framed> Default for FrameDecoder<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M> std::fmt::Debug for FrameDecoder<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameDecoder")
            .field("buffered", &self.buf.len())
            .field("sealed", &self.opener.is_some())
            .finish()
    }
}

/// Decodes every complete plain frame in `bytes` through a [`FrameDecoder`], fed as a socket would feed
/// it (for tests and fuzzing): the messages, and whether a partial frame was left over.
pub fn decode_all<M: Framed>(bytes: &[u8]) -> Result<(Vec<M>, bool), M::Error> {
    let mut dec = FrameDecoder::new();
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = dec.wanted().min(rest.len());
        #[expect(
            clippy::question_mark,
            reason = "`?` on `M::Error` itself resolves to the `From<FrameError>` bound and does not compile"
        )]
        if let Err(e) = dec.push(&rest[..n]) {
            return Err(e);
        }
        rest = &rest[n..];
        loop {
            match dec.next_message() {
                Ok(Some(m)) => out.push(m),
                Ok(None) => break,
                Err(e) => return Err(e),
            }
        }
    }
    Ok((out, dec.has_partial()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, ProtoError};

    #[test]
    fn frames_round_trip_byte_by_byte() {
        let msgs = vec![
            Message::Ping { seq: 1 },
            Message::Stop,
            Message::Error {
                message: "x".into(),
            },
        ];
        let mut bytes = Vec::new();
        for m in &msgs {
            bytes.extend(encode_frame(m));
        }
        // Feed one byte at a time: the decoder must reassemble every frame.
        let mut dec = FrameDecoder::<Message>::new();
        let mut got = Vec::new();
        for b in &bytes {
            dec.push(std::slice::from_ref(b)).unwrap();
            while let Some(m) = dec.next_message().unwrap() {
                got.push(m);
            }
        }
        assert_eq!(got, msgs);
        assert!(!dec.has_partial());
    }

    #[test]
    fn oversized_frame_is_refused_before_buffering() {
        let mut dec = FrameDecoder::<Message>::new();
        let err = dec.push(&(u32::MAX).to_be_bytes()).unwrap_err();
        assert!(matches!(err, ProtoError::FrameTooLarge { .. }));
    }

    #[test]
    fn truncated_frame_is_reported_as_partial() {
        let f = encode_frame(&Message::Stop);
        let (msgs, partial) = decode_all::<Message>(&f[..f.len() - 1]).unwrap();
        assert!(msgs.is_empty());
        assert!(partial);
    }

    #[test]
    fn garbage_json_is_an_error_not_a_panic() {
        let mut f = 5u32.to_be_bytes().to_vec();
        f.extend_from_slice(b"{{{{{");
        assert!(matches!(
            decode_all::<Message>(&f),
            Err(ProtoError::BadMessage(_))
        ));
    }

    /// The fuzz target's invariants (fuzz/fuzz_targets/control_message.rs) on a fixed, seeded corpus,
    /// so they hold on every `cargo test` and not only under the fuzzer: random bytes and mutated valid
    /// frames never panic, never make the decoder hold more than one frame, and every accepted message
    /// round-trips.
    #[test]
    fn seeded_mutations_never_panic_and_round_trip() {
        let valid: Vec<u8> = [
            Message::Hello {
                software: "longhaul 0.1.0".into(),
            },
            Message::Ping { seq: 7 },
            Message::Params(crate::msg::tests::params()),
            Message::Busy { running: 3, cap: 8 },
        ]
        .iter()
        .flat_map(encode_frame)
        .collect();
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..2_000 {
            let mut bytes = valid.clone();
            // Flip, insert or truncate at random places; every tenth round, pure noise.
            if round % 10 == 0 {
                bytes = (0..(next() % 512)).map(|_| next() as u8).collect();
            } else {
                for _ in 0..(next() % 4 + 1) {
                    if bytes.is_empty() {
                        break;
                    }
                    let i = (next() as usize) % bytes.len();
                    match next() % 3 {
                        0 => bytes[i] ^= 1 << (next() % 8),
                        1 => bytes.insert(i, next() as u8),
                        _ => bytes.truncate(i),
                    }
                }
            }
            if let Ok((msgs, _)) = decode_all::<Message>(&bytes) {
                for m in msgs {
                    let again = encode_frame(&m);
                    assert_eq!(Message::from_json(&again[4..]).unwrap(), m);
                }
            }
        }
    }

    /// A toy authenticator with the shape of the transfer's: a tag over the frame and an implicit
    /// sequence number (here a checksum, not a MAC: the codec only places and checks tags).
    #[derive(Clone, Default)]
    struct Counted {
        next: u64,
    }

    impl Counted {
        fn tag(&self, frame: &[u8]) -> [u8; 8] {
            let sum = frame.iter().fold(self.next, |s, &b| {
                s.wrapping_mul(31).wrapping_add(u64::from(b))
            });
            sum.to_be_bytes()
        }
    }

    impl FrameSeal for Counted {
        fn append_tag(&mut self, frame: &mut Vec<u8>) {
            let tag = self.tag(frame);
            self.next += 1;
            frame.extend_from_slice(&tag);
        }
    }

    impl FrameOpen for Counted {
        fn tag_len(&self) -> usize {
            8
        }

        fn check(&mut self, frame: &[u8], tag: &[u8]) -> Result<(), String> {
            if self.tag(frame) != tag {
                return Err(format!("frame {} does not match", self.next));
            }
            self.next += 1;
            Ok(())
        }
    }

    fn sealed_stream(msgs: &[Message]) -> Vec<u8> {
        let mut enc = FrameEncoder::new();
        enc.seal_with(Box::new(Counted::default()));
        msgs.iter().flat_map(|m| enc.encode(m)).collect()
    }

    #[test]
    fn sealed_frames_decode_byte_by_byte_reading_only_what_the_frame_needs() {
        let msgs = vec![
            Message::Ping { seq: 1 },
            Message::Stop,
            Message::Pong { seq: 2 },
        ];
        let bytes = sealed_stream(&msgs);
        let mut dec = FrameDecoder::<Message>::new();
        dec.open_with(Box::new(Counted::default()));
        let mut ends = msgs.iter().scan(0, |end, m| {
            *end += encode_frame(m).len() + 8;
            Some(*end)
        });
        let mut end = ends.next();
        let mut got = Vec::new();
        for (i, b) in bytes.iter().enumerate() {
            // A reader that takes what the decoder wants never reads into the next frame.
            assert!(i + dec.wanted() <= end.unwrap(), "byte {i}");
            dec.push(std::slice::from_ref(b)).unwrap();
            if let Some(m) = dec.next_message().unwrap() {
                assert!(!dec.has_partial());
                assert_eq!(Some(i + 1), end);
                end = ends.next();
                got.push(m);
            }
        }
        assert_eq!(got, msgs);
        // Each frame's wanted count covers its tag: the last byte of the first frame is its tag's.
        let first = encode_frame(&msgs[0]).len() + 8;
        let mut dec = FrameDecoder::<Message>::new();
        dec.open_with(Box::new(Counted::default()));
        dec.push(&bytes[..4]).unwrap();
        assert_eq!(dec.wanted(), first - 4);
    }

    #[test]
    fn a_bad_tag_is_refused_before_the_json_and_does_not_move_the_opener_on() {
        let frames: Vec<Vec<u8>> = {
            let mut enc = FrameEncoder::new();
            enc.seal_with(Box::new(Counted::default()));
            // The second frame's JSON is garbage, but authentic.
            vec![
                enc.encode(&Message::Stop),
                enc.finish(b"\0\0\0\x03{{{".to_vec()),
            ]
        };
        let mut opener = Counted::default();
        // Out of order: refused as an authentication failure, not as bad JSON.
        let err = decode::<Message>(&frames[1], Some(&mut opener)).unwrap_err();
        assert_eq!(
            err,
            ProtoError::FrameAuth("frame 0 does not match".into()),
            "{err}"
        );
        // Cut short: "need more", and the opener has not moved.
        for cut in 0..frames[0].len() {
            assert_eq!(
                decode::<Message>(&frames[0][..cut], Some(&mut opener)),
                Ok(None)
            );
        }
        let (m, used) = decode::<Message>(&frames[0], Some(&mut opener))
            .unwrap()
            .unwrap();
        assert_eq!((m, used), (Message::Stop, frames[0].len()));
        // Authentic garbage gets as far as the parser.
        assert!(matches!(
            decode::<Message>(&frames[1], Some(&mut opener)),
            Err(ProtoError::BadMessage(_))
        ));
        // A plain frame where a sealed one is due does not open.
        let plain = encode_frame(&Message::Stop);
        let mut stream = plain.clone();
        stream.extend_from_slice(&plain);
        assert!(matches!(
            decode::<Message>(&stream, Some(&mut Counted::default())),
            Err(ProtoError::FrameAuth(_))
        ));
        // Bounds are checked from the prefix alone, sealed or not.
        let mut big = (MAX_FRAME_LEN as u32 + 1).to_be_bytes().to_vec();
        big.push(b'{');
        assert_eq!(
            decode::<Message>(&big, Some(&mut Counted::default())),
            Err(ProtoError::FrameTooLarge {
                len: MAX_FRAME_LEN + 1,
                limit: MAX_FRAME_LEN
            })
        );
        assert_eq!(
            decode::<Message>(&[0; 4], None),
            Err(ProtoError::EmptyFrame)
        );
    }

    #[test]
    fn a_raised_limit_admits_larger_frames_and_still_bounds_them() {
        // An interval of 1000 streams: about 95 KiB of JSON, over the handshake's limit.
        let sample = |stream| crate::interval::StreamInterval {
            stream,
            start_ns: 0,
            end_ns: 1_000_000_000,
            omitted: false,
            bytes: 1_000_000,
            sender: true,
            tcp: None,
            udp: None,
        };
        let big = Message::Interval(crate::msg::IntervalSample {
            index: 0,
            streams: (0..1000).map(sample).collect(),
        });
        let frame = encode_frame(&big);
        let mut dec = FrameDecoder::<Message>::new();
        assert_eq!(
            dec.push(&frame[..4]),
            Err(ProtoError::FrameTooLarge {
                len: frame.len() - 4,
                limit: MAX_FRAME_LEN
            })
        );
        let mut dec = FrameDecoder::<Message>::new();
        dec.set_limit(2 * MAX_FRAME_LEN);
        let mut rest = &frame[..];
        while !rest.is_empty() {
            let n = dec.wanted().min(rest.len());
            dec.push(&rest[..n]).unwrap();
            rest = &rest[n..];
        }
        assert_eq!(dec.next_message().unwrap(), Some(big));
        let over = ((2 * MAX_FRAME_LEN + 1) as u32).to_be_bytes();
        let err = dec.push(&over).unwrap_err();
        assert_eq!(
            err.to_string(),
            "control frame of 131073 bytes exceeds the 128 KiB limit"
        );
        // Never below the handshake's limit.
        let mut dec = FrameDecoder::<Message>::new();
        dec.set_limit(10);
        dec.push(&(MAX_FRAME_LEN as u32).to_be_bytes()).unwrap();
    }
}
