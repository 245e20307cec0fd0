//! The testbed API against its own OpenAPI document (issue 6): schemathesis, a property-based API
//! fuzzer, reads `GET /openapi.json` from the real `longhaul testbed serve` and sends every
//! operation the document declares — schema-valid requests, schema-invalid ones, and stateful
//! sequences that feed one response into the next request — checking that no response is a server
//! error and that every status, content type and body is the one the document promises. It fuzzes
//! whatever the document declares, so new endpoints are covered as soon as they are documented.
//!
//! schemathesis is a Python program, installed by `scripts/test.sh` into a virtual environment at
//! [`VENV_DEFAULT`] (`LONGHAUL_SCHEMATHESIS` names another executable); without it the test fails
//! and says how to install it. Its settings are in `tests/schemathesis/`: `schemathesis.toml` (which
//! statuses a schema-valid request may get) and `hooks.py` (the one rule the document cannot state:
//! an end after its start). `LONGHAUL_FUZZ_EXAMPLES` (default 100 per operation) and
//! `LONGHAUL_FUZZ_SEED` (default 1) bound and fix the run.
//!
//! Also here: the XML interface round-trips (a body sent as XML comes back as XML that reads into
//! the same values as the JSON answer).

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use longhaul_testbed::api::{BookingList, BookingView, ErrorBody, FreeBusy};
use longhaul_testbed::xml::{XmlBody, from_xml};
use longhaul_testkit::fixtures::TempDir;

use crate::testbed::{Service, agent, at, post_booking};

/// Where `scripts/test.sh` installs schemathesis (pinned there).
const VENV_DEFAULT: &str = "/opt/longhaul-venv/bin/schemathesis";

