//! The analyze workload's corpus, made at run time (nothing binary is committed): text
//! PDFs of 1 and 20 pages, scanned PDFs of 1 and 3 pages, a PNG and a JPEG scan, and a
//! plain-text letter. Made the way the test suite makes its fixtures
//! (`api/tests/it/fixtures.rs`): text pages in Helvetica written by hand, a "scan" being
//! such a page rendered grey at 200 dpi by `pdftoppm`, a scanned PDF one image per page.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use image::codecs::jpeg::JpegEncoder;

/// Resolution of the scans: the one the pipeline renders scanned PDF pages at.
const SCAN_DPI: u32 = 200;

/// One file of the corpus.
#[derive(Debug, Clone)]
pub struct CorpusFile {
    /// What it is, for the report: "text-pdf-20", "png-scan".
    pub name: String,
    /// The content type the upload's sniffer would record.
    pub content_type: &'static str,
    /// Its pages (an image or a text file is one).
    pub pages: u32,
    pub bytes: Vec<u8>,
}

/// The corpus: one file of each kind.
pub fn make() -> anyhow::Result<Vec<CorpusFile>> {
    let scan = scanned_page(&page_lines(1))?;
    let gray = image::load_from_memory(&scan)
        .context("failed to decode a rendered scan")?
        .into_luma8();
    let mut jpeg = Vec::new();
    JpegEncoder::new_with_quality(&mut jpeg, 85)
        .encode_image(&gray)
        .context("failed to encode the JPEG scan")?;
    let three_scans = (1..=3)
        .map(|page| scanned_page(&page_lines(page)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let pdf = |name: &str, pages: u32, bytes| CorpusFile {
        name: name.to_owned(),
        content_type: "application/pdf",
        pages,
        bytes,
    };
    Ok(vec![
        pdf("text-pdf-1", 1, text_pdf(1)),
        pdf("text-pdf-20", 20, text_pdf(20)),
        pdf("scanned-pdf-1", 1, image_pdf(std::slice::from_ref(&scan))?),
        pdf("scanned-pdf-3", 3, image_pdf(&three_scans)?),
        CorpusFile {
            name: "png-scan".to_owned(),
            content_type: "image/png",
            pages: 1,
            bytes: scan,
        },
        CorpusFile {
            name: "jpeg-scan".to_owned(),
            content_type: "image/jpeg",
            pages: 1,
            bytes: jpeg,
        },
        CorpusFile {
            name: "plain-text".to_owned(),
            content_type: "text/plain; charset=utf-8",
            pages: 1,
            bytes: page_lines(1).join("\n").into_bytes(),
        },
    ])
}

/// The files of `corpus` named in `names` (all of them when none is named); a name that
/// is no file's is an error.
pub fn only(corpus: Vec<CorpusFile>, names: &[String]) -> anyhow::Result<Vec<CorpusFile>> {
    if let Some(unknown) = names
        .iter()
        .find(|name| !corpus.iter().any(|file| &file.name == *name))
    {
        let known: Vec<&str> = corpus.iter().map(|file| file.name.as_str()).collect();
        bail!(
            "no corpus file {unknown}: the files are {}",
            known.join(", ")
        );
    }
    Ok(corpus
        .into_iter()
        .filter(|file| names.is_empty() || names.contains(&file.name))
        .collect())
}

/// The lines of page `page` of a letter: a heading with a date, then paragraphs.
fn page_lines(page: u32) -> Vec<String> {
    let mut lines = vec![
        "Wombatville Water Company, 12 Burrow Lane".to_owned(),
        format!("Invoice 4711-{page:02}, London, 2 February 2023"),
        String::new(),
    ];
    for line in 0..28 {
        lines.push(format!(
            "Item {:02}: water supply for the quarter, meter {} read on site, {}.{:02} GBP",
            line + 1,
            1000 + page * 100 + line,
            10 + line,
            (line * 7) % 100
        ));
    }
    lines.push(format!("Page {page}. Please pay within thirty days."));
    lines
}

/// A content stream showing `lines` in Helvetica 12 pt from the top of an A4 page.
fn text_content(lines: &[String]) -> String {
    let mut content = String::from("BT /F1 12 Tf 16 TL 60 780 Td\n");
    for line in lines {
        let escaped = line
            .replace('\\', "\\\\")
            .replace('(', "\\(")
            .replace(')', "\\)");
        content.push_str(&format!("({escaped}) '\n"));
    }
    content.push_str("ET\n");
    content
}

/// An A4 PDF of `pages` pages of text (a text layer on every page).
fn text_pdf(pages: u32) -> Vec<u8> {
    // Objects: 1 the catalog, 2 the page tree, 3 the font, then each page and its content.
    let kids: Vec<String> = (0..pages)
        .map(|page| format!("{} 0 R", 4 + 2 * page))
        .collect();
    let mut objects = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {pages} >>",
            kids.join(" ")
        )
        .into_bytes(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_vec(),
    ];
    for page in 0..pages {
        objects.push(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] \
                 /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
                5 + 2 * page
            )
            .into_bytes(),
        );
        objects.push(stream("", text_content(&page_lines(page + 1)).as_bytes()));
    }
    pdf_of(&objects)
}

