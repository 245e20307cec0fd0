//! Thin, safe wrappers over the Linux calls longhaul needs: socket options,
//! `TCP_INFO`, zero-copy sending, sysctls, capabilities, CPU accounting, TUN
//! devices, network namespaces, a tap on a device's outgoing packets, precise timing, and the user's data directory.
//! Depends on libc and thiserror only; `longhaul-engine`, `longhaul-emu` and
//! `longhaul-lab` call it. Start at [`sockopt`] and [`mod@tcp_info`].
//!
//! This is the only crate with `unsafe` in the workspace; every other crate
//! denies it. The wrappers hold no policy: each does one call (or a fixed,
//! documented sequence), takes sockets as [`BorrowedFd`](std::os::fd::BorrowedFd)
//! (use [`AsFd::as_fd`](std::os::fd::AsFd::as_fd) on a `TcpStream`), and reports
//! failures as a [`SysError`] that names the call and the object it was
//! applied to, e.g. `setsockopt(SO_RCVBUF=268435456) on fd 7: Operation not
//! permitted (os error 1)`.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod cpu;
pub mod dirs;
pub mod error;
pub mod ip;
pub mod memory;
pub mod netns;
pub mod packet_tap;
pub mod privilege;
pub mod process;
pub mod sockopt;
pub mod sysctl;
pub mod tcp_info;
pub mod tcp_memory;
#[cfg(test)]
mod testutil;
pub mod timing;
pub mod tun;
pub mod udp;
pub mod zerocopy;

pub use cpu::{
    CpuTime, SchedSample, online_cpus, pin_thread_to_cpu, process_cpu_time, sched_sample,
    task_cpu_time, thread_cpu_time, thread_id,
};
pub use dirs::data_dir;
pub use error::{Result, SysError};
pub use ip::ip;
pub use memory::meminfo_bytes;
pub use netns::{NETNS_RUN_DIR, netns_path, run_in_netns};
pub use packet_tap::{PacketTap, TAP_HEAD, Tapped, realtime_minus_monotonic_ns};
pub use privilege::{CAP_NET_ADMIN, has_capability, has_net_admin};
pub use process::daemonize;
pub use sockopt::{
    MAX_BUFFER_REQUEST, MAX_CONGESTION_NAME, congestion, dont_fragment, max_pacing_rate, mss,
    notsent_lowat, recv_buffer, send_buffer, set_congestion, set_dont_fragment,
    set_max_pacing_rate, set_notsent_lowat, set_recv_buffer, set_send_buffer, set_window_clamp,
    window_clamp,
};
pub use sysctl::{
    NetLimits, PROC_SYS, read_sysctl, read_sysctl_in, sysctl_path_in, write_sysctl, write_sysctl_in,
};
pub use tcp_info::{TcpInfo, tcp_info};
pub use tcp_memory::{ShortOfMemory, TcpMem};
pub use timing::{
    clock_synchronized, monotonic_now_ns, set_realtime_priority, set_timer_slack_ns, sleep_until_ns,
};
pub use tun::{MAX_RECORD_LEN, Tun, TunOptions, VNET_HDR_LEN, wait_any_readable};
pub use zerocopy::{SendfileSource, SpliceSource, ZeroCopySender};
