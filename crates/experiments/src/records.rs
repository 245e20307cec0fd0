//! The Internet2 Land Speed Record: the historical table (every row of
//! notes/models-and-records.md §2.2 and the Data Reservoir series of seed
//! 004, each with its source), the check that every published metric comes
//! back from its rate × distance within the quoted rounding, the check of
//! quoted bytes and seconds against the rate (the seeds mix decimal and
//! binary units, §2.3), the contest rules as a checker ([`check`]) and a
//! leaderboard per class ([`leaderboard`]).
//!
//! Rounding: a quoted figure is good to half a unit in its last digit
//! ("2.38" ± 0.005; "148.9 Pb·m/s" ± 0.05 Pb·m/s); a figure quoted as
//! approximate ("≈5.6", "~600 s") to one unit in its last digit for rates
//! and 10 % for times. Distances are the official (capped) ones and exact.
//! A run on the emulator is never eligible: the record counts real
//! terrestrial layer-3 paths only.

use longhaul_units::{LSR_IMPROVEMENT, LSR_MAX_KM, LSR_MIN_HOPS, LSR_MIN_KM, LSR_MIN_SECONDS};
use longhaul_units::{fmt_lsr, lsr_beats, lsr_capped_km, lsr_metric_capped};
use serde::{Deserialize, Serialize};

/// IP version of a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Ip {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// Stream count of a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Streams {
    /// One TCP stream.
    Single,
    /// Several streams.
    Multi,
}

/// One of the four record classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Class {
    /// IPv4 or IPv6.
    pub ip: Ip,
    /// Single or multiple streams.
    pub streams: Streams,
}

const V4S: Class = Class {
    ip: Ip::V4,
    streams: Streams::Single,
};
const V4M: Class = Class {
    ip: Ip::V4,
    streams: Streams::Multi,
};
const V6S: Class = Class {
    ip: Ip::V6,
    streams: Streams::Single,
};
const V6M: Class = Class {
    ip: Ip::V6,
    streams: Streams::Multi,
};

/// The four classes (IPv4/IPv6 × single/multi-stream).
pub const CLASSES: [Class; 4] = [V4S, V4M, V6S, V6M];

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ip = match self.ip {
            Ip::V4 => "IPv4",
            Ip::V6 => "IPv6",
        };
        let s = match self.streams {
            Streams::Single => "single-stream",
            Streams::Multi => "multi-stream",
        };
        write!(f, "{ip} {s}")
    }
}

/// How a published metric is stated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetricKind {
    /// The mark as announced.
    Exact,
    /// Announced as a lower bound (">104,500").
    AtLeast,
    /// Not announced: computed by the notes from rate × distance.
    Derived,
    /// Inferred or approximate ("~150,000").
    Approx,
}

/// A published metric as quoted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    /// The figure as written, without separators' meaning lost ("23,888",
    /// "148.9").
    pub value: &'static str,
    /// True when quoted in Pb·m/s (seed 004), else Tb·m/s.
    pub petabit: bool,
    /// How it was stated.
    pub kind: MetricKind,
}

/// How a quoted time is stated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimeKind {
    /// As quoted.
    Exact,
    /// "about", "~": good to 10 %.
    About,
    /// "less than": an upper bound.
    UpperBound,
}

/// Quoted bytes and time of a record run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quoted {
    /// The byte figure as written ("560").
    pub bytes: &'static str,
    /// Its prefix power: 2 = M(B), 3 = G(B), 4 = T(B).
    pub power: u32,
    /// The time figure as written ("1200", "27").
    pub time: &'static str,
    /// Seconds per unit of `time` (1 or 60).
    pub time_unit_s: u32,
    /// How the time is stated.
    pub time_kind: TimeKind,
}

/// Which reading of "GB" (10^9 or 2^30) makes bytes ÷ seconds agree with the
/// quoted rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reading {
    /// Only the decimal reading agrees.
    Decimal,
    /// Only the binary reading (iperf's "GBytes") agrees.
    Binary,
    /// Both agree (the time is too rough to tell).
    Either,
    /// Neither agrees: the figures contradict each other.
    Neither,
}

/// Which list a row comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Table {
    /// notes/models-and-records.md §2.2.
    Notes,
    /// Seed 004's "The progress" slides (Data Reservoir, U Tokyo).
    DataReservoir,
}

/// One historical record (or claimed record).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RecordRow {
    /// Date as the source gives it (announcements are marked "ann.").
    pub date: &'static str,
    /// Team.
    pub team: &'static str,
    /// Classes the mark held (empty before the classes were split).
    pub classes: &'static [Class],
    /// The class as the source words it, with doubts.
    pub class_note: &'static str,
    /// Route.
    pub route: &'static str,
    /// Counted distance, km (capped at 30,000).
    pub km: Option<f64>,
    /// Real distance when the cap applied.
    pub real_km: Option<f64>,
    /// Published average rate in Gbit/s as written ("2.38", ">0.830",
    /// "≈5.6").
    pub rate: Option<&'static str>,
    /// Published metric.
    pub metric: Option<Published>,
    /// Quoted bytes and time, when given.
    pub quoted: Option<Quoted>,
    /// Whether rate × km reproduces the metric within rounding (`None`: not
    /// computable). Tested against [`recompute`] for every row.
    pub metric_agrees: Option<bool>,
    /// Which byte unit makes the quoted bytes and time agree with the rate.
    /// Tested against [`units_check`] for every row.
    pub reading: Option<Reading>,
    /// Which table.
    pub table: Table,
    /// Where the row comes from.
    pub source: &'static str,
    /// What is odd about it (required when `metric_agrees` is false or the
    /// reading is not the unit the source implies).
    pub note: &'static str,
}

const fn t(value: &'static str, kind: MetricKind) -> Option<Published> {
    Some(Published {
        value,
        petabit: false,
        kind,
    })
}

const fn pb(value: &'static str) -> Option<Published> {
    Some(Published {
        value,
        petabit: true,
        kind: MetricKind::Exact,
    })
}

const fn q(
    bytes: &'static str,
    power: u32,
    time: &'static str,
    unit: u32,
    kind: TimeKind,
) -> Option<Quoted> {
    Some(Quoted {
        bytes,
        power,
        time,
        time_unit_s: unit,
        time_kind: kind,
    })
}

use MetricKind::{Approx, AtLeast, Derived, Exact};
use TimeKind::{About, UpperBound};

const TOKYO: &str = "U Tokyo, WIDE, Fujitsu, NTT Com, Chelsio et al. (Data Reservoir)";
const SEED_004: &str = "seed 004 (Data Reservoir / U Tokyo LSR slides), 'The progress'";

