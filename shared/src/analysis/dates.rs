//! DetermineIssuedAt: the most plausible issue date of a document, from its text. Finds
//! every date written as ISO (`2024-03-15`), dotted (`15.03.2024`), slashed (`03/15/2024`,
//! read by the configured order unless a part above 12 decides), `15 March 2024` and
//! `March 15, 2024` (English, German and French month names), drops impossible, future
//! and pre-1900 dates, and prefers a date next to a word that announces the issue date
//! ("date", "Datum", "le") over one next to a due date, birth date or period end.

use std::sync::LazyLock;

use crate::config::DateOrder;
use regex::Regex;
use time::{Date, Month};

const MONTHS: &[(&str, u8)] = &[
    ("january", 1),
    ("jan", 1),
    ("januar", 1),
    ("jänner", 1),
    ("janvier", 1),
    ("janv", 1),
    ("february", 2),
    ("feb", 2),
    ("februar", 2),
    ("février", 2),
    ("fevrier", 2),
    ("févr", 2),
    ("fevr", 2),
    ("march", 3),
    ("mar", 3),
    ("märz", 3),
    ("maerz", 3),
    ("mars", 3),
    ("april", 4),
    ("apr", 4),
    ("avril", 4),
    ("avr", 4),
    ("may", 5),
    ("mai", 5),
    ("june", 6),
    ("jun", 6),
    ("juni", 6),
    ("juin", 6),
    ("july", 7),
    ("jul", 7),
    ("juli", 7),
    ("juillet", 7),
    ("juil", 7),
    ("august", 8),
    ("aug", 8),
    ("août", 8),
    ("aout", 8),
    ("september", 9),
    ("sep", 9),
    ("sept", 9),
    ("septembre", 9),
    ("october", 10),
    ("oct", 10),
    ("oktober", 10),
    ("okt", 10),
    ("octobre", 10),
    ("november", 11),
    ("nov", 11),
    ("novembre", 11),
    ("december", 12),
    ("dec", 12),
    ("dezember", 12),
    ("dez", 12),
    ("décembre", 12),
    ("decembre", 12),
    ("déc", 12),
];

fn month_alternation() -> String {
    let mut names: Vec<&str> = MONTHS.iter().map(|(name, _)| *name).collect();
    // Longest first, so "march" wins over "mar".
    names.sort_by_key(|name| std::cmp::Reverse(name.chars().count()));
    names.join("|")
}

static ISO: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b").expect("iso pattern"));
static DOTTED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(\d{1,2})\.(\d{1,2})\.(\d{4})\b").expect("dotted pattern"));
static SLASHED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b").expect("slashed pattern"));
static DAY_MONTH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i)\b(\d{{1,2}})(?:er|st|nd|rd|th)?\.?\s+({})\.?,?\s+(\d{{4}})\b",
        month_alternation()
    ))
    .expect("day month pattern")
});
static MONTH_DAY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i)\b({})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b",
        month_alternation()
    ))
    .expect("month day pattern")
});

/// Words right before a date that say it is the issue date, and words that say it is not.
const ISSUE_WORDS: &[&str] = &[
    "date",
    "dated",
    "issued",
    "invoice date",
    "datum",
    "rechnungsdatum",
    "belegdatum",
    "ausgestellt",
    "le ",
    "fait le",
    "date de facture",
    "émis",
    "emis",
];
const OTHER_WORDS: &[&str] = &[
    "due",
    "payable",
    "valid until",
    "expires",
    "expiry",
    "birth",
    "born",
    "period",
    "until",
    "bis",
    "fällig",
    "faellig",
    "zahlbar",
    "geboren",
    "gültig",
    "échéance",
    "echeance",
    "né le",
    "née le",
    "jusqu",
    "delivery",
    "lieferdatum",
    "leistungszeitraum",
    "service",
    "arrival",
    "departure",
    "date limite",
];

#[derive(Debug, Clone, Copy)]
struct Candidate {
    date: Date,
    position: usize,
}

fn month_number(name: &str) -> Option<u8> {
    let name = name.to_lowercase();
    MONTHS
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, number)| *number)
}

fn make_date(year: &str, month: u8, day: &str) -> Option<Date> {
    let year: i32 = year.parse().ok()?;
    let day: u8 = day.parse().ok()?;
    Date::from_calendar_date(year, Month::try_from(month).ok()?, day).ok()
}

