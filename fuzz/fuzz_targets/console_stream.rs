//! Arbitrary bytes as a host's console stream, fed in arbitrary pieces: every line that comes out
//! holds no control character but tab (escaped instead), comes from at most MAX_LINE bytes of
//! input, and marking it never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_console::detect::{mark, message};
use longhaul_console::lines::{MAX_LINE, Splitter};

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let mut s = Splitter::new();
    let mut lines = Vec::new();
    for piece in rest.chunks(usize::from(cut).max(1)) {
        lines.extend(s.feed(piece));
    }
    lines.extend(s.finish());
    for l in &lines {
        assert!(!l.text.chars().any(|c| c.is_control() && c != '\t'), "{:?}", l.text);
        // Each input byte becomes at most 10 characters (`\u{1b}`, or U+FFFD's three bytes).
        assert!(l.text.len() <= MAX_LINE * 10);
        let _ = mark(&l.text);
        let _ = message(&l.text);
    }
});
