//! iCalendar feeds (RFC 5545) per user and per resource, so bookings show up
//! in any calendar application at the right local time: every DTSTART and
//! DTEND is UTC (`Z` form, RFC 5545 §3.3.5 form #2), so no VTIMEZONE is
//! needed and no client can misread the zone (DataTAG lesson L4). Lines end
//! in CRLF and are folded at 75 octets without splitting a UTF-8 character
//! (§3.1); TEXT values escape `\`, `;`, `,` and newlines (§3.3.11). Bookings
//! that no longer hold (cancelled, expired, preempted) stay in the feed with
//! `STATUS:CANCELLED` and a higher `SEQUENCE`, so subscribed clients remove
//! them instead of keeping a stale event.

use jiff::Timestamp;

use crate::booking::{Booking, Ledger, Status};
use crate::resource::ResourceId;

/// Escapes a TEXT value: `\` → `\\`, `;` → `\;`, `,` → `\,`, newline →
/// `\n` (CR dropped).
pub fn escape_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            ';' => out.push_str("\\;"),
            ',' => out.push_str("\\,"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// One content line, folded: at most 75 octets per physical line (the
/// leading space of a continuation counts), each ended by CRLF.
pub fn fold_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len() + line.len() / 70 * 3 + 2);
    let mut used = 0;
    for c in line.chars() {
        let n = c.len_utf8();
        if used + n > 75 {
            out.push_str("\r\n ");
            used = 1;
        }
        out.push(c);
        used += n;
    }
    out.push_str("\r\n");
    out
}

fn utc(t: Timestamp) -> String {
    t.strftime("%Y%m%dT%H%M%SZ").to_string()
}

/// A VEVENT for a booking. `domain` makes the UID globally unique
/// (`booking-42@testbed.example.org`).
fn event(b: &Booking, dtstamp: Timestamp, domain: &str) -> String {
    let (status, end) = match &b.status {
        Status::Held { .. } => ("TENTATIVE", b.slot.end()),
        Status::Confirmed => ("CONFIRMED", b.slot.end()),
        Status::Released { at } => ("CONFIRMED", (*at).max(b.slot.start())),
        Status::Cancelled { .. }
        | Status::Expired { .. }
        | Status::Preempted { .. }
        | Status::Declined { .. } => ("CANCELLED", b.slot.end()),
    };
    // A release at the very start leaves no time; keep DTEND after DTSTART.
    let end = if end <= b.slot.start() {
        b.slot.end()
    } else {
        end
    };
    let mut s = String::new();
    let mut line = |l: String| s.push_str(&fold_line(&l));
    line("BEGIN:VEVENT".into());
    line(format!("UID:booking-{}@{}", b.id, domain));
    line(format!("DTSTAMP:{}", utc(dtstamp)));
    line(format!("DTSTART:{}", utc(b.slot.start())));
    line(format!("DTEND:{}", utc(end)));
    line(format!(
        "SUMMARY:{}",
        escape_text(&format!("{} ({})", b.resource, b.owner))
    ));
    if !b.note.is_empty() {
        line(format!("DESCRIPTION:{}", escape_text(&b.note)));
    }
    line(format!("STATUS:{status}"));
    line(format!("SEQUENCE:{}", b.version.saturating_sub(1)));
    line("END:VEVENT".into());
    s
}

/// A VCALENDAR of `bookings` named `name`, stamped `now`.
pub fn calendar<'a>(
    name: &str,
    bookings: impl IntoIterator<Item = &'a Booking>,
    now: Timestamp,
    domain: &str,
) -> String {
    let mut s = String::new();
    for l in [
        "BEGIN:VCALENDAR".to_owned(),
        "VERSION:2.0".to_owned(),
        "PRODID:-//longhaul//testbed//EN".to_owned(),
        "CALSCALE:GREGORIAN".to_owned(),
        "METHOD:PUBLISH".to_owned(),
        format!("X-WR-CALNAME:{}", escape_text(name)),
    ] {
        s.push_str(&fold_line(&l));
    }
    for b in bookings {
        s.push_str(&event(b, now, domain));
    }
    s.push_str(&fold_line("END:VCALENDAR"));
    s
}

/// The feed of everything `user` booked.
pub fn user_feed(ledger: &Ledger, user: &str, now: Timestamp, domain: &str) -> String {
    calendar(
        &format!("longhaul testbed: {user}"),
        ledger.of_user(user),
        now,
        domain,
    )
}

