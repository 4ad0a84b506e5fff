//! Access keys: crates/sql's `keys`.

use redb::ReadableTable;

use mqlite_contract::{AccessKey, Error, Result};

use crate::enc::{decode_key, encode_key};
use crate::{db, tables::Tables};

pub(crate) fn create_key(t: &mut Tables<'_>, k: &AccessKey) -> Result<()> {
    if t.keys.get(k.id.as_str()).map_err(db)?.is_some() {
        return Err(Error::KeyConflict { id: k.id.clone() });
    }
    t.keys
        .insert(k.id.as_str(), encode_key(k).as_slice())
        .map_err(db)?;
    t.keys_by_digest
        .insert(k.digest.as_str(), k.id.as_str())
        .map_err(db)?;
    Ok(())
}

pub(crate) fn list_keys(t: &Tables<'_>, after: Option<&str>, limit: u32) -> Result<Vec<AccessKey>> {
    let mut out = Vec::new();
    let range = match after {
        Some(a) => t
            .keys
            .range::<&str>((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded)),
        None => t.keys.iter(),
    }
    .map_err(db)?;
    for e in range {
        if out.len() >= limit as usize {
            break;
        }
        let (k, v) = e.map_err(db)?;
        out.push(decode_key(k.value(), v.value())?);
    }
    Ok(out)
}

pub(crate) fn revoke_key(t: &mut Tables<'_>, now: i64, id: &str) -> Result<bool> {
    let key = match t.keys.get(id).map_err(db)? {
        Some(v) => decode_key(id, v.value())?,
        None => return Ok(false),
    };
    if key.revoked_at_ms == 0 {
        let k = AccessKey {
            revoked_at_ms: now,
            ..key
        };
        t.keys.insert(id, encode_key(&k).as_slice()).map_err(db)?;
    }
    Ok(true)
}

pub(crate) fn key_by_digest(t: &Tables<'_>, digest: &str) -> Result<Option<AccessKey>> {
    let Some(id) = t
        .keys_by_digest
        .get(digest)
        .map_err(db)?
        .map(|v| v.value().to_owned())
    else {
        return Ok(None);
    };
    match t.keys.get(id.as_str()).map_err(db)? {
        Some(v) => decode_key(&id, v.value()).map(Some),
        None => Ok(None),
    }
}
