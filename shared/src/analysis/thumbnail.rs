//! GenerateThumbnails: page 1 of a PDF through `pdftoppm` (images: `raster`); always a
//! PNG at most `analysis.thumbnail_width` wide, upright for a scan.

use std::path::Path;

use super::upright::Correction;
use super::{AnalysisError, Analyzer, blocking, pdf_tool_error, raster, tools};

impl Analyzer {
    /// Page 1, turned by `correction` (none for a text page), as the thumbnail: rendered
    /// at the thumbnail's width as it will stand (its height now when it is turned a
    /// quarter).
    pub(super) async fn render_first_page(
        &self,
        source: &Path,
        work: &Path,
        correction: Correction,
    ) -> Result<Vec<u8>, AnalysisError> {
        let prefix = work.join("thumbnail");
        let width = self.settings.thumbnail_width;
        let side = width.to_string();
        let (along, across) = if correction.swaps_sides() {
            ("-scale-to-y", "-scale-to-x")
        } else {
            ("-scale-to-x", "-scale-to-y")
        };
        // Raw pixels (PPM), encoded here: pdftoppm's own PNG writer compresses at zlib's
        // best level, two thirds of its run for a text page, for a file no smaller.
        tools::run(
            "pdftoppm",
            [
                "-f".as_ref(),
                "1".as_ref(),
                "-l".as_ref(),
                "1".as_ref(),
                "-singlefile".as_ref(),
                along.as_ref(),
                side.as_ref(),
                across.as_ref(),
                "-1".as_ref(),
                source.as_os_str(),
                prefix.as_os_str(),
            ],
            self.confinement(work),
            self.limits(64 * 1024),
        )
        .await
        .map_err(pdf_tool_error)?;
        let rendered = prefix.with_extension("ppm");
        let settings = self.settings.clone();
        blocking(move || {
            let decoded = raster::decode(&rendered, &settings)?;
            raster::upright_thumbnail(decoded.image.into_rgb8(), &correction, width)
        })
        .await?
    }
}
