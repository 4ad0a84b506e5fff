//! Section 9 at the store boundary: access keys are kept as digests and revoked at once
//! (9.3). The HTTP side (401, 403) comes with the broker.

use mqlite_contract::{Error, Permission};

use crate::harness::{Access, Ctx, TckResult};

/// 9.3 A key's token is shown once and stored only as its SHA-256 digest; the token
/// authenticates with its permissions until revoked, and not an instant after; a
/// repeated id is KeyConflict and changes nothing; revocation is idempotent.
pub async fn p9_3_access_keys_are_digests_and_revoke_at_once<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine().await?;
    let id = "0123456789abcdef0123456789abcdef";
    let created = mq
        .create_key(
            Some(id),
            "worker",
            &[Permission::Listen, Permission::Send],
            0,
        )
        .await?;
    assert!(created.token.starts_with("mqk_") && created.token.len() == 4 + 64);
    assert_ne!(created.key.digest, created.token, "only a digest is kept");
    let listed = mq.list_keys(None, 100).await?;
    assert_eq!(listed, vec![created.key.clone()]);
    assert!(
        !format!("{listed:?}").contains(&created.token[4..]),
        "no stored field holds the token"
    );
    let key = mq
        .authenticate(&created.token)
        .await?
        .ok_or("the fresh token authenticates")?;
    assert!(key.allows(Permission::Send) && key.allows(Permission::Listen));
    assert!(!key.allows(Permission::Manage));
    assert!(mq.authenticate("mqk_wrong").await?.is_none());

    match mq
        .create_key(Some(id), "again", &[Permission::Manage], 0)
        .await
    {
        Err(Error::KeyConflict { id: got }) => assert_eq!(got, id),
        other => return Err(format!("expected KeyConflict, got {other:?}").into()),
    }
    assert_eq!(mq.list_keys(None, 100).await?, vec![created.key.clone()]);

    assert!(mq.revoke_key(id).await?);
    assert!(
        mq.authenticate(&created.token).await?.is_none(),
        "revoked at once"
    );
    let revoked_at = mq.list_keys(None, 100).await?[0].revoked_at_ms;
    ctx.clock.advance(5_000);
    assert!(mq.revoke_key(id).await?, "revoking again is fine");
    assert_eq!(mq.list_keys(None, 100).await?[0].revoked_at_ms, revoked_at);
    assert!(!mq.revoke_key("ffffffffffffffffffffffffffffffff").await?);

    // Expiry, and paging by id.
    let expiring = mq
        .create_key(
            None,
            "short",
            &[Permission::Manage],
            ctx.clock.now() + 1_000,
        )
        .await?;
    assert!(mq.authenticate(&expiring.token).await?.is_some());
    ctx.clock.advance(1_000);
    assert!(mq.authenticate(&expiring.token).await?.is_none(), "expired");
    let first = mq.list_keys(None, 1).await?;
    let rest = mq.list_keys(Some(&first[0].id), 100).await?;
    assert_eq!(first.len() + rest.len(), 2);
    assert!(matches!(
        mq.create_key(Some("short"), "x", &[Permission::Send], 0)
            .await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        mq.create_key(None, "x", &[], 0).await,
        Err(Error::InvalidArgument(_))
    ));
    // A key is never born expired.
    assert!(matches!(
        mq.create_key(None, "x", &[Permission::Send], ctx.clock.now())
            .await,
        Err(Error::InvalidArgument(_))
    ));
    Ok(())
}
