//! GenerateThumbnails: page 1 of a PDF through `pdftoppm` (images: `raster`); always a
//! PNG at most `analysis.thumbnail_width` wide.

use std::path::Path;

use super::{AnalysisError, Analyzer, pdf_tool_error, tools};

impl Analyzer {
    pub(super) async fn render_first_page(
        &self,
        source: &Path,
        work: &Path,
    ) -> Result<Vec<u8>, AnalysisError> {
        let prefix = work.join("thumbnail");
        let width = self.settings.thumbnail_width.to_string();
        tools::run(
            "pdftoppm",
            [
                "-f".as_ref(),
                "1".as_ref(),
                "-l".as_ref(),
                "1".as_ref(),
                "-png".as_ref(),
                "-singlefile".as_ref(),
                "-scale-to-x".as_ref(),
                width.as_ref(),
                "-scale-to-y".as_ref(),
                "-1".as_ref(),
                source.as_os_str(),
                prefix.as_os_str(),
            ],
            self.confinement(work),
            self.limits(64 * 1024),
        )
        .await
        .map_err(pdf_tool_error)?;
        Ok(tokio::fs::read(prefix.with_extension("png")).await?)
    }
}
