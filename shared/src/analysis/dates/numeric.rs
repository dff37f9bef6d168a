//! Dates written in digits: `15.03.2024`, `03/15/2024`, `15-03-2024`, `2024-03-15`,
//! `2024/03/15`, and with a two-digit year (`14.06.24`, `6/14/24`, `24/06/14`), read by the
//! tenant's date order where two parts could each be the day. OCR's usual slips are
//! forgiven: `O` for 0, `I` or `l` for 1 (`l2.03.2024`, `O1/O2/2024`), and one stray
//! space on either side of a dot or slash (`12 .03. 2024`). What is no date is refused
//! rather than guessed: mixed separators, a part that fits no reading, a run of numbers
//! the match is only a piece of (`12.03.2024.7`, `10.1.1.10`).

use std::sync::LazyLock;

use regex::Regex;
use time::{Date, Month};

use crate::config::DateOrder;

/// A digit as OCR may read it. Outside any case-insensitive group: `i` and `L` are not
/// digits, and the parts must hold a real digit each (checked after the match).
pub(super) const DIGIT: &str = "[0-9OIl]";

/// Three parts and two separators, each separator with at most one space either side.
/// ASCII word boundaries keep the regex on its lazy DFA (a Unicode `\b` would drop it to
/// a slower engine on non-ASCII text): linear in the text, whatever the text.
static NUMERIC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?-u:\b)({DIGIT}{{1,4}})( ?[./-] ?)({DIGIT}{{1,2}})( ?[./-] ?)({DIGIT}{{1,4}})(?-u:\b)"
    ))
    .expect("numeric date pattern")
});

/// A date found in digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Found {
    pub date: Date,
    pub start: usize,
    /// Written with a two-digit year: a weaker reading than four digits.
    pub short_year: bool,
}

/// A part's value once OCR's letters are digits again; `None` without one real digit.
pub(super) fn number(part: &str) -> Option<u16> {
    if !part.bytes().any(|byte| byte.is_ascii_digit()) {
        return None;
    }
    part.chars().try_fold(0u16, |value, letter| {
        let digit = match letter {
            'O' => 0,
            'I' | 'l' => 1,
            digit => u16::try_from(digit.to_digit(10)?).ok()?,
        };
        value.checked_mul(10)?.checked_add(digit)
    })
}

pub(super) fn make_date(year: i32, month: u16, day: u16) -> Option<Date> {
    let month = Month::try_from(u8::try_from(month).ok()?).ok()?;
    Date::from_calendar_date(year, month, u8::try_from(day).ok()?).ok()
}

/// Two parts that are day and month in some order, as `(day, month)`: a part above 12
/// decides; a dotted date is day first (no one writes `03.15.2024` for 15 March and means
/// a dotted `03.04.2024` month first); otherwise the tenant's order.
fn day_and_month(first: u16, second: u16, separator: char, order: DateOrder) -> (u16, u16) {
    if first > 12 || separator == '.' && second <= 12 {
        return (first, second);
    }
    if second > 12 {
        return (second, first);
    }
    match order {
        DateOrder::Dmy => (first, second),
        // A year-first order puts the month before the day too.
        DateOrder::Mdy | DateOrder::Ymd => (second, first),
    }
}

/// A two-digit year in the century that puts it at or before `this_year`.
fn full_year(short: u16, this_year: i32) -> i32 {
    let year = 2000 + i32::from(short);
    if year <= this_year { year } else { year - 100 }
}

/// The reading of one match, or `None`.
fn read(
    parts: [&str; 3],
    separators: [&str; 2],
    order: DateOrder,
    this_year: i32,
) -> Option<(Date, bool)> {
    let separator = separators[0].trim();
    if separator != separators[1].trim() {
        return None;
    }
    let separator = separator.chars().next()?;
    let spaced = separators.iter().any(|written| written.len() > 1);
    // `10 - 12 - 2024` reads as a range or a sum more often than as a date.
    if spaced && separator == '-' {
        return None;
    }
    let lengths = parts.map(|part| part.chars().count());
    let [a, b, c] = [number(parts[0])?, number(parts[1])?, number(parts[2])?];
    match lengths {
        // Year first: always year, month, day (`2024-03-15`).
        [4, _, 1 | 2] => Some((make_date(i32::from(a), b, c)?, false)),
        [1 | 2, _, 4] => {
            let (day, month) = day_and_month(a, b, separator, order);
            Some((make_date(i32::from(c), month, day)?, false))
        }
        // A two-digit year: every part two digits, but for slashes (`6/14/24`); the
        // tenant's order says where the year is.
        [1 | 2, 1 | 2, 2] | [2, 1 | 2, 1] => {
            if separator != '/' && lengths != [2, 2, 2] {
                return None;
            }
            if order == DateOrder::Ymd && lengths[0] == 2 {
                return Some((make_date(full_year(a, this_year), b, c)?, true));
            }
            if order == DateOrder::Ymd || lengths[2] != 2 {
                return None;
            }
            let (day, month) = day_and_month(a, b, separator, order);
            Some((make_date(full_year(c, this_year), month, day)?, true))
        }
        _ => None,
    }
}

