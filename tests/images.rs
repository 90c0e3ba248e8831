//! Images end to end: the drawings of `examples/images` (made by [`drawings`], committed), a
//! row's image bound from a path, a data URI or a URL (and refused when it cannot be read), the
//! image intrinsics on every engine, and judges that see images over real HTTP of the mock
//! judge: the image part right after its fence in the recorded request, the cache hit on the
//! same bytes under another path, and the example scored alike on every engine.

use crate::cli::{describe, rubric};
use crate::common::{crate_root, mock_get, TempDir};
use serde_json::{json, Value as Json};
use std::io::Cursor;

/// A white square of `size` pixels with a red disc in the middle (radius a third of the side).
fn red_disc(size: u32) -> image::RgbImage {
    let c = size as f64 / 2.0;
    let r = size as f64 / 3.0;
    image::RgbImage::from_fn(size, size, |x, y| {
        let (dx, dy) = (x as f64 + 0.5 - c, y as f64 + 0.5 - c);
        if dx * dx + dy * dy <= r * r {
            image::Rgb([220, 30, 30])
        } else {
            image::Rgb([255, 255, 255])
        }
    })
}

/// A white square of `size` pixels with a blue square filling its top left quarter.
fn blue_square(size: u32) -> image::RgbImage {
    image::RgbImage::from_fn(size, size, |x, y| {
        if x < size / 2 && y < size / 2 {
            image::Rgb([30, 60, 220])
        } else {
            image::Rgb([255, 255, 255])
        }
    })
}

fn encode(img: &image::RgbImage, format: image::ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    match format {
        image::ImageFormat::Jpeg => {
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 75).encode_image(img).unwrap()
        }
        f => img.write_to(&mut out, f).unwrap(),
    }
    out.into_inner()
}

/// The example's drawings: file name and pixels, and the format they are written in.
fn drawings() -> Vec<(&'static str, image::RgbImage, image::ImageFormat)> {
    use image::ImageFormat::{Jpeg, Png};
    vec![
        ("red-disc.png", red_disc(48), Png),
        ("red-disc-reference.jpeg", red_disc(48), Jpeg),
        ("red-disc-small.png", red_disc(16), Png),
        ("blue-square.png", blue_square(48), Png),
    ]
}

fn example_dir() -> std::path::PathBuf {
    crate_root().join("examples/images")
}

/// The committed drawings are the ones [`drawings`] makes (PNG pixel for pixel; the JPEG within
/// its compression error); `RUBRIC_UPDATE_IMAGES=1` writes them again.
#[test]
fn the_example_drawings_are_the_ones_the_test_draws() {
    let dir = example_dir().join("images");
    for (name, pixels, format) in drawings() {
        let path = dir.join(name);
        if std::env::var_os("RUBRIC_UPDATE_IMAGES").is_some() {
            std::fs::write(&path, encode(&pixels, format)).unwrap();
        }
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(bytes.len() < 1500, "{name} is {} bytes: keep the example small", bytes.len());
        let read = image::load_from_memory(&bytes).unwrap().to_rgb8();
        assert_eq!(read.dimensions(), pixels.dimensions(), "{name}");
        let worst = read.as_raw().iter().zip(pixels.as_raw()).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
        let tolerance = if format == image::ImageFormat::Jpeg { 96 } else { 0 };
        assert!(worst <= tolerance, "{name}: a pixel differs by {worst}");
    }
}
