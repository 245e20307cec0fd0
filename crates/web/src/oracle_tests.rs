//! The stores against the oracle: random sequences of book / hold / confirm / cancel / release /
//! extend / preempt / the expiry sweep (seeded, replayable) applied to a [`Ledger`] and to a store give the same outcome at every step
//! and the same bookings afterwards (docs/testbed.md §5: "each store must accept and refuse exactly
//! what the ledger does"). On SQLite, and on a PostgreSQL cluster the test starts itself
//! ([`longhaul_testkit::fixtures::Postgres`]; failing with the reason when it cannot).

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use longhaul_testbed::api::{CreateBooking, ErrorBody};
use longhaul_testbed::booking::{Actor, Booking, BookingId, Ledger, NewBooking, Status};
use longhaul_testbed::policy::Policy;
use longhaul_testbed::resource::{Inventory, ResourceId};
use longhaul_testbed::time::{Slot, format_utc};

use longhaul_testbed::decide::Op;

use crate::reply::{Account, BookRequest, Reply};
use crate::store::Store;
use crate::write::view;

/// What the comparison looks at: status and id, or the error code.
fn outcome(r: &Reply) -> Result<(u16, u64), String> {
    match &r.body {
        Ok(v) => Ok((r.status, v.id)),
        Err(e) => Err(e.code.clone()),
    }
}

/// A booking to build a placeholder view from (id 0).
fn sample(now: Timestamp) -> Booking {
    Booking {
        id: BookingId(0),
        resource: ResourceId::parse("cern").unwrap(),
        owner: String::new(),
        slot: Slot::new(now, now + mins(1)).unwrap(),
        status: Status::Confirmed,
        note: String::new(),
        created_at: now,
        version: 1,
    }
}

const RESOURCES: [&str; 5] = [
    "cern",
    "cern/lambda",
    "cern/lambda/1g-a",
    "cern/lambda/1g-b",
    "cern/host-1",
];

fn inventory() -> Inventory {
    let mut text = String::new();
    for (id, kind) in [
        ("cern", "site"),
        ("cern/lambda", "lambda"),
        ("cern/lambda/1g-a", "circuit"),
        ("cern/lambda/1g-b", "circuit"),
        ("cern/host-1", "host"),
    ] {
        text.push_str(&format!(
            "[[resource]]\nid = \"{id}\"\nkind = \"{kind}\"\n\n"
        ));
    }
    Inventory::from_toml(&text, "oracle.toml").unwrap()
}

