//! The registered hosts' storage (migration 0007): each host's agent key hash, state, facts and
//! reachability, and the hosts' events. Both stores keep microseconds in `bigint` columns here, so
//! one text of each query serves both (SQLite's `?N` for PostgreSQL's `$N`).

use longhaul_testbed::agents::{HostEventView, HostFacts};
use longhaul_testbed::operations::log_time;

use crate::oplog::RowLike;
use crate::reply::StoreError;
use crate::store::Store;

/// One registered host, as stored.
#[derive(Debug, Clone)]
pub struct AgentRow {
    /// The host.
    pub host: String,
    /// BLAKE3 of its key, hex.
    pub key_hash: String,
    /// Its key's fingerprint.
    pub fingerprint: String,
    /// `pending` or `accepted`.
    pub state: String,
    /// As last reported.
    pub facts: HostFacts,
    /// First report, µs.
    pub registered_us: i64,
    /// Last report, µs.
    pub last_seen_us: i64,
    /// Heartbeats arrive.
    pub reachable: bool,
    /// Unreachable with a silent console.
    pub hung: bool,
}

/// A host event to write.
#[derive(Debug, Clone)]
pub struct NewEvent<'a> {
    /// When, µs.
    pub at_us: i64,
    /// The host.
    pub host: &'a str,
    /// `registered`, `accepted`, ...
    pub kind: &'a str,
    /// What happened.
    pub detail: &'a str,
    /// The bookings covering the host then.
    pub bookings: &'a [String],
}

/// PostgreSQL's `$N` placeholders as SQLite's `?N`.
fn lite(sql: &str) -> String {
    sql.replace('$', "?")
}

/// Runs a statement on the store's writer; the rows it changed.
macro_rules! exec {
    ($store:expr, $sql:expr $(, $b:expr)* $(,)?) => {
        match $store {
            Store::Sqlite(s) => sqlx::query(&lite($sql))$(.bind($b))*.execute(&s.writer).await.map(|r| r.rows_affected()),
            Store::Postgres(s) => sqlx::query($sql)$(.bind($b))*.execute(&s.pool).await.map(|r| r.rows_affected()),
        }
    };
}

/// Reads rows, each through `$f` (generic over [`RowLike`]).
macro_rules! fetch {
    ($store:expr, $f:expr, $sql:expr $(, $b:expr)* $(,)?) => {
        match $store {
            Store::Sqlite(s) => match sqlx::query(&lite($sql))$(.bind($b))*.fetch_all(&s.pool).await {
                Ok(rows) => rows.iter().map(|r| $f(r)).collect::<Result<Vec<_>, sqlx::Error>>(),
                Err(e) => Err(e),
            },
            Store::Postgres(s) => match sqlx::query($sql)$(.bind($b))*.fetch_all(&s.pool).await {
                Ok(rows) => rows.iter().map(|r| $f(r)).collect::<Result<Vec<_>, sqlx::Error>>(),
                Err(e) => Err(e),
            },
        }
    };
}

const HOST_COLUMNS: &str =
    "host, key_hash, fingerprint, state, facts, registered_us, last_seen_us, reachable, hung";

fn agent_row(r: &impl RowLike) -> Result<AgentRow, sqlx::Error> {
    let facts = r.text("facts")?;
    Ok(AgentRow {
        host: r.text("host")?,
        key_hash: r.text("key_hash")?,
        fingerprint: r.text("fingerprint")?,
        state: r.text("state")?,
        facts: serde_json::from_str(&facts).map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
        registered_us: r.i64("registered_us")?,
        last_seen_us: r.i64("last_seen_us")?,
        reachable: r.flag("reachable")?,
        hung: r.flag("hung")?,
    })
}

fn event_view(r: &impl RowLike) -> Result<HostEventView, sqlx::Error> {
    let at = r.i64("at_us")?;
    let bookings = r.text("bookings")?;
    Ok(HostEventView {
        seq: u64::try_from(r.i64("seq")?).unwrap_or(0),
        at: log_time(jiff::Timestamp::from_microsecond(at).unwrap_or(jiff::Timestamp::UNIX_EPOCH)),
        host: r.text("host")?,
        kind: r.text("kind")?,
        detail: r.text("detail")?,
        bookings: bookings
            .split("; ")
            .filter(|b| !b.is_empty())
            .map(str::to_owned)
            .collect(),
    })
}

fn facts_json(facts: &HostFacts) -> String {
    serde_json::to_string(facts).unwrap_or_else(|_| "{}".into())
}

impl Store {
    /// The registered host `host`, if any.
    pub async fn agent_host(&self, host: &str) -> Result<Option<AgentRow>, StoreError> {
        let rows = fetch!(
            self,
            agent_row,
            &format!("SELECT {HOST_COLUMNS} FROM agent_host WHERE host = $1"),
            host
        )?;
        Ok(rows.into_iter().next())
    }

