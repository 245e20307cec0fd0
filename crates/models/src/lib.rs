//! longhaul-models: the pure computations behind `longhaul calc` and `longhaul doctor`. Depends on
//! `longhaul-units` and serde; the binary's calc and doctor subcommands use it, and
//! `longhaul_engine::doctor` fills its [`tuning::HostSnapshot`]. Start at [`tuning::evaluate`] (doctor)
//! or [`calc`] (the calculator).
//!
//! - [`calc`]: one serialisable report per calculator subcommand (`bdp`, `mathis`, `responsiveness`,
//!   `lsr`, `path`), built from parsed inputs with the formulas of `longhaul_units::models`; every report
//!   carries base units and display strings, so the binary only chooses text or JSON.
//! - [`tuning`]: host tuning for a target path: the [`tuning::HostSnapshot`] facts (plain data, gathered
//!   by `longhaul_engine::doctor`), the rules that turn them into [`tuning::Finding`]s with exact fixes,
//!   the `/etc/sysctl.d` snippet, and the parsers of `tc qdisc show` and `ethtool -k` output (the
//!   latter also for `longhaul lab`'s host records).
//!
//! The crate is pure: no I/O, no clock, no randomness (docs/ARCHITECTURE.md).

pub mod calc;
pub mod tuning;
