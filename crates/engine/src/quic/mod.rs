//! `--transport udp`: a test's data connections as QUIC connections over UDP (quinn), one per
//! stream, so each has its own congestion controller as a TCP stream does.
//!
//! The flows are set up as a `-u` test's are (`crate::udp`): the client's socket says hello with
//! the session's cookie, the server answers from a socket of its own bound to its port and
//! connected to the client's address and port. Each pair of sockets then carries one QUIC
//! connection: TLS 1.3 with the server's certificate (pinned to the control connection's with
//! `--encrypt`; without it, as a plain test, encrypted but not authenticated), one unidirectional
//! stream from the sending side, flow-control windows of the plan's 2 × BDP per stream (never
//! quinn's defaults, which cap a long path), UDP GSO/GRO and batched system calls from quinn-udp,
//! and pacing by quinn from the controller's window.
//!
//! quinn is asynchronous; the engine is threads. One small tokio runtime per process drives every
//! endpoint (packet I/O, encryption, timers), and each stream's worker thread blocks on its own
//! stream's reads or writes (`Runtime::block_on`), so a worker's loop reads as a TCP worker's does.

mod controller;
mod flow;
#[cfg(test)]
mod hostile;
mod model;
mod stream;
mod udt;

pub(crate) use flow::{Counters, FlowPlan, QuicFlow, QuicListener, runtime_cpu, size_buffers};
pub(crate) use stream::{FlowHandle, QuicStream};
