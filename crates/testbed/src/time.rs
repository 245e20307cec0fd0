//! Time done right (DataTAG lesson L4): a booking's [`Slot`] is a half-open
//! UTC interval `[start, end)`, so back-to-back bookings touch without
//! overlapping. The API accepts RFC 3339 timestamps *with* an offset only
//! (`Z` or `±HH:MM`); a naive time is refused rather than guessed. RFC 3339's
//! `-00:00` ("the time in UTC is known, the local offset is not", §4.3) names
//! an exact instant, so it is read as UTC. Times are shown in the user's
//! IANA zone, and [`dst_transitions`] lists the offset changes inside a slot
//! in any zone (the user's, the site's), for the warning the UI must show
//! when, say, Chicago has moved to summer time and Geneva has not yet. The
//! zone database is compiled in (jiff's bundled tzdb), so results do not
//! depend on the host's `/usr/share/zoneinfo`.

use std::fmt;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

/// A time value the API refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    /// Not an RFC 3339 date-time.
    #[error(
        "{field}: {value:?} is not an RFC 3339 date-time (e.g. 2026-03-29T08:00:00Z or 2026-03-29T10:00:00+02:00)"
    )]
    Malformed {
        /// Which field.
        field: String,
        /// What was sent.
        value: String,
    },
    /// A date-time without a UTC offset.
    #[error(
        "{field}: {value:?} has no UTC offset; times are never guessed from a zone: append Z (UTC) or the offset that was meant, e.g. {value}Z or {value}+02:00"
    )]
    Naive {
        /// Which field.
        field: String,
        /// What was sent.
        value: String,
    },
    /// Finer than a microsecond, the resolution of PostgreSQL `timestamptz`:
    /// refused so the stores and the in-memory ledger see the same instants.
    #[error(
        "{field}: {value:?} has more than 6 fractional digits; times are kept to the microsecond"
    )]
    TooPrecise {
        /// Which field.
        field: String,
        /// What was sent.
        value: String,
    },
    /// The end is not after the start.
    #[error("the end {end} is not after the start {start}")]
    EmptySlot {
        /// Start.
        start: Timestamp,
        /// End.
        end: Timestamp,
    },
    /// Not an IANA zone name.
    #[error("unknown time zone {0:?}: use an IANA name such as Europe/Zurich or America/Chicago")]
    UnknownZone(String),
}

/// Parses an RFC 3339 date-time that carries an offset, into UTC. `field`
/// names the API field in errors. Accepts `T`/`t`/space as separator,
/// fractional seconds down to the microsecond, `Z`/`z` or `±HH:MM` (`-00:00`, RFC 3339's "UTC, local
/// offset unknown", is UTC); refuses naive times, dates alone and ISO 8601 forms outside RFC 3339
/// (basic format, bracketed zone names).
pub fn parse_instant(value: &str, field: &str) -> Result<Timestamp, TimeError> {
    let malformed = || TimeError::Malformed {
        field: field.to_owned(),
        value: value.to_owned(),
    };
    let b = value.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    // full-date "T" partial-time: YYYY-MM-DDTHH:MM:SS
    if b.len() < 19
        || !digits(0..4)
        || b[4] != b'-'
        || !digits(5..7)
        || b[7] != b'-'
        || !digits(8..10)
        || !matches!(b[10], b'T' | b't' | b' ')
        || !digits(11..13)
        || b[13] != b':'
        || !digits(14..16)
        || b[16] != b':'
        || !digits(17..19)
    {
        return Err(malformed());
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return Err(malformed());
        }
        if i - start > 6 {
            return Err(TimeError::TooPrecise {
                field: field.to_owned(),
                value: value.to_owned(),
            });
        }
    }
    let offset = &value[i..];
    match offset {
        "" => {
            return Err(TimeError::Naive {
                field: field.to_owned(),
                value: value.to_owned(),
            });
        }
        "Z" | "z" | "-00:00" => {}
        o => {
            let ob = o.as_bytes();
            let ok = ob.len() == 6
                && matches!(ob[0], b'+' | b'-')
                && ob[1..3].iter().all(u8::is_ascii_digit)
                && ob[3] == b':'
                && ob[4..6].iter().all(u8::is_ascii_digit);
            if !ok {
                return Err(malformed());
            }
        }
    }
    // RFC 3339 allows a space or lowercase t/z; jiff wants the usual form.
    let normal: String = value
        .char_indices()
        .map(|(j, c)| match (j, c) {
            (10, ' ' | 't') => 'T',
            (_, 'z') => 'Z',
            _ => c,
        })
        .collect();
    normal.parse::<Timestamp>().map_err(|_| malformed())
}

