//! The Internet2 Land Speed Record: the historical table (every published
//! mark found in Internet2's pages and the teams' announcements, and the Data
//! Reservoir series of seed 004, each with its source), the check that every
//! published metric comes back from its rate × distance within the quoted
//! rounding, the check of quoted bytes and seconds against the rate (the
//! seeds mix decimal and binary units), the contest rules as a checker
//! ([`check()`]) and a leaderboard per class ([`leaderboard()`]).
//!
//! Rounding: a quoted figure is good to half a unit in its last digit
//! ("2.38" ± 0.005; "148.9 Pb·m/s" ± 0.05 Pb·m/s); a figure quoted as
//! approximate ("≈5.6", "~600 s") to one unit in its last digit for rates
//! and 10 % for times. Distances are the official (capped) ones and exact.
//! A run on the emulator is never eligible: the record counts real
//! terrestrial layer-3 paths only.
//!
//! One module per job: `table` (the rows and their vocabulary), `check`
//! (each row's figures against each other), `rules` (a run against the
//! contest rules) and `leaderboard` (runs and records ranked per class).

mod check;
mod leaderboard;
mod rules;
mod table;

pub use check::{
    MetricCheck, UnitsCheck, class_record, published_metric, rate_bps, recompute, table_markdown,
    units_check,
};
pub use leaderboard::{ClassBoard, Origin, Standing, leaderboard};
pub use rules::{Candidate, Rule, RuleResult, Verdict, check, check_against, eligible};
pub use table::{
    CLASSES, Class, Ip, MetricKind, Published, Quoted, RECORDS, Reading, RecordRow, Streams, Table,
    TimeKind, records,
};
