//! The stores against the oracle: random sequences of book / hold / confirm / cancel / release
//! (seeded, replayable) applied to a [`Ledger`] and to a store give the same outcome at every step
//! and the same bookings afterwards (docs/testbed.md §5: "each store must accept and refuse exactly
//! what the ledger does"). On SQLite, and on a PostgreSQL cluster the test starts itself
//! ([`crate::testing::Postgres`]; skipped with the reason when it cannot).

use jiff::{SignedDuration, Timestamp};
use longhaul_testbed::api::{CreateBooking, ErrorBody};
use longhaul_testbed::booking::{Actor, BookingId, Ledger, NewBooking};
use longhaul_testbed::policy::Policy;
use longhaul_testbed::resource::{Inventory, ResourceId};
use longhaul_testbed::time::{Slot, format_utc};

use crate::store::{BookRequest, Op, Store};

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

async fn replay(store: &Store, seed: u64, steps: usize) {
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
                })
                .await
                .unwrap();
            (want, reply)
        } else {
            let n = ledger.bookings().count() as u64;
            let id = 1 + rng.below(n + 1);
            let op = [Op::Confirm, Op::Cancel, Op::Release][usize::try_from(rng.below(3)).unwrap()];
            let bid = BookingId(id);
            let want = match op {
                Op::Confirm => ledger.confirm(bid, &actor, now),
                Op::Cancel => ledger.cancel(bid, &actor, now),
                Op::Release => ledger.release(bid, &actor, now),
            }
            .map(|()| (200, id))
            .map_err(|e| ErrorBody::from(&e).code);
            let reply = store
                .change(i64::try_from(id).unwrap(), op, &actor, now)
                .await
                .unwrap();
            (want, reply)
        };
        let got = match &got.body {
            Ok(v) => Ok((got.status, v.id)),
            Err(e) => Err(e.code.clone()),
        };
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
}

fn temp_sqlite(seed: u64) -> String {
    let dir = std::env::temp_dir().join(format!("lh-web-oracle-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("oracle.sqlite").display().to_string()
}

#[tokio::test]
async fn sqlite_store_matches_the_ledger() {
    for seed in 1..=12 {
        let path = temp_sqlite(seed);
        let store = Store::open(&path).await.unwrap();
        replay(&store, seed, 120).await;
        let _ = std::fs::remove_dir_all(std::path::Path::new(&path).parent().unwrap());
    }
}

#[tokio::test]
async fn postgres_store_matches_the_ledger() {
    let Some(pg) = crate::testing::Postgres::start() else {
        return;
    };
    for seed in 1..=4 {
        let store = Store::open(&pg.database()).await.unwrap();
        replay(&store, seed, 120).await;
    }
}
