//! Pure core of longhaul's controller (issue 14): a controller asks a server to act on its behalf,
//! and never carries the data itself.
//!
//! - [`msg`]: the job conversation's messages, in the frames of every longhaul control connection
//!   (`longhaul_proto::frame`), opened by the same mutual challenge–response and sealed with the same
//!   session MACs as a transfer (`longhaul_transfer::auth`, `longhaul_transfer::session`).
//! - [`campaign`]: campaign files (many pairs at one instant) and the arithmetic of their result;
//! - [`controllers`]: the controllers a server accepts (`longhaul server --controllers FILE`), each
//!   with its key and its limits, and the check of a job against them;
//! - [`trace`]: a trace's hops, from the output of the `traceroute` a server runs for a `Trace` job.
//!
//! No sockets, threads or clock here; `longhaul-engine` drives the conversation.

pub mod campaign;
pub mod controllers;
pub mod msg;
pub mod trace;

pub use controllers::{ControllerSpec, Limits, parse_controllers};
pub use msg::{JOB_VERSION, JobError, JobMessage};
