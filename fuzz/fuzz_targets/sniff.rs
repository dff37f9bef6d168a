//! The content sniffer on any first bytes of an upload: it never panics, answers only
//! from the allowlist, and every text charset it names is one the analyze pipeline can
//! read back.

#![no_main]

use encoding_rs::Encoding;
use libfuzzer_sys::fuzz_target;
use quire_api::fuzzing::{SNIFF_BYTES, sniff};

const ALLOWED: &[&str] = &[
    "application/pdf",
    "image/png",
    "image/jpeg",
    "image/tiff",
    "image/webp",
];

fuzz_target!(|data: &[u8]| {
    // The upload sniffs at most this many bytes (fewer for a short file).
    let prefix = &data[..data.len().min(SNIFF_BYTES)];
    let Some(content_type) = sniff(prefix) else {
        return;
    };
    if ALLOWED.contains(&content_type.as_ref()) {
        return;
    }
    let charset = content_type
        .strip_prefix("text/plain; charset=")
        .unwrap_or_else(|| panic!("not an allowed content type: {content_type}"));
    assert!(
        Encoding::for_label(charset.as_bytes()).is_some(),
        "the pipeline cannot read the charset back: {content_type}"
    );
});
