//! Arbitrary bytes as a line on a running emulator's control socket (`longhaul_emu::session`):
//! parsing returns a request or `None`, never panics, and a request it accepts survives its own
//! line form unchanged (what `emulate link`, `route` and `burst` send is what the emulator reads).
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_emu::session::Request;

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(r) = Request::parse(line) {
        let again = r.line();
        assert_eq!(Request::parse(&again), Some(r), "{again:?}");
    }
});
