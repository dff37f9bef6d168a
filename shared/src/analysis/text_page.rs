//! A one-page PDF of the first lines of a plain-text document, in Courier, so that
//! `pdftoppm` renders its thumbnail like any other page. Built by hand: a few objects and
//! an exact cross-reference table.

const LINES: usize = 60;
const COLUMNS: usize = 90;

/// A string literal for a PDF content stream: Latin-1 bytes, escaped; other characters
/// become `?` (the standard fonts cannot show them anyway).
fn pdf_string(line: &str) -> String {
    let mut out = String::with_capacity(line.len() + 2);
    out.push('(');
    for ch in line.chars().take(COLUMNS) {
        match ch {
            '(' | ')' | '\\' => {
                out.push('\\');
                out.push(ch);
            }
            ' '..='~' => out.push(ch),
            '\t' => out.push_str("    "),
            ch if (ch as u32) >= 0xA0 && (ch as u32) <= 0xFF => {
                out.push_str(&format!("\\{:03o}", ch as u32));
            }
            _ => out.push('?'),
        }
    }
    out.push(')');
    out
}

/// The PDF bytes.
pub fn render(text: &str) -> Vec<u8> {
    let mut content = String::from("BT /F1 9 Tf 11 TL 36 806 Td\n");
    for line in text.lines().take(LINES) {
        content.push_str(&pdf_string(line));
        content.push_str(" '\n");
    }
    content.push_str("ET\n");
    one_page_pdf("Courier", &content)
}

/// A one-page A4 PDF whose only content stream is `content`, with one standard font as
/// `/F1`; the cross-reference table is exact. (The tests build their fixtures with it.)
pub fn one_page_pdf(font: &str, content: &str) -> Vec<u8> {
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] \
         /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>"
            .to_owned(),
        format!("<< /Type /Font /Subtype /Type1 /BaseFont /{font} /Encoding /WinAnsiEncoding >>"),
        format!(
            "<< /Length {} >>\nstream\n{content}endstream",
            content.len()
        ),
    ];
    let mut pdf = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::with_capacity(objects.len());
    for (index, object) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend_from_slice(format!("{} 0 obj\n{object}\nendobj\n", index + 1).as_bytes());
    }
    let xref = pdf.len();
    pdf.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        pdf.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    pdf.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    pdf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_and_bounded() {
        assert_eq!(pdf_string("a(b)c\\"), "(a\\(b\\)c\\\\)");
        assert_eq!(pdf_string("Grüße 😀"), "(Gr\\374\\337e ?)");
        assert_eq!(pdf_string(&"x".repeat(500)).len(), COLUMNS + 2);
    }

    #[test]
    fn the_cross_reference_table_points_at_the_objects() {
        let pdf = render("Hello\nWorld");
        let text = String::from_utf8_lossy(&pdf);
        let xref_at: usize = text
            .rsplit("startxref\n")
            .next()
            .and_then(|tail| tail.lines().next())
            .and_then(|line| line.parse().ok())
            .expect("startxref");
        assert!(text[xref_at..].starts_with("xref"));
        for (index, line) in text[xref_at..].lines().skip(3).take(5).enumerate() {
            let offset: usize = line[..10].parse().expect("offset");
            assert!(text[offset..].starts_with(&format!("{} 0 obj", index + 1)));
        }
    }
}
