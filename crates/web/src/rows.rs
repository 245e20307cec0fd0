//! Rows of the two databases and the domain values they hold: a booking row and its status and
//! approval columns, audit rows, stored roles, the sweep's system actor. Both stores select the same
//! column names, so one mapping serves both; the stored strings are those of the first schema (the
//! approval column keeps `pending` for a declined booking, and a decline is stored as `cancelled`
//! with `declined_by` set).

use jiff::Timestamp;
use longhaul_testbed::booking::{Actor, Approval, AuditEvent, Booking, BookingId, Role, Status};
use longhaul_testbed::resource::ResourceId;
use longhaul_testbed::time::Slot;

use crate::reply::StoreError;

/// A booking row in the column names both stores select (`id`, `resource`,
/// `owner`, `start_us`, `end_us`, `status`, `hold_until_us`,
/// `status_at_us`, `preempted_by`, `notice`, `note`, `created_at_us`,
/// `version`, `approval`, `declined_by`).
#[derive(Debug, Clone)]
pub(crate) struct BookingRow {
    pub(crate) id: i64,
    pub(crate) resource: String,
    pub(crate) owner: String,
    pub(crate) start_us: i64,
    pub(crate) end_us: i64,
    pub(crate) status: String,
    pub(crate) hold_until_us: Option<i64>,
    pub(crate) status_at_us: Option<i64>,
    pub(crate) preempted_by: Option<String>,
    pub(crate) notice: Option<String>,
    pub(crate) note: String,
    pub(crate) created_at_us: i64,
    pub(crate) version: i32,
    pub(crate) approval: Option<String>,
    pub(crate) declined_by: Option<String>,
}

pub(crate) fn ts(us: i64) -> Result<Timestamp, StoreError> {
    Timestamp::from_microsecond(us).map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl BookingRow {
    /// The booking and its approval state (`pending`, `approved`,
    /// `declined` or none).
    pub(crate) fn into_stored(mut self) -> Result<(Booking, Option<Approval>), StoreError> {
        let approval = match self.approval.take() {
            Some(s) => Some(Approval::parse(&s).ok_or_else(|| {
                StoreError::Corrupt(format!("booking {}: approval {s:?}", self.id))
            })?),
            None => None,
        };
        let b = self.into_booking()?;
        let approval = match b.status {
            Status::Declined { .. } => Some(Approval::Declined),
            _ => approval,
        };
        Ok((b, approval))
    }

    pub(crate) fn into_booking(self) -> Result<Booking, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("booking {}: {what}", self.id));
        let at = || -> Result<Timestamp, StoreError> {
            ts(self.status_at_us.ok_or_else(|| corrupt("no status time"))?)
        };
        let status = match self.status.as_str() {
            "held" => Status::Held {
                until: ts(self
                    .hold_until_us
                    .ok_or_else(|| corrupt("held with no hold_until"))?)?,
            },
            "confirmed" => Status::Confirmed,
            "released" => Status::Released { at: at()? },
            "cancelled" => match &self.declined_by {
                Some(by) => Status::Declined {
                    at: at()?,
                    by: by.clone(),
                    reason: self.notice.clone().unwrap_or_default(),
                },
                None => Status::Cancelled { at: at()? },
            },
            "expired" => Status::Expired { at: at()? },
            "preempted" => Status::Preempted {
                at: at()?,
                by: self.preempted_by.clone().unwrap_or_default(),
                notice: self.notice.clone().unwrap_or_default(),
            },
            other => return Err(corrupt(&format!("status {other:?}"))),
        };
        Ok(Booking {
            id: BookingId(u64::try_from(self.id).map_err(|_| corrupt("negative id"))?),
            resource: ResourceId::parse(&self.resource).map_err(|e| corrupt(&e.to_string()))?,
            owner: self.owner,
            slot: Slot::new(ts(self.start_us)?, ts(self.end_us)?)
                .map_err(|e| corrupt(&e.to_string()))?,
            status,
            note: self.note,
            created_at: ts(self.created_at_us)?,
            version: u32::try_from(self.version).unwrap_or(0),
        })
    }
}

/// The columns of a status, for an UPDATE: (status, hold_until_us,
/// status_at_us).
pub(crate) fn status_columns(s: &Status) -> (&'static str, Option<i64>, Option<i64>) {
    match s {
        Status::Held { until } => ("held", Some(until.as_microsecond()), None),
        Status::Confirmed => ("confirmed", None, None),
        Status::Released { at } => ("released", None, Some(at.as_microsecond())),
        Status::Cancelled { at } => ("cancelled", None, Some(at.as_microsecond())),
        Status::Expired { at } => ("expired", None, Some(at.as_microsecond())),
        Status::Preempted { at, .. } => ("preempted", None, Some(at.as_microsecond())),
        // Stored as cancelled with `declined_by` set (migration 0003: the
        // status CHECK of SQLite cannot change in place).
        Status::Declined { at, .. } => ("cancelled", None, Some(at.as_microsecond())),
    }
}

