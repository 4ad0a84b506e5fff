//! Access keys: runtime credentials with permissions, stored only as SHA-256 digests of
//! their tokens (promise 9.3). The engine checks a bearer token against them; the store keeps them.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// A fresh access token: `mqk_` and 64 hexadecimal characters (256 random bits).
pub fn mint_token() -> String {
    format!("mqk_{}", random_hex(32))
}

/// The digest a token is stored and looked up by (SHA-256, hexadecimal): the token
/// itself is never stored (9.3).
pub fn token_digest(token: &str) -> String {
    crate::digest::sha256_hex(token.as_bytes())
}

/// `bytes` fresh bytes of the operating system's random source, as lowercase
/// hexadecimal: secrets, nonces, owner ids.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    // A secret that is not random would silently let one key pass for another.
    getrandom::fill(&mut buf).expect("the OS random source failed");
    crate::digest::hex(&buf)
}

/// What an access key may do (the wire contract's `send`, `listen`, `manage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Permission {
    /// Send, Schedule, Cancel.
    Send,
    /// Receive, settle, Renew, Peek, Stats.
    Listen,
    /// Everything, administration included.
    Manage,
}

impl Permission {
    /// The wire and storage spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            Permission::Send => "send",
            Permission::Listen => "listen",
            Permission::Manage => "manage",
        }
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Permission {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "send" => Ok(Permission::Send),
            "listen" => Ok(Permission::Listen),
            "manage" => Ok(Permission::Manage),
            other => Err(Error::invalid(format!(
                "unknown permission {other:?} (send, listen or manage)"
            ))),
        }
    }
}

/// An access key as stored: never its token, only the token's digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessKey {
    /// Public id (32 lowercase hex characters).
    pub id: String,
    /// A human name.
    pub name: String,
    /// SHA-256 of the token, 64 lowercase hex characters.
    pub digest: String,
    /// What it may do, sorted, without repeats.
    pub permissions: Vec<Permission>,
    /// When it was created, epoch ms.
    pub created_at_ms: i64,
    /// When it stops working, epoch ms (0 = never).
    pub expires_at_ms: i64,
    /// When it was revoked, epoch ms (0 = not revoked).
    pub revoked_at_ms: i64,
}

impl AccessKey {
    /// Whether the key works at `now_ms`: not revoked and not expired.
    pub fn is_live(&self, now_ms: i64) -> bool {
        self.revoked_at_ms == 0 && (self.expires_at_ms == 0 || self.expires_at_ms > now_ms)
    }

    /// Whether the key grants `p` (`manage` grants everything).
    pub fn allows(&self, p: Permission) -> bool {
        self.permissions.contains(&Permission::Manage) || self.permissions.contains(&p)
    }

    /// The permissions as stored: comma-separated, sorted.
    pub fn permissions_text(&self) -> String {
        self.permissions
            .iter()
            .map(Permission::as_str)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Parses the stored permission text.
    pub fn parse_permissions(text: &str) -> Result<Vec<Permission>> {
        let mut out = text
            .split(',')
            .filter(|p| !p.is_empty())
            .map(str::parse)
            .collect::<Result<Vec<Permission>>>()?;
        out.sort();
        out.dedup();
        Ok(out)
    }
}

/// A key just created: the stored record and the token, shown this once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedKey {
    /// The stored record.
    pub key: AccessKey,
    /// The bearer token (`mqk_` and 64 hex characters); only its digest is stored.
    pub token: String,
}
