//! The fuzzy rule: a phrase is found when some run of the text's words is at least
//! [`THRESHOLD`] similar to it — Paperless-ngx's `partial_ratio(…) >= 90`, aligned on
//! words rather than on characters. The similarity is RapidFuzz's `ratio` (the Indel
//! distance, normalized), the scorer Paperless-ngx itself uses; the runs have one word
//! fewer, as many or one more than the phrase, so a word OCR split in two or two it ran
//! together still match.

use rapidfuzz::fuzz::{Args, RatioBatchComparator};

use super::words::Words;

/// Least similarity of a match, 0 to 1 (Paperless-ngx: 90 of 100).
pub const THRESHOLD: f64 = 0.9;

/// A phrase (words, folded like the text) compiled for one text after another.
pub(super) struct Fuzzy {
    phrase: String,
    words: usize,
    chars: usize,
    scorer: RatioBatchComparator<char>,
}

impl Fuzzy {
    pub(super) fn new(words: &[String]) -> Self {
        let phrase = words.join(" ");
        Self {
            chars: phrase.chars().count(),
            words: words.len(),
            scorer: RatioBatchComparator::new(phrase.chars()),
            phrase,
        }
    }

    /// The phrase as compared (for the log and tests).
    #[cfg(test)]
    pub(super) fn phrase(&self) -> &str {
        &self.phrase
    }

    pub(super) fn found_in(&self, text: &Words) -> bool {
        let spelled: Vec<&str> = text.spelled().collect();
        let lengths: Vec<usize> = spelled.iter().map(|word| word.chars().count()).collect();
        let mut window = String::with_capacity(self.phrase.len() * 2);
        let args = Args::default().score_cutoff(THRESHOLD);
        let sizes = self.words.saturating_sub(1).max(1)..=self.words + 1;
        for size in sizes {
            for start in 0..spelled.len().saturating_sub(size - 1) {
                let chars: usize = lengths[start..start + size].iter().sum::<usize>() + size - 1;
                // ratio = 2·common / (a + b) ≤ 2·min / (a + b): a run too short or too
                // long cannot reach the threshold, so it is not scored at all.
                let (short, long) = (chars.min(self.chars), chars.max(self.chars));
                if (2 * short) as f64 / ((short + long) as f64) < THRESHOLD {
                    continue;
                }
                window.clear();
                for (at, word) in spelled[start..start + size].iter().enumerate() {
                    if at > 0 {
                        window.push(' ');
                    }
                    window.push_str(word);
                }
                if self
                    .scorer
                    .similarity_with_args(window.chars(), &args)
                    .is_some()
                {
                    return true;
                }
            }
        }
        false
    }
}
