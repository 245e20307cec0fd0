//! Fuzzes everything a transfer peer parses from untrusted bytes: the binary chunk header of data
//! streams (its fields and its authentication), the length-prefixed JSON transfer messages (plain, as
//! in the handshake, and sealed, as after it), and (because a journal may be torn or garbled) the
//! receiver's resume journal.
//!
//! Invariants checked beyond "does not panic":
//! - accepted chunk header fields re-encode to the same 64 bytes, their length is within 1 ..= 64 MiB,
//!   and they seal and open back to the same header; a forged 96-byte header never opens;
//! - every accepted message re-encodes to a frame that decodes to the same message;
//! - a sealed stream built from the input never opens to anything but what was sealed (a genuine frame
//!   opens to exactly what `Message::from_json` makes of its body; a forged one is refused);
//! - an accepted plan is within its ranges and the memory limit (0 streams only over TCP), an
//!   accepted inline chunk within its limit; the sender's checks of `have`
//!   (against a manifest of files 0..4, file i with 37 × i chunks) keep every chunk within its file
//!   and stop endless resume state;
//! - journal replay trusts only a prefix of the input, that prefix replays to the same state, and
//!   every verified chunk index lies within its file's chunk plan.

#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_proto::frame::{self, FrameDecoder};
use longhaul_transfer::journal::Journal;
use longhaul_transfer::manifest::{MAX_CHUNK, MEMORY_LIMIT, memory_bound};
use longhaul_transfer::msg::{
    CHUNK_FIELDS_LEN, CHUNK_HEADER_LEN, ChunkHeader, HaveCollector, INLINE_LIMIT, MAX_FRAME_LEN,
    MAX_RATE_BPS, MAX_RTT_NS, Message, WireError,
};
use longhaul_proto::msg::Transport;
use longhaul_transfer::session::{
    ChunkOpener, ChunkSealer, FRAME_TAG_LEN, FrameOpener, FrameSealer,
};
use longhaul_transfer::{Key, Role};

/// The fuzz manifest: files 0..4, file `i` with 37 × `i` chunks.
fn chunk_count(id: u32) -> Option<u64> {
    (id < 4).then(|| 37 * u64::from(id))
}

