//! A real browser for the UI tests (the testbed's and the monitor's): Debian's headless Chromium
//! driven through `chromedriver` (WebDriver) with `fantoccini`, and the waits every such test needs
//! (on an element or attribute the UI sets, never a fixed sleep).

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::error::CmdError;
use fantoccini::{Client, ClientBuilder, Locator};
use longhaul_testkit::fixtures::TempDir;

use crate::util::read_lines;

pub(crate) const CHROMIUM: &str = "/usr/bin/chromium";
pub(crate) const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// `chromedriver` on a free loopback port; killed on drop.
pub(crate) struct ChromeDriver {
    child: Child,
    pub(crate) url: String,
}

impl ChromeDriver {
    pub(crate) fn start(zone: &str) -> Self {
        // chromedriver has no "any free port": take one from the kernel and hand it over.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let mut child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .env("TZ", zone)
            // Its own process group, with the browser it starts: a failing test kills them all.
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start chromedriver");
        read_lines(
            child.stdout.take().expect("stdout"),
            Some("chromedriver"),
            |line| line.contains("started successfully"),
        )
        .recv_timeout(Duration::from_secs(60))
        .expect("chromedriver says it started");
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for ChromeDriver {
    /// Kills chromedriver's process group: chromedriver and, when the test failed before closing
    /// the session, the browser it started (which would otherwise outlive the test).
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A WebDriver session with headless Chromium (profile in `profile`), 1600 × 1140.
pub(crate) async fn session(driver: &ChromeDriver, profile: &TempDir) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert("browserName".into(), "chrome".into());
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": CHROMIUM,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                format!("--user-data-dir={}", profile.0.display()),
                "--window-size=1600,1140", "--hide-scrollbars", "--lang=en-US",
            ],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a WebDriver session with chromium")
}

pub(crate) const WAIT: Duration = Duration::from_secs(30);

pub(crate) async fn wait_for(c: &Client, css: &str) -> fantoccini::elements::Element {
    c.wait()
        .at_most(WAIT)
        .every(Duration::from_millis(50))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("waiting for {css}: {e}"))
}

/// Clicks the element `css` once it exists; the UI re-renders lists, so a handle that went stale
/// between finding and clicking is looked up again.
pub(crate) async fn click(c: &Client, css: &str) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let e = wait_for(c, css).await;
        match e.click().await {
            Ok(()) => return,
            Err(e) if is_stale(&e) && std::time::Instant::now() < deadline => {}
            Err(e) => panic!("clicking {css}: {e}"),
        }
    }
}

pub(crate) fn is_stale(e: &CmdError) -> bool {
    matches!(e, CmdError::Standard(w) if w.error == fantoccini::error::ErrorStatus::StaleElementReference)
}

/// The text of `css` once it exists (looked up again if the UI re-rendered it meanwhile).
pub(crate) async fn text(c: &Client, css: &str) -> String {
    loop {
        match wait_for(c, css).await.text().await {
            Ok(t) => return t,
            Err(e) if is_stale(&e) => {}
            Err(e) => panic!("text of {css}: {e}"),
        }
    }
}

/// Attribute `name` of `css` once it exists (looked up again if re-rendered meanwhile).
pub(crate) async fn attr(c: &Client, css: &str, name: &str) -> Option<String> {
    loop {
        match wait_for(c, css).await.attr(name).await {
            Ok(v) => return v,
            Err(e) if is_stale(&e) => {}
            Err(e) => panic!("attribute {name} of {css}: {e}"),
        }
    }
}

/// A PNG's width and height from its IHDR chunk (after checking the signature).
pub(crate) fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert!(
        bytes.len() > 24 && bytes.starts_with(b"\x89PNG\r\n\x1a\n") && &bytes[12..16] == b"IHDR",
        "not a PNG ({} bytes)",
        bytes.len()
    );
    let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
    (be(16), be(20))
}
