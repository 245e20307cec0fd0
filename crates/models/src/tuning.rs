//! Host tuning for a target path: the pure half of `longhaul doctor`.
//!
//! `longhaul_engine::doctor::gather` reads the facts into a [`HostSnapshot`] (plain data: the kernel's
//! TCP and queueing tunables, the interfaces with their root qdisc and offloads, whether the process
//! holds `CAP_NET_ADMIN`), with the parsers in this module for what `tc` and `ethtool` print. Everything
//! else is here and pure:
//!
//! - [`evaluate`] compares a snapshot with what a [`Target`] path (rate, RTT, streams) needs and returns
//!   one [`Finding`] per check, each with what was seen, what is wanted, why, and the exact shell command
//!   that closes the gap; the same snapshot and target always give the same findings, in a fixed order.
//! - [`write_sysctl_file`] turns the `sysctl -w` fixes into a `/etc/sysctl.d` snippet that survives a
//!   reboot.
//! - [`buffer_sysctl_value`] rounds a buffer size to the value a sysctl fix sets; `longhaul calc bdp`
//!   prints the same values through [`Target::core_sysctl_value`] and [`Target::autotune_sysctl_value`].
//!
//! The rules and their sources (ESnet fasterdata's Linux host-tuning pages, socket(7), tcp(7), RFC 7323,
//! RFC 9438) are stated next to each check, one module per topic: `buffers`, `tcp_options`, `congestion`,
//! `queueing`, `links`, `window_limit`.

mod buffers;
mod congestion;
mod evaluate;
mod finding;
mod links;
mod parse;
mod queueing;
mod snapshot;
mod sysctl_file;
mod target;
mod tcp_memory;
mod tcp_options;
mod window_limit;

#[cfg(test)]
mod fixtures;

pub use buffers::{MAX_BUFFER_SYSCTL, buffer_sysctl_value};
pub use evaluate::evaluate;
pub use finding::{Finding, Status, any_fail, count};
pub use links::JUMBO_MTU;
pub use parse::{
    parse_ethtool_features, parse_ethtool_k, parse_tc_qdisc, sysctl_flag, sysctl_triple,
    sysctl_words,
};
pub use queueing::NETDEV_BACKLOG_10G;
pub use snapshot::{Feature, HostSnapshot, Interface, Offloads, Probe, Qdisc};
pub use sysctl_file::write_sysctl_file;
pub use target::Target;
pub use tcp_memory::{tcp_mem_fix, tcp_mem_for};
