//! ExtractText: the PDF text layer through `pdftotext`; the pages of a scanned PDF rendered
//! by `pdftoppm`; and a page image read by `tesseract` in the configured languages, which
//! in the same run lays the text invisibly over the image in a one-page PDF (the archive
//! copy's page, `archive.rs`).

use std::path::{Path, PathBuf};

use super::tools::{self, ToolError};
use super::{AnalysisError, Analyzer, MIB, pdf_tool_error};

/// The resolution scanned PDF pages are rendered at for reading.
pub(super) const PAGE_DPI: u32 = 200;
/// Text tesseract may write for one page.
const MAX_PAGE_TEXT_BYTES: u64 = 16 * MIB;

/// One page as tesseract read it: its text, and a one-page PDF of its image with the text
/// laid invisibly over it.
pub(super) struct ReadPage {
    pub text: String,
    pub pdf: PathBuf,
}

impl Analyzer {
    /// The text layer of the first pages (at least 100, and one more than OCR reads, so
    /// that its form feeds count the pages OCR would leave out).
    pub(super) async fn pdf_text_layer(
        &self,
        source: &Path,
        work: &Path,
    ) -> Result<String, AnalysisError> {
        let last = self
            .settings
            .ocr_max_pages
            .saturating_add(1)
            .max(100)
            .to_string();
        let out = tools::run(
            "pdftotext",
            [
                "-enc".as_ref(),
                "UTF-8".as_ref(),
                "-l".as_ref(),
                last.as_ref(),
                source.as_os_str(),
                "-".as_ref(),
            ],
            self.confinement(work),
            self.limits(64 * 1024 * 1024),
        )
        .await
        .map_err(pdf_tool_error)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Renders the first `analysis.ocr_max_pages` pages of a scanned PDF to grey PNGs at
    /// `PAGE_DPI`, in page order.
    pub(super) async fn render_pages(
        &self,
        source: &Path,
        work: &Path,
    ) -> Result<Vec<PathBuf>, AnalysisError> {
        let prefix = work.join("page");
        let last = self.settings.ocr_max_pages.max(1).to_string();
        let dpi = PAGE_DPI.to_string();
        tools::run(
            "pdftoppm",
            [
                "-r".as_ref(),
                dpi.as_ref(),
                "-gray".as_ref(),
                "-png".as_ref(),
                "-f".as_ref(),
                "1".as_ref(),
                "-l".as_ref(),
                last.as_ref(),
                source.as_os_str(),
                prefix.as_os_str(),
            ],
            self.confinement(work),
            self.limits(64 * 1024),
        )
        .await
        .map_err(pdf_tool_error)?;
        let mut pages: Vec<PathBuf> = std::fs::read_dir(work)?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| {
                path.file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.starts_with("page-") && name.ends_with(".png"))
            })
            .collect();
        // pdftoppm pads the page numbers to one width: the names sort in page order.
        pages.sort();
        Ok(pages)
    }

    /// Reads the page image `image` (a PNG in `work`, at `dpi`): its text, and next to it
    /// a one-page PDF of the image with that text invisible over it, from one tesseract
    /// run.
    pub(super) async fn ocr_page(
        &self,
        image: &Path,
        dpi: u32,
        work: &Path,
    ) -> Result<ReadPage, AnalysisError> {
        let base = image.with_extension("");
        let dpi = dpi.to_string();
        tools::run(
            "tesseract",
            [
                image.as_os_str(),
                base.as_os_str(),
                "--dpi".as_ref(),
                dpi.as_ref(),
                "-l".as_ref(),
                self.settings.ocr_languages.as_ref(),
                // Tesseract's output configs: plain text, and the PDF with a text layer.
                "txt".as_ref(),
                "pdf".as_ref(),
            ],
            self.confinement(work),
            self.limits(64 * 1024),
        )
        .await
        .map_err(|error| match error {
            ToolError::Unavailable { .. } => AnalysisError::ToolUnavailable(error),
            ToolError::Failed { ref stderr, .. } if stderr.contains("Failed loading language") => {
                AnalysisError::ToolUnavailable(error)
            }
            ToolError::Failed { ref status, .. } if !status.contains("signal") => {
                AnalysisError::ImageUnreadable
            }
            _ => AnalysisError::ToolLimit,
        })?;
        let text = read_within(&base.with_extension("txt"), MAX_PAGE_TEXT_BYTES).await?;
        let pdf = base.with_extension("pdf");
        // The page's PDF holds its image: no larger than the image budget, compressed.
        within(&pdf, self.settings.image_memory_budget_mb * MIB + MIB).await?;
        Ok(ReadPage {
            text: String::from_utf8_lossy(&text).into_owned(),
            pdf,
        })
    }
}

/// The size of a file a tool wrote, refused past `limit` (`analysis_limit_exceeded`); a
/// file it did not write at all means it could not read its input.
pub(super) async fn within(path: &Path, limit: u64) -> Result<u64, AnalysisError> {
    let size = match tokio::fs::metadata(path).await {
        Ok(metadata) => metadata.len(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(AnalysisError::ImageUnreadable);
        }
        Err(error) => return Err(error.into()),
    };
    if size > limit {
        return Err(AnalysisError::ToolLimit);
    }
    Ok(size)
}

/// A file a tool wrote, read whole once [`within`] its limit.
async fn read_within(path: &Path, limit: u64) -> Result<Vec<u8>, AnalysisError> {
    within(path, limit).await?;
    Ok(tokio::fs::read(path).await?)
}