fuzz_target!(|data: &[u8]| {
    let keys = Key::from_bytes([0x42; 32]).session(
        longhaul_transfer::msg::Direction::Send,
        &[1; 32],
        &[2; 32],
    );
    let (send, recv) = (keys.sending(Role::Client), keys.receiving(Role::Server));

    if let Some(h) = data.first_chunk::<CHUNK_FIELDS_LEN>() {
        if let Ok(dec) = ChunkHeader::decode(h) {
            assert_eq!(&dec.encode(), h);
            assert!(dec.len >= 1 && u64::from(dec.len) <= MAX_CHUNK);
            let sealed = ChunkSealer::new(send.clone(), 3).seal(&dec);
            assert_eq!(ChunkOpener::new(recv.clone(), 3).open(&sealed), Ok(dec));
            assert!(ChunkOpener::new(recv.clone(), 4).open(&sealed).is_err());
        }
    }
    if let Some(h) = data.first_chunk::<CHUNK_HEADER_LEN>() {
        assert!(matches!(
            ChunkOpener::new(recv.clone(), 0).open(h),
            Err(WireError::ChunkAuth { .. })
        ));
    }

    let mut rest = data;
    let mut have = Some(HaveCollector::new((0..4).filter_map(chunk_count).sum()));
    while let Ok(Some((m, used))) = frame::decode::<Message>(rest, None) {
        assert!(used <= rest.len());
        let again = m.encode_frame();
        let (back, n) = frame::decode::<Message>(&again, None)
            .expect("re-encoded message parses")
            .expect("whole frame");
        assert_eq!(n, again.len());
        assert_eq!(back, m);
        assert_eq!(Message::from_json(&again[4..]), Ok(m.clone()));
        match &m {
            Message::Plan {
                streams,
                chunk_size,
                rtt_ns,
                rate_bps,
                transport,
                ..
            } => {
                assert!(memory_bound(*streams, *chunk_size) <= MEMORY_LIMIT);
                assert!(*rtt_ns <= MAX_RTT_NS && *rate_bps <= MAX_RATE_BPS);
                assert!(*streams > 0 || *transport == Transport::Tcp);
            }
            Message::ChunkInline { data, .. } => {
                assert!(data.len() as u64 <= INLINE_LIMIT);
            }
            Message::Have { files, .. } => {
                if let Some(c) = have.as_mut()
                    && c.add(files, chunk_count).is_err()
                {
                    have = None;
                }
            }
            _ => {}
        }
        rest = &rest[used..];
    }

    if let Some(c) = have {
        for (id, set) in c.finish() {
            let count = chunk_count(id).expect("only manifest files are kept");
            assert!(set.end() <= count, "resume state beyond the file's chunks");
        }
    }

    // The input as a forged sealed stream: nothing opens.
    let mut forged = FrameOpener::new(recv.clone(), Role::Client);
    assert!(!matches!(forged.open(data), Ok(Some(_))));

    // The input cut into bodies (each prefixed by a 2-byte length), sealed by a key holder: each
    // opens to exactly what `from_json` makes of it, in order.
    let (mut sealer, mut opener) = (
        FrameSealer::new(send.clone()),
        FrameOpener::new(recv.clone(), Role::Client),
    );
    let (mut stream, mut want) = (Vec::new(), Vec::new());
    let mut rest = data;
    while let Some((len, tail)) = rest.split_first_chunk::<2>() {
        let len = (u16::from_be_bytes(*len) as usize).min(tail.len());
        let body = &tail[..len];
        rest = &tail[len..];
        if body.is_empty() || body.len() > MAX_FRAME_LEN {
            continue;
        }
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(body);
        let sealed = sealer.seal_frame(frame);
        stream.extend_from_slice(&sealed);
        want.push(Message::from_json(body));
        match (opener.open(&sealed), Message::from_json(body)) {
            (Ok(Some((m, used))), Ok(want)) => {
                assert_eq!(m, want);
                assert_eq!(used, sealed.len());
            }
            (Err(got), Err(want)) => assert_eq!(got, want),
            (got, want) => panic!("sealed {got:?} vs plain {want:?}"),
        }
    }

    // The same sealed frames through the incremental decoder of a connection, read as a socket would
    // (what it wants, no more): it holds at most one sealed frame and yields the same results, in
    // order, up to the first refusal.
    let mut dec = FrameDecoder::<Message>::new();
    dec.open_with(Box::new(FrameOpener::new(recv.clone(), Role::Client)));
    let (mut want, mut rest, mut buffered) = (want.into_iter(), &stream[..], 0);
    while !rest.is_empty() {
        let n = dec.wanted().min(rest.len());
        dec.push(&rest[..n])
            .expect("a key holder's lengths are in range");
        buffered += n;
        assert!(
            buffered <= 4 + MAX_FRAME_LEN + FRAME_TAG_LEN,
            "decoder buffered more than one frame"
        );
        rest = &rest[n..];
        match dec.next_message() {
            Ok(Some(m)) => {
                buffered = 0;
                assert_eq!(Ok(m), want.next().expect("a frame was sealed"));
            }
            Ok(None) => {}
            Err(e) => {
                assert_eq!(Err(e), want.next().expect("a frame was sealed"));
                break;
            }
        }
    }

    let j = Journal::replay(data);
    assert!(j.valid_len() <= data.len());
    let again = Journal::replay(&data[..j.valid_len()]);
    assert_eq!(again.valid_len(), j.valid_len());
    assert!(!again.ignored_tail());
    assert!(
        j.files().eq(again.files()),
        "the trusted prefix replays to the same state"
    );
    for (_, f) in j.files() {
        assert!(
            f.verified.end() <= f.plan().count(),
            "verified chunk beyond the plan"
        );
    }
});
