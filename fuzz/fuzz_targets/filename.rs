//! Cleaning a client's filename for display: whatever was sent, the result has no
//! directory part, no control or bidirectional-control character, at most 255 bytes,
//! no surrounding whitespace, and cleaning it again changes nothing.

#![no_main]

use libfuzzer_sys::fuzz_target;
use quire_api::fuzzing::{MAX_FILENAME_BYTES, display_filename};
use quire_shared::actions::documents::is_bidi_control;

fuzz_target!(|data: &[u8]| {
    // actix hands the Content-Disposition filename over as a string.
    let raw = String::from_utf8_lossy(data);
    let shown = display_filename(&raw);
    assert!(shown.len() <= MAX_FILENAME_BYTES, "{shown:?}");
    assert!(!shown.contains(['/', '\\']), "{shown:?}");
    assert!(
        !shown.chars().any(|c| c.is_control() || is_bidi_control(c)),
        "{shown:?}"
    );
    assert_eq!(shown.trim(), shown, "surrounding whitespace");
    assert_eq!(display_filename(&shown), shown, "not idempotent");
});
