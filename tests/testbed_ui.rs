//! The testbed's web UI in a real browser (issue 6's "Done means"): `longhaul testbed serve` on
//! SQLite on a loopback port, Debian's headless Chromium driven through `chromedriver` (WebDriver)
//! with `fantoccini`. User A signs in with a token, sees user B's booking on the timeline, picks a slot
//! on the parent of B's circuit and sees the live conflict preview name B's booking, sees the DST
//! warning on a slot over a spring-forward, finds free time, moves to a free slot, books it (a hold),
//! confirms it, sees it on the timeline, releases it, and the API agrees it is released. Every wait
//! is on an element or attribute the UI sets, never a fixed sleep. A second test checks the preview
//! endpoint and the page's assets over plain HTTP.
//!
//! The screenshot (taken when the conflict preview is showing) goes to the test's temporary
//! directory; with `LONGHAUL_UPDATE_SCREENSHOT=1` it replaces `docs/img/testbed-ui.png`, which the
//! README shows. Fails with the reason when `/usr/bin/chromium` or `/usr/bin/chromedriver` is missing
//! (`scripts/test.sh` installs the `chromium` and `chromium-driver` packages).

use std::path::{Path, PathBuf};

use fantoccini::{Client, Locator};
use jiff::{SignedDuration, Timestamp};
use longhaul_testkit::fixtures::TempDir;

use crate::browser::{
    self, CHROMEDRIVER, CHROMIUM, ChromeDriver, attr, click, png_size, text, wait_for,
};
use crate::testbed::{Service, get, post_booking};

/// The browser's zone (its `TZ`): the UI shows and takes times in it, so the test types local
/// times in it. Not the sites' zone (Europe/Zurich), so the UI must show both (DataTAG lesson L4).
const ZONE: &str = "America/Chicago";

/// The DataTAG inventory of the testbed crate's unit tests: CERN's lambda as two circuits (one
/// degraded) and a host in maintenance.
const INVENTORY: &str = include_str!("../crates/testbed/testdata/datatag.toml");

/// `t` as typed into the UI: `YYYY-MM-DD HH:MM` in [`ZONE`].
fn local(t: Timestamp) -> String {
    t.in_tz(ZONE)
        .expect("zone")
        .strftime("%Y-%m-%d %H:%M")
        .to_string()
}

/// The next whole hour after now, plus `hours`.
fn hour_from_now(hours: i64) -> Timestamp {
    let h = Timestamp::now().as_second() / 3600 + 1 + hours;
    Timestamp::from_second(h * 3600).expect("time")
}

/// Replaces the text of input `css` by typing `text` (which fires the UI's input events).
async fn type_into(c: &Client, css: &str, text: &str) {
    let e = wait_for(c, css).await;
    e.clear().await.expect("clear");
    e.send_keys(text).await.expect("type");
}

/// `longhaul testbed serve` on a fresh SQLite file in `dir` with [`INVENTORY`], and the tokens of
/// the users alice and bob, in that order.
fn alice_and_bob(dir: &TempDir) -> (Service, Vec<String>) {
    let db = dir.0.join("testbed.sqlite").display().to_string();
    Service::start_with(
        &db,
        &[("alice", "user", None), ("bob", "user", None)],
        &[],
        INVENTORY,
    )
}

/// Books circuit `cern/starlight-lambda/1g-a` from `start` to `end` as `token`'s user, with `note`
/// when given; asserts it was booked (201) and returns its id.
fn book_1g_a(
    svc: &Service,
    token: &str,
    start: Timestamp,
    end: Timestamp,
    note: Option<&str>,
) -> u64 {
    let mut body = serde_json::json!({"resource": "cern/starlight-lambda/1g-a",
        "start": start.to_string(), "end": end.to_string()});
    if let Some(note) = note {
        body["note"] = note.into();
    }
    let (s, b) = post_booking(svc, token, &body, None);
    assert_eq!(s, 201, "{b}");
    b["id"].as_u64().expect("id")
}

