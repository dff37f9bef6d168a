//! The content type of an upload, decided from its first bytes against an allowlist —
//! never from the client's `Content-Type` or filename.

/// Bytes looked at; every signature below fits.
pub const SNIFF_BYTES: usize = 512;

/// An accepted content type, or `None` for anything else (HTML, SVG, archives,
/// executables, binary junk).
pub fn sniff(prefix: &[u8]) -> Option<&'static str> {
    const SIGNATURES: &[(&[u8], &str)] = &[
        (b"%PDF-", "application/pdf"),
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xFF\xD8\xFF", "image/jpeg"),
        (b"II*\x00", "image/tiff"),
        (b"MM\x00*", "image/tiff"),
    ];
    for (signature, content_type) in SIGNATURES {
        if prefix.starts_with(signature) {
            return Some(content_type);
        }
    }
    if prefix.len() >= 12 && &prefix[..4] == b"RIFF" && &prefix[8..12] == b"WEBP" {
        return Some("image/webp");
    }
    is_plain_text(prefix).then_some("text/plain; charset=utf-8")
}

/// UTF-8 without NUL or control characters (tabs and line breaks aside), and not
/// markup a browser would render: HTML and SVG sent as "text" are refused.
fn is_plain_text(prefix: &[u8]) -> bool {
    let text = match std::str::from_utf8(prefix) {
        Ok(text) => text,
        // The prefix may end inside a multi-byte character.
        Err(error) if error.error_len().is_none() => {
            match std::str::from_utf8(&prefix[..error.valid_up_to()]) {
                Ok(text) => text,
                Err(_) => return false,
            }
        }
        Err(_) => return false,
    };
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

    #[test]
    fn allowed_formats_are_recognised_by_their_magic_bytes() {
        assert_eq!(sniff(b"%PDF-1.7\n..."), Some("application/pdf"));
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"), Some("image/png"));
        assert_eq!(sniff(b"\xFF\xD8\xFF\xE0\0\x10JFIF"), Some("image/jpeg"));
        assert_eq!(sniff(b"II*\x00\x08\0\0\0"), Some("image/tiff"));
        assert_eq!(sniff(b"MM\x00*\0\0\0\x08"), Some("image/tiff"));
        assert_eq!(sniff(b"RIFF\x24\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(
            sniff("Rechnung Nr. 42 vom 15.03.2024\n".as_bytes()),
            Some("text/plain; charset=utf-8")
        );
    }

    #[test]
    fn markup_archives_and_binaries_are_refused() {
        for refused in [
            &b"<!DOCTYPE html><html><script>alert(1)</script>"[..],
            b"  <svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(1)\"/>",
            b"<?xml version=\"1.0\"?><svg/>",
            b"PK\x03\x04\x14\0\0\0",
            b"MZ\x90\0\x03\0\0\0",
            b"\x7fELF\x02\x01\x01",
            b"text with a \0 NUL byte",
            b"\xff\xfe invalid utf-8 \xc3\x28",
        ] {
            assert_eq!(
                sniff(refused),
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
        assert_eq!(sniff(prefix), Some("text/plain; charset=utf-8"));
    }
}
