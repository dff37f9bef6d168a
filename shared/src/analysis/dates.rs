//! DetermineIssuedAt: the most plausible issue date of a document, from its text, in the
//! tenant's languages and date order (`DateReading`: Paperless-ngx's
//! `DATE_PARSER_LANGUAGES` and `DATE_ORDER`). Finds every date written in digits
//! (`numeric`: `15.03.2024`, `03/15/2024`, `2024-03-15`, `14.06.24`, with OCR's slips
//! forgiven) or with a month name in one of the languages (`15 March 2024`,
//! `March 15, 2024`, `15. März 2024`, `1er avril 2023`, `15 de marzo de 2024`,
//! `7-nov-2022`; the names are one table, `languages`), drops impossible, future and
//! pre-1900 dates, and prefers a date after a word that announces the issue date
//! ("date", "Datum", "le", "fecha") over one after a word of a due date, a birth date or
//! a period. Every pattern is a `regex` (finite automata, no backtracking) and every
//! date costs a bounded look at the words before it, so the work is linear in the text
//! whatever the text.

mod languages;
mod numeric;
#[cfg(test)]
mod tests;

use std::sync::LazyLock;

use regex::Regex;
use time::{Date, Month};

pub use crate::config::DateOrder;
pub use languages::{DateLanguage, LanguageSet};

use numeric::{DIGIT, make_date, number};

/// How a tenant's documents are dated: the languages month names are read in, and the
/// order of an ambiguous numeric date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateReading {
    pub languages: LanguageSet,
    pub order: DateOrder,
}

impl DateReading {
    pub fn new(languages: &[DateLanguage], order: DateOrder) -> Self {
        Self {
            languages: LanguageSet::of(languages),
            order,
        }
    }
}

/// What may sit between a day and a month name, or a month name and a year: spaces (a
/// few: OCR spreads words), a dot, a comma, a dash (`7-nov-2022`).
const DAY_END: &str = r"(?:\.[ \t]{0,3}|[ \t]{1,3}|-)";
const MONTH_END: &str = r"(?:\.?,?[ \t]{1,3}|\.|-)";
/// A month name: a whole word of 3 to 12 letters, looked up in the table afterwards (a
/// word that is no month in the tenant's languages is no date).
const WORD: &str = r"(\p{L}{3,12})";

/// `15 March 2024`, `15. März 2024`, `1er avril 2023`, `1.º de abril de 2024`,
/// `the 3rd of May, 2021`.
static DAY_MONTH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?-u:\b)({DIGIT}{{1,2}})(?:\.?(?i:st|nd|rd|th|er|re|ère|e)|\.?[º°ª])?{DAY_END}(?:(?i:de|of)[ \t]{{1,3}})?{WORD}{MONTH_END}(?:(?i:de|del)[ \t]{{1,3}})?({DIGIT}{{4}})(?-u:\b)"
    ))
    .expect("day month pattern")
});

/// `March 15, 2024`, `Sept. 3rd, 2021`, `Dec 24 2020`, `marzo 15 de 2024`.
static MONTH_DAY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?-u:\b){WORD}(?:\.[ \t]{{0,3}}|[ \t]{{1,3}})({DIGIT}{{1,2}})(?:(?i:st|nd|rd|th)|[º°])?\.?,?[ \t]{{1,3}}(?:(?i:de|del)[ \t]{{1,3}})?({DIGIT}{{4}})(?-u:\b)"
    ))
    .expect("month day pattern")
});

#[derive(Debug, Clone, Copy)]
struct Candidate {
    date: Date,
    position: usize,
    short_year: bool,
}

fn named_date(year: &str, month: u8, day: &str) -> Option<Date> {
    make_date(i32::from(number(year)?), u16::from(month), number(day)?)
}

fn candidates(text: &str, reading: DateReading, this_year: i32) -> Vec<Candidate> {
    let mut found: Vec<Candidate> = numeric::find(text, reading.order, this_year)
        .map(|found| Candidate {
            date: found.date,
            position: found.start,
            short_year: found.short_year,
        })
        .collect();
    let mut push = |position: usize, date: Option<Date>| {
        if let Some(date) = date {
            found.push(Candidate {
                date,
                position,
                short_year: false,
            });
        }
    };
    for caps in DAY_MONTH.captures_iter(text) {
        push(
            caps.get(0).map_or(0, |whole| whole.start()),
            languages::month(&caps[2], reading.languages)
                .and_then(|month| named_date(&caps[3], month, &caps[1])),
        );
    }
    for caps in MONTH_DAY.captures_iter(text) {
        push(
            caps.get(0).map_or(0, |whole| whole.start()),
            languages::month(&caps[1], reading.languages)
                .and_then(|month| named_date(&caps[3], month, &caps[2])),
        );
    }
    found
}

/// At most this many characters before a date are read for its words.
const LEAD_CHARS: usize = 40;

/// The words right before `position`: on its line, after the last digit (a word before
/// an earlier number speaks of that number), at most `LEAD_CHARS` back; and whether a
/// number is right before them.
fn lead_in(text: &str, position: usize) -> (&str, bool) {
    let start = text[..position]
        .char_indices()
        .rev()
        .take(LEAD_CHARS)
        .take_while(|(_, letter)| *letter != '\n' && !letter.is_ascii_digit())
        .last()
        .map_or(position, |(index, _)| index);
    let after_number = text[..start].ends_with(|letter: char| letter.is_ascii_digit());
    (&text[start..position], after_number)
}

fn score(text: &str, candidate: &Candidate, reading: DateReading) -> i32 {
    let (lead, after_number) = lead_in(text, candidate.position);
    // `01.02.2024 - 29.02.2024`: the end of a period.
    let (mut issue, mut other) = (
        false,
        after_number && matches!(lead.trim(), "-" | "–" | "—"),
    );
    for word in lead
        .split(|letter: char| !letter.is_alphanumeric())
        .filter(|word| !word.is_empty())
    {
        if let Some(hint) = languages::hint(&languages::fold(word), reading.languages) {
            issue |= !hint.issue.is_empty();
            other |= !hint.other.is_empty();
        }
    }
    let mut score = 0;
    if other {
        score -= 10;
    }
    if issue {
        score += 5;
    }
    // `14.06.24` is a date, but a weaker one than a date with its whole year.
    if candidate.short_year {
        score -= 1;
    }
    score
}

/// The most plausible issue date in `text`, read as `reading` says, or `None`. `today`
/// bounds it from above.
pub fn detect_issued_at(text: &str, reading: DateReading, today: Date) -> Option<Date> {
    let floor = Date::from_calendar_date(1900, Month::January, 1).ok()?;
    // Best score first, then the earliest in the text (letterheads put the date on top).
    candidates(text, reading, today.year())
        .into_iter()
        .filter(|candidate| candidate.date >= floor && candidate.date <= today)
        .min_by_key(|candidate| {
            (
                std::cmp::Reverse(score(text, candidate, reading)),
                candidate.position,
            )
        })
        .map(|candidate| candidate.date)
}
