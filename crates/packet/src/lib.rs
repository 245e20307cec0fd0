//! Pure packet surgery for the emulator: the records a TUN device opened with
//! `IFF_TUN | IFF_NO_PI | IFF_VNET_HDR` and `TUNSETOFFLOAD(CSUM | TSO4 | TSO6 | USO4 | USO6)` hands
//! over (a 10-byte `virtio_net_hdr` followed by one IPv4 or IPv6 packet of up to 64 KiB, possibly a TCP
//! super-packet or a UDP super-datagram), and the operations on them: parsing ([`mod@parse`]),
//! splitting super-packets per TCP segment or UDP datagram
//! ([`mod@segment`]), router-hop processing with ICMP time-exceeded replies ([`hop`]), routers answering ping
//! ([`echo`]), bit errors on the wire ([`damage()`]), and
//! re-coalescing ([`mod@coalesce`]: fuzzed, not yet called by the forwarder, which writes the runs it
//! split as they are). Depends on thiserror only;
//! `longhaul-emu`'s forwarders call it for every record. Start at [`mod@parse`].
//!
//! Contract: no I/O, no clock, no `unsafe`; every function that reads bytes returns a typed
//! [`PacketError`] on malformed input and never panics (the bytes ultimately come from untrusted test
//! programs). Output functions write into a caller-provided `Vec<u8>` (cleared, then extended) so the
//! forwarding loop allocates nothing per packet. The kernel accepts super-packets written back with their
//! vnet header (`drivers/net/tun.c`, `tun_get_user` → `virtio_net_hdr_to_skb`); splitting and coalescing
//! follow wireguard-go's `tun/offload_linux.go` (`gsoSplit`, `handleGRO`).

pub mod build;
pub mod checksum;
pub mod coalesce;
mod damage;
pub mod echo;
mod error;
mod gso;
pub mod hop;
pub mod ip;
pub mod parse;
pub mod segment;
pub mod tcp;
pub mod udp;
pub mod vnet;

pub use coalesce::coalesce;
pub use damage::damage;
pub use echo::{Echo, echo_reply};
pub use error::PacketError;
pub use gso::GsoType;
pub use hop::{HopAction, RouterAddrs, process_hop};
pub use parse::{FlowKey, IpVersion, L4Proto, Parsed, TcpInfo, parse};
pub use segment::{ChecksumMode, finish_checksum, split};
pub use vnet::{VNET_HDR_LEN, VnetHeader};

/// Largest IP packet a record may carry (the TUN/GSO limit): 64 KiB − 1.
pub const MAX_IP_LEN: usize = 65_535;