#[test]
fn testbed_ui_books_previews_conflicts_and_releases_in_chromium() {
    for bin in [CHROMIUM, CHROMEDRIVER] {
        if !longhaul_testkit::require(
            Path::new(bin).exists(),
            format_args!(
                "{bin} is missing (apt-get install --no-install-recommends chromium chromium-driver)"
            ),
        ) {
            return;
        }
    }
    let dir = TempDir::new("ui");
    let (svc, tokens) = alice_and_bob(&dir);
    let (alice, bob) = (&tokens[0], &tokens[1]);

    // Bob's bookings: one of the circuit under the lambda (the one the preview must name), and a
    // hold elsewhere so the timeline has more than one kind of bar.
    let b_start = hour_from_now(2);
    let b_end = b_start + SignedDuration::from_hours(5);
    let bob_id = book_1g_a(&svc, bob, b_start, b_end, Some("SC2026 demo rehearsal"));
    let h_start = hour_from_now(26);
    let (s, h) = post_booking(
        &svc,
        bob,
        &serde_json::json!({"resource": "geneva/cern-starlight", "hold": true,
            "start": h_start.to_string(), "end": (h_start + SignedDuration::from_hours(6)).to_string()}),
        None,
    );
    assert_eq!(s, 201, "{h}");

    // One of alice's own, so the timeline shows "mine" too.
    let m_start = hour_from_now(20);
    let (s, m) = post_booking(
        &svc,
        alice,
        &serde_json::json!({"resource": "tokyo/tokyo-loop-30000km",
            "start": m_start.to_string(), "end": (m_start + SignedDuration::from_hours(5)).to_string()}),
        None,
    );
    assert_eq!(s, 201, "{m}");

    // Dropped after the driver (which takes the browser down with it), so nothing writes into the
    // profile while it is removed.
    let profile = TempDir::new("chromium-profile");
    let driver = ChromeDriver::start(ZONE);
    let screenshot = if std::env::var_os("LONGHAUL_UPDATE_SCREENSHOT").is_some_and(|v| v == "1") {
        PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/img/testbed-ui.png"
        ))
    } else {
        dir.0.join("testbed-ui.png")
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let alice_id = rt.block_on(async {
        let c = browser::session(&driver, &profile).await;
        let id = drive(&c, &svc, alice, bob_id, b_start, &screenshot).await;
        c.close().await.expect("close the browser");
        id
    });

    // The API agrees: alice's booking was released (it ran from its start to the release), and
    // bob's is untouched.
    let (s, list) = get(
        &svc,
        alice,
        "/api/v1/bookings?resource=cern/starlight-lambda",
    );
    assert_eq!(s, 200, "{list}");
    let status = |id: u64| {
        list["bookings"]
            .as_array()
            .expect("bookings")
            .iter()
            .find(|b| b["id"].as_u64() == Some(id))
            .unwrap_or_else(|| panic!("booking {id} listed: {list}"))["status"]
            .clone()
    };
    assert_eq!(status(alice_id), "released");
    assert_eq!(status(bob_id), "upcoming");

    let png = std::fs::read(&screenshot).expect("the screenshot was written");
    let (w, h) = png_size(&png);
    assert!(w >= 1200 && h >= 800, "screenshot is {w}x{h}");
    assert!(png.len() > 20_000, "screenshot of {} bytes", png.len());
}