/// The text columns of a status, for an UPDATE: (preempted_by, notice,
/// declined_by). A decline's reason is the notice its owner reads.
pub(crate) fn status_texts(s: &Status) -> (Option<&str>, Option<&str>, Option<&str>) {
    match s {
        Status::Preempted { by, notice, .. } => (Some(by), Some(notice), None),
        Status::Declined { by, reason, .. } => (None, Some(reason), Some(by)),
        _ => (None, None, None),
    }
}

/// The approval column's value for an approval state: a declined booking
/// keeps `pending` there (it was never approved; `declined_by` says it was
/// declined).
pub(crate) fn stored_approval(approval: Option<Approval>) -> Option<&'static str> {
    match approval {
        Some(Approval::Declined) => Some(Approval::Pending.as_str()),
        other => other.map(Approval::as_str),
    }
}

/// The system actor of the hold-expiry sweep.
pub(crate) fn system() -> Actor {
    Actor {
        user: "system".into(),
        role: Role::Admin,
    }
}

/// An audit row, as both stores select it (`seq`, `at_us`, `actor`,
/// `role`, `action`, `booking`, `before` and `after` as JSON text).
pub(crate) fn audit_event<'r, R: sqlx::Row>(r: &'r R) -> Result<AuditEvent, StoreError>
where
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    &'r str: sqlx::ColumnIndex<R>,
{
    let seq: i64 = r.try_get("seq")?;
    let at_us: i64 = r.try_get("at_us")?;
    let actor: String = r.try_get("actor")?;
    let role: String = r.try_get("role")?;
    let action: String = r.try_get("action")?;
    let booking: i64 = r.try_get("booking")?;
    let before: Option<String> = r.try_get("before")?;
    let after: String = r.try_get("after")?;
    let (role, action, before, after) = (&role, &action, before.as_deref(), &after);
    let corrupt = |what: String| StoreError::Corrupt(format!("audit {seq}: {what}"));
    Ok(AuditEvent {
        seq: u64::try_from(seq).map_err(|_| corrupt("negative seq".into()))?,
        at: ts(at_us)?,
        actor,
        role: parse_role(role)?,
        action: serde_json::from_value(serde_json::Value::String(action.to_owned()))
            .map_err(|e| corrupt(e.to_string()))?,
        booking: BookingId(u64::try_from(booking).map_err(|_| corrupt("negative id".into()))?),
        before: before
            .map(serde_json::from_str::<Booking>)
            .transpose()
            .map_err(|e| corrupt(e.to_string()))?,
        after: serde_json::from_str(after).map_err(|e| corrupt(e.to_string()))?,
    })
}

/// A token's role as stored.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Approver => "approver",
        Role::Admin => "admin",
    }
}

pub(crate) fn parse_role(s: &str) -> Result<Role, StoreError> {
    match s {
        "user" => Ok(Role::User),
        "approver" => Ok(Role::Approver),
        "admin" => Ok(Role::Admin),
        other => Err(StoreError::Corrupt(format!("role {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(h: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + h * 3600).unwrap()
    }

    fn pending(now: Timestamp) -> Booking {
        Booking {
            id: BookingId(7),
            resource: ResourceId::parse("cern").unwrap(),
            owner: "alice".into(),
            slot: Slot::new(t(24 * 60), t(24 * 60 + 2)).unwrap(),
            status: Status::Held { until: t(24 * 60) },
            note: String::new(),
            created_at: now,
            version: 1,
        }
    }

    #[test]
    fn a_declined_booking_is_stored_as_cancelled_and_read_back() {
        let now = t(0);
        let mut b = pending(now);
        b.status = Status::Declined {
            at: now,
            by: "carol".into(),
            reason: "kept for the LSR run".into(),
        };
        let (name, hold, at) = status_columns(&b.status);
        let (preempted_by, notice, declined_by) = status_texts(&b.status);
        assert_eq!((name, hold, preempted_by), ("cancelled", None, None));
        assert_eq!(stored_approval(Some(Approval::Declined)), Some("pending"));
        let row = BookingRow {
            id: 7,
            resource: "cern".into(),
            owner: "alice".into(),
            start_us: b.slot.start().as_microsecond(),
            end_us: b.slot.end().as_microsecond(),
            status: name.into(),
            hold_until_us: hold,
            status_at_us: at,
            preempted_by: None,
            notice: notice.map(str::to_owned),
            note: String::new(),
            created_at_us: now.as_microsecond(),
            version: 1,
            approval: stored_approval(Some(Approval::Declined)).map(str::to_owned),
            declined_by: declined_by.map(str::to_owned),
        };
        let (back, approval) = row.clone().into_stored().unwrap();
        assert_eq!(
            (back.status, approval),
            (b.status, Some(Approval::Declined))
        );
        // Without declined_by it is an ordinary cancellation, still pending in the column.
        let row = BookingRow {
            declined_by: None,
            ..row
        };
        let (back, approval) = row.into_stored().unwrap();
        assert_eq!(back.status, Status::Cancelled { at: now });
        assert_eq!(approval, Some(Approval::Pending));
    }
}
