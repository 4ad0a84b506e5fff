//! An event's identity (CloudEvents 1.0.2): `(source, id)` names one occurrence, whatever
//! carries it and however often (17.1). A message that carries an identity is
//! deduplicated by it (4.1), the consumer inbox records it (17.2–17.4), and the relay
//! repeats it unchanged.
//!
//! Identity is not integrity: nothing here authenticates the issuer of an event.

use std::fmt;

use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::types::OutMessage;

/// The CloudEvents version this mapping speaks.
pub const SPEC_VERSION: &str = "1.0";

/// How long `source` and `id` may each be, in bytes.
pub const MAX_IDENTITY_BYTES: usize = 480;

/// The CloudEvents context of a message: `source` and `id` are its identity; `type`,
/// `specversion` and `time` travel with it where given. No transport attempt (a
/// redelivery, a relay's repeat) changes any of them (17.1).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct EventIdentity {
    /// Who produced the event: a URI reference, e.g. `https://shop.example/orders`.
    pub source: String,
    /// The event's id, unique within its source.
    pub id: String,
    /// The event's type, e.g. `com.example.order.created`.
    pub kind: Option<String>,
    /// The CloudEvents version of the envelope it came in (`1.0`).
    pub specversion: Option<String>,
    /// When the occurrence happened (RFC 3339 text, kept as given).
    pub time: Option<String>,
}

impl EventIdentity {
    /// The identity `(source, id)`.
    pub fn new(source: impl Into<String>, id: impl Into<String>) -> Self {
        EventIdentity {
            source: source.into(),
            id: id.into(),
            ..Default::default()
        }
    }

    /// Sets the event's type.
    pub fn with_type(mut self, kind: impl Into<String>) -> Self {
        self.kind = Some(kind.into());
        self
    }

    /// Sets the time of the occurrence (RFC 3339).
    pub fn with_time(mut self, time: impl Into<String>) -> Self {
        self.time = Some(time.into());
        self
    }

    /// The message id a message with this identity is deduplicated by: the JSON array
    /// `["<source>","<id>"]`, which no two identities share.
    pub fn dedup_key(&self) -> String {
        serde_json::Value::from(vec![self.source.as_str(), self.id.as_str()]).to_string()
    }

    /// Checks the identity: `source` and `id` not empty, each at most
    /// [`MAX_IDENTITY_BYTES`], no control characters in any field.
    pub fn validate(&self) -> Result<()> {
        for (field, v) in [("event source", &self.source), ("event id", &self.id)] {
            if v.is_empty() || v.len() > MAX_IDENTITY_BYTES {
                return Err(Error::invalid(format!(
                    "{field} is 1..={MAX_IDENTITY_BYTES} bytes"
                )));
            }
        }
        if let Some(v) = &self.specversion
            && v != SPEC_VERSION
        {
            return Err(Error::invalid(format!(
                "CloudEvents specversion {v} is not supported ({SPEC_VERSION} is)"
            )));
        }
        if let Some(t) = &self.time
            && !is_rfc3339(t)
        {
            return Err(Error::invalid(format!(
                "event time {t:?} is not an RFC 3339 timestamp (2026-11-30T10:00:00Z)"
            )));
        }
        for (field, v) in [
            ("event source", Some(&self.source)),
            ("event id", Some(&self.id)),
            ("event type", self.kind.as_ref()),
            ("event specversion", self.specversion.as_ref()),
            ("event time", self.time.as_ref()),
        ] {
            if let Some(v) = v
                && (v.len() > 1024 || v.chars().any(char::is_control))
            {
                return Err(Error::invalid(format!(
                    "{field} is at most 1024 bytes without control characters"
                )));
            }
        }
        Ok(())
    }
}

impl fmt::Display for EventIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.source, self.id)
    }
}

/// Whether `t` has the shape of an RFC 3339 timestamp: a full date, `T`, a full time
/// with optional fraction, and `Z` or an offset.
fn is_rfc3339(t: &str) -> bool {
    let b = t.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    if b.len() < 20
        || !(digits(0..4) && b[4] == b'-' && digits(5..7) && b[7] == b'-' && digits(8..10))
        || !matches!(b[10], b'T' | b't')
        || !(digits(11..13) && b[13] == b':' && digits(14..16) && b[16] == b':' && digits(17..19))
    {
        return false;
    }
    let mut rest = &b[19..];
    if let Some(frac) = rest.strip_prefix(b".") {
        let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    match rest {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()),
        _ => false,
    }
}

/// The type an identity without one gets: CloudEvents requires a type, and the HTTP
/// bindings must carry one.
pub const DEFAULT_TYPE: &str = "mqlite.message";