/// The browser part; returns the id of the booking alice made.
async fn drive(
    c: &Client,
    svc: &Service,
    token: &str,
    bob_id: u64,
    b_start: Timestamp,
    screenshot: &Path,
) -> u64 {
    c.goto(&svc.url("/")).await.expect("open the UI");

    // Sign in with a token: the header then names the user and role.
    type_into(c, "#token", token).await;
    click(c, "#signin").await;
    assert_eq!(text(c, "#who:not([hidden]) .user").await, "alice");
    assert_eq!(text(c, "#who .role").await, "user");
    let zone = wait_for(c, "#zone").await;
    assert_eq!(
        zone.prop("value").await.expect("zone").as_deref(),
        Some(ZONE)
    );

    // Bob's booking is on the timeline, in its circuit's row, labelled with its owner; hovering
    // shows its times in UTC.
    let bar = format!(
        r#".g-row[data-resource="cern/starlight-lambda/1g-a"] .bar[data-booking="{bob_id}"][data-owner="bob"]"#
    );
    assert!(text(c, &bar).await.contains("bob"));
    let title = attr(c, &bar, "title").await.unwrap_or_default();
    assert!(title.contains("UTC: "), "hover shows UTC: {title}");
    wait_for(
        c,
        r#".g-row[data-resource="cern/host-1"] .state.maintenance"#,
    )
    .await;
    wait_for(
        c,
        r#".g-row[data-resource="cern/starlight-lambda/1g-b"] .state.degraded"#,
    )
    .await;

    // Three days rather than the week: bars wide enough to read in the screenshot.
    wait_for(c, "#span")
        .await
        .select_by_value("3")
        .await
        .expect("3-day view");

    // A slot on the parent lambda overlapping bob's circuit booking: the preview names it before
    // anything is booked.
    // Choosing the lambda in the resource tree puts it in the booking form.
    click(
        c,
        r#".g-row[data-resource="cern/starlight-lambda"] .res-label button.name"#,
    )
    .await;
    let chosen = wait_for(c, "#f-resource").await.prop("value").await;
    assert_eq!(
        chosen.expect("value").as_deref(),
        Some("cern/starlight-lambda")
    );
    type_into(c, "#f-length", "2h").await;
    type_into(
        c,
        "#f-start",
        &local(b_start + SignedDuration::from_hours(1)),
    )
    .await;
    let named = text(
        c,
        &format!(r#"#preview[data-state="conflict"] li[data-booking="{bob_id}"]"#),
    )
    .await;
    assert!(
        named.contains(&format!("#{bob_id}"))
            && named.contains("bob")
            && named.contains("cern/starlight-lambda/1g-a"),
        "the preview names bob's booking: {named}"
    );
    wait_for(c, ".ghost.conflict").await;
    wait_for(
        c,
        r#".g-row[data-resource="cern/starlight-lambda"] .ghost.conflict"#,
    )
    .await;
    wait_for(
        c,
        &format!(r#"#preview[data-state="conflict"] li[data-booking="{bob_id}"]"#),
    )
    .await;
    let png = c.screenshot().await.expect("screenshot");
    std::fs::write(screenshot, &png).expect("write the screenshot");

    // A slot over the browser zone's next spring-forward gets the DST warning (whether or not it is
    // also beyond the booking horizon depends on today's date: only the warning is checked).
    let tz = jiff::tz::TimeZone::get(ZONE).expect("zone");
    let change = tz
        .following(Timestamp::now())
        .map(|t| t.timestamp())
        .find(|&t| tz.to_offset(t) > tz.to_offset(t - SignedDuration::from_secs(1)))
        .expect("a spring-forward ahead");
    type_into(
        c,
        "#f-start",
        &local(change - SignedDuration::from_hours(1)),
    )
    .await;
    let dst = text(c, r#"#preview .warning[data-code="dst_change"]"#).await;
    assert!(
        dst.contains("Daylight saving") && dst.contains(ZONE),
        "{dst}"
    );

    // Free time in the days shown, at least 1 h: the first free interval starts now (bob's booking
    // starts in 2 h or more); "Book this" fills the form and the preview agrees it is free.
    wait_for(c, "#q-window")
        .await
        .select_by_value("shown")
        .await
        .expect("window");
    type_into(c, "#q-length", "1h").await;
    click(c, "#find").await;
    click(c, "#free-list .book-this").await;
    wait_for(c, r#"#preview[data-state="ok"]"#).await;
    let resource = wait_for(c, "#f-resource").await.prop("value").await;
    assert_eq!(
        resource.expect("value").as_deref(),
        Some("cern/starlight-lambda")
    );

    // Now, for 30 minutes: free; the preview says so.
    type_into(c, "#f-length", "30m").await;
    click(c, "#f-now").await;
    wait_for(c, r#"#preview[data-state="ok"]"#).await;

    // Book (a hold), confirm it, see it on the timeline, release it.
    click(c, "#book").await;
    let result = "#book-result[data-booking]:not([hidden])";
    let id: u64 = attr(c, result, "data-booking")
        .await
        .expect("data-booking")
        .parse()
        .expect("numeric id");
    assert!(text(c, result).await.contains(&format!("Held #{id}")));
    wait_for(
        c,
        &format!(r#".bar.mine.held[data-booking="{id}"][data-status="held"]"#),
    )
    .await;
    click(
        c,
        &format!(r#"#mine-list button[data-action="confirm"][data-booking="{id}"]"#),
    )
    .await;
    wait_for(
        c,
        &format!(
            r#".g-row[data-resource="cern/starlight-lambda"] .bar.mine[data-booking="{id}"][data-status="active"]"#
        ),
    )
    .await;
    click(
        c,
        &format!(r#"#mine-list button[data-action="release"][data-booking="{id}"]"#),
    )
    .await;
    wait_for(
        c,
        &format!(r#".bar[data-booking="{id}"][data-status="released"]"#),
    )
    .await;
    let errors = c
        .find(Locator::Css("#action-error"))
        .await
        .expect("error box");
    assert!(
        !errors.is_displayed().await.expect("displayed"),
        "no action failed: {}",
        errors.text().await.unwrap_or_default()
    );
    id
}

/// `GET /api/v1/preview` over HTTP, and the page's assets with their types and CSP (no browser).
#[test]
fn testbed_preview_endpoint_and_ui_assets() {
    let dir = TempDir::new("preview");
    let (svc, tokens) = alice_and_bob(&dir);
    let (alice, bob) = (&tokens[0], &tokens[1]);
    let start = hour_from_now(3);
    let end = start + SignedDuration::from_hours(2);
    let bob_id = book_1g_a(&svc, bob, start, end, None);
    let preview = |token: &str, query: &str| get(&svc, token, &format!("/api/v1/preview?{query}"));

    // The lambda over bob's booking of one of its circuits, 9 h: the conflict and the rule, together.
    let long_end = start + SignedDuration::from_hours(9);
    let (s, p) = preview(
        alice,
        &format!(
            "resource=cern/starlight-lambda&start={start}&end={long_end}&zone=America/Chicago"
        ),
    );
    assert_eq!(s, 200, "{p}");
    assert_eq!(p["ok"], false);
    assert_eq!(
        (p["user"].as_str(), p["role"].as_str()),
        (Some("alice"), Some("user"))
    );
    let conflicts = p["conflicts"].as_array().expect("conflicts");
    assert_eq!(conflicts.len(), 1, "{p}");
    assert_eq!(conflicts[0]["booking"].as_u64(), Some(bob_id));
    assert_eq!(conflicts[0]["user"], "bob");
    assert_eq!(conflicts[0]["resource"], "cern/starlight-lambda/1g-a");
    assert_eq!(conflicts[0]["status"], "upcoming");
    assert_eq!(p["refusals"][0]["rule"], "max_contiguous", "{p}");
    // Nothing was written: the same question gives the same answer, and bob's booking is alone.
    let (_, again) = preview(
        alice,
        &format!(
            "resource=cern/starlight-lambda&start={start}&end={long_end}&zone=America/Chicago"
        ),
    );
    assert_eq!(again, p);
    let (_, list) = get(&svc, alice, "/api/v1/bookings");
    assert_eq!(list["bookings"].as_array().map(Vec::len), Some(1), "{list}");

    // The other half is free (but degraded): ok, with the warning.
    let (s, p) = preview(
        alice,
        &format!("resource=cern/starlight-lambda/1g-b&start={start}&end={end}"),
    );
    assert_eq!(s, 200, "{p}");
    assert_eq!(p["ok"], true, "{p}");
    assert_eq!(p["warnings"][0]["code"], "degraded", "{p}");

    // Refusals of the request itself, with the statuses booking gives.
    let (s, e) = get(&svc, "not-a-token", "/api/v1/preview?resource=cern");
    assert_eq!((s, e["code"].as_str()), (401, Some("unauthorized")));
    let (s, e) = preview(alice, "resource=cern");
    assert_eq!(
        (s, e["code"].as_str()),
        (400, Some("missing_parameter")),
        "{e}"
    );
    let (s, e) = preview(
        alice,
        "resource=cern&start=2026-12-01T10:00:00&end=2026-12-01T11:00:00Z",
    );
    assert_eq!((s, e["code"].as_str()), (400, Some("invalid_time")), "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap_or("")
            .contains("no UTC offset"),
        "{e}"
    );
    let (s, e) = preview(
        alice,
        &format!("resource=cern&start={start}&end={end}&zone=Mars/Olympus"),
    );
    assert_eq!((s, e["code"].as_str()), (422, Some("unknown_zone")), "{e}");
    let (s, e) = preview(
        alice,
        &format!("resource=cern/nowhere&start={start}&end={end}"),
    );
    assert_eq!(
        (s, e["code"].as_str()),
        (404, Some("unknown_resource")),
        "{e}"
    );

    // The page and its assets: right types, the strict CSP, no sniffing.
    for (path, kind, needle) in [
        ("/", "text/html", "<title>longhaul testbed"),
        ("/ui/app.js", "text/javascript", "/api/v1/preview"),
        ("/ui/style.css", "text/css", ".gantt"),
    ] {
        let resp = crate::testbed::agent()
            .get(&svc.url(path))
            .call()
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        assert!(
            resp.content_type().starts_with(kind),
            "{path}: {}",
            resp.content_type()
        );
        let csp = resp
            .header("content-security-policy")
            .unwrap_or("")
            .to_owned();
        assert!(
            csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
            "{path}: {csp}"
        );
        assert_eq!(resp.header("x-content-type-options"), Some("nosniff"));
        let body = resp.into_string().expect("body");
        assert!(body.contains(needle), "{path}");
    }
}

/// The host pane (issue 20) in Chromium: alice, holding a booking of the host, sees its power state,
/// powers it on with a button (the state the service read back shows, and the "BMC" — a local
/// command endpoint over a flag file — agrees), and watches its console update live, without a
/// reload, as the test's console server writes a boot and a panic (marked). Screenshot kept in the
/// test's directory (`LONGHAUL_UPDATE_SCREENSHOT=1`: `docs/img/testbed-host.png`).
#[test]
fn testbed_ui_host_pane_powers_and_shows_a_live_console() {
    use std::io::Write;
    let dir = TempDir::new("ui-host");
    let flag = dir.0.join("powered");
    let console = std::net::TcpListener::bind("127.0.0.1:0").expect("console listener");
    let bmc = dir.0.join("bmc.toml");
    let f = flag.display();
    crate::testbed_console::private_file(
        &bmc,
        &format!(
            "[[host]]\nid = \"cern/pc-1\"\nconsole = \"tcp:{}\"\n\
             command = {{ status = [\"sh\", \"-c\", \"[ -e {f} ] && echo on || echo off\"], \
             on = [\"touch\", \"{f}\"], off = [\"rm\", \"-f\", \"{f}\"] }}\n",
            console.local_addr().expect("address")
        ),
    );
    let db = dir.0.join("testbed.sqlite").display().to_string();
    let (svc, tokens) = Service::start_with(
        &db,
        &[("alice", "user", None), ("root", "admin", None)],
        &["--bmc", &bmc.display().to_string(), "--agent-timeout", "3"],
        "[[resource]]\nid = \"cern\"\nkind = \"site\"\n\n[[resource]]\nid = \"cern/pc-1\"\nkind = \"host\"\n",
    );
    let alice = &tokens[0];
    crate::testbed_console::book_now(&svc, alice, "cern/pc-1");
    // The host's agent, registered and accepted: the pane shows it reachable, then hung.
    let mut host_agent = std::process::Command::new(crate::util::bin())
        .args([
            "agent",
            "--server",
            &svc.url(""),
            "--host",
            "cern/pc-1",
            "--key-file",
        ])
        .arg(dir.0.join("agent.key"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("longhaul agent");
    let accepted = std::time::Instant::now();
    loop {
        let (status, body) = crate::testbed::send(
            crate::testbed::agent()
                .post(&svc.url("/api/v1/hosts/accept?host=cern/pc-1"))
                .set("Authorization", &format!("Bearer {}", tokens[1])),
            None,
        );
        if status == 200 {
            break;
        }
        assert!(
            accepted.elapsed() < std::time::Duration::from_secs(30),
            "{status} {body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let (mut con, _) = console
        .accept()
        .expect("the service connects to the console");
    con.write_all(
        b"[    0.000000] Linux version 6.1.0-lh (first boot)\n[    0.5] hello from pc-1\n",
    )
    .expect("console");

    let profile = TempDir::new("chromium-profile");
    let driver = ChromeDriver::start(ZONE);
    let screenshot = if std::env::var_os("LONGHAUL_UPDATE_SCREENSHOT").is_some_and(|v| v == "1") {
        PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/img/testbed-host.png"
        ))
    } else {
        dir.0.join("testbed-host.png")
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let c = browser::session(&driver, &profile).await;
        c.goto(&svc.url("/")).await.expect("open the UI");
        type_into(&c, "#token", alice).await;
        click(&c, "#signin").await;
        wait_for(&c, "#who:not([hidden])").await;
        // Picking the host reads its power from the "BMC" and starts its console.
        wait_for(&c, "#h-host")
            .await
            .select_by_value("cern/pc-1")
            .await
            .expect("pick the host");
        wait_for(&c, r#"#h-state[data-state="off"]"#).await;
        wait_for(&c, r#"#h-agent[data-agent="reachable"]"#).await;
        assert!(
            text(&c, "#h-console .c-boot")
                .await
                .contains("Linux version 6.1.0-lh (first boot)")
        );
        assert!(text(&c, "#h-console").await.contains("hello from pc-1"));
        click(&c, r#"[data-power="on"]"#).await;
        wait_for(&c, r#"#h-state[data-state="on"]"#).await;
        assert!(flag.exists(), "the BMC command ran");
        // Live: lines written now appear without a reload, the panic marked.
        con.write_all(b"[   42.000000] Kernel panic - not syncing: sysrq triggered crash\n")
            .expect("console");
        let panic = text(&c, "#h-console .c-panic").await;
        assert!(panic.contains("Kernel panic - not syncing"), "{panic}");
        assert!(text(&c, "#h-boots").await.contains("panicked"));
        // The panicked host's agent falls silent with its console: the holder sees it hung.
        let _ = host_agent.kill();
        let _ = host_agent.wait();
        wait_for(&c, r#"#h-agent[data-agent="hung"]"#).await;
        let alert = text(&c, "#h-alert").await;
        assert!(alert.starts_with("cern/pc-1 is hung since"), "{alert}");
        assert!(alert.contains("console silent as long"), "{alert}");
        assert!(text(&c, "#h-events").await.contains("hung"));
        c.execute(
            "document.getElementById('host-card').scrollIntoView()",
            vec![],
        )
        .await
        .expect("scroll to the pane");
        let png = c.screenshot().await.expect("screenshot");
        std::fs::write(&screenshot, &png).expect("write the screenshot");
        c.close().await.expect("close the browser");
    });
    let (s, ops) = get(&svc, alice, "/api/v1/operations");
    assert_eq!(s, 200);
    let actions: Vec<&str> = ops["operations"]
        .as_array()
        .expect("operations")
        .iter()
        .map(|o| o["action"].as_str().unwrap_or(""))
        .collect();
    assert!(
        actions.contains(&"power on") && actions.contains(&"console read"),
        "{actions:?}"
    );
    let png = std::fs::read(&screenshot).expect("the screenshot was written");
    assert!(png_size(&png).0 >= 1200);
}
