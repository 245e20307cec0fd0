//! End-to-end tests of `longhaul testbed serve`: the real binary on a free loopback port, over SQLite
//! and over a real PostgreSQL that the test starts itself (initdb as the `postgres` user into a
//! temporary directory; skipped with a reason when the binaries are missing or we are not root).
//! The concurrency tests are issue 6's "Done means": 200 concurrent requests for overlapping slots
//! give exactly one booking, on one resource and on a parent with its children.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier, mpsc};
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};

use longhaul_web::testing::{Postgres, TempDir, run};

use crate::util::{bin, machine_shared};

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
    _machine: std::sync::RwLockReadGuard<'static, ()>,
}

impl Service {
    /// Creates tokens for `users` (name, role) in `database`, then starts the service on it with the
    /// cern inventory. Returns the service and the tokens, in order.
    pub(crate) fn start(database: &str, users: &[(&str, &str)]) -> (Self, Vec<String>) {
        let machine = machine_shared();
        let dir = TempDir::new("svc");
        let inventory = dir.0.join("testbed.toml");
        std::fs::write(&inventory, INVENTORY).expect("inventory");
        let tokens = users
            .iter()
            .map(|(user, role)| {
                run(Command::new(bin()).args([
                    "testbed",
                    "token",
                    "add",
                    user,
                    "--role",
                    role,
                    "--database",
                    database,
                ]))
                .trim()
                .to_owned()
            })
            .collect();
        let mut child = Command::new(bin())
            .args([
                "testbed",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--log",
                "warn",
            ])
            .args(["--database", database, "--inventory"])
            .arg(&inventory)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start longhaul testbed serve");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.starts_with("longhaul testbed listening on ") {
                    let _ = tx.send(line.clone());
                }
                eprintln!("[testbed serve] {line}");
            }
        });
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
fn send(req: ureq::Request, body: Option<&serde_json::Value>) -> (u16, serde_json::Value) {
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

fn get(svc: &Service, token: &str, path: &str) -> (u16, serde_json::Value) {
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
    let Some(pg) = Postgres::start() else { return };
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
    let Some(pg) = Postgres::start() else { return };
    parent_children_200(&pg.database(), "postgres");
}

#[test]
fn testbed_postgres_idempotency_20_concurrent() {
    let Some(pg) = Postgres::start() else { return };
    idempotency_20(&pg.database(), "postgres");
}

#[test]
fn testbed_postgres_exclusion_constraint_refuses_a_direct_insert() {
    // The guarantee is the database's: a writer that skips the service's checks is refused too.
    let Some(pg) = Postgres::start() else { return };
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
    let routes = [
        ("get", "/healthz"),
        ("get", "/openapi.json"),
        ("get", "/api/v1/resources"),
        ("post", "/api/v1/bookings"),
        ("get", "/api/v1/bookings"),
        ("post", "/api/v1/bookings/{id}/confirm"),
        ("post", "/api/v1/bookings/{id}/release"),
        ("post", "/api/v1/bookings/{id}/cancel"),
        ("get", "/api/v1/freebusy"),
    ];
    for (method, path) in routes {
        assert!(
            doc["paths"][path][method]["responses"].is_object(),
            "{method} {path}"
        );
    }
    let documented: usize = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|p| p.as_object().unwrap().len())
        .sum();
    assert_eq!(documented, routes.len(), "no undocumented extras");
    let (s, _) = send(agent().get(&svc.url("/api/v1/nope")), None);
    assert_eq!(s, 404);
}