/// The schemathesis executable; when there is none, the test cannot run (`None` when opted out).
fn schemathesis() -> Option<PathBuf> {
    let path = std::env::var_os("LONGHAUL_SCHEMATHESIS")
        .map_or_else(|| PathBuf::from(VENV_DEFAULT), PathBuf::from);
    longhaul_testkit::require(
        path.is_file(),
        format_args!(
            "schemathesis not found at {}: scripts/test.sh installs it there, or set \
             LONGHAUL_SCHEMATHESIS",
            path.display()
        ),
    )
    .then_some(path)
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Starts the service on `database`, gives the fuzzer bookings to work on (a hold to confirm, an
/// upcoming booking to cancel, an active one to release: ids 1-3, which the fuzzer's boundary cases
/// reach), then runs schemathesis with every check and fails with its report on any failure.
fn fuzz(database: &str) {
    let Some(st) = schemathesis() else {
        return;
    };
    let (svc, tokens) = Service::start(database, &[("fuzz", "user")]);
    let token = &tokens[0];
    let slots = [
        ("cern/starlight-lambda/1g-a", true, at(3, 0), at(3, 60)),
        ("cern/starlight-lambda/1g-b", false, at(5, 0), at(5, 60)),
        ("geneva/cern-starlight", false, at(0, 0), at(1, 0)),
    ];
    // An active booking: started a moment ago (within the policy's 60 s grace), in whole seconds.
    let now = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second()).expect("now");
    for (i, (resource, hold, start, end)) in slots.into_iter().enumerate() {
        let start = if i == 2 {
            (now - jiff::SignedDuration::from_secs(5)).to_string()
        } else {
            start
        };
        let end = if i == 2 {
            (now + jiff::SignedDuration::from_hours(1)).to_string()
        } else {
            end
        };
        let body =
            serde_json::json!({"resource": resource, "start": start, "end": end, "hold": hold});
        let (s, b) = post_booking(&svc, token, &body, None);
        assert_eq!(s, 201, "seed booking {body}: {b}");
    }
    let dir = TempDir::new("fuzz");
    let here = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/schemathesis");
    let (examples, seed) = (
        env_or("LONGHAUL_FUZZ_EXAMPLES", 100),
        env_or("LONGHAUL_FUZZ_SEED", 1),
    );
    let mut cmd = Command::new(&st);
    cmd.arg("--config-file")
        .arg(format!("{here}/schemathesis.toml"))
        .arg("run")
        .arg(svc.url("/openapi.json"))
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--checks", "all"])
        .args(["--max-examples", &examples.to_string()])
        .args(["--seed", &seed.to_string()])
        .args(["--request-timeout", "10"])
        .args(["--generation-database", "none", "--no-color"])
        .env("SCHEMATHESIS_HOOKS", format!("{here}/hooks.py"))
        // Anything it writes (reports, caches) goes to a directory removed afterwards.
        .current_dir(&dir.0);
    let started = Instant::now();
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", st.display()));
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!(
        "schemathesis on {database} ({examples} examples per operation, seed {seed}) took {:.1} s:\n{report}",
        started.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "schemathesis found failures ({}); replay one with the curl line shown:\n{report}",
        out.status
    );
}

#[test]
fn testbed_api_fuzz_sqlite() {
    let dir = TempDir::new("sqlite");
    fuzz(&dir.0.join("fuzz.sqlite").display().to_string());
}

#[test]
fn testbed_api_fuzz_postgres() {
    let Some(pg) = crate::util::postgres() else {
        return;
    };
    fuzz(&pg.database());
}

/// `(status, content type, body)` of a request sent with `Accept: application/xml`.
fn xml_request(req: ureq::Request, body: Option<&str>) -> (u16, String, String) {
    let req = req.set("Accept", "application/xml");
    let r = match body {
        Some(b) => req.set("Content-Type", "application/xml").send_string(b),
        None => req.call(),
    };
    let resp = match r {
        Ok(r) | Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("transport error: {e}"),
    };
    let (status, ct) = (resp.status(), resp.content_type().to_owned());
    (status, ct, resp.into_string().expect("body"))
}

fn read_xml<T: XmlBody>(text: &str) -> T {
    from_xml(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn testbed_xml_round_trips() {
    let dir = TempDir::new("sqlite");
    let db = dir.0.join("xml.sqlite").display().to_string();
    let (svc, tokens) = Service::start(&db, &[("alice", "user")]);
    let auth = format!("Bearer {}", tokens[0]);
    // A note with XML's special characters and non-ASCII text.
    let note = "R&D <DataTAG> \"CERN\" → StarLight";
    let escaped = note
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let (start, end) = (at(2, 0), at(2, 120));
    let create = format!(
        "<create-booking><resource>cern/starlight-lambda/1g-a</resource><start>{start}</start>\
         <end>{end}</end><hold>true</hold><note>{escaped}</note></create-booking>"
    );
    let post = || {
        agent()
            .post(&svc.url("/api/v1/bookings"))
            .set("Authorization", &auth)
    };
    let (s, ct, text) = xml_request(post(), Some(&create));
    assert_eq!((s, ct.as_str()), (201, "application/xml"), "{text}");
    let booked: BookingView = read_xml(&text);
    assert_eq!(
        (
            booked.resource.as_str(),
            booked.status.to_string(),
            &booked.note
        ),
        (
            "cern/starlight-lambda/1g-a",
            "held".to_owned(),
            &note.to_owned()
        ),
        "{text}"
    );
    assert!(booked.hold_until.is_some(), "{text}");

    // The same booking, listed as XML and as JSON: the same values.
    let list = format!("/api/v1/bookings?resource=cern/starlight-lambda&from={start}&to={end}");
    let get = |path: &str| agent().get(&svc.url(path)).set("Authorization", &auth);
    let (s, ct, text) = xml_request(get(&list), None);
    assert_eq!((s, ct.as_str()), (200, "application/xml"), "{text}");
    let from_xml_list: BookingList = read_xml(&text);
    let json: BookingList = get(&list).call().expect("200").into_json().expect("JSON");
    assert_eq!(from_xml_list, json);
    assert_eq!(json.bookings.len(), 1);
    assert_eq!(
        (json.bookings[0].id, &json.bookings[0].note),
        (booked.id, &booked.note)
    );

    // Free/busy in a future window (so no interval starts "now"): XML and JSON agree.
    let fb = format!(
        "/api/v1/freebusy?resource=cern/starlight-lambda&from={}&to={}&length=PT1H",
        at(2, -120),
        at(2, 240)
    );
    let (s, ct, text) = xml_request(get(&fb), None);
    assert_eq!((s, ct.as_str()), (200, "application/xml"), "{text}");
    let xml_fb: FreeBusy = read_xml(&text);
    let json_fb: FreeBusy = get(&fb).call().expect("200").into_json().expect("JSON");
    assert_eq!(xml_fb, json_fb);
    assert_eq!(xml_fb.busy.len(), 1, "{text}");
    assert_eq!(xml_fb.free.len(), 2, "{text}");

    // A refusal comes back as <error>, with the same code as in JSON.
    let (s, ct, text) = xml_request(post(), Some(&create));
    assert_eq!((s, ct.as_str()), (409, "application/xml"), "{text}");
    let e: ErrorBody = read_xml(&text);
    assert_eq!(e.code, "conflict", "{text}");

    // Confirming it by XML: the answer reads back as the confirmed booking.
    let (s, _, text) = xml_request(
        agent()
            .post(&svc.url(&format!("/api/v1/bookings/{}/confirm", booked.id)))
            .set("Authorization", &auth),
        None,
    );
    assert_eq!(s, 200, "{text}");
    let confirmed: BookingView = read_xml(&text);
    assert_eq!(
        (
            confirmed.id,
            confirmed.status.to_string(),
            confirmed.version
        ),
        (booked.id, "upcoming".to_owned(), booked.version + 1),
        "{text}"
    );
}
