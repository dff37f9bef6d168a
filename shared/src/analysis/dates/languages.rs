//! The languages dates are read in: one table row per language, and nothing else per
//! language anywhere. A row names the twelve months (full name first, then the
//! abbreviations and spellings documents use, written as the language writes them:
//! diacritics are folded away at lookup, so `février`, `fevrier` and OCR's `fevrier` are
//! one name), the words that say the date after them is the issue date, and the words
//! that say it is some other date (due, birth, delivery, the end of a period). A new
//! language is one variant and one row.

use std::collections::HashMap;
use std::fmt;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

/// A language dates are read in (Paperless-ngx's `DATE_PARSER_LANGUAGES`), by its ISO
/// 639-1 code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DateLanguage {
    En,
    De,
    Fr,
    Es,
    It,
    Nl,
    Pt,
}

impl DateLanguage {
    pub const ALL: [DateLanguage; 7] = [
        Self::En,
        Self::De,
        Self::Fr,
        Self::Es,
        Self::It,
        Self::Nl,
        Self::Pt,
    ];

    pub fn code(self) -> &'static str {
        match self {
            Self::En => "en",
            Self::De => "de",
            Self::Fr => "fr",
            Self::Es => "es",
            Self::It => "it",
            Self::Nl => "nl",
            Self::Pt => "pt",
        }
    }

    /// The language of a code, case-insensitively (`"DE"` is German).
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|language| language.code().eq_ignore_ascii_case(code.trim()))
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for DateLanguage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// A set of languages, as cheap to copy as the date order beside it.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct LanguageSet(u8);

impl LanguageSet {
    pub const ALL: LanguageSet = LanguageSet((1 << DateLanguage::ALL.len()) - 1);

    pub fn of(languages: &[DateLanguage]) -> Self {
        Self(
            languages
                .iter()
                .fold(0, |bits, language| bits | language.bit()),
        )
    }

    pub fn contains(self, language: DateLanguage) -> bool {
        self.0 & language.bit() != 0
    }

    pub fn intersects(self, other: LanguageSet) -> bool {
        self.0 & other.0 != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    fn with(self, language: DateLanguage) -> Self {
        Self(self.0 | language.bit())
    }

    /// Its languages, in the order of [`DateLanguage::ALL`].
    pub fn languages(self) -> Vec<DateLanguage> {
        DateLanguage::ALL
            .into_iter()
            .filter(|language| self.contains(*language))
            .collect()
    }
}

impl fmt::Debug for LanguageSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.languages()).finish()
    }
}

/// One language's row.
pub(super) struct Language {
    pub language: DateLanguage,
    /// January to December: each month's names, full name first.
    pub months: [&'static [&'static str]; 12],
    /// Single words before a date that make it the issue date ("date", "Datum", "le").
    pub issue_words: &'static [&'static str],
    /// Single words before a date that make it another date ("due", "fällig", "au").
    pub other_words: &'static [&'static str],
}

