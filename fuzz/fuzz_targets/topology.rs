//! Arbitrary UTF-8 as a topology file: parsing and compiling with no
//! overrides must return errors, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_topology::{Overrides, Topology, describe};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(topology) = Topology::from_toml(text, "fuzz.toml")
        && let Ok(path) = topology.compile(&Overrides::default())
    {
        let _ = describe(&path);
        let _ = path.lsr_distance_km();
    }
});
