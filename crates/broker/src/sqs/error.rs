//! SQS's errors as the JSON protocol carries them: the status, a body
//! `{"__type": "<namespace>#<Shape>", "message": …}` and the header
//! `x-amzn-query-error: <legacy code>;Sender`, which the SDKs read for the error's code
//! (boto3's `Error.Code`, the JavaScript SDK's error name). Shapes SQS models live in
//! `com.amazonaws.sqs`; the two it does not (an invalid or a missing parameter) in
//! `com.amazon.coral.service`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use mqlite::Error;

use crate::server::ApiError;

/// One SQS error.
#[derive(Debug)]
pub(crate) struct SqsError {
    status: StatusCode,
    /// The `__type`, namespace included.
    kind: String,
    /// The legacy query-protocol code.
    code: &'static str,
    pub(super) message: String,
}

impl SqsError {
    fn modeled(status: StatusCode, shape: &str, code: &'static str, message: String) -> Self {
        SqsError {
            status,
            kind: format!("com.amazonaws.sqs#{shape}"),
            code,
            message,
        }
    }

    fn coral(status: StatusCode, shape: &str, code: &'static str, message: String) -> Self {
        SqsError {
            status,
            kind: format!("com.amazon.coral.service#{shape}"),
            code,
            message,
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::coral(
            StatusCode::BAD_REQUEST,
            "InvalidParameterValueException",
            "InvalidParameterValue",
            message.into(),
        )
    }

    pub(crate) fn missing(parameter: &str) -> Self {
        Self::coral(
            StatusCode::BAD_REQUEST,
            "MissingRequiredParameterException",
            "MissingParameter",
            format!("The request must contain the parameter {parameter}."),
        )
    }

    pub(crate) fn serialization(message: impl Into<String>) -> Self {
        Self::coral(
            StatusCode::BAD_REQUEST,
            "SerializationException",
            "SerializationException",
            message.into(),
        )
    }

    pub(crate) fn unknown_operation(message: impl Into<String>) -> Self {
        Self::coral(
            StatusCode::BAD_REQUEST,
            "UnknownOperationException",
            "UnknownOperationException",
            message.into(),
        )
    }

    pub(crate) fn auth(code: &'static str, message: impl Into<String>) -> Self {
        Self::coral(
            StatusCode::FORBIDDEN,
            &format!("{code}Exception"),
            code,
            message.into(),
        )
    }

    /// A refused signature: `IncompleteSignature` (400), `SignatureDoesNotMatch` (403).
    pub(crate) fn signature(code: &'static str, status: StatusCode, message: String) -> Self {
        let shape = match code {
            "SignatureDoesNotMatch" => "InvalidSignatureException".to_owned(),
            other => format!("{other}Exception"),
        };
        Self::coral(status, &shape, code, message)
    }

    pub(crate) fn no_queue() -> Self {
        Self::modeled(
            StatusCode::BAD_REQUEST,
            "QueueDoesNotExist",
            "AWS.SimpleQueueService.NonExistentQueue",
            "The specified queue does not exist.".into(),
        )
    }

    pub(crate) fn name_exists(message: impl Into<String>) -> Self {
        Self::modeled(
            StatusCode::BAD_REQUEST,
            "QueueNameExists",
            "QueueAlreadyExists",
            message.into(),
        )
    }

    pub(crate) fn unsupported(message: impl Into<String>) -> Self {
        Self::modeled(
            StatusCode::BAD_REQUEST,
            "UnsupportedOperation",
            "AWS.SimpleQueueService.UnsupportedOperation",
            message.into(),
        )
    }

    pub(crate) fn handle_invalid(message: impl Into<String>) -> Self {
        Self::modeled(
            StatusCode::NOT_FOUND,
            "ReceiptHandleIsInvalid",
            "ReceiptHandleIsInvalid",
            message.into(),
        )
    }

    pub(crate) fn attribute_name(name: &str) -> Self {
        Self::modeled(
            StatusCode::BAD_REQUEST,
            "InvalidAttributeName",
            "InvalidAttributeName",
            format!("Unknown Attribute {name}."),
        )
    }

    pub(crate) fn attribute_value(message: impl Into<String>) -> Self {
        Self::modeled(
            StatusCode::BAD_REQUEST,
            "InvalidAttributeValue",
            "InvalidAttributeValue",
            message.into(),
        )
    }

    pub(crate) fn message_contents(message: impl Into<String>) -> Self {
        Self::modeled(
            StatusCode::BAD_REQUEST,
            "InvalidMessageContents",
            "InvalidMessageContents",
            message.into(),
        )
    }

    pub(crate) fn batch(shape: &'static str, code: &'static str, message: String) -> Self {
        Self::modeled(StatusCode::BAD_REQUEST, shape, code, message)
    }

    fn internal(message: String) -> Self {
        Self::coral(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalFailure",
            "InternalFailure",
            message,
        )
    }

    fn unavailable(message: String) -> Self {
        Self::coral(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "ServiceUnavailable",
            message,
        )
    }

    /// A refusal of the broker's own request handling (size, timeout, site checks).
    pub(crate) fn from_api(e: &ApiError) -> Self {
        match e.status {
            StatusCode::PAYLOAD_TOO_LARGE => Self::invalid(e.message.clone()),
            StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED => {
                Self::auth("AccessDenied", e.message.clone())
            }
            s if s.is_client_error() => Self::invalid(e.message.clone()),
            _ => Self::unavailable(e.message.clone()),
        }
    }

    /// The entry of a batch's `Failed` list for this error.
    pub(crate) fn failed_entry(&self, id: &str) -> Value {
        json!({
            "Id": id,
            "SenderFault": self.status.is_client_error(),
            "Code": self.code,
            "Message": self.message,
        })
    }
}

impl From<Error> for SqsError {
    fn from(e: Error) -> Self {
        match e {
            Error::NotFound { kind: "queue", .. } => SqsError::no_queue(),
            Error::LockLost { .. } => SqsError::invalid(format!(
                "The receipt handle has expired: {e} (receive the message again for a \
                 new one)"
            )),
            Error::InvalidArgument(m) => SqsError::invalid(m),
            Error::MessageTooLarge { .. }
            | Error::DedupConflict { .. }
            | Error::GroupRequired { .. }
            | Error::QueuePaused { .. } => SqsError::invalid(e.to_string()),
            Error::NameConflict { .. } => SqsError::name_exists(e.to_string()),
            Error::Closed | Error::StorageFull { .. } | Error::StoreGone { .. } => {
                SqsError::unavailable(e.to_string())
            }
            e => SqsError::internal(mqlite::error_chain(&e)),
        }
    }
}

impl IntoResponse for SqsError {
    fn into_response(self) -> Response {
        let body = json!({ "__type": self.kind, "message": self.message });
        let mut response = (self.status, body.to_string()).into_response();
        let h = response.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(super::CONTENT_TYPE),
        );
        if let Ok(v) = HeaderValue::from_str(&format!("{};Sender", self.code)) {
            h.insert("x-amzn-query-error", v);
        }
        h.insert("x-amzn-requestid", request_id());
        response
    }
}

/// A successful answer.
pub(crate) fn answer(body: &Value) -> Response {
    let mut response = (StatusCode::OK, body.to_string()).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(super::CONTENT_TYPE),
    );
    h.insert("x-amzn-requestid", request_id());
    response
}

fn request_id() -> HeaderValue {
    HeaderValue::from_str(&mqlite::access::random_hex(16)).unwrap_or(HeaderValue::from_static("0"))
}
