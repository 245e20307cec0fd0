//! Fuzzes everything a server parses from an untrusted peer: the connection preamble and the
//! length-prefixed JSON control frames, fed in arbitrary splits.
//!
//! Invariants checked beyond "does not panic":
//! - the decoder never holds more than one frame (MAX_FRAME_LEN + 4 bytes);
//! - every message it accepts re-encodes to a frame that decodes to the same message.

#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_proto::wire::{encode_frame, FrameDecoder, Preamble, MAX_FRAME_LEN, PREAMBLE_LEN};
use longhaul_proto::Message;

fuzz_target!(|data: &[u8]| {
    if data.len() >= PREAMBLE_LEN {
        let mut pre = [0u8; PREAMBLE_LEN];
        pre.copy_from_slice(&data[..PREAMBLE_LEN]);
        if let Ok(p) = Preamble::decode(&pre) {
            assert_eq!(Preamble::decode(&p.encode()), Ok(p));
        }
    }
    // The first byte picks the read size, as a socket would split the stream.
    let Some((&split, rest)) = data.split_first() else { return };
    let step = usize::from(split).max(1);
    let mut dec = FrameDecoder::new();
    let mut buffered = 0usize;
    for chunk in rest.chunks(step) {
        let mut chunk = chunk;
        while !chunk.is_empty() {
            let n = dec.wanted().min(chunk.len());
            if dec.push(&chunk[..n]).is_err() {
                return;
            }
            buffered += n;
            assert!(buffered <= MAX_FRAME_LEN + 4, "decoder buffered more than one frame");
            chunk = &chunk[n..];
            loop {
                match dec.next_message() {
                    Ok(Some(m)) => {
                        buffered = 0;
                        let again = encode_frame(&m);
                        let back = Message::from_json(&again[4..]).expect("re-encoded message parses");
                        assert_eq!(back, m);
                    }
                    Ok(None) => break,
                    Err(_) => return,
                }
            }
        }
    }
});
