//! The booking store: one interface, two databases (docs/testbed.md §5). PostgreSQL enforces "no
//! double booking" with claim rows under two exclusion constraints; SQLite with `BEGIN IMMEDIATE`, a
//! conflict query and a trigger backstop. The rules that do not need the database (ownership, the
//! lifecycle, policy, the API views) come from the pure `longhaul-testbed` crate
//! ([`longhaul_testbed::decide`]) and are applied inside each store's writing transaction. This
//! module only dispatches to [`SqliteStore`] or [`PgStore`]; what both share lies below them
//! ([`crate::reply`], [`crate::rows`], [`crate::write`], [`crate::tokens`]).

use jiff::Timestamp;
use longhaul_testbed::api::DeclineBooking;
use longhaul_testbed::booking::{Actor, Approval, AuditEvent, Booking, Role};
use longhaul_testbed::decide::{
    Decide, Op, check_decline, check_preempt, decide_approve, decide_decline, decide_extend,
    decide_op, decide_preempt,
};
use longhaul_testbed::policy::Policy;
use longhaul_testbed::resource::{Inventory, ResourceId};

use crate::postgres::PgStore;
use crate::reply::{Account, BookRequest, Reply, StoreError};
use crate::rows::BookingRow;
use crate::sqlite::SqliteStore;
use crate::tokens::{
    FEED_TOKEN_PREFIX, TokenInfo, TokenRow, TokenSelector, new_token, new_token_with,
    select_tokens, token_hash,
};
use crate::write::validate;

/// Which database, and its pool.
#[derive(Debug, Clone)]
pub enum Store {
    /// SQLite file (the embedded default).
    Sqlite(SqliteStore),
    /// PostgreSQL.
    Postgres(PgStore),
}

/// Whether `url` names PostgreSQL (`postgres://` or `postgresql://`).
pub fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

