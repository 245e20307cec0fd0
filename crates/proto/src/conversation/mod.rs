//! The test conversation (hello … results, see [`crate::msg`]) as two sans-IO state machines, one per
//! side, in the manner of quinn-proto's `Connection`: [`client::Client`] and [`server::Server`] own
//! every rule of the conversation (which message is valid in which phase, each step's deadline, the
//! end of the test by time or bytes, the drain deadline, the pairing of both sides' intervals, the end
//! report) and never touch a socket, a thread or the clock. The engine drives them: it owns the
//! control connection, the data connections, the stream threads and the clock.
//!
//! Time is a [`Time`]: the time elapsed since an origin the driver picks once (monotonic). Every
//! call that may start or end a deadline takes `now`.
//!
//! # Call order (both sides)
//!
//! 1. Create the machine once the control connection is up (the client's preamble written; the
//!    server's session admitted).
//! 2. Loop until `is_over()`:
//!    - drain `poll_event()` and act on each event in order (an event may ask the driver to do
//!      something that takes a while, such as opening the data connections, and to report back
//!      through one of the machine's methods; an event that makes the driver wait on something other
//!      than the control connection says to send what `poll_transmit()` holds first);
//!    - send every message `poll_transmit()` gives, in order;
//!    - wait for the next control message until `poll_timeout()` (or the driver's own next interval
//!      tick, whichever is first); feed a message to `handle(msg, now)`; when the wait times out,
//!      report local facts first (interval samples, progress) and then call `handle_timeout(now)`.
//! 3. An `Err` from any call ends the conversation: the machine transmits nothing more, and the
//!    driver reports the error (the server also sends it to the client as an `Error` message).
//!
//! A peer's `Error` message ends the conversation with [`Error::Peer`] in any phase. Calls that report
//! local facts outside the phase they answer are ignored.
//!
//! # Bounds
//!
//! After any one call, at most two messages wait in `poll_transmit` and at most three events plus the
//! intervals that call completed wait in `poll_event` (the fuzz target `test_conversation` checks
//! it). The client holds one entry per interval index it was given until the end report, as many as
//! the server sends; the server holds nothing that grows.

pub mod client;
mod common;
pub mod server;

pub use common::{Error, Time, cookie_hex, drain_timeout, parse_cookie, tail_grace};

#[cfg(test)]
mod tests;
