//! Turning a scan upright before it is read: whole quarter turns (tesseract's orientation
//! detection says how many, `osd.rs`) and a small skew, measured and rotated away here on
//! the decoded pixels. The skew is the angle at which the ink of the page falls into the
//! fewest, fullest rows (a projection profile): text lines are level there. Pixel work in
//! process, within the image's memory budget (one more grey buffer, which `raster` counts),
//! on pixels already decoded: no new parser of the file, no new tool to sandbox.

use image::{GrayImage, ImageBuffer, Luma, Pixel, imageops};

/// Skews searched for, either way. A page fed askew lies within a few degrees; past this,
/// the page was laid on the glass at an angle on purpose, or the measure is fooled.
const MAX_SKEW_DEGREES: f32 = 8.0;
/// Below this a rotation would only soften the page.
const MIN_SKEW_DEGREES: f32 = 0.3;
/// The skew is measured on a copy at most this many pixels on its longer side (some
/// 130 dpi for an A4 page): the angle is the same at any scale, and the work is bounded.
const MEASURE_SIDE: u32 = 1500;
/// A pixel darker than this is ink.
const INK_BELOW: u8 = 128;
/// Fewer ink pixels than this: nothing to measure (a blank page).
const MIN_INK: usize = 200;
/// More of the page than this is ink: a photograph or a black page, not lines of text.
const MAX_INK_SHARE: f64 = 0.3;
/// The ink pixels the measure looks at, at most (every n-th beyond it).
const MAX_INK_SAMPLES: usize = 200_000;
/// The best angle must gather the ink this much better than the page as it is; a page
/// whose profile is flat at every angle (a picture, or text turned a quarter the
/// orientation detection could not see) is left alone rather than turned at random.
const MIN_GAIN: f64 = 1.1;

/// How a page is made upright: first `quarter_turns` clockwise turns, then a rotation by
/// `skew_degrees` (clockwise positive, as the page is seen).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Correction {
    pub quarter_turns: u8,
    pub skew_degrees: f32,
}

impl Correction {
    pub fn is_none(&self) -> bool {
        self.quarter_turns.is_multiple_of(4) && self.skew_degrees == 0.0
    }

    /// Whether the page's width and height trade places.
    pub fn swaps_sides(&self) -> bool {
        self.quarter_turns % 2 == 1
    }

    /// The page turned and straightened as `self` says, with `background` where the
    /// rotation uncovers a corner.
    pub fn apply<P: Pixel<Subpixel = u8> + 'static>(
        &self,
        image: ImageBuffer<P, Vec<u8>>,
        background: P,
    ) -> ImageBuffer<P, Vec<u8>> {
        let turned = turn(image, self.quarter_turns);
        if self.skew_degrees == 0.0 {
            turned
        } else {
            rotate(&turned, self.skew_degrees, background)
        }
    }
}

/// Turns a grey page by `quarter_turns` and straightens its skew: the correction made and
/// the page made upright.
pub(super) fn straighten(gray: GrayImage, quarter_turns: u8) -> (Correction, GrayImage) {
    let turned = turn(gray, quarter_turns);
    let skew_degrees = measure_skew(&turned).map_or(0.0, |lines| -lines);
    let correction = Correction {
        quarter_turns: quarter_turns % 4,
        skew_degrees,
    };
    let upright = if skew_degrees == 0.0 {
        turned
    } else {
        rotate(&turned, skew_degrees, Luma([255]))
    };
    (correction, upright)
}

/// Clockwise quarter turns; a half turn in place (no second buffer).
fn turn<P: Pixel<Subpixel = u8> + 'static>(
    image: ImageBuffer<P, Vec<u8>>,
    quarter_turns: u8,
) -> ImageBuffer<P, Vec<u8>> {
    match quarter_turns % 4 {
        1 => imageops::rotate90(&image),
        2 => {
            let mut image = image;
            imageops::rotate180_in_place(&mut image);
            image
        }
        3 => imageops::rotate270(&image),
        _ => image,
    }
}