/// Gives a message its identity in place: `specversion` and `type` default to `1.0` and
/// [`DEFAULT_TYPE`] (so a message sent natively and one that came over HTTP have one
/// envelope), and the message id is the identity's dedup key (a different explicit id
/// is refused).
pub fn stamp(m: &mut OutMessage) -> Result<()> {
    let Some(e) = &mut m.event else {
        return Ok(());
    };
    e.validate()?;
    e.specversion.get_or_insert_with(|| SPEC_VERSION.to_owned());
    e.kind.get_or_insert_with(|| DEFAULT_TYPE.to_owned());
    let key = e.dedup_key();
    if key.len() > 1024 {
        return Err(Error::invalid(
            "event source and id together are too long for a dedup key (1024 bytes, escaped)",
        ));
    }
    match &m.message_id {
        Some(id) if *id != key => Err(Error::invalid(
            "a message with an event identity is deduplicated by (source, id): leave \
             message_id unset",
        )),
        _ => {
            m.message_id = Some(key);
            Ok(())
        }
    }
}

fn text(v: Option<&String>) -> Option<&[u8]> {
    v.map(String::as_bytes)
}

/// A SHA-256 over a message's canonical envelope (see [`fingerprint`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

impl std::str::FromStr for Fingerprint {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::invalid("a fingerprint is 64 hex digits");
        if s.len() != 64 || !s.is_ascii() {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Fingerprint(out))
    }
}

/// The fingerprint of a message's canonical envelope: SHA-256 over, in this order,
/// `specversion`, `type`, `source`, `id`, `time`, `subject`, `datacontenttype` (the
/// content type) and the body, each written as a presence byte, a big-endian 8-byte
/// length and its bytes, after the tag `mqlite-envelope/1`.
///
/// Left out, because a transport attempt may change them without a new occurrence:
/// the sequence number, delivery count, lock token, every timestamp of the queue, the
/// message id (derived from the identity), the ordering group, correlation id,
/// reply-to and the application properties (where transports add tracing headers).
pub fn fingerprint(m: &OutMessage) -> Fingerprint {
    let mut h = Sha256::new();
    h.update(b"mqlite-envelope/1");
    let e = m.event.as_ref();
    let field = |h: &mut Sha256, v: Option<&[u8]>| match v {
        None => h.update([0u8]),
        Some(v) => {
            h.update([1u8]);
            h.update((v.len() as u64).to_be_bytes());
            h.update(v);
        }
    };
    field(&mut h, e.and_then(|e| text(e.specversion.as_ref())));
    field(&mut h, e.and_then(|e| text(e.kind.as_ref())));
    field(&mut h, e.map(|e| e.source.as_bytes()));
    field(&mut h, e.map(|e| e.id.as_bytes()));
    field(&mut h, e.and_then(|e| text(e.time.as_ref())));
    field(&mut h, text(m.subject.as_ref()));
    field(&mut h, text(m.content_type.as_ref()));
    field(&mut h, Some(&m.body));
    Fingerprint(h.finalize().into())
}

// ----- CloudEvents HTTP binary mode ---------------------------------------------------

/// The HTTP headers of binary content mode for a message with an identity: `ce-id`,
/// `ce-source`, `ce-specversion` (given or `1.0`), `ce-type` (given or
/// `mqlite.message`, since the mode requires one), `ce-time`, `ce-subject`, and
/// `content-type` from the content type. The body travels as the HTTP body. `None`
/// without an identity.
pub fn to_binary_headers(m: &OutMessage) -> Option<Vec<(&'static str, String)>> {
    let e = m.event.as_ref()?;
    let mut h = vec![
        ("ce-id", e.id.clone()),
        ("ce-source", e.source.clone()),
        (
            "ce-specversion",
            e.specversion.clone().unwrap_or_else(|| SPEC_VERSION.into()),
        ),
        (
            "ce-type",
            e.kind.clone().unwrap_or_else(|| DEFAULT_TYPE.into()),
        ),
    ];
    if let Some(t) = &e.time {
        h.push(("ce-time", t.clone()));
    }
    if let Some(s) = &m.subject {
        h.push(("ce-subject", s.clone()));
    }
    if let Some(c) = &m.content_type {
        h.push(("content-type", c.clone()));
    }
    Some(h)
}

