//! Files for the pipeline's tests, made here from a few bytes: a PDF with a text layer, a
//! scanned page (rendered by pdftoppm), a scan turned and askew as a PNG or an image-only
//! PDF, hostile PDFs and PNGs. One fixture is committed:
//! `tests/fixtures/encrypted.pdf` (this module's text PDF, encrypted by
//! `qpdf --encrypt secret owner 256`), because no crate here can encrypt a PDF.

use std::io::Write;
use std::process::Command;

/// A one-page PDF showing `lines` in Helvetica 14 pt (the worker's own PDF writer).
pub fn text_pdf(lines: &[&str]) -> Vec<u8> {
    let mut content = String::from("BT /F1 14 Tf 18 TL 72 760 Td\n");
    for line in lines {
        let escaped = line
            .replace('\\', "\\\\")
            .replace('(', "\\(")
            .replace(')', "\\)");
        content.push_str(&format!("({escaped}) '\n"));
    }
    content.push_str("ET\n");
    quire_shared::analysis::text_page::one_page_pdf("Helvetica", &content)
}

/// A "scan": the text PDF rendered to a grayscale PNG at 200 dpi, without a text layer.
pub fn scanned_page(lines: &[&str]) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("temp dir");
    let pdf = dir.path().join("page.pdf");
    std::fs::write(&pdf, text_pdf(lines)).expect("write pdf");
    let prefix = dir.path().join("scan");
    let status = Command::new("pdftoppm")
        .args(["-r", "200", "-gray", "-png", "-singlefile"])
        .arg(&pdf)
        .arg(&prefix)
        .status()
        .expect("pdftoppm (poppler-utils) must be installed: scripts/test installs it");
    assert!(status.success());
    std::fs::read(prefix.with_extension("png")).expect("read scan")
}

/// A page fed into a scanner askew and turned: `lines` in Helvetica 14 pt on an A5
/// landscape page, the text rotated `skew_degrees` (counter-clockwise, about the start of
/// its first line), rendered grey at 150 dpi by pdftoppm, then the image turned
/// `quarter_turns` clockwise. A PNG.
pub fn turned_scan(lines: &[&str], quarter_turns: u8, skew_degrees: f64) -> Vec<u8> {
    let (sin, cos) = skew_degrees.to_radians().sin_cos();
    let mut content = format!(
        "q 1 0 0 1 60 360 cm {cos:.5} {sin:.5} {:.5} {cos:.5} 0 0 cm\n",
        -sin
    );
    content.push_str("BT /F1 14 Tf 20 TL 0 0 Td\n");
    for line in lines {
        content.push_str(&format!("({line}) '\n"));
    }
    content.push_str("ET Q\n");
    let pdf = pdf_of(&[
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 421] \
          /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>"
            .to_vec(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_vec(),
        stream("", content.as_bytes()),
    ]);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("page.pdf");
    std::fs::write(&path, pdf).expect("write pdf");
    let prefix = dir.path().join("scan");
    let status = Command::new("pdftoppm")
        .args(["-r", "150", "-gray", "-png", "-singlefile"])
        .arg(&path)
        .arg(&prefix)
        .status()
        .expect("pdftoppm (poppler-utils) must be installed: scripts/test installs it");
    assert!(status.success());
    let page = image::open(prefix.with_extension("png"))
        .expect("rendered page")
        .into_luma8();
    let turned = match quarter_turns % 4 {
        1 => image::imageops::rotate90(&page),
        2 => image::imageops::rotate180(&page),
        3 => image::imageops::rotate270(&page),
        _ => page,
    };
    let mut png = Vec::new();
    turned
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .expect("encode");
    png
}

/// An image-only PDF, as a scanner writes one: a page for each grey PNG of `scans`, its
/// pixels the page's one image, sized for 150 dpi; no text layer.
pub fn image_pdf(scans: &[&[u8]]) -> Vec<u8> {
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
        let gray = image::load_from_memory(scan).expect("png").into_luma8();
        let (width, height) = gray.dimensions();
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(gray.as_raw()).expect("compress");
        let pixels = encoder.finish().expect("finish");
        let (points_wide, points_high) = (width * 72 / 150, height * 72 / 150);
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
    pdf_of(&objects)
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

/// Bytes that start like a PDF and are nothing of the sort.
pub fn corrupt_pdf() -> Vec<u8> {
    let mut pdf = b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 9 0 R".to_vec();
    pdf.extend((0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
    pdf
}

/// A small PDF whose page content streams inflate to `copies` × 128 MiB of spaces.
pub fn bomb_pdf(copies: usize) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let chunk = vec![b' '; 1024 * 1024];
    for _ in 0..128 {
        encoder.write_all(&chunk).expect("compress");
    }
    let stream = encoder.finish().expect("finish");
    let mut pdf = b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n\
        2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n"
        .to_vec();
    let contents: Vec<String> = (0..copies).map(|i| format!("{} 0 R", 4 + i)).collect();
    pdf.extend_from_slice(
        format!(
            "3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents [{}] >> endobj\n",
            contents.join(" ")
        )
        .as_bytes(),
    );
    for i in 0..copies {
        pdf.extend_from_slice(
            format!(
                "{} 0 obj << /Length {} /Filter /FlateDecode >>\nstream\n",
                4 + i,
                stream.len()
            )
            .as_bytes(),
        );
        pdf.extend_from_slice(&stream);
        pdf.extend_from_slice(b"\nendstream\nendobj\n");
    }
    pdf.extend_from_slice(b"trailer << /Root 1 0 R >>\n%%EOF\n");
    pdf
}

fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut out = (data.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(kind);
    hasher.update(data);
    out.extend_from_slice(&hasher.finalize().to_be_bytes());
    out
}

/// A PNG whose header claims `width` × `height` (8-bit gray) over one tiny row of data.
pub fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    let mut ihdr = width.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(&[0, 0]).expect("compress");
    let idat = encoder.finish().expect("finish");
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend(chunk(b"IHDR", &ihdr));
    png.extend(chunk(b"IDAT", &idat));
    png.extend(chunk(b"IEND", &[]));
    png
}

/// The committed encrypted PDF (user password "secret").
pub fn encrypted_pdf() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/encrypted.pdf"
    ))
    .expect("tests/fixtures/encrypted.pdf")
}

/// Width and height from a PNG's header.
pub fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let number = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
    (number(16), number(20))
}

/// A real 8-bit grey PNG of `width` × `height` black pixels: every row is in it, yet
/// zeros compress about a thousandfold (20000 × 20000 is some 400 KB). Compressed row by
/// row: the test never holds the raw image.
pub fn black_png(width: u32, height: u32) -> Vec<u8> {
    let mut ihdr = width.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    // Filter byte 0 (none), then the row's pixels.
    let row = vec![0u8; width as usize + 1];
    for _ in 0..height {
        encoder.write_all(&row).expect("compress");
    }
    let idat = encoder.finish().expect("finish");
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend(chunk(b"IHDR", &ihdr));
    png.extend(chunk(b"IDAT", &idat));
    png.extend(chunk(b"IEND", &[]));
    png
}
