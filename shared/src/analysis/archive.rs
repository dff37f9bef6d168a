//! The searchable archive copy of a scan: the pages as Quire read them (upright, straight,
//! grey), each with its text laid invisibly over it by tesseract's PDF renderer, in one
//! PDF. One page is tesseract's own file; more are joined by `pdfunite` (poppler, which
//! the pipeline ships already), through the same launcher, sandbox and limits.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::text::within;
use super::{AnalysisError, Analyzer, MIB, pdf_tool_error, tools};

impl Analyzer {
    /// One PDF of `pages` (one-page PDFs in `work`, in order): the file itself for one
    /// page, `archive.pdf` for more; none for none.
    pub(super) async fn join_pages(
        &self,
        pages: &[PathBuf],
        work: &Path,
    ) -> Result<Option<PathBuf>, AnalysisError> {
        let joined = match pages {
            [] => return Ok(None),
            [one] => one.clone(),
            many => {
                let joined = work.join("archive.pdf");
                let mut args: Vec<OsString> = many
                    .iter()
                    .map(|page| page.as_os_str().to_owned())
                    .collect();
                args.push(joined.as_os_str().to_owned());
                tools::run(
                    "pdfunite",
                    args,
                    self.confinement(work),
                    self.limits(64 * 1024),
                )
                .await
                .map_err(pdf_tool_error)?;
                joined
            }
        };
        // Each page's PDF was bounded by the image budget; so is their sum, page by page.
        let limit =
            (self.settings.image_memory_budget_mb * MIB + MIB).saturating_mul(pages.len() as u64);
        within(&joined, limit).await?;
        Ok(Some(joined))
    }
}
