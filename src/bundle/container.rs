//! The bundle container: a strict, deterministic subset of POSIX ustar, written and read here
//! by hand. Every entry is a regular file with mode 0644, owner 0:0, mtime 0 and empty user
//! and group names; data is padded with zeros to 512 bytes; the archive ends with exactly two
//! zero blocks. Any `tar` can list or extract a bundle, and the reader accepts only what the
//! writer produces: after parsing, the entries are written again and must give the same bytes.

use super::{BundleError, CODE_CONTAINER, CODE_TOO_LARGE};

const BLOCK: usize = 512;
/// ustar's `name` field; longer names would need the `prefix` field, which bundles never use.
pub const MAX_NAME: usize = 100;

/// One file of the archive.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    pub data: Vec<u8>,
}

fn put(header: &mut [u8; BLOCK], at: usize, bytes: &[u8]) {
    header[at..at + bytes.len()].copy_from_slice(bytes);
}

/// An octal field of `width` bytes: `width - 1` zero-padded digits and a NUL.
fn octal(value: u64, width: usize) -> Vec<u8> {
    let mut s = format!("{value:0w$o}", w = width - 1).into_bytes();
    s.push(0);
    s
}

fn header(name: &str, size: u64) -> [u8; BLOCK] {
    let mut h = [0u8; BLOCK];
    put(&mut h, 0, name.as_bytes());
    put(&mut h, 100, &octal(0o644, 8)); // mode
    put(&mut h, 108, &octal(0, 8)); // uid
    put(&mut h, 116, &octal(0, 8)); // gid
    put(&mut h, 124, &octal(size, 12)); // size
    put(&mut h, 136, &octal(0, 12)); // mtime
    put(&mut h, 148, b"        "); // checksum, as spaces while summing
    h[156] = b'0'; // regular file
    put(&mut h, 257, b"ustar\0");
    put(&mut h, 263, b"00");
    put(&mut h, 329, &octal(0, 8)); // devmajor
    put(&mut h, 337, &octal(0, 8)); // devminor
    let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
    let mut ck = format!("{sum:06o}").into_bytes();
    ck.push(0);
    ck.push(b' ');
    put(&mut h, 148, &ck);
    h
}

fn padding(len: usize) -> usize {
    (BLOCK - len % BLOCK) % BLOCK
}

/// Write entries in the given order. Names must be valid (see `check_name`).
pub fn write(entries: &[Entry]) -> Vec<u8> {
    let total: usize = entries.iter().map(|e| BLOCK + e.data.len() + padding(e.data.len())).sum::<usize>() + 2 * BLOCK;
    let mut out = Vec::with_capacity(total);
    for e in entries {
        out.extend_from_slice(&header(&e.name, e.data.len() as u64));
        out.extend_from_slice(&e.data);
        out.resize(out.len() + padding(e.data.len()), 0);
    }
    out.resize(out.len() + 2 * BLOCK, 0);
    out
}

/// A name the container accepts: relative, `/`-separated, made of `[A-Za-z0-9._-]` segments,
/// none empty, `.` or `..`, at most `MAX_NAME` bytes.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!("entry name `{name}` must have 1 to {MAX_NAME} bytes"));
    }
    for seg in name.split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return Err(format!("entry name `{name}` is not a plain relative path"));
        }
        if !seg.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-') {
            return Err(format!("entry name `{name}` has a character outside [A-Za-z0-9._-/]"));
        }
    }
    Ok(())
}

fn err(message: impl Into<String>) -> BundleError {
    BundleError::new(CODE_CONTAINER, message)
}

fn parse_octal(field: &[u8]) -> Option<u64> {
    let digits = field.split(|b| *b == 0 || *b == b' ').next()?;
    if digits.is_empty() {
        return None;
    }
    let s = std::str::from_utf8(digits).ok()?;
    u64::from_str_radix(s, 8).ok()
}

