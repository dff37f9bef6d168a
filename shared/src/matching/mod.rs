//! Matching rules: how a tag or a correspondent finds its documents by their text, at the
//! end of each analysis (Paperless-ngx's model). A rule is an algorithm, a match text and
//! a case flag:
//!
//! - `none`: never matches (the label is the user's to set);
//! - `any`: some word of the match text is a word of the document;
//! - `all`: every word of it is;
//! - `exact`: the whole match text is, as consecutive words;
//! - `regex`: a regular expression (the `regex` crate) is found in the text;
//! - `fuzzy`: some run of the document's words is at least 90 % similar to the match text.
//!
//! Words are runs of letters and digits: punctuation and line breaks neither split nor
//! join a match, and `"a quoted phrase"` is one term of `any` and `all`. Every rule is
//! checked by [`Matcher::compile`] when a client sets it, so a stored rule compiles.
//!
//! Cost: the text is at most `analysis.max_text_chars`, a match text at most
//! [`MAX_MATCH_CHARS`] (a fuzzy one [`MAX_FUZZY_CHARS`]), a compiled expression at most
//! [`REGEX_SIZE_LIMIT`] with a lazy DFA of at most [`REGEX_DFA_SIZE_LIMIT`], and the
//! `regex` crate never backtracks: every rule runs in time linear in the text.

mod fuzzy;
mod words;

use std::cell::OnceCell;

use regex::{Regex, RegexBuilder};
use uuid::Uuid;

use crate::states::text_state;
use words::{Words, terms};

pub use fuzzy::THRESHOLD as FUZZY_THRESHOLD;

text_state!(
    /// How a rule reads a document's text.
    MatchAlgorithm {
        Never => "none",
        Any => "any",
        All => "all",
        Exact => "exact",
        Regex => "regex",
        Fuzzy => "fuzzy",
    }
);

/// Longest match text, in characters (Paperless-ngx's limit too).
pub const MAX_MATCH_CHARS: usize = 256;
/// Longest fuzzy match text: a name or a short phrase. Each run of the text's words is
/// scored against it, so its length multiplies the cost of the rule.
pub const MAX_FUZZY_CHARS: usize = 64;
/// Most heap a compiled expression may take (`RegexBuilder::size_limit`); a larger one
/// is refused when the rule is set.
pub const REGEX_SIZE_LIMIT: usize = 256 * 1024;
/// Most memory the expression's lazy DFA may take while it runs
/// (`RegexBuilder::dfa_size_limit`).
pub const REGEX_DFA_SIZE_LIMIT: usize = 1024 * 1024;

/// A tag's or correspondent's rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub algorithm: MatchAlgorithm,
    pub text: String,
    pub case_insensitive: bool,
}

impl Default for Rule {
    fn default() -> Self {
        Self {
            algorithm: MatchAlgorithm::Never,
            text: String::new(),
            case_insensitive: true,
        }
    }
}

/// Why a rule is refused, in words for the client who sent it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleFault {
    #[error(
        "a match text has at most {} characters and no control characters",
        MAX_MATCH_CHARS
    )]
    TextInvalid,
    #[error("a fuzzy match text has at most {} characters", MAX_FUZZY_CHARS)]
    FuzzyTooLong,
    #[error("this algorithm needs a match text with at least one word (letters or digits)")]
    NoWords,
    #[error("the regular expression is not valid: {0}")]
    RegexSyntax(String),
    #[error(
        "the regular expression is larger than Quire runs once compiled (at most {} bytes): use fewer or smaller repetitions and classes",
        REGEX_SIZE_LIMIT
    )]
    RegexTooLarge,
}

impl RuleFault {
    /// The stable code of the refusal.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TextInvalid | Self::FuzzyTooLong | Self::NoWords => "invalid_rule",
            Self::RegexSyntax(_) => "invalid_regex",
            Self::RegexTooLarge => "regex_too_large",
        }
    }
}

/// A rule compiled for one text after another.
pub struct Matcher {
    case_insensitive: bool,
    how: How,
}

enum How {
    Never,
    /// Terms, each a phrase of words; `all` says whether every one must be found.
    Terms {
        terms: Vec<Vec<String>>,
        all: bool,
    },
    Regex(Box<Regex>),
    Fuzzy(Box<fuzzy::Fuzzy>),
}

