//! The console archive's storage (migration 0006): lines appended in batches by the service's
//! archiver, read by host, boot and position, and bounded by age and count per host.

use jiff::Timestamp;
use longhaul_testbed::operations::{BootView, ConsoleLineView, log_time};
use sqlx::Row;

use crate::oplog::RowLike;
use crate::reply::StoreError;
use crate::store::Store;

/// A line to archive.
#[derive(Debug, Clone)]
pub struct NewLine {
    /// The host.
    pub host: String,
    /// When it was read.
    pub at: Timestamp,
    /// Its boot.
    pub boot: u64,
    /// boot, oops or panic.
    pub mark: Option<&'static str>,
    /// The text.
    pub text: String,
}

/// Which lines to read.
#[derive(Debug, Clone, Default)]
pub struct LineQuery {
    /// Only this boot.
    pub boot: Option<u64>,
    /// Only lines after this position.
    pub after: Option<u64>,
    /// Only lines read at or after this time.
    pub since: Option<Timestamp>,
    /// At most this many (the newest of them when `after` is absent, else the oldest).
    pub limit: u32,
}

fn time(us: i64) -> String {
    log_time(Timestamp::from_microsecond(us).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn line_view(r: &impl RowLike) -> Result<ConsoleLineView, sqlx::Error> {
    Ok(ConsoleLineView {
        seq: u64::try_from(r.i64("seq")?).unwrap_or(0),
        at: time(r.i64("at_us")?),
        boot: u64::try_from(r.i64("boot")?).unwrap_or(0),
        mark: r.opt_text("mark")?,
        text: r.text("line")?,
    })
}

fn boot_view(r: &impl RowLike) -> Result<BootView, sqlx::Error> {
    let n = |c: &str| r.i64(c).map(|v| u64::try_from(v).unwrap_or(0));
    Ok(BootView {
        boot: n("boot")?,
        started: time(r.i64("first_us")?),
        last: time(r.i64("last_us")?),
        lines: n("lines")?,
        oopses: n("oopses")?,
        panics: n("panics")?,
    })
}

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Store {
    /// Appends `lines` in one transaction.
    pub async fn append_console(&self, lines: &[NewLine]) -> Result<(), StoreError> {
        match self {
            Self::Sqlite(s) => {
                let mut tx = s.writer.begin().await?;
                for l in lines {
                    sqlx::query("INSERT INTO console_line (host, at_us, boot, mark, line) VALUES (?, ?, ?, ?, ?)")
                        .bind(&l.host)
                        .bind(l.at.as_microsecond())
                        .bind(i(l.boot))
                        .bind(l.mark)
                        .bind(&l.text)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
            }
            Self::Postgres(s) => {
                let mut tx = s.pool.begin().await?;
                for l in lines {
                    sqlx::query("INSERT INTO console_line (host, at, boot, mark, line) VALUES ($1, lh_us($2), $3, $4, $5)")
                        .bind(&l.host)
                        .bind(l.at.as_microsecond())
                        .bind(i(l.boot))
                        .bind(l.mark)
                        .bind(&l.text)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
            }
        }
        Ok(())
    }

    /// Each host's latest boot number.
    pub async fn console_boots_now(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let sql = "SELECT host, MAX(boot) AS boot FROM console_line GROUP BY host";
        let rows: Vec<(String, i64)> = match self {
            Self::Sqlite(s) => sqlx::query_as(sql).fetch_all(&s.pool).await?,
            Self::Postgres(s) => sqlx::query_as(sql).fetch_all(&s.pool).await?,
        };
        Ok(rows
            .into_iter()
            .map(|(h, b)| (h, u64::try_from(b).unwrap_or(0)))
            .collect())
    }

    /// `host`'s boots, oldest first.
    pub async fn console_boots(&self, host: &str) -> Result<Vec<BootView>, StoreError> {
        Ok(match self {
            Self::Sqlite(s) => sqlx::query(
                "SELECT boot, MIN(at_us) AS first_us, MAX(at_us) AS last_us, COUNT(*) AS lines,
                        SUM(mark = 'oops') AS oopses, SUM(mark = 'panic') AS panics
                 FROM console_line WHERE host = ? GROUP BY boot ORDER BY boot",
            )
            .bind(host)
            .fetch_all(&s.pool)
            .await?
            .iter()
            .map(boot_view)
            .collect::<Result<_, _>>()?,
            Self::Postgres(s) => sqlx::query(
                "SELECT boot, lh_us_of(MIN(at)) AS first_us, lh_us_of(MAX(at)) AS last_us,
                        COUNT(*)::bigint AS lines, COUNT(*) FILTER (WHERE mark = 'oops')::bigint AS oopses,
                        COUNT(*) FILTER (WHERE mark = 'panic')::bigint AS panics
                 FROM console_line WHERE host = $1 GROUP BY boot ORDER BY boot",
            )
            .bind(host)
            .fetch_all(&s.pool)
            .await?
            .iter()
            .map(boot_view)
            .collect::<Result<_, _>>()?,
        })
    }

    /// `host`'s lines that `q` selects, oldest first; and the archive's highest position.
    pub async fn console_lines(
        &self,
        host: &str,
        q: &LineQuery,
    ) -> Result<(Vec<ConsoleLineView>, u64), StoreError> {
        let boot = q.boot.map(i);
        let after = q.after.map_or(0, i);
        let since = q.since.map_or(i64::MIN, |t| t.as_microsecond());
        // Following (after given): the oldest lines past it; otherwise the newest `limit`.
        let order = if q.after.is_some() { "ASC" } else { "DESC" };
        let limit = i64::from(q.limit);
        let (mut lines, last): (Vec<ConsoleLineView>, i64) = match self {
            Self::Sqlite(s) => {
                let rows = sqlx::query(&format!(
                    "SELECT seq, at_us, boot, mark, line FROM console_line
                     WHERE host = ?1 AND (?2 IS NULL OR boot = ?2) AND seq > ?3 AND at_us >= ?4
                     ORDER BY seq {order} LIMIT ?5"
                ))
                .bind(host)
                .bind(boot)
                .bind(after)
                .bind(since)
                .bind(limit)
                .fetch_all(&s.pool)
                .await?;
                let last: Option<i64> = sqlx::query("SELECT MAX(seq) AS m FROM console_line")
                    .fetch_one(&s.pool)
                    .await?
                    .try_get("m")?;
                (
                    rows.iter().map(line_view).collect::<Result<_, _>>()?,
                    last.unwrap_or(0),
                )
            }
            Self::Postgres(s) => {
                let rows = sqlx::query(&format!(
                    "SELECT seq, lh_us_of(at) AS at_us, boot, mark, line FROM console_line
                     WHERE host = $1 AND ($2::bigint IS NULL OR boot = $2) AND seq > $3 AND at >= lh_us($4)
                     ORDER BY seq {order} LIMIT $5"
                ))
                .bind(host)
                .bind(boot)
                .bind(after)
                .bind(since.max(-(1_i64 << 53)))
                .bind(limit)
                .fetch_all(&s.pool)
                .await?;
                let last: Option<i64> = sqlx::query("SELECT MAX(seq) AS m FROM console_line")
                    .fetch_one(&s.pool)
                    .await?
                    .try_get("m")?;
                (
                    rows.iter().map(line_view).collect::<Result<_, _>>()?,
                    last.unwrap_or(0),
                )
            }
        };
        if q.after.is_none() {
            lines.reverse();
        }
        Ok((lines, u64::try_from(last).unwrap_or(0)))
    }

    /// Deletes lines read before `older_than`, and all but each host's newest `keep`; how many.
    pub async fn trim_console(&self, older_than: Timestamp, keep: u32) -> Result<u64, StoreError> {
        let keep = i64::from(keep);
        let n = match self {
            Self::Sqlite(s) => {
                let a = sqlx::query("DELETE FROM console_line WHERE at_us < ?")
                    .bind(older_than.as_microsecond())
                    .execute(&s.writer)
                    .await?
                    .rows_affected();
                let b = sqlx::query(
                    "DELETE FROM console_line WHERE seq IN (
                       SELECT seq FROM (SELECT seq, ROW_NUMBER() OVER (PARTITION BY host ORDER BY seq DESC) AS r
                                        FROM console_line) WHERE r > ?)",
                )
                .bind(keep)
                .execute(&s.writer)
                .await?
                .rows_affected();
                a + b
            }
            Self::Postgres(s) => {
                let a = sqlx::query("DELETE FROM console_line WHERE at < lh_us($1)")
                    .bind(older_than.as_microsecond())
                    .execute(&s.pool)
                    .await?
                    .rows_affected();
                let b = sqlx::query(
                    "DELETE FROM console_line WHERE seq IN (
                       SELECT seq FROM (SELECT seq, ROW_NUMBER() OVER (PARTITION BY host ORDER BY seq DESC) AS r
                                        FROM console_line) ranked WHERE r > $1)",
                )
                .bind(keep)
                .execute(&s.pool)
                .await?
                .rows_affected();
                a + b
            }
        };
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn round_trip(store: &Store) {
        let t0: Timestamp = "2026-11-29T10:00:00Z".parse().unwrap();
        let line =
            |host: &str, s: i64, boot: u64, mark: Option<&'static str>, text: &str| NewLine {
                host: host.into(),
                at: t0 + jiff::SignedDuration::from_secs(s),
                boot,
                mark,
                text: text.into(),
            };
        store
            .append_console(&[
                line("h", 0, 0, None, "before any boot"),
                line("h", 1, 1, Some("boot"), "Linux version 6.1"),
                line("h", 2, 1, Some("panic"), "Kernel panic - not syncing"),
                line("other", 2, 0, None, "elsewhere"),
                line("h", 3, 2, Some("boot"), "Linux version 6.1"),
                line("h", 4, 2, None, "up again \\u{1b}"),
            ])
            .await
            .unwrap();
        let boots = store.console_boots("h").await.unwrap();
        assert_eq!(
            boots
                .iter()
                .map(|b| (b.boot, b.lines, b.panics))
                .collect::<Vec<_>>(),
            [(0, 1, 0), (1, 2, 1), (2, 2, 0)]
        );
        assert_eq!(boots[1].started, "2026-11-29T10:00:01Z");
        let mut nows = store.console_boots_now().await.unwrap();
        nows.sort();
        assert_eq!(nows, [("h".to_owned(), 2), ("other".to_owned(), 0)]);
        let q = LineQuery {
            boot: Some(1),
            limit: 100,
            ..LineQuery::default()
        };
        let (lines, last) = store.console_lines("h", &q).await.unwrap();
        assert_eq!(
            lines.iter().map(|l| l.text.as_str()).collect::<Vec<_>>(),
            ["Linux version 6.1", "Kernel panic - not syncing"]
        );
        assert_eq!(lines[1].mark.as_deref(), Some("panic"));
        assert_eq!(last, 6);
        // The newest two, in order; then following from the first of them.
        let (newest, _) = store
            .console_lines(
                "h",
                &LineQuery {
                    limit: 2,
                    ..LineQuery::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(newest.iter().map(|l| l.seq).collect::<Vec<_>>(), [5, 6]);
        let follow = LineQuery {
            after: Some(2),
            limit: 100,
            ..LineQuery::default()
        };
        let (next, _) = store.console_lines("h", &follow).await.unwrap();
        assert_eq!(next.iter().map(|l| l.seq).collect::<Vec<_>>(), [3, 5, 6]);
        let since = LineQuery {
            since: Some(t0 + jiff::SignedDuration::from_secs(3)),
            limit: 100,
            ..LineQuery::default()
        };
        assert_eq!(store.console_lines("h", &since).await.unwrap().0.len(), 2);
        // Retention: by age, then by count per host.
        assert_eq!(
            store
                .trim_console(t0 + jiff::SignedDuration::from_secs(1), 100)
                .await
                .unwrap(),
            1
        );
        assert_eq!(store.trim_console(t0, 2).await.unwrap(), 2);
        let (left, _) = store
            .console_lines(
                "h",
                &LineQuery {
                    limit: 100,
                    ..LineQuery::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(left.iter().map(|l| l.seq).collect::<Vec<_>>(), [5, 6]);
        assert_eq!(
            store
                .console_lines(
                    "other",
                    &LineQuery {
                        limit: 100,
                        ..LineQuery::default()
                    }
                )
                .await
                .unwrap()
                .0
                .len(),
            1
        );
    }

    #[tokio::test]
    async fn sqlite_archives_consoles() {
        let dir = std::env::temp_dir().join(format!("lh-console-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("c.sqlite").display().to_string())
            .await
            .unwrap();
        round_trip(&store).await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn postgres_archives_consoles() {
        let Some(pg) = longhaul_testkit::fixtures::Postgres::start() else {
            return;
        };
        round_trip(&Store::open(&pg.database()).await.unwrap()).await;
    }
}