pub(super) const LANGUAGES: &[Language] = &[
    Language {
        language: DateLanguage::En,
        months: [
            &["january", "jan"],
            &["february", "feb"],
            &["march", "mar"],
            &["april", "apr"],
            &["may"],
            &["june", "jun"],
            &["july", "jul"],
            &["august", "aug"],
            &["september", "sep", "sept"],
            &["october", "oct"],
            &["november", "nov"],
            &["december", "dec"],
        ],
        issue_words: &["date", "dated", "issued", "invoiced"],
        other_words: &[
            "due",
            "payable",
            "until",
            "expires",
            "expiry",
            "expiration",
            "birth",
            "born",
            "dob",
            "period",
            "delivery",
            "delivered",
            "shipped",
            "service",
            "arrival",
            "departure",
            "from",
            "to",
            "through",
            "since",
            "valid",
            "by",
        ],
    },
    Language {
        language: DateLanguage::De,
        months: [
            &["januar", "jänner", "jan", "jän"],
            &["februar", "feber", "feb"],
            &["märz", "maerz", "mär", "mrz"],
            &["april", "apr"],
            &["mai"],
            &["juni", "jun"],
            &["juli", "jul"],
            &["august", "aug"],
            &["september", "sep", "sept"],
            &["oktober", "okt"],
            &["november", "nov"],
            &["dezember", "dez"],
        ],
        issue_words: &[
            "datum",
            "rechnungsdatum",
            "belegdatum",
            "ausstellungsdatum",
            "briefdatum",
            "abrechnungsdatum",
            "ausgestellt",
            "erstellt",
            "den",
        ],
        other_words: &[
            "fällig",
            "fälligkeit",
            "fälligkeitsdatum",
            "zahlbar",
            "zahlungsziel",
            "bis",
            "ab",
            "von",
            "geboren",
            "geb",
            "geburtsdatum",
            "gültig",
            "lieferdatum",
            "leistungsdatum",
            "leistungszeitraum",
            "zeitraum",
            "anreise",
            "abreise",
            "ablauf",
        ],
    },
    Language {
        language: DateLanguage::Fr,
        months: [
            &["janvier", "janv"],
            &["février", "févr", "fév"],
            &["mars"],
            &["avril", "avr"],
            &["mai"],
            &["juin"],
            &["juillet", "juil"],
            &["août"],
            &["septembre", "sept"],
            &["octobre", "oct"],
            &["novembre", "nov"],
            &["décembre", "déc"],
        ],
        issue_words: &["date", "le", "émis", "émise", "émission", "établie"],
        other_words: &[
            "échéance",
            "limite",
            "né",
            "née",
            "naissance",
            "jusqu",
            "au",
            "avant",
            "livraison",
            "livré",
            "valable",
            "expire",
            "expiration",
            "période",
            "arrivée",
            "départ",
        ],
    },
    Language {
        language: DateLanguage::Es,
        months: [
            &["enero", "ene"],
            &["febrero", "feb"],
            &["marzo", "mar"],
            &["abril", "abr"],
            &["mayo", "may"],
            &["junio", "jun"],
            &["julio", "jul"],
            &["agosto", "ago"],
            &["septiembre", "setiembre", "sep", "sept", "set"],
            &["octubre", "oct"],
            &["noviembre", "nov"],
            &["diciembre", "dic"],
        ],
        issue_words: &["fecha", "emisión", "emitida", "expedición", "expedida"],
        other_words: &[
            "vencimiento",
            "vence",
            "válido",
            "válida",
            "hasta",
            "nacimiento",
            "nacido",
            "nacida",
            "entrega",
            "período",
            "periodo",
            "desde",
            "al",
            "límite",
        ],
    },
    Language {
        language: DateLanguage::It,
        months: [
            &["gennaio", "gen"],
            &["febbraio", "feb"],
            &["marzo", "mar"],
            &["aprile", "apr"],
            &["maggio", "mag"],
            &["giugno", "giu"],
            &["luglio", "lug"],
            &["agosto", "ago"],
            &["settembre", "set", "sett"],
            &["ottobre", "ott"],
            &["novembre", "nov"],
            &["dicembre", "dic"],
        ],
        issue_words: &["data", "emissione", "emessa", "lì"],
        other_words: &[
            "scadenza", "scade", "entro", "valido", "valida", "fino", "nato", "nata", "nascita",
            "consegna", "periodo", "dal", "al",
        ],
    },
    Language {
        language: DateLanguage::Nl,
        months: [
            &["januari", "jan"],
            &["februari", "feb"],
            &["maart", "mrt"],
            &["april", "apr"],
            &["mei"],
            &["juni", "jun"],
            &["juli", "jul"],
            &["augustus", "aug"],
            &["september", "sep", "sept"],
            &["oktober", "okt"],
            &["november", "nov"],
            &["december", "dec"],
        ],
        issue_words: &["datum", "factuurdatum", "dagtekening", "uitgegeven"],
        other_words: &[
            "vervaldatum",
            "vervalt",
            "uiterlijk",
            "voor",
            "geboren",
            "geboortedatum",
            "geldig",
            "tot",
            "leverdatum",
            "levering",
            "periode",
            "van",
        ],
    },
    Language {
        language: DateLanguage::Pt,
        months: [
            &["janeiro", "jan"],
            &["fevereiro", "fev"],
            &["março", "mar"],
            &["abril", "abr"],
            &["maio", "mai"],
            &["junho", "jun"],
            &["julho", "jul"],
            &["agosto", "ago"],
            &["setembro", "set"],
            &["outubro", "out"],
            &["novembro", "nov"],
            &["dezembro", "dez"],
        ],
        issue_words: &["data", "emissão", "emitida", "emitido"],
        other_words: &[
            "vencimento",
            "vence",
            "validade",
            "válido",
            "válida",
            "até",
            "nascimento",
            "nascido",
            "nascida",
            "entrega",
            "período",
            "desde",
        ],
    },
];

/// A word as the tables are looked up by: lowercase, diacritics dropped (`Août` and
/// `aout`, `MÄRZ` and `marz` are one word), so a document, or OCR, that writes a name
/// without its accents still finds it.
pub(super) fn fold(word: &str) -> String {
    word.chars()
        .flat_map(char::to_lowercase)
        .map(|letter| match letter {
            'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' => 'a',
            'ç' => 'c',
            'è' | 'é' | 'ê' | 'ë' => 'e',
            'ì' | 'í' | 'î' | 'ï' => 'i',
            'ñ' => 'n',
            'ò' | 'ó' | 'ô' | 'õ' | 'ö' => 'o',
            'ù' | 'ú' | 'û' | 'ü' => 'u',
            other => other,
        })
        .collect()
}

