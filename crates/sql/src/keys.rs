//! Access keys (9.3): stored as digests only; revocation at statement time.

use mqlite_contract::{AccessKey, Error, Result};

use crate::exec::{Row, SqlExec, Value, exists};

/// Whether an id is taken.
pub const KEY_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM mqlite_access_keys WHERE id = :id)";

/// A new key: the digest of its token, never the token.
pub const KEY_INSERT: &str = "INSERT INTO mqlite_access_keys
       (id, name, digest, permissions, created_at, expires_at, revoked_at)
VALUES (:id, :name, :digest, :permissions, :created_at, :expires_at, 0)";

/// Keys by id after `:after`, at most `:limit`.
pub const KEY_LIST: &str =
    "SELECT id, name, digest, permissions, created_at, expires_at, revoked_at
  FROM mqlite_access_keys WHERE id > :after ORDER BY id LIMIT :limit";

/// Revocation keeps the first time: a second revoke changes nothing.
pub const KEY_REVOKE: &str =
    "UPDATE mqlite_access_keys SET revoked_at = :now WHERE id = :id AND revoked_at = 0";

/// One key by id.
pub const KEY_BY_ID: &str =
    "SELECT id, name, digest, permissions, created_at, expires_at, revoked_at
  FROM mqlite_access_keys WHERE id = :id";

/// One key by the digest of its token (the unique index on digest).
pub const KEY_BY_DIGEST: &str =
    "SELECT id, name, digest, permissions, created_at, expires_at, revoked_at
  FROM mqlite_access_keys WHERE digest = :digest";

fn key(r: &Row) -> Result<AccessKey> {
    Ok(AccessKey {
        id: r.text(0)?,
        name: r.text(1)?,
        digest: r.text(2)?,
        permissions: AccessKey::parse_permissions(&r.text(3)?)?,
        created_at_ms: r.int(4)?,
        expires_at_ms: r.int(5)?,
        revoked_at_ms: r.int(6)?,
    })
}

/// Stores a new key; a taken id is `KeyConflict`.
pub async fn create_key<X: SqlExec>(x: &mut X, k: &AccessKey) -> Result<()> {
    if exists(x, KEY_EXISTS, &[(":id", Value::from(k.id.as_str()))]).await? {
        return Err(Error::KeyConflict { id: k.id.clone() });
    }
    x.execute(
        KEY_INSERT,
        &[
            (":id", Value::from(k.id.as_str())),
            (":name", Value::from(k.name.as_str())),
            (":digest", Value::from(k.digest.as_str())),
            (":permissions", Value::from(k.permissions_text())),
            (":created_at", Value::from(k.created_at_ms)),
            (":expires_at", Value::from(k.expires_at_ms)),
        ],
    )
    .await?;
    Ok(())
}

/// Keys by id after `after`, at most `limit`.
pub async fn list_keys<X: SqlExec>(
    x: &mut X,
    after: Option<&str>,
    limit: u32,
) -> Result<Vec<AccessKey>> {
    x.query(
        KEY_LIST,
        &[
            (":after", Value::from(after.unwrap_or(""))),
            (":limit", Value::from(i64::from(limit))),
        ],
    )
    .await?
    .iter()
    .map(key)
    .collect()
}

/// Revokes a key at `now` (idempotent); false if no such key.
pub async fn revoke_key<X: SqlExec>(x: &mut X, now: i64, id: &str) -> Result<bool> {
    x.execute(
        KEY_REVOKE,
        &[(":now", Value::from(now)), (":id", Value::from(id))],
    )
    .await?;
    Ok(!x
        .query(KEY_BY_ID, &[(":id", Value::from(id))])
        .await?
        .is_empty())
}

/// A key by the digest of its token.
pub async fn key_by_digest<X: SqlExec>(x: &mut X, digest: &str) -> Result<Option<AccessKey>> {
    x.query(KEY_BY_DIGEST, &[(":digest", Value::from(digest))])
        .await?
        .first()
        .map(key)
        .transpose()
}
