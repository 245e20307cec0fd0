//! The PostgreSQL store. "No double booking" is the database's job: each live booking writes one
//! `claim` row per ancestor-or-self of its resource, and two `EXCLUDE USING gist` constraints refuse
//! overlapping claims of conflicting bookings (docs/testbed.md §5). A concurrent inserter waits for
//! the first transaction and fails with SQLSTATE 23P01 if it commits; that becomes a 409 naming the
//! booking in the way. Runs under READ COMMITTED with no application locks.

use std::time::Duration;

use jiff::Timestamp;
use longhaul_testbed::booking::{
    Action, Actor, Approval, AuditEvent, Booking, BookingId, Role, Status,
};
use longhaul_testbed::decide::Decide;
use longhaul_testbed::resource::{Inventory, ResourceId, ResourceState};
use longhaul_testbed::time::Slot;
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::{Connection, PgConnection, Postgres, Row, Transaction};

use crate::reply::{Account, BookRequest, Reply, StoreError};
use crate::rows::{
    BookingRow, audit_event, parse_role, role_name, status_columns, status_texts, stored_approval,
    system,
};
use crate::tokens::TokenRow;
use crate::write::{
    anonymous_conflict, check_policy, conflict_reply, mismatch, new_status, policy_window,
    refused_change, unknown_booking, view_with,
};

const COLS: &str = "b.id, b.resource, b.owner, lh_us_of(lower(b.during)) AS start_us, \
    lh_us_of(upper(b.during)) AS end_us, b.status, lh_us_of(b.hold_until) AS hold_until_us, \
    lh_us_of(b.status_at) AS status_at_us, b.preempted_by, b.notice, b.note, \
    lh_us_of(b.created_at) AS created_at_us, b.version, b.approval, b.declined_by";

/// SQLSTATE exclusion_violation.
const EXCLUSION_VIOLATION: &str = "23P01";

/// How often a transaction aborted by the deadlock detector is run again.
const RETRIES: u32 = 8;

fn migrator() -> sqlx::migrate::Migrator {
    crate::migrations::migrator(&[
        (
            1,
            "init",
            include_str!("../migrations/postgres/0001_init.sql"),
        ),
        (
            2,
            "accounts approval",
            include_str!("../migrations/postgres/0002_accounts_approval.sql"),
        ),
        (
            3,
            "decline revoke",
            include_str!("../migrations/postgres/0003_decline_revoke.sql"),
        ),
        (
            4,
            "feed token",
            include_str!("../migrations/postgres/0004_feed_token.sql"),
        ),
        (
            5,
            "operations",
            include_str!("../migrations/postgres/0005_operations.sql"),
        ),
        (
            6,
            "console",
            include_str!("../migrations/postgres/0006_console.sql"),
        ),
        (
            7,
            "agents",
            include_str!("../migrations/postgres/0007_agents.sql"),
        ),
    ])
}

fn row(r: &PgRow) -> Result<BookingRow, sqlx::Error> {
    Ok(BookingRow {
        id: r.try_get("id")?,
        resource: r.try_get("resource")?,
        owner: r.try_get("owner")?,
        start_us: r.try_get("start_us")?,
        end_us: r.try_get("end_us")?,
        status: r.try_get("status")?,
        hold_until_us: r.try_get("hold_until_us")?,
        status_at_us: r.try_get("status_at_us")?,
        preempted_by: r.try_get("preempted_by")?,
        notice: r.try_get("notice")?,
        note: r.try_get("note")?,
        created_at_us: r.try_get("created_at_us")?,
        version: r.try_get("version")?,
        approval: r.try_get("approval")?,
        declined_by: r.try_get("declined_by")?,
    })
}

fn is_exclusion_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.code().as_deref() == Some(EXCLUSION_VIOLATION))
}

