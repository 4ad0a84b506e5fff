//! AWS Signature Version 4, verified: what an AWS SDK sends in `Authorization`
//! (`AWS4-HMAC-SHA256 Credential=<key id>/<date>/<region>/sqs/aws4_request,
//! SignedHeaders=<names>, Signature=<hex>`), checked against the secret the key id
//! names, over the canonical request: the method, path, query, the signed headers, and
//! the body's SHA-256. The request's `X-Amz-Date` must be within 15 minutes of the
//! broker's clock, as AWS allows.

use axum::http::HeaderMap;
use hmac::{Hmac, Mac};
use mqlite::digest::{hex, sha256_hex};
use sha2::Sha256;

use super::SqsError;

type HmacSha256 = Hmac<Sha256>;

/// How far a request's `X-Amz-Date` may be from the broker's clock (AWS's bound).
const MAX_SKEW_MS: i64 = 15 * 60 * 1000;

/// The parts of an `Authorization: AWS4-HMAC-SHA256 …` header.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Authorization {
    pub(crate) key_id: String,
    date: String,
    region: String,
    service: String,
    signed_headers: Vec<String>,
    signature: String,
}

fn incomplete(what: &str) -> SqsError {
    SqsError::signature(
        "IncompleteSignature",
        axum::http::StatusCode::BAD_REQUEST,
        format!("the Authorization header is not a complete AWS Signature Version 4: {what}"),
    )
}

/// Parses the header's value; `None` if it is not Signature Version 4 at all.
pub(crate) fn parse(value: &str) -> Option<Result<Authorization, SqsError>> {
    let rest = value.trim().strip_prefix("AWS4-HMAC-SHA256")?;
    Some(parse_parts(rest))
}

fn parse_parts(rest: &str) -> Result<Authorization, SqsError> {
    let (mut credential, mut signed, mut signature) = (None, None, None);
    for part in rest.split(',') {
        let Some((name, value)) = part.trim().split_once('=') else {
            continue;
        };
        match name.trim() {
            "Credential" => credential = Some(value.trim()),
            "SignedHeaders" => signed = Some(value.trim()),
            "Signature" => signature = Some(value.trim()),
            _ => {}
        }
    }
    let credential = credential.ok_or_else(|| incomplete("no Credential"))?;
    let scope: Vec<&str> = credential.split('/').collect();
    let [key_id, date, region, service, "aws4_request"] = scope[..] else {
        return Err(incomplete(
            "Credential is <key id>/<yyyymmdd>/<region>/<service>/aws4_request",
        ));
    };
    let signed_headers: Vec<String> = signed
        .ok_or_else(|| incomplete("no SignedHeaders"))?
        .split(';')
        .map(str::to_ascii_lowercase)
        .collect();
    let signature = signature
        .filter(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| incomplete("Signature is 64 hexadecimal digits"))?;
    Ok(Authorization {
        key_id: key_id.to_owned(),
        date: date.to_owned(),
        region: region.to_owned(),
        service: service.to_owned(),
        signed_headers,
        signature: signature.to_ascii_lowercase(),
    })
}

fn mismatch(message: impl Into<String>) -> SqsError {
    SqsError::signature(
        "SignatureDoesNotMatch",
        axum::http::StatusCode::FORBIDDEN,
        message.into(),
    )
}

/// The request a signature covers.
#[derive(Clone, Copy)]
pub(crate) struct Request<'a> {
    pub(crate) method: &'a str,
    pub(crate) path: &'a str,
    pub(crate) query: &'a str,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) body: &'a [u8],
}

impl Authorization {
    /// Checks the signature at the broker's time `now_ms` against each of `secrets`
    /// (the canonical request and the string to sign are built once): `Ok` if one of
    /// them signed it.
    pub(crate) fn verify(
        &self,
        request: &Request<'_>,
        secrets: &[String],
        now_ms: i64,
    ) -> Result<(), SqsError> {
        if self.service != "sqs" {
            return Err(mismatch(format!(
                "the credential scope names the service {:?}; this endpoint is sqs",
                self.service
            )));
        }
        for needed in ["host", "x-amz-date"] {
            if !self.signed_headers.iter().any(|h| h == needed) {
                return Err(incomplete(&format!("SignedHeaders must include {needed}")));
            }
        }
        let amz_date = header(request.headers, "x-amz-date")
            .ok_or_else(|| incomplete("no X-Amz-Date header"))?;
        if !amz_date.starts_with(&self.date) {
            return Err(mismatch(
                "the credential scope's date is not the X-Amz-Date's day",
            ));
        }
        let signed_at =
            epoch_ms(&amz_date).ok_or_else(|| incomplete("X-Amz-Date is yyyymmddThhmmssZ"))?;
        if (signed_at - now_ms).abs() > MAX_SKEW_MS {
            return Err(mismatch(format!(
                "Signature expired or not yet current: {amz_date} is more than 15 minutes \
                 from the broker's time"
            )));
        }
        let body_hash = sha256_hex(request.body);
        let payload = match header(request.headers, "x-amz-content-sha256") {
            Some(declared) if declared == "UNSIGNED-PAYLOAD" => declared,
            Some(declared) if declared.eq_ignore_ascii_case(&body_hash) => declared,
            Some(_) => {
                return Err(mismatch(
                    "X-Amz-Content-SHA256 is not the SHA-256 of the body",
                ));
            }
            None => body_hash,
        };
        let canonical = canonical_request(request, &self.signed_headers, &payload);
        let scope = format!(
            "{}/{}/{}/aws4_request",
            self.date, self.region, self.service
        );
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
            sha256_hex(canonical.as_bytes())
        );
        let expected = unhex(&self.signature).unwrap_or_default();
        let signed_with = |secret: &String| {
            let mut key = hmac(format!("AWS4{secret}").as_bytes(), self.date.as_bytes());
            for part in [self.region.as_str(), self.service.as_str(), "aws4_request"] {
                key = hmac(&key, part.as_bytes());
            }
            let mut mac = HmacSha256::new_from_slice(&key).expect("HMAC takes any key length");
            mac.update(to_sign.as_bytes());
            // Constant time: the comparison does not tell where the first difference is.
            mac.verify_slice(&expected).is_ok()
        };
        if secrets.iter().any(signed_with) {
            Ok(())
        } else {
            Err(mismatch(
                "The request signature we calculated does not match the signature you \
                 provided. Check your AWS Secret Access Key and signing method.",
            ))
        }
    }
}

