//! The rule for queue, topic and subscription names: 1..=256 bytes, no whitespace, no
//! control characters, and (for a name being created) no invisible format characters,
//! so that two names that look alike are alike.

use mqlite_engine::engine::{validate_name, validate_new_name};

#[test]
fn names_refuse_whitespace_control_and_format_characters() {
    for good in [
        "jobs",
        "orders.eu-west_1",
        "очередь",
        "仕事",
        "a",
        "e\u{301}",
    ] {
        validate_new_name(good).unwrap_or_else(|e| panic!("{good:?}: {e}"));
    }
    for (bad, code) in [
        ("jobs\u{202E}", "U+202E"), // right-to-left override
        ("\u{FEFF}jobs", "U+FEFF"), // byte-order mark
        ("jo\u{200B}bs", "U+200B"), // zero-width space
        ("jo\u{200D}bs", "U+200D"), // zero-width joiner
        ("jobs\u{2066}", "U+2066"), // left-to-right isolate
        ("jo\u{AD}bs", "U+00AD"),   // soft hyphen
    ] {
        let e = validate_new_name(bad).expect_err(bad).to_string();
        assert!(e.contains(code) && e.contains("format"), "{bad:?}: {e}");
    }
    for bad in [
        "",
        "a b",
        "a\tb",
        "a\nb",
        "a\u{0}b",
        "a\u{85}b",
        "a\u{3000}b",
    ] {
        assert!(validate_new_name(bad).is_err(), "{bad:?}");
        assert!(validate_name(bad).is_err(), "{bad:?}");
    }
    assert!(validate_new_name(&"x".repeat(257)).is_err());
    // A name stored before the format rule can still be looked up (and deleted).
    assert!(validate_name("jobs\u{202E}").is_ok());
}