/// Deadlock (40P01) or serialization failure (40001): two transactions inserting conflicting
/// claims at the same moment can each wait for the other inside the exclusion check (PostgreSQL
/// inserts the index entry, then checks); the deadlock detector aborts one, which is run again and
/// then sees the winner's claims (a clean 409).
fn is_retryable(e: &StoreError) -> bool {
    matches!(e, StoreError::Db(sqlx::Error::Database(d))
        if matches!(d.code().as_deref(), Some("40P01" | "40001")))
}

/// A short pause before retry `attempt`, spread at random so the retries do not collide again
/// (a fresh `RandomState` is seeded from the OS per call).
async fn backoff(attempt: u32) {
    use std::hash::BuildHasher;
    let jitter = std::collections::hash_map::RandomState::new().hash_one(attempt) % 20;
    tokio::time::sleep(Duration::from_millis(5 * u64::from(attempt) + jitter)).await;
}

fn names(ids: &[ResourceId]) -> Vec<String> {
    ids.iter().map(|r| r.as_str().to_owned()).collect()
}

/// A PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PgStore {
    pub(crate) pool: PgPool,
}

impl PgStore {
    /// Connects to `url` and migrates the database (creating the
    /// `btree_gist` extension, which needs the right to create it).
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(60))
            .connect(url)
            .await?;
        migrator().run(&pool).await?;
        Ok(Self { pool })
    }

    pub(crate) async fn sync_inventory(&self, inv: &Inventory) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        for r in inv.iter() {
            let (state, reason) = match &r.state {
                ResourceState::Available => ("available", None),
                ResourceState::Degraded { reason } => ("degraded", Some(reason.as_str())),
                ResourceState::Maintenance { reason } => ("maintenance", Some(reason.as_str())),
            };
            sqlx::query(
                "INSERT INTO resource (id, parent, kind, name, capacity_bps, state, reason, zone)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, name = excluded.name,
                   capacity_bps = excluded.capacity_bps, state = excluded.state,
                   reason = excluded.reason, zone = excluded.zone",
            )
            .bind(r.id.as_str())
            .bind(r.parent.as_ref().map(|p| p.as_str().to_owned()))
            .bind(
                serde_json::to_value(r.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned)),
            )
            .bind(&r.name)
            .bind(r.capacity_bps.and_then(|c| i64::try_from(c).ok()))
            .bind(state)
            .bind(reason)
            .bind(r.zone.as_deref())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn add_token(
        &self,
        hash: &str,
        user: &str,
        role: Role,
        zone: Option<&str>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO token (hash, username, role, created_at, zone)
             VALUES ($1, $2, $3, lh_us($4), $5)",
        )
        .bind(hash)
        .bind(user)
        .bind(role_name(role))
        .bind(now.as_microsecond())
        .bind(zone)
        .execute(&mut *tx)
        .await?;
        if zone.is_some() {
            sqlx::query("UPDATE token SET zone = $1 WHERE username = $2")
                .bind(zone)
                .bind(user)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn account(&self, hash: &str) -> Result<Option<Account>, StoreError> {
        let Some(r) = sqlx::query(
            "SELECT username, role, zone FROM token WHERE hash = $1 AND revoked_at IS NULL",
        )
        .bind(hash)
        .fetch_optional(&self.pool)
        .await?
        else {
            return Ok(None);
        };
        Ok(Some(Account {
            actor: Actor {
                user: r.try_get("username")?,
                role: parse_role(r.try_get("role")?)?,
            },
            zone: r.try_get("zone")?,
        }))
    }

    pub(crate) async fn tokens(&self) -> Result<Vec<TokenRow>, StoreError> {
        sqlx::query(
            "SELECT hash, username, role, zone, lh_us_of(created_at) AS created_at_us,
               lh_us_of(revoked_at) AS revoked_at_us
             FROM token ORDER BY created_at, hash",
        )
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|r| {
            Ok(TokenRow {
                hash: r.try_get("hash")?,
                user: r.try_get("username")?,
                role: r.try_get("role")?,
                zone: r.try_get("zone")?,
                created_at_us: r.try_get("created_at_us")?,
                revoked_at_us: r.try_get("revoked_at_us")?,
            })
        })
        .collect()
    }

    /// Replaces `user`'s feed token with `hash`; false (and nothing
    /// written) when `user` has no valid API token.
    pub(crate) async fn set_feed_token(
        &self,
        hash: &str,
        user: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO feed_token (username, hash, created_at)
             SELECT $1, $2, lh_us($3)
              WHERE EXISTS (SELECT 1 FROM token WHERE username = $1 AND revoked_at IS NULL)
             ON CONFLICT (username) DO UPDATE SET hash = excluded.hash,
               created_at = excluded.created_at",
        )
        .bind(user)
        .bind(hash)
        .bind(now.as_microsecond())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub(crate) async fn revoke_feed_token(&self, user: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM feed_token WHERE username = $1")
            .bind(user)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    pub(crate) async fn feed_user(&self, hash: &str) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT f.username FROM feed_token f WHERE f.hash = $1 AND EXISTS (
               SELECT 1 FROM token t WHERE t.username = f.username AND t.revoked_at IS NULL)",
        )
        .bind(hash)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub(crate) async fn revoke_token(
        &self,
        hash: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE token SET revoked_at = lh_us($1) WHERE hash = $2 AND revoked_at IS NULL",
        )
        .bind(now.as_microsecond())
        .bind(hash)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn audit(
        conn: &mut PgConnection,
        actor: &Actor,
        action: Action,
        now: Timestamp,
        before: Option<&Booking>,
        after: &Booking,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO audit (at, actor, role, action, booking, before, after)
             VALUES (lh_us($1), $2, $3, $4, $5, $6::jsonb, $7::jsonb)",
        )
        .bind(now.as_microsecond())
        .bind(&actor.user)
        .bind(role_name(actor.role))
        .bind(
            serde_json::to_value(action)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned)),
        )
        .bind(i64::try_from(after.id.0).unwrap_or(i64::MAX))
        .bind(before.and_then(|b| serde_json::to_string(b).ok()))
        .bind(serde_json::to_string(after).unwrap_or_default())
        .execute(conn)
        .await?;
        Ok(())
    }

    /// The first live booking in the way of `resource` during `slot`: claim
    /// rows on the resource itself are bookings of it or of a descendant;
    /// exact rows on an ancestor are bookings of that ancestor.
    async fn first_conflict(
        conn: &mut PgConnection,
        resource: &ResourceId,
        slot: &Slot,
        now: Timestamp,
    ) -> Result<Option<Booking>, StoreError> {
        Self::first_conflict_except(conn, resource, slot, now, 0).await
    }

    /// [`Self::first_conflict`], ignoring booking `except`.
    async fn first_conflict_except(
        conn: &mut PgConnection,
        resource: &ResourceId,
        slot: &Slot,
        now: Timestamp,
        except: i64,
    ) -> Result<Option<Booking>, StoreError> {
        let ancestors: Vec<String> = names(&resource.self_and_ancestors())
            .into_iter()
            .filter(|r| r != resource.as_str())
            .collect();
        let r = sqlx::query(&format!(
            "SELECT {COLS} FROM claim c JOIN booking b ON b.id = c.booking
             WHERE c.during && tstzrange(lh_us($1), lh_us($2), '[)')
               AND (c.resource = $3 OR (c.resource = ANY($4) AND c.exact = 1))
               AND (b.status = 'confirmed' OR (b.status = 'held' AND b.hold_until > lh_us($5)))
               AND b.id <> $6
             ORDER BY lower(c.during) LIMIT 1"
        ))
        .bind(slot.start().as_microsecond())
        .bind(slot.end().as_microsecond())
        .bind(resource.as_str())
        .bind(ancestors)
        .bind(now.as_microsecond())
        .bind(except)
        .fetch_optional(conn)
        .await?;
        r.map(|r| row(&r)?.into_booking()).transpose()
    }

    pub(crate) async fn book(
        &self,
        req: &BookRequest<'_>,
        resource: &ResourceId,
        slot: &Slot,
    ) -> Result<Reply, StoreError> {
        let mut attempt = 0;
        loop {
            match self.book_once(req, resource, slot).await {
                Err(e) if attempt < RETRIES && is_retryable(&e) => {
                    attempt += 1;
                    tracing::debug!(target: "longhaul::testbed::store", attempt, error = %e, "retrying a booking");
                    backoff(attempt).await;
                }
                other => return other,
            }
        }
    }

    async fn book_once(
        &self,
        req: &BookRequest<'_>,
        resource: &ResourceId,
        slot: &Slot,
    ) -> Result<Reply, StoreError> {
        let mut tx = self.pool.begin().await?;
        if let Some((key, fp)) = &req.idempotency {
            // A concurrent first request with the same key holds the row
            // uncommitted: this insert waits for it, then sees its response.
            let inserted = sqlx::query(
                "INSERT INTO idempotency (owner, key, method, path, body_hash, created_at)
                 VALUES ($1, $2, $3, $4, $5, lh_us($6)) ON CONFLICT DO NOTHING",
            )
            .bind(&key.user)
            .bind(&key.key)
            .bind(&fp.method)
            .bind(&fp.path)
            .bind(&fp.body_hash)
            .bind(req.now.as_microsecond())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if inserted == 0 {
                let r = sqlx::query(
                    "SELECT method, path, body_hash, status, response FROM idempotency
                     WHERE owner = $1 AND key = $2",
                )
                .bind(&key.user)
                .bind(&key.key)
                .fetch_one(&mut *tx)
                .await?;
                let (method, path): (String, String) = (r.try_get("method")?, r.try_get("path")?);
                let hash: String = r.try_get("body_hash")?;
                if method != fp.method || path != fp.path || hash != fp.body_hash {
                    return Ok(mismatch(method, path));
                }
                let status: Option<i32> = r.try_get("status")?;
                let response: Option<String> = r.try_get("response")?;
                return match (status, response) {
                    (Some(s), Some(text)) => {
                        Reply::from_stored(u16::try_from(s).unwrap_or(500), &text)
                    }
                    _ => Ok(Reply::error(
                        (&longhaul_testbed::idempotency::IdempotencyError::InFlight).into(),
                    )),
                };
            }
        }
        // Bookings in one resource tree take turns: two inserting conflicting claims at once can
        // each wait for the other inside the exclusion check, and the deadlock detector settles
        // that only after `deadlock_timeout` (1 s): 200 concurrent bookings of one resource took
        // over 120 s for some in CI. Taken after the idempotency row, which is the only other
        // row a booking waits for.
        let root = resource
            .self_and_ancestors()
            .pop()
            .unwrap_or_else(|| resource.clone());
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
            .bind(root.as_str())
            .execute(&mut *tx)
            .await?;
        let reply = Self::book_in(&mut tx, req, resource, slot).await?;
        if let Some((key, _)) = &req.idempotency {
            sqlx::query(
                "UPDATE idempotency SET status = $1, response = $2 WHERE owner = $3 AND key = $4",
            )
            .bind(i32::from(reply.status))
            .bind(reply.to_stored())
            .bind(&key.user)
            .bind(&key.key)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(reply)
    }

    async fn book_in(
        tx: &mut Transaction<'static, Postgres>,
        req: &BookRequest<'_>,
        resource: &ResourceId,
        slot: &Slot,
    ) -> Result<Reply, StoreError> {
        let now_us = req.now.as_microsecond();
        let (start_us, end_us) = (slot.start().as_microsecond(), slot.end().as_microsecond());
        let lineage = names(&resource.self_and_ancestors());
        // Expired holds in the way stop claiming (the rest is the sweep's).
        Self::expire_due(tx, req.now, Some((&lineage, start_us, end_us))).await?;
        if let Some(c) = Self::first_conflict(tx, resource, slot, req.now).await? {
            return Ok(conflict_reply(resource, &c));
        }
        let (from, to) = policy_window(slot);
        let mine = sqlx::query(&format!(
            "SELECT {COLS} FROM booking b
             WHERE b.owner = $1 AND b.during && tstzrange(lh_us($2), lh_us($3), '[)')"
        ))
        .bind(&req.actor.user)
        .bind(from)
        .bind(to)
        .fetch_all(&mut **tx)
        .await?
        .iter()
        .map(|r| row(r).map_err(StoreError::from)?.into_booking())
        .collect::<Result<Vec<_>, _>>()?;
        let (warnings, needs_approval) = match check_policy(req, resource, slot, &mine) {
            Ok(w) => w,
            Err(e) => {
                // A conflicting booking committed since the check above (READ COMMITTED: this
                // statement sees it) is the real answer: 409, not a stacking refusal against it.
                return Ok(
                    match Self::first_conflict(tx, resource, slot, req.now).await? {
                        Some(c) => conflict_reply(resource, &c),
                        None => Reply::error(e),
                    },
                );
            }
        };
        let status = new_status(req, slot, needs_approval);
        let approval = needs_approval.then_some(Approval::Pending);
        let (status_name, hold_us, _) = status_columns(&status);
        let note = req.create.note.clone().unwrap_or_default();
        // A savepoint, so that an exclusion violation leaves the
        // transaction usable for the idempotency record.
        let mut sp = Connection::begin(&mut **tx).await?;
        let inserted: Result<i64, sqlx::Error> = async {
            let id: i64 = sqlx::query(
                "INSERT INTO booking (resource, owner, during, status, hold_until, note, created_at,
                   approval)
                 VALUES ($1, $2, tstzrange(lh_us($3), lh_us($4), '[)'), $5, lh_us($6), $7, lh_us($8),
                   $9)
                 RETURNING id",
            )
            .bind(resource.as_str())
            .bind(&req.actor.user)
            .bind(start_us)
            .bind(end_us)
            .bind(status_name)
            .bind(hold_us)
            .bind(&note)
            .bind(now_us)
            .bind(approval.map(Approval::as_str))
            .fetch_one(&mut *sp)
            .await?
            .try_get(0)?;
            Self::insert_claims(&mut sp, id, resource, start_us, end_us).await?;
            Ok(id)
        }
        .await;
        let id = match inserted {
            Ok(id) => {
                sp.commit().await?;
                id
            }
            Err(e) if is_exclusion_violation(&e) => {
                sp.rollback().await?;
                return Ok(
                    match Self::first_conflict(tx, resource, slot, req.now).await? {
                        Some(c) => conflict_reply(resource, &c),
                        None => anonymous_conflict(resource, slot),
                    },
                );
            }
            Err(e) => return Err(e.into()),
        };
        let booking = Booking {
            id: BookingId(u64::try_from(id).unwrap_or(0)),
            resource: resource.clone(),
            owner: req.actor.user.clone(),
            slot: *slot,
            status,
            note,
            created_at: req.now,
            version: 1,
        };
        let action = if req.create.hold || needs_approval {
            Action::Hold
        } else {
            Action::Book
        };
        Self::audit(tx, req.actor, action, req.now, None, &booking).await?;
        let status = if needs_approval { 202 } else { 201 };
        Ok(Reply::ok(
            status,
            view_with(&booking, approval, req.now, warnings),
        ))
    }

    /// One claim per ancestor-or-self of `resource`, `exact = 1` on the
    /// resource itself.
    async fn insert_claims(
        conn: &mut PgConnection,
        booking: i64,
        resource: &ResourceId,
        start_us: i64,
        end_us: i64,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO claim (booking, resource, exact, during)
             SELECT $1, r, CASE WHEN r = $2 THEN 1 ELSE 0 END,
                    tstzrange(lh_us($3), lh_us($4), '[)')
             FROM unnest($5::text[]) AS r",
        )
        .bind(booking)
        .bind(resource.as_str())
        .bind(start_us)
        .bind(end_us)
        .bind(names(&resource.self_and_ancestors()))
        .execute(conn)
        .await?;
        Ok(())
    }

    /// Marks the holds due at `now` expired (only those with claims on
    /// `lineage` during `[start, end)` when given), deleting their claims,
    /// each with an audit event by `system`; returns their ids.
    async fn expire_due(
        conn: &mut PgConnection,
        now: Timestamp,
        within: Option<(&[String], i64, i64)>,
    ) -> Result<Vec<i64>, StoreError> {
        let now_us = now.as_microsecond();
        let (all, lineage, start_us, end_us) = match within {
            None => (true, Vec::new(), 0, 0),
            Some((l, s, e)) => (false, l.to_vec(), s, e),
        };
        let due = sqlx::query(&format!(
            "SELECT {COLS} FROM booking b
             WHERE b.status = 'held' AND b.hold_until <= lh_us($1)
               AND ($2 OR b.id IN (SELECT booking FROM claim WHERE resource = ANY($3)
                                   AND during && tstzrange(lh_us($4), lh_us($5), '[)')))
             ORDER BY b.id FOR UPDATE"
        ))
        .bind(now_us)
        .bind(all)
        .bind(&lineage)
        .bind(start_us)
        .bind(end_us)
        .fetch_all(&mut *conn)
        .await?;
        let mut ids = Vec::new();
        for r in &due {
            let (before, _) = row(r)?.into_stored()?;
            let Status::Held { until } = before.status else {
                continue;
            };
            let id: i64 = r.try_get("id")?;
            sqlx::query(
                "UPDATE booking SET status = 'expired', status_at = hold_until, hold_until = NULL,
                   version = version + 1 WHERE id = $1",
            )
            .bind(id)
            .execute(&mut *conn)
            .await?;
            sqlx::query("DELETE FROM claim WHERE booking = $1")
                .bind(id)
                .execute(&mut *conn)
                .await?;
            let mut after = before.clone();
            after.status = Status::Expired { at: until };
            after.version += 1;
            Self::audit(conn, &system(), Action::Expire, now, Some(&before), &after).await?;
            ids.push(id);
        }
        Ok(ids)
    }

    pub(crate) async fn expire_holds(&self, now: Timestamp) -> Result<Vec<i64>, StoreError> {
        let mut attempt = 0;
        loop {
            let r = async {
                let mut tx = self.pool.begin().await?;
                let ids = Self::expire_due(&mut tx, now, None).await?;
                tx.commit().await?;
                Ok(ids)
            }
            .await;
            match r {
                Err(e) if attempt < RETRIES && is_retryable(&e) => {
                    attempt += 1;
                    backoff(attempt).await;
                }
                other => return other,
            }
        }
    }

    pub(crate) async fn modify(
        &self,
        id: i64,
        actor: &Actor,
        now: Timestamp,
        decide: &Decide<'_>,
    ) -> Result<Reply, StoreError> {
        let mut attempt = 0;
        loop {
            match self.modify_once(id, actor, now, decide).await {
                Err(e) if attempt < RETRIES && is_retryable(&e) => {
                    attempt += 1;
                    backoff(attempt).await;
                }
                other => return other,
            }
        }
    }

    async fn modify_once(
        &self,
        id: i64,
        actor: &Actor,
        now: Timestamp,
        decide: &Decide<'_>,
    ) -> Result<Reply, StoreError> {
        let mut tx = self.pool.begin().await?;
        let before = sqlx::query(&format!(
            "SELECT {COLS} FROM booking b WHERE b.id = $1 FOR UPDATE"
        ))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((before, approval)) = before.map(|r| row(&r)?.into_stored()).transpose()? else {
            return Ok(unknown_booking(id));
        };
        let (from, to) = policy_window(&before.slot);
        let mine = sqlx::query(&format!(
            "SELECT {COLS} FROM booking b
             WHERE b.owner = $1 AND b.during && tstzrange(lh_us($2), lh_us($3), '[)')"
        ))
        .bind(&before.owner)
        .bind(from)
        .bind(to)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|r| row(r).map_err(StoreError::from)?.into_booking())
        .collect::<Result<Vec<_>, _>>()?;
        let change = match decide(&before, approval, &mine) {
            Ok(c) => c,
            Err(e) => return Ok(Reply::error(e)),
        };
        let mut after = change.after;
        after.version = before.version + 1;
        let (name, hold_us, at_us) = status_columns(&after.status);
        let (by, notice, declined_by) = status_texts(&after.status);
        let (start_us, end_us) = (
            after.slot.start().as_microsecond(),
            after.slot.end().as_microsecond(),
        );
        sqlx::query(
            "UPDATE booking SET status = $2, hold_until = lh_us($3), status_at = lh_us($4),
               preempted_by = $5, notice = $6, during = tstzrange(lh_us($7), lh_us($8), '[)'),
               approval = $9, declined_by = $10, version = version + 1
             WHERE id = $1",
        )
        .bind(id)
        .bind(name)
        .bind(hold_us)
        .bind(at_us)
        .bind(by)
        .bind(notice)
        .bind(start_us)
        .bind(end_us)
        .bind(stored_approval(change.approval))
        .bind(declined_by)
        .execute(&mut *tx)
        .await?;
        // The claims follow the booking: re-written for a live booking (the
        // exclusion constraints check the new range, so an extension into
        // the next booking is refused by the database itself), deleted
        // otherwise (history stays in `booking` and `audit`).
        let mut sp = Connection::begin(&mut *tx).await?;
        let claimed: Result<(), sqlx::Error> = async {
            sqlx::query("DELETE FROM claim WHERE booking = $1")
                .bind(id)
                .execute(&mut *sp)
                .await?;
            if after.is_live(now) {
                Self::insert_claims(&mut sp, id, &after.resource, start_us, end_us).await?;
            }
            Ok(())
        }
        .await;
        match claimed {
            Ok(()) => sp.commit().await?,
            Err(e) if is_exclusion_violation(&e) => {
                sp.rollback().await?;
                let probe = Slot::new(before.slot.end(), after.slot.end()).unwrap_or(after.slot);
                let next =
                    Self::first_conflict_except(&mut tx, &after.resource, &probe, now, id).await?;
                tx.rollback().await?;
                return Ok(refused_change(&before, &after, next.as_ref()));
            }
            Err(e) => return Err(e.into()),
        }
        Self::audit(&mut tx, actor, change.action, now, Some(&before), &after).await?;
        tx.commit().await?;
        Ok(Reply::ok(
            200,
            view_with(&after, change.approval, now, change.warnings),
        ))
    }

    pub(crate) async fn audit_of(&self, id: i64) -> Result<Option<Vec<AuditEvent>>, StoreError> {
        let exists = sqlx::query("SELECT 1 FROM booking WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        if exists.is_none() {
            return Ok(None);
        }
        let rows = sqlx::query(
            "SELECT seq, lh_us_of(at) AS at_us, actor, role, action, booking,
                    before::text AS before, after::text AS after
             FROM audit WHERE booking = $1 ORDER BY seq",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(audit_event)
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    pub(crate) async fn of_owner(&self, user: &str) -> Result<Vec<BookingRow>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLS} FROM booking b WHERE b.owner = $1 ORDER BY lower(b.during), b.id"
        ))
        .bind(user)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(row(r)?)).collect()
    }

    pub(crate) async fn list(
        &self,
        resource: Option<&ResourceId>,
        from: i64,
        to: i64,
    ) -> Result<Vec<BookingRow>, StoreError> {
        let from = (from != i64::MIN).then_some(from);
        let to = (to != i64::MAX).then_some(to);
        let (all, r, lineage) = match resource {
            None => (true, String::new(), Vec::new()),
            Some(r) => (false, r.as_str().to_owned(), names(&r.self_and_ancestors())),
        };
        let rows = sqlx::query(&format!(
            "SELECT {COLS} FROM booking b
             WHERE b.during && tstzrange(lh_us($1), lh_us($2), '[)')
               AND ($3 OR b.resource = ANY($4) OR starts_with(b.resource, $5 || '/'))
             ORDER BY lower(b.during), b.id"
        ))
        .bind(from)
        .bind(to)
        .bind(all)
        .bind(lineage)
        .bind(r)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(row(r)?)).collect()
    }
}
