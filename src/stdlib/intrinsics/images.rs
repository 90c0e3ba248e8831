//! Deterministic checks of `Image` values (the record `runtime::bind` reads a row's image into,
//! `ir::Type::image`): format, width, height, and the similarity of two images' perceptual
//! hashes. An image passed by URL was never read, so what these ask of it is unknown: they trap
//! (`rubric::trap::invalid_argument`), which leaves the criterion unscored with the reason,
//! never a silent 0.
//!
//! Pipeline position: part of `stdlib::intrinsics::ALL`, called by every engine.

use super::arg;
use crate::stdlib::{EvalCtx, Intrinsic, Trap, TrapKind};
use crate::value::Value;

pub(super) const IMAGE_FORMAT: Intrinsic = Intrinsic {
    name: "image_format",
    sig: "(img: Image) -> Text",
    doc: "The image's format, read from its bytes (not from a file name or a data URI's declared \
          type): `\"png\"`, `\"jpeg\"`, `\"gif\"` or `\"webp\"`. An image passed by URL was not \
          read: the call traps (`rubric::trap::invalid_argument`) and the criterion is unscored. \
          The same as `img.format`, which is `null` for such an image.",
    examples: &[
        r##"image_format({url: "data:image/png;base64,...", format: "png", width: 4, height: 3}) == "png""##,
        r##"image_format({url: "data:image/jpeg;base64,...", format: "jpeg"}) != "png""##,
    ],
    imp: image_format,
};

pub(super) const IMAGE_WIDTH: Intrinsic = Intrinsic {
    name: "image_width",
    sig: "(img: Image) -> Number",
    doc: "The image's width in pixels, from its header. Traps for an image passed by URL (not \
          read), like `image_format`.",
    examples: &[r##"image_width({url: "data:image/png;base64,...", format: "png", width: 640, height: 480}) == 640"##],
    imp: image_width,
};

pub(super) const IMAGE_HEIGHT: Intrinsic = Intrinsic {
    name: "image_height",
    sig: "(img: Image) -> Number",
    doc: "The image's height in pixels, from its header. Traps for an image passed by URL (not \
          read), like `image_format`.",
    examples: &[r##"image_height({url: "data:image/png;base64,...", format: "png", width: 640, height: 480}) == 480"##],
    imp: image_height,
};

pub(super) const IMAGE_SIMILARITY: Intrinsic = Intrinsic {
    name: "image_similarity",
    sig: "(a: Image, b: Image) -> Number",
    doc: "How alike two images look, from 0 to 1: 1 − the Hamming distance of their 64-bit \
          perceptual hashes / 64. The hash (`img.phash`, 16 hex digits) is the pHash of \
          `image_hasher` (the image in grey, resized to 16×16, its DCT's 8×8 lowest frequencies \
          against their mean), so the same picture re-encoded, rescaled or slightly recoloured \
          stays near 1, and unrelated pictures fall near 0.5. Identical bytes give exactly 1. \
          Traps for an image passed by URL (not read).",
    examples: &[
        r##"image_similarity({url: "a", phash: "ffffffffffffffff"}, {url: "b", phash: "ffffffffffffffff"}) == 1"##,
        r##"image_similarity({url: "a", phash: "ffffffffffffffff"}, {url: "b", phash: "fffffffffffffff0"}) == 1 - 4 / 64"##,
        r##"image_similarity({url: "a", phash: "0000000000000000"}, {url: "b", phash: "ffffffffffffffff"}) == 0"##,
    ],
    imp: image_similarity,
};

/// Field `field` of the image argument `i`, or a trap naming what is unknown.
fn field<'a>(args: &'a [Value], i: usize, field: &str, what: &str) -> Result<&'a Value, Trap> {
    let Value::Record(r) = arg(args, i)? else {
        return Err(Trap::new(TrapKind::Type, format!("argument {} must be an image, got `{}`", i + 1, args[i])));
    };
    match r.get(field) {
        Some(Value::Null) | None => {
            let url = r.get("url").and_then(Value::as_text).unwrap_or("");
            let shown: String = url.chars().take(80).collect();
            let more = if shown.len() < url.len() { "…" } else { "" };
            Err(Trap::new(
                TrapKind::InvalidArgument,
                format!("the image `{shown}{more}` was passed by URL and not read: its {what} is unknown"),
            ))
        }
        Some(v) => Ok(v),
    }
}

fn image_format(a: &[Value], _: &mut EvalCtx) -> Result<Value, Trap> {
    field(a, 0, "format", "format").cloned()
}

fn image_width(a: &[Value], _: &mut EvalCtx) -> Result<Value, Trap> {
    field(a, 0, "width", "width").cloned()
}

fn image_height(a: &[Value], _: &mut EvalCtx) -> Result<Value, Trap> {
    field(a, 0, "height", "height").cloned()
}

fn image_similarity(a: &[Value], _: &mut EvalCtx) -> Result<Value, Trap> {
    let hash = |i: usize| -> Result<&str, Trap> {
        field(a, i, "phash", "perceptual hash")?
            .as_text()
            .ok_or_else(|| Trap::new(TrapKind::Type, format!("argument {}: an image's `phash` must be text", i + 1)))
    };
    let (x, y) = (hash(0)?, hash(1)?);
    crate::image::phash_similarity(x, y).map(Value::Number).ok_or_else(|| {
        Trap::new(
            TrapKind::InvalidArgument,
            format!("`{x}` and `{y}` are not perceptual hashes of one length (hex digits)"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn img(fields: &[(&str, Value)]) -> Value {
        let mut m = BTreeMap::new();
        for (k, v) in fields {
            m.insert(Arc::from(*k), v.clone());
        }
        Value::Record(Arc::new(m))
    }

    #[test]
    fn an_image_by_url_traps_with_what_is_unknown() {
        let u = img(&[("url", Value::text("https://example.com/a.png")), ("width", Value::Null)]);
        let t = call(image_width, std::slice::from_ref(&u)).unwrap_err();
        assert_eq!(t.kind, TrapKind::InvalidArgument);
        assert!(t.message.contains("https://example.com/a.png") && t.message.contains("width"), "{}", t.message);
        let read = img(&[("url", Value::text("data:")), ("phash", Value::text("0f0f0f0f0f0f0f0f"))]);
        let t = call(image_similarity, &[read, u]).unwrap_err();
        assert!(t.message.contains("perceptual hash"), "{}", t.message);
    }

    #[test]
    fn malformed_hashes_trap() {
        let a = img(&[("url", Value::text("a")), ("phash", Value::text("xyz"))]);
        let b = img(&[("url", Value::text("b")), ("phash", Value::text("000"))]);
        assert_eq!(call(image_similarity, &[a, b]).unwrap_err().kind, TrapKind::InvalidArgument);
    }
}
