//! Images within a memory budget (`analysis.image_memory_budget_mb`): one image costs
//! the worker at most the budget, whatever its header declares. The header is read
//! first; an image that fits at full size is decoded with the budget as the decoder's
//! allocation limit, and a PNG that does not is decoded row by row into a reduced image
//! (a box filter over bands of rows), so no full-size buffer ever exists. Any other image
//! over the budget is refused, `image_too_large`. No step makes a full-size copy beyond
//! the two the budget counts (the grey conversion, and the straightened page `upright`
//! makes of it), and no float buffer: the thumbnail is the `image` crate's integer area
//! sampling.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::{
    DynamicImage, GrayImage, ImageBuffer, ImageDecoder, ImageFormat, Pixel, Rgb, RgbImage,
};

use crate::config::AnalysisSettings;

use super::upright::Correction;
use super::{AnalysisError, MIB};

/// The largest reduction tried: past it an image is refused rather than averaged into mush.
const MAX_FACTOR: u64 = 32;

/// An image decoded within the budget: its pixels, `factor` times smaller each way than
/// the file's (1: full size).
pub(super) struct Decoded {
    pub image: DynamicImage,
    pub factor: u32,
}

/// Decodes `source` within `analysis.image_memory_budget_mb`: at full size when it fits,
/// a PNG reduced while decoding when it does not, anything else refused.
pub(super) fn decode(source: &Path, settings: &AnalysisSettings) -> Result<Decoded, AnalysisError> {
    let budget = settings.image_memory_budget_mb * MIB;
    let header = Header::read(source, settings)?;
    if header.cost(1) <= budget {
        let image = decode_full(source, settings, budget)?;
        return Ok(Decoded { image, factor: 1 });
    }
    if header.format != ImageFormat::Png {
        return Err(AnalysisError::ImageTooLarge);
    }
    let factor = (2..=MAX_FACTOR)
        .find(|&factor| header.cost(factor) <= budget)
        .ok_or(AnalysisError::ImageTooLarge)?;
    let image = decode_png_reduced(source, factor, budget)?;
    Ok(Decoded {
        image,
        factor: u32::try_from(factor).map_err(|_| AnalysisError::ImageTooLarge)?,
    })
}

/// The resolution an image of a page is taken to have, when its file does not say: its
/// longer side is an A4 page's (11.7 in). It sets the archive copy's page size and
/// tesseract's idea of the text's size.
pub(super) fn assumed_dpi(width: u32, height: u32) -> u32 {
    let dpi = (f64::from(width.max(height)) / 11.69).round() as u32;
    dpi.clamp(72, 1200)
}

/// A page at most `max_megapixels` million pixels, for orientation detection,
/// straightening and OCR, whose time grows with the pixels (tesseract took minutes over a
/// 20000-pixel square reduced to 10000): a larger page is scaled down by integer area
/// sampling, and `dpi` with it, so the text keeps its size in points. The copy is smaller
/// than the page, so the peak stays within the budget's two copies of a page.
pub(super) fn for_reading(gray: GrayImage, dpi: u32, max_megapixels: u32) -> (GrayImage, u32) {
    let pixels = u64::from(gray.width()) * u64::from(gray.height());
    let max_pixels = u64::from(max_megapixels) * 1_000_000;
    if pixels <= max_pixels {
        return (gray, dpi);
    }
    let scale = (max_pixels as f64 / pixels as f64).sqrt();
    let side = |length: u32| ((f64::from(length) * scale).floor() as u32).max(1);
    let (width, height) = (side(gray.width()), side(gray.height()));
    let reduced = image::imageops::thumbnail(&gray, width, height);
    let dpi = ((f64::from(dpi) * scale).round() as u32).max(1);
    (reduced, dpi)
}

/// The start of a thumbnail, before the page is turned upright: the image scaled so that
/// its shorter side is at most `width`, so that turned either way it still makes a
/// thumbnail `width` wide (an image narrower than that is kept as it is). RGB, small.
pub(super) fn thumbnail_source(image: &DynamicImage, width: u32) -> RgbImage {
    let shorter = image.width().min(image.height());
    if shorter <= width {
        return image.to_rgb8();
    }
    let scale = f64::from(width) / f64::from(shorter);
    let side = |length: u32| ((f64::from(length) * scale).round() as u32).max(1);
    image
        .thumbnail(side(image.width()), side(image.height()))
        .into_rgb8()
}

/// The thumbnail of a page made upright by `correction`: a PNG at most `width` wide.
pub(super) fn upright_thumbnail(
    source: RgbImage,
    correction: &Correction,
    width: u32,
) -> Result<Vec<u8>, AnalysisError> {
    let upright = correction.apply(source, Rgb([255, 255, 255]));
    encode_thumbnail(&DynamicImage::ImageRgb8(upright), width)
}