/// Every row of notes §2.2, then the Data Reservoir series of seed 004.
pub const RECORDS: &[RecordRow] = &[
    RecordRow {
        date: "2000-03-28",
        team: "UW, USC-ISI, Qwest, Microsoft (HSCC net)",
        classes: &[],
        class_note: "IPv4; classes not yet split",
        route: "Redmond WA -> Arlington VA",
        km: None,
        real_km: None,
        rate: Some(">0.830"),
        metric: None,
        quoted: None,
        metric_agrees: None,
        reading: None,
        table: Table::Notes,
        source: "supercomputingonline 21286",
        note: "8.4 GB moved; no distance or metric published",
    },
    RecordRow {
        date: "2002-05 (ann. 05-07)",
        team: "U Alaska, UvA, SURFnet",
        classes: &[V4S],
        class_note: "IPv4",
        route: "Fairbanks -> Amsterdam",
        km: Some(12_272.0),
        real_km: None,
        rate: Some("0.401"),
        metric: t("4,921", Derived),
        quoted: q("625", 2, "13", 1, TimeKind::Exact),
        metric_agrees: Some(true),
        reading: Some(Reading::Binary),
        table: Table::Notes,
        source: "alaska.edu enews 2002/0507",
        note: "625 MB in 13 s is 0.403 Gbit/s with MB = 2^20 (0.385 with 10^6): binary units; early entry far shorter than the later 10-minute rule",
    },
    RecordRow {
        date: "2002-11 (SC2002)",
        team: "NIKHEF, SLAC, Caltech, UvA (+CERN, DataTAG)",
        classes: &[V4S],
        class_note: "IPv4 single",
        route: "Sunnyvale <-> Amsterdam",
        km: Some(10_978.0),
        real_km: None,
        rate: Some("0.923"),
        metric: t("9,891.6", Exact),
        quoted: q("6.7", 3, "58", 1, TimeKind::Exact),
        metric_agrees: Some(false),
        reading: Some(Reading::Decimal),
        table: Table::Notes,
        source: "cerncourier.com (laboratories link up); nanog.org abstract 719",
        note: "published metrics disagree with rate x distance: 9,891.6 (CERN Courier) and 10,619 (Cottrell, NANOG28) against 0.923 x 10,978 = 10,133",
    },
    RecordRow {
        date: "2002-11 (SC2002)",
        team: "Caltech, SLAC, LANL",
        classes: &[V4M],
        class_note: "multi (10 streams, FAST); recognition not confirmed",
        route: "Sunnyvale - Baltimore",
        km: None,
        real_km: None,
        rate: Some("8.6"),
        metric: None,
        quoted: None,
        metric_agrees: None,
        reading: None,
        table: Table::Notes,
        source: "NANOG28 abstract",
        note: "no distance or metric found",
    },
    RecordRow {
        date: "2003-02-27/28",
        team: "Caltech, CERN, SLAC, LANL",
        classes: &[V4S],
        class_note: "IPv4 single",
        route: "Sunnyvale - Chicago - Geneva",
        km: Some(10_037.0),
        real_km: None,
        rate: Some("2.38"),
        metric: t("23,888", Exact),
        quoted: q("1.1", 4, "3700", 1, TimeKind::Exact),
        metric_agrees: Some(true),
        reading: Some(Reading::Decimal),
        table: Table::Notes,
        source: "www-iepm.slac.stanford.edu/lsr2 (+submit2); seed 000",
        note: "",
    },
    RecordRow {
        date: "2003-02-27/28",
        team: "Caltech, CERN, SLAC, LANL",
        classes: &[V4M],
        class_note: "IPv4 multi (3 streams, 180 s: under 10 min, acceptance unknown)",
        route: "Sunnyvale - Chicago - Geneva",
        km: Some(10_037.0),
        real_km: None,
        rate: Some("2.335"),
        metric: t("23,436", Exact),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::Notes,
        source: "www-iepm.slac.stanford.edu/lsr2/submit2",
        note: "",
    },
    RecordRow {
        date: "2003-06 (ann. 06-26)",
        team: "Caltech, CERN (DataTAG)",
        classes: &[V6S],
        class_note: "IPv6 single (and multi, 'near 1 Gbps')",
        route: "Geneva - Chicago",
        km: Some(7_067.0),
        real_km: None,
        rate: Some("0.983"),
        metric: t("6,947", Exact),
        quoted: q("412", 3, "3600", 1, TimeKind::Exact),
        metric_agrees: Some(true),
        reading: Some(Reading::Binary),
        table: Table::Notes,
        source: "internet2.edu/news/detail/1902; seed 000",
        note: "412 GB are iperf GBytes (2^30): 0.983 Gbit/s; read as 10^9 they give 0.916",
    },
    RecordRow {
        date: "2003-10 (award 10-16)",
        team: "Caltech, CERN",
        classes: &[V4S],
        class_note: "IPv4 (single)",
        route: "Geneva - Chicago",
        km: Some(7_067.0),
        real_km: None,
        rate: Some("5.44"),
        metric: t("38,420", Exact),
        quoted: q("1.1", 4, "1620.5", 1, TimeKind::Exact),
        metric_agrees: Some(true),
        reading: Some(Reading::Decimal),
        table: Table::Notes,
        source: "press.web.cern.ch 2003/10; tweakers 29260; seed 000",
        note: "the mark comes from exact bytes and seconds: 5.44 x 7,067 = 38,444, not 38,420 (within the rate's rounding)",
    },
    RecordRow {
        date: "2004 (before 04-20)",
        team: "Caltech, CERN",
        classes: &[V6S],
        class_note: "IPv6 (single)",
        route: "Geneva - Chicago - Los Angeles",
        km: Some(11_539.0),
        real_km: None,
        rate: Some("4.00"),
        metric: t("46,156", Exact),
        quoted: q("560", 3, "1200", 1, TimeKind::Exact),
        metric_agrees: Some(true),
        reading: Some(Reading::Binary),
        table: Table::Notes,
        source: "I2 news 2004-04-20; seeds 000, 001",
        note: "560 GB are iperf GBytes (2^30): 4.009 Gbit/s; read as 10^9 they give 3.73",
    },
    RecordRow {
        date: "2004 (seed)",
        team: "Caltech, CERN",
        classes: &[V4S],
        class_note: "IPv4 (class per seed 000; single by inference, notes §2.3)",
        route: "Los Angeles - Geneva",
        km: Some(10_949.0),
        real_km: None,
        rate: Some("≈5.6"),
        metric: t("61,752", Exact),
        quoted: q("2.3", 4, "3600", 1, TimeKind::Exact),
        metric_agrees: Some(true),
        reading: Some(Reading::Binary),
        table: Table::Notes,
        source: "seed 000 only",
        note: "2.3 TB in an hour is 5.62 Gbit/s only with TB = 2^40 (5.11 with 10^12)",
    },
    RecordRow {
        date: "2004 (ann. 04-20)",
        team: "Caltech, CERN",
        classes: &[V4M],
        class_note: "IPv4 (multi by inference: SUNET's '+12 %' matches 61,752, notes §2.3)",
        route: "Los Angeles -> Geneva",
        km: Some(10_949.0),
        real_km: None,
        rate: Some("6.25"),
        metric: t("68,431", Exact),
        quoted: q("499", 3, "600", 1, About),
        metric_agrees: Some(true),
        reading: Some(Reading::Decimal),
        table: Table::Notes,
        source: "lists.internet2.edu i2-news 2004-04 msg00005",
        note: "'~600 s' is rough: 499 GB at 6.25 Gbit/s takes 639 s (decimal)",
    },
    RecordRow {
        date: "2004 (seed)",
        team: "Caltech, CERN",
        classes: &[V4S],
        class_note: "IPv4 (class per seed 000, unconfirmed)",
        route: "Los Angeles - Geneva",
        km: Some(10_949.0),
        real_km: None,
        rate: Some("≈7.09"),
        metric: t("77,699", Exact),
        quoted: q("860", 3, "970", 1, TimeKind::Exact),
        metric_agrees: Some(true),
        reading: Some(Reading::Decimal),
        table: Table::Notes,
        source: "seed 000 only",
        note: "77,699 implies 7.0965 Gbit/s, which rounds to 7.10, not 7.09",
    },
    RecordRow {
        date: "2004-04-14 (ann. 06)",
        team: "Sprint, SUNET",
        classes: &[V4S],
        class_note: "IPv4 single (production networks, NetBSD, ttcp)",
        route: "San Jose -> Lulea",
        km: Some(16_346.0),
        real_km: None,
        rate: Some("4.23"),
        metric: t("69,073", Exact),
        quoted: q("840", 3, "27", 60, UpperBound),
        metric_agrees: Some(true),
        reading: Some(Reading::Decimal),
        table: Table::Notes,
        source: "SUNET LSR page (14 April 2004); zdnet; networkworld",
        note: "",
    },
    RecordRow {
        date: "2004 (ann. 09-01)",
        team: "Caltech, CERN (+AMD, Cisco, MSR, Newisys, S2io)",
        classes: &[V4S],
        class_note: "IPv4 (single)",
        route: "Geneva -> Pasadena",
        km: Some(15_766.0),
        real_km: None,
        rate: Some("6.63"),
        metric: t("104,500", AtLeast),
        quoted: q("859", 3, "17", 60, UpperBound),
        metric_agrees: Some(true),
        reading: Some(Reading::Neither),
        table: Table::Notes,
        source: "pma.caltech.edu news 882; neowin",
        note: "'859 GB in less than 17 min' contradicts 6.63 Gbit/s: that rate needs 1,036 s (17.3 min) for 859 x 10^9 bytes and 1,113 s for 859 x 2^30",
    },
    RecordRow {
        date: "2004 (ann. 09-30)",
        team: "Sprint, SUNET",
        classes: &[V4S],
        class_note: "IPv4 (single)",
        route: "Sweden <-> US loop",
        km: Some(29_000.0),
        real_km: None,
        rate: Some("4.31"),
        metric: t("124,900", AtLeast),
        quoted: q("1830", 3, "60", 60, About),
        metric_agrees: Some(true),
        reading: Some(Reading::Either),
        table: Table::Notes,
        source: "lists.internet2.edu i2-news 2004-09 msg00006",
        note: "distance 'nearly' 29,000 km; '~60 min' cannot tell decimal from binary GB",
    },
    RecordRow {
        date: "2004-11/12",
        team: "U Tokyo, Fujitsu, WIDE (Foundry gear)",
        classes: &[V4M],
        class_note: "IPv4 multi (seed 004 says single)",
        route: "Tokyo loop",
        km: Some(20_645.0),
        real_km: None,
        rate: Some("7.21"),
        metric: t("148,850", Exact),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::Notes,
        source: "xbiz 6979; seed 004",
        note: "",
    },
    RecordRow {
        date: "2004-11/12",
        team: "Caltech, CERN, CENIC",
        classes: &[V4S],
        class_note: "IPv4 single",
        route: "n/a",
        km: None,
        real_km: None,
        rate: None,
        metric: t("150,000", Approx),
        quoted: None,
        metric_agrees: None,
        reading: None,
        table: Table::Notes,
        source: "xbiz 6979; pnwgp 2005-05-04",
        note: "inferred: in May 2005 Tokyo beat 'the existing Single-Stream record by over 66,000'",
    },
    RecordRow {
        date: "2005 (ann. 05-04)",
        team: TOKYO,
        classes: &[V4S, V4M],
        class_note: "IPv4 single & multi",
        route: "WIDE - APAN - JGN2 - IEEAF - CANARIE - SURFnet - Abilene",
        km: Some(30_000.0),
        real_km: None,
        rate: Some("7.21"),
        metric: t("216,300", Exact),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::Notes,
        source: "pnwgp.net/news/2005/5/4",
        note: "",
    },
    RecordRow {
        date: "2005 (ann. 05-04)",
        team: "Caltech, CERN",
        classes: &[V6S, V6M],
        class_note: "IPv6 single & multi",
        route: "n/a",
        km: None,
        real_km: None,
        rate: None,
        metric: None,
        quoted: None,
        metric_agrees: None,
        reading: None,
        table: Table::Notes,
        source: "pnwgp.net/news/2005/5/4",
        note: "gap: the available text stops before the figures",
    },
    RecordRow {
        date: "2005-11-14 (SC05)",
        team: TOKYO,
        classes: &[V6S, V6M],
        class_note: "IPv6 single & multi",
        route: "WIDE, IEEAF, JGN2 ...",
        km: Some(30_000.0),
        real_km: None,
        rate: Some("5.58"),
        metric: t("167,400", Exact),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::Notes,
        source: "glif.is/apps/datares.html",
        note: "seed 004 dates 5.58 Gbit/s to Oct 29, 2005",
    },
    RecordRow {
        date: "~2005-12 to 2006",
        team: TOKYO,
        classes: &[V4S, V4M],
        class_note: "IPv4 single & multi",
        route: "8 networks",
        km: Some(30_000.0),
        real_km: None,
        rate: Some("7.99"),
        metric: t("239,820", Exact),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::Notes,
        source: "supercomputingonline 13066",
        note: "7.99 x 30,000 = 239,700; the mark implies unrounded figures",
    },
    RecordRow {
        date: "~2005-12 to 2006",
        team: TOKYO,
        classes: &[V6S, V6M],
        class_note: "IPv6 single & multi",
        route: "5 networks",
        km: Some(30_000.0),
        real_km: None,
        rate: Some("6.18"),
        metric: t("185,400", Exact),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::Notes,
        source: "supercomputingonline 13066",
        note: "+10.75 % over 167,400",
    },
    RecordRow {
        date: "2006-02 (ann. 04-26)",
        team: TOKYO,
        classes: &[V4S, V4M],
        class_note: "IPv4 single & multi",
        route: "8 networks/exchanges",
        km: Some(30_000.0),
        real_km: None,
        rate: Some("8.80"),
        metric: t("264,147", Exact),
        quoted: q("2.98", 4, "45", 60, TimeKind::Exact),
        metric_agrees: Some(true),
        reading: Some(Reading::Decimal),
        table: Table::Notes,
        source: "internet2.edu/lsr; pnwgp 2006-04-26; rcpmag",
        note: "8.80 x 30,000 = 264,000; the mark uses the exact rate (8.8049)",
    },
    RecordRow {
        date: "ann. 2006-04-26",
        team: TOKYO,
        classes: &[V6S, V6M],
        class_note: "IPv6 single & multi ('receiving-side pacing')",
        route: "5 networks",
        km: Some(30_000.0),
        real_km: None,
        rate: Some("6.96"),
        metric: t("208,800", Exact),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::Notes,
        source: "pnwgp 2006-04-26; glif",
        note: "rcpmag dates it November 2005",
    },
    RecordRow {
        date: "2006-12-30",
        team: TOKYO,
        classes: &[V6S, V6M],
        class_note: "IPv6 single & multi, standard TCP",
        route: "Tokyo - Chicago - Amsterdam - Seattle - Tokyo",
        km: Some(30_000.0),
        real_km: Some(32_372.0),
        rate: Some("7.67"),
        metric: t("230,100", Exact),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::Notes,
        source: "startap.net/translight (2007 data)",
        note: "",
    },
    RecordRow {
        date: "2006-12-31 (ann. 2007-04-24)",
        team: TOKYO,
        classes: &[V6S, V6M],
        class_note: "IPv6 single & multi, modified TCP",
        route: "Tokyo - Chicago - Amsterdam - Seattle - Tokyo (SURFnet links)",
        km: Some(30_000.0),
        real_km: Some(32_372.0),
        rate: Some("9.08"),
        metric: t("272,400", Exact),
        quoted: q("20.42", 4, "300", 60, About),
        metric_agrees: Some(true),
        reading: Some(Reading::Either),
        table: Table::Notes,
        source: "internet2.edu/lsr; rcpmag 2007-04-25; daniweb",
        note: "Internet2: 20.42 TB in 'about 300 minutes' (too rough to tell TB from TiB); the press's '585 GB in 30 minutes' (2.6 Gbit/s) contradicts the rate",
    },
    // Seed 004's own list of the Data Reservoir marks (rates and Pb·m/s).
    RecordRow {
        date: "2004-11-09 (SC04)",
        team: TOKYO,
        classes: &[V4S],
        class_note: "IPv4 single (seed 004; notes list multi)",
        route: "Geneva, Tokyo, Chicago, Pittsburgh",
        km: Some(20_645.0),
        real_km: None,
        rate: Some("7.21"),
        metric: pb("148.9"),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::DataReservoir,
        source: SEED_004,
        note: "",
    },
    RecordRow {
        date: "2004-12-24",
        team: TOKYO,
        classes: &[V4S, V4M],
        class_note: "IPv4 single/multiple",
        route: "n/a (30,000 km counted)",
        km: Some(30_000.0),
        real_km: None,
        rate: Some("7.21"),
        metric: pb("216.3"),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::DataReservoir,
        source: SEED_004,
        note: "",
    },
    RecordRow {
        date: "2005-10-28",
        team: TOKYO,
        classes: &[V6S, V6M],
        class_note: "IPv6 single/multiple",
        route: "15,461 km path",
        km: Some(15_461.0),
        real_km: None,
        rate: Some("5.94"),
        metric: pb("91.8"),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::DataReservoir,
        source: SEED_004,
        note: "not in the notes' table",
    },
    RecordRow {
        date: "2005-10-29",
        team: TOKYO,
        classes: &[V6S, V6M],
        class_note: "IPv6 single/multiple",
        route: "n/a (30,000 km counted)",
        km: Some(30_000.0),
        real_km: None,
        rate: Some("5.58"),
        metric: pb("167.4"),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::DataReservoir,
        source: SEED_004,
        note: "GLIF dates this mark Nov 14, 2005",
    },
    RecordRow {
        date: "2005-11-10 (SC05)",
        team: TOKYO,
        classes: &[V4S, V4M],
        class_note: "IPv4 single/multiple",
        route: "n/a (30,000 km counted)",
        km: Some(30_000.0),
        real_km: None,
        rate: Some("7.99"),
        metric: pb("239.8"),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::DataReservoir,
        source: SEED_004,
        note: "",
    },
    RecordRow {
        date: "2005-11-13 (SC05)",
        team: TOKYO,
        classes: &[V6S, V6M],
        class_note: "IPv6 single/multiple",
        route: "n/a (30,000 km counted)",
        km: Some(30_000.0),
        real_km: None,
        rate: Some("6.22"),
        metric: pb("185.4"),
        quoted: None,
        metric_agrees: Some(false),
        reading: None,
        table: Table::DataReservoir,
        source: SEED_004,
        note: "seed 004 prints 6.22 Gbit/s, but 185.4 Pb·m/s at 30,000 km is 6.18 Gbit/s (as supercomputingonline 13066 gives); 6.22 x 30,000 = 186.6",
    },
    RecordRow {
        date: "2005-11-14",
        team: TOKYO,
        classes: &[V6S, V6M],
        class_note: "IPv6 single/multiple",
        route: "n/a (30,000 km counted)",
        km: Some(30_000.0),
        real_km: None,
        rate: Some("6.96"),
        metric: pb("208.8"),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::DataReservoir,
        source: SEED_004,
        note: "",
    },
    RecordRow {
        date: "2006-02-20",
        team: TOKYO,
        classes: &[V4S, V4M],
        class_note: "IPv4 single/multiple",
        route: "n/a (30,000 km counted)",
        km: Some(30_000.0),
        real_km: None,
        rate: Some("8.80"),
        metric: pb("264.1"),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::DataReservoir,
        source: SEED_004,
        note: "",
    },
    RecordRow {
        date: "2006-12-30",
        team: TOKYO,
        classes: &[V6S, V6M],
        class_note: "IPv6 single/multiple",
        route: "Tokyo - Chicago - Amsterdam - Seattle - Tokyo",
        km: Some(30_000.0),
        real_km: Some(32_372.0),
        rate: Some("7.67"),
        metric: pb("230.1"),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::DataReservoir,
        source: SEED_004,
        note: "",
    },
    RecordRow {
        date: "2006-12-31",
        team: TOKYO,
        classes: &[V6S, V6M],
        class_note: "IPv6 single/multiple",
        route: "Tokyo - Chicago - Amsterdam - Seattle - Tokyo",
        km: Some(30_000.0),
        real_km: Some(32_372.0),
        rate: Some("9.08"),
        metric: pb("272.4"),
        quoted: None,
        metric_agrees: Some(true),
        reading: None,
        table: Table::DataReservoir,
        source: SEED_004,
        note: "'9.988 Gbps required to beat it' (seed 004): 9.08 x 1.1",
    },
];

