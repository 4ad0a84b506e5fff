//! The schema on first use, and the owner lease kept in the data: `mqlite_meta` rows
//! `owner` (this engine's random id), `owner_epoch` (raised by each takeover) and
//! `owner_until` (epoch ms). One owner writes; a deposed one finds out at its next
//! transaction's epoch check.

use std::sync::Weak;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use mqlite_contract::{Error, LockHolder, Result, SharedClock, millis};
use mqlite_sql::schema::{SCHEMA, SCHEMA_TOKEN, SELECT_TOKEN};

use crate::exec::{NO_PARAMS, Sent, named, rows};
use crate::{Inner, db};

/// Every object name of the database.
const NAMES: &str =
    "SELECT name FROM sqlite_master WHERE type IN ('table', 'index', 'view', 'trigger')";

/// The lease's rows.
const READ_LEASE: &str = "SELECT key, value FROM mqlite_meta
 WHERE key IN ('owner', 'owner_epoch', 'owner_until')";

/// Writes the lease's rows (a takeover or a first owner).
const WRITE_LEASE: &str = "INSERT INTO mqlite_meta (key, value)
 VALUES ('owner', :owner), ('owner_epoch', :epoch), ('owner_until', :until)
 ON CONFLICT (key) DO UPDATE SET value = excluded.value";

/// The epoch now in force.
pub(crate) const READ_EPOCH: &str = "SELECT value FROM mqlite_meta WHERE key = 'owner_epoch'";

/// What the server answers when [`Lease::guard`] refused a transaction.
pub(crate) const GUARD_REFUSED: &str = "NOT NULL constraint failed: mqlite_meta.value";

/// Moves the expiry, only while `:epoch` is still in force.
const MOVE_UNTIL: &str = "UPDATE mqlite_meta SET value = :until
 WHERE key = 'owner_until'
   AND EXISTS (SELECT 1 FROM mqlite_meta WHERE key = 'owner_epoch' AND value = :epoch)";

/// Creates the schema on an empty database, or checks the guard token of an existing
/// one (10.2). A database holding `mqlite_` objects without the token is refused.
pub(crate) async fn ensure_schema(conn: &libsql::Connection, location: &str) -> Result<()> {
    // A read first, without the write lock: an owner's transaction may hold it, and
    // waiting for it would make sqld steal it from that owner after 5 s.
    let existing = rows(conn, NAMES, NO_PARAMS).await?;
    if existing
        .iter()
        .any(|r| r.text(0).is_ok_and(|n| n == "mqlite_meta"))
    {
        let token = rows(conn, SELECT_TOKEN, NO_PARAMS)
            .await?
            .first()
            .map(|r| r.text(0))
            .transpose()?;
        return match token {
            Some(t) if t == SCHEMA_TOKEN => Ok(()),
            other => Err(Error::SchemaVersionMismatch {
                found: other.unwrap_or_default(),
                expected: SCHEMA_TOKEN,
            }),
        };
    }
    let tx = conn
        .transaction_with_behavior(libsql::TransactionBehavior::Immediate)
        .await
        .map_err(db)?;
    let names: Vec<String> = rows(&tx, NAMES, NO_PARAMS)
        .await?
        .iter()
        .map(|r| r.text(0))
        .collect::<Result<_>>()?;
    if names.iter().any(|n| n == "mqlite_meta") {
        let token = rows(&tx, SELECT_TOKEN, NO_PARAMS)
            .await?
            .first()
            .map(|r| r.text(0))
            .transpose()?;
        let _ = tx.rollback().await;
        return match token {
            Some(t) if t == SCHEMA_TOKEN => Ok(()),
            other => Err(Error::SchemaVersionMismatch {
                found: other.unwrap_or_default(),
                expected: SCHEMA_TOKEN,
            }),
        };
    }
    let taken: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| n.starts_with("mqlite_"))
        .collect();
    if !taken.is_empty() {
        let _ = tx.rollback().await;
        return Err(Error::NotADatabase {
            path: location.to_owned(),
            detail: format!(
                "it holds objects named like mqlite's ({}) but no mqlite schema token",
                taken.join(", ")
            ),
        });
    }
    for ddl in SCHEMA {
        tx.execute(ddl, ()).await.map_err(db)?;
    }
    tx.execute(
        mqlite_sql::schema::INSERT_TOKEN,
        named(&[(":token", SCHEMA_TOKEN.into())]),
    )
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)
}

/// This engine's hold on the database.
pub(crate) struct Lease {
    epoch: AtomicU64,
    length_ms: i64,
    location: String,
    deposed: AtomicBool,
}

fn lease_fields(rows: &[mqlite_sql::Row]) -> Result<(Option<String>, u64, i64)> {
    let (mut owner, mut epoch, mut until) = (None, 0u64, 0i64);
    for r in rows {
        let value = r.text(1)?;
        match r.text(0)?.as_str() {
            "owner" => owner = Some(value),
            "owner_epoch" => epoch = value.parse().unwrap_or(0),
            "owner_until" => until = value.parse().unwrap_or(0),
            _ => {}
        }
    }
    Ok((owner, epoch, until))
}