/// Parse an archive written by `write`, rejecting anything else with a message that names the
/// entry and the problem. `max_entries` bounds what a hostile file can make the
/// reader do.
pub fn read(bytes: &[u8], max_entries: usize) -> Result<Vec<Entry>, BundleError> {
    if bytes.len() < 2 * BLOCK || !bytes.len().is_multiple_of(BLOCK) {
        let looks_like_tar = bytes.len() >= 263 && &bytes[257..263] == b"ustar\0";
        return Err(err(if looks_like_tar {
            format!("the container is truncated: {} bytes is not a whole number of 512-byte blocks", bytes.len())
        } else {
            "not a rubric bundle: the file is not a ustar archive".to_string()
        }));
    }
    let mut entries: Vec<Entry> = Vec::new();
    let mut at = 0usize;
    loop {
        if at + BLOCK > bytes.len() {
            return Err(err("the container is truncated: it does not end with two zero blocks"));
        }
        let h = &bytes[at..at + BLOCK];
        if h.iter().all(|b| *b == 0) {
            break;
        }
        let index = entries.len();
        let raw_name = &h[..100];
        let name_end = raw_name.iter().position(|b| *b == 0).unwrap_or(100);
        let name = String::from_utf8_lossy(&raw_name[..name_end]).into_owned();
        let what = format!("entry {index} (`{name}`)");
        if index == 0 && &h[257..263] != b"ustar\0" {
            return Err(err(if h[257..262] == *b"ustar" {
                "the archive is a tar file, but not in the canonical ustar form `rubric build` writes \
                 (was it re-packed with another tool?)"
            } else {
                "not a rubric bundle: the file is not a ustar archive"
            }));
        }
        let stored = parse_octal(&h[148..156]);
        let mut sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
        sum = sum - h[148..156].iter().map(|b| u32::from(*b)).sum::<u32>() + 8 * u32::from(b' ');
        if stored != Some(u64::from(sum)) {
            return Err(err(format!("{what}: the header checksum does not match (the header was altered)")));
        }
        if index >= max_entries {
            return Err(BundleError::new(CODE_TOO_LARGE, format!("the container has more than {max_entries} entries")));
        }
        if h[156] != b'0' {
            return Err(err(format!("{what}: not a regular file (type `{}`)", h[156] as char)));
        }
        check_name(&name).map_err(|m| err(format!("{what}: {m}")))?;
        if entries.iter().any(|e| e.name == name) {
            return Err(err(format!("{what}: the name occurs twice")));
        }
        let Some(size) = parse_octal(&h[124..136]) else {
            return Err(err(format!("{what}: the size field is not an octal number")));
        };
        let start = at + BLOCK;
        let end = start
            .checked_add(size as usize)
            .filter(|e| *e <= bytes.len())
            .ok_or_else(|| err(format!("{what}: its size ({size} bytes) runs past the end of the container")))?;
        entries.push(Entry { name, data: bytes[start..end].to_vec() });
        at = end + padding(size as usize);
    }
    // Exactly two zero blocks, then nothing.
    if bytes.len() != at + 2 * BLOCK {
        return Err(err(if bytes.len() < at + 2 * BLOCK {
            "the container is truncated: it does not end with two zero blocks".to_string()
        } else {
            format!("{} bytes follow the end-of-archive marker", bytes.len() - at - BLOCK)
        }));
    }
    // Canonical: the writer gives back the same bytes.
    let again = write(&entries);
    if again != bytes {
        let pos = again.iter().zip(bytes).position(|(a, b)| a != b).unwrap_or(again.len().min(bytes.len()));
        return Err(err(format!("the container is not in canonical form: byte {pos} ({})", locate(&entries, pos))));
    }
    Ok(entries)
}

/// Describe where byte `pos` of a canonical archive lies.
fn locate(entries: &[Entry], pos: usize) -> String {
    let mut at = 0usize;
    for e in entries {
        if pos < at + BLOCK {
            return format!("in the header of `{}`", e.name);
        }
        let data_end = at + BLOCK + e.data.len();
        if pos < data_end {
            return format!("in the data of `{}`", e.name);
        }
        let next = data_end + padding(e.data.len());
        if pos < next {
            return format!("in the padding after `{}`, which must be zero", e.name);
        }
        at = next;
    }
    "in the end-of-archive blocks, which must be zero".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Entry> {
        vec![
            Entry { name: "a.json".into(), data: b"{}".to_vec() },
            Entry { name: "src/b.rubric".into(), data: vec![7u8; 600] },
            Entry { name: "empty".into(), data: vec![] },
        ]
    }

    #[test]
    fn round_trips() {
        let bytes = write(&sample());
        assert_eq!(bytes.len() % 512, 0);
        assert_eq!(read(&bytes, 100).unwrap(), sample());
    }

    #[test]
    fn rejects_altered_headers_padding_and_trailers() {
        let bytes = write(&sample());
        let mut b = bytes.clone();
        b[3] ^= 1; // name of entry 0
        assert!(read(&b, 100).unwrap_err().message.contains("header checksum"));
        let mut b = bytes.clone();
        b[512 + 2] = 1; // padding after a.json
        assert!(read(&b, 100).unwrap_err().message.contains("padding after `a.json`"));
        let mut b = bytes.clone();
        b.extend_from_slice(&[0u8; 512]);
        assert!(read(&b, 100).unwrap_err().message.contains("follow the end-of-archive"));
        let b = &bytes[..bytes.len() - 512];
        assert!(read(b, 100).unwrap_err().message.contains("truncated"));
        assert!(read(b"hello", 100).unwrap_err().message.contains("not a rubric bundle"));
        assert_eq!(read(&bytes, 2).unwrap_err().code, CODE_TOO_LARGE);
    }

    #[test]
    fn names_are_plain_relative_paths() {
        assert!(check_name("src/std/text.rubric").is_ok());
        for bad in ["", "/etc/passwd", "../x", "a//b", "a/./b", "a b", &"x".repeat(101)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
