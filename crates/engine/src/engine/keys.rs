//! Access keys: create, list, revoke, and authenticate a token.

use mqlite_contract::access::{AccessKey, CreatedKey, Permission};
use mqlite_contract::error::{Error, Result};
use mqlite_contract::store::{Store, StoreStatus};

use super::{Engine, MAX_KEY_PAGE, validate_text};

impl<S: Store> Engine<S> {
    /// Creates an access key with these permissions and returns its token, shown this
    /// once: only the token's SHA-256 digest is stored (9.3). `id` is 32 lowercase hex
    /// characters (None: a random one); a taken id is `KeyConflict`.
    pub async fn create_key(
        &self,
        id: Option<&str>,
        name: &str,
        permissions: &[Permission],
        expires_at_ms: i64,
    ) -> Result<CreatedKey> {
        let id = match id {
            Some(id) => {
                if !is_key_id(id) {
                    return Err(Error::invalid(
                        "an access key id is 32 lowercase hexadecimal characters",
                    ));
                }
                id.to_owned()
            }
            None => mqlite_contract::access::random_hex(16),
        };
        validate_text("name", name)?;
        if permissions.is_empty() {
            return Err(Error::invalid(
                "an access key needs at least one permission",
            ));
        }
        if expires_at_ms < 0 {
            return Err(Error::invalid("expires_at_ms must be >= 0"));
        }
        let now = self.inner.clock.now_ms();
        if expires_at_ms != 0 && expires_at_ms <= now {
            return Err(Error::invalid(format!(
                "expires_at_ms {expires_at_ms} is not in the future (now is {now}): a key \
                 would be born expired; give a later time, or 0 for no expiry"
            )));
        }
        let mut permissions = permissions.to_vec();
        permissions.sort();
        permissions.dedup();
        let token = mqlite_contract::access::mint_token();
        let key = AccessKey {
            id,
            name: name.to_owned(),
            digest: mqlite_contract::access::token_digest(&token),
            permissions,
            created_at_ms: now,
            expires_at_ms,
            revoked_at_ms: 0,
        };
        let _g = self.admit().await?;
        self.inner.store.create_key(key.clone()).await?;
        Ok(CreatedKey { key, token })
    }

    /// Access keys by id, after `after_id`, at most `limit` (1..=[`MAX_KEY_PAGE`]).
    pub async fn list_keys(&self, after_id: Option<&str>, limit: u32) -> Result<Vec<AccessKey>> {
        if limit == 0 || limit > MAX_KEY_PAGE {
            return Err(Error::invalid(format!("limit must be 1..={MAX_KEY_PAGE}")));
        }
        let _g = self.admit().await?;
        self.inner
            .store
            .list_keys(after_id.map(str::to_owned), limit)
            .await
    }

    /// Revokes an access key at once (9.3); idempotent. False if no such key.
    #[tracing::instrument(level = "debug", skip_all, fields(id = id), err(level = "debug"))]
    pub async fn revoke_key(&self, id: &str) -> Result<bool> {
        validate_text("id", id)?;
        let _g = self.admit().await?;
        self.inner.store.revoke_key(id.to_owned()).await
    }

    /// The live key a bearer token names: None for an unknown, revoked or expired one.
    pub async fn authenticate(&self, token: &str) -> Result<Option<AccessKey>> {
        let digest = mqlite_contract::access::token_digest(token);
        let _g = self.admit().await?;
        let key = self.inner.store.key_by_digest(digest).await?;
        let now = self.inner.clock.now_ms();
        Ok(key.filter(|k| k.is_live(now)))
    }

    /// The access key of this id, revoked and expired ones included (None: no such key,
    /// or not an id: ids are 32 lowercase hex characters). One page of [`Self::list_keys`]
    /// after the id just below it, so every store answers it with one index seek.
    pub async fn key(&self, id: &str) -> Result<Option<AccessKey>> {
        if !is_key_id(id) {
            return Ok(None);
        }
        let n = u128::from_str_radix(id, 16).map_err(|_| Error::invalid("an access key id"))?;
        let before = n.checked_sub(1).map(|p| format!("{p:032x}"));
        let _g = self.admit().await?;
        let page = self.inner.store.list_keys(before, 1).await?;
        Ok(page.into_iter().next().filter(|k| k.id == id))
    }

    /// What the store says about itself: backend, location, schema token, counts.
    pub async fn status(&self) -> Result<StoreStatus> {
        let _g = self.admit().await?;
        self.inner.store.status().await
    }
}

/// Whether `id` has the form of an access key id: 32 lowercase hex characters.
fn is_key_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