impl Matcher {
    /// Checks and compiles a rule: the one gate every rule passes when a client sets it.
    pub fn compile(rule: &Rule) -> Result<Self, RuleFault> {
        let text = rule.text.as_str();
        if text.chars().count() > MAX_MATCH_CHARS || text.chars().any(char::is_control) {
            return Err(RuleFault::TextInvalid);
        }
        let fold = rule.case_insensitive;
        let word_terms = |all| {
            let terms = terms(text, fold);
            if terms.is_empty() {
                return Err(RuleFault::NoWords);
            }
            Ok(How::Terms { terms, all })
        };
        let how = match rule.algorithm {
            MatchAlgorithm::Never => How::Never,
            MatchAlgorithm::Any => word_terms(false)?,
            MatchAlgorithm::All => word_terms(true)?,
            MatchAlgorithm::Exact => {
                let phrase: Vec<String> = words::words_of(text, fold).collect();
                if phrase.is_empty() {
                    return Err(RuleFault::NoWords);
                }
                How::Terms {
                    terms: vec![phrase],
                    all: true,
                }
            }
            MatchAlgorithm::Regex => How::Regex(Box::new(compile_regex(text, fold)?)),
            MatchAlgorithm::Fuzzy => {
                if text.chars().count() > MAX_FUZZY_CHARS {
                    return Err(RuleFault::FuzzyTooLong);
                }
                let phrase: Vec<String> = words::words_of(text, fold).collect();
                if phrase.is_empty() {
                    return Err(RuleFault::NoWords);
                }
                How::Fuzzy(Box::new(fuzzy::Fuzzy::new(&phrase)))
            }
        };
        Ok(Self {
            case_insensitive: fold,
            how,
        })
    }

    /// True when the rule finds the text.
    pub fn matches(&self, text: &DocumentText<'_>) -> bool {
        match &self.how {
            How::Never => false,
            How::Terms { terms, all } => {
                let words = text.words(self.case_insensitive);
                let mut found = terms.iter().map(|term| words.contains_phrase(term));
                if *all {
                    found.all(|found| found)
                } else {
                    found.any(|found| found)
                }
            }
            How::Regex(regex) => regex.is_match(text.raw),
            How::Fuzzy(fuzzy) => fuzzy.found_in(text.words(self.case_insensitive)),
        }
    }
}

fn compile_regex(pattern: &str, case_insensitive: bool) -> Result<Regex, RuleFault> {
    if pattern.is_empty() {
        return Err(RuleFault::NoWords);
    }
    RegexBuilder::new(pattern)
        .case_insensitive(case_insensitive)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_DFA_SIZE_LIMIT)
        .build()
        .map_err(|error| match error {
            regex::Error::CompiledTooBig(_) => RuleFault::RegexTooLarge,
            // The crate's message draws the pattern with a caret; its last line says why.
            regex::Error::Syntax(message) => RuleFault::RegexSyntax(
                message
                    .lines()
                    .rev()
                    .find(|line| !line.trim().is_empty())
                    .unwrap_or("syntax error")
                    .trim()
                    .trim_start_matches("error: ")
                    .to_owned(),
            ),
            _ => RuleFault::RegexSyntax("unsupported".to_owned()),
        })
}

/// A document's text, with its words split once for all the rules that need them (folded
/// for the case-insensitive ones, as written for the others).
pub struct DocumentText<'a> {
    raw: &'a str,
    folded: OnceCell<Words>,
    as_written: OnceCell<Words>,
}

impl<'a> DocumentText<'a> {
    pub fn new(raw: &'a str) -> Self {
        Self {
            raw,
            folded: OnceCell::new(),
            as_written: OnceCell::new(),
        }
    }

    fn words(&self, fold: bool) -> &Words {
        let cell = if fold { &self.folded } else { &self.as_written };
        cell.get_or_init(|| Words::new(self.raw, fold))
    }
}

/// One label's rule, as the analysis loads it.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub id: Uuid,
    pub rule: Rule,
}

/// What the rules found in one text: the tags, and the correspondent (the first by name
/// of those whose rule matched).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Matched {
    pub tag_ids: Vec<Uuid>,
    pub correspondent_id: Option<Uuid>,
}

/// The labels whose rules find `text`, in the order given; `None` when `stopped` said so
/// between two rules (the job was dropped: a run never outlives it by more than one
/// rule). CPU work linear in the text per rule: run it on a blocking thread. A stored
/// rule that no longer compiles (a limit was lowered) matches nothing and is logged.
pub fn evaluate(
    tags: &[Candidate],
    correspondents: &[Candidate],
    text: &str,
    stopped: impl Fn() -> bool,
) -> Option<Matched> {
    let text = DocumentText::new(text);
    let found = |candidate: &Candidate| match Matcher::compile(&candidate.rule) {
        Ok(matcher) => matcher.matches(&text),
        Err(fault) => {
            tracing::warn!(label_id = %candidate.id, code = fault.code(), "a stored matching rule does not compile, skipped");
            false
        }
    };
    let mut matched = Matched::default();
    for candidate in tags {
        if stopped() {
            return None;
        }
        if found(candidate) {
            matched.tag_ids.push(candidate.id);
        }
    }
    for candidate in correspondents {
        if stopped() {
            return None;
        }
        if found(candidate) {
            matched.correspondent_id = Some(candidate.id);
            break;
        }
    }
    Some(matched)
}

#[cfg(test)]
mod tests;
