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

/// The example's rubric, compiled.
fn example_program() -> rubric::ir::Program {
    let c = rubric::types::compile_path(&example_dir().join("main.rubric"));
    c.program.unwrap_or_else(|| panic!("examples/images does not compile: {:?}", c.diagnostics))
}

fn field<'a>(v: &'a rubric::value::Value, name: &str) -> &'a rubric::value::Value {
    match v {
        rubric::value::Value::Record(r) => r.get(name).unwrap_or_else(|| panic!("no field {name} in {v:?}")),
        other => panic!("not a record: {other:?}"),
    }
}

#[test]
fn an_image_binds_from_a_path_a_data_uri_or_a_url_and_a_bad_one_is_a_row_error() {
    use rubric::runtime::bind_row_in;
    use rubric::value::Value;
    let p = example_program();
    let dir = example_dir();
    let png = std::fs::read(dir.join("images/red-disc.png")).unwrap();
    let sha = rubric::image::sha256_of(&png);
    let row = |image: &str| json!({"prompt": "p", "image": image, "reference": "images/red-disc-reference.jpeg"});
    // A path relative to the rows file's directory.
    let by_path = bind_row_in(&p, &row("images/red-disc.png"), Some(&dir)).unwrap();
    let img = &by_path[1];
    assert_eq!(field(img, "format"), &Value::text("png"));
    assert_eq!((field(img, "width"), field(img, "height")), (&Value::Number(48.0), &Value::Number(48.0)));
    assert_eq!(field(img, "sha256"), &Value::text(sha.as_str()));
    assert_eq!(field(img, "phash").as_text().unwrap().len(), 16);
    let url = field(img, "url").as_text().unwrap().to_string();
    assert!(url.starts_with("data:image/png;base64,"), "{url}");
    assert_eq!(field(&by_path[2], "format"), &Value::text("jpeg"));
    // The same bytes as a data URI (declared with another media type and wrapped): the same value.
    let b64 = url.trim_start_matches("data:image/png;base64,");
    let wrapped = format!("data:image/jpeg;base64,{}\n{}", &b64[..40], &b64[40..]);
    assert_eq!(bind_row_in(&p, &row(&wrapped), Some(&dir)).unwrap()[1], *img);
    // And in OpenAI's `image_url` form.
    let mut openai = row("");
    openai["image"] = json!({"url": "images/red-disc.png"});
    assert_eq!(bind_row_in(&p, &openai, Some(&dir)).unwrap()[1], *img);
    // A URL passes through unread.
    let by_url = bind_row_in(&p, &row("https://example.com/a.png"), Some(&dir)).unwrap();
    assert_eq!(field(&by_url[1], "url"), &Value::text("https://example.com/a.png"));
    for unknown in ["format", "width", "height", "sha256", "phash"] {
        assert_eq!(field(&by_url[1], unknown), &Value::Null, "{unknown}");
    }
    // What cannot be read is a `rubric::row::image` error naming the field and the cause.
    let bad = |image: &str, dir: Option<&std::path::Path>| bind_row_in(&p, &row(image), dir).unwrap_err();
    for (image, why) in [
        ("images/none.png", "cannot read the image `images/none.png`"),
        ("main.rubric", "not a PNG, JPEG, GIF or WebP image"),
        ("data:text/plain;base64,aGk=", "is not an image"),
        ("data:image/png;base64,%%%", "does not decode"),
        ("ftp://example.com/a.png", "scheme"),
    ] {
        let e = bad(image, Some(&dir));
        assert_eq!(e.code, "rubric::row::image", "{image}: {e:?}");
        assert!(e.message.starts_with("field `image`: ") && e.message.contains(why), "{image}: {}", e.message);
    }
    // Without a rows file (`rubric serve`, Python) a path is refused, a data URI is not.
    let e = bad("images/red-disc.png", None);
    assert!(e.message.contains("read only from a rows file"), "{}", e.message);
    let mut inline = row(&url);
    inline["reference"] = json!(url);
    assert_eq!(rubric::runtime::bind_row(&p, &inline).unwrap()[1], *img);
    // A number is a type error, as for any input.
    assert_eq!(
        bind_row_in(&p, &json!({"prompt": "p", "image": 3, "reference": url}), None).unwrap_err().code,
        "rubric::row::type"
    );
}

