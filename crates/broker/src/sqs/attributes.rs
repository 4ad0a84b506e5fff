//! Message attributes: SQS's typed name/value pairs kept as a message's properties, and
//! the MD5 digests SQS answers for a body and a set of attributes.
//!
//! A `String` attribute is the property of its name; another type (`Number`, `Binary`,
//! or a custom label such as `String.url`) also writes the property
//! `sqs.type.<name>` with its data type, and a binary value is kept base64-encoded, as
//! the JSON protocol carries it. Properties set by mqlite's own clients read as
//! `String` attributes.

use std::collections::BTreeMap;

use base64::Engine as _;
use md5::{Digest, Md5};
use mqlite::digest::hex;
use serde_json::{Map, Value, json};

use super::SqsError;

/// The property prefix that keeps an attribute's data type.
const TYPE_PREFIX: &str = "sqs.type.";

/// The most attributes on one message (SQS's bound).
const MAX_ATTRIBUTES: usize = 10;

/// One attribute: its data type and value (binary values decoded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attribute {
    pub(crate) data_type: String,
    pub(crate) value: Vec<u8>,
}

impl Attribute {
    fn binary(&self) -> bool {
        self.data_type.starts_with("Binary")
    }

    /// The attribute as the JSON protocol writes it.
    fn to_json(&self) -> Value {
        if self.binary() {
            json!({
                "DataType": self.data_type,
                "BinaryValue": base64::engine::general_purpose::STANDARD.encode(&self.value),
            })
        } else {
            json!({
                "DataType": self.data_type,
                "StringValue": String::from_utf8_lossy(&self.value),
            })
        }
    }
}

/// Parses and checks a request's `MessageAttributes`.
pub(crate) fn parse(input: Option<&Value>) -> Result<BTreeMap<String, Attribute>, SqsError> {
    let mut out = BTreeMap::new();
    let Some(input) = input else { return Ok(out) };
    let Value::Object(map) = input else {
        return Err(SqsError::invalid("MessageAttributes is an object"));
    };
    if map.len() > MAX_ATTRIBUTES {
        return Err(SqsError::invalid(format!(
            "Number of message attributes [{}] exceeds the allowed maximum [{MAX_ATTRIBUTES}].",
            map.len()
        )));
    }
    for (name, v) in map {
        check_name(name)?;
        let Value::Object(v) = v else {
            return Err(SqsError::invalid(format!(
                "The message attribute '{name}' is an object with DataType and a value"
            )));
        };
        let data_type = v
            .get("DataType")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                SqsError::invalid(format!(
                    "The message attribute '{name}' must contain a non-empty attribute type."
                ))
            })?;
        let base = data_type.split('.').next().unwrap_or("");
        if !["String", "Number", "Binary"].contains(&base) || data_type.len() > 256 {
            return Err(SqsError::invalid(format!(
                "The type of message attribute '{name}' is invalid. You must use only the \
                 following supported type prefixes: Binary, Number, String."
            )));
        }
        if v.contains_key("StringListValues") || v.contains_key("BinaryListValues") {
            return Err(SqsError::invalid(format!(
                "The message attribute '{name}': list values are reserved by SQS and not \
                 served"
            )));
        }
        let value = match base {
            "Binary" => {
                let text = v
                    .get("BinaryValue")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        SqsError::invalid(format!(
                            "The message attribute '{name}' with type 'Binary' must use field \
                         'Binary'."
                        ))
                    })?;
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map_err(|_| {
                        SqsError::invalid(format!(
                            "The message attribute '{name}': BinaryValue is not base64"
                        ))
                    })?
            }
            _ => {
                let text = v
                    .get("StringValue")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        SqsError::invalid(format!(
                            "The message attribute '{name}' with type '{base}' must use field \
                         'String'."
                        ))
                    })?;
                if base == "Number" && !is_number(text) {
                    return Err(SqsError::invalid(format!(
                        "Can't cast the value of message attribute '{name}' to a number."
                    )));
                }
                text.as_bytes().to_vec()
            }
        };
        out.insert(
            name.clone(),
            Attribute {
                data_type: data_type.to_owned(),
                value,
            },
        );
    }
    Ok(out)
}

/// SQS's attribute name rule, and mqlite's reserved prefix.
fn check_name(name: &str) -> Result<(), SqsError> {
    let lower = name.to_ascii_lowercase();
    let ok = !name.is_empty()
        && name.len() <= 256
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        && !name.starts_with('.')
        && !name.ends_with('.')
        && !name.contains("..")
        && !lower.starts_with("aws.")
        && !lower.starts_with("amazon.")
        && !name.starts_with(TYPE_PREFIX);
    if ok {
        Ok(())
    } else {
        Err(SqsError::invalid(format!(
            "Message (user) attribute '{name}' is invalid: names are 1-256 letters, digits, \
             '_', '-' and '.', not starting or ending with '.', without '..', and not \
             starting with AWS., Amazon. or {TYPE_PREFIX}"
        )))
    }
}

/// A decimal number as SQS takes one: an optional sign, digits, an optional fraction and
/// exponent.
fn is_number(text: &str) -> bool {
    let t = text.trim_start_matches(['-', '+']);
    let (mantissa, exponent) = match t.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e.trim_start_matches(['-', '+']))),
        None => (t, None),
    };
    let digits = mantissa.replacen('.', "", 1);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && exponent.is_none_or(|e| !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit()))
}

/// The bytes the attributes count towards a message's size: names, types and values.
pub(crate) fn size(attributes: &BTreeMap<String, Attribute>) -> usize {
    attributes
        .iter()
        .map(|(n, a)| n.len() + a.data_type.len() + a.value.len())
        .sum()
}

