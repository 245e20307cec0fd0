//! The SQLite store (the embedded default). SQLite has one writer at a time: every write runs in a
//! `BEGIN IMMEDIATE` transaction, which takes the write lock before the conflict query reads, so the
//! check-then-insert is serializable; `busy_timeout` makes concurrent writers queue for the lock
//! instead of failing, and the triggers of the schema refuse an overlapping live booking from any
//! writer (docs/testbed.md §5).

use std::str::FromStr;
use std::time::Duration;

use jiff::Timestamp;
use longhaul_testbed::booking::{
    Action, Actor, Approval, AuditEvent, Booking, BookingId, Role, Status,
};
use longhaul_testbed::decide::Decide;
use longhaul_testbed::resource::{Inventory, ResourceId, ResourceState};
use longhaul_testbed::time::Slot;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
};
use sqlx::{Row, Sqlite, Transaction};

use crate::reply::{Account, BookRequest, Reply, StoreError};
use crate::rows::{
    BookingRow, audit_event, parse_role, role_name, status_columns, status_texts, stored_approval,
    system,
};
use crate::tokens::TokenRow;
use crate::write::{
    check_policy, conflict_reply, mismatch, new_status, policy_window, refused_change,
    unknown_booking, view_with,
};

const COLS: &str = "id, resource, owner, start_us, end_us, status, hold_until_us, status_at_us, \
                    preempted_by, notice, note, created_at_us, version, approval, declined_by";

/// Live at `?now`: confirmed, or an unexpired hold.
const LIVE: &str = "(status = 'confirmed' OR (status = 'held' AND hold_until_us > ?))";

fn migrator() -> sqlx::migrate::Migrator {
    crate::migrations::migrator(&[
        (
            1,
            "init",
            include_str!("../migrations/sqlite/0001_init.sql"),
        ),
        (
            2,
            "accounts approval",
            include_str!("../migrations/sqlite/0002_accounts_approval.sql"),
        ),
        (
            3,
            "decline revoke",
            include_str!("../migrations/sqlite/0003_decline_revoke.sql"),
        ),
        (
            4,
            "feed token",
            include_str!("../migrations/sqlite/0004_feed_token.sql"),
        ),
        (
            5,
            "operations",
            include_str!("../migrations/sqlite/0005_operations.sql"),
        ),
        (
            6,
            "console",
            include_str!("../migrations/sqlite/0006_console.sql"),
        ),
        (
            7,
            "agents",
            include_str!("../migrations/sqlite/0007_agents.sql"),
        ),
    ])
}

