//! Fuzzes everything a transfer peer parses from untrusted bytes: the binary chunk header of data
//! streams, the length-prefixed JSON transfer messages, and (because a journal may be torn or garbled)
//! the receiver's resume journal.
//!
//! Invariants checked beyond "does not panic":
//! - an accepted chunk header re-encodes to the same 64 bytes and its length is within 1 ..= 64 MiB;
//! - every accepted message re-encodes to a frame that decodes to the same message;
//! - an accepted plan is within its ranges and the memory limit; the sender's checks of `have`
//!   (against a manifest of files 0..4, file i with 37 × i chunks) keep every chunk within its file
//!   and stop endless resume state;
//! - journal replay trusts only a prefix of the input, that prefix replays to the same state, and
//!   every verified chunk index lies within its file's chunk plan.

#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_transfer::journal::Journal;
use longhaul_transfer::manifest::{MAX_CHUNK, MEMORY_LIMIT, memory_bound};
use longhaul_transfer::msg::{
    CHUNK_HEADER_LEN, ChunkHeader, HaveCollector, MAX_RATE_BPS, MAX_RTT_NS, Message, decode_frame,
};

/// The fuzz manifest: files 0..4, file `i` with 37 × `i` chunks.
fn chunk_count(id: u32) -> Option<u64> {
    (id < 4).then(|| 37 * u64::from(id))
}

fuzz_target!(|data: &[u8]| {
    if let Some(h) = data.first_chunk::<CHUNK_HEADER_LEN>() {
        if let Ok(dec) = ChunkHeader::decode(h) {
            assert_eq!(&dec.encode(), h);
            assert!(dec.len >= 1 && u64::from(dec.len) <= MAX_CHUNK);
        }
    }

    let mut rest = data;
    let mut have = Some(HaveCollector::new((0..4).filter_map(chunk_count).sum()));
    while let Ok(Some((m, used))) = decode_frame(rest) {
        assert!(used <= rest.len());
        let again = m.encode_frame();
        let (back, n) = decode_frame(&again)
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
            } => {
                assert!(memory_bound(*streams, *chunk_size) <= MEMORY_LIMIT);
                assert!(*rtt_ns <= MAX_RTT_NS && *rate_bps <= MAX_RATE_BPS);
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