/// Formats a UTC instant as RFC 3339 with `Z` (what the API returns).
pub fn format_utc(t: Timestamp) -> String {
    t.to_string()
}

/// Looks up an IANA zone in the bundled database.
pub fn zone(name: &str) -> Result<TimeZone, TimeError> {
    TimeZone::get(name).map_err(|_| TimeError::UnknownZone(name.to_owned()))
}

/// `t` in `zone` as `2026-03-29 10:00:00 CEST (+02:00)`, for display.
pub fn render_in_zone(t: Timestamp, zone_name: &str) -> Result<String, TimeError> {
    let tz = zone(zone_name)?;
    let info = tz.to_offset_info(t);
    let dt = tz.to_datetime(t);
    Ok(format!(
        "{} {} ({})",
        dt.strftime("%Y-%m-%d %H:%M:%S"),
        info.abbreviation(),
        offset_text(info.offset())
    ))
}

/// An offset as RFC 3339 writes it: `+02:00`, `-06:00`.
fn offset_text(o: jiff::tz::Offset) -> String {
    let s = o.seconds();
    let sign = if s < 0 { '-' } else { '+' };
    let a = s.unsigned_abs();
    format!("{sign}{:02}:{:02}", a / 3600, a / 60 % 60)
}

/// `t + d`, clamped to the representable range instead of panicking (a
/// request for 9999-12-31 plus a policy gap must be refused, not crash).
pub fn sat_add(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.checked_add(d).unwrap_or(if d.is_negative() {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

/// A half-open interval `[start, end)` of UTC time, `start < end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawSlot")]
pub struct Slot {
    start: Timestamp,
    end: Timestamp,
}

#[derive(Deserialize)]
struct RawSlot {
    start: Timestamp,
    end: Timestamp,
}

impl TryFrom<RawSlot> for Slot {
    type Error = TimeError;
    fn try_from(r: RawSlot) -> Result<Self, TimeError> {
        Slot::new(r.start, r.end)
    }
}

impl Slot {
    /// A slot; the end must be after the start.
    pub fn new(start: Timestamp, end: Timestamp) -> Result<Self, TimeError> {
        if end <= start {
            return Err(TimeError::EmptySlot { start, end });
        }
        Ok(Self { start, end })
    }

    /// Parses the API's `start` and `end` fields (RFC 3339 with offsets).
    pub fn parse(start: &str, end: &str) -> Result<Self, TimeError> {
        Self::new(parse_instant(start, "start")?, parse_instant(end, "end")?)
    }

    /// First instant inside.
    pub fn start(&self) -> Timestamp {
        self.start
    }

    /// First instant after.
    pub fn end(&self) -> Timestamp {
        self.end
    }

    /// Length.
    pub fn length(&self) -> SignedDuration {
        self.end.duration_since(self.start)
    }

    /// True when the two share an instant (touching slots do not).
    pub fn overlaps(&self, other: &Slot) -> bool {
        self.start < other.end && other.start < self.end
    }

    /// True when `t` is inside.
    pub fn contains(&self, t: Timestamp) -> bool {
        self.start <= t && t < self.end
    }

    /// The common part, if any.
    pub fn intersection(&self, other: &Slot) -> Option<Slot> {
        Slot::new(self.start.max(other.start), self.end.min(other.end)).ok()
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {})", self.start, self.end)
    }
}

/// A change of a zone's UTC offset (a DST switch, or a rule change).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// The zone.
    pub zone: String,
    /// When, in UTC.
    pub at: Timestamp,
    /// Offset before, e.g. `-06:00`.
    pub offset_before: String,
    /// Offset after, e.g. `-05:00`.
    pub offset_after: String,
    /// Abbreviation before, e.g. `CST`.
    pub abbreviation_before: String,
    /// Abbreviation after, e.g. `CDT`.
    pub abbreviation_after: String,
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} changes from {} ({}) to {} ({}) at {}: local clock times in this booking shift by the difference",
            self.zone,
            self.abbreviation_before,
            self.offset_before,
            self.abbreviation_after,
            self.offset_after,
            self.at
        )
    }
}