/// A "scan": a one-page text PDF of `lines` rendered grey at `SCAN_DPI` by pdftoppm, a PNG
/// without a text layer.
fn scanned_page(lines: &[String]) -> anyhow::Result<Vec<u8>> {
    let dir = tempfile::tempdir().context("failed to make a folder for a scan")?;
    let pdf = dir.path().join("page.pdf");
    std::fs::write(
        &pdf,
        quire_shared::analysis::text_page::one_page_pdf("Helvetica", &text_content(lines)),
    )?;
    let prefix = dir.path().join("scan");
    render(&pdf, &prefix)?;
    Ok(std::fs::read(prefix.with_extension("png"))?)
}

fn render(pdf: &Path, prefix: &Path) -> anyhow::Result<()> {
    let status = Command::new("pdftoppm")
        .args(["-r", &SCAN_DPI.to_string(), "-gray", "-png", "-singlefile"])
        .arg(pdf)
        .arg(prefix)
        .status()
        .context("pdftoppm (poppler-utils) makes the corpus's scans: install it")?;
    if !status.success() {
        bail!("pdftoppm failed to render a corpus page ({status})");
    }
    Ok(())
}

/// An image-only PDF, as a scanner writes one: a page for each grey PNG of `scans`, its
/// pixels the page's one image, sized for `SCAN_DPI`; no text layer.
fn image_pdf(scans: &[Vec<u8>]) -> anyhow::Result<Vec<u8>> {
    // Objects: 1 the catalog, 2 the page tree, then a page, its content and its image.
    let kids: Vec<String> = (0..scans.len())
        .map(|page| format!("{} 0 R", 3 + 3 * page))
        .collect();
    let mut objects = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {} >>",
            kids.join(" "),
            scans.len()
        )
        .into_bytes(),
    ];
    for (page, scan) in scans.iter().enumerate() {
        let gray = image::load_from_memory(scan)
            .context("failed to decode a rendered scan")?
            .into_luma8();
        let (width, height) = gray.dimensions();
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(gray.as_raw())?;
        let pixels = encoder.finish()?;
        let (points_wide, points_high) = (width * 72 / SCAN_DPI, height * 72 / SCAN_DPI);
        let content = format!("q {points_wide} 0 0 {points_high} 0 0 cm /Im1 Do Q\n");
        let (contents, image) = (4 + 3 * page, 5 + 3 * page);
        objects.push(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {points_wide} {points_high}] \
                 /Resources << /XObject << /Im1 {image} 0 R >> >> /Contents {contents} 0 R >>"
            )
            .into_bytes(),
        );
        objects.push(stream("", content.as_bytes()));
        objects.push(stream(
            &format!(
                "/Type /XObject /Subtype /Image /Width {width} /Height {height} \
                 /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode"
            ),
            &pixels,
        ));
    }
    Ok(pdf_of(&objects))
}