/// A message from binary content mode: the `ce-*` headers (names in any case) and the
/// HTTP body. `ce-id` and `ce-source` are required; other `ce-*` extension headers
/// become properties (without the prefix).
pub fn from_binary_headers<'h>(
    headers: impl IntoIterator<Item = (&'h str, &'h str)>,
    body: Vec<u8>,
) -> Result<OutMessage> {
    let mut m = OutMessage::new(body);
    let mut e = EventIdentity::default();
    let (mut has_id, mut has_source) = (false, false);
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        let v = value.to_owned();
        match name.as_str() {
            "ce-id" => (e.id, has_id) = (v, true),
            "ce-source" => (e.source, has_source) = (v, true),
            "ce-type" => e.kind = Some(v),
            "ce-specversion" => e.specversion = Some(v),
            "ce-time" => e.time = Some(v),
            "ce-subject" => m.subject = Some(v),
            "content-type" => m.content_type = Some(v),
            other => {
                if let Some(ext) = other.strip_prefix("ce-") {
                    m.properties.insert(ext.to_owned(), v);
                }
            }
        }
    }
    if !(has_id && has_source) {
        return Err(Error::invalid(
            "a CloudEvent in binary mode needs ce-id and ce-source headers",
        ));
    }
    check_version(e.specversion.as_deref())?;
    e.validate()?;
    m.event = Some(e);
    Ok(m)
}

fn check_version(v: Option<&str>) -> Result<()> {
    match v {
        None | Some("1.0") => Ok(()),
        Some(other) => Err(Error::invalid(format!(
            "CloudEvents specversion {other} is not supported (1.0 is)"
        ))),
    }
}

// ----- CloudEvents structured mode (JSON) ---------------------------------------------

/// The members of a structured event that are not extension attributes.
const CONTEXT: [&str; 9] = [
    "id",
    "source",
    "type",
    "specversion",
    "time",
    "subject",
    "datacontenttype",
    "data",
    "data_base64",
];

fn is_json(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|c| {
        let c = c.split(';').next().unwrap_or("").trim();
        c == "application/json" || c.ends_with("+json")
    })
}

/// A message with an identity as a structured-mode JSON event: the context attributes,
/// properties as extension attributes, and the body as `data` (when the content type is
/// JSON and the body parses) or `data_base64`. `None` without an identity.
pub fn to_structured(m: &OutMessage) -> Option<serde_json::Value> {
    use serde_json::Value;
    let e = m.event.as_ref()?;
    let mut o = serde_json::Map::new();
    // A property named like a context attribute (or data) cannot be an extension
    // attribute: it is left out rather than let it replace the attribute.
    for (k, v) in &m.properties {
        if !CONTEXT.contains(&k.as_str()) {
            o.insert(k.clone(), Value::from(v.as_str()));
        }
    }
    o.insert(
        "specversion".into(),
        Value::from(e.specversion.as_deref().unwrap_or(SPEC_VERSION)),
    );
    o.insert("id".into(), Value::from(e.id.as_str()));
    o.insert("source".into(), Value::from(e.source.as_str()));
    o.insert(
        "type".into(),
        Value::from(e.kind.as_deref().unwrap_or(DEFAULT_TYPE)),
    );
    for (k, v) in [
        ("time", &e.time),
        ("subject", &m.subject),
        ("datacontenttype", &m.content_type),
    ] {
        if let Some(v) = v {
            o.insert(k.into(), Value::from(v.as_str()));
        }
    }
    let parsed = is_json(m.content_type.as_deref())
        .then(|| serde_json::from_slice::<Value>(&m.body).ok())
        .flatten();
    match parsed {
        Some(data) => o.insert("data".into(), data),
        None => o.insert(
            "data_base64".into(),
            Value::from(base64::engine::general_purpose::STANDARD.encode(&m.body)),
        ),
    };
    Some(Value::Object(o))
}