/// The offset changes of `zone_name` strictly after the slot's start and
/// before its end, in time order.
pub fn dst_transitions(zone_name: &str, slot: &Slot) -> Result<Vec<Transition>, TimeError> {
    let tz = zone(zone_name)?;
    let mut out = Vec::new();
    for tr in tz.following(slot.start) {
        let at = tr.timestamp();
        if at >= slot.end {
            break;
        }
        if at <= slot.start {
            continue;
        }
        let before = tz.to_offset_info(at - SignedDuration::from_nanos(1));
        if before.offset() == tr.offset() && before.abbreviation() == tr.abbreviation() {
            continue;
        }
        out.push(Transition {
            zone: zone_name.to_owned(),
            at,
            offset_before: offset_text(before.offset()),
            offset_after: offset_text(tr.offset()),
            abbreviation_before: before.abbreviation().to_owned(),
            abbreviation_after: tr.abbreviation().to_owned(),
        });
    }
    Ok(out)
}

/// The transitions inside `slot` in every zone given (user's and sites'),
/// each zone once, sorted by time.
pub fn dst_warnings(zones: &[String], slot: &Slot) -> Result<Vec<Transition>, TimeError> {
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for z in zones {
        if seen.contains(&z.as_str()) {
            continue;
        }
        seen.push(z);
        out.extend(dst_transitions(z, slot)?);
    }
    out.sort_by_key(|t| t.at);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        parse_instant(s, "t").unwrap()
    }

    #[test]
    fn rfc3339_with_offset_is_utc() {
        assert_eq!(ts("2026-03-29T10:00:00+02:00"), ts("2026-03-29T08:00:00Z"));
        assert_eq!(ts("2026-03-29t08:00:00z"), ts("2026-03-29T08:00:00Z"));
        assert_eq!(ts("2026-03-29 08:00:00.250Z").as_millisecond() % 1000, 250);
        assert_eq!(
            format_utc(ts("2026-03-08T02:30:00-06:00")),
            "2026-03-08T08:30:00Z"
        );
    }

    #[test]
    fn naive_and_odd_times_are_refused_with_a_clear_message() {
        let e = parse_instant("2026-03-29T10:00:00", "start").unwrap_err();
        assert!(matches!(e, TimeError::Naive { .. }));
        let msg = e.to_string();
        assert!(msg.starts_with("start: "), "{msg}");
        assert!(
            msg.contains("no UTC offset") && msg.contains("2026-03-29T10:00:00Z"),
            "{msg}"
        );
        // RFC 3339 §4.3: -00:00 is a time in UTC whose local offset is unknown — an exact instant.
        assert_eq!(
            parse_instant("2026-03-29T10:00:00-00:00", "end").unwrap(),
            parse_instant("2026-03-29T10:00:00Z", "end").unwrap()
        );
        for bad in [
            "2026-03-29",
            "20260329T100000Z",
            "2026-03-29T10:00Z",
            "2026-03-29T10:00:00+0200",
            "2026-03-29T10:00:00+02:00[Europe/Zurich]",
            "2026-03-29T10:00:00.Z",
            "2026-02-30T10:00:00Z",
            "2026-03-29T25:00:00Z",
            "now",
            "",
        ] {
            assert!(
                matches!(
                    parse_instant(bad, "start"),
                    Err(TimeError::Malformed { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn slots_are_half_open() {
        let a = Slot::parse("2026-05-01T08:00:00Z", "2026-05-01T12:00:00Z").unwrap();
        let b = Slot::parse("2026-05-01T12:00:00Z", "2026-05-01T14:00:00Z").unwrap();
        let c = Slot::parse("2026-05-01T11:59:59Z", "2026-05-01T14:00:00Z").unwrap();
        assert!(!a.overlaps(&b) && !b.overlaps(&a));
        assert!(a.overlaps(&c) && c.overlaps(&a));
        assert!(a.contains(a.start()) && !a.contains(a.end()));
        assert_eq!(a.length(), SignedDuration::from_hours(4));
        assert!(Slot::parse("2026-05-01T08:00:00Z", "2026-05-01T08:00:00Z").is_err());
        assert!(Slot::parse("2026-05-01T10:00:00+02:00", "2026-05-01T08:00:00Z").is_err());
        let json = r#"{"start":"2026-05-01T09:00:00Z","end":"2026-05-01T08:00:00Z"}"#;
        assert!(serde_json::from_str::<Slot>(json).is_err());
    }

    #[test]
    fn render_in_user_zone() {
        let t = ts("2026-03-29T08:00:00Z");
        assert_eq!(
            render_in_zone(t, "Europe/Zurich").unwrap(),
            "2026-03-29 10:00:00 CEST (+02:00)"
        );
        assert_eq!(
            render_in_zone(t, "America/Chicago").unwrap(),
            "2026-03-29 03:00:00 CDT (-05:00)"
        );
        // The week before: Geneva still on winter time.
        let t = ts("2026-03-22T08:00:00Z");
        assert_eq!(
            render_in_zone(t, "Europe/Zurich").unwrap(),
            "2026-03-22 09:00:00 CET (+01:00)"
        );
        assert!(matches!(
            render_in_zone(t, "Europe/Geneva"),
            Err(TimeError::UnknownZone(_))
        ));
    }

    #[test]
    fn spring_forward_on_different_dates() {
        // US: 2026-03-08 02:00 CST = 08:00Z. EU: 2026-03-29 01:00Z.
        let us_day = Slot::parse("2026-03-08T06:00:00Z", "2026-03-08T12:00:00Z").unwrap();
        let t = dst_transitions("America/Chicago", &us_day).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].at, ts("2026-03-08T08:00:00Z"));
        assert_eq!(
            (t[0].offset_before.as_str(), t[0].offset_after.as_str()),
            ("-06:00", "-05:00")
        );
        assert_eq!(
            (
                t[0].abbreviation_before.as_str(),
                t[0].abbreviation_after.as_str()
            ),
            ("CST", "CDT")
        );
        assert!(
            dst_transitions("Europe/Zurich", &us_day)
                .unwrap()
                .is_empty()
        );

        let eu_day = Slot::parse("2026-03-29T00:00:00Z", "2026-03-29T04:00:00Z").unwrap();
        let t = dst_transitions("Europe/Zurich", &eu_day).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].at, ts("2026-03-29T01:00:00Z"));
        assert_eq!(t[0].abbreviation_after, "CEST");
        assert!(
            dst_transitions("America/Chicago", &eu_day)
                .unwrap()
                .is_empty()
        );
        // Phoenix keeps MST all year.
        assert!(
            dst_transitions("America/Phoenix", &us_day)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn fall_back_on_different_dates() {
        // EU: 2026-10-25 01:00Z; US: 2026-11-01 02:00 CDT = 07:00Z.
        let eu = Slot::parse("2026-10-24T22:00:00Z", "2026-10-25T06:00:00Z").unwrap();
        let t = dst_transitions("Europe/Zurich", &eu).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].at, ts("2026-10-25T01:00:00Z"));
        assert_eq!(t[0].abbreviation_before, "CEST");
        let us = Slot::parse("2026-11-01T05:00:00Z", "2026-11-01T09:00:00Z").unwrap();
        let t = dst_transitions("America/Chicago", &us).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].at, ts("2026-11-01T07:00:00Z"));
        assert!(dst_transitions("Europe/Zurich", &us).unwrap().is_empty());
        // A slot that ends exactly at the change does not span it.
        let before = Slot::parse("2026-11-01T03:00:00Z", "2026-11-01T07:00:00Z").unwrap();
        assert!(
            dst_transitions("America/Chicago", &before)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_slot_spanning_both_spring_changes() {
        let both = Slot::parse("2026-03-07T00:00:00Z", "2026-03-30T00:00:00Z").unwrap();
        let zones = vec![
            "Europe/Zurich".to_owned(),
            "America/Chicago".to_owned(),
            "Europe/Zurich".to_owned(),
        ];
        let t = dst_warnings(&zones, &both).unwrap();
        let got: Vec<_> = t.iter().map(|t| (t.zone.as_str(), t.at)).collect();
        assert_eq!(
            got,
            [
                ("America/Chicago", ts("2026-03-08T08:00:00Z")),
                ("Europe/Zurich", ts("2026-03-29T01:00:00Z")),
            ]
        );
        assert!(t[0].to_string().contains("CST"));
        assert!(dst_warnings(&["Mars/Olympus".to_owned()], &both).is_err());
    }
}
