//! End-to-end tests of `longhaul testbed serve`: the real binary on a free loopback port, over SQLite
//! and over a real PostgreSQL that the test starts itself (initdb as the `postgres` user into a
//! temporary directory; failing with the reason when the binaries are missing or we are not root).
//! The concurrency tests are issue 6's "Done means": 200 concurrent requests for overlapping slots
//! give exactly one booking, on one resource and on a parent with its children.

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};

use longhaul_testkit::fixtures::{TempDir, run};

use crate::util::{Machine, bin, machine_shared, postgres, read_lines};

const INVENTORY: &str = r#"
[[resource]]
id = "cern"
kind = "site"
zone = "Europe/Zurich"

[[resource]]
id = "cern/starlight-lambda"
kind = "lambda"
capacity = "2.5G"

[[resource]]
id = "cern/starlight-lambda/1g-a"
kind = "circuit"
capacity = "1G"

[[resource]]
id = "cern/starlight-lambda/1g-b"
kind = "circuit"
capacity = "1G"
"#;

/// A running `longhaul testbed serve`; killed on drop.
pub(crate) struct Service {
    child: Child,
    base: String,
    _dir: TempDir,
    _machine: Machine,
}

impl Service {
    /// Creates tokens for `users` (name, role) in `database`, then starts the service on it with the
    /// cern inventory. Returns the service and the tokens, in order.
    pub(crate) fn start(database: &str, users: &[(&str, &str)]) -> (Self, Vec<String>) {
        let users: Vec<_> = users.iter().map(|&(u, r)| (u, r, None)).collect();
        Self::start_with(database, &users, &[], INVENTORY)
    }