fn numeric(text: &str) -> Option<u8> {
    text.parse().ok()
}

fn candidates(text: &str, order: DateOrder) -> Vec<Candidate> {
    let mut found = Vec::new();
    let mut push = |position: usize, date: Option<Date>| {
        if let Some(date) = date {
            found.push(Candidate { date, position });
        }
    };
    for caps in ISO.captures_iter(text) {
        push(
            caps.get(0).map_or(0, |m| m.start()),
            numeric(&caps[2]).and_then(|m| make_date(&caps[1], m, &caps[3])),
        );
    }
    for caps in DOTTED.captures_iter(text) {
        push(
            caps.get(0).map_or(0, |m| m.start()),
            numeric(&caps[2]).and_then(|m| make_date(&caps[3], m, &caps[1])),
        );
    }
    for caps in SLASHED.captures_iter(text) {
        let (Some(first), Some(second)) = (numeric(&caps[1]), numeric(&caps[2])) else {
            continue;
        };
        // A part above 12 cannot be a month, whatever the configured order says.
        let (month, day) = match order {
            _ if first > 12 => (second, first),
            _ if second > 12 => (first, second),
            DateOrder::Dmy => (second, first),
            DateOrder::Mdy => (first, second),
        };
        push(
            caps.get(0).map_or(0, |m| m.start()),
            make_date(&caps[3], month, &day.to_string()),
        );
    }
    for caps in DAY_MONTH.captures_iter(text) {
        push(
            caps.get(0).map_or(0, |m| m.start()),
            month_number(&caps[2]).and_then(|m| make_date(&caps[3], m, &caps[1])),
        );
    }
    for caps in MONTH_DAY.captures_iter(text) {
        push(
            caps.get(0).map_or(0, |m| m.start()),
            month_number(&caps[1]).and_then(|m| make_date(&caps[3], m, &caps[2])),
        );
    }
    found
}

/// The few words before `position`, lowercased, on the same line.
fn lead_in(text: &str, position: usize) -> String {
    let start = text[..position]
        .char_indices()
        .rev()
        .take(32)
        .last()
        .map_or(position, |(index, _)| index);
    let lead = &text[start..position];
    let lead = lead.rsplit('\n').next().unwrap_or(lead);
    lead.to_lowercase()
}

fn score(text: &str, candidate: &Candidate) -> i32 {
    let lead = lead_in(text, candidate.position);
    let mut score = 0;
    if OTHER_WORDS.iter().any(|word| lead.contains(word)) {
        score -= 10;
    }
    if ISSUE_WORDS.iter().any(|word| lead.contains(word)) {
        score += 5;
    }
    score
}

