//! GenerateThumbnails: page 1 of a PDF through `pdftoppm`, images through the `image`
//! crate with dimension and allocation limits; always a PNG at most
//! `analysis.thumbnail_width` wide.

use std::path::Path;

use crate::config::AnalysisSettings;

use super::{AnalysisError, Analyzer, MIB, pdf_tool_error, tools};

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

/// Decodes an image within the configured dimension and allocation limits.
pub(super) fn decode_image(
    bytes: &[u8],
    settings: &AnalysisSettings,
) -> Result<image::DynamicImage, AnalysisError> {
    let mut reader = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|_| AnalysisError::ImageUnreadable)?;
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(settings.max_image_dimension);
    limits.max_image_height = Some(settings.max_image_dimension);
    limits.max_alloc = Some(settings.max_image_mb * MIB);
    reader.limits(limits);
    let image = reader.decode().map_err(|error| match error {
        image::ImageError::Limits(_) => AnalysisError::ImageTooLarge,
        _ => AnalysisError::ImageUnreadable,
    })?;
    if image.width() == 0 || image.height() == 0 {
        return Err(AnalysisError::ImageUnreadable);
    }
    Ok(image)
}

/// A PNG at most `width` wide, aspect kept.
pub(super) fn encode_thumbnail(
    image: &image::DynamicImage,
    width: u32,
) -> Result<Vec<u8>, AnalysisError> {
    let scaled = if image.width() > width {
        image.resize(width, u32::MAX, image::imageops::FilterType::Triangle)
    } else {
        image.clone()
    };
    let mut png = Vec::new();
    scaled
        .to_rgb8()
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .map_err(|_| AnalysisError::ImageUnreadable)?;
    Ok(png)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> AnalysisSettings {
        crate::test_support::test_settings(&[]).analysis
    }

    fn png(width: u32, height: u32) -> Vec<u8> {
        let image = image::DynamicImage::new_rgb8(width, height);
        let mut bytes = Vec::new();
        image
            .write_to(
                &mut std::io::Cursor::new(&mut bytes),
                image::ImageFormat::Png,
            )
            .expect("encode");
        bytes
    }

    #[test]
    fn wide_images_shrink_to_the_width_and_keep_their_aspect() {
        let image = decode_image(&png(1600, 800), &settings()).expect("decode");
        let thumbnail = encode_thumbnail(&image, 400).expect("thumbnail");
        let small = image::load_from_memory(&thumbnail).expect("png");
        assert_eq!((small.width(), small.height()), (400, 200));
        let narrow = decode_image(&png(100, 300), &settings()).expect("decode");
        let kept =
            image::load_from_memory(&encode_thumbnail(&narrow, 400).expect("png")).expect("png");
        assert_eq!((kept.width(), kept.height()), (100, 300));
    }

    #[test]
    fn the_limits_refuse_before_decoding() {
        let mut tight = settings();
        tight.max_image_dimension = 1000;
        assert!(matches!(
            decode_image(&png(1001, 10), &tight),
            Err(AnalysisError::ImageTooLarge)
        ));
        assert!(matches!(
            decode_image(b"not an image at all", &tight),
            Err(AnalysisError::ImageUnreadable)
        ));
    }
}
