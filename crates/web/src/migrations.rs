//! The embedded schema migrations' runner: each store lists its SQL files (`migrations/sqlite`,
//! `migrations/postgres`) and runs them through one [`Migrator`] built here.

use std::borrow::Cow;

use sqlx::migrate::{Migration, MigrationType, Migrator};

/// A migrator over embedded SQL files, `(version, description, sql)`.
pub(crate) fn migrator(list: &[(i64, &'static str, &'static str)]) -> Migrator {
    Migrator {
        migrations: Cow::Owned(
            list.iter()
                .map(|&(v, d, sql)| {
                    Migration::new(
                        v,
                        Cow::Borrowed(d),
                        MigrationType::Simple,
                        Cow::Borrowed(sql),
                        false,
                    )
                })
                .collect(),
        ),
        ..Migrator::DEFAULT
    }
}