/// What the header declares, read before any pixel is decoded.
struct Header {
    format: ImageFormat,
    width: u64,
    height: u64,
    /// Bytes per pixel once decoded (the format's own depth: 16-bit stays 16-bit).
    decoded_pixel: u64,
    /// Bytes per pixel of the 8-bit image a PNG reduces to.
    reduced_pixel: u64,
    grey: bool,
}

impl Header {
    fn read(source: &Path, settings: &AnalysisSettings) -> Result<Self, AnalysisError> {
        let mut reader = image::ImageReader::open(source)?
            .with_guessed_format()
            .map_err(|_| AnalysisError::ImageUnreadable)?;
        let format = reader.format().ok_or(AnalysisError::ImageUnreadable)?;
        // Only the header is read here; the limits apply to the decode that follows.
        reader.no_limits();
        let decoder = reader.into_decoder().map_err(image_error)?;
        let (width, height) = decoder.dimensions();
        if width == 0 || height == 0 {
            return Err(AnalysisError::ImageUnreadable);
        }
        if width > settings.max_image_dimension || height > settings.max_image_dimension {
            return Err(AnalysisError::ImageTooLarge);
        }
        let color = decoder.color_type();
        let channels = u64::from(color.channel_count());
        Ok(Self {
            format,
            width: u64::from(width),
            height: u64::from(height),
            decoded_pixel: u64::from(color.bytes_per_pixel()),
            // Palettes are already RGB(A) here; reduced, 16-bit samples are cut to 8.
            reduced_pixel: channels,
            grey: matches!(color, image::ColorType::L8),
        })
    }

    /// The bytes held at the peak of preparing the image reduced by `factor` (1: full
    /// size): the decoded image, its grey copy unless it is grey already, and when
    /// reduced, the band of source rows and the decoder's two rows; or, once only the
    /// grey image is left, it and the straightened copy a skew's rotation makes
    /// (`upright`), whichever is more.
    fn cost(&self, factor: u64) -> u64 {
        let pixels = self.width.div_ceil(factor) * self.height.div_ceil(factor);
        let straightening = 2 * pixels;
        let decoding = if factor == 1 {
            let grey_copy = if self.grey { 0 } else { pixels };
            pixels * self.decoded_pixel + grey_copy
        } else {
            let grey_copy = if self.reduced_pixel == 1 { 0 } else { pixels };
            let rows = self.width * 8 * (factor + 2);
            pixels * self.reduced_pixel + grey_copy + rows
        };
        decoding.max(straightening)
    }
}

fn image_error(error: image::ImageError) -> AnalysisError {
    match error {
        image::ImageError::Limits(_) => AnalysisError::ImageTooLarge,
        image::ImageError::IoError(error) => AnalysisError::Io(error),
        _ => AnalysisError::ImageUnreadable,
    }
}

/// The whole image, with the budget as the decoder's allocation limit.
fn decode_full(
    source: &Path,
    settings: &AnalysisSettings,
    budget: u64,
) -> Result<DynamicImage, AnalysisError> {
    let mut reader = image::ImageReader::open(source)?
        .with_guessed_format()
        .map_err(|_| AnalysisError::ImageUnreadable)?;
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(settings.max_image_dimension);
    limits.max_image_height = Some(settings.max_image_dimension);
    limits.max_alloc = Some(budget);
    reader.limits(limits);
    reader.decode().map_err(image_error)
}

/// A PNG decoded row by row into an image `factor` times smaller each way: each band of
/// `factor` rows is averaged into one row, and only that band is ever held.
fn decode_png_reduced(
    source: &Path,
    factor: u64,
    budget: u64,
) -> Result<DynamicImage, AnalysisError> {
    let limits = png::Limits {
        bytes: usize::try_from(budget).unwrap_or(usize::MAX),
    };
    let mut decoder = png::Decoder::new_with_limits(BufReader::new(File::open(source)?), limits);
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().map_err(png_error)?;
    if reader.info().interlaced {
        // Adam7 passes come in seven sweeps; reducing them is not worth the code.
        return Err(AnalysisError::ImageTooLarge);
    }
    let (width, height) = (reader.info().width, reader.info().height);
    let factor = u32::try_from(factor).map_err(|_| AnalysisError::ImageTooLarge)?;
    let rows = Rows {
        reader: &mut reader,
        width,
        height,
        factor,
    };
    Ok(match rows.reader.output_color_type().0 {
        png::ColorType::Grayscale => DynamicImage::ImageLuma8(rows.reduce()?),
        png::ColorType::GrayscaleAlpha => DynamicImage::ImageLumaA8(rows.reduce()?),
        png::ColorType::Rgb => DynamicImage::ImageRgb8(rows.reduce()?),
        png::ColorType::Rgba => DynamicImage::ImageRgba8(rows.reduce()?),
        png::ColorType::Indexed => return Err(AnalysisError::ImageUnreadable),
    })
}

