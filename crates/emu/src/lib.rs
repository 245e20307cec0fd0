//! The I/O side of longhaul's WAN emulator (docs/ARCHITECTURE.md, `crates/emu`):
//! emulated hosts are network namespaces, each with a TUN device opened with
//! virtio-net headers and TCP segmentation offload, and one forwarder thread
//! per direction moves records between them through the pure link model
//! (`longhaul-link`), splitting GSO super-packets with `longhaul-packet`
//! where segments get different fates. Real kernel TCP runs unmodified on
//! the hosts. Depends on `longhaul-units`, `longhaul-link`, `longhaul-packet`,
//! `longhaul-sys` (TUN, namespaces, timing), rustix, pcap-file, signal-hook
//! and serde; the binary's `emulate` drives it (paths come from
//! `longhaul-topology`). Start at [`Testbed`], then the forwarder loop in
//! `forward.rs`.
//!
//! This slice: two hosts and one path ([`Testbed`]) with router hops that
//! decrement TTL / hop limit and answer ICMP time exceeded ([`Hop`]),
//! fidelity counters per direction (drops by cause, lateness p50/p99/max,
//! TUN drops), termination-signal handling for the front end
//! ([`Termination`]), packet capture per direction ([`capture`]), and named
//! testbeds that outlive the command that started them ([`session`]). A
//! SIGKILLed emulator's namespaces are deleted by the next [`Testbed::up`]
//! (one-shot) or [`session::reap`] (named).

pub use longhaul_link as link;

pub mod arrival;
pub mod capture;
pub mod error;
pub mod fabric;
pub mod fifo;
pub mod forward;
mod host;
pub mod host_memory;
pub mod netdev;
pub mod phase;
pub mod pool;
mod private_dir;
pub mod session;
pub mod signals;
pub mod stall;
pub mod testbed;

pub use capture::CaptureStats;
pub use error::EmuError;
pub use fabric::{Fabric, FabricConfig, FabricReport, LinkChange};
pub use forward::DirectionStats;
pub use longhaul_units::hist::{Histogram, Summary};
pub use signals::Termination;
pub use testbed::{
    DEVICE, HOST_A_V4, HOST_A_V6, HOST_B_V4, HOST_B_V6, Hop, KERNEL_TCP_RMEM, KERNEL_TCP_WMEM,
    MAX_HOPS, Report, Testbed, TestbedConfig, check_hops, clean_stale, evenly_spaced_hops,
    router_v4, router_v6, tcp_buffer_for,
};