/// The whole table.
pub fn records() -> &'static [RecordRow] {
    RECORDS
}

/// A quoted decimal: its value and half a unit in its last digit
/// ("2.38" → (2.38, 0.005); "23,888" → (23888, 0.5)). Prefixes ">", "≈",
/// "~" are stripped; `None` if it does not parse.
fn quoted(s: &str) -> Option<(f64, f64)> {
    let s: String = s
        .trim_start_matches(['>', '<', '~'])
        .trim_start_matches('≈')
        .chars()
        .filter(|c| *c != ',')
        .collect();
    let v = s.parse::<f64>().ok()?;
    let decimals = s.split_once('.').map_or(0, |(_, f)| f.len());
    Some((v, 0.5 * 10f64.powi(-(decimals as i32))))
}

fn approx(s: &str) -> bool {
    s.starts_with('≈') || s.starts_with('~')
}

/// A published rate in bit/s and its tolerance (half a unit of the last
/// digit, a whole unit when quoted as approximate).
pub fn rate_bps(row: &RecordRow) -> Option<(f64, f64)> {
    let s = row.rate?;
    let (v, half) = quoted(s)?;
    let tol = if approx(s) { 2.0 * half } else { half };
    Some((v * 1e9, tol * 1e9))
}

/// The published metric in bit·m/s and its rounding tolerance.
pub fn published_metric(row: &RecordRow) -> Option<(f64, f64)> {
    let m = row.metric?;
    let (v, half) = quoted(m.value)?;
    let scale = if m.petabit { 1e15 } else { 1e12 };
    Some((v * scale, half * scale))
}