/// The feed of the bookings of `resource` itself.
pub fn resource_feed(
    ledger: &Ledger,
    resource: &ResourceId,
    now: Timestamp,
    domain: &str,
) -> String {
    calendar(
        &format!("longhaul testbed: {resource}"),
        ledger.of_resource(resource),
        now,
        domain,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::booking::{Actor, NewBooking};
    use crate::resource::tests::datatag;
    use crate::time::Slot;

    #[test]
    fn escaping() {
        assert_eq!(escape_text(r"a\b;c,d"), r"a\\b\;c\,d");
        assert_eq!(escape_text("line 1\r\nline 2\nend"), r"line 1\nline 2\nend");
        assert_eq!(escape_text("plain: text"), "plain: text");
    }

    #[test]
    fn folding_at_75_octets() {
        let short = "X".repeat(75);
        assert_eq!(fold_line(&short), format!("{short}\r\n"));
        let long = format!("DESCRIPTION:{}", "a".repeat(200));
        let folded = fold_line(&long);
        let lines: Vec<&str> = folded.split("\r\n").collect();
        assert_eq!(lines.len(), 4, "{folded:?}");
        assert_eq!(lines[0].len(), 75);
        assert_eq!(lines[1].len(), 75);
        assert!(lines[1].starts_with(' ') && !lines[1][1..].starts_with(' '));
        assert_eq!(lines[2].len(), 1 + (212 - 75 - 74));
        assert_eq!(lines[3], "");
        // Unfolding (remove CRLF + one space) gives the line back.
        assert_eq!(folded.trim_end_matches("\r\n").replace("\r\n ", ""), long);
    }

    #[test]
    fn folding_never_splits_a_utf8_character() {
        // 73 ASCII octets then "é" (2 octets) fits exactly; the next "é" goes
        // to the next line rather than straddling octet 75.
        let line = format!("{}ééé", "s".repeat(73));
        let folded = fold_line(&line);
        assert_eq!(folded, format!("{}é\r\n éé\r\n", "s".repeat(73)));
        let line = format!("{}€", "s".repeat(73));
        assert_eq!(fold_line(&line), format!("{}\r\n €\r\n", "s".repeat(73)));
        for l in fold_line(&"日本語".repeat(40)).split("\r\n") {
            assert!(l.len() <= 75);
        }
    }

    #[test]
    fn feed_has_utc_times_status_and_escaped_text() {
        let mut l = Ledger::new(datatag());
        let now: Timestamp = "2026-03-27T12:00:00Z".parse().unwrap();
        let alice = Actor::user("alice");
        let res = ResourceId::parse("cern/starlight-lambda/1g-a").unwrap();
        let slot = Slot::parse("2026-03-29T10:00:00+02:00", "2026-03-29T14:00:00+02:00").unwrap();
        let a = l
            .try_book(
                NewBooking {
                    resource: res.clone(),
                    owner: "alice".into(),
                    slot,
                    hold_until: None,
                    note: "TCP Vegas vs Reno, 1G; see wiki\\tcp".into(),
                },
                &alice,
                now,
            )
            .unwrap();
        let slot2 = Slot::parse("2026-03-30T10:00:00Z", "2026-03-30T11:00:00Z").unwrap();
        let b = l
            .try_book(
                NewBooking {
                    resource: res.clone(),
                    owner: "alice".into(),
                    slot: slot2,
                    hold_until: Some(now + jiff::SignedDuration::from_mins(10)),
                    note: String::new(),
                },
                &alice,
                now,
            )
            .unwrap();
        l.cancel(b, &alice, now).unwrap();
        let feed = user_feed(&l, "alice", now, "testbed.example.org");
        let expected = "BEGIN:VCALENDAR\r\n\
VERSION:2.0\r\n\
PRODID:-//longhaul//testbed//EN\r\n\
CALSCALE:GREGORIAN\r\n\
METHOD:PUBLISH\r\n\
X-WR-CALNAME:longhaul testbed: alice\r\n\
BEGIN:VEVENT\r\n\
UID:booking-1@testbed.example.org\r\n\
DTSTAMP:20260327T120000Z\r\n\
DTSTART:20260329T080000Z\r\n\
DTEND:20260329T120000Z\r\n\
SUMMARY:cern/starlight-lambda/1g-a (alice)\r\n\
DESCRIPTION:TCP Vegas vs Reno\\, 1G\\; see wiki\\\\tcp\r\n\
STATUS:CONFIRMED\r\n\
SEQUENCE:0\r\n\
END:VEVENT\r\n\
BEGIN:VEVENT\r\n\
UID:booking-2@testbed.example.org\r\n\
DTSTAMP:20260327T120000Z\r\n\
DTSTART:20260330T100000Z\r\n\
DTEND:20260330T110000Z\r\n\
SUMMARY:cern/starlight-lambda/1g-a (alice)\r\n\
STATUS:CANCELLED\r\n\
SEQUENCE:1\r\n\
END:VEVENT\r\n\
END:VCALENDAR\r\n";
        assert_eq!(feed, expected);
        assert_eq!(a.0, 1);
        assert_eq!(
            resource_feed(&l, &res, now, "x")
                .matches("BEGIN:VEVENT")
                .count(),
            2
        );
        assert_eq!(
            user_feed(&l, "bob", now, "x")
                .matches("BEGIN:VEVENT")
                .count(),
            0
        );
    }

    #[test]
    fn released_booking_ends_at_the_release() {
        let mut l = Ledger::new(datatag());
        let now: Timestamp = "2026-05-04T00:00:00Z".parse().unwrap();
        let alice = Actor::user("alice");
        let res = ResourceId::parse("cern/starlight-lambda").unwrap();
        let id = l
            .try_book(
                NewBooking {
                    resource: res.clone(),
                    owner: "alice".into(),
                    slot: Slot::parse("2026-05-04T08:00:00Z", "2026-05-04T16:00:00Z").unwrap(),
                    hold_until: None,
                    note: String::new(),
                },
                &alice,
                now,
            )
            .unwrap();
        l.release(id, &alice, "2026-05-04T09:30:00Z".parse().unwrap())
            .unwrap();
        let feed = resource_feed(&l, &res, now, "x");
        assert!(feed.contains("DTEND:20260504T093000Z\r\n"), "{feed}");
        assert!(feed.contains("STATUS:CONFIRMED\r\nSEQUENCE:1\r\n"));
    }
}
