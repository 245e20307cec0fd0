//! The monitor's dashboard in a real browser (issue 15): three `longhaul server`s on loopback, a
//! mesh of throughput, latency and traceroute tests, and a path change found for real: the monitor
//! runs, stops, and runs again with one host's address changed (127.0.0.1 to 127.0.0.2, both its
//! server's), so the next trace to it reaches another address and the archive records the change.
//! Headless Chromium then shows the grid, the map and a pair's time series, opens the path change
//! (the two traceroutes side by side), and receives a result live.
//!
//! The screenshot goes to the test's temporary directory; with `LONGHAUL_UPDATE_SCREENSHOT=1` it
//! replaces `docs/img/monitor-dashboard.png`, which the README shows.

use std::path::PathBuf;
use std::time::Duration;

use fantoccini::{Client, Locator};
use longhaul_testkit::fixtures::TempDir;

use crate::browser::{self, CHROMEDRIVER, CHROMIUM, ChromeDriver, attr, click, png_size, wait_for};
use crate::monitor::{MonitorProc, controllers};
use crate::transfer::Scratch;
use crate::util::{ServerProc, ended_within, sigterm};

/// The mesh, with host b at `b_address`.
fn mesh(ports: &[u16], b_address: &str) -> String {
    let sites = [
        ("a", "127.0.0.1", 46.23, 6.05),
        ("b", b_address, 41.88, -87.63),
        ("c", "127.0.0.1", 52.36, 4.90),
    ];
    let mut m = String::from("name = \"ui\"\n");
    for ((name, address, lat, lon), port) in sites.iter().zip(ports) {
        m += &format!(
            "[[host]]\nname = \"{name}\"\naddress = \"{address}\"\nport = {port}\nlat = {lat}\n\
             lon = {lon}\ngroups = [\"all\"]\n"
        );
    }
    m += "[[test]]\nname = \"trace\"\nkind = \"traceroute\"\nfrom = [\"a\"]\nto = [\"b\"]\n\
          every = \"2s\"\nslip = \"0s\"\n";
    m += "[[test]]\nname = \"lat\"\nkind = \"latency\"\nfrom = [\"all\"]\nevery = \"4s\"\n";
    m += "[[test]]\nname = \"bw\"\nkind = \"throughput\"\nfrom = [\"all\"]\nevery = \"1min\"\n\
          slip = \"1s\"\nargs = \"-t 1\"\n";
    m
}

#[test]
fn the_dashboard_shows_the_grid_the_map_a_series_and_a_path_change() {
    for bin in [CHROMIUM, CHROMEDRIVER] {
        if !longhaul_testkit::require(
            std::path::Path::new(bin).exists(),
            format_args!("{bin} is missing (apt-get install chromium chromium-driver)"),
        ) {
            return;
        }
    }
    let t = Scratch::new("monitor-ui");
    let key = t.key("mon.key");
    let ctl = controllers(&t, &key);
    // Every address of the host (no -B): b's server answers at 127.0.0.2 too.
    let servers: Vec<ServerProc> = (0..3)
        .map(|_| ServerProc::start(&["--controllers", &ctl]))
        .collect();
    let ports: Vec<u16> = servers.iter().map(|s| s.port).collect();
    let file = t.join("ui.toml");
    let archive = t.join("ui.sqlite");

    std::fs::write(&file, mesh(&ports, "127.0.0.1")).unwrap();
    let mut first = MonitorProc::start(&file, &archive, &key);
    first.records_until("traceroute", 2, Duration::from_secs(30));
    first.records_until("throughput", 2, Duration::from_secs(60));
    sigterm(first.child.id());
    ended_within(&mut first.child, Duration::from_secs(30), "the monitor");

    std::fs::write(&file, mesh(&ports, "127.0.0.2")).unwrap();
    let (mut second, at) = MonitorProc::start_with(&file, &archive, &key, &[]);
    let end = std::time::Instant::now() + Duration::from_secs(30);
    let change = loop {
        assert!(std::time::Instant::now() < end, "no path change found");
        let seen = second.records_until("traceroute", 1, Duration::from_secs(30));
        if let Some(r) = seen.iter().find(|r| !r["path_change"].is_null()) {
            break r.clone();
        }
    };
    assert_eq!(change["path_change"]["before"], "127.0.0.1");
    assert_eq!(change["path_change"]["after"], "127.0.0.2");

    let profile = TempDir::new("chromium-profile-monitor");
    let driver = ChromeDriver::start("UTC");
    let screenshot = if std::env::var_os("LONGHAUL_UPDATE_SCREENSHOT").is_some_and(|v| v == "1") {
        PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/img/monitor-dashboard.png"
        ))
    } else {
        t.join("monitor-dashboard.png")
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let c = browser::session(&driver, &profile).await;
        drive(&c, &format!("http://{at}/"), &screenshot).await;
        c.close().await.expect("close the browser");
    });
    let png = std::fs::read(&screenshot).expect("the screenshot was written");
    let (w, h) = png_size(&png);
    assert!(w >= 1200 && h >= 800, "screenshot is {w}x{h}");
    assert!(png.len() > 20_000, "screenshot of {} bytes", png.len());
}

