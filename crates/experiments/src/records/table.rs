//! The historical table: every Land Speed Record row with its source, and
//! the vocabulary of a row (class, published metric, quoted bytes and time,
//! the byte-unit reading). Data only; the checks of each row are in
//! `check`.

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

pub(super) const V4S: Class = Class {
    ip: Ip::V4,
    streams: Streams::Single,
};
pub(super) const V4M: Class = Class {
    ip: Ip::V4,
    streams: Streams::Multi,
};
pub(super) const V6S: Class = Class {
    ip: Ip::V6,
    streams: Streams::Single,
};
pub(super) const V6M: Class = Class {
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
    /// Not announced: computed here from rate × distance.
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
    /// Internet2's record pages, news and the teams' announcements (each row names its source).
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
    /// computable). Tested against [`recompute`](super::recompute) for every row.
    pub metric_agrees: Option<bool>,
    /// Which byte unit makes the quoted bytes and time agree with the rate.
    /// Tested against [`units_check`](super::units_check) for every row.
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

/// Every mark found in Internet2's record pages, its news and the teams' announcements (each row names
/// its source), then the Data Reservoir series of seed 004.
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
        class_note: "IPv4 (class per seed 000; single by inference: SUNET's '+12 %' matches 61,752)",
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
        class_note: "IPv4 (multi by inference: SUNET's '+12 %' matches 61,752, not this mark)",
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
        class_note: "IPv4 single (seed 004; the announcement, xbiz 6979, says multi)",
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
        note: "not among the announced marks above",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_every_announced_row_and_the_data_reservoir_series() {
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
}
