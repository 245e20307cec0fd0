//! End-to-end tests of the `longhaul` binary, linked into one integration binary (as ripgrep does).
//! Networking uses loopback only.

mod browser;
mod emulate;
mod emulate_hardening;
mod emulate_network;
mod encryption;
mod fleet;
mod fleet_copy;
mod fleet_stripe;
mod iperf3;
mod isolate;
mod lab;
mod module_graph;
mod monitor;
mod monitor_demo;
mod monitor_ui;
mod pace_auto;
mod raw_peer;
mod server_cmd;
mod server_faults;
mod server_limits;
mod test_cmd;
mod test_path;
mod testbed;
mod testbed_api_fuzz;
mod testbed_console;
mod testbed_power;
mod testbed_ui;
mod transfer;
mod transfer_hostile;
mod transfer_session;
mod transfer_udp;
mod transport;
mod transport_path;
mod udp;
mod util;