async fn select(c: &Client, test: &str) {
    wait_for(c, "#test")
        .await
        .select_by_value(test)
        .await
        .unwrap_or_else(|e| panic!("select {test}: {e}"));
}

async fn count(c: &Client, css: &str) -> usize {
    c.find_all(Locator::Css(css)).await.expect(css).len()
}

async fn drive(c: &Client, url: &str, screenshot: &std::path::Path) {
    c.goto(url).await.expect("open the dashboard");
    wait_for(c, "body[data-ready='true']").await;
    assert_eq!(attr(c, "body", "data-error").await, None);

    // The traceroute test: one pair, a -> b; its path changed.
    select(c, "trace").await;
    wait_for(c, "#grid td.cell").await;
    assert_eq!(
        count(c, "#grid td.cell").await,
        2,
        "a->b and b->a cells in a 2x2 grid"
    );
    click(c, "#grid td.cell span[data-src='a'][data-dst='b']").await;
    wait_for(c, "#pair-section:not([hidden]) #chart polyline").await;
    click(c, "#chart g.change rect.hit").await;
    wait_for(c, "#diff:not([hidden])").await;
    let hops = |id: &'static str| async move {
        let mut out = Vec::new();
        for li in c.find_all(Locator::Css(id)).await.expect(id) {
            out.push(li.text().await.expect("hop"));
        }
        out
    };
    assert_eq!(hops("#diff-before li").await, ["127.0.0.1"]);
    assert_eq!(hops("#diff-after li").await, ["127.0.0.2"]);
    assert_eq!(count(c, "#diff-after li.changed").await, 1);

    // Latency: all three sites on the map, six directed links, coloured.
    select(c, "lat").await;
    wait_for(c, "#map circle.site").await;
    assert_eq!(count(c, "#map circle.site").await, 3);
    assert_eq!(count(c, "#map line.link").await, 6);
    assert_eq!(
        count(c, "#grid td.cell").await,
        6,
        "3 x 3 less the diagonal"
    );

    // Live: a result arrives without a reload.
    wait_for(c, "body[data-updates]").await;
    wait_for(c, ".live.on").await;

    // Throughput: the grid coloured.
    select(c, "bw").await;
    wait_for(c, "#grid td.cell span.ok").await;
    click(c, "#grid td.cell span[data-src='a'][data-dst='c']").await;
    wait_for(c, "#chart circle.point").await;
    // Throughput, retransmits and RTT: one panel each.
    assert_eq!(count(c, "#chart polyline.series").await, 3);
    // For the README: the latency grid and a pair's RTT, loss and jitter.
    select(c, "lat").await;
    click(c, "#grid td.cell span[data-src='a'][data-dst='b']").await;
    wait_for(c, "#chart polyline").await;
    assert_eq!(count(c, "#chart polyline.series").await, 3);
    let png = c.screenshot().await.expect("screenshot");
    std::fs::write(screenshot, &png).expect("write the screenshot");
}
