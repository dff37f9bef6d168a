//! Date detection on any text, in every date order and any set of languages: it never
//! panics, and a date it finds is real and between 1900-01-01 and today.

#![no_main]

use libfuzzer_sys::fuzz_target;
use quire_shared::analysis::dates::{DateLanguage, DateOrder, DateReading, detect_issued_at};
use time::macros::date;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the order, the second the languages (a bit each, none: all);
    // the rest is the text, as extraction hands it on (invalid UTF-8 already replaced).
    let [order, languages, text @ ..] = data else {
        return;
    };
    let order = DateOrder::ALL[usize::from(*order) % DateOrder::ALL.len()];
    let chosen: Vec<DateLanguage> = DateLanguage::ALL
        .into_iter()
        .enumerate()
        .filter(|(bit, _)| languages & (1 << bit) != 0)
        .map(|(_, language)| language)
        .collect();
    let chosen = if chosen.is_empty() {
        DateLanguage::ALL.to_vec()
    } else {
        chosen
    };
    let text = String::from_utf8_lossy(text);
    let today = date!(2026 - 11 - 30);
    if let Some(found) = detect_issued_at(&text, DateReading::new(&chosen, order), today) {
        assert!(
            (date!(1900 - 01 - 01)..=today).contains(&found),
            "implausible date {found}"
        );
    }
});