/// A row's metric recomputed from its rate and (capped) distance.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MetricCheck {
    /// Rate × min(km, 30,000) × 1000, bit·m/s.
    pub recomputed: f64,
    /// The published figure, bit·m/s.
    pub published: f64,
    /// What the rounding of the rate and of the metric allows, bit·m/s.
    pub tolerance: f64,
    /// Whether they agree (for a lower bound: recomputed ≥ bound −
    /// tolerance).
    pub agrees: bool,
}

/// Recomputes a row's metric from its published rate and distance; `None`
/// where the rate, the distance or the metric is missing, or the metric is
/// only inferred.
pub fn recompute(row: &RecordRow) -> Option<MetricCheck> {
    let (rate, rate_tol) = rate_bps(row)?;
    let km = lsr_capped_km(row.km?);
    let (published, metric_tol) = published_metric(row)?;
    let kind = row.metric?.kind;
    if kind == MetricKind::Approx {
        return None;
    }
    let recomputed = rate * km * 1000.0;
    let tolerance = rate_tol * km * 1000.0 + metric_tol;
    let agrees = match kind {
        MetricKind::AtLeast => recomputed >= published - tolerance,
        _ => (recomputed - published).abs() <= tolerance,
    };
    Some(MetricCheck {
        recomputed,
        published,
        tolerance,
        agrees,
    })
}