/// The angle of the page's text lines in degrees (positive: they fall to the right, as
/// the page is seen), when it is at least `MIN_SKEW_DEGREES` and the measure is sure.
pub(super) fn measure_skew(gray: &GrayImage) -> Option<f32> {
    let (width, height) = gray.dimensions();
    let longer = width.max(height);
    let small;
    let view = if longer > MEASURE_SIDE {
        let scale = f64::from(MEASURE_SIDE) / f64::from(longer);
        let side = |length: u32| ((f64::from(length) * scale).round() as u32).max(1);
        small = imageops::thumbnail(gray, side(width), side(height));
        &small
    } else {
        gray
    };
    let ink: Vec<(f32, f32)> = view
        .enumerate_pixels()
        .filter(|(_, _, pixel)| pixel.0[0] < INK_BELOW)
        .map(|(x, y, _)| (x as f32, y as f32))
        .collect();
    let area = f64::from(view.width()) * f64::from(view.height());
    if ink.len() < MIN_INK || ink.len() as f64 > area * MAX_INK_SHARE {
        return None;
    }
    let every = ink.len().div_ceil(MAX_INK_SAMPLES);
    let ink: Vec<(f32, f32)> = ink.into_iter().step_by(every).collect();
    let mut profile = Profile::new(view.width(), view.height());
    let level = profile.score(&ink, 0.0);
    // Coarse steps of 0.2°, then 0.02° around the best.
    let coarse = (-40..=40).map(|step| step as f32 * 0.2);
    let (mut best, mut best_score) = (0.0, level);
    for angle in coarse {
        let score = profile.score(&ink, angle);
        if score > best_score {
            (best, best_score) = (angle, score);
        }
    }
    let around = best;
    for step in -10..=10 {
        let angle = around + step as f32 * 0.02;
        let score = profile.score(&ink, angle);
        if score > best_score {
            (best, best_score) = (angle, score);
        }
    }
    let sure = best_score as f64 >= level as f64 * MIN_GAIN;
    (sure && best.abs() >= MIN_SKEW_DEGREES && best.abs() <= MAX_SKEW_DEGREES).then_some(best)
}

/// How unevenly the ink falls into rows across lines at an angle: the sum of the squared
/// counts per row, largest when each text line's ink shares its rows.
struct Profile {
    rows: Vec<u64>,
    /// Added to a row coordinate so that every one is an index (a line at an angle
    /// starts above the page's top).
    offset: f32,
}

impl Profile {
    fn new(width: u32, height: u32) -> Self {
        Self {
            rows: vec![0; (height + 2 * width + 2) as usize],
            offset: width as f32,
        }
    }

    /// The profile's score for lines at `degrees` (falling to the right when positive).
    fn score(&mut self, ink: &[(f32, f32)], degrees: f32) -> u64 {
        self.rows.iter_mut().for_each(|row| *row = 0);
        let (sin, cos) = degrees.to_radians().sin_cos();
        let last = self.rows.len() - 1;
        for &(x, y) in ink {
            // The point's distance across lines that run along (cos, sin).
            let row = (y * cos - x * sin + self.offset).round().max(0.0) as usize;
            self.rows[row.min(last)] += 1;
        }
        self.rows.iter().map(|count| count * count).sum()
    }
}