#[test]
fn a_truncated_image_file_is_an_error_record_and_the_batch_goes_on() {
    let dir = TempDir::new("images-bad");
    let png = std::fs::read(example_dir().join("images/red-disc.png")).unwrap();
    std::fs::create_dir_all(dir.path("pics")).unwrap();
    std::fs::write(dir.path("pics/cut.png"), &png[..png.len() / 2]).unwrap();
    std::fs::write(dir.path("pics/ok.png"), &png).unwrap();
    std::fs::write(dir.path("pics/ref.png"), &png).unwrap();
    let rows = dir.file(
        "rows.jsonl",
        "{\"id\": \"cut\", \"prompt\": \"p\", \"image\": \"pics/cut.png\", \"reference\": \"pics/ref.png\"}\n\
         {\"id\": \"ok\", \"prompt\": \"p\", \"image\": \"pics/ok.png\", \"reference\": \"pics/ref.png\"}\n",
    );
    let out = dir.path("out.jsonl");
    let o = rubric(&[
        &"run",
        &example_dir().join("main.rubric"),
        &"--input",
        &rows,
        &"--output",
        &out,
        &"--allow-errors",
        &"--no-progress",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let records: Vec<Json> =
        std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records[0]["error"]["code"], "rubric::row::image", "{}", records[0]);
    assert!(records[0]["error"]["message"].as_str().unwrap().contains("does not decode"), "{}", records[0]);
    let statuses: Vec<&Json> = records[1]["criteria"].as_array().unwrap().iter().map(|c| &c["status"]).collect();
    assert_eq!(statuses[..3], [&json!("met"), &json!("met"), &json!("met")], "{}", records[1]);
}

#[test]
fn the_image_intrinsics_agree_on_every_engine() {
    let src = r#"rubric images.engines @ 1.0.0
let a: Image = {url: "data:image/png;base64,...", format: "png", width: 48, height: 32, phash: "ffff0000ffff0000"}
let b: Image = {url: "data:image/png;base64,...", format: "jpeg", width: 4, height: 4, phash: "ffff0000ffff000f"}
let u: Image = {url: "https://example.com/x.png"}
criterion fmt "format" check image_format(a) == "png" and image_format(b) == "jpeg"
criterion dims "size" check image_width(a) == 48 and image_height(a) == 32 and a.width == 48
criterion alike "alike" value image_similarity(a, b)
criterion by_url "by url" check image_width(u) > 0
criterion field "a field of an image by URL is null" check u.width == null and u.url == "https://example.com/x.png"
score = mean(all, unscored: skip)
"#;
    let r = crate::common::evaluate_on_every_engine("images_engines", src);
    let got: Vec<String> = r.criteria.iter().map(|c| format!("{} {:?}", c.id, c.status)).collect();
    let text = format!("{got:?}");
    assert!(text.contains("fmt Met") && text.contains("dims Met") && text.contains("field Met"), "{text}");
    let alike = r.criteria.iter().find(|c| &*c.id == "alike").unwrap();
    assert_eq!(alike.value, Some(1.0 - 4.0 / 64.0), "{alike:?}");
    let by_url = r.criteria.iter().find(|c| &*c.id == "by_url").unwrap();
    assert_eq!(by_url.status, rubric::engine::Status::Unscored, "{by_url:?}");
    assert!(by_url.reason.as_deref().unwrap_or("").contains("passed by URL and not read"), "{by_url:?}");
}

/// `rubric run` of the example's rows, with `extra` options, into `out`; its records.
fn run_example(rows: &std::path::Path, out: &std::path::Path, extra: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<Json> {
    let main = example_dir().join("main.rubric");
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
        vec![&"run", &main, &"--input", &rows, &"--output", &out, &"--allow-errors", &"--no-progress"];
    args.extend_from_slice(extra);
    let o = rubric(&args);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let text = std::fs::read_to_string(out).unwrap();
    text.lines().map(|l| comparable(serde_json::from_str(l).unwrap())).collect()
}

/// A record without what differs between runs of the same verdicts: the engine, and the model
/// that answered (error records have neither).
fn comparable(mut v: Json) -> Json {
    v.as_object_mut().unwrap().remove("engine");
    for c in v["criteria"].as_array_mut().into_iter().flatten() {
        c.as_object_mut().unwrap().remove("model");
    }
    v
}

#[test]
fn a_vision_judge_is_shown_each_image_right_after_its_fence_on_every_engine_and_in_replay() {
    let dir = TempDir::new("images-judge");
    let ex = example_dir();
    let (_mock, base, judges) = crate::common::mock_judge(&dir, &ex.join("mock-rules.toml"), "");
    let input = ex.join("inputs.jsonl");
    let transcript = dir.path("transcript.jsonl");
    let live =
        run_example(&input, &dir.path("live.jsonl"), &[&"--judges", &judges, &"--no-cache", &"--record", &transcript]);
    // Five rows bind (the sixth names a missing file); the inline row's image is the first
    // row's bytes, so its request is the first row's, asked once.
    let bodies = mock_get(&base, "/requests");
    let bodies = bodies.as_array().unwrap();
    assert_eq!(bodies.len(), 4, "{bodies:?}");
    let disc = rubric::image::sha256_of(&std::fs::read(ex.join("images/red-disc.png")).unwrap());
    let mut seen = Vec::new();
    for b in bodies {
        // The system message stays one string; the user message is text and image parts.
        assert!(b["messages"][0]["content"].is_string(), "{b}");
        let parts = b["messages"][1]["content"].as_array().unwrap_or_else(|| panic!("no parts: {b}"));
        assert_eq!(parts.len(), 3, "text, image, text: {parts:?}");
        let before = parts[0]["text"].as_str().unwrap();
        let (image, after) = (&parts[1], parts[2]["text"].as_str().unwrap());
        assert_eq!(image["type"], "image_url");
        let url = image["image_url"]["url"].as_str().unwrap();
        // The text before the image ends with the image's fence, which names it.
        let end = before.rfind("<<<END image ").unwrap_or_else(|| panic!("{before}"));
        assert!(before[end..].ends_with(">>>") && !before[end..].contains('\n'), "{before}");
        let begin = before.rfind("<<<BEGIN image ").unwrap();
        let fenced = &before[begin..end];
        assert!(before[..begin].contains("It drew this image:"), "the template places the fence: {before}");
        assert!(before.contains("<<<BEGIN prompt ") && before.contains("Draw a red disc"), "{before}");
        assert!(after.contains("Criterion: The image shows what the prompt asks for"), "{after}");
        assert!(!after.contains("<<<END image"), "{after}");
        let identity = rubric::image::identity_of_url(url);
        if url.starts_with("data:") {
            assert!(
                fenced.contains(&format!("image: png, 48x48 pixels, {identity}"))
                    || fenced.contains(&format!("image: png, 16x16 pixels, {identity}")),
                "{fenced}"
            );
        } else {
            assert_eq!(url, "https://example.com/drawings/red-disc.png");
            assert!(fenced.contains("image: https://example.com/drawings/red-disc.png"), "{fenced}");
        }
        assert!(!fenced.contains("base64"), "the fence names the image, the part carries it: {fenced}");
        seen.push(identity);
    }
    assert!(seen.contains(&disc), "{seen:?}");
    // The judged records are what the recorded verdicts give, on every engine.
    for engine in ["interp", "wasm", "jit"] {
        let out = dir.path(&format!("{engine}.jsonl"));
        let recorded = run_example(&input, &out, &[&"--verdicts", &ex.join("verdicts.jsonl"), &"--engine", &engine]);
        assert_eq!(recorded, live, "{engine}");
    }
    assert_eq!(live[0]["criteria"][3]["status"], "met");
    assert_eq!(live[1]["criteria"][3]["status"], "unmet");
    // A replay of the transcript answers every request (the images are in what it is keyed by).
    let spec = format!("replay:{}", transcript.display());
    let replayed = run_example(&input, &dir.path("replay.jsonl"), &[&"--judge", &spec]);
    assert_eq!(replayed, live);
    assert_eq!(mock_get(&base, "/requests").as_array().unwrap().len(), 4, "a replay sends nothing");
}

#[test]
fn the_same_image_bytes_under_another_path_are_a_cache_hit_and_other_bytes_are_not() {
    let dir = TempDir::new("images-cache");
    let ex = example_dir();
    let (_mock, base, judges) = crate::common::mock_judge(&dir, &ex.join("mock-rules.toml"), "");
    let cache = dir.path("cache.sqlite");
    let copy = |from: &str, to: &str| {
        std::fs::create_dir_all(dir.path(to).parent().unwrap()).unwrap();
        std::fs::copy(ex.join("images").join(from), dir.path(to)).unwrap();
    };
    copy("red-disc.png", "first/disc.png");
    copy("red-disc-reference.jpeg", "first/ref.jpeg");
    copy("red-disc.png", "second/renamed/drawing.png");
    copy("red-disc-reference.jpeg", "second/ref.jpeg");
    copy("blue-square.png", "second/square.png");
    let row = |id: &str, image: &str| {
        format!("{{\"id\": \"{id}\", \"prompt\": \"Draw a red disc on a white background.\", \"image\": \"{image}\", \"reference\": \"ref.jpeg\"}}\n")
    };
    let first = dir.file("first/rows.jsonl", &row("a", "disc.png"));
    let run = |rows: &std::path::Path, out: &str| {
        run_example(rows, &dir.path(out), &[&"--judges", &judges, &"--cache", &cache])
    };
    let a = run(&first, "first.jsonl");
    assert_eq!(a[0]["criteria"][3]["status"], "met");
    let asked = || mock_get(&base, "/requests").as_array().unwrap().len();
    assert_eq!(asked(), 1);
    // The same bytes under another name in another directory: answered from the cache.
    let second = dir.file("second/rows.jsonl", &row("b", "renamed/drawing.png"));
    let b = run(&second, "second.jsonl");
    assert_eq!(b[0]["criteria"][3]["status"], "met");
    assert_eq!(asked(), 1, "the cache answers the same image bytes");
    // Other bytes: a new request.
    let third = dir.file("second/other.jsonl", &row("c", "square.png"));
    let c = run(&third, "third.jsonl");
    assert_eq!(c[0]["criteria"][3]["status"], "unmet");
    assert_eq!(asked(), 2);
}

/// `rubric serve` reads no file a client names: an image path is a `rubric::row::image` record
/// (the server's working directory holds the example's drawings, so the path would resolve),
/// and the same image as a data URI scores as `rubric run` scores it.
#[test]
fn serve_refuses_image_paths_and_scores_data_uris() {
    let ex = example_dir();
    let server = crate::serve::Server::start(&[&ex.join("main.rubric")], &[]);
    let png = std::fs::read(ex.join("images/red-disc.png")).unwrap();
    let uri = |bytes: &[u8], media: &str| {
        use base64::Engine as _;
        format!("data:image/{media};base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes))
    };
    let reference = uri(&std::fs::read(ex.join("images/red-disc-reference.jpeg")).unwrap(), "jpeg");
    let body = json!({"rows": [
        {"prompt": "p", "image": ex.join("images/red-disc.png"), "reference": reference},
        {"prompt": "p", "image": uri(&png, "png"), "reference": reference},
    ]});
    let (status, answer) = server.score(&body);
    assert_eq!(status, 200, "{answer}");
    let results = answer["results"].as_array().unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(results[0]["error"]["code"], "rubric::row::image", "{}", results[0]);
    assert!(results[0]["error"]["message"].as_str().unwrap().contains("read only from a rows file"), "{}", results[0]);
    let statuses: Vec<&Json> = results[1]["criteria"].as_array().unwrap().iter().map(|c| &c["status"]).collect();
    assert_eq!(statuses[..3], [&json!("met"), &json!("met"), &json!("met")], "{}", results[1]);
}
