//! Arbitrary bytes as what an iperf3 peer sends on its control connection
//! (`longhaul_proto::iperf3`): a frame header, a client's parameters, a results document and a state
//! byte. None panics; a frame above the limit is refused before anything is allocated; parameters
//! that are accepted are a test the protocol's own checks accept, and write back to parameters
//! that read as the same test; results never hold more streams than allowed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_proto::iperf3::{
    MAX_JSON_LEN, State, is_udp_connect, json_len, read_params, read_results, write_params,
};

fuzz_target!(|data: &[u8]| {
    if let Some(h) = data.get(..4) {
        let h: [u8; 4] = h.try_into().expect("4 bytes");
        match json_len(h) {
            Ok(n) => assert!(n <= MAX_JSON_LEN),
            Err(_) => assert!(u32::from_be_bytes(h) as usize > MAX_JSON_LEN),
        }
    }
    if let Some(&b) = data.first()
        && let Some(s) = State::from_byte(b)
    {
        assert_eq!(s.byte(), b);
    }
    let _ = is_udp_connect(data);
    if let Ok(r) = read_params(data) {
        r.params.validate().expect("accepted parameters are valid");
        let again = serde_json::to_vec(&write_params(&r.params, "3.12")).expect("JSON");
        let back = read_params(&again).expect("our own parameters read back");
        assert_eq!(back.params, r.params);
    }
    let max = usize::from(data.first().copied().unwrap_or(0));
    if let Ok(r) = read_results(data, max) {
        assert!(r.streams.len() <= max);
        for s in &r.streams {
            assert!(s.id >= 1 && s.seconds >= 0.0 && s.jitter_ms >= 0.0);
        }
    }
});
