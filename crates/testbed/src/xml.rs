//! The XML form of the API bodies, as the DataTAG reservation application
//! offered for automation (seed 000 §7.3: "all the interactions … were done
//! using XML"). The same [`crate::api`] types serialize to JSON and to XML
//! through serde + quick-xml: each field is a child element, a list is the
//! field's element repeated (`<reasons>…</reasons><reasons>…</reasons>`), an
//! absent optional field is left out. Each body has a fixed root element
//! ([`XmlBody::ROOT`]). quick-xml does not expand entities or fetch DTDs, so
//! there is no XXE or billion-laughs exposure.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::agents::{AgentHostList, AgentHostView, AgentReply, AgentReport, HostEventLog};
use crate::api::{
    AuditLog, BookingList, BookingView, CreateBooking, CurrentBookings, DeclineBooking, ErrorBody,
    ExtendBooking, FeedToken, FreeBusy, FreeBusyQuery, Me, PreemptBooking,
};
use crate::operations::{ConsoleLog, OperationLog, PowerReply, PowerRequest};

/// A body with an XML root element name.
pub trait XmlBody: Serialize + DeserializeOwned {
    /// The root element.
    const ROOT: &'static str;
}

impl XmlBody for CreateBooking {
    const ROOT: &'static str = "create-booking";
}
impl XmlBody for BookingView {
    const ROOT: &'static str = "booking";
}
impl XmlBody for BookingList {
    const ROOT: &'static str = "booking-list";
}
impl XmlBody for FreeBusyQuery {
    const ROOT: &'static str = "free-busy-query";
}
impl XmlBody for FreeBusy {
    const ROOT: &'static str = "free-busy";
}
impl XmlBody for ErrorBody {
    const ROOT: &'static str = "error";
}
impl XmlBody for ExtendBooking {
    const ROOT: &'static str = "extend-booking";
}
impl XmlBody for PreemptBooking {
    const ROOT: &'static str = "preempt-booking";
}
impl XmlBody for DeclineBooking {
    const ROOT: &'static str = "decline-booking";
}
impl XmlBody for AuditLog {
    const ROOT: &'static str = "audit-log";
}
impl XmlBody for Me {
    const ROOT: &'static str = "me";
}
impl XmlBody for FeedToken {
    const ROOT: &'static str = "feed-token";
}
impl XmlBody for CurrentBookings {
    const ROOT: &'static str = "current-bookings";
}
impl XmlBody for PowerRequest {
    const ROOT: &'static str = "power-request";
}
impl XmlBody for PowerReply {
    const ROOT: &'static str = "power";
}
impl XmlBody for OperationLog {
    const ROOT: &'static str = "operation-log";
}
impl XmlBody for ConsoleLog {
    const ROOT: &'static str = "console-log";
}
impl XmlBody for AgentReport {
    const ROOT: &'static str = "agent-report";
}
impl XmlBody for AgentReply {
    const ROOT: &'static str = "agent-reply";
}
impl XmlBody for AgentHostView {
    const ROOT: &'static str = "host";
}
impl XmlBody for AgentHostList {
    const ROOT: &'static str = "host-list";
}
impl XmlBody for HostEventLog {
    const ROOT: &'static str = "host-event-log";
}

/// An XML body that cannot be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("XML body: {0}")]
pub struct XmlError(String);

/// Writes `value` as an XML document with its root element.
pub fn to_xml<T: XmlBody>(value: &T) -> Result<String, XmlError> {
    let body =
        quick_xml::se::to_string_with_root(T::ROOT, value).map_err(|e| XmlError(e.to_string()))?;
    Ok(format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{body}"
    ))
}

/// Reads an XML document into `T`, checking the root element name.
pub fn from_xml<T: XmlBody>(text: &str) -> Result<T, XmlError> {
    let root = root_name(text).ok_or_else(|| XmlError("no root element".into()))?;
    if root != T::ROOT {
        return Err(XmlError(format!(
            "root element is <{root}>, expected <{}>",
            T::ROOT
        )));
    }
    quick_xml::de::from_str(text).map_err(|e| XmlError(e.to_string()))
}

