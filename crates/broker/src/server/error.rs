//! An error as the wire shows it: the engine's errors mapped to statuses and codes.

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use mqlite::Error;

use crate::wire::ErrorBody;

/// An error as the wire shows it: a status and the `{code, message}` envelope.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) message: String,
    /// The store cannot take writes (a full disk, its file gone): readiness fails.
    pub(crate) store_fault: bool,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            store_fault: false,
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let (status, code) = match &e {
            Error::InvalidArgument(_) => (StatusCode::BAD_REQUEST, "invalid_argument"),
            Error::GroupRequired { .. } => (StatusCode::BAD_REQUEST, "group_required"),
            Error::NotFound { .. } => (StatusCode::NOT_FOUND, "not_found"),
            Error::DedupConflict { .. } => (StatusCode::CONFLICT, "already_exists"),
            Error::LockLost { .. } => (StatusCode::CONFLICT, "lock_lost"),
            Error::NameConflict { .. } => (StatusCode::CONFLICT, "name_conflict"),
            Error::QueuePaused { .. } => (StatusCode::CONFLICT, "queue_paused"),
            Error::KeyConflict { .. } => (StatusCode::CONFLICT, "key_conflict"),
            Error::MessageTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "message_too_large"),
            Error::Cancelled => (client_closed(), "cancelled"),
            Error::OutcomeUnknown { .. } => (StatusCode::SERVICE_UNAVAILABLE, "outcome_unknown"),
            Error::StorageFull { .. } | Error::StoreGone { .. } | Error::Deposed { .. } => {
                tracing::error!(error = %e, "the store refuses writes");
                let (status, code) = match e {
                    Error::StorageFull { .. } => {
                        (StatusCode::INSUFFICIENT_STORAGE, "resource_exhausted")
                    }
                    _ => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
                };
                let mut api = ApiError::new(status, code, e.to_string());
                api.store_fault = true;
                return api;
            }
            Error::Closed => {
                return ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the broker is shutting down",
                );
            }
            _ => {
                // Never internal detail on the wire; the log has it.
                tracing::error!(error = %e, source = ?std::error::Error::source(&e), "internal error");
                return ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "internal error",
                );
            }
        };
        // The code already says what kind of error it is: the message does not repeat
        // it ("400 invalid_argument: invalid argument: ...").
        let message = match e {
            Error::InvalidArgument(text) => text,
            e => e.to_string(),
        };
        ApiError::new(status, code, message)
    }
}

pub(super) fn client_closed() -> StatusCode {
    StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            code: self.code.to_owned(),
            message: self.message,
        };
        json_response(self.status, &body)
    }
}

pub(super) fn json_response<T: Serialize>(status: StatusCode, value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            Bytes::from(bytes),
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}
