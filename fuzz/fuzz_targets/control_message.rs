//! Fuzzes everything a server parses from an untrusted peer: the connection preamble and the
//! length-prefixed JSON control frames, fed in arbitrary splits.
//!
//! Invariants checked beyond "does not panic":
//! - the decoder never holds more than one frame (MAX_FRAME_LEN + 4 bytes);
//! - every message it accepts re-encodes to a frame that decodes to the same message;
//! - accepted test parameters are within their documented ranges, and the server's window plan for
//!   them (privileged or not) neither panics nor asks for more than one TCP window per stream.

#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_proto::msg::{MAX_RATE_BPS, MAX_RTT_NS, MAX_STREAMS};
use longhaul_proto::window::{self, KernelLimits};
use longhaul_proto::wire::{FrameDecoder, MAX_FRAME_LEN, PREAMBLE_LEN, Preamble, encode_frame};
use longhaul_proto::{Message, TestParams, WindowRequest};
use longhaul_units::Nanos;
use longhaul_units::models::MAX_TCP_WINDOW;

/// What the server does with accepted parameters before any socket exists: plan the buffers.
fn plan_params(p: &TestParams) {
    assert!(p.rtt_ns <= MAX_RTT_NS);
    assert!(p.target_rate_bps <= MAX_RATE_BPS);
    assert!((1..=MAX_STREAMS).contains(&p.streams));
    let fixed = match p.window {
        WindowRequest::Fixed { bytes } => Some(bytes),
        WindowRequest::Auto => None,
    };
    for privileged in [false, true] {
        let limits = KernelLimits {
            rmem_max: 4 << 20,
            wmem_max: 4 << 20,
            tcp_rmem_max: 32 << 20,
            tcp_wmem_max: 4 << 20,
            privileged,
        };
        let plan = window::plan(
            Nanos(p.rtt_ns),
            p.target_rate_bps,
            p.streams,
            fixed,
            &limits,
        );
        assert!(plan.wanted <= MAX_TCP_WINDOW);
        let _ = window::assess(&plan, &plan.recv, plan.wanted.saturating_mul(2));
        let _ = window::notsent_lowat(p.target_rate_bps, p.streams);
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() >= PREAMBLE_LEN {
        let mut pre = [0u8; PREAMBLE_LEN];
        pre.copy_from_slice(&data[..PREAMBLE_LEN]);
        if let Ok(p) = Preamble::decode(&pre) {
            assert_eq!(Preamble::decode(&p.encode()), Ok(p));
        }
    }
    // The first byte picks the read size, as a socket would split the stream.
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let step = usize::from(split).max(1);
    let mut dec = FrameDecoder::<Message>::new();
    let mut buffered = 0usize;
    for chunk in rest.chunks(step) {
        let mut chunk = chunk;
        while !chunk.is_empty() {
            let n = dec.wanted().min(chunk.len());
            if dec.push(&chunk[..n]).is_err() {
                return;
            }
            buffered += n;
            assert!(
                buffered <= MAX_FRAME_LEN + 4,
                "decoder buffered more than one frame"
            );
            chunk = &chunk[n..];
            loop {
                match dec.next_message() {
                    Ok(Some(m)) => {
                        buffered = 0;
                        let again = encode_frame(&m);
                        let back =
                            Message::from_json(&again[4..]).expect("re-encoded message parses");
                        assert_eq!(back, m);
                        if let Message::Params(p) = &m {
                            plan_params(p);
                        }
                    }
                    Ok(None) => break,
                    Err(_) => return,
                }
            }
        }
    }
});
