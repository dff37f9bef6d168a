//! The PDF decompression-bomb guard on any file: it never panics, and its work stays
//! bounded by the limit however the streams are laid out.

#![no_main]

use libfuzzer_sys::fuzz_target;
use quire_shared::analysis::fuzzing::pdf_guard_check;

/// Small, so the fuzzer reaches both answers within a short input.
const LIMIT: u64 = 1024 * 1024;

fuzz_target!(|data: &[u8]| {
    let _ = pdf_guard_check(data, LIMIT);
});
