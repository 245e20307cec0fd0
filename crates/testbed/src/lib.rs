//! The reservation domain of `longhaul testbed` (issue 6), pure: no I/O, no
//! database, no threads, and no clock (every operation takes `now`). Depends on
//! `longhaul-topology` (resources discovered from topology files),
//! `longhaul-units`, jiff (zones and DST), toml, quick-xml, blake3, serde and
//! thiserror; `longhaul-web` stores and serves it. Start at [`booking`], then
//! [`decide`].
//!
//! - [`resource`]: sites, hosts, links, lambdas and sub-circuits as a tree;
//!   discovery from topology files and an inventory file.
//! - [`time`]: UTC slots, strict RFC 3339, IANA zones, DST transitions.
//! - [`policy`]: booking-time policy with a stated reason for each refusal.
//! - [`booking`]: the reservation state machine, the audit log and the
//!   in-memory [`booking::Ledger`] that is the oracle for the database stores.
//! - [`decide`]: the service's decisions on a stored booking (confirm, release,
//!   cancel, extend, preempt, approve, decline) and free slots, which the
//!   database stores apply inside their transactions.
//! - [`idempotency`]: idempotency keys for retried API calls.
//! - [`ical`]: iCalendar feeds per user and per resource.
//! - [`operations`]: who may power or watch a host (the holder of an active
//!   booking, or an admin with a reason) and the operations log's bodies.
//! - [`api`] and [`xml`]: the REST bodies, in JSON and in XML.
//!
//! The rules and the database design are in `docs/testbed.md`.

pub mod agents;
pub mod api;
pub mod booking;
pub mod decide;
pub mod ical;
pub mod idempotency;
pub mod operations;
pub mod policy;
pub mod resource;
pub mod time;
pub mod xml;