/// Quoted bytes and seconds against the quoted rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct UnitsCheck {
    /// bytes × 8 / seconds with decimal prefixes, bit/s.
    pub decimal_bps: f64,
    /// The same with binary prefixes (iperf's "GBytes").
    pub binary_bps: f64,
    /// The quoted rate.
    pub rate_bps: f64,
    /// Relative tolerance from the rounding of bytes, time and rate.
    pub tolerance: f64,
    /// Which reading agrees.
    pub reading: Reading,
}

/// Checks quoted bytes and seconds against the rate; `None` without them.
/// With an upper-bound time the quoted figures give a lower bound of the
/// rate, which agrees when it does not exceed the rate.
pub fn units_check(row: &RecordRow) -> Option<UnitsCheck> {
    let qd = row.quoted?;
    let (rate, rate_half) = rate_bps(row)?;
    let (bytes, bytes_half) = quoted(qd.bytes)?;
    let (time, time_half) = quoted(qd.time)?;
    let secs = time * f64::from(qd.time_unit_s);
    let mut tolerance = bytes_half / bytes + rate_half / rate;
    tolerance += match qd.time_kind {
        TimeKind::Exact => time_half / time,
        TimeKind::About => 0.10,
        TimeKind::UpperBound => 0.0,
    };
    let power = qd.power as i32;
    let decimal_bps = bytes * 1000f64.powi(power) * 8.0 / secs;
    let binary_bps = bytes * 1024f64.powi(power) * 8.0 / secs;
    let ok = |r: f64| match qd.time_kind {
        TimeKind::UpperBound => r <= rate * (1.0 + tolerance),
        _ => (r / rate - 1.0).abs() <= tolerance,
    };
    let reading = match (ok(decimal_bps), ok(binary_bps)) {
        (true, true) => Reading::Either,
        (true, false) => Reading::Decimal,
        (false, true) => Reading::Binary,
        (false, false) => Reading::Neither,
    };
    Some(UnitsCheck {
        decimal_bps,
        binary_bps,
        rate_bps: rate,
        tolerance,
        reading,
    })
}

/// The best published mark of a class (lower bounds count at their bound;
/// inferred marks count too), with its row.
pub fn class_record(class: Class, rows: &[RecordRow]) -> Option<(f64, &RecordRow)> {
    rows.iter()
        .filter(|r| r.classes.contains(&class))
        .filter_map(|r| published_metric(r).map(|(m, _)| (m, r)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// The table as Markdown (what `longhaul lab records` and docs/lab.md
/// show): every row with its recomputed metric and the byte-unit reading.
pub fn table_markdown(rows: &[RecordRow]) -> String {
    let mut out = String::from(
        "| date | team | class | route | km | Gbit/s | published (Tb·m/s) | recomputed | metric | bytes / time | units | source | note |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let class = if r.classes.is_empty() {
            "-".to_owned()
        } else {
            r.classes
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let km = match (r.km, r.real_km) {
            (Some(k), Some(real)) => format!("{k:.0} (real {real:.0})"),
            (Some(k), None) => format!("{k:.0}"),
            _ => "n/a".into(),
        };
        let published = r.metric.map_or("-".to_owned(), |m| {
            let prefix = match m.kind {
                MetricKind::Exact => "",
                MetricKind::AtLeast => ">",
                MetricKind::Derived => "(derived) ",
                MetricKind::Approx => "~",
            };
            let unit = if m.petabit { " Pb·m/s" } else { "" };
            format!("{prefix}{}{unit}", m.value)
        });
        let check = recompute(r);
        let recomputed = check.map_or("-".to_owned(), |c| format!("{:.0}", c.recomputed / 1e12));
        let verdict = match check {
            Some(c) if c.agrees => "agrees",
            Some(_) => "**disagrees**",
            None => "-",
        };
        let quoted = r.quoted.map_or("-".to_owned(), |q| {
            let unit = ["", "K", "M", "G", "T"]
                .get(q.power as usize)
                .copied()
                .unwrap_or("?");
            let t = match (q.time_kind, q.time_unit_s) {
                (TimeKind::Exact, 60) => format!("{} min", q.time),
                (TimeKind::About, 60) => format!("~{} min", q.time),
                (TimeKind::UpperBound, 60) => format!("<{} min", q.time),
                (TimeKind::About, _) => format!("~{} s", q.time),
                (TimeKind::UpperBound, _) => format!("<{} s", q.time),
                (TimeKind::Exact, _) => format!("{} s", q.time),
            };
            format!("{} {unit}B / {t}", q.bytes)
        });
        let units = units_check(r).map_or("-", |u| match u.reading {
            Reading::Decimal => "decimal",
            Reading::Binary => "**binary**",
            Reading::Either => "either",
            Reading::Neither => "**neither**",
        });
        let table = match r.table {
            Table::Notes => "",
            Table::DataReservoir => " (DR series)",
        };
        out.push_str(&format!(
            "| {} | {} | {class} | {} | {km} | {} | {published} | {recomputed} | {verdict} | {quoted} | {units} | {}{table} | {} |\n",
            r.date,
            r.team,
            r.route,
            r.rate.unwrap_or("-"),
            r.source,
            r.note
        ));
    }
    out
}

// ---------------------------------------------------------------------------
// Rules

/// A run to judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Label (run id and point).
    pub label: String,
    /// IP version used.
    pub ip: Ip,
    /// TCP streams used.
    pub streams: u32,
    /// The class the run is entered in, when one is claimed.
    pub claimed: Option<Class>,
    /// Bytes moved.
    pub bytes: u64,
    /// Seconds of continuous transfer.
    pub seconds: f64,
    /// Terrestrial distance: the sum of great-circle distances between the
    /// layer-3 hops' cities, km (uncapped).
    pub km: f64,
    /// Router hops sender → receiver.
    pub hops_forward: u32,
    /// Router hops receiver → sender.
    pub hops_reverse: u32,
    /// Distinct source/destination address pairs used.
    pub address_pairs: u32,
    /// Whether the path was emulated (`longhaul emulate`).
    pub emulated: bool,
}

impl Candidate {
    /// The run's class: single-stream with one stream, else multi-stream.
    pub fn class(&self) -> Class {
        Class {
            ip: self.ip,
            streams: if self.streams == 1 {
                Streams::Single
            } else {
                Streams::Multi
            },
        }
    }

    /// The metric the record would count: bytes × 8 / seconds × min(km,
    /// 30,000) × 1000, bit·m/s.
    pub fn metric(&self) -> f64 {
        lsr_metric_capped(self.bytes, self.seconds, self.km)
    }
}

/// A contest rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Rule {
    /// At least 10 continuous minutes.
    Duration,
    /// At least 100 km.
    Distance,
    /// At least 2 router hops each way.
    RouterHops,
    /// One pair of IP addresses.
    AddressPair,
    /// Distance counted at most 30,000 km.
    DistanceCap,
    /// One of four classes, consistent with the run.
    Class,
    /// At least 10 % over the class record.
    Improvement,
    /// A real terrestrial path (emulated runs never count).
    RealPath,
}

/// The outcome of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// Met.
    Pass,
    /// Not met: the run is not eligible.
    Fail,
    /// The distance was cut to 30,000 km; not a failure.
    Capped,
}

