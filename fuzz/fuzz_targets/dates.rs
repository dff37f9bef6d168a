//! Date detection on any text, in both configured orders: it never panics, and a date
//! it finds is real and between 1900-01-01 and today.

#![no_main]

use libfuzzer_sys::fuzz_target;
use quire_shared::analysis::dates::detect_issued_at;
use quire_shared::config::DateOrder;
use time::macros::date;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the order; the rest is the text, as extraction hands it on
    // (invalid UTF-8 already replaced).
    let Some((&flags, text)) = data.split_first() else {
        return;
    };
    let order = if flags & 1 == 0 {
        DateOrder::Dmy
    } else {
        DateOrder::Mdy
    };
    let text = String::from_utf8_lossy(text);
    let today = date!(2026 - 11 - 30);
    if let Some(found) = detect_issued_at(&text, order, today) {
        assert!(
            (date!(1900 - 01 - 01)..=today).contains(&found),
            "implausible date {found}"
        );
    }
});