/// A stream object: `entries` of its dictionary, its exact length, its bytes.
fn stream(entries: &str, bytes: &[u8]) -> Vec<u8> {
    let mut object = format!("<< {entries} /Length {} >>\nstream\n", bytes.len()).into_bytes();
    object.extend_from_slice(bytes);
    object.extend_from_slice(b"\nendstream");
    object
}

/// A PDF of `objects` (numbered from 1, the first the catalog) with an exact
/// cross-reference table.
fn pdf_of(objects: &[Vec<u8>]) -> Vec<u8> {
    let mut pdf = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::with_capacity(objects.len());
    for (index, object) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend_from_slice(format!("{} 0 obj\n", index + 1).as_bytes());
        pdf.extend_from_slice(object);
        pdf.extend_from_slice(b"\nendobj\n");
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
            "trailer << /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    pdf
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What pdfinfo (poppler) says of a PDF: its page count, and whether pdftotext finds
    /// text on it.
    fn pdf_facts(bytes: &[u8]) -> (u32, usize) {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("file.pdf");
        std::fs::write(&path, bytes).expect("write");
        let info = Command::new("pdfinfo")
            .arg(&path)
            .output()
            .expect("pdfinfo");
        assert!(info.status.success(), "pdfinfo reads the corpus's PDF");
        let pages = String::from_utf8_lossy(&info.stdout)
            .lines()
            .find_map(|line| line.strip_prefix("Pages:"))
            .and_then(|count| count.trim().parse().ok())
            .expect("a page count");
        let text = Command::new("pdftotext")
            .arg(&path)
            .arg("-")
            .output()
            .expect("pdftotext");
        let chars = String::from_utf8_lossy(&text.stdout).trim().chars().count();
        (pages, chars)
    }

    #[test]
    fn a_choice_of_files_keeps_those_and_refuses_unknown_names() {
        let file = |name: &str| CorpusFile {
            name: name.to_owned(),
            content_type: "text/plain; charset=utf-8",
            pages: 1,
            bytes: Vec::new(),
        };
        let corpus = || vec![file("a"), file("b"), file("c")];
        let names = |files: Vec<CorpusFile>| -> Vec<String> {
            files.into_iter().map(|file| file.name).collect()
        };
        assert_eq!(names(only(corpus(), &[]).expect("all")), ["a", "b", "c"]);
        assert_eq!(
            names(only(corpus(), &["c".to_owned(), "a".to_owned()]).expect("two")),
            ["a", "c"]
        );
        assert!(only(corpus(), &["d".to_owned()]).is_err());
    }

    #[test]
    fn every_file_has_the_pages_it_says_and_scans_have_no_text_layer() {
        let corpus = make().expect("corpus");
        let names: Vec<&str> = corpus.iter().map(|file| file.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "text-pdf-1",
                "text-pdf-20",
                "scanned-pdf-1",
                "scanned-pdf-3",
                "png-scan",
                "jpeg-scan",
                "plain-text"
            ]
        );
        for file in &corpus {
            match file.content_type {
                "application/pdf" => {
                    let (pages, chars) = pdf_facts(&file.bytes);
                    assert_eq!(pages, file.pages, "{}", file.name);
                    if file.name.starts_with("text-pdf") {
                        assert!(chars > 1000 * file.pages as usize, "{} has text", file.name);
                    } else {
                        assert_eq!(chars, 0, "{} is a scan without a text layer", file.name);
                    }
                }
                "image/png" | "image/jpeg" => {
                    let scan = image::load_from_memory(&file.bytes).expect("decodes");
                    // A4 at 200 dpi.
                    assert_eq!((scan.width(), scan.height()), (1653, 2339), "{}", file.name);
                    assert_eq!(file.pages, 1);
                }
                _ => {
                    assert!(std::str::from_utf8(&file.bytes).is_ok());
                    assert_eq!(file.pages, 1);
                }
            }
        }
    }
}
