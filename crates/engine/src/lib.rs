//! longhaul-engine: the I/O shell that runs memory-to-memory tests ([`client`], [`server`]) and
//! disk-to-disk transfers ([`transfer`]) over real sockets and files, and reads this host's facts
//! ([`doctor`]). It owns the sockets, threads and clock; what it decides comes from the pure crates
//! `longhaul-proto`, `longhaul-transfer` and `longhaul-models`, and its system calls from
//! `longhaul-sys`. The binary's test, server, send, get and doctor call it. Start at [`client`].
//!
//! It drives the pure types of `longhaul-proto` (each side's conversation machine, messages, window
//! plan, interval accounting, report) with blocking sockets, one thread per data stream, and the system
//! calls of `longhaul-sys` (buffers, congestion control, pacing, TCP_INFO, CPU time):
//!
//! - [`server`]: `longhaul server`, many tests (and transfers) at once on one port;
//! - [`client`]: `longhaul test HOST`;
//! - [`transfer`]: `longhaul send`/`get` and the server's side of them;
//! - [`job`]: a controller's jobs (`longhaul test A --to B`, `longhaul copy A:PATH B:DEST`): the
//!   server runs them, the controller asks and reads the reports (`longhaul-fleet`'s conversation);
//! - [`probe`]: the probe stream of `longhaul monitor`'s latency tests (the server's reflector and
//!   the client), `proto::probe`'s rules over a TCP control connection and UDP probes;
//! - [`doctor`]: this host's facts and tuning findings;
//! - [`find_rate`]: `test -u --find-rate`, the search for the highest loss-free rate (RFC 2544);
//! - [`isolate`]: `longhaul isolate`, the faulty segment of a path by bisection over reflectors
//!   (raw ICMP echo; `longhaul-isolate` decides);
//! - [`tls`], `channel`: `--encrypt` (TLS 1.3 on every connection) and the byte stream every
//!   conversation reads and writes, plain or encrypted;
//! - `control`: the framed control connection of tests and transfers (`proto::frame`, deadlines);
//! - `run`, `stream`, `socket`, `payload`, [`zerocopy`]: one side of a running test, its stream
//!   workers, data-socket set-up, the bytes sent and `-Z`;
//! - `pacer`: `--pace auto`'s governor thread on a sending side (`proto::auto_pace` decides);
//! - `udp`: the UDP flows of `test -u` (their set-up, the paced sender, the receiver);
//! - `iperf3`: iperf3's protocol on real sockets: `test` against a stock iperf3 server (the
//!   server's side of it is in [`server`]);
//! - `address`, `random`, `clock`, `error`: name resolution by family, randomness, the Unix clock in
//!   ns, the error type.

mod address;
mod channel;
mod clock;
mod control;
mod error;
mod fast_start;
mod iperf3;
mod pacer;
mod payload;
mod quic;
mod random;
mod run;
mod socket;
mod stream;
mod udp;
mod watcher;

pub mod client;
pub mod doctor;
pub mod find_rate;
pub mod isolate;
pub mod job;
pub mod probe;
pub mod server;
pub mod tls;
pub mod transfer;
pub mod zerocopy;

pub use address::Family;
pub use client::{ClientConfig, Observer, Quiet, ServerProtocol, run_test};
pub use error::EngineError;
pub use job::{
    ClockOffset, Controllers, CopyResult, JobClient, RemoteCopy, RemoteTest, STRIPE_CHUNK,
    StripePair, StripedResult, TestTo, run_remote_copy, run_remote_test, run_striped_copy,
};
pub use probe::{ProbeConfig, run_probe};
pub use server::{DEFAULT_PORT, Server, ServerConfig, ServerSnapshot, ServerStats};

/// This software's name and version, as peers and reports show it.
pub const SOFTWARE: &str = concat!("longhaul ", env!("CARGO_PKG_VERSION"));
