//! The engine's limits: the checks of names, texts and sends against the contract's
//! bounds (`mqlite_contract::limits`), and the engine's own bound on its filter cache.

use mqlite_contract::error::{Error, Result};
pub use mqlite_contract::limits::*;
use mqlite_contract::types::{MAX_SPAN, OutMessage, SendOptions};

/// Compiled subscription filters kept for reuse; past it, one gives way.
pub const MAX_CACHED_FILTERS: usize = 1024;

/// Checks a queue (or topic, subscription) name.
pub fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(Error::invalid(format!(
            "a name is 1..={MAX_NAME_BYTES} bytes"
        )));
    }
    if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(Error::invalid(
            "a name holds no whitespace or control characters",
        ));
    }
    Ok(())
}

/// Checks the name of a queue, topic or subscription being created: as
/// [`validate_name`], and without invisible format characters (Unicode Cf: bidi
/// overrides, zero-width characters, the BOM), so two names that look alike are alike.
/// (Names are looked up under the older rule, so one stored before it can still be
/// used and deleted.)
pub fn validate_new_name(name: &str) -> Result<()> {
    validate_name(name)?;
    if let Some(c) = name.chars().find(|c| is_format(*c)) {
        return Err(Error::invalid(format!(
            "a name holds no whitespace, control or invisible format characters \
             (bidi overrides, zero-width characters, the BOM); {name:?} holds U+{:04X}",
            u32::from(c)
        )));
    }
    Ok(())
}

/// Whether a character is an invisible format character (Unicode Cf), which a new name
/// may not hold ([`validate_name`] has refused whitespace and control characters).
fn is_format(c: char) -> bool {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
    c.general_category() == GeneralCategory::Format
}

pub(super) fn validate_text(field: &str, value: &str) -> Result<()> {
    if value.len() > 1024 || value.chars().any(char::is_control) {
        return Err(Error::invalid(format!(
            "{field} is at most 1024 bytes without control characters"
        )));
    }
    Ok(())
}

pub(super) fn validate_free_text(field: &str, value: &str) -> Result<()> {
    if value.len() > 4096 {
        return Err(Error::invalid(format!("{field} is at most 4096 bytes")));
    }
    Ok(())
}

pub(super) fn validate_send(
    queue: &str,
    messages: &mut [OutMessage],
    options: &SendOptions,
    max_bytes: usize,
) -> Result<()> {
    validate_name(queue)?;
    if messages.is_empty() || messages.len() > MAX_SEND_BATCH {
        return Err(Error::invalid(format!(
            "a send holds 1..={MAX_SEND_BATCH} messages"
        )));
    }
    if let Some(ttl) = options.ttl
        && ttl > MAX_SPAN
    {
        return Err(Error::invalid("ttl must be at most 100 years"));
    }
    if let Some(at) = options.scheduled_at_ms
        && at < 0
    {
        return Err(Error::invalid("scheduled_enqueue_time_ms must be >= 0"));
    }
    for m in messages {
        mqlite_contract::event::stamp(m)?;
        if m.body.len() > max_bytes {
            return Err(Error::MessageTooLarge {
                size: m.body.len(),
                limit: max_bytes,
            });
        }
        for (field, value) in [
            ("message_id", &m.message_id),
            ("group_id", &m.group_id),
            ("subject", &m.subject),
            ("correlation_id", &m.correlation_id),
            ("reply_to", &m.reply_to),
            ("content_type", &m.content_type),
        ] {
            if let Some(v) = value {
                validate_text(field, v)?;
            }
        }
        mqlite_contract::limits::priority(i64::from(m.priority))?;
        if m.properties.len() > 64 {
            return Err(Error::invalid("at most 64 properties per message"));
        }
        for (k, v) in &m.properties {
            if k.is_empty() {
                return Err(Error::invalid("a property name is not empty"));
            }
            validate_text("property name", k)?;
            validate_free_text("property value", v)?;
        }
    }
    Ok(())
}
