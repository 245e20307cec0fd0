//! Arbitrary bytes as the frames a job peer (a controller, or the server it asked) sends:
//! decoding returns messages or an error, never panics, and an accepted message re-encodes to a
//! frame that decodes to the same message. The controllers file parser takes the same bytes as
//! UTF-8: an error or a list of controllers whose limits are all at least 1.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_fleet::{JobMessage, parse_controllers};
use longhaul_proto::frame::{decode_all, encode_frame};

fuzz_target!(|data: &[u8]| {
    let messages = decode_all::<JobMessage>(data)
        .map(|(m, _)| m)
        .unwrap_or_default();
    for m in messages {
        let again = encode_frame(&m);
        let back = JobMessage::from_json(&again[4..]).expect("a re-encoded message decodes");
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&m).unwrap()
        );
    }
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(list) = parse_controllers(text, "fuzz.toml")
    {
        for c in list {
            assert!(c.limits.max_streams >= 1 && c.limits.max_jobs >= 1);
            assert!(c.limits.max_duration.0 > 0);
        }
    }
});
