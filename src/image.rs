//! Images: a row's reference to an image (a file path, a `data:` URI or an `http(s)` URL) read
//! into what an `Image` input holds — its content hash, format, size and perceptual hash, and
//! the URL a judge is sent. Called by `runtime::bind` for every `Image` value of a row; the
//! mock judge and `image_similarity` use the helpers at the bottom.
//!
//! Files and data URIs are read here and never again: the bytes are hashed (`sha256:` hex),
//! their header decoded for the format and the size, their pixels for a 64-bit perceptual hash
//! (DCT, `image_hasher`'s pHash), and they become a canonical data URI
//! (`data:image/FORMAT;base64,...` of the bytes), so the same bytes make the same value — and
//! the same judge request, cache key and transcript entry — whatever path or URI named them.
//! An `http(s)` URL is passed through unread (no network): only its `url` is known.

use base64::Engine as _;
use sha2::{Digest, Sha256};
use std::io::Cursor;
use std::path::Path;

/// The largest image file or data URI payload read (the request limit of OpenAI's
/// chat-completions for one image).
pub const MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;

/// The largest width or height decoded.
pub const MAX_DIMENSION: u32 = 16_384;

/// The most memory one image's pixels may take while it is decoded.
pub const MAX_DECODE_BYTES: u64 = 256 * 1024 * 1024;

/// What an `Image` value holds. Everything but `url` is `None` for an image passed by URL.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// `png`, `jpeg`, `gif` or `webp`.
    pub format: Option<&'static str>,
    pub width: Option<u32>,
    pub height: Option<u32>,
    /// `sha256:` and 64 hex digits of the bytes.
    pub sha256: Option<String>,
    /// 16 hex digits: the 64-bit perceptual hash.
    pub phash: Option<String>,
    /// The canonical data URI of the bytes, or the URL as given.
    pub url: String,
}

/// Where relative image paths are read from.
#[derive(Debug, Clone, Copy)]
pub enum Paths<'a> {
    /// Relative to this directory (the rows file's).
    Under(&'a Path),
    /// Not at all: rows that did not come from a file (`rubric serve`, the Python binding).
    Refused,
}

/// Read the image a row names.
pub fn read(reference: &str, paths: Paths<'_>) -> Result<Image, String> {
    let reference = reference.trim();
    if let Some(rest) = reference.strip_prefix("data:") {
        let bytes = data_uri_payload(rest)?;
        return from_bytes(&bytes);
    }
    let lower = reference.get(..8).unwrap_or(reference).to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Ok(Image { format: None, width: None, height: None, sha256: None, phash: None, url: reference.into() });
    }
    if let Some(at) = reference.find("://") {
        return Err(format!(
            "`{}` is a URL of a scheme images are not read from: give a file path, a `data:image/...;base64,` \
             URI or an `http(s)://` URL",
            shorten(reference, at + 3)
        ));
    }
    if reference.is_empty() {
        return Err("an image reference is empty: give a file path, a data URI or a URL".into());
    }
    let dir = match paths {
        Paths::Under(dir) => dir,
        Paths::Refused => {
            return Err(format!(
                "`{}` is a file path, and image paths are read only from a rows file (relative to its directory): \
                 send the image as a `data:image/...;base64,` URI or an `http(s)://` URL",
                shorten(reference, 60)
            ))
        }
    };
    let path = dir.join(reference);
    let bytes = read_file(&path).map_err(|e| format!("cannot read the image `{reference}`: {e}"))?;
    from_bytes(&bytes).map_err(|e| format!("`{reference}`: {e}"))
}

fn shorten(s: &str, chars: usize) -> String {
    match s.char_indices().nth(chars) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// A file's bytes, refused past [`MAX_IMAGE_BYTES`] before they are read.
fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_IMAGE_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(format!("the file is larger than {} MiB", MAX_IMAGE_BYTES >> 20));
    }
    Ok(bytes)
}

/// The bytes of a data URI (what follows `data:`): `image/...;base64,PAYLOAD`.
fn data_uri_payload(rest: &str) -> Result<Vec<u8>, String> {
    let Some((head, payload)) = rest.split_once(',') else {
        return Err("a data URI has no `,` before its payload".into());
    };
    let mut parts = head.split(';');
    let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    if !media.starts_with("image/") {
        return Err(format!("a data URI of media type `{}` is not an image", shorten(&media, 40)));
    }
    if !parts.any(|p| p.trim().eq_ignore_ascii_case("base64")) {
        return Err("an image data URI must be base64 (`data:image/...;base64,...`)".into());
    }
    if payload.len() / 4 * 3 > MAX_IMAGE_BYTES + 3 {
        return Err(format!("the image is larger than {} MiB", MAX_IMAGE_BYTES >> 20));
    }
    let compact: String = payload.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .map_err(|e| format!("the data URI's base64 payload does not decode: {e}"))
}

/// What decoding an image's bytes found: format, width, height and perceptual hash.
type Decoded = (&'static str, u32, u32, String);

/// Images decoded by this process, by the SHA-256 of their bytes: a reference image every row
/// names is decoded once. Bounded: cleared when full.
static DECODED: std::sync::Mutex<Option<std::collections::HashMap<String, Decoded>>> = std::sync::Mutex::new(None);
const DECODED_MAX: usize = 4096;

/// Decode `bytes`: format, size and perceptual hash, or why they are not an image this reads.
pub fn from_bytes(bytes: &[u8]) -> Result<Image, String> {
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(format!("the image is larger than {} MiB", MAX_IMAGE_BYTES >> 20));
    }
    let sha256 = sha256_of(bytes);
    let known = DECODED.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|m| m.get(&sha256).cloned());
    let (name, width, height, phash) = match known {
        Some(d) => d,
        None => {
            let d = decode(bytes)?;
            let mut cache = DECODED.lock().unwrap_or_else(|e| e.into_inner());
            let map = cache.get_or_insert_with(Default::default);
            if map.len() >= DECODED_MAX {
                map.clear();
            }
            map.insert(sha256.clone(), d.clone());
            d
        }
    };
    Ok(Image {
        format: Some(name),
        width: Some(width),
        height: Some(height),
        sha256: Some(sha256),
        phash: Some(phash),
        url: format!("data:image/{name};base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes)),
    })
}