/// A message from a structured-mode JSON event. `id` and `source` are required;
/// `data` becomes the body (a JSON string's text as is, other JSON as serialized),
/// `data_base64` is decoded; extension attributes become properties.
pub fn from_structured(v: &serde_json::Value) -> Result<OutMessage> {
    use serde_json::Value;
    let o = v
        .as_object()
        .ok_or_else(|| Error::invalid("a structured CloudEvent is a JSON object"))?;
    let text = |k: &str| -> Result<Option<String>> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(Error::invalid(format!(
                "CloudEvent attribute {k} is a string"
            ))),
        }
    };
    let need = |k: &str| -> Result<String> {
        text(k)?.ok_or_else(|| Error::invalid(format!("a CloudEvent needs the attribute {k}")))
    };
    let e = EventIdentity {
        id: need("id")?,
        source: need("source")?,
        kind: text("type")?,
        specversion: text("specversion")?,
        time: text("time")?,
    };
    check_version(e.specversion.as_deref())?;
    e.validate()?;
    let mut m = OutMessage {
        subject: text("subject")?,
        content_type: text("datacontenttype")?,
        ..Default::default()
    };
    m.body = match (o.get("data"), o.get("data_base64")) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid(
                "a CloudEvent holds data or data_base64, not both",
            ));
        }
        (Some(Value::String(s)), None) if !is_json(m.content_type.as_deref()) => {
            s.clone().into_bytes()
        }
        (Some(d), None) => d.to_string().into_bytes(),
        (None, Some(Value::String(b))) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(|_| Error::invalid("data_base64 is not base64"))?,
        (None, Some(_)) => return Err(Error::invalid("data_base64 is a string")),
        (None, None) => Vec::new(),
    };
    for (k, v) in o {
        if CONTEXT.contains(&k.as_str()) {
            continue;
        }
        let v = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        m.properties.insert(k.clone(), v);
    }
    m.event = Some(e);
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order() -> OutMessage {
        let mut m = OutMessage::new(r#"{"total":7}"#);
        m.content_type = Some("application/json".into());
        m.subject = Some("order-42".into());
        m.event = Some(
            EventIdentity::new("https://shop.example/orders", "evt-1")
                .with_type("order.created")
                .with_time("2026-11-30T10:00:00Z"),
        );
        m
    }

    #[test]
    fn the_dedup_key_separates_identities_that_concatenate_alike() {
        let a = EventIdentity::new("ab", "c").dedup_key();
        let b = EventIdentity::new("a", "bc").dedup_key();
        assert_ne!(a, b);
        assert_eq!(a, r#"["ab","c"]"#);
    }

    #[test]
    fn binary_mode_round_trips() {
        let m = order();
        let h = to_binary_headers(&m).expect("an identity");
        let back =
            from_binary_headers(h.iter().map(|(k, v)| (*k, v.as_str())), m.body.clone()).unwrap();
        let (mut want, mut got) = (m.clone(), back);
        stamp(&mut want).unwrap();
        stamp(&mut got).unwrap();
        assert_eq!(got, want, "one envelope, natively or over HTTP");
        assert_eq!(fingerprint(&got), fingerprint(&want));
    }

    #[test]
    fn structured_mode_round_trips_json_and_binary_data() {
        let mut m = order();
        m.properties.insert("traceparent".into(), "00-ab".into());
        let v = to_structured(&m).unwrap();
        assert_eq!(v["data"]["total"], 7);
        let back = from_structured(&v).unwrap();
        assert_eq!(back.body, m.body);
        assert_eq!(
            back.event.as_ref().unwrap().source,
            "https://shop.example/orders"
        );
        assert_eq!(back.properties["traceparent"], "00-ab");

        let mut raw = order();
        raw.content_type = Some("application/octet-stream".into());
        raw.body = vec![0, 159, 255];
        let v = to_structured(&raw).unwrap();
        assert!(v.get("data_base64").is_some());
        assert_eq!(from_structured(&v).unwrap().body, raw.body);
    }

    #[test]
    fn bad_envelopes_are_typed_errors() {
        assert!(from_binary_headers([("ce-id", "1")], vec![]).is_err());
        let v = serde_json::json!({"id": "1", "source": "s", "specversion": "0.3"});
        assert!(matches!(
            from_structured(&v),
            Err(Error::InvalidArgument(_))
        ));
        let v = serde_json::json!({"id": 1, "source": "s"});
        assert!(from_structured(&v).is_err());
        assert!(from_structured(&serde_json::json!([])).is_err());
    }

    #[test]
    fn the_fingerprint_ignores_transport_and_sees_the_payload() {
        let m = order();
        let mut moved = m.clone();
        moved.group_id = Some("g".into());
        moved.properties.insert("traceparent".into(), "x".into());
        moved.message_id = Some("anything".into());
        assert_eq!(fingerprint(&m), fingerprint(&moved));
        let mut other = m.clone();
        other.body = br#"{"total":8}"#.to_vec();
        assert_ne!(fingerprint(&m), fingerprint(&other));
        let f = fingerprint(&m);
        assert_eq!(f.to_string().parse::<Fingerprint>().unwrap(), f);
    }

    #[test]
    fn identities_are_validated() {
        let bad = |e: EventIdentity| {
            let mut m = OutMessage::new("x").with_event(e);
            matches!(stamp(&mut m), Err(Error::InvalidArgument(_)))
        };
        assert!(bad(EventIdentity::new("", "1")));
        assert!(bad(EventIdentity::new("s", "1").with_time("yesterday")));
        assert!(bad(EventIdentity {
            specversion: Some("0.3".into()),
            ..EventIdentity::new("s", "1")
        }));
        assert!(bad(EventIdentity::new("\"".repeat(400), "\"".repeat(400))));
        for t in ["2026-11-30T10:00:00Z", "2026-11-30T10:00:00.123+01:00"] {
            assert!(!bad(EventIdentity::new("s", "1").with_time(t)), "{t}");
        }
    }

    #[test]
    fn an_explicit_other_message_id_is_refused() {
        let mut m = order().with_id("x");
        assert!(stamp(&mut m).is_err());
        let mut m = order();
        stamp(&mut m).unwrap();
        assert_eq!(
            m.message_id.as_deref(),
            Some(r#"["https://shop.example/orders","evt-1"]"#)
        );
    }
}
