//! A table of each algorithm on real-looking text, and the rules that are refused.

use super::*;
use MatchAlgorithm as A;

const INVOICE: &str = "ACME Supplies GmbH & Co. KG\nRechnung Nr. 4711\n\
                       Rechnungsdatum: 15.03.2024\nSehr geehrte Frau Müller,\n\
                       wir berechnen Ihnen die Lieferung vom 12.03.2024.\n\
                       Telekom Deutschland, Kundennummer 0815-42";

fn rule(algorithm: MatchAlgorithm, text: &str, case_insensitive: bool) -> Rule {
    Rule {
        algorithm,
        text: text.to_owned(),
        case_insensitive,
    }
}

#[test]
fn each_algorithm_finds_what_it_should_and_nothing_else() {
    // (algorithm, match text, case-insensitive, matches INVOICE)
    let table: &[(A, &str, bool, bool)] = &[
        (A::Never, "rechnung", true, false),
        (A::Any, "invoice rechnung", true, true),
        (A::Any, "invoice facture", true, false),
        // Whole words only: "Rechnungsdatum" is not "Rechnung" plus something.
        (A::Any, "rechnungs", true, false),
        (A::Any, "RECHNUNG", false, false),
        (A::Any, "Rechnung", false, true),
        (A::Any, "müller", true, true),
        (A::Any, "MÜLLER", true, true),
        // A quoted phrase is one term: its words must follow each other.
        (A::Any, r#"invoice "acme supplies""#, true, true),
        (A::Any, r#""acme gmbh""#, true, false),
        (A::All, "acme rechnung 4711", true, true),
        (A::All, "acme rechnung invoice", true, false),
        (A::All, r#""Supplies GmbH" Telekom"#, false, true),
        (A::All, r#""supplies gmbh" Telekom"#, false, false),
        // Punctuation and line breaks neither split nor join the words of a phrase.
        (A::Exact, "ACME Supplies GmbH & Co. KG", true, true),
        (A::Exact, "co kg rechnung nr 4711", true, true),
        (A::Exact, "Telekom Deutschland", true, true),
        (A::Exact, "Deutschland Telekom", true, false),
        (A::Exact, "acme supplies", false, false),
        (A::Exact, "0815-42", true, true),
        (A::Regex, r"Rechnung Nr\. \d{4}", true, true),
        (A::Regex, r"rechnung nr\. \d{4}", false, false),
        (
            A::Regex,
            r"(?m)^Rechnungsdatum: \d{2}\.\d{2}\.\d{4}$",
            true,
            true,
        ),
        (A::Regex, r"Kundennummer \d{5}", true, false),
        (A::Regex, r"\bM\w+ler\b", true, true),
        // OCR-mangled names within 90 %: a letter off, a letter missing, one split in two.
        (A::Fuzzy, "ACME Suplies GmbH", true, true),
        (A::Fuzzy, "Telecom Deutschland", true, true),
        (A::Fuzzy, "Tele kom Deutschland", true, true),
        (A::Fuzzy, "Acme Supplies", false, false),
        (A::Fuzzy, "ACME Supplies", false, true),
        (A::Fuzzy, "Globex Corporation", true, false),
        (A::Fuzzy, "Deutsche Bahn", true, false),
    ];
    let text = DocumentText::new(INVOICE);
    for (algorithm, match_text, case_insensitive, expected) in table {
        let matcher = Matcher::compile(&rule(*algorithm, match_text, *case_insensitive))
            .unwrap_or_else(|fault| panic!("{algorithm} {match_text:?} refused: {fault}"));
        assert_eq!(
            matcher.matches(&text),
            *expected,
            "{algorithm} {match_text:?} (case-insensitive: {case_insensitive})"
        );
    }
}

#[test]
fn an_empty_text_matches_no_rule() {
    let text = DocumentText::new("");
    for algorithm in MatchAlgorithm::ALL {
        let Ok(matcher) = Matcher::compile(&rule(*algorithm, "rechnung", true)) else {
            panic!("{algorithm} refused");
        };
        assert!(!matcher.matches(&text), "{algorithm}");
    }
}

#[test]
fn fuzzy_compares_the_phrase_as_words() {
    let Ok(matcher) = Matcher::compile(&rule(MatchAlgorithm::Fuzzy, " ACME,  GmbH! ", true)) else {
        panic!("refused");
    };
    let How::Fuzzy(fuzzy) = &matcher.how else {
        panic!("not fuzzy");
    };
    assert_eq!(fuzzy.phrase(), "acme gmbh");
}

#[test]
fn bad_rules_are_refused_with_a_reason() {
    let long = "word ".repeat(60);
    let table: &[(A, &str, &str)] = &[
        (A::Any, "", "invalid_rule"),
        (A::All, " -- ", "invalid_rule"),
        (A::Exact, "...", "invalid_rule"),
        (A::Fuzzy, "", "invalid_rule"),
        (A::Regex, "", "invalid_rule"),
        (A::Any, "tab\there", "invalid_rule"),
        (A::Any, &long, "invalid_rule"),
        (
            A::Fuzzy,
            "a very long company name that is no name at all but a whole sentence",
            "invalid_rule",
        ),
        (A::Regex, "(unclosed", "invalid_regex"),
        (A::Regex, r"\p{NoSuchClass}", "invalid_regex"),
        // Hostile: tiny to send, enormous once compiled.
        (A::Regex, r"\w{1000}", "regex_too_large"),
        (A::Regex, r"(?:(?:a{100}){100}){100}", "regex_too_large"),
        (A::Regex, r"[\p{L}\p{N}]{200}\s{200}", "regex_too_large"),
    ];
    for (algorithm, text, code) in table {
        match Matcher::compile(&rule(*algorithm, text, true)) {
            Ok(_) => panic!("{algorithm} {text:?} accepted"),
            Err(fault) => assert_eq!(fault.code(), *code, "{algorithm} {text:?}: {fault}"),
        }
    }
    // A rule that never matches may keep a text, but not an unbounded one.
    assert!(Matcher::compile(&rule(A::Never, "", true)).is_ok());
    assert!(Matcher::compile(&rule(A::Never, &long, true)).is_err());
}

#[test]
fn a_syntax_error_says_why_in_one_line() {
    let Err(fault) = Matcher::compile(&rule(MatchAlgorithm::Regex, "a(b", true)) else {
        panic!("accepted");
    };
    let message = fault.to_string();
    assert!(!message.contains('\n'), "{message}");
    assert!(message.contains("unclosed"), "{message}");
}

#[test]
fn tags_all_match_and_the_first_correspondent_wins() {
    let candidate = |algorithm, text: &str| Candidate {
        id: Uuid::now_v7(),
        rule: rule(algorithm, text, true),
    };
    let tags = [
        candidate(MatchAlgorithm::Any, "rechnung"),
        candidate(MatchAlgorithm::Any, "invoice"),
        candidate(MatchAlgorithm::Exact, "frau müller"),
    ];
    let correspondents = [
        candidate(MatchAlgorithm::Any, "globex"),
        candidate(MatchAlgorithm::Fuzzy, "ACME Supplies"),
        candidate(MatchAlgorithm::Any, "telekom"),
    ];
    let matched = evaluate(&tags, &correspondents, INVOICE, || false).expect("not stopped");
    assert_eq!(matched.tag_ids, [tags[0].id, tags[2].id]);
    assert_eq!(matched.correspondent_id, Some(correspondents[1].id));
    assert_eq!(
        evaluate(&tags, &correspondents, "nothing here", || false),
        Some(Matched::default())
    );
}

#[test]
fn a_stopped_evaluation_ends_between_two_rules() {
    let tags: Vec<Candidate> = (0..10)
        .map(|n| Candidate {
            id: Uuid::now_v7(),
            rule: rule(A::Any, &format!("word{n}"), true),
        })
        .collect();
    let asked = std::cell::Cell::new(0);
    let stopped = || {
        asked.set(asked.get() + 1);
        asked.get() > 3
    };
    assert_eq!(evaluate(&tags, &[], INVOICE, stopped), None);
    assert_eq!(
        asked.get(),
        4,
        "it stopped at the first rule after being told"
    );
}
