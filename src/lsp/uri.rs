//! `file://` URIs and paths: a document's URI to the path its imports resolve against, and a
//! module's file (as the source map names it) back to a URI for a definition or a related
//! location. Only `file` URIs name a path; any other (`untitled:`) is a buffer without a
//! directory.

use lsp_types::Uri;
use std::path::{Path, PathBuf};

/// The path of a `file://` URI, percent-decoded; `None` for any other scheme.
pub fn to_path(uri: &Uri) -> Option<PathBuf> {
    let rest = uri.as_str().strip_prefix("file://")?;
    // `file://host/path` is not a local file; `file:///path` is (an empty host)
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return None;
    }
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    let text = String::from_utf8(out).ok()?;
    Some(PathBuf::from(text))
}

/// The `file://` URI of an absolute path.
pub fn from_path(path: &Path) -> Option<Uri> {
    let path = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir().ok()?.join(path) };
    let text = path.to_str()?;
    let mut out = String::from("file://");
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out.parse().ok()
}

/// The URI of a file the source map names: a path for a module on disk, nothing for the
/// embedded standard library (`<stdlib/std/text.rubric>`).
pub fn from_file_name(name: &str) -> Option<Uri> {
    if name.starts_with('<') {
        return None;
    }
    from_path(Path::new(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip_through_uris() {
        let p = Path::new("/tmp/a dir/é/main.rubric");
        let uri = from_path(p).unwrap();
        assert_eq!(uri.as_str(), "file:///tmp/a%20dir/%C3%A9/main.rubric");
        assert_eq!(to_path(&uri).unwrap(), p);
        assert_eq!(to_path(&"untitled:Untitled-1".parse().unwrap()), None);
        assert_eq!(from_file_name("<stdlib/std/text.rubric>"), None);
    }
}
