//! ExtractText: the PDF text layer through `pdftotext`; scanned PDFs (no text layer)
//! page by page and images through `tesseract`, in the configured languages.

use std::path::{Path, PathBuf};

use super::tools::{self, ToolError};
use super::{AnalysisError, Analyzer, pdf_tool_error};

impl Analyzer {
    pub(super) async fn pdf_text_layer(
        &self,
        source: &Path,
        work: &Path,
    ) -> Result<String, AnalysisError> {
        let out = tools::run(
            "pdftotext",
            [
                "-enc".as_ref(),
                "UTF-8".as_ref(),
                "-l".as_ref(),
                "100".as_ref(),
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

    pub(super) async fn ocr_pdf(
        &self,
        source: &Path,
        work: &Path,
    ) -> Result<String, AnalysisError> {
        let prefix = work.join("page");
        let last = self.settings.ocr_max_pages.max(1).to_string();
        tools::run(
            "pdftoppm",
            [
                "-r".as_ref(),
                "200".as_ref(),
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
                    .is_some_and(|name| name.starts_with("page") && name.ends_with(".png"))
            })
            .collect();
        pages.sort();
        let mut text = String::new();
        for page in pages {
            text.push_str(&self.ocr(&page, work).await?);
            text.push('\n');
        }
        Ok(text)
    }

    pub(super) async fn ocr(&self, image: &Path, work: &Path) -> Result<String, AnalysisError> {
        let out = tools::run(
            "tesseract",
            [
                image.as_os_str(),
                "-".as_ref(),
                "-l".as_ref(),
                self.settings.ocr_languages.as_ref(),
            ],
            self.confinement(work),
            self.limits(16 * 1024 * 1024),
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
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}