/// `image` rotated by `degrees` clockwise about its centre, bilinear, the same size (the
/// corners the rotation moves out are cut; a scan's margins lie there), `background`
/// where no source pixel falls.
fn rotate<P: Pixel<Subpixel = u8> + 'static>(
    image: &ImageBuffer<P, Vec<u8>>,
    degrees: f32,
    background: P,
) -> ImageBuffer<P, Vec<u8>> {
    let (width, height) = image.dimensions();
    let (sin, cos) = degrees.to_radians().sin_cos();
    let (cx, cy) = ((width as f32 - 1.0) / 2.0, (height as f32 - 1.0) / 2.0);
    let (max_x, max_y) = (width as f32 - 1.0, height as f32 - 1.0);
    let channels = usize::from(P::CHANNEL_COUNT);
    let mut out = ImageBuffer::from_pixel(width, height, background);
    for (x, y, pixel) in out.enumerate_pixels_mut() {
        let (dx, dy) = (x as f32 - cx, y as f32 - cy);
        // The source point the clockwise rotation carries here: the inverse rotation.
        let sx = dx * cos + dy * sin + cx;
        let sy = -dx * sin + dy * cos + cy;
        if !(0.0..=max_x).contains(&sx) || !(0.0..=max_y).contains(&sy) {
            continue;
        }
        let (x0, y0) = (sx.floor() as u32, sy.floor() as u32);
        let (x1, y1) = ((x0 + 1).min(width - 1), (y0 + 1).min(height - 1));
        let (fx, fy) = (sx - x0 as f32, sy - y0 as f32);
        let corners = [
            (image.get_pixel(x0, y0), (1.0 - fx) * (1.0 - fy)),
            (image.get_pixel(x1, y0), fx * (1.0 - fy)),
            (image.get_pixel(x0, y1), (1.0 - fx) * fy),
            (image.get_pixel(x1, y1), fx * fy),
        ];
        let mut mixed = [0u8; 4];
        for (channel, value) in mixed.iter_mut().enumerate().take(channels) {
            let sum: f32 = corners
                .iter()
                .map(|(corner, weight)| f32::from(corner.channels()[channel]) * weight)
                .sum();
            *value = sum.round().clamp(0.0, 255.0) as u8;
        }
        *pixel = *P::from_slice(&mixed[..channels]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A white page with lines of "text": dark bars of varying length, 12 px high, every
    /// 40 px, between margins.
    fn page(width: u32, height: u32) -> GrayImage {
        let mut page = GrayImage::from_pixel(width, height, Luma([255]));
        for (line, top) in (60..height - 60).step_by(40).enumerate() {
            let end = width - 60 - (line as u32 * 37) % (width / 3);
            for y in top..top + 12 {
                for x in 60..end {
                    // Gaps between "words".
                    if (x / 23) % 5 != 4 {
                        page.put_pixel(x, y, Luma([0]));
                    }
                }
            }
        }
        page
    }

    #[test]
    fn a_page_turned_three_degrees_is_measured_and_straightened() {
        let level = page(900, 700);
        assert_eq!(measure_skew(&level), None, "a level page is left alone");
        for degrees in [3.0f32, -3.0, 5.5] {
            // Turned clockwise, its lines fall to the right.
            let askew = rotate(&level, degrees, Luma([255]));
            let measured = measure_skew(&askew).expect("measured");
            assert!(
                (measured - degrees).abs() < 0.15,
                "turned {degrees}, measured {measured}"
            );
            let (correction, straight) = straighten(askew, 0);
            assert!((correction.skew_degrees + degrees).abs() < 0.15);
            assert_eq!(measure_skew(&straight), None, "straight after {degrees}");
        }
    }

    #[test]
    fn blank_black_and_tiny_skews_are_left_alone() {
        let blank = GrayImage::from_pixel(400, 300, Luma([255]));
        let black = GrayImage::from_pixel(400, 300, Luma([0]));
        assert_eq!(measure_skew(&blank), None);
        assert_eq!(measure_skew(&black), None);
        let slight = rotate(&page(900, 700), 0.1, Luma([255]));
        assert_eq!(measure_skew(&slight), None);
        let (correction, _) = straighten(black, 0);
        assert!(correction.is_none());
    }

    #[test]
    fn a_large_page_is_measured_on_a_small_copy() {
        let askew = rotate(&page(2000, 1500), 2.0, Luma([255]));
        let measured = measure_skew(&askew).expect("measured");
        assert!((measured - 2.0).abs() < 0.2, "{measured}");
    }

    #[test]
    fn quarter_turns_are_clockwise_and_trade_the_sides() {
        // A mark in the top-left corner of a wide page.
        let mut image = GrayImage::from_pixel(4, 2, Luma([255]));
        image.put_pixel(0, 0, Luma([0]));
        let turned = |turns: u8| {
            Correction {
                quarter_turns: turns,
                skew_degrees: 0.0,
            }
            .apply(image.clone(), Luma([255]))
        };
        // One clockwise turn takes the top-left corner to the top-right.
        let once = turned(1);
        assert_eq!(once.dimensions(), (2, 4));
        assert_eq!(once.get_pixel(1, 0).0, [0]);
        let twice = turned(2);
        assert_eq!(twice.dimensions(), (4, 2));
        assert_eq!(twice.get_pixel(3, 1).0, [0]);
        let thrice = turned(3);
        assert_eq!(thrice.get_pixel(0, 3).0, [0]);
        assert!(
            Correction {
                quarter_turns: 3,
                skew_degrees: 0.0
            }
            .swaps_sides()
        );
    }

    #[test]
    fn a_colour_image_rotates_with_its_colours() {
        let red = image::RgbImage::from_pixel(40, 30, image::Rgb([200, 10, 10]));
        let rotated = Correction {
            quarter_turns: 0,
            skew_degrees: 4.0,
        }
        .apply(red, image::Rgb([255, 255, 255]));
        assert_eq!(rotated.get_pixel(20, 15).0, [200, 10, 10]);
        assert_eq!(
            rotated.get_pixel(0, 0).0,
            [255, 255, 255],
            "a corner uncovered"
        );
    }
}
