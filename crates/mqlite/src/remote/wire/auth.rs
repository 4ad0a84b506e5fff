//! The AuthService's bodies: access keys and who the caller is.

use serde::{Deserialize, Serialize};

use crate::AccessKey;

use super::{empty, zero};

/// CreateKey.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CreateKeyRequest {
    /// The public id, 32 hex characters (absent: a random one).
    #[serde(skip_serializing_if = "empty")]
    pub id: String,
    /// A human name.
    pub name: String,
    /// send, listen, manage.
    pub permissions: Vec<String>,
    /// When it stops working, epoch ms (0 = never).
    #[serde(skip_serializing_if = "zero")]
    pub expires_at_ms: i64,
}

/// A key as listed (never its token).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct WireKey {
    /// The public id.
    pub id: String,
    /// The name.
    pub name: String,
    /// Its permissions.
    pub permissions: Vec<String>,
    /// The token, on CreateKey only: shown once.
    #[serde(skip_serializing_if = "empty")]
    pub token: String,
    /// On CreateKey only, from a broker with an administrator token: the secret access
    /// key that signs SQS requests under this key's id (docs/sqs.md), shown once.
    #[serde(skip_serializing_if = "empty")]
    pub sqs_secret_access_key: String,
    /// When it was created.
    pub created_at_ms: i64,
    /// When it stops working (0 = never).
    pub expires_at_ms: i64,
    /// When it was revoked (0 = not).
    #[serde(skip_serializing_if = "zero")]
    pub revoked_at_ms: i64,
}

impl From<AccessKey> for WireKey {
    fn from(k: AccessKey) -> Self {
        WireKey {
            permissions: k
                .permissions
                .iter()
                .map(|p| p.as_str().to_owned())
                .collect(),
            id: k.id,
            name: k.name,
            token: String::new(),
            sqs_secret_access_key: String::new(),
            created_at_ms: k.created_at_ms,
            expires_at_ms: k.expires_at_ms,
            revoked_at_ms: k.revoked_at_ms,
        }
    }
}

/// ListKeys.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ListKeysRequest {
    /// Start after this id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_id: Option<String>,
    /// At most this many (default 100, max 1000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
}

/// ListKeys' answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ListKeysResponse {
    /// The keys.
    pub keys: Vec<WireKey>,
    /// Where the next page starts (empty: no more).
    #[serde(skip_serializing_if = "empty")]
    pub next_after_id: String,
}

/// RevokeKey.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RevokeKeyRequest {
    /// The key's id.
    pub id: String,
}

/// WhoAmI (an extension beyond the contract): who the credential is and what it may
/// do, so a console shows only the actions the caller is allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WhoAmIResponse {
    /// `admin` (an administrator token), `key` (an access key) or `anyone` (auth off).
    pub principal: String,
    /// The access key's id (keys only).
    #[serde(skip_serializing_if = "empty")]
    pub id: String,
    /// The access key's name (keys only).
    #[serde(skip_serializing_if = "empty")]
    pub name: String,
    /// What it may do: `send`, `listen`, `manage`.
    pub permissions: Vec<String>,
}