/// Every folded month name: its month (1 to 12) and the languages that write it so.
static MONTHS: LazyLock<HashMap<String, (u8, LanguageSet)>> = LazyLock::new(|| {
    let mut months: HashMap<String, (u8, LanguageSet)> = HashMap::new();
    for row in LANGUAGES {
        for (number, names) in (1u8..).zip(row.months) {
            for name in names {
                // A name two languages share means the same month in both (a unit test
                // holds the table to that), so the first month seen stands.
                let entry = months
                    .entry(fold(name))
                    .or_insert((number, LanguageSet::default()));
                entry.1 = entry.1.with(row.language);
            }
        }
    }
    months
});

/// What a word before a date says about it, in which languages.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Hint {
    pub issue: LanguageSet,
    pub other: LanguageSet,
}

static HINTS: LazyLock<HashMap<String, Hint>> = LazyLock::new(|| {
    let mut hints: HashMap<String, Hint> = HashMap::new();
    for row in LANGUAGES {
        for word in row.issue_words {
            let hint = hints.entry(fold(word)).or_default();
            hint.issue = hint.issue.with(row.language);
        }
        for word in row.other_words {
            let hint = hints.entry(fold(word)).or_default();
            hint.other = hint.other.with(row.language);
        }
    }
    hints
});

/// The month a name stands for in one of `languages` (any case, with or without
/// diacritics).
pub(super) fn month(name: &str, languages: LanguageSet) -> Option<u8> {
    MONTHS
        .get(&fold(name))
        .filter(|(_, written_in)| written_in.intersects(languages))
        .map(|(number, _)| *number)
}

/// What a (folded) word before a date says in one of `languages`.
pub(super) fn hint(folded: &str, languages: LanguageSet) -> Option<Hint> {
    HINTS.get(folded).copied().map(|hint| Hint {
        issue: if hint.issue.intersects(languages) {
            hint.issue
        } else {
            LanguageSet::default()
        },
        other: if hint.other.intersects(languages) {
            hint.other
        } else {
            LanguageSet::default()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_two_languages_share_is_the_same_month_in_both() {
        let mut seen: HashMap<String, (u8, DateLanguage)> = HashMap::new();
        for row in LANGUAGES {
            for (number, names) in (1u8..).zip(row.months) {
                for name in names {
                    if let Some((other, language)) = seen.insert(fold(name), (number, row.language))
                    {
                        assert_eq!(
                            other, number,
                            "{name:?} is month {other} in {language} and {number} in {}",
                            row.language
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_language_has_one_row_with_names_for_every_month() {
        for language in DateLanguage::ALL {
            let rows: Vec<_> = LANGUAGES
                .iter()
                .filter(|row| row.language == language)
                .collect();
            assert_eq!(rows.len(), 1, "{language}");
            for names in rows[0].months {
                assert!(!names.is_empty(), "{language}");
                // The date pattern takes words of 3 to 12 letters.
                for name in names {
                    assert!((3..=12).contains(&name.chars().count()), "{name}");
                }
            }
        }
    }

    #[test]
    fn no_word_is_both_an_issue_word_and_another_dates_word_in_one_language() {
        for row in LANGUAGES {
            for word in row.issue_words {
                assert!(
                    !row.other_words
                        .iter()
                        .any(|other| fold(other) == fold(word)),
                    "{word} in {}",
                    row.language
                );
            }
        }
    }

    #[test]
    fn names_are_found_with_or_without_diacritics_and_only_in_the_chosen_languages() {
        let french = LanguageSet::of(&[DateLanguage::Fr]);
        assert_eq!(month("Août", french), Some(8));
        assert_eq!(month("AOUT", french), Some(8));
        assert_eq!(month("décembre", french), Some(12));
        assert_eq!(month("decembre", french), Some(12));
        assert_eq!(month("märz", LanguageSet::of(&[DateLanguage::De])), Some(3));
        assert_eq!(month("Marz", LanguageSet::of(&[DateLanguage::De])), Some(3));
        assert_eq!(
            month("marco", LanguageSet::of(&[DateLanguage::Pt])),
            Some(3)
        );
        assert_eq!(month("maart", french), None);
        assert_eq!(month("maart", LanguageSet::ALL), Some(3));
        assert_eq!(month("mayo", LanguageSet::of(&[DateLanguage::En])), None);
    }

    #[test]
    fn codes_parse_in_any_case_and_sets_list_their_languages() {
        assert_eq!(DateLanguage::parse(" DE "), Some(DateLanguage::De));
        assert_eq!(DateLanguage::parse("xx"), None);
        let set = LanguageSet::of(&[DateLanguage::Pt, DateLanguage::En]);
        assert_eq!(set.languages(), vec![DateLanguage::En, DateLanguage::Pt]);
        assert_eq!(LanguageSet::ALL.languages(), DateLanguage::ALL.to_vec());
        assert!(LanguageSet::default().is_empty());
    }
}
