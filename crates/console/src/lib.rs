//! Serial console capture for testbed hosts (issue 20): seed 000 §7.2's "store and retrieve remotely
//! the information that Linux servers send to their console ports during the boot sequence or when
//! they crash". [`capture`] reads consoles where they are exposed (TCP and Unix sockets, devices,
//! netconsole's UDP); [`lines`] cuts their bytes into bounded, escaped lines; [`detect`] marks
//! boots, oopses and panics. The service (`crates/web`) archives the lines and serves them.

pub mod capture;
pub mod detect;
pub mod lines;

pub use capture::{Captured, Limits, Source};
pub use detect::Mark;