fn png_error(error: png::DecodingError) -> AnalysisError {
    match error {
        png::DecodingError::LimitsExceeded => AnalysisError::ImageTooLarge,
        png::DecodingError::IoError(error) if error.kind() != std::io::ErrorKind::UnexpectedEof => {
            AnalysisError::Io(error)
        }
        _ => AnalysisError::ImageUnreadable,
    }
}

struct Rows<'a> {
    reader: &'a mut png::Reader<BufReader<File>>,
    width: u32,
    height: u32,
    factor: u32,
}

impl Rows<'_> {
    fn reduce<P: Pixel<Subpixel = u8> + 'static>(
        self,
    ) -> Result<ImageBuffer<P, Vec<u8>>, AnalysisError> {
        let channels = usize::from(P::CHANNEL_COUNT);
        let row_bytes = self.width as usize * channels;
        let out_width = self.width.div_ceil(self.factor);
        let out_height = self.height.div_ceil(self.factor);
        let mut out: Vec<u8> =
            Vec::with_capacity(out_width as usize * out_height as usize * channels);
        let mut band: Vec<u8> = Vec::with_capacity(row_bytes * self.factor as usize);
        for y in 0..self.height {
            let row = self
                .reader
                .next_row()
                .map_err(png_error)?
                .ok_or(AnalysisError::ImageUnreadable)?;
            let row = row
                .data()
                .get(..row_bytes)
                .ok_or(AnalysisError::ImageUnreadable)?;
            band.extend_from_slice(row);
            if (y + 1) % self.factor == 0 || y + 1 == self.height {
                let rows = u32::try_from(band.len() / row_bytes).unwrap_or(1);
                let view = ImageBuffer::<P, &[u8]>::from_raw(self.width, rows, band.as_slice())
                    .ok_or(AnalysisError::ImageUnreadable)?;
                // Integer area sampling: every source pixel counts once.
                out.extend_from_slice(image::imageops::thumbnail(&view, out_width, 1).as_raw());
                band.clear();
            }
        }
        ImageBuffer::from_raw(out_width, out_height, out).ok_or(AnalysisError::ImageUnreadable)
    }
}

/// Writes a grey page as a PNG for a tool to read (tesseract): at fast compression, since
/// the file lives only as long as the job's work folder (the default level took three
/// times as long on a rendered page).
pub(super) fn save_for_tool(image: &GrayImage, path: &Path) -> Result<(), AnalysisError> {
    let file = std::io::BufWriter::new(File::create(path)?);
    let encoder = PngEncoder::new_with_quality(file, CompressionType::Fast, FilterType::Adaptive);
    image
        .write_with_encoder(encoder)
        .map_err(|_| AnalysisError::ImageUnreadable)
}

