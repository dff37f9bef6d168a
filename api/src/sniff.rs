//! The content type of an upload, decided from its first bytes against an allowlist —
//! never from the client's `Content-Type` or filename.
//!
//! Text is accepted in UTF-8 (and so ASCII), in UTF-16 with a byte order mark, and in
//! the legacy encodings a letter is still saved in (Windows-1252, which Latin-1 text is
//! a part of, and its siblings): the content type names the charset detected here, the
//! original bytes are stored unchanged, and the analyze pipeline decodes the whole file
//! from that charset into UTF-8.

use std::borrow::Cow;

use chardetng::{EncodingDetector, Iso2022JpDetection, Utf8Detection};
use encoding_rs::{DecoderResult, Encoding, UTF_16BE, UTF_16LE};

/// Bytes looked at; every signature below fits.
pub const SNIFF_BYTES: usize = 512;

/// An accepted content type, or `None` for anything else (HTML, SVG, archives,
/// executables, binary junk).
pub fn sniff(prefix: &[u8]) -> Option<Cow<'static, str>> {
    const SIGNATURES: &[(&[u8], &str)] = &[
        (b"%PDF-", "application/pdf"),
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xFF\xD8\xFF", "image/jpeg"),
        (b"II*\x00", "image/tiff"),
        (b"MM\x00*", "image/tiff"),
    ];
    for (signature, content_type) in SIGNATURES {
        if prefix.starts_with(signature) {
            return Some(Cow::Borrowed(content_type));
        }
    }
    if prefix.len() >= 12 && &prefix[..4] == b"RIFF" && &prefix[8..12] == b"WEBP" {
        return Some(Cow::Borrowed("image/webp"));
    }
    let encoding = text_encoding(prefix)?;
    if encoding == encoding_rs::UTF_8 {
        return Some(Cow::Borrowed("text/plain; charset=utf-8"));
    }
    // WHATWG names, lower-cased as MIME charsets are usually written ("windows-1252",
    // "utf-16le"); the analyze pipeline reads them back with `Encoding::for_label`.
    Some(Cow::Owned(format!(
        "text/plain; charset={}",
        encoding.name().to_ascii_lowercase()
    )))
}

/// The encoding `prefix` is plain text in, if it is. UTF-8 is tried first: ASCII and
/// UTF-8 are most text, and a valid UTF-8 prefix is almost never meant as anything
/// else. A UTF-16 byte order mark decides UTF-16; otherwise chardetng guesses a legacy
/// encoding. Whatever the encoding, the prefix must decode without an error to text
/// without control characters or markup: binary junk decodes to control characters
/// (or fails) in every encoding, so it stays refused.
fn text_encoding(prefix: &[u8]) -> Option<&'static Encoding> {
    if let Some(text) = utf8_prefix(prefix) {
        return is_plain_text(text).then_some(encoding_rs::UTF_8);
    }
    let (encoding, body) = match Encoding::for_bom(prefix) {
        Some((encoding, bom)) if encoding == UTF_16LE || encoding == UTF_16BE => {
            (encoding, &prefix[bom..])
        }
        // A UTF-8 byte order mark before invalid UTF-8 is no text.
        Some(_) => return None,
        None => {
            let mut detector = EncodingDetector::new(Iso2022JpDetection::Deny);
            // `last = false`: the prefix is usually not the end of the file.
            detector.feed(prefix, false);
            (detector.guess(None, Utf8Detection::Deny), prefix)
        }
    };
    let text = decode_prefix(encoding, body)?;
    is_plain_text(&text).then_some(encoding)
}

/// `prefix` as UTF-8, allowing it to end inside a multi-byte character.
fn utf8_prefix(prefix: &[u8]) -> Option<&str> {
    match std::str::from_utf8(prefix) {
        Ok(text) => Some(text),
        Err(error) if error.error_len().is_none() => {
            std::str::from_utf8(&prefix[..error.valid_up_to()]).ok()
        }
        Err(_) => None,
    }
}

/// `prefix` decoded from `encoding`, or `None` at the first malformed sequence. The
/// prefix is not the end of the stream, so a character (or surrogate pair) cut by its
/// end is not an error.
fn decode_prefix(encoding: &'static Encoding, prefix: &[u8]) -> Option<String> {
    let mut decoder = encoding.new_decoder_without_bom_handling();
    let capacity = decoder.max_utf8_buffer_length_without_replacement(prefix.len())?;
    let mut text = String::with_capacity(capacity);
    match decoder.decode_to_string_without_replacement(prefix, &mut text, false) {
        (DecoderResult::InputEmpty, _) => Some(text),
        (DecoderResult::Malformed(..) | DecoderResult::OutputFull, _) => None,
    }
}

