//! Arbitrary UTF-8 as a topology file: parsing and compiling a path with no
//! overrides, and compiling a network, must return errors, never panic; a
//! network that compiles has a checked route for every pair of hosts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_topology::{Network, Overrides, Topology, describe, describe_network, is_network};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(topology) = Topology::from_toml(text, "fuzz.toml")
        && let Ok(path) = topology.compile(&Overrides::default())
    {
        let _ = describe(&path);
        let _ = path.lsr_distance_km();
    }
    let _ = is_network(text);
    if let Ok(net) = Network::from_toml(text, "fuzz.toml") {
        for from in 0..net.hosts.len() {
            for to in 0..net.hosts.len() {
                let route = net.route(from, to);
                assert!(
                    net.check_route(from, to, route).is_ok(),
                    "compiled route {from} -> {to} does not check"
                );
                let _ = net.rtt(from, to);
            }
        }
        let _ = describe_network(&net);
    }
});
