//! A text as the word rules see it: its words (runs of letters and digits, so punctuation
//! and line breaks never split or join a match), each interned once, in order.

use std::collections::HashMap;

/// The words of one text, as ids into its vocabulary, in the order they appear.
#[derive(Debug, Default)]
pub(super) struct Words {
    ids: HashMap<String, u32>,
    /// The vocabulary, by id.
    spelled: Vec<String>,
    /// The text's words, in order.
    sequence: Vec<u32>,
}

/// The words of `text`, case-folded when `fold`: Unicode lowercase, and `ß` as `ss`
/// (its capital is written `SS`), so `GRÜSSE`, `Grüße` and `grüsse` are one word.
pub(super) fn words_of(text: &str, fold: bool) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(move |word| {
            if !fold {
                return word.to_owned();
            }
            let lower = word.to_lowercase();
            if lower.contains('ß') {
                lower.replace('ß', "ss")
            } else {
                lower
            }
        })
}

impl Words {
    pub(super) fn new(text: &str, fold: bool) -> Self {
        let mut words = Self::default();
        for word in words_of(text, fold) {
            let next = u32::try_from(words.spelled.len()).unwrap_or(u32::MAX);
            let id = *words.ids.entry(word).or_insert_with_key(|word| {
                words.spelled.push(word.clone());
                next
            });
            words.sequence.push(id);
        }
        words
    }

    /// True when `phrase` (words, already folded like this text) appears as consecutive
    /// words. One word is a lookup; a longer phrase a scan of word ids.
    pub(super) fn contains_phrase(&self, phrase: &[String]) -> bool {
        let Some(ids) = phrase
            .iter()
            .map(|word| self.ids.get(word).copied())
            .collect::<Option<Vec<u32>>>()
        else {
            return false;
        };
        match ids.as_slice() {
            [] => false,
            [_] => true,
            ids => self.sequence.windows(ids.len()).any(|window| window == ids),
        }
    }

    /// The text's words in order, as the vocabulary spells them.
    pub(super) fn spelled(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.sequence
            .iter()
            .map(|&id| self.spelled[id as usize].as_str())
    }
}

/// The terms of a word rule's text: words apart, or a `"quoted phrase"` as one term
/// (Paperless-ngx's syntax), each as its words. Terms without a word are dropped.
pub(super) fn terms(text: &str, fold: bool) -> Vec<Vec<String>> {
    let mut terms = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let term;
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').unwrap_or(quoted.len());
            term = &quoted[..end];
            rest = quoted.get(end + 1..).unwrap_or("");
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            term = &rest[..end];
            rest = &rest[end..];
        }
        let words: Vec<String> = words_of(term, fold).collect();
        if !words.is_empty() {
            terms.push(words);
        }
    }
    terms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_letters_and_digits_and_phrases_are_consecutive_words() {
        let words = Words::new("ACME GmbH & Co.\nRechnung Nr. 4711, Grüße", true);
        let phrase = |text: &str| words_of(text, true).collect::<Vec<_>>();
        assert!(words.contains_phrase(&phrase("acme gmbh")));
        assert!(words.contains_phrase(&phrase("GmbH Co")));
        assert!(words.contains_phrase(&phrase("co rechnung")));
        assert!(words.contains_phrase(&phrase("GRÜSSE")));
        assert!(words.contains_phrase(&phrase("grüße")));
        assert!(!words.contains_phrase(&phrase("acme co")));
        assert!(!words.contains_phrase(&phrase("47")));
        assert!(!words.contains_phrase(&[]));
    }

    #[test]
    fn quoted_phrases_are_one_term() {
        assert_eq!(
            terms(r#"invoice "ACME GmbH" "unterminated phrase"#, true),
            [
                vec!["invoice".to_owned()],
                vec!["acme".to_owned(), "gmbh".to_owned()],
                vec!["unterminated".to_owned(), "phrase".to_owned()],
            ]
        );
        assert!(terms(r#" "" -- "#, true).is_empty());
    }
}
