//! Arbitrary UTF-8 as a topology file: parsing and compiling a path with no
//! overrides, and compiling a network, must return errors, never panic; a
//! network that compiles has a checked route for every pair of hosts. The
//! same text as a monitor's mesh file: an error, or a mesh whose pairs join two
//! different hosts it has, each test's slip shorter than its period, and a
//! schedule of it that hands out runs without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_monitor::{Mesh, Scheduler};
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
    if let Ok(mesh) = Mesh::from_toml(text, "fuzz.toml") {
        for t in &mesh.tests {
            assert!(t.slip < t.every, "{}", t.name);
            for &(a, b) in &t.pairs {
                assert!(a != b && a < mesh.hosts.len() && b < mesh.hosts.len());
            }
        }
        let now = 1_795_737_600_000_000_000;
        let mut s = Scheduler::new(&mesh, now, 1);
        for r in s.due(now + 86_400_000_000_000) {
            s.finish(&r, now + 86_401_000_000_000);
        }
    }
});