impl Lease {
    /// Takes the lease: `DbLocked` while another owner's is live; otherwise this engine
    /// becomes the owner with the next epoch.
    pub(crate) async fn take(
        conn: &libsql::Connection,
        clock: &SharedClock,
        length: Duration,
        location: &str,
    ) -> Result<Lease> {
        let id = mqlite_contract::access::random_hex(16);
        let length_ms = millis(length);
        // A read first, without the write lock: a live owner's transaction may hold it.
        let found = rows(conn, READ_LEASE, NO_PARAMS).await?;
        let (owner, _, until) = lease_fields(&found)?;
        if owner.is_some() && until > clock.now_ms() {
            return Err(Error::DbLocked {
                path: location.to_owned(),
                holder: LockHolder::AnotherOwner,
            });
        }
        let tx = conn
            .transaction_with_behavior(libsql::TransactionBehavior::Immediate)
            .await
            .map_err(db)?;
        let now = clock.now_ms();
        let found = rows(&tx, READ_LEASE, NO_PARAMS).await?;
        let (owner, epoch, until) = lease_fields(&found)?;
        if owner.is_some() && until > now {
            let _ = tx.rollback().await;
            return Err(Error::DbLocked {
                path: location.to_owned(),
                holder: LockHolder::AnotherOwner,
            });
        }
        let epoch = epoch + 1;
        tx.execute(
            WRITE_LEASE,
            named(&[
                (":owner", id.into()),
                (":epoch", epoch.to_string().into()),
                (":until", (now + length_ms).to_string().into()),
            ]),
        )
        .await
        .map_err(db)?;
        crate::commit(tx).await?;
        tracing::info!(location, epoch, "took the owner lease");
        Ok(Lease {
            epoch: AtomicU64::new(epoch),
            length_ms,
            location: location.to_owned(),
            deposed: AtomicBool::new(false),
        })
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// A statement that fails once another owner took over: it inserts a NULL value,
    /// which `mqlite_meta`'s NOT NULL refuses (before any other check), whenever the
    /// epoch in force is not this owner's. In a batch whose steps run only while the
    /// previous one succeeded, nothing after it runs and the transaction rolls back.
    pub(crate) fn guard(&self) -> String {
        format!(
            "INSERT INTO mqlite_meta (key, value) SELECT 'owner_epoch', NULL \
             WHERE NOT EXISTS (SELECT 1 FROM mqlite_meta \
             WHERE key = 'owner_epoch' AND value = '{}')",
            self.epoch()
        )
    }

    fn deposed(&self) -> Error {
        Error::Deposed {
            epoch: self.epoch(),
        }
    }

    /// The epoch check at the start of every transaction: `Deposed` once another owner
    /// took over, and the transaction changes nothing.
    pub(crate) async fn check(&self, tx: &libsql::Transaction, sent: &Sent) -> Result<()> {
        if self.deposed.load(Ordering::Acquire) {
            return Err(self.deposed());
        }
        sent.add();
        let found = rows(tx, READ_EPOCH, NO_PARAMS).await?;
        self.verify(&found)
    }

    /// `Deposed` once this owner knows it was deposed.
    pub(crate) fn still_owner(&self) -> Result<()> {
        if self.deposed.load(Ordering::Acquire) {
            Err(self.deposed())
        } else {
            Ok(())
        }
    }

    /// Judges the epoch read inside a transaction (`rows` of [`READ_EPOCH`]).
    pub(crate) fn verify(&self, found: &[mqlite_sql::Row]) -> Result<()> {
        let current = found
            .first()
            .map(|r| r.text(0))
            .transpose()?
            .and_then(|v| v.parse::<u64>().ok());
        if current == Some(self.epoch()) {
            Ok(())
        } else {
            self.deposed.store(true, Ordering::Release);
            tracing::warn!(location = %self.location, epoch = self.epoch(), ?current, "deposed");
            Err(self.deposed())
        }
    }

    /// Moves the expiry forward; false once another owner holds the database.
    async fn renew(&self, conn: &libsql::Connection, now: i64, sent: &Sent) -> Result<bool> {
        sent.add();
        let moved = conn
            .execute(
                MOVE_UNTIL,
                named(&[
                    (":until", (now + self.length_ms).to_string().into()),
                    (":epoch", self.epoch().to_string().into()),
                ]),
            )
            .await
            .map_err(db)?;
        if moved == 0 {
            self.deposed.store(true, Ordering::Release);
        }
        Ok(moved > 0)
    }

    /// Gives the lease up (close): the next opener takes over at once.
    pub(crate) async fn release(&self, conn: &libsql::Connection, sent: &Sent) {
        sent.add();
        let released = conn
            .execute(
                MOVE_UNTIL,
                named(&[
                    (":until", "0".into()),
                    (":epoch", self.epoch().to_string().into()),
                ]),
            )
            .await;
        if let Err(e) = released {
            tracing::warn!(location = %self.location, error = %e, "could not release the owner lease; it lapses on its own");
        }
    }
}

/// Renews the lease every third of its length, until the store
/// is dropped or closed or another owner takes over.
pub(crate) fn spawn_renewal(inner: Weak<Inner>) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    handle.spawn(async move {
        loop {
            // Real time paces the renewals; the store's clock dates the expiry. (A
            // test's manual clock must not see a sleeper it did not ask for.)
            let every = {
                let Some(i) = inner.upgrade() else { return };
                Duration::from_millis(u64::try_from(i.lease.length_ms / 3).unwrap_or(1).max(1))
            };
            tokio::time::sleep(every).await;
            let Some(i) = inner.upgrade() else { return };
            if i.closed.load(Ordering::Acquire) {
                return;
            }
            let mut conn = i.conn.lock().await;
            match i
                .lease
                .renew(conn.unparked().await, i.clock.now_ms(), &i.sent)
                .await
            {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(location = %i.location, "deposed: another owner took over");
                    return;
                }
                Err(e) => {
                    // The server is out of reach: the lease may lapse; the epoch check
                    // of the next transaction tells.
                    tracing::warn!(location = %i.location, error = %e, "lease renewal failed");
                }
            }
        }
    });
}