/// Policy that allows everything, so only the ledger's rules are compared.
fn permissive() -> Policy {
    let long = SignedDuration::from_hours(24 * 365 * 20);
    Policy {
        max_contiguous: long,
        min_length: SignedDuration::ZERO,
        horizon: long,
        event_horizon: long,
        weekly_quota: long,
        min_gap: SignedDuration::ZERO,
        past_grace: long,
        allow_self_approval: false,
    }
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

fn mins(n: u64) -> SignedDuration {
    SignedDuration::from_mins(i64::try_from(n).unwrap())
}

/// Replays `steps` random operations; returns how often each (operation, outcome) happened, so the
/// tests can check that the interesting cases (an extension refused by the next booking, a
/// preemption) were exercised.
async fn replay(store: &Store, seed: u64, steps: usize) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    let inv = inventory();
    store.sync_inventory(&inv).await.unwrap();
    let policy = permissive();
    let mut ledger = Ledger::new(inv.clone());
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut now: Timestamp = "2026-05-04T00:00:00Z".parse().unwrap();
    let users = ["alice", "bob"];
    for step in 0..steps {
        now += mins(rng.below(90));
        let user = users[usize::try_from(rng.below(2)).unwrap()];
        let actor = if rng.below(8) == 0 {
            Actor::admin(user)
        } else {
            Actor::user(user)
        };
        let ctx = format!("seed {seed} step {step}");
        let (want, got) = if rng.below(2) == 0 {
            let start = now + mins(rng.below(48 * 60)) - mins(120);
            let slot = Slot::new(start, start + mins(15 + rng.below(8 * 60))).unwrap();
            let resource = RESOURCES[usize::try_from(rng.below(5)).unwrap()];
            let ttl = mins(1 + rng.below(180));
            let hold = rng.below(2) == 0;
            let want = ledger
                .try_book(
                    NewBooking {
                        resource: ResourceId::parse(resource).unwrap(),
                        owner: user.into(),
                        slot,
                        hold_until: hold.then(|| now + ttl),
                        note: String::new(),
                    },
                    &actor,
                    now,
                )
                .map(|id| (201, id.0))
                .map_err(|e| ErrorBody::from(&e).code);
            let create = CreateBooking {
                resource: resource.into(),
                start: format_utc(slot.start()),
                end: format_utc(slot.end()),
                hold,
                event: false,
                note: None,
            };
            let reply = store
                .book(&BookRequest {
                    actor: &actor,
                    create: &create,
                    inventory: &inv,
                    policy: &policy,
                    now,
                    hold_ttl: ttl,
                    idempotency: None,
                    zone: None,
                })
                .await
                .unwrap();
            (want, reply)
        } else if rng.below(6) == 0 {
            // The sweep: every due hold is marked expired, in the store as in the ledger.
            ledger.expire_holds(now);
            store.expire_holds(now).await.unwrap();
            let stored = store.list(None, None, None).await.unwrap();
            assert!(
                stored
                    .iter()
                    .all(|b| !matches!(b.status, Status::Held { until } if until <= now)),
                "{ctx}: a due hold survived the sweep"
            );
            (
                Ok((200, 0)),
                Reply::ok(200, view(&sample(now), now, Vec::new())),
            )
        } else {
            let n = ledger.bookings().count() as u64;
            let id = 1 + rng.below(n + 1);
            let bid = BookingId(id);
            let sid = i64::try_from(id).unwrap();
            let which = rng.below(5);
            if which == 3 {
                let end = ledger.get(bid).map_or(now, |b| b.slot.end());
                let new_end = end + mins(rng.below(240)) - mins(10);
                let want = ledger
                    .extend(bid, new_end, &actor, now)
                    .map(|()| (200, id))
                    .map_err(|e| ErrorBody::from(&e).code);
                let account = Account {
                    actor: actor.clone(),
                    zone: None,
                };
                let reply = store
                    .extend(sid, new_end, &account, &policy, &inv, now)
                    .await
                    .unwrap();
                *seen
                    .entry(format!("extend {:?}", outcome(&reply).map(|(s, _)| s)))
                    .or_default() += 1;
                (want, reply)
            } else if which == 4 {
                let notice = if rng.below(4) == 0 {
                    " "
                } else {
                    "maintenance"
                };
                let want = ledger
                    .preempt(bid, &actor, notice, now)
                    .map(|()| (200, id))
                    .map_err(|e| ErrorBody::from(&e).code);
                let reply = store.preempt(sid, notice, &actor, now).await.unwrap();
                *seen
                    .entry(format!("preempt {:?}", outcome(&reply).map(|(s, _)| s)))
                    .or_default() += 1;
                (want, reply)
            } else {
                let op = [Op::Confirm, Op::Cancel, Op::Release][usize::try_from(which).unwrap()];
                let want = match op {
                    Op::Confirm => ledger.confirm(bid, &actor, now),
                    Op::Cancel => ledger.cancel(bid, &actor, now),
                    Op::Release => ledger.release(bid, &actor, now),
                }
                .map(|()| (200, id))
                .map_err(|e| ErrorBody::from(&e).code);
                let reply = store.change(sid, op, &actor, now).await.unwrap();
                (want, reply)
            }
        };
        let got = outcome(&got);
        assert_eq!(got, want, "{ctx}");
        if step % 10 == 9 || step + 1 == steps {
            let mut stored = store.list(None, None, None).await.unwrap();
            stored.sort_by_key(|b| b.id);
            let expected: Vec<_> = ledger.bookings().collect();
            assert_eq!(stored.len(), expected.len(), "{ctx}");
            for (s, l) in stored.iter().zip(expected) {
                assert_eq!(
                    (s.id, &s.resource, &s.owner, s.slot, s.phase(now)),
                    (l.id, &l.resource, &l.owner, l.slot, l.phase(now)),
                    "{ctx}"
                );
            }
        }
    }
    seen
}

fn temp_sqlite(seed: u64) -> String {
    let dir = std::env::temp_dir().join(format!("lh-web-oracle-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("oracle.sqlite").display().to_string()
}

#[tokio::test]
async fn sqlite_store_matches_the_ledger() {
    let mut seen = BTreeMap::new();
    for seed in 1..=12 {
        let path = temp_sqlite(seed);
        let store = Store::open(&path).await.unwrap();
        for (k, n) in replay(&store, seed, 120).await {
            *seen.entry(k).or_default() += n;
        }
        let _ = std::fs::remove_dir_all(std::path::Path::new(&path).parent().unwrap());
    }
    for case in [
        "extend Ok(200)",
        "extend Err(\"extend_conflict\")",
        "preempt Err(\"notice_required\")",
        "preempt Ok(200)",
        "preempt Err(\"not_admin\")",
    ] {
        assert!(
            seen.get(case).copied().unwrap_or(0) > 0,
            "{case} never happened: {seen:?}"
        );
    }
}

#[tokio::test]
async fn postgres_store_matches_the_ledger() {
    let Some(pg) = longhaul_testkit::fixtures::Postgres::start() else {
        return;
    };
    for seed in 1..=4 {
        let store = Store::open(&pg.database()).await.unwrap();
        replay(&store, seed, 120).await;
    }
}