fn decode(bytes: &[u8]) -> Result<Decoded, String> {
    let format = image::guess_format(bytes).map_err(|_| "not a PNG, JPEG, GIF or WebP image".to_string())?;
    let name = match format {
        image::ImageFormat::Png => "png",
        image::ImageFormat::Jpeg => "jpeg",
        image::ImageFormat::Gif => "gif",
        image::ImageFormat::WebP => "webp",
        other => return Err(format!("{other:?} images are not read: give a PNG, JPEG, GIF or WebP image")),
    };
    let mut reader = image::ImageReader::with_format(Cursor::new(bytes), format);
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_DIMENSION);
    limits.max_image_height = Some(MAX_DIMENSION);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    let decoded = reader.decode().map_err(|e| format!("the {name} image does not decode: {e}"))?;
    let hasher = image_hasher::HasherConfig::new()
        .hash_size(8, 8)
        .hash_alg(image_hasher::HashAlg::Mean)
        .preproc_dct()
        .to_hasher();
    let phash = hex(hasher.hash_image(&decoded).as_bytes());
    Ok((name, decoded.width(), decoded.height(), phash))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `sha256:` and the hex digest of `bytes`.
pub fn sha256_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

/// What identifies the image a request's `image_url` names: `sha256:` of a data URI's decoded
/// bytes, or the URL itself (a data URI that does not decode is named by its own text's hash).
pub fn identity_of_url(url: &str) -> String {
    match url.strip_prefix("data:").map(data_uri_payload) {
        Some(Ok(bytes)) => sha256_of(&bytes),
        Some(Err(_)) => sha256_of(url.as_bytes()),
        None => url.to_string(),
    }
}

/// The similarity of two perceptual hashes (hex): 1 − Hamming distance / bits. `None` when
/// either is not hex or they differ in length.
pub fn phash_similarity(a: &str, b: &str) -> Option<f64> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let mut distance = 0u32;
    for (x, y) in a.chars().zip(b.chars()) {
        distance += (x.to_digit(16)? ^ y.to_digit(16)?).count_ones();
    }
    Some(1.0 - f64::from(distance) / (a.len() as f64 * 4.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32, f: impl Fn(u32, u32) -> [u8; 3]) -> Vec<u8> {
        let img = image::RgbImage::from_fn(w, h, |x, y| image::Rgb(f(x, y)));
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn a_png_is_read_with_its_size_hash_and_data_uri() {
        let bytes = png(5, 3, |x, _| [(x * 40) as u8, 0, 0]);
        let img = from_bytes(&bytes).unwrap();
        assert_eq!((img.format, img.width, img.height), (Some("png"), Some(5), Some(3)));
        assert_eq!(img.sha256.as_deref(), Some(sha256_of(&bytes).as_str()));
        assert_eq!(img.phash.as_ref().map(String::len), Some(16));
        assert!(img.url.starts_with("data:image/png;base64,"));
        // The data URI reads back to the same image.
        assert_eq!(read(&img.url, Paths::Refused).unwrap(), img);
        assert_eq!(identity_of_url(&img.url), sha256_of(&bytes));
    }

    #[test]
    fn urls_pass_through_and_paths_need_a_directory() {
        let u = read("https://example.com/cat.png", Paths::Refused).unwrap();
        assert_eq!(u.url, "https://example.com/cat.png");
        assert_eq!((u.format, u.sha256), (None, None));
        assert!(read("cat.png", Paths::Refused).unwrap_err().contains("read only from a rows file"));
        assert!(read("ftp://x/cat.png", Paths::Refused).unwrap_err().contains("scheme"));
        assert!(read("data:text/plain;base64,aGk=", Paths::Refused).unwrap_err().contains("not an image"));
        assert!(read("data:image/png;base64,aGk=", Paths::Refused).unwrap_err().contains("not a PNG"));
        assert!(read("data:image/png;base64,***", Paths::Refused).unwrap_err().contains("does not decode"));
        let missing = read("no-such.png", Paths::Under(Path::new("/nonexistent-dir"))).unwrap_err();
        assert!(missing.contains("cannot read the image `no-such.png`"), "{missing}");
    }

    #[test]
    fn a_truncated_png_is_an_error_not_a_panic() {
        let bytes = png(8, 8, |x, y| [x as u8, y as u8, 0]);
        assert!(from_bytes(&bytes[..bytes.len() / 2]).unwrap_err().contains("does not decode"));
    }

    #[test]
    fn phash_similarity_counts_differing_bits() {
        assert_eq!(phash_similarity("ffffffffffffffff", "ffffffffffffffff"), Some(1.0));
        assert_eq!(phash_similarity("0000000000000000", "ffffffffffffffff"), Some(0.0));
        assert_eq!(phash_similarity("000000000000000f", "0000000000000000"), Some(1.0 - 4.0 / 64.0));
        assert_eq!(phash_similarity("zz", "00"), None);
        assert_eq!(phash_similarity("00", "000"), None);
    }
}