    /// Every registered host, by id.
    pub async fn agent_hosts(&self) -> Result<Vec<AgentRow>, StoreError> {
        Ok(fetch!(
            self,
            agent_row,
            &format!("SELECT {HOST_COLUMNS} FROM agent_host ORDER BY host")
        )?)
    }

    /// Registers `row` (pending); false when the host is registered already (a race of two first
    /// reports: the later one is refused as a wrong key).
    pub async fn register_agent(&self, row: &AgentRow) -> Result<bool, StoreError> {
        let n = exec!(
            self,
            &format!(
                "INSERT INTO agent_host ({HOST_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (host) DO NOTHING"
            ),
            &row.host,
            &row.key_hash,
            &row.fingerprint,
            &row.state,
            facts_json(&row.facts),
            row.registered_us,
            row.last_seen_us,
            row.reachable,
            row.hung,
        )?;
        Ok(n == 1)
    }

    /// How many hosts wait for acceptance.
    pub async fn pending_agents(&self) -> Result<u64, StoreError> {
        let rows = fetch!(
            self,
            |r: &_| RowLike::i64(r, "n"),
            "SELECT COUNT(*) AS n FROM agent_host WHERE state = 'pending'"
        )?;
        Ok(rows.first().map_or(0, |n| u64::try_from(*n).unwrap_or(0)))
    }

    /// A report of `host` at `now_us` with `facts`: reachable again, not hung.
    pub async fn agent_seen(
        &self,
        host: &str,
        facts: &HostFacts,
        now_us: i64,
    ) -> Result<(), StoreError> {
        exec!(
            self,
            "UPDATE agent_host SET facts = $1, last_seen_us = $2, reachable = $3, hung = $4
             WHERE host = $5",
            facts_json(facts),
            now_us,
            true,
            false,
            host
        )?;
        Ok(())
    }

    /// Accepts a pending host; false when there is none of that id pending.
    pub async fn accept_agent(&self, host: &str, now_us: i64) -> Result<bool, StoreError> {
        // Its heartbeat clock starts now: a host accepted long after its last report is not
        // unreachable before it has had the time to report again.
        let n = exec!(
            self,
            "UPDATE agent_host SET state = 'accepted', last_seen_us = $1, reachable = $2
             WHERE host = $3 AND state = 'pending'",
            now_us,
            true,
            host
        )?;
        Ok(n == 1)
    }

    /// Forgets a host's registration (its key); false when there was none.
    pub async fn forget_agent(&self, host: &str) -> Result<bool, StoreError> {
        Ok(exec!(self, "DELETE FROM agent_host WHERE host = $1", host)? == 1)
    }

    /// The accepted hosts last heard before `cutoff_us` that are not marked hung yet (reachable
    /// ones, and unreachable ones whose console may have gone silent since).
    pub async fn silent_agents(&self, cutoff_us: i64) -> Result<Vec<AgentRow>, StoreError> {
        Ok(fetch!(
            self,
            agent_row,
            &format!(
                "SELECT {HOST_COLUMNS} FROM agent_host
                 WHERE state = 'accepted' AND last_seen_us < $1 AND (reachable = $2 OR hung = $3)
                 ORDER BY host"
            ),
            cutoff_us,
            true,
            false
        )?)
    }

    /// Marks `host` unreachable, and hung or not, unless a report came in after `cutoff_us` or it
    /// is so marked already; whether it was marked.
    pub async fn mark_silent(
        &self,
        host: &str,
        hung: bool,
        cutoff_us: i64,
    ) -> Result<bool, StoreError> {
        let n = exec!(
            self,
            "UPDATE agent_host SET reachable = $1, hung = $2
             WHERE host = $3 AND last_seen_us < $4 AND (reachable = $5 OR hung <> $6)",
            false,
            hung,
            host,
            cutoff_us,
            true,
            hung
        )?;
        Ok(n == 1)
    }

    /// Writes a host event.
    pub async fn add_host_event(&self, ev: &NewEvent<'_>) -> Result<(), StoreError> {
        exec!(
            self,
            "INSERT INTO host_event (at_us, host, kind, detail, bookings) VALUES ($1, $2, $3, $4, $5)",
            ev.at_us,
            ev.host,
            ev.kind,
            ev.detail,
            ev.bookings.join("; ")
        )?;
        Ok(())
    }

    /// The newest `limit` events, newest first, of `host` or of every host.
    pub async fn host_events(
        &self,
        host: Option<&str>,
        limit: u32,
    ) -> Result<Vec<HostEventView>, StoreError> {
        let limit = i64::from(limit);
        let columns = "seq, at_us, host, kind, detail, bookings";
        let rows = match host {
            Some(h) => fetch!(
                self,
                event_view,
                &format!(
                    "SELECT {columns} FROM host_event WHERE host = $1 ORDER BY seq DESC LIMIT $2"
                ),
                h,
                limit
            ),
            None => fetch!(
                self,
                event_view,
                &format!("SELECT {columns} FROM host_event ORDER BY seq DESC LIMIT $1"),
                limit
            ),
        }?;
        Ok(rows)
    }
}
