//! Which way up a scan is: tesseract's orientation and script detection (`--psm 0`, the
//! `osd` language data of Debian's `tesseract-ocr-osd`), on a small grey copy of the page,
//! through the same launcher, sandbox and limits as every other tool run.

use std::path::Path;

use image::{GrayImage, imageops};

use super::tools::{self, ToolError};
use super::{AnalysisError, Analyzer, raster};

/// The copy tesseract looks at is at most this many pixels on its longer side (some
/// 140 dpi for an A4 page): enough for its detection, and about half the time of a
/// 200 dpi page.
const OSD_SIDE: u32 = 1600;
/// Below this confidence (tesseract's own units) the page is left as it is: a wrong turn
/// is worse than none, and a page of text upright or turned scores well above it (6 to 8
/// for five lines of text; a page of noise scores near 0).
const MIN_CONFIDENCE: f32 = 2.0;

/// Writes the copy of `gray` that orientation detection reads to `path`.
pub(super) fn write_copy(gray: &GrayImage, path: &Path) -> Result<(), AnalysisError> {
    let (width, height) = gray.dimensions();
    let longer = width.max(height);
    if longer > OSD_SIDE {
        let scale = f64::from(OSD_SIDE) / f64::from(longer);
        let side = |length: u32| ((f64::from(length) * scale).round() as u32).max(1);
        raster::save_for_tool(&imageops::thumbnail(gray, side(width), side(height)), path)
    } else {
        raster::save_for_tool(gray, path)
    }
}

impl Analyzer {
    /// The clockwise quarter turns that make the page in `image` upright: 0 when tesseract
    /// finds too little text to tell, or is not sure.
    pub(super) async fn quarter_turns(
        &self,
        image: &Path,
        work: &Path,
    ) -> Result<u8, AnalysisError> {
        let ran = tools::run(
            "tesseract",
            [
                image.as_os_str(),
                "-".as_ref(),
                "--psm".as_ref(),
                "0".as_ref(),
                "-l".as_ref(),
                "osd".as_ref(),
            ],
            self.confinement(work),
            self.limits(64 * 1024),
        )
        .await;
        match ran {
            Ok(out) => Ok(parse(&String::from_utf8_lossy(&out))),
            Err(error) => match error {
                ToolError::Unavailable { .. } => Err(AnalysisError::ToolUnavailable(error)),
                // The worker lacks the `osd` data: the environment, not the file.
                ToolError::Failed { ref stderr, .. }
                    if stderr.contains("Failed loading language")
                        || stderr.contains("couldn't load any languages") =>
                {
                    Err(AnalysisError::ToolUnavailable(error))
                }
                ToolError::Failed { ref status, .. } if !status.contains("signal") => {
                    // "Too few characters": a blank page, a photograph. Read it as it is.
                    tracing::debug!("orientation not detected; the page is read as it is");
                    Ok(0)
                }
                _ => Err(AnalysisError::ToolLimit),
            },
        }
    }
}

/// The quarter turns from tesseract's report (`Rotate: 90` is a quarter turn clockwise),
/// when its confidence is at least `MIN_CONFIDENCE`; 0 for anything else.
fn parse(report: &str) -> u8 {
    let field = |name: &str| {
        report
            .lines()
            .find_map(|line| line.trim().strip_prefix(name))
            .map(str::trim)
    };
    let rotate = field("Rotate:").and_then(|value| value.parse::<u32>().ok());
    let confidence = field("Orientation confidence:").and_then(|value| value.parse::<f32>().ok());
    match (rotate, confidence) {
        (Some(degrees @ (90 | 180 | 270)), Some(confidence)) if confidence >= MIN_CONFIDENCE => {
            u8::try_from(degrees / 90).unwrap_or(0)
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_confident_report_turns_and_anything_else_does_not() {
        let report = |rotate: &str, confidence: &str| {
            format!(
                "Page number: 0\nOrientation in degrees: 90\nRotate: {rotate}\n\
                 Orientation confidence: {confidence}\nScript: Latin\nScript confidence: 44.44\n"
            )
        };
        assert_eq!(parse(&report("270", "7.42")), 3);
        assert_eq!(parse(&report("90", "6.01")), 1);
        assert_eq!(parse(&report("180", "2.00")), 2);
        assert_eq!(parse(&report("0", "9.0")), 0);
        assert_eq!(parse(&report("90", "0.02")), 0, "not sure");
        assert_eq!(parse(&report("45", "9.0")), 0, "not a quarter turn");
        assert_eq!(parse(&report("ninety", "9.0")), 0);
        assert_eq!(parse(""), 0);
        assert_eq!(parse("Rotate: 90\n"), 0, "no confidence, no turn");
    }

    #[test]
    fn the_copy_for_detection_is_small() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("osd.png");
        write_copy(&GrayImage::new(3200, 1000), &path).expect("written");
        let copy = image::open(&path).expect("png");
        assert_eq!((copy.width(), copy.height()), (1600, 500));
        write_copy(&GrayImage::new(300, 200), &path).expect("written");
        assert_eq!(image::open(&path).expect("png").width(), 300);
    }

    /// Five lines of text on an A4 page, rendered at 100 dpi by pdftoppm.
    fn rendered_page(work: &Path) -> GrayImage {
        let mut content = String::from("BT /F1 16 Tf 22 TL 60 780 Td\n");
        for line in [
            "City Library of Wombatville",
            "London, 2 February 2023",
            "Dear reader, your wombat encyclopedia is overdue.",
            "Please return it to the front desk this month.",
            "Opening hours are Monday to Friday, nine to five.",
        ] {
            content.push_str(&format!("({line}) '\n"));
        }
        content.push_str("ET\n");
        let pdf = work.join("page.pdf");
        std::fs::write(
            &pdf,
            super::super::text_page::one_page_pdf("Helvetica", &content),
        )
        .expect("pdf");
        let status = std::process::Command::new("pdftoppm")
            .args(["-r", "100", "-gray", "-png", "-singlefile"])
            .arg(&pdf)
            .arg(work.join("page"))
            .status()
            .expect("pdftoppm (scripts/test installs poppler-utils)");
        assert!(status.success());
        image::open(work.join("page.png"))
            .expect("page")
            .into_luma8()
    }

    #[tokio::test]
    async fn tesseract_says_how_many_clockwise_quarter_turns_make_a_page_upright() {
        let work = tempfile::tempdir().expect("work");
        let page = rendered_page(work.path());
        let analyzer = Analyzer::new(crate::test_support::test_settings(&[]).analysis);
        let osd = work.path().join("osd.png");
        // Turned a quarter clockwise, the page needs three more clockwise turns.
        for (turned, back) in [
            (imageops::rotate90(&page), 3),
            (imageops::rotate180(&page), 2),
            (imageops::rotate270(&page), 1),
            (page.clone(), 0),
        ] {
            write_copy(&turned, &osd).expect("copy");
            let turns = analyzer
                .quarter_turns(&osd, work.path())
                .await
                .expect("ran");
            assert_eq!(turns, back);
        }
        // A blank page has too few characters to tell: read as it is, not failed.
        write_copy(&GrayImage::from_pixel(600, 800, image::Luma([255])), &osd).expect("copy");
        assert_eq!(
            analyzer
                .quarter_turns(&osd, work.path())
                .await
                .expect("ran"),
            0
        );
    }
}
