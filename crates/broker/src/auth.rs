//! Who is calling: administrator tokens (`MQLITE_TOKENS`), managed access keys (stored
//! as SHA-256 digests, looked up by digest), or nobody when auth is off. 401 when the
//! caller is unknown, 403 when known but not allowed.

use axum::http::{HeaderMap, StatusCode, header};

use mqlite::AnyEngine;
use mqlite::{AccessKey, Permission};

use crate::{config::AuthConfig, server::ApiError};

/// The caller, once authenticated.
#[derive(Debug, Clone)]
pub(crate) enum Principal {
    /// Auth is off.
    Anyone,
    /// An administrator token.
    Admin,
    /// A managed access key.
    Key(AccessKey),
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Principal::Anyone => f.write_str("anyone (auth off)"),
            Principal::Admin => f.write_str("an administrator token"),
            Principal::Key(k) => write!(f, "access key {}", k.id),
        }
    }
}

impl Principal {
    /// What WhoAmI answers.
    pub(crate) fn who(&self) -> crate::wire::WhoAmIResponse {
        let all = || {
            [Permission::Send, Permission::Listen, Permission::Manage]
                .iter()
                .map(|p| p.as_str().to_owned())
                .collect()
        };
        let (principal, id, name, permissions) = match self {
            Principal::Anyone => ("anyone", "", "", all()),
            Principal::Admin => ("admin", "", "", all()),
            Principal::Key(k) => (
                "key",
                k.id.as_str(),
                k.name.as_str(),
                k.permissions
                    .iter()
                    .map(|p| p.as_str().to_owned())
                    .collect(),
            ),
        };
        crate::wire::WhoAmIResponse {
            principal: principal.to_owned(),
            id: id.to_owned(),
            name: name.to_owned(),
            permissions,
        }
    }
}

pub(crate) struct Auth {
    config: AuthConfig,
}

/// Compares in time independent of where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Auth {
    pub(crate) fn new(config: AuthConfig) -> Self {
        Auth { config }
    }

    /// "bearer" or "none", as the discovery card says.
    pub(crate) fn mode(&self) -> &'static str {
        self.config.mode()
    }

    /// Whether RPCs need a token.
    pub(crate) fn is_on(&self) -> bool {
        self.config.is_on()
    }

    /// The administrator tokens (the SQS endpoint's secrets for the key id `admin`).
    pub(crate) fn admin_tokens(&self) -> &[String] {
        match &self.config {
            AuthConfig::Tokens(tokens) => tokens,
            _ => &[],
        }
    }

    /// The caller, if it may do what `needs` names (None: any valid credential).
    pub(crate) async fn check(
        &self,
        engine: &AnyEngine,
        headers: &HeaderMap,
        needs: Option<Permission>,
    ) -> Result<Principal, ApiError> {
        let AuthConfig::Tokens(admins) = &self.config else {
            return Ok(Principal::Anyone);
        };
        let unauthenticated =
            |m: &str| ApiError::new(StatusCode::UNAUTHORIZED, "unauthenticated", m);
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return Err(unauthenticated(
                "missing credentials: send Authorization: Bearer <token>",
            ));
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| {
                // The scheme is case-insensitive (RFC 7235).
                let (scheme, token) = v.trim_start().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then_some(token)
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| unauthenticated("the Authorization header is not `Bearer <token>`"))?;
        // Every configured token is compared, so the time does not tell which matched.
        let admin = admins
            .iter()
            .fold(false, |hit, a| same(a.as_bytes(), token.as_bytes()) | hit);
        if admin {
            return Ok(Principal::Admin);
        }
        let key = engine
            .authenticate(token)
            .await
            .map_err(ApiError::from)?
            .ok_or_else(|| unauthenticated("unknown, revoked or expired token"))?;
        if let Some(needs) = needs.filter(|n| !key.allows(*n)) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "permission_denied",
                format!(
                    "access key {} lacks the `{}` permission this call needs",
                    key.id, needs
                ),
            ));
        }
        Ok(Principal::Key(key))
    }
}
