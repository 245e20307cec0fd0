//! The operations log's storage (migration 0005): every attempt to operate a host, allowed or
//! refused. An allowed attempt is written `pending` before the BMC is asked and completed after
//! ([`Store::finish_operation`]); both stores share the shape, SQLite keeping microseconds and
//! PostgreSQL `timestamptz`.

use jiff::Timestamp;
use longhaul_testbed::booking::Actor;
use longhaul_testbed::operations::{OperationView, log_time};
use sqlx::Row;

use crate::reply::StoreError;
use crate::rows::role_name;
use crate::store::Store;

/// One attempt, as written.
#[derive(Debug, Clone)]
pub struct NewOperation<'a> {
    /// When it was asked.
    pub at: Timestamp,
    /// Who asked.
    pub actor: &'a Actor,
    /// The host.
    pub host: &'a str,
    /// `power on`, ...
    pub action: &'a str,
    /// The reason given.
    pub reason: Option<&'a str>,
    /// Allowed or refused.
    pub allowed: bool,
    /// The grant or the refusal.
    pub grounds: &'a str,
    /// `pending` (allowed) or `refused`.
    pub result: &'a str,
}

const COLUMNS: &str =
    "seq, actor, role, host, action, reason, allowed, grounds, result, state, detail";

fn view(r: &impl RowLike, at_us: i64) -> Result<OperationView, sqlx::Error> {
    Ok(OperationView {
        seq: u64::try_from(r.i64("seq")?).unwrap_or(0),
        at: log_time(Timestamp::from_microsecond(at_us).unwrap_or(Timestamp::UNIX_EPOCH)),
        actor: r.text("actor")?,
        role: r.text("role")?,
        host: r.text("host")?,
        action: r.text("action")?,
        reason: r.opt_text("reason")?,
        allowed: r.flag("allowed")?,
        grounds: r.text("grounds")?,
        result: r.text("result")?,
        state: r.opt_text("state")?,
        detail: r.opt_text("detail")?,
    })
}

/// The column reads both drivers' rows share.
pub(crate) trait RowLike {
    fn i64(&self, c: &str) -> Result<i64, sqlx::Error>;
    fn text(&self, c: &str) -> Result<String, sqlx::Error>;
    fn opt_text(&self, c: &str) -> Result<Option<String>, sqlx::Error>;
    fn flag(&self, c: &str) -> Result<bool, sqlx::Error>;
}

macro_rules! row_like {
    ($row:ty) => {
        impl RowLike for $row {
            fn i64(&self, c: &str) -> Result<i64, sqlx::Error> {
                self.try_get(c)
            }
            fn text(&self, c: &str) -> Result<String, sqlx::Error> {
                self.try_get(c)
            }
            fn opt_text(&self, c: &str) -> Result<Option<String>, sqlx::Error> {
                self.try_get(c)
            }
            fn flag(&self, c: &str) -> Result<bool, sqlx::Error> {
                self.try_get(c)
            }
        }
    };
}
row_like!(sqlx::sqlite::SqliteRow);
row_like!(sqlx::postgres::PgRow);

/// `s` with each NUL replaced by U+FFFD: PostgreSQL's text cannot hold NUL, and a reason (or a
/// BMC's answer) that carries one must still be logged, on both stores alike.
fn storable(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') {
        s.replace('\0', "\u{fffd}").into()
    } else {
        s.into()
    }
}

impl Store {
    /// Writes an attempt; its sequence number.
    pub async fn log_operation(&self, op: &NewOperation<'_>) -> Result<u64, StoreError> {
        let reason = op.reason.map(storable);
        let grounds = storable(op.grounds);
        let (reason, grounds) = (reason.as_deref(), grounds.as_ref());
        let seq: i64 = match self {
            Self::Sqlite(s) => {
                sqlx::query(
                    "INSERT INTO operation (at_us, actor, role, host, action, reason, allowed, grounds, result)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
                )
                .bind(op.at.as_microsecond())
                .bind(&op.actor.user)
                .bind(role_name(op.actor.role))
                .bind(op.host)
                .bind(op.action)
                .bind(reason)
                .bind(op.allowed)
                .bind(grounds)
                .bind(op.result)
                .fetch_one(&s.writer)
                .await?
                .try_get("seq")?
            }
            Self::Postgres(s) => {
                sqlx::query(
                    "INSERT INTO operation (at, actor, role, host, action, reason, allowed, grounds, result)
                     VALUES (lh_us($1), $2, $3, $4, $5, $6, $7, $8, $9) RETURNING seq",
                )
                .bind(op.at.as_microsecond())
                .bind(&op.actor.user)
                .bind(role_name(op.actor.role))
                .bind(op.host)
                .bind(op.action)
                .bind(reason)
                .bind(op.allowed)
                .bind(grounds)
                .bind(op.result)
                .fetch_one(&s.pool)
                .await?
                .try_get("seq")?
            }
        };
        Ok(u64::try_from(seq).unwrap_or(0))
    }

