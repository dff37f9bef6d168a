//! Scans, page by page: each page image is decoded within the memory budget, turned
//! upright (orientation detection, `osd.rs`), straightened (`upright.rs`), read by
//! tesseract, and laid with its text into the searchable archive copy (`archive.rs`). An
//! image upload is a one-page scan; a PDF without a text layer is one page per rendered
//! page. The thumbnail follows the first page's correction.

use std::path::Path;

use image::GrayImage;

use super::raster::{self, Decoded};
use super::text::{PAGE_DPI, ReadPage};
use super::upright::{self, Correction};
use super::{AnalysisError, Analyzer, Found, blocking};

impl Analyzer {
    /// An image upload: thumbnail, text and archive copy of the image made upright.
    pub(super) async fn image(&self, source: &Path, work: &Path) -> Result<Found, AnalysisError> {
        let settings = self.settings.clone();
        let width = settings.thumbnail_width;
        let path = source.to_owned();
        let (gray, thumbnail_source) = blocking(move || {
            raster::decode(&path, &settings).map(|Decoded { image, .. }| {
                let thumbnail_source = raster::thumbnail_source(&image, width);
                (image.into_luma8(), thumbnail_source)
            })
        })
        .await??;
        let dpi = raster::assumed_dpi(gray.width(), gray.height());
        let (correction, read) = self
            .read_page(gray, dpi, &work.join("ocr.png"), work)
            .await?;
        let thumbnail =
            blocking(move || raster::upright_thumbnail(thumbnail_source, &correction, width))
                .await??;
        Ok(Found {
            thumbnail,
            text: read.text,
            archive: Some(read.pdf),
        })
    }

    /// A PDF without a text layer: its first `analysis.ocr_max_pages` pages read; the
    /// archive copy when those are all of its pages (`pages`, counted by the text layer's
    /// page breaks); `thumbnail` replaced by an upright one when page 1 was turned.
    pub(super) async fn pdf_scan(
        &self,
        source: &Path,
        work: &Path,
        thumbnail: Vec<u8>,
        pages: usize,
    ) -> Result<Found, AnalysisError> {
        let mut text = String::new();
        let mut page_pdfs = Vec::new();
        let mut first = None;
        for page in self.render_pages(source, work).await? {
            let settings = self.settings.clone();
            let path = page.clone();
            let decoded = blocking(move || raster::decode(&path, &settings)).await??;
            let dpi = (PAGE_DPI / decoded.factor).max(1);
            let gray = decoded.image.into_luma8();
            let (correction, read) = self.read_page(gray, dpi, &page, work).await?;
            if first.is_none() {
                first = Some(correction);
            }
            text.push_str(&read.text);
            text.push('\n');
            page_pdfs.push(read.pdf);
        }
        let thumbnail = match first {
            Some(correction) if !correction.is_none() => {
                self.render_first_page(source, work, correction).await?
            }
            _ => thumbnail,
        };
        let complete = pages <= self.settings.ocr_max_pages as usize;
        let archive = if complete {
            self.join_pages(&page_pdfs, work).await?
        } else {
            tracing::info!(
                pages,
                read = page_pdfs.len(),
                "no archive copy: the scan has more pages than ocr reads"
            );
            None
        };
        Ok(Found {
            thumbnail,
            text,
            archive,
        })
    }

    /// Scales `gray` down to the reading size (`analysis.ocr_max_megapixels`), turns it
    /// upright, straightens it, writes it to `path` (a PNG in `work`) and reads it: the
    /// correction made and what tesseract read.
    async fn read_page(
        &self,
        gray: GrayImage,
        dpi: u32,
        path: &Path,
        work: &Path,
    ) -> Result<(Correction, ReadPage), AnalysisError> {
        let osd = work.join("osd.png");
        let copy = osd.clone();
        let max_megapixels = self.settings.ocr_max_megapixels;
        let (gray, dpi) = blocking(move || {
            let (gray, dpi) = raster::for_reading(gray, dpi, max_megapixels);
            super::osd::write_copy(&gray, &copy).map(|()| (gray, dpi))
        })
        .await??;
        let quarter_turns = self.quarter_turns(&osd, work).await?;
        let out = path.to_owned();
        let correction = blocking(move || {
            let (correction, upright) = upright::straighten(gray, quarter_turns);
            raster::save_for_tool(&upright, &out).map(|()| correction)
        })
        .await??;
        if !correction.is_none() {
            tracing::debug!(
                quarter_turns = correction.quarter_turns,
                skew_degrees = correction.skew_degrees,
                "page turned upright"
            );
        }
        let read = self.ocr_page(path, dpi, work).await?;
        Ok((correction, read))
    }
}