/// Text without NUL or control characters (tabs and line breaks aside), and not markup
/// a browser would render: HTML and SVG sent as "text" are refused.
fn is_plain_text(text: &str) -> bool {
    if text
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\x0C'))
    {
        return false;
    }
    let start = text
        .trim_start_matches('\u{FEFF}')
        .trim_start()
        .to_ascii_lowercase();
    let markup = [
        "<!doctype",
        "<html",
        "<svg",
        "<?xml",
        "<script",
        "<head",
        "<body",
        "<iframe",
    ];
    !markup.iter().any(|tag| start.starts_with(tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sniffed(prefix: &[u8]) -> Option<String> {
        sniff(prefix).map(Cow::into_owned)
    }

    #[test]
    fn allowed_formats_are_recognised_by_their_magic_bytes() {
        for (prefix, expected) in [
            (&b"%PDF-1.7\n..."[..], "application/pdf"),
            (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "image/png"),
            (b"\xFF\xD8\xFF\xE0\0\x10JFIF", "image/jpeg"),
            (b"II*\x00\x08\0\0\0", "image/tiff"),
            (b"MM\x00*\0\0\0\x08", "image/tiff"),
            (b"RIFF\x24\0\0\0WEBPVP8 ", "image/webp"),
            (
                "Rechnung Nr. 42 vom 15.03.2024\n".as_bytes(),
                "text/plain; charset=utf-8",
            ),
        ] {
            assert_eq!(sniffed(prefix).as_deref(), Some(expected));
        }
    }

    #[test]
    fn text_in_legacy_encodings_and_utf_16_is_recognised_with_its_charset() {
        let utf16le: Vec<u8> = "\u{FEFF}Grüße, café, 12. März 2024\r\n"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        let utf16be: Vec<u8> = "\u{FEFF}Grüße, café, 12. März 2024\r\n"
            .encode_utf16()
            .flat_map(u16::to_be_bytes)
            .collect();
        for (prefix, expected) in [
            (
                &b"Gr\xfc\xdfe, caf\xe9, 12. M\xe4rz 2024: \x93Rechnung\x94 \x80 12,50\r\n"[..],
                "text/plain; charset=windows-1252",
            ),
            (
                b"Ch\xe8re Am\xe9lie, un caf\xe9 cr\xe8me co\xfbte 3 \xa3 \xe0 No\xebl.\n",
                "text/plain; charset=windows-1252",
            ),
            (&utf16le, "text/plain; charset=utf-16le"),
            (&utf16be, "text/plain; charset=utf-16be"),
        ] {
            assert_eq!(
                sniffed(prefix).as_deref(),
                Some(expected),
                "{:?}",
                String::from_utf8_lossy(prefix)
            );
        }
    }

    #[test]
    fn markup_archives_and_binaries_are_refused() {
        let html_in_utf16: Vec<u8> = "\u{FEFF}  <html><script>alert(1)</script>"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        for refused in [
            &b"<!DOCTYPE html><html><script>alert(1)</script>"[..],
            b"  <svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(1)\"/>",
            b"<?xml version=\"1.0\"?><svg/>",
            b"PK\x03\x04\x14\0\0\0",
            b"MZ\x90\0\x03\0\0\0",
            b"\x7fELF\x02\x01\x01",
            b"text with a \0 NUL byte",
            // Not UTF-8, and a control character in any single-byte encoding.
            b"invalid utf-8 \xc3\x28 with an escape \x1b[2J",
            b"\0\x9f\x92\x96\0\x01\x02\x03",
            // A UTF-8 byte order mark before invalid UTF-8.
            b"\xEF\xBB\xBFcaf\xe9 au lait",
            // A UTF-16 byte order mark before an unpaired surrogate, or a control.
            b"\xFF\xFEa\x00\x00\xD8b\x00",
            b"\xFE\xFF\x00a\x00\x07",
            &html_in_utf16,
        ] {
            assert_eq!(
                sniffed(refused),
                None,
                "{:?}",
                String::from_utf8_lossy(refused)
            );
        }
    }

    #[test]
    fn a_prefix_cut_inside_a_character_is_still_text() {
        let text = "é".repeat(300);
        let prefix = &text.as_bytes()[..SNIFF_BYTES - 1];
        assert_eq!(
            sniffed(prefix).as_deref(),
            Some("text/plain; charset=utf-8")
        );
        // UTF-16 cut between the two halves of a surrogate pair.
        let mut utf16: Vec<u8> = "\u{FEFF}note 𝄞"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        utf16.truncate(utf16.len() - 2);
        assert_eq!(
            sniffed(&utf16).as_deref(),
            Some("text/plain; charset=utf-16le")
        );
    }
}
