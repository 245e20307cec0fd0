//! Fuzzes everything a transfer peer parses from untrusted bytes: the binary chunk header of data
//! streams, the length-prefixed JSON transfer messages, and (because a journal may be torn or garbled)
//! the receiver's resume journal.
//!
//! Invariants checked beyond "does not panic":
//! - an accepted chunk header re-encodes to the same 64 bytes and its length is within 1 ..= 64 MiB;
//! - every accepted message re-encodes to a frame that decodes to the same message;
//! - journal replay trusts only a prefix of the input, that prefix replays to the same state, and
//!   every verified chunk index lies within its file's chunk plan.

#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_transfer::journal::Journal;
use longhaul_transfer::manifest::MAX_CHUNK;
use longhaul_transfer::msg::{CHUNK_HEADER_LEN, ChunkHeader, Message, decode_frame};

fuzz_target!(|data: &[u8]| {
    if let Some(h) = data.first_chunk::<CHUNK_HEADER_LEN>() {
        if let Ok(dec) = ChunkHeader::decode(h) {
            assert_eq!(&dec.encode(), h);
            assert!(dec.len >= 1 && u64::from(dec.len) <= MAX_CHUNK);
        }
    }

    let mut rest = data;
    while let Ok(Some((m, used))) = decode_frame(rest) {
        assert!(used <= rest.len());
        let again = m.encode_frame();
        let (back, n) = decode_frame(&again)
            .expect("re-encoded message parses")
            .expect("whole frame");
        assert_eq!(n, again.len());
        assert_eq!(back, m);
        assert_eq!(Message::from_json(&again[4..]), Ok(m));
        rest = &rest[used..];
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