/// The match is one piece of a longer run of numbers joined by its separator
/// (`2024-03-15-001`, `1.10.03.2024`), written without spaces.
fn chained(text: &str, start: usize, end: usize, separator: char) -> bool {
    let before = text[..start]
        .strip_suffix(separator)
        .is_some_and(|rest| rest.ends_with(|letter: char| letter.is_ascii_digit()));
    let after = text[end..]
        .strip_prefix(separator)
        .is_some_and(|rest| rest.starts_with(|letter: char| letter.is_ascii_digit()));
    before || after
}

/// Every date written in digits in `text`, in order.
pub(super) fn find(
    text: &str,
    order: DateOrder,
    this_year: i32,
) -> impl Iterator<Item = Found> + '_ {
    NUMERIC.captures_iter(text).filter_map(move |caps| {
        let whole = caps.get(0)?;
        let parts = [
            caps.get(1)?.as_str(),
            caps.get(3)?.as_str(),
            caps.get(5)?.as_str(),
        ];
        let separators = [caps.get(2)?.as_str(), caps.get(4)?.as_str()];
        let (date, short_year) = read(parts, separators, order, this_year)?;
        let separator = separators[0].trim().chars().next()?;
        if chained(text, whole.start(), whole.end(), separator) {
            return None;
        }
        Some(Found {
            date,
            start: whole.start(),
            short_year,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::date;

    fn dates(text: &str, order: DateOrder) -> Vec<Date> {
        find(text, order, 2026).map(|found| found.date).collect()
    }

    #[test]
    fn each_order_reads_an_ambiguous_date_its_own_way() {
        let text = "03/04/2024";
        assert_eq!(dates(text, DateOrder::Dmy), [date!(2024 - 04 - 03)]);
        assert_eq!(dates(text, DateOrder::Mdy), [date!(2024 - 03 - 04)]);
        assert_eq!(dates(text, DateOrder::Ymd), [date!(2024 - 03 - 04)]);
        assert_eq!(dates("24/03/04", DateOrder::Ymd), [date!(2024 - 03 - 04)]);
        assert_eq!(dates("24/03/04", DateOrder::Dmy), [date!(2004 - 03 - 24)]);
        assert_eq!(dates("03/04/24", DateOrder::Mdy), [date!(2024 - 03 - 04)]);
    }

    #[test]
    fn ocr_letters_become_digits_but_a_part_needs_one_real_digit() {
        assert_eq!(dates("l2.03.2024", DateOrder::Dmy), [date!(2024 - 03 - 12)]);
        assert_eq!(dates("O1/O2/2O24", DateOrder::Dmy), [date!(2024 - 02 - 01)]);
        assert_eq!(dates("I5.O3.2024", DateOrder::Dmy), [date!(2024 - 03 - 15)]);
        assert_eq!(
            dates("12 .03. 2024", DateOrder::Dmy),
            [date!(2024 - 03 - 12)]
        );
        assert!(dates("lO.Il.2024", DateOrder::Dmy).is_empty());
        assert!(dates("Il.03.2024", DateOrder::Dmy).is_empty());
    }

    #[test]
    fn what_fits_no_reading_is_refused() {
        for text in [
            "12.03/2024",
            "10 - 12 - 2024",
            "2024-03-15-001",
            "Ref 1.10.03.2024",
            "10.1.1.10",
            "192.168.10.10",
            "1.2.10",
            "31.02.2024",
            "2024-13-01",
            "12.345.2024",
            "030/1203/2024",
            "DE89 3704 0044 0532 0130 00",
            "+49 30 1234-5678",
            "Tél. 01.23.45.67.89",
        ] {
            assert!(dates(text, DateOrder::Dmy).is_empty(), "{text}");
        }
    }

    #[test]
    fn a_two_digit_year_is_never_in_the_future() {
        assert_eq!(dates("14.06.24", DateOrder::Dmy), [date!(2024 - 06 - 14)]);
        assert_eq!(dates("14.06.99", DateOrder::Dmy), [date!(1999 - 06 - 14)]);
        assert_eq!(dates("6/14/24", DateOrder::Mdy), [date!(2024 - 06 - 14)]);
        assert_eq!(dates("6.14.24", DateOrder::Mdy), Vec::<Date>::new());
    }
}