fn row(r: &SqliteRow) -> Result<BookingRow, sqlx::Error> {
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

/// A SQLite database file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pub(crate) pool: SqlitePool,
    /// One connection for every write transaction. SQLite has one write lock; with writers on
    /// several connections, those waiting for it sleep and retry in SQLite's busy handler (up to
    /// 100 ms a time, in no order), which under load cost seconds of p99 latency and a third of the
    /// throughput (bench/RESULTS.md). Queued on this pool they wait in order, and wake at once.
    pub(crate) writer: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating) the file at `path` in WAL mode and migrates it.
    pub async fn open(path: &str) -> Result<Self, StoreError> {
        let opts = SqliteConnectOptions::from_str(&format!("sqlite://{path}"))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(60))
            .connect_with(opts.clone())
            .await?;
        migrator().run(&pool).await?;
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(60))
            .connect_with(opts)
            .await?;
        Ok(Self { pool, writer })
    }

    async fn write(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
    }

    pub(crate) async fn sync_inventory(&self, inv: &Inventory) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        for r in inv.iter() {
            let (state, reason) = match &r.state {
                ResourceState::Available => ("available", None),
                ResourceState::Degraded { reason } => ("degraded", Some(reason.as_str())),
                ResourceState::Maintenance { reason } => ("maintenance", Some(reason.as_str())),
            };
            sqlx::query(
                "INSERT INTO resource (id, parent, kind, name, capacity_bps, state, reason, zone)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?)
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
        let mut tx = self.write().await?;
        sqlx::query(
            "INSERT INTO token (hash, username, role, created_at_us, zone) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(hash)
        .bind(user)
        .bind(role_name(role))
        .bind(now.as_microsecond())
        .bind(zone)
        .execute(&mut *tx)
        .await?;
        if zone.is_some() {
            sqlx::query("UPDATE token SET zone = ? WHERE username = ?")
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
            "SELECT username, role, zone FROM token WHERE hash = ? AND revoked_at_us IS NULL",
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
            "SELECT hash, username, role, zone, created_at_us, revoked_at_us FROM token
             ORDER BY created_at_us, hash",
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
        let mut tx = self.write().await?;
        let valid: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM token WHERE username = ? AND revoked_at_us IS NULL LIMIT 1",
        )
        .bind(user)
        .fetch_optional(&mut *tx)
        .await?;
        if valid.is_none() {
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO feed_token (username, hash, created_at_us) VALUES (?, ?, ?)
             ON CONFLICT (username) DO UPDATE SET hash = excluded.hash,
               created_at_us = excluded.created_at_us",
        )
        .bind(user)
        .bind(hash)
        .bind(now.as_microsecond())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    pub(crate) async fn revoke_feed_token(&self, user: &str) -> Result<bool, StoreError> {
        let mut tx = self.write().await?;
        let done = sqlx::query("DELETE FROM feed_token WHERE username = ?")
            .bind(user)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    pub(crate) async fn feed_user(&self, hash: &str) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT f.username FROM feed_token f WHERE f.hash = ? AND EXISTS (
               SELECT 1 FROM token t WHERE t.username = f.username AND t.revoked_at_us IS NULL)",
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
        let mut tx = self.write().await?;
        let done = sqlx::query(
            "UPDATE token SET revoked_at_us = ? WHERE hash = ? AND revoked_at_us IS NULL",
        )
        .bind(now.as_microsecond())
        .bind(hash)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    async fn get(
        tx: &mut Transaction<'static, Sqlite>,
        id: i64,
    ) -> Result<Option<(Booking, Option<Approval>)>, StoreError> {
        let r = sqlx::query(&format!("SELECT {COLS} FROM booking WHERE id = ?"))
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
        r.map(|r| row(&r)?.into_stored()).transpose()
    }

    /// Marks the holds due at `now` expired, each with an audit event by
    /// `system`; returns their ids.
    async fn expire_due(
        tx: &mut Transaction<'static, Sqlite>,
        now: Timestamp,
    ) -> Result<Vec<i64>, StoreError> {
        let now_us = now.as_microsecond();
        let due = sqlx::query(&format!(
            "SELECT {COLS} FROM booking WHERE status = 'held' AND hold_until_us <= ?"
        ))
        .bind(now_us)
        .fetch_all(&mut **tx)
        .await?;
        let mut ids = Vec::new();
        for r in &due {
            let (before, _) = row(r)?.into_stored()?;
            let Status::Held { until } = before.status else {
                continue;
            };
            let id = r.try_get::<i64, _>("id")?;
            sqlx::query(
                "UPDATE booking SET status = 'expired', status_at_us = hold_until_us,
                   hold_until_us = NULL, version = version + 1, updated_at_us = ? WHERE id = ?",
            )
            .bind(now_us)
            .bind(id)
            .execute(&mut **tx)
            .await?;
            let mut after = before.clone();
            after.status = Status::Expired { at: until };
            after.version += 1;
            Self::audit(tx, &system(), Action::Expire, now, Some(&before), &after).await?;
            ids.push(id);
        }
        Ok(ids)
    }

    pub(crate) async fn expire_holds(&self, now: Timestamp) -> Result<Vec<i64>, StoreError> {
        let mut tx = self.write().await?;
        let ids = Self::expire_due(&mut tx, now).await?;
        tx.commit().await?;
        Ok(ids)
    }

    /// The first live booking (by start) on a resource conflicting with
    /// `resource` overlapping `slot`, other than `except`.
    async fn first_conflict(
        tx: &mut Transaction<'static, Sqlite>,
        resource: &ResourceId,
        slot: &Slot,
        now: Timestamp,
        except: i64,
    ) -> Result<Option<Booking>, StoreError> {
        let ancestors = serde_json::to_string(
            &resource
                .self_and_ancestors()
                .iter()
                .map(ResourceId::as_str)
                .collect::<Vec<_>>(),
        )
        .unwrap_or_default();
        let r = sqlx::query(&format!(
            "SELECT {COLS} FROM booking
             WHERE id <> ? AND {LIVE} AND start_us < ? AND end_us > ?
               AND (resource IN (SELECT value FROM json_each(?))
                    OR substr(resource, 1, length(?) + 1) = ? || '/')
             ORDER BY start_us LIMIT 1"
        ))
        .bind(except)
        .bind(now.as_microsecond())
        .bind(slot.end().as_microsecond())
        .bind(slot.start().as_microsecond())
        .bind(&ancestors)
        .bind(resource.as_str())
        .bind(resource.as_str())
        .fetch_optional(&mut **tx)
        .await?;
        r.map(|r| row(&r)?.into_booking()).transpose()
    }

    async fn audit(
        tx: &mut Transaction<'static, Sqlite>,
        actor: &Actor,
        action: Action,
        now: Timestamp,
        before: Option<&Booking>,
        after: &Booking,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO audit (at_us, actor, role, action, booking, before, after)
             VALUES (?, ?, ?, ?, ?, ?, ?)",
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
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    pub(crate) async fn book(
        &self,
        req: &BookRequest<'_>,
        resource: &ResourceId,
        slot: &Slot,
    ) -> Result<Reply, StoreError> {
        let now_us = req.now.as_microsecond();
        let mut tx = self.write().await?;
        if let Some((key, fp)) = &req.idempotency {
            let inserted = sqlx::query(
                "INSERT INTO idempotency (owner, key, method, path, body_hash, created_at_us)
                 VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            )
            .bind(&key.user)
            .bind(&key.key)
            .bind(&fp.method)
            .bind(&fp.path)
            .bind(&fp.body_hash)
            .bind(now_us)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if inserted == 0 {
                let r = sqlx::query(
                    "SELECT method, path, body_hash, status, response FROM idempotency
                     WHERE owner = ? AND key = ?",
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
                let status: Option<i64> = r.try_get("status")?;
                let response: Option<String> = r.try_get("response")?;
                if let (Some(s), Some(text)) = (status, response) {
                    return Reply::from_stored(u16::try_from(s).unwrap_or(500), &text);
                }
            }
        }
        let reply = Self::book_locked(&mut tx, req, resource, slot).await?;
        if let Some((key, _)) = &req.idempotency {
            sqlx::query(
                "UPDATE idempotency SET status = ?, response = ? WHERE owner = ? AND key = ?",
            )
            .bind(i64::from(reply.status))
            .bind(reply.to_stored())
            .bind(&key.user)
            .bind(&key.key)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(reply)
    }

    /// The booking itself, under the write lock.
    async fn book_locked(
        tx: &mut Transaction<'static, Sqlite>,
        req: &BookRequest<'_>,
        resource: &ResourceId,
        slot: &Slot,
    ) -> Result<Reply, StoreError> {
        let now_us = req.now.as_microsecond();
        let (start_us, end_us) = (slot.start().as_microsecond(), slot.end().as_microsecond());
        Self::expire_due(tx, req.now).await?;
        // Booking ids start at 1: none is excepted.
        if let Some(c) = Self::first_conflict(tx, resource, slot, req.now, 0).await? {
            return Ok(conflict_reply(resource, &c));
        }
        let (from, to) = policy_window(slot);
        let mine = sqlx::query(&format!(
            "SELECT {COLS} FROM booking WHERE owner = ? AND start_us < ? AND end_us > ?"
        ))
        .bind(&req.actor.user)
        .bind(to)
        .bind(from)
        .fetch_all(&mut **tx)
        .await?
        .iter()
        .map(|r| row(r).map_err(StoreError::from)?.into_booking())
        .collect::<Result<Vec<_>, _>>()?;
        let (warnings, needs_approval) = match check_policy(req, resource, slot, &mine) {
            Ok(w) => w,
            Err(e) => return Ok(Reply::error(e)),
        };
        let status = new_status(req, slot, needs_approval);
        let approval = needs_approval.then_some(Approval::Pending);
        let (status_name, hold_us, _) = status_columns(&status);
        let note = req.create.note.clone().unwrap_or_default();
        let id: i64 = sqlx::query(
            "INSERT INTO booking (resource, owner, start_us, end_us, status, hold_until_us, note,
               created_at_us, updated_at_us, approval)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(resource.as_str())
        .bind(&req.actor.user)
        .bind(start_us)
        .bind(end_us)
        .bind(status_name)
        .bind(hold_us)
        .bind(&note)
        .bind(now_us)
        .bind(now_us)
        .bind(approval.map(Approval::as_str))
        .fetch_one(&mut **tx)
        .await?
        .try_get(0)?;
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

    pub(crate) async fn modify(
        &self,
        id: i64,
        actor: &Actor,
        now: Timestamp,
        decide: &Decide<'_>,
    ) -> Result<Reply, StoreError> {
        let mut tx = self.write().await?;
        let Some((before, approval)) = Self::get(&mut tx, id).await? else {
            return Ok(unknown_booking(id));
        };
        let (from, to) = policy_window(&before.slot);
        let mine = sqlx::query(&format!(
            "SELECT {COLS} FROM booking WHERE owner = ? AND start_us < ? AND end_us > ?"
        ))
        .bind(&before.owner)
        .bind(to)
        .bind(from)
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
        // The trigger checks the new end and status against every other
        // live booking, with updated_at_us as "now": the database refuses an
        // extension into the next booking, whatever the caller checked.
        let updated = sqlx::query(
            "UPDATE booking SET status = ?, hold_until_us = ?, status_at_us = ?, preempted_by = ?,
               notice = ?, end_us = ?, approval = ?, declined_by = ?, version = version + 1,
               updated_at_us = ?
             WHERE id = ?",
        )
        .bind(name)
        .bind(hold_us)
        .bind(at_us)
        .bind(by)
        .bind(notice)
        .bind(after.slot.end().as_microsecond())
        .bind(stored_approval(change.approval))
        .bind(declined_by)
        .bind(now.as_microsecond())
        .bind(id)
        .execute(&mut *tx)
        .await;
        match updated {
            Ok(_) => {}
            Err(sqlx::Error::Database(d)) if d.message().contains("conflict") => {
                let probe = Slot::new(before.slot.end(), after.slot.end()).unwrap_or(after.slot);
                let next = Self::first_conflict(&mut tx, &after.resource, &probe, now, id).await?;
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
        let exists = sqlx::query("SELECT 1 FROM booking WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        if exists.is_none() {
            return Ok(None);
        }
        let rows = sqlx::query(
            "SELECT seq, at_us, actor, role, action, booking, before, after FROM audit
             WHERE booking = ? ORDER BY seq",
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
            "SELECT {COLS} FROM booking WHERE owner = ? ORDER BY start_us, id"
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
        let (all, r, ancestors) = match resource {
            None => (1, String::new(), "[]".to_owned()),
            Some(r) => (
                0,
                r.as_str().to_owned(),
                serde_json::to_string(
                    &r.self_and_ancestors()
                        .iter()
                        .map(ResourceId::as_str)
                        .collect::<Vec<_>>(),
                )
                .unwrap_or_default(),
            ),
        };
        let rows = sqlx::query(&format!(
            "SELECT {COLS} FROM booking
             WHERE start_us < ? AND end_us > ?
               AND (? = 1 OR resource IN (SELECT value FROM json_each(?))
                    OR substr(resource, 1, length(?) + 1) = ? || '/')
             ORDER BY start_us, id"
        ))
        .bind(to)
        .bind(from)
        .bind(all)
        .bind(&ancestors)
        .bind(&r)
        .bind(&r)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(row(r)?)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_trigger_refuses_an_overlap_from_any_writer() {
        let dir = std::env::temp_dir().join(format!("lh-web-trigger-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = SqliteStore::open(&dir.join("t.sqlite").display().to_string())
            .await
            .unwrap();
        let inv = Inventory::from_toml(
            "[[resource]]\nid = \"cern\"\nkind = \"site\"\n\n[[resource]]\nid = \"cern/lambda\"\nkind = \"lambda\"\n",
            "t.toml",
        )
        .unwrap();
        store.sync_inventory(&inv).await.unwrap();
        let insert = |res: &'static str, start: i64, end: i64, status: &'static str| {
            let pool = store.pool.clone();
            async move {
                sqlx::query(
                    "INSERT INTO booking (resource, owner, start_us, end_us, status, hold_until_us,
                       created_at_us, updated_at_us) VALUES (?, 'x', ?, ?, ?, ?, 0, 0)",
                )
                .bind(res)
                .bind(start)
                .bind(end)
                .bind(status)
                .bind((status == "held").then_some(100_i64))
                .execute(&pool)
                .await
            }
        };
        insert("cern/lambda", 10, 20, "confirmed").await.unwrap();
        // The parent, overlapping: refused by the trigger.
        let e = insert("cern", 15, 25, "confirmed").await.unwrap_err();
        assert!(e.to_string().contains("conflict"), "{e}");
        // Touching is not overlapping; a cancelled row never conflicts.
        insert("cern", 20, 30, "confirmed").await.unwrap();
        insert("cern", 0, 40, "cancelled").await.unwrap();
        // A hold live at the writer's now (updated_at_us 0 < hold_until_us 100) blocks.
        let e = insert("cern/lambda", 25, 35, "held").await.unwrap_err();
        assert!(e.to_string().contains("conflict"), "{e}");
        // Moving an end is checked too.
        sqlx::query("UPDATE booking SET end_us = 12 WHERE resource = 'cern/lambda'")
            .execute(&store.pool)
            .await
            .unwrap();
        let e = sqlx::query("UPDATE booking SET end_us = 25 WHERE resource = 'cern/lambda'")
            .execute(&store.pool)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("conflict"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
