//! Arbitrary bytes as an inventory file and as every XML body of the
//! testbed API (the power request and the operations log included): parsing must return errors, never panic. What parses is
//! used (conflict sets, effective states, a request's validation: the
//! note's and the preemption notice's length bounds included), and an XML
//! body that parses must write back and parse again to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_testbed::api::{
    BookingList, BookingView, CreateBooking, DeclineBooking, ErrorBody, FeedToken, FreeBusy,
    FreeBusyQuery, PreemptBooking,
};
use longhaul_testbed::operations::{ConsoleLog, OperationLog, PowerReply, PowerRequest};
use longhaul_testbed::resource::Inventory;
use longhaul_testbed::xml::{XmlBody, from_xml, to_xml};

fn xml_round_trip<T: XmlBody + PartialEq + std::fmt::Debug>(text: &str) -> Option<T> {
    let v: T = from_xml(text).ok()?;
    if let Ok(again) = to_xml(&v) {
        let back: T = from_xml(&again).expect("written XML parses");
        assert_eq!(back, v);
    }
    Some(v)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(inv) = Inventory::from_toml(text, "fuzz.toml") {
        for r in inv.iter() {
            let _ = inv.conflict_set(&r.id);
            let _ = inv.effective_state(&r.id);
            let _ = inv.zones(&r.id);
        }
    }
    if let Some(c) = xml_round_trip::<CreateBooking>(text)
        && let Err(e) = c.validate()
        && e.code == "note_too_long"
    {
        assert!(
            c.note
                .is_some_and(|n| n.chars().count() > CreateBooking::NOTE_MAX),
            "{e:?}"
        );
    }
    if let Some(p) = xml_round_trip::<PreemptBooking>(text) {
        assert_eq!(
            p.check_length().is_err(),
            p.notice.chars().count() > PreemptBooking::NOTICE_MAX
        );
    }
    if let Some(q) = xml_round_trip::<FreeBusyQuery>(text) {
        let _ = q.validate();
    }
    if let Some(d) = xml_round_trip::<DeclineBooking>(text) {
        let _ = d.reason();
    }
    let _ = xml_round_trip::<BookingView>(text);
    let _ = xml_round_trip::<BookingList>(text);
    let _ = xml_round_trip::<FreeBusy>(text);
    let _ = xml_round_trip::<ErrorBody>(text);
    let _ = xml_round_trip::<FeedToken>(text);
    let _ = xml_round_trip::<PowerRequest>(text);
    let _ = xml_round_trip::<PowerReply>(text);
    let _ = xml_round_trip::<OperationLog>(text);
    let _ = xml_round_trip::<ConsoleLog>(text);
});