    /// Completes a pending attempt with its result (`ok` or `failed`), the state read back and the
    /// BMC's answers or error.
    pub async fn finish_operation(
        &self,
        seq: u64,
        result: &str,
        state: Option<&str>,
        detail: &str,
    ) -> Result<(), StoreError> {
        let detail = storable(detail);
        let detail = detail.as_ref();
        let seq = i64::try_from(seq).unwrap_or(i64::MAX);
        match self {
            Self::Sqlite(s) => {
                sqlx::query("UPDATE operation SET result = ?, state = ?, detail = ? WHERE seq = ?")
                    .bind(result)
                    .bind(state)
                    .bind(detail)
                    .bind(seq)
                    .execute(&s.writer)
                    .await?;
            }
            Self::Postgres(s) => {
                sqlx::query(
                    "UPDATE operation SET result = $1, state = $2, detail = $3 WHERE seq = $4",
                )
                .bind(result)
                .bind(state)
                .bind(detail)
                .bind(seq)
                .execute(&s.pool)
                .await?;
            }
        }
        Ok(())
    }

    /// The newest `limit` attempts, newest first: on `host` when given, by `actor` when given.
    pub async fn operations(
        &self,
        host: Option<&str>,
        actor: Option<&str>,
        limit: u32,
    ) -> Result<Vec<OperationView>, StoreError> {
        let limit = i64::from(limit);
        let out = match self {
            Self::Sqlite(s) => {
                let rows = sqlx::query(&format!(
                    "SELECT {COLUMNS}, at_us FROM operation
                     WHERE (?1 IS NULL OR host = ?1) AND (?2 IS NULL OR actor = ?2)
                     ORDER BY seq DESC LIMIT ?3"
                ))
                .bind(host)
                .bind(actor)
                .bind(limit)
                .fetch_all(&s.pool)
                .await?;
                rows.iter()
                    .map(|r| view(r, r.try_get("at_us")?))
                    .collect::<Result<Vec<_>, _>>()?
            }
            Self::Postgres(s) => {
                let rows = sqlx::query(&format!(
                    "SELECT {COLUMNS}, lh_us_of(at) AS at_us FROM operation
                     WHERE ($1::text IS NULL OR host = $1) AND ($2::text IS NULL OR actor = $2)
                     ORDER BY seq DESC LIMIT $3"
                ))
                .bind(host)
                .bind(actor)
                .bind(limit)
                .fetch_all(&s.pool)
                .await?;
                rows.iter()
                    .map(|r| view(r, r.try_get("at_us")?))
                    .collect::<Result<Vec<_>, _>>()?
            }
        };
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_testbed::booking::Role;

    /// Writes a refused and an allowed attempt, completes the allowed one, and reads them back:
    /// newest first, filtered by host and by actor.
    async fn round_trip(store: &Store) {
        let alice = Actor::user("alice");
        let root = Actor {
            user: "root".into(),
            role: Role::Admin,
        };
        let at: Timestamp = "2026-11-29T10:00:00.123456Z".parse().unwrap();
        let refused = NewOperation {
            at,
            actor: &alice,
            host: "cern/pc-1",
            action: "power off",
            reason: None,
            allowed: false,
            grounds: "no_reservation: alice holds no active reservation",
            result: "refused",
        };
        let first = store.log_operation(&refused).await.unwrap();
        let allowed = NewOperation {
            actor: &root,
            host: "cern/pc-2",
            reason: Some("hung"),
            allowed: true,
            grounds: "admin: hung",
            result: "pending",
            ..refused.clone()
        };
        let second = store.log_operation(&allowed).await.unwrap();
        assert!(second > first);
        let pending = store.operations(None, None, 10).await.unwrap();
        assert_eq!(pending[0].result, "pending");
        store
            .finish_operation(second, "ok", Some("off"), "state on; ForceOff; state off")
            .await
            .unwrap();
        let all = store.operations(None, None, 10).await.unwrap();
        assert_eq!(
            all.iter().map(|o| o.seq).collect::<Vec<_>>(),
            [second, first]
        );
        let done = &all[0];
        assert_eq!(
            (
                done.result.as_str(),
                done.state.as_deref(),
                done.reason.as_deref(),
                done.allowed
            ),
            ("ok", Some("off"), Some("hung"), true)
        );
        assert_eq!(done.at, "2026-11-29T10:00:00.123456Z");
        assert_eq!(done.role, "admin");
        assert_eq!(all[1].detail, None);
        let on_pc1 = store.operations(Some("cern/pc-1"), None, 10).await.unwrap();
        assert_eq!(on_pc1.len(), 1);
        assert_eq!(on_pc1[0].actor, "alice");
        assert!(
            store
                .operations(None, Some("bob"), 10)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(store.operations(None, None, 1).await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn sqlite_keeps_the_operations_log() {
        let dir = std::env::temp_dir().join(format!("lh-oplog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("ops.sqlite").display().to_string())
            .await
            .unwrap();
        round_trip(&store).await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn postgres_keeps_the_operations_log() {
        let Some(pg) = longhaul_testkit::fixtures::Postgres::start() else {
            return;
        };
        round_trip(&Store::open(&pg.database()).await.unwrap()).await;
    }
}