/// One rule's outcome with the figures behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleResult {
    /// Which rule.
    pub rule: Rule,
    /// Outcome.
    pub verdict: Verdict,
    /// Why, with the numbers.
    pub detail: String,
}

/// Checks `run` against every rule, with the class records of
/// [`RECORDS`].
pub fn check(run: &Candidate) -> Vec<RuleResult> {
    check_against(run, RECORDS)
}

/// Whether every rule passed (a capped distance is not a failure).
pub fn eligible(results: &[RuleResult]) -> bool {
    results.iter().all(|r| r.verdict != Verdict::Fail)
}

/// [`check`] against the class records of `rows`.
pub fn check_against(run: &Candidate, rows: &[RecordRow]) -> Vec<RuleResult> {
    let pass = |ok: bool| if ok { Verdict::Pass } else { Verdict::Fail };
    let mut out = Vec::with_capacity(8);
    out.push(RuleResult {
        rule: Rule::Duration,
        verdict: pass(run.seconds >= LSR_MIN_SECONDS),
        detail: format!(
            "{:.0} s of transfer; at least {LSR_MIN_SECONDS:.0} s (10 min) needed",
            run.seconds
        ),
    });
    out.push(RuleResult {
        rule: Rule::Distance,
        verdict: pass(run.km >= LSR_MIN_KM),
        detail: format!("{:.0} km; at least {LSR_MIN_KM:.0} km needed", run.km),
    });
    out.push(RuleResult {
        rule: Rule::RouterHops,
        verdict: pass(run.hops_forward >= LSR_MIN_HOPS && run.hops_reverse >= LSR_MIN_HOPS),
        detail: format!(
            "{} router hops forward, {} back; at least {LSR_MIN_HOPS} each way needed",
            run.hops_forward, run.hops_reverse
        ),
    });
    out.push(RuleResult {
        rule: Rule::AddressPair,
        verdict: pass(run.address_pairs == 1),
        detail: format!("{} address pair(s); exactly one allowed", run.address_pairs),
    });
    out.push(RuleResult {
        rule: Rule::DistanceCap,
        verdict: if run.km > LSR_MAX_KM {
            Verdict::Capped
        } else {
            Verdict::Pass
        },
        detail: format!(
            "{:.0} km counted as {:.0} km (at most {LSR_MAX_KM:.0})",
            run.km,
            lsr_capped_km(run.km)
        ),
    });
    let class = run.class();
    let class_ok = run.streams >= 1
        && run.claimed.is_none_or(|c| {
            c.ip == run.ip && (c.streams == class.streams || c.streams == Streams::Multi)
        });
    out.push(RuleResult {
        rule: Rule::Class,
        verdict: pass(class_ok),
        detail: match run.claimed {
            Some(c) if !class_ok => format!(
                "entered as {c}, but the run is {class} ({} streams)",
                run.streams
            ),
            _ if run.streams == 0 => "no streams: not a run of any class".into(),
            _ => format!("{class}"),
        },
    });
    let entered = run.claimed.filter(|_| class_ok).unwrap_or(class);
    let metric = run.metric();
    out.push(match class_record(entered, rows) {
        Some((record, row)) => RuleResult {
            rule: Rule::Improvement,
            verdict: pass(lsr_beats(metric, record)),
            detail: format!(
                "{} against the {entered} record {} ({}, {}); {} needed (+{:.0} %)",
                fmt_lsr(metric),
                fmt_lsr(record),
                row.team,
                row.date,
                fmt_lsr(record * (1.0 + LSR_IMPROVEMENT)),
                LSR_IMPROVEMENT * 100.0
            ),
        },
        None => RuleResult {
            rule: Rule::Improvement,
            verdict: Verdict::Pass,
            detail: format!("{}: no {entered} record to beat", fmt_lsr(metric)),
        },
    });
    out.push(RuleResult {
        rule: Rule::RealPath,
        verdict: pass(!run.emulated),
        detail: if run.emulated {
            "emulated path: never eligible; the record counts real terrestrial layer-3 paths only"
                .into()
        } else {
            "real path".into()
        },
    });
    out
}

// ---------------------------------------------------------------------------
// Leaderboard

/// Where an entry comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Origin {
    /// A historical record (date, team, source).
    Record {
        /// Date.
        date: String,
        /// Source.
        source: String,
    },
    /// A run checked with [`check`].
    Run,
}

/// One line of a class's board.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Standing {
    /// Rank among eligible entries (1 = best); `None` for ineligible runs.
    pub rank: Option<usize>,
    /// Where it would place by metric alone (1-based, all entries).
    pub place: usize,
    /// Team or run label.
    pub label: String,
    /// Metric, bit·m/s.
    pub metric: f64,
    /// Record or run.
    pub origin: Origin,
    /// Whether it counts.
    pub eligible: bool,
    /// Why not, when it does not count.
    pub reason: String,
}

/// The board of one class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassBoard {
    /// The class.
    pub class: Class,
    /// Entries, best metric first.
    pub standings: Vec<Standing>,
}