/// A PNG at most `width` wide, aspect kept.
pub(super) fn encode_thumbnail(image: &DynamicImage, width: u32) -> Result<Vec<u8>, AnalysisError> {
    let rgb = if image.width() > width {
        image.thumbnail(width, u32::MAX).to_rgb8()
    } else {
        image.to_rgb8()
    };
    let mut png = Vec::new();
    rgb.write_to(&mut std::io::Cursor::new(&mut png), ImageFormat::Png)
        .map_err(|_| AnalysisError::ImageUnreadable)?;
    Ok(png)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> AnalysisSettings {
        crate::test_support::test_settings(&[]).analysis
    }

    /// What the pipeline makes of an image it does not turn: its thumbnail and its grey page.
    fn prepare(
        source: &Path,
        settings: &AnalysisSettings,
    ) -> Result<(Vec<u8>, image::GrayImage), AnalysisError> {
        let decoded = decode(source, settings)?;
        let thumbnail = upright_thumbnail(
            thumbnail_source(&decoded.image, settings.thumbnail_width),
            &Correction::default(),
            settings.thumbnail_width,
        )?;
        Ok((thumbnail, decoded.image.into_luma8()))
    }

    fn write(dir: &tempfile::TempDir, name: &str, image: &DynamicImage) -> std::path::PathBuf {
        let path = dir.path().join(name);
        image
            .save_with_format(&path, ImageFormat::Png)
            .expect("encode");
        path
    }

    fn size(png: &[u8]) -> (u32, u32) {
        let image = image::load_from_memory(png).expect("png");
        (image.width(), image.height())
    }

    #[test]
    fn wide_images_shrink_to_the_width_and_keep_their_aspect() {
        let dir = tempfile::tempdir().expect("dir");
        let wide = write(&dir, "wide.png", &DynamicImage::new_rgb8(1600, 800));
        let (thumbnail, gray) = prepare(&wide, &settings()).expect("prepare");
        assert_eq!(size(&thumbnail), (400, 200));
        assert_eq!(gray.dimensions(), (1600, 800));
        let narrow = write(&dir, "narrow.png", &DynamicImage::new_rgb8(100, 300));
        assert_eq!(
            size(&prepare(&narrow, &settings()).expect("png").0),
            (100, 300)
        );
        // A tall page keeps a thumbnail as wide as before, however it is turned.
        let tall = write(&dir, "tall.png", &DynamicImage::new_rgb8(1000, 3000));
        let source = thumbnail_source(&decode(&tall, &settings()).expect("decode").image, 400);
        assert_eq!(source.dimensions(), (400, 1200));
        let turned = Correction {
            quarter_turns: 1,
            skew_degrees: 0.0,
        };
        let (width, height) = size(&upright_thumbnail(source, &turned, 400).expect("png"));
        assert_eq!(width, 400);
        assert!((133..=134).contains(&height), "{height}");
    }

    #[test]
    fn a_png_over_the_budget_is_reduced_while_decoding_and_keeps_its_picture() {
        let dir = tempfile::tempdir().expect("dir");
        // 1200 × 1200 RGB: 4.3 MB decoded and 1.4 MB grey, over a 2 MB budget.
        let mut picture = image::RgbImage::new(1200, 1200);
        for (x, _, pixel) in picture.enumerate_pixels_mut() {
            *pixel = if x < 600 {
                image::Rgb([255, 255, 255])
            } else {
                image::Rgb([0, 0, 0])
            };
        }
        let source = write(&dir, "big.png", &DynamicImage::ImageRgb8(picture));
        let mut tight = settings();
        tight.image_memory_budget_mb = 2;
        let (thumbnail, reduced) = prepare(&source, &tight).expect("reduced, not refused");
        assert_eq!(size(&thumbnail), (400, 400));
        assert!(
            reduced.width() < 1200 && reduced.width() >= 400,
            "{}",
            reduced.width()
        );
        assert_eq!(
            reduced.get_pixel(10, 10).0,
            [255],
            "the white half stays white"
        );
        assert_eq!(reduced.get_pixel(reduced.width() - 10, 10).0, [0]);
    }

    #[test]
    fn a_page_over_the_reading_size_is_scaled_down_with_its_resolution() {
        // 3000 × 2000 is 6 million pixels: over a 2-million cap, scaled by √(1/3).
        let mut page = GrayImage::from_pixel(3000, 2000, image::Luma([255]));
        for x in 1500..3000 {
            for y in 0..2000 {
                page.put_pixel(x, y, image::Luma([0]));
            }
        }
        let (read, dpi) = for_reading(page, 600, 2);
        assert_eq!(read.dimensions(), (1732, 1154));
        assert!(u64::from(read.width()) * u64::from(read.height()) <= 2_000_000);
        assert_eq!(dpi, 346);
        assert_eq!(
            read.get_pixel(10, 10).0,
            [255],
            "the white half stays white"
        );
        assert_eq!(read.get_pixel(read.width() - 10, 10).0, [0]);
        // Within the cap, the page is read as it is.
        let small = GrayImage::new(1000, 1000);
        let (read, dpi) = for_reading(small, 300, 2);
        assert_eq!((read.dimensions(), dpi), ((1000, 1000), 300));
    }

    #[test]
    fn the_limits_refuse_before_decoding() {
        let dir = tempfile::tempdir().expect("dir");
        let mut tight = settings();
        tight.max_image_dimension = 1000;
        let wide = write(&dir, "wide.png", &DynamicImage::new_luma8(1001, 10));
        assert!(matches!(
            prepare(&wide, &tight),
            Err(AnalysisError::ImageTooLarge)
        ));
        let junk = dir.path().join("junk.png");
        std::fs::write(&junk, b"not an image at all").expect("write");
        assert!(matches!(
            prepare(&junk, &tight),
            Err(AnalysisError::ImageUnreadable)
        ));
        // A JPEG over the budget cannot be reduced while decoding: refused for good.
        let jpeg = dir.path().join("big.jpg");
        DynamicImage::new_rgb8(1200, 1200)
            .save_with_format(&jpeg, ImageFormat::Jpeg)
            .expect("jpeg");
        let mut small = settings();
        small.image_memory_budget_mb = 1;
        assert!(matches!(
            prepare(&jpeg, &small),
            Err(AnalysisError::ImageTooLarge)
        ));
    }
}