impl Store {
    /// Opens `url` (`postgres://…`, `sqlite://PATH` or a plain path; a
    /// SQLite file is created) and runs the embedded migrations.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        if is_postgres(url) {
            Ok(Self::Postgres(PgStore::open(url).await?))
        } else {
            let path = url.strip_prefix("sqlite://").unwrap_or(url);
            Ok(Self::Sqlite(SqliteStore::open(path).await?))
        }
    }

    /// "sqlite" or "postgres".
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "sqlite",
            Self::Postgres(_) => "postgres",
        }
    }

    /// Writes the inventory's resources (insert or update; removed
    /// resources stay, for history).
    pub async fn sync_inventory(&self, inv: &Inventory) -> Result<(), StoreError> {
        match self {
            Self::Sqlite(s) => s.sync_inventory(inv).await,
            Self::Postgres(s) => s.sync_inventory(inv).await,
        }
    }

    /// Creates a token for `user` with `role`; returns it (shown once).
    /// `zone` (an IANA name, checked by the caller) becomes the display zone
    /// of every token of `user`.
    pub async fn add_token(
        &self,
        user: &str,
        role: Role,
        zone: Option<&str>,
        now: Timestamp,
    ) -> anyhow::Result<String> {
        let token = new_token()?;
        let hash = token_hash(&token);
        match self {
            Self::Sqlite(s) => s.add_token(&hash, user, role, zone, now).await?,
            Self::Postgres(s) => s.add_token(&hash, user, role, zone, now).await?,
        }
        Ok(token)
    }

    /// Every token, oldest first, revoked ones included.
    pub async fn tokens(&self) -> Result<Vec<TokenInfo>, StoreError> {
        let rows = match self {
            Self::Sqlite(s) => s.tokens().await?,
            Self::Postgres(s) => s.tokens().await?,
        };
        rows.into_iter().map(TokenRow::into_info).collect()
    }

    /// Revokes the tokens `sel` names at `now`: the service refuses them
    /// from the next request on (401, as an unknown token). Returns each
    /// named token as it is now, and whether this call revoked it (`false`:
    /// it was revoked already).
    pub async fn revoke_tokens(
        &self,
        sel: TokenSelector<'_>,
        now: Timestamp,
    ) -> anyhow::Result<Vec<(TokenInfo, bool)>> {
        let all = self.tokens().await?;
        let chosen: Vec<TokenInfo> = select_tokens(&all, sel)?.into_iter().cloned().collect();
        let mut out = Vec::with_capacity(chosen.len());
        for t in chosen {
            let revoked = match self {
                Self::Sqlite(s) => s.revoke_token(&t.hash, now).await?,
                Self::Postgres(s) => s.revoke_token(&t.hash, now).await?,
            };
            out.push((t, revoked));
        }
        let after = self.tokens().await?;
        Ok(out
            .into_iter()
            .map(|(t, revoked)| {
                let now = after.iter().find(|a| a.hash == t.hash).cloned();
                (now.unwrap_or(t), revoked)
            })
            .collect())
    }

    /// The account of a bearer token (`None` for an unknown or revoked
    /// one).
    pub async fn account(&self, token: &str) -> Result<Option<Account>, StoreError> {
        let hash = token_hash(token);
        match self {
            Self::Sqlite(s) => s.account(&hash).await,
            Self::Postgres(s) => s.account(&hash).await,
        }
    }

    /// Makes a new calendar feed token for `user` (replacing theirs: the old
    /// one stops working at once) and returns it, shown once and stored as
    /// its BLAKE3 hash; `None` when `user` has no valid API token (a feed
    /// token belongs to an account, and ends with it).
    pub async fn rotate_feed_token(
        &self,
        user: &str,
        now: Timestamp,
    ) -> anyhow::Result<Option<String>> {
        let token = new_token_with(FEED_TOKEN_PREFIX)?;
        let hash = token_hash(&token);
        let made = match self {
            Self::Sqlite(s) => s.set_feed_token(&hash, user, now).await?,
            Self::Postgres(s) => s.set_feed_token(&hash, user, now).await?,
        };
        Ok(made.then_some(token))
    }

    /// Removes `user`'s feed token; whether they had one.
    pub async fn revoke_feed_token(&self, user: &str) -> Result<bool, StoreError> {
        match self {
            Self::Sqlite(s) => s.revoke_feed_token(user).await,
            Self::Postgres(s) => s.revoke_feed_token(user).await,
        }
    }

    /// The user of a calendar feed token (`None` for an unknown one, or one
    /// whose user has no valid API token left: revoking a user's API tokens
    /// ends their feed too). It grants reading feeds, nothing else.
    pub async fn feed_user(&self, token: &str) -> Result<Option<String>, StoreError> {
        let hash = token_hash(token);
        match self {
            Self::Sqlite(s) => s.feed_user(&hash).await,
            Self::Postgres(s) => s.feed_user(&hash).await,
        }
    }

    /// The user and role of a bearer token.
    pub async fn authenticate(&self, token: &str) -> Result<Option<Actor>, StoreError> {
        Ok(self.account(token).await?.map(|a| a.actor))
    }

    /// Books or holds, exactly once per idempotency key.
    pub async fn book(&self, req: &BookRequest<'_>) -> Result<Reply, StoreError> {
        let (resource, slot) = match validate(req) {
            Ok(v) => v,
            Err(e) => return Ok(Reply::error(e)),
        };
        match self {
            Self::Sqlite(s) => s.book(req, &resource, &slot).await,
            Self::Postgres(s) => s.book(req, &resource, &slot).await,
        }
    }

    /// Applies a decided change to booking `id` in one transaction, with
    /// its audit event; the database has the last word on overlaps.
    pub(crate) async fn modify(
        &self,
        id: i64,
        actor: &Actor,
        now: Timestamp,
        decide: &Decide<'_>,
    ) -> Result<Reply, StoreError> {
        match self {
            Self::Sqlite(s) => s.modify(id, actor, now, decide).await,
            Self::Postgres(s) => s.modify(id, actor, now, decide).await,
        }
    }

    /// Confirms, releases or cancels booking `id`.
    pub async fn change(
        &self,
        id: i64,
        op: Op,
        actor: &Actor,
        now: Timestamp,
    ) -> Result<Reply, StoreError> {
        self.modify(id, actor, now, &decide_op(op, actor, now))
            .await
    }

    /// Moves the end of booking `id` to `new_end`, up to the next booking of
    /// a conflicting resource (409 `extend_conflict` naming it otherwise).
    pub async fn extend(
        &self,
        id: i64,
        new_end: Timestamp,
        account: &Account,
        policy: &Policy,
        inventory: &Inventory,
        now: Timestamp,
    ) -> Result<Reply, StoreError> {
        let decide = decide_extend(
            new_end,
            &account.actor,
            account.zone.as_deref(),
            policy,
            inventory,
            now,
        );
        self.modify(id, &account.actor, now, &decide).await
    }

    /// An admin preempts booking `id` with `notice` for its owner.
    pub async fn preempt(
        &self,
        id: i64,
        notice: &str,
        actor: &Actor,
        now: Timestamp,
    ) -> Result<Reply, StoreError> {
        if let Err(e) = check_preempt(notice, actor) {
            return Ok(Reply::error(e));
        }
        self.modify(id, actor, now, &decide_preempt(notice, actor, now))
            .await
    }

    /// An approver approves booking `id`, which was waiting for approval;
    /// their own only when `allow_self` ([`Policy::allow_self_approval`]).
    pub async fn approve(
        &self,
        id: i64,
        actor: &Actor,
        now: Timestamp,
        allow_self: bool,
    ) -> Result<Reply, StoreError> {
        self.modify(id, actor, now, &decide_approve(actor, now, allow_self))
            .await
    }

    /// An approver or admin declines booking `id`, which was waiting for
    /// approval, with a reason for its owner. As for a preemption, who and
    /// why are checked before which: `not_approver` (403), then the reason
    /// ([`DeclineBooking::reason`]: 422 `reason_required` or
    /// `reason_too_long`), then the booking (404, 409 `not_pending`).
    pub async fn decline(
        &self,
        id: i64,
        body: &DeclineBooking,
        actor: &Actor,
        now: Timestamp,
    ) -> Result<Reply, StoreError> {
        let reason = match check_decline(body, actor) {
            Ok(r) => r,
            Err(e) => return Ok(Reply::error(e)),
        };
        self.modify(id, actor, now, &decide_decline(reason, actor, now))
            .await
    }

    /// The audit events of booking `id`, oldest first; `None` when there is
    /// no such booking.
    pub async fn audit(&self, id: i64) -> Result<Option<Vec<AuditEvent>>, StoreError> {
        match self {
            Self::Sqlite(s) => s.audit_of(id).await,
            Self::Postgres(s) => s.audit_of(id).await,
        }
    }

    /// Marks every hold whose time ran out at `now` as expired, audited as
    /// `system`; returns their ids. (They stopped blocking at expiry
    /// already: this makes it visible.)
    pub async fn expire_holds(&self, now: Timestamp) -> Result<Vec<i64>, StoreError> {
        match self {
            Self::Sqlite(s) => s.expire_holds(now).await,
            Self::Postgres(s) => s.expire_holds(now).await,
        }
    }

    /// Every booking of `user` (any status), by start.
    pub async fn of_owner(&self, user: &str) -> Result<Vec<Booking>, StoreError> {
        let rows = match self {
            Self::Sqlite(s) => s.of_owner(user).await?,
            Self::Postgres(s) => s.of_owner(user).await?,
        };
        rows.into_iter().map(BookingRow::into_booking).collect()
    }

    /// [`Store::list`] with each booking's approval state.
    pub async fn list_stored(
        &self,
        resource: Option<&ResourceId>,
        from: Option<Timestamp>,
        to: Option<Timestamp>,
    ) -> Result<Vec<(Booking, Option<Approval>)>, StoreError> {
        let from = from.map_or(i64::MIN, |t| t.as_microsecond());
        let to = to.map_or(i64::MAX, |t| t.as_microsecond());
        let rows = match self {
            Self::Sqlite(s) => s.list(resource, from, to).await?,
            Self::Postgres(s) => s.list(resource, from, to).await?,
        };
        rows.into_iter().map(BookingRow::into_stored).collect()
    }

    /// Bookings (any status) on resources conflicting with `resource` (all
    /// when `None`) overlapping `[from, to)`, by start.
    pub async fn list(
        &self,
        resource: Option<&ResourceId>,
        from: Option<Timestamp>,
        to: Option<Timestamp>,
    ) -> Result<Vec<Booking>, StoreError> {
        let from = from.map_or(i64::MIN, |t| t.as_microsecond());
        let to = to.map_or(i64::MAX, |t| t.as_microsecond());
        let rows = match self {
            Self::Sqlite(s) => s.list(resource, from, to).await?,
            Self::Postgres(s) => s.list(resource, from, to).await?,
        };
        rows.into_iter().map(BookingRow::into_booking).collect()
    }
}
