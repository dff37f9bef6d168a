//! Refuses PDF decompression bombs before any tool parses the file: every
//! `FlateDecode`-style stream is inflated into a counter (nothing is kept), and the file is
//! refused once the total passes the limit. Cheap for honest files, bounded for hostile
//! ones: inflating stops at the limit.

use std::io::Read;

/// Finds `needle` in `haystack` from `from`.
fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|window| window == needle)
        .map(|index| index + from)
}

/// The bytes each `stream … endstream` holds.
fn streams(pdf: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut cursor = 0;
    std::iter::from_fn(move || {
        loop {
            let start = find(pdf, b"stream", cursor)?;
            cursor = start + b"stream".len();
            // `endstream` contains `stream`: skip it.
            if start >= 3 && &pdf[start - 3..start] == b"end" {
                continue;
            }
            let mut body = cursor;
            if pdf.get(body) == Some(&b'\r') {
                body += 1;
            }
            if pdf.get(body) == Some(&b'\n') {
                body += 1;
            }
            let end = find(pdf, b"endstream", body).unwrap_or(pdf.len());
            cursor = end;
            return Some(&pdf[body..end]);
        }
    })
}

/// True when the streams of `pdf` inflate to more than `limit` bytes in total.
pub fn inflates_beyond(pdf: &[u8], limit: u64) -> bool {
    let mut total: u64 = 0;
    for stream in streams(pdf) {
        // zlib-wrapped deflate (what FlateDecode is); other filters are left to the tools.
        let decoder = flate2::read::ZlibDecoder::new(stream);
        let remaining = limit.saturating_sub(total) + 1;
        let inflated =
            std::io::copy(&mut decoder.take(remaining), &mut std::io::sink()).unwrap_or(0);
        total = total.saturating_add(inflated);
        if total > limit {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn deflated(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(bytes).expect("compress");
        encoder.finish().expect("finish")
    }

    fn pdf_with_stream(content: &[u8]) -> Vec<u8> {
        let mut pdf = b"%PDF-1.4\n1 0 obj << /Filter /FlateDecode >>\nstream\n".to_vec();
        pdf.extend_from_slice(&deflated(content));
        pdf.extend_from_slice(b"\nendstream\nendobj\n%%EOF\n");
        pdf
    }

    #[test]
    fn honest_streams_pass_and_bombs_are_caught() {
        let honest = pdf_with_stream(b"BT /F1 12 Tf (hello) Tj ET");
        assert!(!inflates_beyond(&honest, 1024));
        let bomb = pdf_with_stream(&vec![b' '; 8 * 1024 * 1024]);
        assert!(bomb.len() < 64 * 1024, "a small file");
        assert!(inflates_beyond(&bomb, 1024 * 1024));
        assert!(!inflates_beyond(&bomb, 16 * 1024 * 1024));
    }

    #[test]
    fn garbage_is_not_a_bomb() {
        assert!(!inflates_beyond(
            b"%PDF-1.4 stream \x00\x01garbage endstream",
            10
        ));
        assert!(!inflates_beyond(b"no streams at all", 10));
    }
}