/// The header's values joined by `,`, each trimmed with inner runs of spaces folded.
fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    let values: Vec<String> = headers
        .get_all(name)
        .iter()
        .map(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    (!values.is_empty()).then(|| values.join(","))
}

fn canonical_request(request: &Request<'_>, signed: &[String], payload: &str) -> String {
    let mut query: Vec<(String, String)> = request
        .query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_owned(), v.to_owned())
        })
        .collect();
    query.sort();
    let query: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let headers: String = signed
        .iter()
        .map(|name| {
            format!(
                "{name}:{}\n",
                header(request.headers, name).unwrap_or_default()
            )
        })
        .collect();
    format!(
        "{}\n{}\n{}\n{headers}\n{}\n{payload}",
        request.method,
        if request.path.is_empty() {
            "/"
        } else {
            request.path
        },
        query.join("&"),
        signed.join(";"),
    )
}

/// The SQS secret access key of mqlite's access key `key_id`, derived from an
/// administrator token: HMAC-SHA256 over the key id, in hex. The store keeps only a
/// digest of each key's token (9.3), and a signature is checked with the secret
/// itself, so the broker derives the secret instead of storing one; it holds while the
/// administrator token it came from is configured.
pub(crate) fn key_secret(admin_token: &str, key_id: &str) -> String {
    hex(&hmac(
        admin_token.as_bytes(),
        format!("mqlite sqs secret access key\n{key_id}").as_bytes(),
    ))
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `yyyymmddThhmmssZ` as epoch milliseconds.
fn epoch_ms(amz_date: &str) -> Option<i64> {
    let b = amz_date.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let rfc3339 = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &amz_date[0..4],
        &amz_date[4..6],
        &amz_date[6..8],
        &amz_date[9..11],
        &amz_date[11..13],
        &amz_date[13..15]
    );
    let t = humantime::parse_rfc3339(&rfc3339).ok()?;
    let since = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(since.as_millis()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    /// A request as botocore 1.43 signed it (SigV4Auth over an SQS ListQueues call with
    /// the access key `admin` and the secret `admin-token-for-tests`), verified here;
    /// any change to a signed part fails it.
    #[test]
    fn a_botocore_signature_verifies_and_a_changed_request_does_not() {
        let body = br#"{"QueueNamePrefix": "a"}"#;
        let mut headers = HeaderMap::new();
        for (k, v) in [
            ("host", "127.0.0.1:6754"),
            ("x-amz-date", "20261202T174700Z"),
            ("x-amz-target", "AmazonSQS.ListQueues"),
            ("content-type", "application/x-amz-json-1.0"),
        ] {
            headers.insert(k, HeaderValue::from_static(v));
        }
        let auth = parse(BOTOCORE_AUTHORIZATION)
            .expect("SigV4")
            .expect("complete");
        assert_eq!(auth.key_id, "admin");
        let request = Request {
            method: "POST",
            path: "/",
            query: "",
            headers: &headers,
            body,
        };
        let now = epoch_ms("20261202T174700Z").expect("a date");
        let secret = |s: &str| vec![s.to_owned()];
        auth.verify(&request, &secret("admin-token-for-tests"), now)
            .expect("verifies");
        // Any of several secrets may have signed it.
        let both = vec![
            "another-secret".to_owned(),
            "admin-token-for-tests".to_owned(),
        ];
        auth.verify(&request, &both, now)
            .expect("the second secret signed it");
        assert!(
            auth.verify(&request, &secret("another-secret"), now)
                .is_err()
        );
        let changed = Request {
            body: br#"{"QueueNamePrefix": "b"}"#,
            ..request
        };
        assert!(
            auth.verify(&changed, &secret("admin-token-for-tests"), now)
                .is_err()
        );
        assert!(
            auth.verify(
                &request,
                &secret("admin-token-for-tests"),
                now + 16 * 60 * 1000
            )
            .is_err()
        );
        assert!(parse("Bearer x").is_none());
        assert!(
            parse("AWS4-HMAC-SHA256 Credential=a/b")
                .expect("SigV4")
                .is_err()
        );
    }

    const BOTOCORE_AUTHORIZATION: &str = include_str!("sigv4_vector.txt");
}