/// Ranks the historical records and the runs per class. Records appear in
/// every class they held (the same mark listed by both tables once); a run
/// appears in its class, and a single-stream run also in the multi-stream
/// class of its IP version (as the Data Reservoir marks did). Runs that
/// fail a rule other than the improvement rule are listed with their
/// reason and no rank.
pub fn leaderboard(candidates: &[Candidate], rows: &[RecordRow]) -> Vec<ClassBoard> {
    CLASSES
        .iter()
        .map(|&class| {
            let mut entries: Vec<Standing> = Vec::new();
            for r in rows.iter().filter(|r| r.classes.contains(&class)) {
                let Some((metric, _)) = published_metric(r) else {
                    continue;
                };
                if entries.iter().any(|e| (e.metric - metric).abs() <= 1e14) {
                    continue;
                }
                entries.push(Standing {
                    rank: None,
                    place: 0,
                    label: r.team.to_owned(),
                    metric,
                    origin: Origin::Record {
                        date: r.date.to_owned(),
                        source: r.source.to_owned(),
                    },
                    eligible: true,
                    reason: String::new(),
                });
            }
            for c in candidates {
                let own = c.class();
                let in_class = own == class
                    || (own.ip == class.ip
                        && own.streams == Streams::Single
                        && class.streams == Streams::Multi);
                if !in_class {
                    continue;
                }
                let failed: Vec<String> = check_against(c, rows)
                    .into_iter()
                    .filter(|r| r.verdict == Verdict::Fail && r.rule != Rule::Improvement)
                    .map(|r| r.detail)
                    .collect();
                entries.push(Standing {
                    rank: None,
                    place: 0,
                    label: c.label.clone(),
                    metric: c.metric(),
                    origin: Origin::Run,
                    eligible: failed.is_empty(),
                    reason: failed.join("; "),
                });
            }
            entries.sort_by(|a, b| b.metric.total_cmp(&a.metric));
            let mut rank = 0;
            for (i, e) in entries.iter_mut().enumerate() {
                e.place = i + 1;
                if e.eligible {
                    rank += 1;
                    e.rank = Some(rank);
                }
            }
            ClassBoard {
                class,
                standings: entries,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_every_row_of_the_notes_and_the_data_reservoir_series() {
        let notes = RECORDS.iter().filter(|r| r.table == Table::Notes).count();
        let dr = RECORDS
            .iter()
            .filter(|r| r.table == Table::DataReservoir)
            .count();
        assert_eq!(notes, 26);
        // Seed 004: "4 IPv4 LSRs and 6 IPv6 LSRs".
        assert_eq!(dr, 10);
        let v6 = RECORDS
            .iter()
            .filter(|r| r.table == Table::DataReservoir && r.classes.iter().all(|c| c.ip == Ip::V6))
            .count();
        assert_eq!(v6, 6);
        assert!(
            RECORDS
                .iter()
                .all(|r| !r.source.is_empty() && !r.date.is_empty())
        );
    }

    /// Every row whose metric can be recomputed: rate × capped distance
    /// gives the published metric within the quoted rounding, except the
    /// rows flagged (and explained) as disagreeing.
    #[test]
    fn every_metric_is_recomputed_from_rate_and_distance() {
        let mut checked = 0;
        for r in RECORDS {
            let c = recompute(r);
            assert_eq!(
                c.map(|c| c.agrees),
                r.metric_agrees,
                "{} {}: {c:?}",
                r.date,
                r.team
            );
            if r.metric_agrees == Some(false) {
                assert!(
                    !r.note.is_empty(),
                    "{}: disagreement without a note",
                    r.date
                );
            }
            checked += usize::from(c.is_some());
        }
        assert_eq!(checked, 32);
        let agreeing = RECORDS
            .iter()
            .filter(|r| r.metric_agrees == Some(true))
            .count();
        assert_eq!(agreeing, 30);
    }

    #[test]
    fn metric_check_examples_of_notes_2_3() {
        let row = |date: &str, rate: &str| {
            RECORDS
                .iter()
                .find(|r| r.date == date && r.rate == Some(rate))
                .unwrap()
        };
        // 8.80 × 30,000 = 264,000 against 264,147: within 8.80's rounding.
        let c = recompute(row("2006-02 (ann. 04-26)", "8.80")).unwrap();
        assert_eq!((c.recomputed / 1e12).round(), 264_000.0);
        assert!(c.agrees && (c.recomputed - c.published).abs() > 100e12);
        // 4.00 × 11,539 = 46,156 exactly.
        let c = recompute(row("2004 (before 04-20)", "4.00")).unwrap();
        assert_eq!((c.recomputed / 1e12).round(), 46_156.0);
        // Seed 004's 6.22 does not give its own 185.4 Pb·m/s.
        let c = recompute(row("2005-11-13 (SC05)", "6.22")).unwrap();
        assert!(!c.agrees);
        assert_eq!((c.recomputed / 1e15 * 10.0).round() / 10.0, 186.6);
        // A rate one digit off would not pass: 2.39 × 10,037 vs 23,888.
        let mut r = *row("2003-02-27/28", "2.38");
        r.rate = Some("2.39");
        assert!(!recompute(&r).unwrap().agrees);
    }

    /// Where bytes and seconds are quoted, the reading that makes them agree
    /// with the rate is the one the row states; the rows where it is binary
    /// or neither say so in their note.
    #[test]
    fn bytes_and_seconds_against_the_rate() {
        let mut checked = 0;
        for r in RECORDS {
            let u = units_check(r);
            assert_eq!(
                u.map(|u| u.reading),
                r.reading,
                "{} {}: {u:?}",
                r.date,
                r.team
            );
            if matches!(
                r.reading,
                Some(Reading::Binary | Reading::Neither | Reading::Either)
            ) {
                assert!(!r.note.is_empty(), "{}: unit oddity without a note", r.date);
            }
            checked += usize::from(u.is_some());
        }
        assert_eq!(checked, 14);
        let count = |x: Reading| RECORDS.iter().filter(|r| r.reading == Some(x)).count();
        assert_eq!(count(Reading::Binary), 4);
        assert_eq!(count(Reading::Decimal), 7);
        assert_eq!(count(Reading::Either), 2);
        assert_eq!(count(Reading::Neither), 1);
    }

    #[test]
    fn docs_show_the_table_as_rendered() {
        let md = table_markdown(RECORDS);
        assert_eq!(md.lines().count(), RECORDS.len() + 2);
        assert_eq!(md.matches("**disagrees**").count(), 2);
        let docs = include_str!("../../../docs/lab.md");
        assert!(
            docs.contains(&md),
            "docs/lab.md is out of date: paste table_markdown(RECORDS)"
        );
    }

    #[test]
    fn units_check_560_gbytes_is_binary() {
        let r = RECORDS
            .iter()
            .find(|r| r.metric.map(|m| m.value) == Some("46,156"))
            .unwrap();
        let u = units_check(r).unwrap();
        assert!((u.binary_bps / 1e9 - 4.009).abs() < 0.001);
        assert!((u.decimal_bps / 1e9 - 3.733).abs() < 0.001);
        assert_eq!(u.reading, Reading::Binary);
    }

    #[test]
    fn quoted_figures_and_their_rounding() {
        assert_eq!(quoted("2.38"), Some((2.38, 0.005)));
        assert_eq!(quoted("23,888"), Some((23_888.0, 0.5)));
        assert_eq!(quoted(">0.830"), Some((0.83, 0.0005)));
        assert_eq!(quoted("≈5.6").map(|x| x.0), Some(5.6));
        assert_eq!(quoted("n/a"), None);
        let r = RECORDS.iter().find(|r| r.rate == Some("≈5.6")).unwrap();
        let (_, tol) = rate_bps(r).unwrap();
        assert!((tol - 0.1e9).abs() < 1.0);
    }

    #[test]
    fn beating_9_08_needs_9_988_gbps() {
        let (record, row) = class_record(V6S, RECORDS).unwrap();
        assert_eq!(record, 272_400e12);
        assert_eq!(row.rate, Some("9.08"));
        let needed = record * 1.1 / 30_000.0 / 1000.0;
        assert!((needed / 1e9 - 9.988).abs() < 1e-9);
    }

    /// A run that passes every rule: IPv6 single stream, 11 min, 32,372 km
    /// (capped), 10.0 Gbit/s, real path.
    fn good() -> Candidate {
        Candidate {
            label: "run-1".into(),
            ip: Ip::V6,
            streams: 1,
            claimed: Some(V6S),
            bytes: 10_000_000_000 / 8 * 660,
            seconds: 660.0,
            km: 11_539.0,
            hops_forward: 6,
            hops_reverse: 6,
            address_pairs: 1,
            emulated: false,
        }
    }

    fn verdict(c: &Candidate, rule: Rule) -> Verdict {
        check(c)
            .into_iter()
            .find(|r| r.rule == rule)
            .unwrap()
            .verdict
    }

    #[test]
    fn good_run_on_a_long_path_is_eligible() {
        let c = Candidate {
            km: 32_372.0,
            ..good()
        };
        let r = check(&c);
        assert_eq!(r.len(), 8);
        assert!(eligible(&r), "{r:?}");
        assert_eq!(verdict(&c, Rule::DistanceCap), Verdict::Capped);
        assert_eq!(c.metric(), 10e9 * 30_000.0 * 1000.0);
    }

    #[test]
    fn rule_duration() {
        assert_eq!(verdict(&good(), Rule::Duration), Verdict::Pass);
        assert_eq!(
            verdict(
                &Candidate {
                    seconds: 600.0,
                    ..good()
                },
                Rule::Duration
            ),
            Verdict::Pass
        );
        assert_eq!(
            verdict(
                &Candidate {
                    seconds: 599.0,
                    ..good()
                },
                Rule::Duration
            ),
            Verdict::Fail
        );
    }

    #[test]
    fn rule_distance() {
        assert_eq!(
            verdict(
                &Candidate {
                    km: 100.0,
                    ..good()
                },
                Rule::Distance
            ),
            Verdict::Pass
        );
        assert_eq!(
            verdict(&Candidate { km: 99.0, ..good() }, Rule::Distance),
            Verdict::Fail
        );
    }

    #[test]
    fn rule_router_hops_each_way() {
        assert_eq!(
            verdict(
                &Candidate {
                    hops_forward: 2,
                    hops_reverse: 2,
                    ..good()
                },
                Rule::RouterHops
            ),
            Verdict::Pass
        );
        assert_eq!(
            verdict(
                &Candidate {
                    hops_reverse: 1,
                    ..good()
                },
                Rule::RouterHops
            ),
            Verdict::Fail
        );
        assert_eq!(
            verdict(
                &Candidate {
                    hops_forward: 1,
                    ..good()
                },
                Rule::RouterHops
            ),
            Verdict::Fail
        );
    }

    #[test]
    fn rule_one_address_pair() {
        assert_eq!(verdict(&good(), Rule::AddressPair), Verdict::Pass);
        assert_eq!(
            verdict(
                &Candidate {
                    address_pairs: 2,
                    ..good()
                },
                Rule::AddressPair
            ),
            Verdict::Fail
        );
    }

    #[test]
    fn rule_distance_cap() {
        assert_eq!(verdict(&good(), Rule::DistanceCap), Verdict::Pass);
        let long = Candidate {
            km: 32_372.0,
            ..good()
        };
        assert_eq!(verdict(&long, Rule::DistanceCap), Verdict::Capped);
        // The capped distance is what counts: 32,372 km scores as 30,000.
        assert_eq!(
            long.metric(),
            Candidate {
                km: 30_000.0,
                ..good()
            }
            .metric()
        );
    }

    #[test]
    fn rule_class() {
        assert_eq!(verdict(&good(), Rule::Class), Verdict::Pass);
        // A single stream may be entered in the multi-stream class.
        assert_eq!(
            verdict(
                &Candidate {
                    claimed: Some(V6M),
                    ..good()
                },
                Rule::Class
            ),
            Verdict::Pass
        );
        let wrong = Candidate {
            streams: 4,
            claimed: Some(V6S),
            ..good()
        };
        assert_eq!(verdict(&wrong, Rule::Class), Verdict::Fail);
        assert_eq!(
            verdict(
                &Candidate {
                    claimed: Some(V4S),
                    ..good()
                },
                Rule::Class
            ),
            Verdict::Fail
        );
        assert_eq!(
            verdict(
                &Candidate {
                    streams: 0,
                    claimed: None,
                    ..good()
                },
                Rule::Class
            ),
            Verdict::Fail
        );
    }

    #[test]
    fn rule_ten_percent_improvement() {
        // 10 Gbit/s × 30,000 km = 300,000 ≥ 1.1 × 272,400 = 299,640.
        let beats = Candidate {
            km: 30_000.0,
            ..good()
        };
        assert_eq!(verdict(&beats, Rule::Improvement), Verdict::Pass);
        // 9.9 Gbit/s is 297,000: above the record, but not by 10 %.
        let short = Candidate {
            bytes: 9_900_000_000 / 8 * 660,
            km: 30_000.0,
            ..good()
        };
        assert!(short.metric() > 272_400e12);
        let r = check(&short);
        assert_eq!(
            r.iter()
                .find(|x| x.rule == Rule::Improvement)
                .unwrap()
                .verdict,
            Verdict::Fail
        );
        assert!(!eligible(&r));
        // No record in a class: nothing to beat.
        assert_eq!(
            check_against(&beats, &[])
                .iter()
                .find(|x| x.rule == Rule::Improvement)
                .unwrap()
                .verdict,
            Verdict::Pass
        );
    }

    #[test]
    fn rule_emulated_runs_are_never_eligible() {
        let real = Candidate {
            km: 30_000.0,
            ..good()
        };
        assert_eq!(verdict(&real, Rule::RealPath), Verdict::Pass);
        let emu = Candidate {
            emulated: true,
            ..real
        };
        let r = check(&emu);
        let rp = r.iter().find(|x| x.rule == Rule::RealPath).unwrap();
        assert_eq!(rp.verdict, Verdict::Fail);
        assert!(rp.detail.contains("emulated path: never eligible"));
        assert!(!eligible(&r));
    }

    #[test]
    fn leaderboard_ranks_per_class_and_marks_emulated_runs() {
        let real = Candidate {
            km: 30_000.0,
            ..good()
        };
        let emu = Candidate {
            label: "emu".into(),
            emulated: true,
            bytes: real.bytes * 2,
            ..real.clone()
        };
        let boards = leaderboard(&[real, emu], RECORDS);
        assert_eq!(boards.len(), 4);
        let v6s = boards.iter().find(|b| b.class == V6S).unwrap();
        let first = &v6s.standings[0];
        assert_eq!(first.label, "emu");
        assert_eq!(first.place, 1);
        assert_eq!(first.rank, None);
        assert!(!first.eligible && first.reason.contains("emulated"));
        assert_eq!(v6s.standings[1].label, "run-1");
        assert_eq!(v6s.standings[1].rank, Some(1));
        assert_eq!(v6s.standings[2].metric, 272_400e12);
        assert_eq!(v6s.standings[2].rank, Some(2));
        // The single-stream run also counts in IPv6 multi, not in IPv4.
        let v6m = boards.iter().find(|b| b.class == V6M).unwrap();
        assert!(v6m.standings.iter().any(|s| s.label == "run-1"));
        let v4s = boards.iter().find(|b| b.class == V4S).unwrap();
        assert!(v4s.standings.iter().all(|s| s.origin != Origin::Run));
        // The IPv4 board's best is the 264,147 mark, listed once.
        assert_eq!(v4s.standings[0].metric, 264_147e12);
        assert_eq!(
            v4s.standings
                .iter()
                .filter(|s| (s.metric - 264_100e12).abs() < 1e14)
                .count(),
            1
        );
        for b in &boards {
            assert!(b.standings.windows(2).all(|w| w[0].metric >= w[1].metric));
        }
    }
}