/// The name of the first element, skipping the declaration, comments and
/// processing instructions.
fn root_name(text: &str) -> Option<&str> {
    let mut rest = text;
    loop {
        let i = rest.find('<')?;
        rest = &rest[i + 1..];
        if rest.starts_with('?') || rest.starts_with('!') {
            continue;
        }
        let end = rest.find(|c: char| c.is_whitespace() || c == '>' || c == '/')?;
        return Some(&rest[..end]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{BusyView, LocalTimes, Note, SlotView};
    use crate::booking::{Approval, Phase};
    use std::fmt::Debug;

    /// JSON value → struct → XML → struct (equal) → JSON value (equal).
    fn round_trip<T: XmlBody + PartialEq + Debug>(json: serde_json::Value) -> String {
        let from_json: T = serde_json::from_value(json.clone()).unwrap();
        let xml = to_xml(&from_json).unwrap();
        let back: T = from_xml(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
        assert_eq!(back, from_json, "{xml}");
        assert_eq!(serde_json::to_value(&back).unwrap(), json);
        xml
    }

    #[test]
    fn create_booking() {
        let xml = round_trip::<CreateBooking>(serde_json::json!({
            "resource": "cern/starlight-lambda/1g-a",
            "start": "2026-03-29T10:00:00+02:00",
            "end": "2026-03-29T14:00:00+02:00",
            "hold": true,
            "event": false,
            "note": "Vegas & Reno <1G>, \"quoted\""
        }));
        assert!(
            xml.contains("<create-booking><resource>cern/starlight-lambda/1g-a</resource>"),
            "{xml}"
        );
        assert!(xml.contains("&amp;") && xml.contains("&lt;1G&gt;"), "{xml}");
        round_trip::<CreateBooking>(serde_json::json!({
            "resource": "cern", "start": "2026-03-29T10:00:00Z", "end": "2026-03-29T11:00:00Z",
            "hold": false, "event": true
        }));
        // Whitespace and line breaks in free text survive.
        round_trip::<CreateBooking>(serde_json::json!({
            "resource": "cern", "start": "2026-03-29T10:00:00Z", "end": "2026-03-29T11:00:00Z",
            "hold": false, "event": false, "note": "  two\nlines\t "
        }));
        // An automation script's hand-written request, fields in any order,
        // defaults for the rest.
        let c: CreateBooking = from_xml(
            "<?xml version=\"1.0\"?>\n<!-- nightly run -->\n<create-booking>\n  <end>2026-03-29T11:00:00Z</end>\n  <resource>cern</resource>\n  <start>2026-03-29T10:00:00Z</start>\n</create-booking>",
        )
        .unwrap();
        assert_eq!((c.resource.as_str(), c.hold, c.note), ("cern", false, None));
    }

    #[test]
    fn booking_and_list() {
        let one = serde_json::json!({
            "id": 7, "resource": "cern/starlight-lambda", "owner": "alice",
            "start": "2026-03-29T08:00:00Z", "end": "2026-03-29T12:00:00Z",
            "status": "held", "hold_until": "2026-03-27T00:10:00Z", "note": "", "version": 1,
            "warnings": [
                {"code": "dst_change", "message": "Europe/Zurich changes"},
                {"code": "degraded", "message": "1g-b: CRC errors"}
            ],
            "local": {"zone": "Europe/Zurich", "start": "2026-03-29 10:00:00 CEST (+02:00)", "end": "2026-03-29 14:00:00 CEST (+02:00)"}
        });
        let xml = round_trip::<BookingView>(one.clone());
        assert!(xml.contains("<status>held</status>"), "{xml}");
        assert_eq!(xml.matches("<warnings>").count(), 2);
        let two = serde_json::json!({
            "id": 8, "resource": "cern", "owner": "bob",
            "start": "2026-03-30T08:00:00Z", "end": "2026-03-30T09:00:00Z",
            "status": "active", "note": "x", "version": 3, "warnings": []
        });
        round_trip::<BookingView>(two.clone());
        round_trip::<BookingList>(serde_json::json!({"bookings": [one, two]}));
        round_trip::<BookingList>(serde_json::json!({"bookings": []}));
        // The typed form, too.
        let v = BookingView {
            id: 1,
            resource: "a".into(),
            owner: "o".into(),
            start: "s".into(),
            end: "e".into(),
            status: Phase::Preempted,
            hold_until: None,
            note: String::new(),
            version: 2,
            warnings: vec![Note {
                code: "c".into(),
                message: "m".into(),
            }],
            local: Some(LocalTimes {
                zone: "UTC".into(),
                start: "s".into(),
                end: "e".into(),
            }),
            approval: None,
            preempted_by: Some("root".into()),
            notice: Some("fibre repair; back at 14:00".into()),
            declined_by: None,
            decline_reason: None,
        };
        assert_eq!(from_xml::<BookingView>(&to_xml(&v).unwrap()).unwrap(), v);
        let v = BookingView {
            status: Phase::Cancelled,
            approval: Some(Approval::Declined),
            preempted_by: None,
            notice: None,
            declined_by: Some("carol".into()),
            decline_reason: Some("kept for the LSR attempt".into()),
            ..v
        };
        let text = to_xml(&v).unwrap();
        assert!(text.contains("<approval>declined</approval>"), "{text}");
        assert_eq!(from_xml::<BookingView>(&to_xml(&v).unwrap()).unwrap(), v);
    }

    #[test]
    fn the_new_bodies_round_trip() {
        round_trip::<ExtendBooking>(serde_json::json!({"end": "2026-03-29T12:00:00Z"}));
        round_trip::<PreemptBooking>(serde_json::json!({"notice": "fibre repair"}));
        round_trip::<DeclineBooking>(serde_json::json!({"reason": "kept for the LSR attempt"}));
        round_trip::<Me>(
            serde_json::json!({"user": "alice", "role": "user", "zone": "Europe/Zurich"}),
        );
        round_trip::<Me>(serde_json::json!({"user": "bob", "role": "admin"}));
        round_trip::<AuditLog>(serde_json::json!({"booking": 3, "events": [
            {"seq": 1, "at": "2026-03-29T08:00:00Z", "actor": "alice", "role": "user",
             "action": "book", "booking": 3, "status_after": "confirmed",
             "start": "2026-03-29T08:00:00Z", "end": "2026-03-29T10:00:00Z"},
            {"seq": 2, "at": "2026-03-29T08:05:00Z", "actor": "root", "role": "admin",
             "action": "preempt", "booking": 3, "status_before": "confirmed",
             "status_after": "preempted", "start": "2026-03-29T08:00:00Z",
             "end": "2026-03-29T10:00:00Z", "notice": "repair"},
            {"seq": 3, "at": "2026-03-29T08:06:00Z", "actor": "carol", "role": "approver",
             "action": "decline", "booking": 3, "status_before": "held",
             "status_after": "declined", "start": "2026-03-29T08:00:00Z",
             "end": "2026-03-29T10:00:00Z", "reason": "kept for the LSR attempt"}
        ]}));
        round_trip::<CurrentBookings>(
            serde_json::json!({"resource": "cern", "now": "2026-03-29T08:00:00Z", "bookings": []}),
        );
    }

    #[test]
    fn free_busy_bodies() {
        round_trip::<FreeBusyQuery>(serde_json::json!({
            "resource": "cern/starlight-lambda", "from": "2026-05-04T00:00:00Z",
            "to": "2026-05-11T00:00:00Z", "min_length": "PT4H"
        }));
        round_trip::<FreeBusyQuery>(serde_json::json!({
            "resource": "cern", "from": "2026-05-04T00:00:00Z", "to": "2026-05-11T00:00:00Z"
        }));
        let fb = FreeBusy {
            resource: "cern/starlight-lambda".into(),
            from: "2026-05-04T00:00:00Z".into(),
            to: "2026-05-05T00:00:00Z".into(),
            busy: vec![BusyView {
                start: "2026-05-04T08:00:00Z".into(),
                end: "2026-05-04T16:00:00Z".into(),
                booking: 3,
                resource: "cern/starlight-lambda/1g-a".into(),
            }],
            free: vec![
                SlotView {
                    start: "2026-05-04T00:00:00Z".into(),
                    end: "2026-05-04T08:00:00Z".into(),
                },
                SlotView {
                    start: "2026-05-04T16:00:00Z".into(),
                    end: "2026-05-05T00:00:00Z".into(),
                },
            ],
        };
        round_trip::<FreeBusy>(serde_json::to_value(&fb).unwrap());
    }

    #[test]
    fn error_body() {
        let xml = round_trip::<ErrorBody>(serde_json::json!({
            "code": "policy",
            "message": "refused by policy: 9 h is longer than the 8 h allowed in a row",
            "reasons": [
                {"code": "max_contiguous", "message": "9 h is longer than the 8 h allowed in a row"},
                {"code": "quota", "message": "over the weekly quota of 40 h"}
            ]
        }));
        assert!(
            xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<error>"),
            "{xml}"
        );
        round_trip::<ErrorBody>(
            serde_json::json!({"code": "conflict", "message": "m", "reasons": []}),
        );
    }

    #[test]
    fn wrong_root_and_garbage_are_errors() {
        let e = from_xml::<CreateBooking>("<booking><id>1</id></booking>").unwrap_err();
        assert!(e.to_string().contains("expected <create-booking>"), "{e}");
        assert!(from_xml::<CreateBooking>("").is_err());
        assert!(from_xml::<CreateBooking>("<create-booking><resource>x</resource>").is_err());
        assert!(
            from_xml::<CreateBooking>("<create-booking><resource>x</resource></create-booking>")
                .is_err()
        );
        assert!(from_xml::<BookingView>("<booking><id>minus one</id></booking>").is_err());
        // Entities are not expanded from a DTD.
        let xxe = "<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY x SYSTEM \"file:///etc/passwd\">]><create-booking><resource>&x;</resource><start>s</start><end>e</end></create-booking>";
        if let Ok(c) = from_xml::<CreateBooking>(xxe) {
            assert!(!c.resource.contains("root:"));
        }
    }
}
