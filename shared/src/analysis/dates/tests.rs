//! The detector on whole documents. First the rules one at a time, then a table of
//! real-looking invoices, letters and statements in each language, with the date among
//! invoice numbers, amounts, IBANs and phone numbers, and dates as OCR mangles them.

use super::*;
use time::macros::date;

const TODAY: Date = date!(2026 - 11 - 30);

fn read(text: &str, languages: &[DateLanguage], order: DateOrder) -> Option<Date> {
    detect_issued_at(text, DateReading::new(languages, order), TODAY)
}

fn dmy(text: &str) -> Option<Date> {
    read(text, &DateLanguage::ALL, DateOrder::Dmy)
}

fn mdy(text: &str) -> Option<Date> {
    read(text, &DateLanguage::ALL, DateOrder::Mdy)
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
        dmy("invoice 7-nov-2022, 7 nov. 2022"),
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

/// One document of the table: the language and order its tenant reads it in, its text,
/// and the issue date a person would give it (`None`: it has no date, only numbers).
struct Document {
    name: &'static str,
    language: DateLanguage,
    order: DateOrder,
    text: &'static str,
    issued_at: Option<Date>,
}

use DateLanguage::{De, En, Es, Fr, It, Nl, Pt};
use DateOrder::{Dmy, Mdy, Ymd};

const DOCUMENTS: &[Document] = &[
    // English
    Document {
        name: "us invoice, ambiguous dates read month first",
        language: En,
        order: Mdy,
        text: "Acme Corp, 1200 Market St, Suite 400, San Francisco CA 94103\n\
               Phone (415) 555-0134  Fax 415-555-0199\n\
               INVOICE #INV-2024-0117\n\
               Invoice Date: 03/04/2024\n\
               Due Date: 04/03/2024\n\
               Subtotal $1,204.50  Tax 8.625% $103.89  Total $1,308.39",
        issued_at: Some(date!(2024 - 03 - 04)),
    },
    Document {
        name: "uk tax letter with a payment date",
        language: En,
        order: Dmy,
        text: "HM Revenue & Customs\nBX9 1AS\nTel 0300 200 3300\n\n14 February 2024\n\n\
               Dear Mr Smith,\nYour reference 123/AB45678\n\
               Please pay £1,250.00 by 31 March 2024.",
        issued_at: Some(date!(2024 - 02 - 14)),
    },
    Document {
        name: "uk bank statement, l for 1",
        language: En,
        order: Dmy,
        text: "Barclays Bank UK PLC\nSort code 20-00-00  Account 43871290\n\
               IBAN GB33 BUKB 2020 1555 5555 55\n\
               Period 01/02/2024 to 29/02/2024\n\
               Statement date: l2.03.2024\n\
               01 Feb  Opening balance 2,304.11\n15 Feb  Card payment TESCO 45.20",
        issued_at: Some(date!(2024 - 03 - 12)),
    },
    Document {
        name: "us receipt, stray spaces around the slashes",
        language: En,
        order: Mdy,
        text: "WALGREENS #04417\nSTORE 1-800-925-4733\n12 /03/ 2024  14:22\n\
               TOTAL 23.45\nVISA ****4471",
        issued_at: Some(date!(2024 - 12 - 03)),
    },
    Document {
        name: "order confirmation, O for 0",
        language: En,
        order: Dmy,
        text: "Order confirmation\nOrder no. 113-4567890-1234567\n\
               Order date: O1/O2/2024\nDelivery estimate: 05/02/2024\nItems: 3  Total £45.97",
        issued_at: Some(date!(2024 - 02 - 01)),
    },
    Document {
        name: "lease with an ordinal date, I for 1",
        language: En,
        order: Mdy,
        text: "Lease Agreement No. 2021/17\nThis agreement is made on the 3rd of May, 2021 \
               between Jane Roe and John Doe.\nRent $1,450.00 due March I5, 2022.",
        issued_at: Some(date!(2021 - 05 - 03)),
    },
    Document {
        name: "receipt in a year-first order",
        language: En,
        order: Ymd,
        text: "KIOSK 7\nReceipt 24/03/15 09:41\nTotal 12.50\nCard ****1234",
        issued_at: Some(date!(2024 - 03 - 15)),
    },
    // German
    Document {
        name: "german invoice, stray spaces, a period and a due date",
        language: De,
        order: Dmy,
        text: "Muster GmbH · Hauptstraße 12 · 10115 Berlin\n\
               Tel. +49 30 1234567-0 · USt-IdNr. DE123456789\n\
               IBAN DE89 3704 0044 0532 0130 00 · BIC COBADEFFXXX\n\
               Rechnung Nr. 2024-0315\n\
               Leistungszeitraum: 01.02.2024 - 29.02.2024\n\
               Rechnungsdatum: 12 .03. 2024\n\
               Gesamtbetrag 1.234,56 EUR, zahlbar bis 26.03.2024",
        issued_at: Some(date!(2024 - 03 - 12)),
    },
    Document {
        name: "austrian letter with a month name",
        language: De,
        order: Dmy,
        text: "Stadtwerke Wien\nKundennummer 4711-0815\n\
               Abschlag 85,00 € ab 01.03.2024\nWien, den 5. Feber 2024\n\
               Sehr geehrte Damen und Herren,",
        issued_at: Some(date!(2024 - 02 - 05)),
    },
    Document {
        name: "supermarket receipt with a two-digit year",
        language: De,
        order: Dmy,
        text: "REWE Markt GmbH\nMilch 1,29\nSUMME EUR 3,78\n\
               Datum: 14.06.24 Uhrzeit: 18:03\nBon-Nr. 4471 Kasse 02",
        issued_at: Some(date!(2024 - 06 - 14)),
    },
    Document {
        name: "bank statement, I and O for 1 and 0",
        language: De,
        order: Dmy,
        text: "Sparkasse KölnBonn\nKontoauszug Nr. 3/2024\n\
               Buchungstag Wert Verwendungszweck Betrag\n\
               01.03.2024 01.03.2024 Miete -850,00\n\
               Erstellt am I5.O3.2024",
        issued_at: Some(date!(2024 - 03 - 15)),
    },
    Document {
        name: "tax notice, capitals and a transliterated umlaut",
        language: De,
        order: Dmy,
        text: "Finanzamt München\nSteuernummer 143/123/45678\nBescheid vom 20. MAERZ 2024\n\
               Nachzahlung 1.203,20 €",
        issued_at: Some(date!(2024 - 03 - 20)),
    },
    // French
    Document {
        name: "french invoice with a due date",
        language: Fr,
        order: Dmy,
        text: "SARL Dupont\nSIRET 123 456 789 00012\nTél. 01 23 45 67 89\n\
               Facture n° F-2024-031\nDate de facture : 15/03/2024\n\
               Date d'échéance : 14/04/2024\nTotal TTC 1 234,56 €\n\
               IBAN FR76 3000 6000 0112 3456 7890 189",
        issued_at: Some(date!(2024 - 03 - 15)),
    },
    Document {
        name: "french letter, abbreviated month with a period",
        language: Fr,
        order: Dmy,
        text: "Paris, le 1er févr. 2024\nObjet : votre dossier n° 12/345\nMadame, Monsieur,",
        issued_at: Some(date!(2024 - 02 - 01)),
    },
    Document {
        name: "french statement written without accents",
        language: Fr,
        order: Dmy,
        text: "Releve de compte\nDu 01/01/2024 au 31/01/2024\nEmis le 3 fevrier 2024\n\
               Solde 1 204,50",
        issued_at: Some(date!(2024 - 02 - 03)),
    },
    Document {
        name: "french bill, l for 1 in a month-name date",
        language: Fr,
        order: Dmy,
        text: "EDF\nN° client 6001234567\nA payer avant le 27 mars 2024\n\
               Facture du l2 mars 2024\nMontant 89,90 €",
        issued_at: Some(date!(2024 - 03 - 12)),
    },
    // Spanish
    Document {
        name: "spanish invoice",
        language: Es,
        order: Dmy,
        text: "Telefónica de España, S.A.U.\nCIF A-82018474\nTel. 900 123 456\n\
               Factura nº 2024/000317\nFecha de vencimiento: 15/04/2024\n\
               Fecha de emisión: 15 de marzo de 2024\n\
               Importe total: 1.234,56 €\nIBAN ES91 2100 0418 4502 0005 1332",
        issued_at: Some(date!(2024 - 03 - 15)),
    },
    Document {
        name: "spanish letter with del",
        language: Es,
        order: Dmy,
        text: "Madrid, 3 de febrero del 2023\nEstimado cliente:\nSu pedido 12-3456 ...",
        issued_at: Some(date!(2023 - 02 - 03)),
    },
    Document {
        name: "spanish statement, O for 0",
        language: Es,
        order: Dmy,
        text: "Extracto de cuenta\nPeríodo: 01/02/2024 al 29/02/2024\n\
               Fecha: O5/O3/2024\nSaldo anterior 2.304,11",
        issued_at: Some(date!(2024 - 03 - 05)),
    },
    Document {
        name: "spanish receipt, abbreviation with a period",
        language: Es,
        order: Dmy,
        text: "Recibo\nNúm. 4471\n7 sept. 2022\nTotal 45,20 EUR",
        issued_at: Some(date!(2022 - 09 - 07)),
    },
    Document {
        name: "spanish contract with an ordinal",
        language: Es,
        order: Dmy,
        text: "Contrato 2024-17\nFirmado en Sevilla, a 1.º de abril de 2024.",
        issued_at: Some(date!(2024 - 04 - 01)),
    },
    // Italian
    Document {
        name: "italian invoice",
        language: It,
        order: Dmy,
        text: "Rossi S.r.l.\nP.IVA 01234567890\nTel. 02 1234 5678\n\
               Fattura n. 2024/117 del 15/03/2024\nData scadenza: 14/04/2024\n\
               Totale € 1.234,56\nIBAN IT60 X054 2811 1010 0000 0123 456",
        issued_at: Some(date!(2024 - 03 - 15)),
    },
    Document {
        name: "italian letter",
        language: It,
        order: Dmy,
        text: "Comune di Roma\nProt. n. 12345/2024\nRoma, lì 5 febbraio 2024\nEgregio Signore,",
        issued_at: Some(date!(2024 - 02 - 05)),
    },
    Document {
        name: "italian statement, l and O for 1 and 0",
        language: It,
        order: Dmy,
        text: "Estratto conto n. 3\nPeriodo dal 01.03.2024 al 31.03.2024\nData: 3l.O3.2024",
        issued_at: Some(date!(2024 - 03 - 31)),
    },
    Document {
        name: "italian receipt with a degree ordinal",
        language: It,
        order: Dmy,
        text: "Ricevuta\n1° apr. 2023 ore 10:15\nImporto 12,50",
        issued_at: Some(date!(2023 - 04 - 01)),
    },
    // Dutch
    Document {
        name: "dutch invoice with dashes",
        language: Nl,
        order: Dmy,
        text: "Bol.com B.V.\nKvK 32164004  BTW NL8191.43.128.B01\nFactuurnummer 4100123456\n\
               Vervaldatum: 26-03-2024\nFactuurdatum: 12-03-2024\nTotaal € 1.234,56\n\
               IBAN NL91 ABNA 0417 1643 00",
        issued_at: Some(date!(2024 - 03 - 12)),
    },
    Document {
        name: "dutch letter",
        language: Nl,
        order: Dmy,
        text: "Gemeente Amsterdam\nBetreft: uw aanvraag van 1 februari 2024\n\
               Amsterdam, 15 maart 2024",
        issued_at: Some(date!(2024 - 03 - 15)),
    },
    Document {
        name: "dutch statement, l for 1 and an abbreviation",
        language: Nl,
        order: Dmy,
        text: "Rabobank\nRekeningafschrift 2024-03\nPeriode 01-02-2024 t/m 29-02-2024\n\
               Datum l5 mrt. 2024",
        issued_at: Some(date!(2024 - 03 - 15)),
    },
    Document {
        name: "dutch contract with an ordinal",
        language: Nl,
        order: Dmy,
        text: "Huurcontract nr. 88\nIngangsdatum 1e januari 2023\nHuur € 950,00",
        issued_at: Some(date!(2023 - 01 - 01)),
    },
    // Portuguese
    Document {
        name: "portuguese invoice",
        language: Pt,
        order: Dmy,
        text: "EDP Comercial\nNIF 503 504 564\nTel. 808 53 53 53\nFatura n.º FT 2024/1234\n\
               Data de vencimento: 04-04-2024\nData de emissão: 15-03-2024\n\
               Total a pagar: 1.234,56 €\nIBAN PT50 0002 0123 1234 5678 9015 4",
        issued_at: Some(date!(2024 - 03 - 15)),
    },
    Document {
        name: "portuguese letter with an ordinal",
        language: Pt,
        order: Dmy,
        text: "Lisboa, 1º de março de 2024\nExmo. Senhor,\nProcesso n.º 123/24",
        issued_at: Some(date!(2024 - 03 - 01)),
    },
    Document {
        name: "brazilian statement, O for 0",
        language: Pt,
        order: Dmy,
        text: "Banco do Brasil\nExtrato de conta corrente\nCPF 123.456.789-09\n\
               Saldo em 31/12/2023: R$ 1.234,56\nData: O2/O1/2024",
        issued_at: Some(date!(2024 - 01 - 02)),
    },
    Document {
        name: "portuguese receipt in capitals",
        language: Pt,
        order: Dmy,
        text: "Recibo n.º 45\n5 de DEZEMBRO de 2023\nValor: 45,00 €",
        issued_at: Some(date!(2023 - 12 - 05)),
    },
    // Numbers only: none of them is a date.
    Document {
        name: "german payment slip without a date",
        language: De,
        order: Dmy,
        text: "Kundennummer 12.345.678\nTel. 030/123 45 67\n\
               IBAN DE89 3704 0044 0532 0130 00\nBetrag 1.203,20 EUR\nVersion 1.2.10",
        issued_at: None,
    },
    Document {
        name: "english network note without a date",
        language: En,
        order: Mdy,
        text: "Router 192.168.10.10, gateway 10.1.1.10\nCall +1 (555) 123-4567 ext. 12\n\
               Part 2024-03-15-001 qty 12/30",
        issued_at: None,
    },
    Document {
        name: "a dutch month name is no date for an english reader",
        language: En,
        order: Dmy,
        text: "Amsterdam, 15 maart 2024",
        issued_at: None,
    },
];

#[test]
fn real_looking_documents_in_every_language_are_dated() {
    let mut wrong = Vec::new();
    for document in DOCUMENTS {
        let found = read(document.text, &[document.language], document.order);
        if found != document.issued_at {
            wrong.push(format!(
                "{} ({}, {:?}): found {found:?}, expected {:?}",
                document.name, document.language, document.order, document.issued_at
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    for language in DateLanguage::ALL {
        let documents = DOCUMENTS
            .iter()
            .filter(|document| document.language == language && document.issued_at.is_some())
            .count();
        assert!(documents >= 4, "{language} has {documents} dated documents");
    }
}

#[test]
fn month_names_are_read_only_in_the_tenants_languages() {
    let text = "Roma, lì 5 febbraio 2024";
    assert_eq!(read(text, &[It], Dmy), Some(date!(2024 - 02 - 05)));
    assert_eq!(read(text, &[De, Fr], Dmy), None);
    // Numeric dates need no language.
    assert_eq!(
        read("Datum 05.02.2024", &[Pt], Dmy),
        Some(date!(2024 - 02 - 05))
    );
}

#[test]
fn the_same_ambiguous_text_reads_differently_in_each_order() {
    let text = "Date: 03/04/2024";
    assert_eq!(read(text, &[En], Dmy), Some(date!(2024 - 04 - 03)));
    assert_eq!(read(text, &[En], Mdy), Some(date!(2024 - 03 - 04)));
    assert_eq!(read(text, &[En], Ymd), Some(date!(2024 - 03 - 04)));
    assert_eq!(
        read("Date: 24.03.04", &[En], Ymd),
        Some(date!(2024 - 03 - 04))
    );
    assert_eq!(
        read("Date: 24.03.04", &[En], Dmy),
        Some(date!(2004 - 03 - 24))
    );
}

#[test]
fn hostile_text_is_read_in_one_pass_and_finds_only_real_dates() {
    // A megabyte of almost-dates, digit runs and month-like words: every pattern is a
    // finite automaton, so this is linear (it takes well under a second in a debug
    // build); a date it finds is still a real one.
    let mut text = String::new();
    while text.len() < 1 << 20 {
        text.push_str("1.1.1.1 31.02.2024 99/99/9999 O l I 2024-13-45 marzo marzo 12 ");
        text.push_str("1111111111 ......... //// ---- ºººº lllllllllll OOOO 3l de de de ");
    }
    assert_eq!(dmy(&text), None);
    text.push_str("Datum: 29.02.2024");
    assert_eq!(dmy(&text), Some(date!(2024 - 02 - 29)));
}