/// The most plausible issue date in `text`, or `None`. `today` bounds it from above.
pub fn detect_issued_at(text: &str, order: DateOrder, today: Date) -> Option<Date> {
    let floor = Date::from_calendar_date(1900, Month::January, 1).ok()?;
    let mut plausible: Vec<Candidate> = candidates(text, order)
        .into_iter()
        .filter(|candidate| candidate.date >= floor && candidate.date <= today)
        .collect();
    // Best score first, then the earliest in the text (letterheads put the date on top).
    plausible.sort_by_key(|candidate| {
        (
            std::cmp::Reverse(score(text, candidate)),
            candidate.position,
        )
    });
    plausible.first().map(|candidate| candidate.date)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::date;

    const TODAY: Date = date!(2026 - 11 - 30);

    fn dmy(text: &str) -> Option<Date> {
        detect_issued_at(text, DateOrder::Dmy, TODAY)
    }

    fn mdy(text: &str) -> Option<Date> {
        detect_issued_at(text, DateOrder::Mdy, TODAY)
    }

    #[test]
    fn iso_dates() {
        assert_eq!(dmy("Invoice 2024-03-15 #4411"), Some(date!(2024 - 03 - 15)));
        assert_eq!(
            dmy("Generated 2023-1-5 by the accounting system"),
            Some(date!(2023 - 01 - 05))
        );
    }

    #[test]
    fn german_invoice_with_due_date() {
        let text =
            "ACME GmbH\nRechnung Nr. 2024-117\nRechnungsdatum: 15.03.2024\nZahlbar bis 14.04.2024";
        assert_eq!(dmy(text), Some(date!(2024 - 03 - 15)));
    }

    #[test]
    fn due_date_first_does_not_win() {
        let text = "Payment due 30.04.2024\nInvoice date 31.03.2024";
        assert_eq!(dmy(text), Some(date!(2024 - 03 - 31)));
    }

    #[test]
    fn dotted_dates_are_day_first_whatever_the_order() {
        assert_eq!(mdy("Datum 03.04.2024"), Some(date!(2024 - 04 - 03)));
    }

    #[test]
    fn slashed_dates_follow_the_configured_order() {
        assert_eq!(dmy("Date: 03/04/2024"), Some(date!(2024 - 04 - 03)));
        assert_eq!(mdy("Date: 03/04/2024"), Some(date!(2024 - 03 - 04)));
    }

    #[test]
    fn a_part_above_twelve_decides_the_order() {
        assert_eq!(dmy("Receipt 03/15/2024 12:41"), Some(date!(2024 - 03 - 15)));
        assert_eq!(mdy("Quittung 15/03/2024"), Some(date!(2024 - 03 - 15)));
    }

    #[test]
    fn english_day_month_year() {
        assert_eq!(
            dmy("London, 15 March 2024\nDear Sir,"),
            Some(date!(2024 - 03 - 15))
        );
        assert_eq!(
            dmy("1st February 2022 – statement"),
            Some(date!(2022 - 02 - 01))
        );
    }

    #[test]
    fn english_month_day_year() {
        assert_eq!(dmy("New York, March 15, 2024"), Some(date!(2024 - 03 - 15)));
        assert_eq!(dmy("Issued Sept. 3rd, 2021"), Some(date!(2021 - 09 - 03)));
        assert_eq!(dmy("Dec 24 2020 receipt"), Some(date!(2020 - 12 - 24)));
    }

    #[test]
    fn german_month_names() {
        assert_eq!(
            dmy("Berlin, den 15. März 2024"),
            Some(date!(2024 - 03 - 15))
        );
        assert_eq!(dmy("München, 2. Oktober 2023"), Some(date!(2023 - 10 - 02)));
        assert_eq!(dmy("Wien, am 7. Jänner 2025"), Some(date!(2025 - 01 - 07)));
        assert_eq!(
            dmy("Hamburg, 31. Dezember 2019"),
            Some(date!(2019 - 12 - 31))
        );
    }

    #[test]
    fn french_month_names() {
        assert_eq!(dmy("Paris, le 15 mars 2024"), Some(date!(2024 - 03 - 15)));
        assert_eq!(dmy("Lyon, le 1er avril 2023"), Some(date!(2023 - 04 - 01)));
        assert_eq!(
            dmy("Facture du 3 février 2022"),
            Some(date!(2022 - 02 - 03))
        );
        assert_eq!(dmy("Genève, 12 décembre 2021"), Some(date!(2021 - 12 - 12)));
        assert_eq!(
            dmy("Bordeaux, le 20 août 2020"),
            Some(date!(2020 - 08 - 20))
        );
    }

    #[test]
    fn future_dates_are_rejected() {
        assert_eq!(dmy("Valid until 31.12.2030"), None);
        assert_eq!(
            dmy("Contract 01.01.2031, signed 05.05.2024"),
            Some(date!(2024 - 05 - 05))
        );
    }

    #[test]
    fn dates_before_1900_are_rejected() {
        assert_eq!(dmy("Founded 12 May 1889"), None);
        assert_eq!(
            dmy("Since 1850-01-01, invoice 2024-02-02"),
            Some(date!(2024 - 02 - 02))
        );
    }

    #[test]
    fn impossible_dates_are_skipped() {
        assert_eq!(
            dmy("31.02.2024 is no date, 29.02.2024 is one"),
            Some(date!(2024 - 02 - 29))
        );
        assert_eq!(dmy("29.02.2023"), None);
        assert_eq!(dmy("2024-13-01"), None);
    }

    #[test]
    fn text_without_dates_finds_nothing() {
        assert_eq!(
            dmy("A photo of a cat. No dates here, only 12/2024 and 3.5 kg."),
            None
        );
        assert_eq!(dmy(""), None);
    }

    #[test]
    fn a_birth_date_loses_to_the_letter_date() {
        let text = "Patient: Jane Doe, born 12.07.1985\nReport date: 04.11.2024";
        assert_eq!(dmy(text), Some(date!(2024 - 11 - 04)));
    }

    #[test]
    fn the_earliest_date_wins_among_equals() {
        let text = "Statement 01.10.2024\nTransactions: 02.10.2024 coffee, 05.10.2024 books";
        assert_eq!(dmy(text), Some(date!(2024 - 10 - 01)));
    }

    #[test]
    fn supermarket_receipt() {
        let text = "REWE Markt\nMilch 1,29\nBrot 2,49\nSUMME EUR 3,78\n14.06.2024 18:03 Bon 4471";
        assert_eq!(dmy(text), Some(date!(2024 - 06 - 14)));
    }

    #[test]
    fn us_receipt() {
        let text = "WALMART #1234\nTOTAL 23.45\n06/14/2024 05:03 PM";
        assert_eq!(mdy(text), Some(date!(2024 - 06 - 14)));
    }

    #[test]
    fn utility_bill_with_a_period() {
        let text = "Billing period 01.01.2024 - 31.03.2024\nBill date 05.04.2024\nDue 30.04.2024";
        assert_eq!(dmy(text), Some(date!(2024 - 04 - 05)));
    }

    #[test]
    fn insurance_letter_with_validity() {
        let text = "Allianz\nKöln, 10. Januar 2024\nIhre Police ist gültig bis 31.12.2024.";
        assert_eq!(dmy(text), Some(date!(2024 - 01 - 10)));
    }

    #[test]
    fn payslip() {
        let text = "Gehaltsabrechnung März 2024\nAbrechnungsdatum 28.03.2024";
        assert_eq!(dmy(text), Some(date!(2024 - 03 - 28)));
    }

    #[test]
    fn tax_notice_in_french() {
        let text = "Avis d'impôt 2023\nDate d'établissement : 31/07/2024\nDate limite de paiement : 15/09/2024";
        assert_eq!(dmy(text), Some(date!(2024 - 07 - 31)));
    }

    #[test]
    fn letter_with_reference_numbers_that_look_like_dates() {
        let text = "Az. 12.345.2024\nOur ref 2024/117\nBerlin, 08.08.2024";
        assert_eq!(dmy(text), Some(date!(2024 - 08 - 08)));
    }

    #[test]
    fn case_and_abbreviations_do_not_matter() {
        assert_eq!(dmy("DATE: 7 NOV 2022"), Some(date!(2022 - 11 - 07)));
        assert_eq!(
            dmy("invoice 7-nov-2022 fails, 7 nov. 2022 works"),
            Some(date!(2022 - 11 - 07))
        );
    }

    #[test]
    fn hotel_invoice_with_stay_dates() {
        let text = "Hotel Adlon\nArrival 10.05.2024 Departure 12.05.2024\nInvoice date 12.05.2024";
        assert_eq!(dmy(text), Some(date!(2024 - 05 - 12)));
    }

    #[test]
    fn delivery_note_prefers_the_document_date() {
        let text = "Lieferschein\nLieferdatum 02.02.2024\nDatum 01.02.2024";
        assert_eq!(dmy(text), Some(date!(2024 - 02 - 01)));
    }

    #[test]
    fn doctor_bill_in_english() {
        let text = "Dr. Smith\nDate of service: March 3, 2024\nStatement date: March 20, 2024\nPayment due: April 19, 2024";
        assert_eq!(dmy(text), Some(date!(2024 - 03 - 20)));
    }

    #[test]
    fn bank_statement_iso() {
        let text = "Kontoauszug 2024-05-31\nBuchung 2024-05-02 Miete\nBuchung 2024-05-15 Strom";
        assert_eq!(dmy(text), Some(date!(2024 - 05 - 31)));
    }

    #[test]
    fn today_is_allowed() {
        assert_eq!(dmy("Signed 30.11.2026"), Some(TODAY));
        assert_eq!(dmy("Signed 01.12.2026"), None);
    }

    #[test]
    fn numbers_glued_to_words_are_not_dates() {
        assert_eq!(dmy("SKU 1203.2024X and item A15.03.2024B"), None);
    }

    #[test]
    fn only_a_due_date_is_still_a_date() {
        // Better a due date than nothing: the user can correct it.
        assert_eq!(dmy("Due 30.04.2024"), Some(date!(2024 - 04 - 30)));
    }
}
