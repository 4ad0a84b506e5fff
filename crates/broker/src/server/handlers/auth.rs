//! The AuthService's RPCs: access keys and who the caller is.

use super::*;

/// CreateKey: a new access key; its token is shown this once.
pub(super) async fn create_key(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: CreateKeyRequest = c.request()?;
    let permissions = r
        .permissions
        .iter()
        .map(|p| p.parse::<Permission>())
        .collect::<Result<Vec<_>, _>>()?;
    let id = (!r.id.is_empty()).then_some(r.id.as_str());
    let created = mq
        .create_key(id, &r.name, &permissions, r.expires_at_ms)
        .await?;
    tracing::info!(target: "mqlite::audit", id = %created.key.id, by = %c.principal, "access key created");
    let mut key = WireKey::from(created.key);
    key.token = created.token;
    if let Some(admin) = c.s.auth.admin_tokens().first() {
        key.sqs_secret_access_key = crate::sqs::key_secret(admin, &key.id);
    }
    ok(key)
}

/// ListKeys: access keys by id, a page at a time.
pub(super) async fn list_keys(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: ListKeysRequest = c.request()?;
    let limit = count("limit", r.limit.unwrap_or(100), MAX_KEY_PAGE)?;
    let keys = mq
        .list_keys(r.after_id.as_deref().filter(|a| !a.is_empty()), limit)
        .await?;
    let next_after_id = if keys.len() == limit as usize {
        keys.last().map(|k| k.id.clone()).unwrap_or_default()
    } else {
        String::new()
    };
    ok(ListKeysResponse {
        keys: keys.into_iter().map(WireKey::from).collect(),
        next_after_id,
    })
}

/// RevokeKey: an access key stops working.
pub(super) async fn revoke_key(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: RevokeKeyRequest = c.request()?;
    if !mq.revoke_key(&r.id).await? {
        return Err(Error::NotFound {
            kind: "access key",
            name: r.id,
        }
        .into());
    }
    tracing::info!(target: "mqlite::audit", id = %r.id, by = %c.principal, "access key revoked");
    ok(Empty {})
}

/// WhoAmI: the caller's identity and permissions.
pub(super) async fn who_am_i(c: Call<'_>) -> Result<Response, ApiError> {
    ok(c.principal.who())
}