/// The attributes as message properties.
pub(crate) fn to_properties(attributes: &BTreeMap<String, Attribute>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (name, a) in attributes {
        let value = if a.binary() {
            base64::engine::general_purpose::STANDARD.encode(&a.value)
        } else {
            String::from_utf8_lossy(&a.value).into_owned()
        };
        out.insert(name.clone(), value);
        if a.data_type != "String" {
            out.insert(format!("{TYPE_PREFIX}{name}"), a.data_type.clone());
        }
    }
    out
}

/// A message's properties as attributes.
pub(crate) fn from_properties(
    properties: &BTreeMap<String, String>,
) -> BTreeMap<String, Attribute> {
    properties
        .iter()
        .filter(|(name, _)| !name.starts_with(TYPE_PREFIX))
        .map(|(name, value)| {
            let data_type = properties
                .get(&format!("{TYPE_PREFIX}{name}"))
                .cloned()
                .unwrap_or_else(|| "String".to_owned());
            let value = if data_type.starts_with("Binary") {
                base64::engine::general_purpose::STANDARD
                    .decode(value)
                    .unwrap_or_else(|_| value.as_bytes().to_vec())
            } else {
                value.as_bytes().to_vec()
            };
            (name.clone(), Attribute { data_type, value })
        })
        .collect()
}

/// The attributes a receive asked for (`MessageAttributeNames`): `All`, `.*` or `*`
/// for every one, a name, or a prefix ending in `.*`.
pub(crate) fn select(
    attributes: BTreeMap<String, Attribute>,
    names: &[String],
) -> BTreeMap<String, Attribute> {
    if names.iter().any(|n| n == "All" || n == ".*" || n == "*") {
        return attributes;
    }
    attributes
        .into_iter()
        .filter(|(name, _)| {
            names.iter().any(|n| match n.strip_suffix(".*") {
                Some(prefix) => name.starts_with(prefix),
                None => n == name,
            })
        })
        .collect()
}

/// The attributes as the JSON protocol writes them.
pub(crate) fn to_json(attributes: &BTreeMap<String, Attribute>) -> Value {
    Value::Object(
        attributes
            .iter()
            .map(|(n, a)| (n.clone(), a.to_json()))
            .collect::<Map<_, _>>(),
    )
}

/// The hex MD5 of a body.
pub(crate) fn md5_of_body(body: &[u8]) -> String {
    hex(&Md5::digest(body))
}

/// SQS's MD5 of a set of attributes: for each, in name order, its name, its data type
/// and its value, each behind a 4-byte big-endian length, with a transport byte (1 for
/// a string or number, 2 for binary) before the value.
pub(crate) fn md5_of_attributes(attributes: &BTreeMap<String, Attribute>) -> Option<String> {
    if attributes.is_empty() {
        return None;
    }
    fn put(md5: &mut Md5, bytes: &[u8]) {
        md5.update(u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_be_bytes());
        md5.update(bytes);
    }
    let mut md5 = Md5::new();
    for (name, a) in attributes {
        put(&mut md5, name.as_bytes());
        put(&mut md5, a.data_type.as_bytes());
        // The transport byte is not length-prefixed.
        md5.update([if a.binary() { 2u8 } else { 1u8 }]);
        put(&mut md5, &a.value);
    }
    Some(hex(&md5.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(value: &str) -> Attribute {
        Attribute {
            data_type: "String".into(),
            value: value.as_bytes().to_vec(),
        }
    }

    /// The digests SQS answered for these attributes (recorded against AWS in public
    /// test suites).
    #[test]
    fn digests_match_sqs() {
        assert_eq!(md5_of_body(b"test"), "098f6bcd4621d373cade4e832627b4f6");
        let one = BTreeMap::from([("MyAttribute".to_owned(), string("foobar"))]);
        assert_eq!(
            md5_of_attributes(&one).as_deref(),
            Some("adb59cd4678ea5a855436b949cd07ab6")
        );
        let three = BTreeMap::from([
            ("General".to_owned(), string("Kenobi")),
            ("Hello".to_owned(), string("There")),
            ("Help.Me".to_owned(), string("Me")),
        ]);
        assert_eq!(
            md5_of_attributes(&three).as_deref(),
            Some("4c360f3fdafd970e05fae2f149d997f5")
        );
        let hel = select(three, &["Hel.*".to_owned()]);
        assert_eq!(
            md5_of_attributes(&hel).as_deref(),
            Some("83fee93c1bcd8b9a5a923ffacdc636c7")
        );
        let binary = BTreeMap::from([(
            "attr1".to_owned(),
            Attribute {
                data_type: "Binary".into(),
                value: b"traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01"
                    .to_vec(),
            },
        )]);
        assert_eq!(
            md5_of_attributes(&binary).as_deref(),
            Some("8cbe4db156db8a94db8b801b7addb984")
        );
    }

    /// Attributes round-trip through properties with their types and bytes.
    #[test]
    fn attributes_round_trip_through_properties() {
        let attributes = BTreeMap::from([
            (
                "n".to_owned(),
                Attribute {
                    data_type: "Number".into(),
                    value: b"-1.5e3".to_vec(),
                },
            ),
            (
                "b".to_owned(),
                Attribute {
                    data_type: "Binary.png".into(),
                    value: vec![0, 159, 255],
                },
            ),
            ("s".to_owned(), string("text")),
        ]);
        assert_eq!(from_properties(&to_properties(&attributes)), attributes);
        assert!(is_number("42") && is_number("-0.5") && is_number("1e10"));
        assert!(!is_number("x") && !is_number("1e") && !is_number(""));
        assert!(check_name("AWS.x").is_err() && check_name("a..b").is_err());
        assert!(check_name("sqs.type.x").is_err() && check_name("Help.Me").is_ok());
    }
}