    /// [`Service::start`] with a zone per user (`token add --tz`), extra `serve` flags (a
    /// `--listen` among them replaces loopback) and another inventory file's text. Holds the machine shared (a no-op in a test that holds it already).
    pub(crate) fn start_with(
        database: &str,
        users: &[(&str, &str, Option<&str>)],
        serve_flags: &[&str],
        inventory_toml: &str,
    ) -> (Self, Vec<String>) {
        let machine = machine_shared();
        let dir = TempDir::new("svc");
        let inventory = dir.0.join("testbed.toml");
        std::fs::write(&inventory, inventory_toml).expect("inventory");
        let tokens = users
            .iter()
            .map(|(user, role, zone)| {
                let mut cmd = Command::new(bin());
                cmd.args([
                    "testbed",
                    "token",
                    "add",
                    user,
                    "--role",
                    role,
                    "--database",
                    database,
                ]);
                if let Some(z) = zone {
                    cmd.args(["--tz", z]);
                }
                run(&mut cmd).trim().to_owned()
            })
            .collect();
        // Loopback, unless the flags give another address.
        let listen: &[&str] = if serve_flags.contains(&"--listen") {
            &[]
        } else {
            &["--listen", "127.0.0.1:0"]
        };
        let mut child = Command::new(bin())
            .args(["testbed", "serve", "--log", "warn"])
            .args(listen)
            .args(["--database", database, "--inventory"])
            .arg(&inventory)
            .args(serve_flags)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start longhaul testbed serve");
        let rx = read_lines(
            child.stderr.take().expect("stderr"),
            Some("testbed serve"),
            |line| line.starts_with("longhaul testbed listening on "),
        );
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the service prints its address");
        let base = line
            .trim_start_matches("longhaul testbed listening on ")
            .split_whitespace()
            .next()
            .expect("url")
            .to_owned();
        let svc = Self {
            child,
            base,
            _dir: dir,
            _machine: machine,
        };
        (svc, tokens)
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The inventory file it was started with.
    pub(crate) fn inventory_file(&self) -> std::path::PathBuf {
        self._dir.0.join("testbed.toml")
    }

    /// Sends the service `signal` (e.g. "HUP") and says whether it still runs.
    pub(crate) fn signal(&mut self, signal: &str) -> bool {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
        std::thread::sleep(Duration::from_millis(300));
        self.child.try_wait().expect("try_wait").is_none()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(120))
        .build()
}

/// Status and body of a request (4xx and 5xx included).
pub(crate) fn send(
    req: ureq::Request,
    body: Option<&serde_json::Value>,
) -> (u16, serde_json::Value) {
    let r = match body {
        Some(b) => req.send_json(b),
        None => req.call(),
    };
    let resp = match r {
        Ok(resp) => resp,
        Err(ureq::Error::Status(_, resp)) => resp,
        Err(e) => panic!("transport error: {e}"),
    };
    let status = resp.status();
    let text = resp.into_string().expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

pub(crate) fn post_booking(
    svc: &Service,
    token: &str,
    body: &serde_json::Value,
    key: Option<&str>,
) -> (u16, serde_json::Value) {
    let mut req = agent()
        .post(&svc.url("/api/v1/bookings"))
        .set("Authorization", &format!("Bearer {token}"));
    if let Some(k) = key {
        req = req.set("Idempotency-Key", k);
    }
    send(req, Some(body))
}

pub(crate) fn get(svc: &Service, token: &str, path: &str) -> (u16, serde_json::Value) {
    send(
        agent()
            .get(&svc.url(path))
            .set("Authorization", &format!("Bearer {token}")),
        None,
    )
}

/// A whole hour `days` days from now, as RFC 3339 UTC.
pub(crate) fn at(days: i64, plus_minutes: i64) -> String {
    let now = Timestamp::now().as_second();
    let hour = (now / 3600 + days * 24) * 3600;
    Timestamp::from_second(hour)
        .unwrap()
        .checked_add(SignedDuration::from_mins(plus_minutes))
        .unwrap()
        .to_string()
}

/// Fires `bodies` (with tokens) at once from one thread each; returns (status, body) in order.
fn concurrently(
    svc: &Service,
    requests: Vec<(String, serde_json::Value, Option<String>)>,
) -> Vec<(u16, serde_json::Value)> {
    let barrier = Arc::new(Barrier::new(requests.len()));
    std::thread::scope(|s| {
        let handles: Vec<_> = requests
            .into_iter()
            .map(|(token, body, key)| {
                let barrier = Arc::clone(&barrier);
                s.spawn(move || {
                    barrier.wait();
                    post_booking(svc, &token, &body, key.as_deref())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("request thread"))
            .collect()
    })
}

fn count(results: &[(u16, serde_json::Value)], status: u16) -> usize {
    results.iter().filter(|(s, _)| *s == status).count()
}

fn users() -> Vec<(&'static str, &'static str)> {
    vec![
        ("u0", "user"),
        ("u1", "user"),
        ("u2", "user"),
        ("u3", "user"),
        ("u4", "user"),
    ]
}

/// Live (held or upcoming) bookings of the whole cern tree.
fn live(svc: &Service, token: &str) -> Vec<serde_json::Value> {
    let (status, list) = get(
        svc,
        token,
        "/api/v1/bookings?resource=cern/starlight-lambda",
    );
    assert_eq!(status, 200, "{list}");
    list["bookings"]
        .as_array()
        .expect("bookings")
        .iter()
        .filter(|b| b["status"] == "upcoming" || b["status"] == "held")
        .cloned()
        .collect()
}

/// (a) 200 concurrent requests for overlapping slots of one resource: one 201, 199 409s.
fn one_resource_200(database: &str, label: &str) -> Vec<serde_json::Value> {
    let (svc, tokens) = Service::start(database, &users());
    let requests = (0..200)
        .map(|i| {
            let body = serde_json::json!({
                "resource": "cern/starlight-lambda",
                "start": at(2, i % 30),
                "end": at(2, 60 + i % 30),
                "hold": i % 4 == 0,
            });
            (
                tokens[usize::try_from(i).unwrap() % tokens.len()].clone(),
                body,
                None,
            )
        })
        .collect();
    let started = Instant::now();
    let results = concurrently(&svc, requests);
    let elapsed = started.elapsed();
    let (created, conflicts) = (count(&results, 201), count(&results, 409));
    println!(
        "{label} one resource: {created} x 201, {conflicts} x 409 of 200 in {:.2} s",
        elapsed.as_secs_f64()
    );
    assert_eq!((created, conflicts), (1, 199), "{results:?}");
    for (s, body) in &results {
        if *s == 409 {
            assert_eq!(body["code"], "conflict", "{body}");
            assert!(
                body["message"].as_str().unwrap().contains("by booking "),
                "the 409 names the booking: {body}"
            );
        }
    }
    let live = live(&svc, &tokens[0]);
    assert_eq!(live.len(), 1, "{live:?}");
    live
}

fn conflicts(a: &str, b: &str) -> bool {
    a == b || a.starts_with(&format!("{b}/")) || b.starts_with(&format!("{a}/"))
}

/// (b) 200 concurrent requests split between a parent and its children.
fn parent_children_200(database: &str, label: &str) {
    let (svc, tokens) = Service::start(database, &users());
    // A parent and one child: exactly one wins.
    let pair = ["cern/starlight-lambda", "cern/starlight-lambda/1g-a"];
    let requests = (0..200)
        .map(|i| {
            let body = serde_json::json!({
                "resource": pair[usize::try_from(i).unwrap() % 2],
                "start": at(3, i % 30),
                "end": at(3, 60 + i % 30),
            });
            (
                tokens[usize::try_from(i).unwrap() % tokens.len()].clone(),
                body,
                None,
            )
        })
        .collect();
    let results = concurrently(&svc, requests);
    let (created, refused) = (count(&results, 201), count(&results, 409));
    println!("{label} lambda + 1g-a: {created} x 201, {refused} x 409 of 200");
    assert_eq!((created, refused), (1, 199), "{results:?}");
    // The site, the lambda and both circuits: the winners never conflict (the two circuits may
    // both win: they are independent), and every loser was refused with a conflict.
    let tree = [
        "cern",
        "cern/starlight-lambda",
        "cern/starlight-lambda/1g-a",
        "cern/starlight-lambda/1g-b",
    ];
    let requests = (0..200)
        .map(|i| {
            let body = serde_json::json!({
                "resource": tree[usize::try_from(i).unwrap() % 4],
                "start": at(5, i % 30),
                "end": at(5, 60 + i % 30),
            });
            (
                tokens[usize::try_from(i).unwrap() % tokens.len()].clone(),
                body,
                None,
            )
        })
        .collect();
    let results = concurrently(&svc, requests);
    let (created, refused) = (count(&results, 201), count(&results, 409));
    println!("{label} site + lambda + 2 circuits: {created} x 201, {refused} x 409 of 200");
    assert_eq!(created + refused, 200, "{results:?}");
    let winners: Vec<String> = results
        .iter()
        .filter(|(s, _)| *s == 201)
        .map(|(_, b)| b["resource"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        winners == ["cern"]
            || winners == ["cern/starlight-lambda"]
            || (1..=2).contains(&winners.len()) && winners.iter().all(|w| w.contains("/1g-")),
        "{winners:?}"
    );
    for (i, a) in winners.iter().enumerate() {
        for b in &winners[i + 1..] {
            assert!(!conflicts(a, b), "{a} and {b} both booked");
        }
    }
    let (_, all) = get(&svc, &tokens[0], "/api/v1/bookings?resource=cern");
    let live: Vec<_> = all["bookings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["status"] == "upcoming")
        .collect();
    assert_eq!(live.len(), 1 + winners.len(), "{all}");
}

/// (c) The same Idempotency-Key 20 times at once: one booking, the same answer 20 times.
fn idempotency_20(database: &str, label: &str) {
    let (svc, tokens) = Service::start(database, &users());
    let body = serde_json::json!({
        "resource": "cern/starlight-lambda/1g-b",
        "start": at(4, 0),
        "end": at(4, 90),
        "note": "retried by a script",
    });
    let requests = (0..20)
        .map(|_| (tokens[0].clone(), body.clone(), Some("job-42".to_owned())))
        .collect();
    let results = concurrently(&svc, requests);
    let ids: Vec<_> = results.iter().map(|(_, b)| b["id"].clone()).collect();
    println!(
        "{label} idempotency: {} x 201 of 20, ids {:?}",
        count(&results, 201),
        ids.iter()
            .map(ToString::to_string)
            .collect::<std::collections::BTreeSet<_>>()
    );
    assert_eq!(count(&results, 201), 20, "{results:?}");
    assert!(ids.iter().all(|id| *id == ids[0] && id.is_u64()), "{ids:?}");
    let (_, list) = get(&svc, &tokens[0], "/api/v1/bookings");
    assert_eq!(list["bookings"].as_array().unwrap().len(), 1, "{list}");
    // The same key with another body is refused; another user's same key is their own.
    let other = serde_json::json!({
        "resource": "cern/starlight-lambda/1g-b",
        "start": at(4, 120),
        "end": at(4, 180),
    });
    let (s, e) = post_booking(&svc, &tokens[0], &other, Some("job-42"));
    assert_eq!(
        (s, e["code"].as_str()),
        (422, Some("idempotency_mismatch")),
        "{e}"
    );
    let (s, _) = post_booking(&svc, &tokens[1], &other, Some("job-42"));
    assert_eq!(s, 201);
}

#[test]
fn testbed_sqlite_one_resource_200_concurrent() {
    let dir = TempDir::new("sqlite");
    let db = dir.0.join("a.sqlite").display().to_string();
    one_resource_200(&db, "sqlite");
}

#[test]
fn testbed_sqlite_parent_children_200_concurrent() {
    let dir = TempDir::new("sqlite");
    parent_children_200(
        &format!("sqlite://{}", dir.0.join("b.sqlite").display()),
        "sqlite",
    );
}

#[test]
fn testbed_sqlite_idempotency_20_concurrent() {
    let dir = TempDir::new("sqlite");
    idempotency_20(&dir.0.join("c.sqlite").display().to_string(), "sqlite");
}

#[test]
fn testbed_postgres_one_resource_200_concurrent() {
    let Some(pg) = postgres() else { return };
    let url = pg.database();
    let live = one_resource_200(&url, "postgres");
    // The database itself: one booking's claims, one exact.
    let id = live[0]["id"].as_u64().unwrap();
    assert_eq!(
        pg.psql(&url, "SELECT count(*) FROM claim WHERE exact = 1"),
        "1"
    );
    assert_eq!(
        pg.psql(
            &url,
            "SELECT string_agg(resource || ':' || exact, ',' ORDER BY resource) FROM claim"
        ),
        "cern:0,cern/starlight-lambda:1"
    );
    assert_eq!(
        pg.psql(&url, "SELECT min(booking) FROM claim"),
        id.to_string()
    );
}

#[test]
fn testbed_postgres_parent_children_200_concurrent() {
    let Some(pg) = postgres() else { return };
    parent_children_200(&pg.database(), "postgres");
}

#[test]
fn testbed_postgres_idempotency_20_concurrent() {
    let Some(pg) = postgres() else { return };
    idempotency_20(&pg.database(), "postgres");
}

#[test]
fn testbed_postgres_exclusion_constraint_refuses_a_direct_insert() {
    // The guarantee is the database's: a writer that skips the service's checks is refused too.
    let Some(pg) = postgres() else { return };
    let url = pg.database();
    let (svc, tokens) = Service::start(&url, &users());
    let (s, b) = post_booking(
        &svc,
        &tokens[0],
        &serde_json::json!({"resource": "cern/starlight-lambda/1g-a", "start": at(2, 0), "end": at(2, 60)}),
        None,
    );
    assert_eq!(s, 201, "{b}");
    let out = Command::new(pg.tool("psql"))
        .args(["-X", "-d", &url, "-v", "ON_ERROR_STOP=1", "-c"])
        .arg(
            "INSERT INTO booking (resource, owner, during, status, created_at)
               SELECT 'cern', 'mallory', during, 'confirmed', now() FROM claim WHERE exact = 1;
             INSERT INTO claim (booking, resource, exact, during)
               SELECT currval('booking_id_seq'), 'cern', 1, during FROM claim WHERE exact = 1;",
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("parent_child"),
        "{err}"
    );
}

#[test]
fn testbed_postgres_exclusion_constraint_refuses_a_direct_extension() {
    // An extension is a claim update; a writer that moves an end into the next booking without
    // asking the service is refused by the constraint too.
    let Some(pg) = postgres() else { return };
    let url = pg.database();
    let (svc, tokens) = Service::start(&url, &users());
    for (token, resource, from, to) in [
        (&tokens[0], "cern/starlight-lambda", 0, 60),
        (&tokens[1], "cern/starlight-lambda/1g-a", 120, 180),
    ] {
        let (s, b) = post_booking(
            &svc,
            token,
            &serde_json::json!({"resource": resource, "start": at(2, from), "end": at(2, to)}),
            None,
        );
        assert_eq!(s, 201, "{b}");
    }
    let out = Command::new(pg.tool("psql"))
        .args(["-X", "-d", &url, "-v", "ON_ERROR_STOP=1", "-c"])
        .arg(
            "UPDATE claim SET during = tstzrange(lower(during), upper(during) + interval '90 minutes')
              WHERE booking = 1",
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("parent_child"),
        "{err}"
    );
}

#[test]
fn testbed_users_cannot_change_each_others_bookings() {
    let dir = TempDir::new("sqlite");
    let db = dir.0.join("d.sqlite").display().to_string();
    let (svc, tokens) = Service::start(
        &db,
        &[("alice", "user"), ("bob", "user"), ("root", "admin")],
    );
    let (s, b) = post_booking(
        &svc,
        &tokens[0],
        &serde_json::json!({"resource": "cern/starlight-lambda", "start": at(2, 0), "end": at(2, 60), "hold": true}),
        None,
    );
    assert_eq!((s, b["status"].as_str()), (201, Some("held")), "{b}");
    let id = b["id"].as_u64().unwrap();
    for op in ["release", "cancel", "confirm"] {
        let (s, e) = send(
            agent()
                .post(&svc.url(&format!("/api/v1/bookings/{id}/{op}")))
                .set("Authorization", &format!("Bearer {}", tokens[1])),
            None,
        );
        assert_eq!(
            (s, e["code"].as_str()),
            (403, Some("not_owner")),
            "{op}: {e}"
        );
    }
    // No token, a wrong token: 401.
    let (s, _) = send(
        agent().post(&svc.url(&format!("/api/v1/bookings/{id}/cancel"))),
        None,
    );
    assert_eq!(s, 401);
    let (s, _) = send(
        agent()
            .post(&svc.url(&format!("/api/v1/bookings/{id}/cancel")))
            .set("Authorization", "Bearer lh_nope"),
        None,
    );
    assert_eq!(s, 401);
    // The owner confirms; releasing before the start says to cancel; an admin may cancel.
    let owner = |op: &str, token: &str| {
        send(
            agent()
                .post(&svc.url(&format!("/api/v1/bookings/{id}/{op}")))
                .set("Authorization", &format!("Bearer {token}")),
            None,
        )
    };
    let (s, b) = owner("confirm", &tokens[0]);
    assert_eq!((s, b["status"].as_str()), (200, Some("upcoming")), "{b}");
    let (s, e) = owner("release", &tokens[0]);
    assert_eq!(s, 409);
    assert!(e["message"].as_str().unwrap().contains("cancel it"), "{e}");
    let (s, b) = owner("cancel", &tokens[2]);
    assert_eq!((s, b["status"].as_str()), (200, Some("cancelled")), "{b}");
    // The slot is free again.
    let (s, _) = post_booking(
        &svc,
        &tokens[1],
        &serde_json::json!({"resource": "cern", "start": at(2, 0), "end": at(2, 60)}),
        None,
    );
    assert_eq!(s, 201);
}

#[test]
fn testbed_policy_and_time_refusals_carry_reasons() {
    let dir = TempDir::new("sqlite");
    let db = dir.0.join("p.sqlite").display().to_string();
    let (svc, tokens) = Service::start(&db, &[("alice", "user")]);
    let (s, e) = post_booking(
        &svc,
        &tokens[0],
        &serde_json::json!({"resource": "cern", "start": at(2, 0), "end": at(2, 8 * 60 + 1)}),
        None,
    );
    assert_eq!((s, e["code"].as_str()), (422, Some("policy")), "{e}");
    assert_eq!(e["reasons"][0]["code"], "max_contiguous", "{e}");
    let (s, e) = post_booking(
        &svc,
        &tokens[0],
        &serde_json::json!({"resource": "cern", "start": "2030-01-01T10:00:00", "end": "2030-01-01T11:00:00Z"}),
        None,
    );
    assert_eq!((s, e["code"].as_str()), (400, Some("invalid_time")), "{e}");
    let (s, _) = post_booking(
        &svc,
        &tokens[0],
        &serde_json::json!({"resource": "mars", "start": at(2, 0), "end": at(2, 60)}),
        None,
    );
    assert_eq!(s, 404);
}

#[test]
fn testbed_xml_and_freebusy() {
    let dir = TempDir::new("sqlite");
    let db = dir.0.join("x.sqlite").display().to_string();
    let (svc, tokens) = Service::start(&db, &[("alice", "user")]);
    let xml = format!(
        "<create-booking><resource>cern/starlight-lambda/1g-a</resource><start>{}</start><end>{}</end></create-booking>",
        at(2, 0),
        at(2, 120)
    );
    let resp = agent()
        .post(&svc.url("/api/v1/bookings"))
        .set("Authorization", &format!("Bearer {}", tokens[0]))
        .set("Content-Type", "application/xml")
        .set("Accept", "application/xml")
        .send_string(&xml)
        .expect("201");
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.content_type(), "application/xml");
    let text = resp.into_string().unwrap();
    assert!(
        text.contains("<booking>") && text.contains("<status>upcoming</status>"),
        "{text}"
    );
    let (s, fb) = get(
        &svc,
        &tokens[0],
        &format!(
            "/api/v1/freebusy?resource=cern/starlight-lambda&from={}&to={}&length=PT4H",
            at(2, -600),
            at(2, 600)
        ),
    );
    assert_eq!(s, 200, "{fb}");
    assert_eq!(
        fb["busy"][0]["resource"], "cern/starlight-lambda/1g-a",
        "{fb}"
    );
    assert_eq!(fb["free"].as_array().unwrap().len(), 2, "{fb}");
    let (s, r) = get(&svc, &tokens[0], "/api/v1/resources");
    assert_eq!(s, 200);
    let ids: Vec<_> = r["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"geneva/cern-starlight") && ids.contains(&"cern/starlight-lambda/1g-b"),
        "{ids:?}"
    );
}

#[test]
fn testbed_openapi_lists_every_route() {
    let dir = TempDir::new("sqlite");
    let db = dir.0.join("o.sqlite").display().to_string();
    let (svc, _) = Service::start(&db, &[]);
    let (s, health) = send(agent().get(&svc.url("/healthz")), None);
    assert_eq!((s, health["status"].as_str()), (200, Some("ok")));
    let (s, doc) = send(agent().get(&svc.url("/openapi.json")), None);
    assert_eq!(s, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    // The served document is the one the crate embeds, whose unit test checks that it lists every
    // route with its responses and nothing more.
    let embedded: serde_json::Value =
        serde_json::from_str(longhaul_web::http::OPENAPI).expect("the embedded OpenAPI document");
    assert_eq!(doc, embedded);
    let (s, _) = send(agent().get(&svc.url("/api/v1/nope")), None);
    assert_eq!(s, 404);
}

fn post(
    svc: &Service,
    token: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> (u16, serde_json::Value) {
    send(
        agent()
            .post(&svc.url(path))
            .set("Authorization", &format!("Bearer {token}")),
        body,
    )
}

/// `#[test] fn $sqlite` and `#[test] fn $postgres`: `$scenario(database)` on a fresh SQLite file and
/// on a fresh database of the throwaway PostgreSQL cluster (failing, with the reason, without one).
macro_rules! on_both_stores {
    ($sqlite:ident, $postgres:ident, $scenario:ident) => {
        #[test]
        fn $sqlite() {
            let dir = TempDir::new("sqlite");
            $scenario(&dir.0.join("t.sqlite").display().to_string());
        }

        #[test]
        fn $postgres() {
            let Some(pg) = postgres() else {
                return;
            };
            $scenario(&pg.database());
        }
    };
}

/// Extend up to the next booking (refused by the database beyond it, naming it), preempt with a
/// notice the owner sees, and the audit log of it all, on one store.
fn extend_preempt_audit(database: &str) {
    let (svc, t) = Service::start(
        database,
        &[
            ("alice", "user"),
            ("bob", "user"),
            ("root", "admin"),
            ("carol", "user"),
        ],
    );
    let (s, a) = post_booking(
        &svc,
        &t[0],
        &serde_json::json!({"resource": "cern/starlight-lambda", "start": at(2, 0), "end": at(2, 120)}),
        None,
    );
    assert_eq!(s, 201, "{a}");
    let a = a["id"].as_u64().unwrap();
    let (s, b) = post_booking(
        &svc,
        &t[1],
        &serde_json::json!({"resource": "cern/starlight-lambda/1g-a", "start": at(2, 240), "end": at(2, 360)}),
        None,
    );
    assert_eq!(s, 201, "{b}");
    let b = b["id"].as_u64().unwrap();
    let extend = |token: &str, end: String| {
        post(
            &svc,
            token,
            &format!("/api/v1/bookings/{a}/extend"),
            Some(&serde_json::json!({"end": end})),
        )
    };
    // Up to the next booking: fine, and the answer echoes the effective end.
    let (s, v) = extend(&t[0], at(2, 180));
    assert_eq!(
        (s, v["end"].as_str()),
        (200, Some(at(2, 180).as_str())),
        "{v}"
    );
    // Into bob's booking of a child circuit: 409 naming it and the latest possible end.
    let (s, e) = extend(&t[0], at(2, 300));
    assert_eq!(
        (s, e["code"].as_str()),
        (409, Some("extend_conflict")),
        "{e}"
    );
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains(&format!("booking {b} starts at")), "{msg}");
    assert!(
        msg.contains(&format!("extend up to {}", at(2, 240))),
        "{msg}"
    );
    // Exactly up to it: allowed (half-open slots touch).
    let (s, v) = extend(&t[0], at(2, 240));
    assert_eq!(s, 200, "{v}");
    // Not longer, not yours, too long in a row.
    let (s, e) = extend(&t[0], at(2, 60));
    assert_eq!((s, e["code"].as_str()), (422, Some("not_longer")), "{e}");
    let (s, e) = extend(&t[1], at(2, 250));
    assert_eq!((s, e["code"].as_str()), (403, Some("not_owner")), "{e}");
    let (s, e) = post(
        &svc,
        &t[1],
        &format!("/api/v1/bookings/{b}/extend"),
        Some(&serde_json::json!({"end": at(2, 240 + 9 * 60)})),
    );
    assert_eq!(
        (s, e["reasons"][0]["code"].as_str()),
        (422, Some("max_contiguous")),
        "{e}"
    );
    let (s, e) = extend(&t[0], "tomorrow".into());
    assert_eq!((s, e["code"].as_str()), (400, Some("invalid_time")), "{e}");
    let (s, e) = post(
        &svc,
        &t[0],
        &format!("/api/v1/bookings/{a}/extend"),
        Some(&serde_json::json!({"to": 1})),
    );
    assert_eq!((s, e["code"].as_str()), (400, Some("invalid_body")), "{e}");
    let (s, _) = post(
        &svc,
        &t[0],
        "/api/v1/bookings/999999/extend",
        Some(&serde_json::json!({"end": at(3, 0)})),
    );
    assert_eq!(s, 404);
    // Preemption: admins only, with a notice.
    let preempt = |token: &str, notice: &str| {
        post(
            &svc,
            token,
            &format!("/api/v1/bookings/{a}/preempt"),
            Some(&serde_json::json!({"notice": notice})),
        )
    };
    let (s, e) = preempt(&t[1], "mine now");
    assert_eq!((s, e["code"].as_str()), (403, Some("not_admin")), "{e}");
    let (s, e) = preempt(&t[2], "  ");
    assert_eq!(
        (s, e["code"].as_str()),
        (422, Some("notice_required")),
        "{e}"
    );
    let (s, v) = preempt(&t[2], "fibre repair on the Geneva side");
    assert_eq!((s, v["status"].as_str()), (200, Some("preempted")), "{v}");
    // The holder sees who and why.
    let (s, list) = get(
        &svc,
        &t[0],
        "/api/v1/bookings?resource=cern/starlight-lambda",
    );
    assert_eq!(s, 200);
    let mine = list["bookings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == a)
        .unwrap()
        .clone();
    assert_eq!(mine["preempted_by"], "root", "{mine}");
    assert_eq!(mine["notice"], "fibre repair on the Geneva side", "{mine}");
    let (s, e) = preempt(&t[2], "again");
    assert_eq!(
        (s, e["code"].as_str()),
        (409, Some("invalid_transition")),
        "{e}"
    );
    // The time is free again.
    let (s, v) = post_booking(
        &svc,
        &t[3],
        &serde_json::json!({"resource": "cern/starlight-lambda", "start": at(2, 0), "end": at(2, 120)}),
        None,
    );
    assert_eq!(s, 201, "{v}");
    // The audit log: who did what, when.
    let (s, log) = get(&svc, &t[1], &format!("/api/v1/bookings/{a}/audit"));
    assert_eq!(s, 200, "{log}");
    let events: Vec<_> = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap(),
                e["actor"].as_str().unwrap(),
                e["role"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("book", "alice", "user"),
            ("extend", "alice", "user"),
            ("extend", "alice", "user"),
            ("preempt", "root", "admin")
        ],
        "{log}"
    );
    assert_eq!(
        log["events"][1]["end_before"].as_str(),
        Some(at(2, 120).as_str()),
        "{log}"
    );
    assert_eq!(
        log["events"][3]["notice"], "fibre repair on the Geneva side",
        "{log}"
    );
    assert_eq!(log["events"][3]["status_after"], "preempted", "{log}");
    let (s, _) = get(&svc, &t[1], "/api/v1/bookings/999999/audit");
    assert_eq!(s, 404);
    // XML in and out.
    let resp = agent()
        .post(&svc.url(&format!("/api/v1/bookings/{b}/extend")))
        .set("Authorization", &format!("Bearer {}", t[1]))
        .set("Content-Type", "application/xml")
        .set("Accept", "application/xml")
        .send_string(&format!(
            "<extend-booking><end>{}</end></extend-booking>",
            at(2, 390)
        ))
        .unwrap();
    let xml = resp.into_string().unwrap();
    assert!(xml.contains(&format!("<end>{}</end>", at(2, 390))), "{xml}");
    let resp = agent()
        .get(&svc.url(&format!("/api/v1/bookings/{a}/audit")))
        .set("Authorization", &format!("Bearer {}", t[0]))
        .set("Accept", "application/xml")
        .call()
        .unwrap();
    let xml = resp.into_string().unwrap();
    assert!(
        xml.contains("<audit-log>") && xml.contains("<action>preempt</action>"),
        "{xml}"
    );
}

on_both_stores!(
    testbed_sqlite_extend_preempt_audit,
    testbed_postgres_extend_preempt_audit,
    extend_preempt_audit
);

/// Beyond the 90-day horizon an event booking waits for an approver, blocking the slot meanwhile.
fn approval(database: &str) {
    let (svc, t) = Service::start(
        database,
        &[("alice", "user"), ("bob", "user"), ("ann", "approver")],
    );
    let body = |event: bool| serde_json::json!({"resource": "cern/starlight-lambda", "start": at(120, 0), "end": at(120, 240), "event": event});
    let (s, e) = post_booking(&svc, &t[0], &body(false), None);
    assert_eq!(
        (s, e["reasons"][0]["code"].as_str()),
        (422, Some("horizon")),
        "{e}"
    );
    let (s, v) = post_booking(&svc, &t[0], &body(true), None);
    assert_eq!(
        (s, v["status"].as_str(), v["approval"].as_str()),
        (202, Some("held"), Some("pending")),
        "{v}"
    );
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "needs_approval"),
        "{v}"
    );
    let id = v["id"].as_u64().unwrap();
    // Pending blocks others.
    let (s, e) = post_booking(
        &svc,
        &t[1],
        &serde_json::json!({"resource": "cern", "start": at(120, 60), "end": at(120, 120), "event": true}),
        None,
    );
    assert_eq!((s, e["code"].as_str()), (409, Some("conflict")), "{e}");
    let (s, e) = post(&svc, &t[0], &format!("/api/v1/bookings/{id}/confirm"), None);
    assert_eq!(
        (s, e["code"].as_str()),
        (409, Some("awaiting_approval")),
        "{e}"
    );
    let (s, e) = post(&svc, &t[1], &format!("/api/v1/bookings/{id}/approve"), None);
    assert_eq!((s, e["code"].as_str()), (403, Some("not_approver")), "{e}");
    let (s, v) = post(&svc, &t[2], &format!("/api/v1/bookings/{id}/approve"), None);
    assert_eq!(
        (s, v["status"].as_str(), v["approval"].as_str()),
        (200, Some("upcoming"), Some("approved")),
        "{v}"
    );
    let (s, e) = post(&svc, &t[2], &format!("/api/v1/bookings/{id}/approve"), None);
    assert_eq!((s, e["code"].as_str()), (409, Some("not_pending")), "{e}");
    let (s, log) = get(&svc, &t[0], &format!("/api/v1/bookings/{id}/audit"));
    assert_eq!(s, 200);
    assert_eq!(log["events"][1]["action"], "approve", "{log}");
    assert_eq!(log["events"][1]["actor"], "ann", "{log}");
    assert_eq!(log["events"][1]["role"], "approver", "{log}");
}

on_both_stores!(
    testbed_sqlite_approval_workflow,
    testbed_postgres_approval_workflow,
    approval
);

/// An approver declines a pending booking with a reason: it ends, its owner sees who and why, its
/// slot is free again, and the audit log keeps the decline; users cannot decline.
fn decline(database: &str) {
    let (svc, t) = Service::start(
        database,
        &[
            ("alice", "user"),
            ("bob", "user"),
            ("ann", "approver"),
            ("root", "admin"),
        ],
    );
    let event = |resource: &str| serde_json::json!({"resource": resource, "start": at(120, 0), "end": at(120, 240), "event": true});
    let (s, v) = post_booking(&svc, &t[0], &event("cern/starlight-lambda"), None);
    assert_eq!(
        (s, v["status"].as_str(), v["approval"].as_str()),
        (202, Some("held"), Some("pending")),
        "{v}"
    );
    let id = v["id"].as_u64().unwrap();
    let path = format!("/api/v1/bookings/{id}/decline");
    // Pending blocks the slot.
    let (s, e) = post_booking(&svc, &t[1], &event("cern/starlight-lambda/1g-a"), None);
    assert_eq!((s, e["code"].as_str()), (409, Some("conflict")), "{e}");
    // Users cannot decline, not even their own booking.
    let reason = serde_json::json!({"reason": "  the March slot is kept for the LSR attempt; please pick April \n"});
    for user in [&t[0], &t[1]] {
        let (s, e) = post(&svc, user, &path, Some(&reason));
        assert_eq!((s, e["code"].as_str()), (403, Some("not_approver")), "{e}");
    }
    // A reason is required, and bounded.
    let (s, e) = post(
        &svc,
        &t[2],
        &path,
        Some(&serde_json::json!({"reason": " \t\n "})),
    );
    assert_eq!(
        (s, e["code"].as_str()),
        (422, Some("reason_required")),
        "{e}"
    );
    let long = serde_json::json!({"reason": "x".repeat(1001)});
    let (s, e) = post(&svc, &t[2], &path, Some(&long));
    assert_eq!(
        (s, e["code"].as_str()),
        (422, Some("reason_too_long")),
        "{e}"
    );
    let (s, e) = post(&svc, &t[2], &path, Some(&serde_json::json!({"why": "no"})));
    assert_eq!((s, e["code"].as_str()), (400, Some("invalid_body")), "{e}");
    let (s, e) = post(
        &svc,
        &t[2],
        "/api/v1/bookings/424242/decline",
        Some(&reason),
    );
    assert_eq!(
        (s, e["code"].as_str()),
        (404, Some("unknown_booking")),
        "{e}"
    );
    // Nothing of that changed the booking.
    let (_, log) = get(&svc, &t[0], &format!("/api/v1/bookings/{id}/audit"));
    assert_eq!(log["events"].as_array().unwrap().len(), 1, "{log}");
    // The approver declines it.
    let (s, v) = post(&svc, &t[2], &path, Some(&reason));
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        (
            v["status"].as_str(),
            v["approval"].as_str(),
            v["declined_by"].as_str(),
            v["decline_reason"].as_str()
        ),
        (
            Some("cancelled"),
            Some("declined"),
            Some("ann"),
            Some("the March slot is kept for the LSR attempt; please pick April")
        ),
        "{v}"
    );
    // The owner sees it so in the booking list.
    let (s, list) = get(&svc, &t[0], "/api/v1/bookings");
    assert_eq!(s, 200);
    let mine = list["bookings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("booking {id} in {list}"));
    assert_eq!(
        (
            mine["status"].as_str(),
            mine["approval"].as_str(),
            mine["declined_by"].as_str()
        ),
        (Some("cancelled"), Some("declined"), Some("ann")),
        "{mine}"
    );
    assert_eq!(mine["decline_reason"], v["decline_reason"], "{mine}");
    // Decided once: neither a second decline nor an approval.
    for op in ["decline", "approve"] {
        let (s, e) = post(
            &svc,
            &t[3],
            &format!("/api/v1/bookings/{id}/{op}"),
            Some(&reason),
        );
        assert_eq!(
            (s, e["code"].as_str()),
            (409, Some("not_pending")),
            "{op}: {e}"
        );
    }
    // The slot is free again: another user books it (a child of the declined resource).
    let (s, other) = post_booking(&svc, &t[1], &event("cern/starlight-lambda/1g-a"), None);
    assert_eq!(
        (s, other["approval"].as_str()),
        (202, Some("pending")),
        "{other}"
    );
    // The audit log: who declined, and why.
    let (s, log) = get(&svc, &t[0], &format!("/api/v1/bookings/{id}/audit"));
    assert_eq!(s, 200);
    let last = &log["events"][1];
    assert_eq!(
        (
            last["action"].as_str(),
            last["actor"].as_str(),
            last["role"].as_str(),
            last["status_before"].as_str(),
            last["status_after"].as_str(),
            last["reason"].as_str()
        ),
        (
            Some("decline"),
            Some("ann"),
            Some("approver"),
            Some("held"),
            Some("declined"),
            Some("the March slot is kept for the LSR attempt; please pick April")
        ),
        "{log}"
    );
    // An ordinary booking is not waiting for approval.
    let (s, plain) = post_booking(
        &svc,
        &t[0],
        &serde_json::json!({"resource": "cern/starlight-lambda/1g-b", "start": at(2, 0), "end": at(2, 60)}),
        None,
    );
    assert_eq!(s, 201, "{plain}");
    let (s, e) = post(
        &svc,
        &t[3],
        &format!("/api/v1/bookings/{}/decline", plain["id"]),
        Some(&reason),
    );
    assert_eq!((s, e["code"].as_str()), (409, Some("not_pending")), "{e}");
    // The XML interface: an admin declines bob's booking.
    let resp = agent()
        .post(&svc.url(&format!("/api/v1/bookings/{}/decline", other["id"])))
        .set("Authorization", &format!("Bearer {}", t[3]))
        .set("Content-Type", "application/xml")
        .set("Accept", "application/xml")
        .send_string("<decline-booking><reason>maintenance window</reason></decline-booking>")
        .expect("200");
    assert_eq!(resp.content_type(), "application/xml");
    let text = resp.into_string().unwrap();
    assert!(
        text.contains("<approval>declined</approval>")
            && text.contains("<declined_by>root</declined_by>")
            && text.contains("<decline_reason>maintenance window</decline_reason>")
            && text.contains("<status>cancelled</status>"),
        "{text}"
    );
}

on_both_stores!(
    testbed_sqlite_decline_approval,
    testbed_postgres_decline_approval,
    decline
);

/// `token list` and `token revoke` on the database, end to end: a revoked token gets 401 at once,
/// the others keep working, the list shows when; `decline` from the command line.
fn tokens_and_cli_decline(database: &str) {
    let (svc, t) = Service::start(
        database,
        &[
            ("alice", "user"),
            ("bob", "user"),
            ("carol", "approver"),
            ("root", "admin"),
        ],
    );
    let me = |token: &str| get(&svc, token, "/api/v1/me").0;
    for token in &t {
        assert_eq!(me(token), 200);
    }
    let admin = |args: &[&str]| {
        let mut all = vec!["testbed", "token"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--database", database]);
        longhaul_env(&all, &[])
    };
    let listed = || {
        let (ok, out, err) = admin(&["list", "--json"]);
        assert!(ok, "{err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let list = listed();
    let entries = list.as_array().unwrap();
    assert_eq!(entries.len(), 4, "{list}");
    for (e, token) in entries.iter().zip(&t) {
        let id = e["id"].as_str().unwrap();
        assert!(
            id.len() == 8 && id.chars().all(|c| c.is_ascii_hexdigit()),
            "{e}"
        );
        assert_eq!(e["revoked"], false, "{e}");
        assert!(e.get("revoked_at").is_none(), "{e}");
        assert!(!list.to_string().contains(token.as_str()), "no secrets");
    }
    let users: Vec<_> = entries
        .iter()
        .map(|e| e["user"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["alice", "bob", "carol", "root"]);
    assert_eq!(entries[2]["role"], "approver");
    // Revoke carol's token by its id, bob's by user name.
    let carol = entries[2]["id"].as_str().unwrap().to_owned();
    let (ok, out, err) = admin(&["revoke", &carol]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with(&format!("revoked token {carol} (carol, approver) at ")),
        "{out}"
    );
    let (ok, out, err) = admin(&["revoke", "--user", "bob"]);
    assert!(ok, "{err}");
    assert!(out.contains("(bob, user)"), "{out}");
    assert_eq!(me(&t[1]), 401, "bob's revoked token");
    assert_eq!(me(&t[2]), 401, "carol's revoked token");
    let (s, e) = post(&svc, &t[2], "/api/v1/bookings/1/approve", None);
    assert_eq!((s, e["code"].as_str()), (401, Some("unauthorized")), "{e}");
    assert_eq!(me(&t[0]), 200, "alice's token still works");
    assert_eq!(me(&t[3]), 200, "root's token still works");
    // The list shows who was revoked, and when.
    let list = listed();
    let revoked: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["user"].as_str().unwrap(),
                e["revoked"].as_bool().unwrap(),
                e["revoked_at"].is_string(),
            )
        })
        .collect();
    assert_eq!(
        revoked,
        [
            ("alice", false, false),
            ("bob", true, true),
            ("carol", true, true),
            ("root", false, false)
        ]
    );
    let (ok, table, err) = admin(&["list"]);
    assert!(ok, "{err}");
    let carol_line = table
        .lines()
        .find(|l| l.starts_with(&carol))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        carol_line.contains("carol") && carol_line.trim_end().ends_with('Z'),
        "{table}"
    );
    // Again: said, not an error. Unknown: one line, exit 1.
    let (ok, out, _) = admin(&["revoke", &carol]);
    assert!(ok && out.contains("revoked already"), "{out}");
    let (ok, _, err) = admin(&["revoke", "deadbeef"]);
    assert!(!ok, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("longhaul: error: no token with id \"deadbeef\""),
        "{err}"
    );
    let (ok, _, err) = admin(&["revoke", "--user", "nobody"]);
    assert!(!ok && err.contains("no token"), "{err}");
    let (ok, _, _) = admin(&["revoke"]);
    assert!(!ok, "an id or --user is required");
    // A new token for a revoked user works.
    let (ok, out, err) = admin(&["add", "bob"]);
    assert!(ok, "{err}");
    assert_eq!(me(out.trim()), 200);
    // `decline` from the command line.
    let client = |token: &str, args: &[&str]| {
        let mut all: Vec<&str> = vec!["testbed"];
        all.extend_from_slice(args);
        longhaul_env(
            &all,
            &[
                ("LONGHAUL_TESTBED_URL", svc.base.as_str()),
                ("LONGHAUL_TESTBED_TOKEN", token),
            ],
        )
    };
    let (ok, out, err) = client(
        &t[0],
        &[
            "reserve",
            "cern",
            "--from",
            &at(120, 0),
            "--to",
            &at(120, 60),
            "--event",
            "--json",
        ],
    );
    assert!(ok, "{err}");
    let id = serde_json::from_str::<serde_json::Value>(&out).unwrap()["id"].to_string();
    let (ok, _, err) = client(&t[0], &["decline", &id, "--reason", "mine"]);
    assert!(!ok && err.contains("(403 not_approver)"), "{err}");
    let (ok, _, err) = client(&t[3], &["decline", &id, "--reason", " "]);
    assert!(!ok && err.contains("(422 reason_required)"), "{err}");
    let (ok, out, err) = client(
        &t[3],
        &["decline", &id, "--reason", "kept for the LSR attempt"],
    );
    assert!(ok, "{err}");
    assert!(
        out.contains("cancelled")
            && out.contains("approval: declined")
            && out.contains("declined by root: kept for the LSR attempt"),
        "{out}"
    );
    let (ok, out, err) = client(&t[0], &["audit", &id]);
    assert!(ok, "{err}");
    assert!(
        out.lines().last().is_some_and(|l| l.contains("decline")
            && l.contains("root (admin)")
            && l.ends_with(": kept for the LSR attempt")),
        "{out}"
    );
}

on_both_stores!(
    testbed_sqlite_tokens_and_cli_decline,
    testbed_postgres_tokens_and_cli_decline,
    tokens_and_cli_decline
);

/// The sweep marks an expired hold `expired` on its own, audited as `system`.
fn sweep(database: &str) {
    let (svc, t) = Service::start_with(
        database,
        &[("alice", "user", None)],
        &["--hold-seconds", "1", "--sweep-seconds", "1"],
        INVENTORY,
    );
    let (s, v) = post_booking(
        &svc,
        &t[0],
        &serde_json::json!({"resource": "cern", "start": at(2, 0), "end": at(2, 60), "hold": true}),
        None,
    );
    assert_eq!((s, v["status"].as_str()), (201, Some("held")), "{v}");
    let id = v["id"].as_u64().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let log = loop {
        let (_, log) = get(&svc, &t[0], &format!("/api/v1/bookings/{id}/audit"));
        if log["events"].as_array().is_some_and(|e| e.len() == 2) || Instant::now() > deadline {
            break log;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let e = &log["events"][1];
    assert_eq!(
        (e["action"].as_str(), e["actor"].as_str()),
        (Some("expire"), Some("system")),
        "{log}"
    );
    assert_eq!(
        (e["status_before"].as_str(), e["status_after"].as_str()),
        (Some("held"), Some("expired")),
        "{log}"
    );
    let (s, e) = post(&svc, &t[0], &format!("/api/v1/bookings/{id}/confirm"), None);
    assert_eq!((s, e["code"].as_str()), (409, Some("hold_expired")), "{e}");
}

on_both_stores!(
    testbed_sqlite_hold_sweep,
    testbed_postgres_hold_sweep,
    sweep
);

/// The next UTC offset change of `zone` after now.
fn next_change(zone: &str) -> Timestamp {
    jiff::tz::TimeZone::get(zone)
        .unwrap()
        .following(Timestamp::now() + SignedDuration::from_hours(48))
        .next()
        .unwrap()
        .timestamp()
}

#[test]
fn testbed_me_zones_and_dst_warnings() {
    let dir = TempDir::new("sqlite");
    let db = dir.0.join("z.sqlite").display().to_string();
    // A zone that does not exist: one line, non-zero exit.
    let out = Command::new(bin())
        .args([
            "testbed",
            "token",
            "add",
            "x",
            "--tz",
            "Europe/Atlantis",
            "--database",
            &db,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("Europe/Atlantis") && err.trim().lines().count() == 1,
        "{err}"
    );
    let (svc, t) = Service::start_with(
        &db,
        &[
            ("alice", "user", Some("America/Chicago")),
            ("bob", "admin", None),
        ],
        &[],
        INVENTORY,
    );
    let (s, me) = get(&svc, &t[0], "/api/v1/me");
    assert_eq!(s, 200);
    assert_eq!(
        me,
        serde_json::json!({"user": "alice", "role": "user", "zone": "America/Chicago"})
    );
    let (s, me) = get(&svc, &t[1], "/api/v1/me");
    assert_eq!(
        (s, &me),
        (200, &serde_json::json!({"user": "bob", "role": "admin"}))
    );
    let (s, _) = get(&svc, "lh_nope", "/api/v1/me");
    assert_eq!(s, 401);
    // Across Chicago's next DST change, on a resource under cern (Europe/Zurich): the view shows the
    // times in Chicago and warns about the change there.
    let change = next_change("America/Chicago");
    let start = change - SignedDuration::from_hours(2);
    let end = change + SignedDuration::from_hours(2);
    let (s, v) = post_booking(
        &svc,
        &t[0],
        &serde_json::json!({"resource": "cern/starlight-lambda", "start": start.to_string(), "end": end.to_string(), "event": true}),
        None,
    );
    assert!(s == 201 || s == 202, "{v}");
    assert_eq!(v["local"]["zone"], "America/Chicago", "{v}");
    let (ls, le) = (
        v["local"]["start"].as_str().unwrap(),
        v["local"]["end"].as_str().unwrap(),
    );
    assert!(
        (ls.contains("CST") && le.contains("CDT")) || (ls.contains("CDT") && le.contains("CST")),
        "{v}"
    );
    let dst: Vec<_> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["code"] == "dst_change")
        .collect();
    assert_eq!(dst.len(), 1, "{v}");
    assert!(
        dst[0]["message"]
            .as_str()
            .unwrap()
            .contains("America/Chicago"),
        "{v}"
    );
    // Lists are localised for the reader: alice sees Chicago; bob (no zone) sees UTC only, and the
    // site zone's warning only where Zurich changes.
    let (_, list) = get(&svc, &t[0], "/api/v1/bookings?resource=cern");
    assert_eq!(
        list["bookings"][0]["local"]["zone"], "America/Chicago",
        "{list}"
    );
    let (_, list) = get(&svc, &t[1], "/api/v1/bookings?resource=cern");
    assert!(list["bookings"][0].get("local").is_none(), "{list}");
    // Across Zurich's next change, the site zone is warned about for everyone.
    let zurich = next_change("Europe/Zurich");
    let (s, v) = post_booking(
        &svc,
        &t[1],
        &serde_json::json!({"resource": "cern/starlight-lambda/1g-b", "start": (zurich - SignedDuration::from_hours(1)).to_string(), "end": (zurich + SignedDuration::from_hours(1)).to_string(), "event": true}),
        None,
    );
    assert!(s == 201 || s == 202, "{v}");
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "dst_change"
                && w["message"].as_str().unwrap().contains("Europe/Zurich")),
        "{v}"
    );
}

#[test]
fn testbed_ical_feeds() {
    let dir = TempDir::new("sqlite");
    let db = dir.0.join("i.sqlite").display().to_string();
    let (svc, api) = Service::start(
        &db,
        &[("alice", "user"), ("bob", "user"), ("ann", "approver")],
    );
    let (s, v) = post_booking(
        &svc,
        &api[0],
        &serde_json::json!({"resource": "cern/starlight-lambda", "start": at(3, 0), "end": at(3, 90), "note": "fibre test; run 2"}),
        None,
    );
    assert_eq!(s, 201, "{v}");
    let id = v["id"].as_u64().unwrap();
    // Calendar feed tokens (`token feed USER`): what `?token=` takes.
    let t: Vec<String> = ["alice", "bob", "ann"]
        .iter()
        .map(|user| {
            run(Command::new(bin()).args(["testbed", "token", "feed", user, "--database", &db]))
                .trim()
                .to_owned()
        })
        .collect();
    let feed = |path: &str| match agent().get(&svc.url(path)).call() {
        Ok(r) => (
            r.status(),
            r.header("content-type").unwrap_or("").to_owned(),
            r.into_string().unwrap(),
        ),
        Err(ureq::Error::Status(c, r)) => (c, String::new(), r.into_string().unwrap()),
        Err(e) => panic!("{e}"),
    };
    let dtstart = format!(
        "DTSTART:{}",
        at(3, 0)
            .parse::<Timestamp>()
            .unwrap()
            .strftime("%Y%m%dT%H%M%SZ")
    );
    // The user's feed, with the token in the URL as calendar applications need.
    let (s, ct, text) = feed(&format!("/api/v1/ical/user/alice.ics?token={}", t[0]));
    assert_eq!(s, 200, "{text}");
    assert!(ct.starts_with("text/calendar"), "{ct}");
    assert!(
        text.starts_with("BEGIN:VCALENDAR\r\n") && text.ends_with("END:VCALENDAR\r\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("UID:booking-{id}@127.0.0.1\r\n")),
        "{text}"
    );
    assert!(text.contains(&format!("{dtstart}\r\n")), "{text}");
    assert!(
        text.contains("DESCRIPTION:fibre test\\; run 2\r\n"),
        "{text}"
    );
    // Another user's feed token: no, an approver's neither (a feed token reads its own user's
    // feed); the approver's API token in the header: yes; no token: 401.
    assert_eq!(
        feed(&format!("/api/v1/ical/user/alice.ics?token={}", t[1])).0,
        403
    );
    assert_eq!(
        feed(&format!("/api/v1/ical/user/alice.ics?token={}", t[2])).0,
        403
    );
    assert_eq!(get(&svc, &api[2], "/api/v1/ical/user/alice.ics").0, 200);
    assert_eq!(feed("/api/v1/ical/user/alice.ics").0, 401);
    assert_eq!(feed("/api/v1/ical/user/alice.ics?token=lh_nope").0, 401);
    // The resource's feed, with the id's slashes as they are or encoded.
    for path in ["cern/starlight-lambda.ics", "cern%2Fstarlight-lambda.ics"] {
        let (s, _, text) = feed(&format!("/api/v1/ical/resource/{path}?token={}", t[1]));
        assert_eq!(s, 200, "{path}: {text}");
        assert!(
            text.contains(&format!("UID:booking-{id}@")) && text.contains("STATUS:CONFIRMED"),
            "{text}"
        );
    }
    let (s, _, text) = feed(&format!("/api/v1/ical/resource/cern.ics?token={}", t[1]));
    assert_eq!(s, 200);
    assert!(
        !text.contains("BEGIN:VEVENT"),
        "only the resource's own bookings: {text}"
    );
    assert_eq!(
        feed(&format!("/api/v1/ical/resource/mars.ics?token={}", t[1])).0,
        404
    );
    assert_eq!(
        feed(&format!("/api/v1/ical/resource/CERN.ics?token={}", t[1])).0,
        400
    );
    assert_eq!(
        feed(&format!("/api/v1/ical/resource/cern?token={}", t[1])).0,
        404
    );
    // A cancelled booking stays, as CANCELLED, so subscribed calendars drop it.
    let (s, _) = post(
        &svc,
        &api[0],
        &format!("/api/v1/bookings/{id}/cancel"),
        None,
    );
    assert_eq!(s, 200);
    let (_, _, text) = feed(&format!("/api/v1/ical/user/alice.ics?token={}", t[0]));
    assert!(
        text.contains("STATUS:CANCELLED") && text.contains("SEQUENCE:1"),
        "{text}"
    );
}

/// Runs `longhaul ARGS` with `env`; returns (success, stdout, stderr).
fn longhaul_env(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let out = Command::new(bin())
        .args(args)
        .env_remove("LONGHAUL_TESTBED")
        .env_remove("LONGHAUL_TESTBED_TOKEN")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn testbed_cli_extend_approve_preempt_audit_me() {
    let dir = TempDir::new("sqlite");
    let db = dir.0.join("c.sqlite").display().to_string();
    let (svc, t) = Service::start_with(
        &db,
        &[
            ("alice", "user", Some("Europe/Zurich")),
            ("ann", "approver", None),
            ("root", "admin", None),
        ],
        &[],
        INVENTORY,
    );
    let client = |token: &str, args: &[&str]| {
        let mut all: Vec<&str> = vec!["testbed"];
        all.extend_from_slice(args);
        longhaul_env(
            &all,
            &[
                ("LONGHAUL_TESTBED_URL", svc.base.as_str()),
                ("LONGHAUL_TESTBED_TOKEN", token),
            ],
        )
    };
    let (ok, out, err) = client(&t[0], &["me"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "alice (user), time zone Europe/Zurich");
    let (ok, out, _) = client(&t[0], &["me", "--json"]);
    assert!(ok);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["zone"],
        "Europe/Zurich"
    );
    let (ok, out, err) = client(
        &t[0],
        &[
            "reserve",
            "cern/starlight-lambda",
            "--from",
            &at(2, 0),
            "--to",
            &at(2, 60),
            "--json",
        ],
    );
    assert!(ok, "{err}");
    let id = serde_json::from_str::<serde_json::Value>(&out).unwrap()["id"]
        .as_u64()
        .unwrap()
        .to_string();
    let (ok, out, err) = client(&t[0], &["extend", &id, "--to", &at(2, 90)]);
    assert!(ok, "{err}");
    assert!(
        out.contains(&at(2, 90)) && out.contains("local (Europe/Zurich)"),
        "{out}"
    );
    // Clear one-line errors and a non-zero exit.
    let (ok, _, err) = client(&t[0], &["extend", &id, "--to", &at(2, 30)]);
    assert!(
        !ok && err.starts_with("longhaul: error: ") && err.contains("(422 not_longer)"),
        "{err}"
    );
    let (ok, _, err) = client(&t[0], &["preempt", &id, "--notice", "x"]);
    assert!(!ok && err.contains("(403 not_admin)"), "{err}");
    let (ok, _, err) = client(&t[1], &["approve", &id]);
    assert!(!ok && err.contains("(409 not_pending)"), "{err}");
    let (ok, out, err) = client(
        &t[2],
        &["preempt", &id, "--notice", "power work in the CERN vault"],
    );
    assert!(ok, "{err}");
    assert!(
        out.contains("preempted by root: power work in the CERN vault"),
        "{out}"
    );
    let (ok, out, err) = client(&t[0], &["audit", &id]);
    assert!(ok, "{err}");
    let lines: Vec<_> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0].contains("book") && lines[0].contains("alice (user)"),
        "{out}"
    );
    assert!(
        lines[1].contains("extend")
            && lines[1].contains(&format!("(end {} -> {})", at(2, 60), at(2, 90))),
        "{out}"
    );
    assert!(
        lines[2].contains("preempt")
            && lines[2].contains("root (admin)")
            && lines[2].ends_with(": power work in the CERN vault"),
        "{out}"
    );
    let (ok, out, _) = client(&t[0], &["audit", &id, "--json"]);
    assert!(ok);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["events"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let (ok, _, err) = client(&t[0], &["audit", "424242"]);
    assert!(!ok && err.contains("(404 unknown_booking)"), "{err}");
}

/// Takes a named testbed down when dropped (also when an assertion fails).
struct Down(&'static str);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new(bin())
            .args(["emulate", "down", "--name", self.0])
            .output();
    }
}

/// Issue 6 item 7: with a testbed service configured, `emulate up` and `lab run` proceed only for
/// the holder of the current reservation, and say who holds it otherwise.
#[test]
fn testbed_emulate_up_and_lab_run_need_the_reservation() {
    let _machine = crate::util::machine_alone();
    if !longhaul_testkit::require(
        longhaul_sys::has_net_admin(),
        "needs CAP_NET_ADMIN (emulate up refuses before asking the service)",
    ) {
        return;
    }
    let dir = TempDir::new("ties");
    let db = dir.0.join("t.sqlite").display().to_string();
    let (svc, t) = Service::start_with(
        &db,
        &[("alice", "user", None), ("bob", "user", None)],
        &[],
        INVENTORY,
    );
    // alice holds the cern-starlight link (the path of `emulate up cern-starlight` and of `lab run
    // window-sweep`) and the whole amsterdam site, from now for an hour.
    let now = Timestamp::from_second(Timestamp::now().as_second() - 30).unwrap();
    let end = now + SignedDuration::from_hours(1);
    let mut ids = Vec::new();
    for resource in ["geneva/cern-starlight", "amsterdam"] {
        let (s, v) = post_booking(
            &svc,
            &t[0],
            &serde_json::json!({"resource": resource, "start": now.to_string(), "end": end.to_string()}),
            None,
        );
        assert_eq!(s, 201, "{v}");
        ids.push(v["id"].as_u64().unwrap());
    }
    let until = if end.strftime("%F").to_string() == Timestamp::now().strftime("%F").to_string() {
        end.strftime("%H:%M UTC").to_string()
    } else {
        end.strftime("%F %H:%M UTC").to_string()
    };
    let (s, cur) = get(
        &svc,
        &t[1],
        "/api/v1/current?resource=geneva/cern-starlight",
    );
    assert_eq!(s, 200, "{cur}");
    assert_eq!(cur["bookings"][0]["owner"], "alice", "{cur}");
    let (s, cur) = get(
        &svc,
        &t[1],
        "/api/v1/current?resource=chicago/starlight-host",
    );
    assert_eq!(
        (s, cur["bookings"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{cur}"
    );
    let env = |token: &str| {
        vec![
            ("LONGHAUL_TESTBED", svc.base.clone()),
            ("LONGHAUL_TESTBED_TOKEN", token.to_owned()),
        ]
    };
    let with = |args: &[&str], env: &[(&str, String)]| {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        longhaul_env(args, &env)
    };
    let up = [
        "emulate",
        "up",
        "cern-starlight",
        "--name",
        "tbtie",
        "--no-server",
    ];
    // bob: refused, with who holds it and until when; exit non-zero; nothing started.
    let (ok, _, err) = with(&up, &env(&t[1]));
    let want = format!(
        "testbed: geneva/cern-starlight is reserved by alice until {until} (booking {})",
        ids[0]
    );
    assert!(!ok, "{err}");
    assert_eq!(err.trim(), format!("longhaul: error: {want}"));
    // The same with flags instead of the environment.
    let (ok, _, err) = with(
        &[&up[..], &["--testbed", &svc.base, "--testbed-token", &t[1]]].concat(),
        &[],
    );
    assert!(!ok && err.contains(&want), "{err}");
    // lab run checks its experiment's path the same way.
    let (ok, _, err) = with(
        &[
            "lab",
            "run",
            "window-sweep",
            "--reduced",
            "--points",
            "1",
            "--archive",
            &dir.0.join("archive").display().to_string(),
        ],
        &env(&t[1]),
    );
    assert!(!ok && err.contains(&want), "{err}");
    // A booking of a whole site covers the paths from it.
    let (ok, _, err) = with(
        &[
            "emulate",
            "up",
            "amsterdam-geneva",
            "--name",
            "tbtie",
            "--no-server",
        ],
        &env(&t[1]),
    );
    assert!(
        !ok && err.contains(&format!(
            "testbed: amsterdam is reserved by alice until {until} (booking {})",
            ids[1]
        )),
        "{err}"
    );
    // A token the service does not know, a service that does not answer, a URL with no token.
    let (ok, _, err) = with(&up, &env("lh_nope"));
    assert!(!ok && err.contains("does not know this token"), "{err}");
    let (ok, _, err) = with(
        &up,
        &[
            ("LONGHAUL_TESTBED", "http://127.0.0.1:9".into()),
            ("LONGHAUL_TESTBED_TOKEN", t[1].clone()),
        ],
    );
    assert!(
        !ok && err.contains("cannot ask the reservation service at http://127.0.0.1:9"),
        "{err}"
    );
    let (ok, _, err) = with(&up, &[("LONGHAUL_TESTBED", svc.base.clone())]);
    assert!(!ok && err.contains("no token"), "{err}");
    // alice, the holder: up, then down.
    let _down = Down("tbtie");
    let (ok, out, err) = with(&up, &env(&t[0]));
    assert!(ok, "alice's emulate up: {err}");
    assert!(
        out.contains("tbtie") || out.contains("longhaul emulate down --name tbtie"),
        "{out}"
    );
    let (ok, _, err) = with(&["emulate", "down", "--name", "tbtie"], &[]);
    assert!(ok, "{err}");
    // Once alice releases the link, bob may bring it up (nobody holds it now).
    let (s, v) = post(
        &svc,
        &t[0],
        &format!("/api/v1/bookings/{}/release", ids[0]),
        None,
    );
    assert_eq!(s, 200, "{v}");
    let (ok, _, err) = with(&up, &env(&t[1]));
    assert!(ok, "bob's emulate up after the release: {err}");
    let (ok, _, err) = with(&["emulate", "down", "--name", "tbtie"], &[]);
    assert!(ok, "{err}");
}

/// An extension to 3 h racing 20 bookings inside the two hours it would add: the database lets either
/// the extension win (and every booking is refused) or the bookings that came first (and the
/// extension is a 409 `extend_conflict`); never both.
fn extend_races_bookings(database: &str) {
    let (svc, t) = Service::start(database, &users());
    let (s, a) = post_booking(
        &svc,
        &t[0],
        &serde_json::json!({"resource": "cern/starlight-lambda", "start": at(2, 0), "end": at(2, 60)}),
        None,
    );
    assert_eq!(s, 201, "{a}");
    let a = a["id"].as_u64().unwrap();
    let barrier = Arc::new(Barrier::new(21));
    let (ext, books) = std::thread::scope(|s| {
        let ext = {
            let barrier = Arc::clone(&barrier);
            let (svc, token) = (&svc, &t[0]);
            s.spawn(move || {
                barrier.wait();
                post(
                    svc,
                    token,
                    &format!("/api/v1/bookings/{a}/extend"),
                    Some(&serde_json::json!({"end": at(2, 180)})),
                )
            })
        };
        let books: Vec<_> = (0..20)
            .map(|i| {
                let barrier = Arc::clone(&barrier);
                let (svc, token) = (&svc, &t[1 + i % 4]);
                let resource = ["cern/starlight-lambda/1g-a", "cern/starlight-lambda"][i % 2];
                s.spawn(move || {
                    barrier.wait();
                    post_booking(
                        svc,
                        token,
                        &serde_json::json!({"resource": resource, "start": at(2, 60 + 5 * i as i64), "end": at(2, 85 + 5 * i as i64)}),
                        None,
                    )
                })
            })
            .collect();
        (
            ext.join().unwrap(),
            books
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>(),
        )
    });
    let won = count(&books, 201);
    match ext.0 {
        200 => assert_eq!(won, 0, "the extension and a booking both won: {books:?}"),
        409 => {
            assert_eq!(ext.1["code"], "extend_conflict", "{:?}", ext.1);
            assert!(won >= 1, "{books:?}");
        }
        other => panic!("extend: {other} {:?}", ext.1),
    }
    // Whatever won, no two live bookings overlap.
    let live = live(&svc, &t[0]);
    for (i, x) in live.iter().enumerate() {
        for y in &live[i + 1..] {
            let overlap =
                x["start"].as_str() < y["end"].as_str() && y["start"].as_str() < x["end"].as_str();
            assert!(!overlap, "{x} and {y} overlap");
        }
    }
}

on_both_stores!(
    testbed_sqlite_extend_races_bookings,
    testbed_postgres_extend_races_bookings,
    extend_races_bookings
);

// Issue 11, finding 10: the service's hostile users.

/// Status, content type and body of a calendar feed request (no `Authorization` header: the URL is
/// all a calendar application has).
fn feed(svc: &Service, path: &str) -> (u16, String) {
    match agent().get(&svc.url(path)).call() {
        Ok(r) => (r.status(), r.into_string().unwrap()),
        Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap()),
        Err(e) => panic!("{e}"),
    }
}

/// An admin subscribes to their calendar: the URL their calendar application (and whoever reads
/// its settings, its sync logs or the proxy's access log) holds must not be an admin credential.
/// Before the fix `?token=` took the admin's API token; now it takes only a read-only feed token,
/// which the API refuses as a bearer token, and which rotates and revokes on its own.
fn feed_tokens(database: &str) {
    let (svc, t) = Service::start(
        database,
        &[("alice", "user"), ("root", "admin"), ("ann", "approver")],
    );
    let (s, v) = post_booking(
        &svc,
        &t[0],
        &serde_json::json!({"resource": "cern/starlight-lambda/1g-a", "start": at(3, 0), "end": at(3, 60)}),
        None,
    );
    assert_eq!(s, 201, "{v}");
    let upcoming = v["id"].as_u64().unwrap();
    let (s, v) = post_booking(
        &svc,
        &t[0],
        &serde_json::json!({"resource": "cern/starlight-lambda/1g-b", "start": at(120, 0), "end": at(120, 60), "event": true}),
        None,
    );
    assert_eq!(s, 202, "{v}");
    let pending = v["id"].as_u64().unwrap();
    // The old calendar URL, with the admin's API token in it: refused.
    let (s, text) = feed(&svc, &format!("/api/v1/ical/user/root.ics?token={}", t[1]));
    assert_eq!(s, 401, "an API token in a feed URL: {text}");
    assert!(text.contains("feed token"), "{text}");
    let (s, text) = feed(
        &svc,
        &format!("/api/v1/ical/resource/cern.ics?token={}", t[1]),
    );
    assert_eq!(s, 401, "an API token in a feed URL: {text}");
    // The admin's feed token, made by the operator's CLI.
    let cli = |args: &[&str]| {
        let mut all = vec!["testbed", "token", "feed"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--database", database]);
        longhaul_env(&all, &[])
    };
    let (ok, out, err) = cli(&["root"]);
    assert!(ok, "{err}");
    let root_feed = out.trim().to_owned();
    assert!(
        root_feed.starts_with("lhf_") && root_feed.len() == 36,
        "{out}"
    );
    let (s, text) = feed(
        &svc,
        &format!("/api/v1/ical/user/root.ics?token={root_feed}"),
    );
    assert_eq!(s, 200, "{text}");
    assert!(text.starts_with("BEGIN:VCALENDAR"), "{text}");
    let (s, text) = feed(
        &svc,
        &format!("/api/v1/ical/resource/cern/starlight-lambda/1g-a.ics?token={root_feed}"),
    );
    assert_eq!(s, 200, "{text}");
    assert!(text.contains(&format!("UID:booking-{upcoming}@")), "{text}");
    // A feed token reads its own user's feed only, whatever the role.
    let (s, text) = feed(
        &svc,
        &format!("/api/v1/ical/user/alice.ics?token={root_feed}"),
    );
    assert_eq!(s, 403, "{text}");
    // The attack: the token from the admin's feed URL as a bearer token, to book, approve, preempt,
    // and to read the API.
    let (s, e) = post_booking(
        &svc,
        &root_feed,
        &serde_json::json!({"resource": "cern/starlight-lambda/1g-b", "start": at(4, 0), "end": at(4, 60)}),
        None,
    );
    assert_eq!((s, e["code"].as_str()), (401, Some("unauthorized")), "{e}");
    assert!(e["message"].as_str().unwrap().contains("feed token"), "{e}");
    let (s, e) = post(
        &svc,
        &root_feed,
        &format!("/api/v1/bookings/{pending}/approve"),
        None,
    );
    assert_eq!((s, e["code"].as_str()), (401, Some("unauthorized")), "{e}");
    let (s, e) = post(
        &svc,
        &root_feed,
        &format!("/api/v1/bookings/{upcoming}/preempt"),
        Some(&serde_json::json!({"notice": "mine now"})),
    );
    assert_eq!((s, e["code"].as_str()), (401, Some("unauthorized")), "{e}");
    let preview = format!(
        "/api/v1/preview?resource=cern&start={}&end={}",
        at(4, 0),
        at(4, 60)
    );
    let audit = format!("/api/v1/bookings/{upcoming}/audit");
    for path in [
        "/api/v1/me",
        "/api/v1/bookings",
        "/api/v1/resources",
        "/api/v1/current?resource=cern",
        &preview,
        &audit,
    ] {
        assert_eq!(get(&svc, &root_feed, path).0, 401, "{path}");
    }
    // Nothing changed.
    let (_, list) = get(&svc, &t[0], "/api/v1/bookings");
    let statuses: Vec<_> = list["bookings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["id"].as_u64().unwrap(),
                b["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            (upcoming, "upcoming".to_owned()),
            (pending, "held".to_owned())
        ],
        "{list}"
    );
    // A user makes their own through the API (with their API token), which rotates it: the
    // old one stops working at once.
    let make = |token: &str| post(&svc, token, "/api/v1/me/feed-token", None);
    let (s, v) = make(&t[0]);
    assert_eq!(s, 201, "{v}");
    let alice1 = v["token"].as_str().unwrap().to_owned();
    assert_eq!(v["user"], "alice", "{v}");
    assert_eq!(
        v["feed"].as_str().unwrap(),
        format!("/api/v1/ical/user/alice.ics?token={alice1}"),
        "{v}"
    );
    assert_eq!(feed(&svc, v["feed"].as_str().unwrap()).0, 200);
    assert_eq!(make(&alice1).0, 401, "a feed token cannot make feed tokens");
    let (s, v) = make(&t[0]);
    assert_eq!(s, 201, "{v}");
    let alice2 = v["token"].as_str().unwrap().to_owned();
    assert_ne!(alice1, alice2);
    assert_eq!(
        feed(&svc, &format!("/api/v1/ical/user/alice.ics?token={alice1}")).0,
        401,
        "rotated"
    );
    assert_eq!(
        feed(&svc, &format!("/api/v1/ical/user/alice.ics?token={alice2}")).0,
        200
    );
    // Revoked through the API, and by the operator.
    let (s, _) = send(
        agent()
            .delete(&svc.url("/api/v1/me/feed-token"))
            .set("Authorization", &format!("Bearer {}", t[0])),
        None,
    );
    assert_eq!(s, 204);
    assert_eq!(
        feed(&svc, &format!("/api/v1/ical/user/alice.ics?token={alice2}")).0,
        401
    );
    let (ok, out, err) = cli(&["root", "--revoke"]);
    assert!(ok, "{err}");
    assert!(out.contains("revoked"), "{out}");
    assert_eq!(
        feed(
            &svc,
            &format!("/api/v1/ical/user/root.ics?token={root_feed}")
        )
        .0,
        401
    );
    // Revoking a user's API tokens ends their feed too.
    let (ok, out, err) = cli(&["ann"]);
    assert!(ok, "{err}");
    let ann_feed = out.trim().to_owned();
    assert_eq!(
        feed(&svc, &format!("/api/v1/ical/user/ann.ics?token={ann_feed}")).0,
        200
    );
    let (ok, _, err) = longhaul_env(
        &[
            "testbed",
            "token",
            "revoke",
            "--user",
            "ann",
            "--database",
            database,
        ],
        &[],
    );
    assert!(ok, "{err}");
    assert_eq!(
        feed(&svc, &format!("/api/v1/ical/user/ann.ics?token={ann_feed}")).0,
        401
    );
    // A user with no API token gets no feed token.
    let (ok, _, err) = cli(&["nobody"]);
    assert!(!ok && err.contains("nobody"), "{err}");
    // API tokens still read the feeds in the Authorization header, as before.
    let (s, _) = get(&svc, &t[2], "/api/v1/ical/user/alice.ics");
    assert_eq!(s, 401, "ann's tokens are revoked");
    let resp = agent()
        .get(&svc.url("/api/v1/ical/user/alice.ics"))
        .set("Authorization", &format!("Bearer {}", t[1]))
        .call()
        .expect("an admin reads alice's feed with the API token");
    assert!(resp.content_type().starts_with("text/calendar"));
}

on_both_stores!(
    testbed_sqlite_feed_token_is_not_an_api_token,
    testbed_postgres_feed_token_is_not_an_api_token,
    feed_tokens
);

/// An approval is a second person's decision: an approver (or admin) who books an event beyond the
/// horizon cannot approve it themselves, in JSON or XML; another approver can. `serve
/// --allow-self-approval` lifts the rule for a testbed with one approver.
fn self_approval(database: &str) {
    let (svc, t) = Service::start(
        database,
        &[
            ("ann", "approver"),
            ("root", "admin"),
            ("carol", "approver"),
        ],
    );
    let event = |token: &str, resource: &str, days: i64| {
        let (s, v) = post_booking(
            &svc,
            token,
            &serde_json::json!({"resource": resource, "start": at(days, 0), "end": at(days, 60), "event": true}),
            None,
        );
        assert_eq!((s, v["approval"].as_str()), (202, Some("pending")), "{v}");
        v["id"].as_u64().unwrap()
    };
    let anns = event(&t[0], "cern/starlight-lambda/1g-a", 120);
    let roots = event(&t[1], "cern/starlight-lambda/1g-b", 120);
    let (s, e) = post(
        &svc,
        &t[0],
        &format!("/api/v1/bookings/{anns}/approve"),
        None,
    );
    assert_eq!((s, e["code"].as_str()), (403, Some("self_approval")), "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("--allow-self-approval"),
        "{e}"
    );
    let xml = match agent()
        .post(&svc.url(&format!("/api/v1/bookings/{anns}/approve")))
        .set("Authorization", &format!("Bearer {}", t[0]))
        .set("Accept", "application/xml")
        .call()
    {
        Err(ureq::Error::Status(s, r)) => (s, r.into_string().unwrap()),
        Ok(r) => (r.status(), r.into_string().unwrap()),
        Err(e) => panic!("{e}"),
    };
    assert_eq!(xml.0, 403, "{}", xml.1);
    assert!(xml.1.contains("<code>self_approval</code>"), "{}", xml.1);
    let (s, e) = post(
        &svc,
        &t[1],
        &format!("/api/v1/bookings/{roots}/approve"),
        None,
    );
    assert_eq!((s, e["code"].as_str()), (403, Some("self_approval")), "{e}");
    // Still pending; another approver decides.
    let (_, log) = get(&svc, &t[0], &format!("/api/v1/bookings/{anns}/audit"));
    assert_eq!(log["events"].as_array().unwrap().len(), 1, "{log}");
    let (s, v) = post(
        &svc,
        &t[2],
        &format!("/api/v1/bookings/{anns}/approve"),
        None,
    );
    assert_eq!((s, v["approval"].as_str()), (200, Some("approved")), "{v}");
    let (s, v) = post(
        &svc,
        &t[0],
        &format!("/api/v1/bookings/{roots}/approve"),
        None,
    );
    assert_eq!((s, v["approval"].as_str()), (200, Some("approved")), "{v}");
    drop(svc);
    // The switch.
    let (svc, _) = Service::start_with(database, &[], &["--allow-self-approval"], INVENTORY);
    let (s, v) = post_booking(
        &svc,
        &t[0],
        &serde_json::json!({"resource": "cern/starlight-lambda/1g-a", "start": at(130, 0), "end": at(130, 60), "event": true}),
        None,
    );
    assert_eq!(s, 202, "{v}");
    let id = v["id"].as_u64().unwrap();
    let (s, v) = post(&svc, &t[0], &format!("/api/v1/bookings/{id}/approve"), None);
    assert_eq!((s, v["approval"].as_str()), (200, Some("approved")), "{v}");
}

on_both_stores!(
    testbed_sqlite_no_self_approval,
    testbed_postgres_no_self_approval,
    self_approval
);

/// Free text is bounded by what it is for, not by the 2 MiB body limit: a booking's note (4096
/// characters) and a preemption notice (1000, as a decline's reason), refused with a 422 naming
/// the field, in JSON and XML; nothing is stored.
fn text_limits(database: &str) {
    let (svc, t) = Service::start(database, &[("alice", "user"), ("root", "admin")]);
    let body = |note: &str, day: i64| serde_json::json!({"resource": "cern/starlight-lambda/1g-a", "start": at(day, 0), "end": at(day, 60), "note": note});
    // (The answer is not printed on failure: before the fix it was the whole booking, 1 MiB note
    // included.)
    let (s, e) = post_booking(&svc, &t[0], &body(&"x".repeat(1 << 20), 3), None);
    assert_eq!(
        (s, e["code"].as_str()),
        (422, Some("note_too_long")),
        "a 1 MiB note"
    );
    assert!(e["message"].as_str().unwrap().starts_with("note: "), "{e}");
    let (s, e) = post_booking(&svc, &t[0], &body(&"é".repeat(4097), 3), None);
    assert_eq!((s, e["code"].as_str()), (422, Some("note_too_long")), "{e}");
    let xml = format!(
        "<create-booking><resource>cern/starlight-lambda/1g-a</resource><start>{}</start><end>{}</end><note>{}</note></create-booking>",
        at(3, 0),
        at(3, 60),
        "y".repeat(5000)
    );
    let (s, text) = match agent()
        .post(&svc.url("/api/v1/bookings"))
        .set("Authorization", &format!("Bearer {}", t[0]))
        .set("Content-Type", "application/xml")
        .set("Accept", "application/xml")
        .send_string(&xml)
    {
        Err(ureq::Error::Status(s, r)) => (s, r.into_string().unwrap()),
        Ok(r) => (r.status(), r.into_string().unwrap()),
        Err(e) => panic!("{e}"),
    };
    assert_eq!(s, 422, "{text}");
    assert!(text.contains("<code>note_too_long</code>"), "{text}");
    let (_, list) = get(&svc, &t[0], "/api/v1/bookings");
    assert_eq!(list["bookings"].as_array().unwrap().len(), 0, "{list}");
    // At the limit: fine.
    let (s, v) = post_booking(&svc, &t[0], &body(&"é".repeat(4096), 3), None);
    assert_eq!(s, 201, "{v}");
    let id = v["id"].as_u64().unwrap();
    // A preemption notice.
    let preempt = |notice: &str| {
        post(
            &svc,
            &t[1],
            &format!("/api/v1/bookings/{id}/preempt"),
            Some(&serde_json::json!({ "notice": notice })),
        )
    };
    let (s, e) = preempt(&"z".repeat(1 << 20));
    assert_eq!(
        (s, e["code"].as_str()),
        (422, Some("notice_too_long")),
        "a 1 MiB notice"
    );
    assert!(
        e["message"].as_str().unwrap().starts_with("notice: "),
        "{e}"
    );
    let (s, v) = preempt(&"z".repeat(1000));
    assert_eq!((s, v["status"].as_str()), (200, Some("preempted")), "{v}");
}

on_both_stores!(
    testbed_sqlite_free_text_limits,
    testbed_postgres_free_text_limits,
    text_limits
);

#[test]
fn testbed_metrics_count_bookings_conflicts_and_request_latency() {
    let dir = TempDir::new("metrics");
    let db = dir.0.join("m.sqlite").display().to_string();
    let (svc, tokens) = Service::start(&db, &users());
    let body = serde_json::json!({"resource": "geneva/cern-starlight",
        "start": at(2, 0), "end": at(2, 60)});
    assert_eq!(post_booking(&svc, &tokens[0], &body, None).0, 201);
    assert_eq!(post_booking(&svc, &tokens[1], &body, None).0, 409);
    let text = agent()
        .get(&svc.url("/metrics"))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    for line in [
        "longhaul_testbed_booking_requests_total{outcome=\"created\"} 1",
        "longhaul_testbed_booking_requests_total{outcome=\"conflict\"} 1",
        "longhaul_testbed_requests_total{route=\"/api/v1/bookings\",method=\"POST\",status=\"201\"} 1",
        "longhaul_testbed_request_duration_seconds_count{route=\"/api/v1/bookings\",method=\"POST\"} 2",
    ] {
        assert!(text.contains(line), "{line} in:\n{text}");
    }
}

/// SIGHUP reloads the inventory file: a resource added to it can be booked without a restart; a
/// broken file leaves the inventory in force (and the service serving).
#[test]
fn testbed_sighup_reloads_the_inventory_and_keeps_it_when_the_file_is_broken() {
    let dir = TempDir::new("sighup");
    let db = dir.0.join("tb.sqlite");
    let (mut svc, tokens) = Service::start(db.to_str().unwrap(), &[("alice", "user")]);
    let token = &tokens[0];
    let has = |svc: &Service, id: &str| {
        let (status, body) = get(svc, token, "/api/v1/resources");
        assert_eq!(status, 200, "{body}");
        body.to_string().contains(&format!("\"{id}\""))
    };
    assert!(!has(&svc, "cern/pc-9"));
    let file = svc.inventory_file();
    let grown = format!("{INVENTORY}\n[[resource]]\nid = \"cern/pc-9\"\nkind = \"host\"\n");
    std::fs::write(&file, &grown).unwrap();
    assert!(svc.signal("HUP"), "the service ended on SIGHUP");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !has(&svc, "cern/pc-9") {
        assert!(
            std::time::Instant::now() < deadline,
            "cern/pc-9 never appeared after SIGHUP"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A broken file: the inventory in force stays.
    std::fs::write(
        &file,
        format!("{grown}\n[[resource]]\nid = \"cern/pc-10\"\ncolour = 1\n"),
    )
    .unwrap();
    assert!(svc.signal("HUP"), "the service ended on SIGHUP");
    std::thread::sleep(Duration::from_secs(1));
    assert!(has(&svc, "cern/pc-9") && !has(&svc, "cern/pc-10"));
}
