//! Build step: the tables of `detect_language` (`stdlib::intrinsics::ifeval::langid`), laid out
//! once here from langdetect's 55 built-in profiles (CPython 3.11 compatibility) so that a
//! process reads them in place from its own binary instead of building a hash map and a vector
//! per n-gram at start-up (which cost about 15 ms of CPU and 40 MB of fresh memory per process,
//! `docs/performance.md`).
//!
//! The file `langid.bin` in `OUT_DIR`, every number little-endian:
//!
//! | part | what |
//! |---|---|
//! | header | `RLI1`, then u32: languages, n-grams (rows), probabilities (slots), log2 of the hash table's size, astral upper-case letters |
//! | names | per language: u8 length, then its code in UTF-8 (`af` ... `zh-tw`, langdetect's order) |
//! | hash keys | u64 per hash slot: an n-gram packed as `Σ (char + 1) << 21·i`, 0 for an empty slot |
//! | hash rows | u32 per hash slot: the n-gram's row |
//! | characters | u32 per code point of the Basic Multilingual Plane: the character `NGram.normalize` makes of it (bits 0..16) and whether Python's `str.isupper` holds for that character (bit 16) |
//! | unigrams | u32 per code point of the Basic Multilingual Plane: row + 1 of that one-character n-gram, 0 if no profile has it |
//! | astral upper | u32 per astral upper-case code point, ascending |
//! | row starts | u32 per row, and one more: where the row's slots start |
//! | slot languages | u8 per slot: the language's index |
//! | slot probabilities | f64 per slot: `count / n_words` of that language, as langdetect computes it |
//!
//! Which characters are upper case is asked of langdetect itself (the Unicode version of
//! CPython 3.11, not the one Rust's `char` follows): a probe profile holds every normalised
//! character but `A` as a unigram, and `A` followed by a character gives no n-gram exactly when
//! langdetect takes both for capitals. A unit test compares the detector's probabilities with
//! langdetect's, bit for bit, on every IFEval response and its variants.

use langdetect::{Compat, DetectOptions, DetectorFactory, ErrorCode, LangProfile, Seed};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if let Err(e) = run() {
        println!("cargo:warning=detect_language's tables: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let mut f = DetectorFactory::new(Compat::python(11));
    f.load_builtin(&DetectorFactory::builtin_files())
        .map_err(|(i, e)| format!("langdetect's built-in profile {i} does not load: {e}"))?;
    let table = Saved::read(&f.to_bytes()).ok_or("langdetect's serialised form is not the one expected (LDF1)")?;
    let out = std::env::var_os("OUT_DIR").ok_or("cargo did not set OUT_DIR")?;
    let path = std::path::Path::new(&out).join("langid.bin");
    std::fs::write(&path, layout(&table)?).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// langdetect's table as `DetectorFactory::to_bytes` writes it: languages, then per n-gram its
/// packed characters, the length of its probability list and its non-zero entries.
struct Saved {
    langs: Vec<String>,
    rows: Vec<Row>,
}

/// One n-gram of langdetect's table: its characters, the length of its probability list and its
/// non-zero entries (language index, probability).
type Row = (Vec<char>, u32, Vec<(u32, f64)>);

impl Saved {
    fn read(b: &[u8]) -> Option<Saved> {
        let mut pos = 0usize;
        let mut take = |n: usize| -> Option<&[u8]> {
            let s = b.get(pos..pos.checked_add(n)?)?;
            pos += n;
            Some(s)
        };
        if take(4)? != b"LDF1" {
            return None;
        }
        take(2)?; // the sum mode and the Unicode version
        let u32_of = |s: &[u8]| Some(u32::from_le_bytes(s.try_into().ok()?));
        let u64_of = |s: &[u8]| Some(u64::from_le_bytes(s.try_into().ok()?));
        let mut langs = Vec::new();
        for _ in 0..u32_of(take(4)?)? {
            let n = u32_of(take(4)?)? as usize;
            langs.push(String::from_utf8(take(n)?.to_vec()).ok()?);
        }
        let mut rows = Vec::new();
        for _ in 0..u32_of(take(4)?)? {
            let key = u64_of(take(8)?)?;
            let chars: Vec<char> = (0..3)
                .map(|i| (key >> (21 * i)) & 0x1f_ffff)
                .take_while(|&v| v != 0)
                .map(|v| char::from_u32(v as u32 - 1))
                .collect::<Option<_>>()?;
            let len = u32_of(take(4)?)?;
            let mut slots = Vec::new();
            for _ in 0..u32_of(take(4)?)? {
                let s = u32_of(take(4)?)?;
                slots.push((s, f64::from_bits(u64_of(take(8)?)?)));
            }
            rows.push((chars, len, slots));
        }
        (pos == b.len()).then_some(Saved { langs, rows })
    }
}

fn pack(chars: &[char]) -> u64 {
    chars.iter().enumerate().fold(0, |k, (i, &c)| k | (u64::from(c) + 1) << (21 * i))
}

/// The hash slot an n-gram's search starts at (the runtime computes it the same way).
fn home(key: u64, bits: u32) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

fn layout(t: &Saved) -> Result<Vec<u8>, String> {
    let nl = t.langs.len();
    if nl == 0 || nl > 255 {
        return Err(format!("{nl} languages"));
    }
    for (chars, len, slots) in &t.rows {
        if *len as usize != nl || slots.iter().any(|&(s, _)| s as usize >= nl) || !(1..=3).contains(&chars.len()) {
            return Err(format!("the n-gram {chars:?} has a probability list of {len} for {nl} languages"));
        }
    }
    // the hash table, at most half full
    let bits = (t.rows.len() * 2).next_power_of_two().trailing_zeros().max(4);
    let cap = 1usize << bits;
    let mut keys = vec![0u64; cap];
    let mut rows = vec![0u32; cap];
    for (row, (chars, _, _)) in t.rows.iter().enumerate() {
        let key = pack(chars);
        let mut h = home(key, bits);
        while keys[h] != 0 {
            if keys[h] == key {
                return Err(format!("the n-gram {chars:?} comes twice"));
            }
            h = (h + 1) & (cap - 1);
        }
        keys[h] = key;
        rows[h] = row as u32;
    }
    let mut unigram = vec![0u32; 0x10000];
    for (row, (chars, _, _)) in t.rows.iter().enumerate() {
        if let [c] = chars[..] {
            if (c as u32) < 0x10000 {
                unigram[c as usize] = row as u32 + 1;
            }
        }
    }
    let (chars, astral_upper) = characters()?;

    let mut out = b"RLI1".to_vec();
    let n_slots: usize = t.rows.iter().map(|r| r.2.len()).sum();
    for n in [nl, t.rows.len(), n_slots, bits as usize, astral_upper.len()] {
        out.extend_from_slice(&(n as u32).to_le_bytes());
    }
    for l in &t.langs {
        out.push(l.len() as u8);
        out.extend_from_slice(l.as_bytes());
    }
    keys.iter().for_each(|k| out.extend_from_slice(&k.to_le_bytes()));
    rows.iter().for_each(|r| out.extend_from_slice(&r.to_le_bytes()));
    chars.iter().for_each(|c| out.extend_from_slice(&c.to_le_bytes()));
    unigram.iter().for_each(|u| out.extend_from_slice(&u.to_le_bytes()));
    astral_upper.iter().for_each(|c| out.extend_from_slice(&c.to_le_bytes()));
    let mut start = 0u32;
    for (_, _, slots) in &t.rows {
        out.extend_from_slice(&start.to_le_bytes());
        start += slots.len() as u32;
    }
    out.extend_from_slice(&start.to_le_bytes());
    t.rows.iter().flat_map(|r| &r.2).for_each(|&(s, _)| out.push(s as u8));
    t.rows.iter().flat_map(|r| &r.2).for_each(|&(_, p)| out.extend_from_slice(&p.to_le_bytes()));
    Ok(out)
}

/// Per code point of the Basic Multilingual Plane: its normalised character and whether that is
/// upper case; and the astral code points that are upper case (langdetect leaves astral
/// characters as they are, which a unit test checks).
fn characters() -> Result<(Vec<u32>, Vec<u32>), String> {
    let bmp: Vec<(char, char)> =
        (0..0x10000u32).filter_map(char::from_u32).map(|c| (c, langdetect::text::normalize(c))).collect();
    // astral candidates: what Rust's (later) Unicode calls upper case; letters do not stop
    // being upper case from one version to the next
    let astral: Vec<char> = (0x10000..=0x10_FFFFu32).filter_map(char::from_u32).filter(|c| c.is_uppercase()).collect();
    let mut probed: Vec<char> = bmp.iter().map(|&(_, n)| n).chain(astral.iter().copied()).collect();
    probed.sort_unstable();
    probed.dedup();
    probed.retain(|&c| c != ' ' && c != 'A');
    let mut probe = DetectorFactory::new(Compat::python(11));
    probe
        .add_profile(&LangProfile {
            name: "probe".into(),
            freq: probed.iter().map(|c| (c.to_string(), 1.0)).collect(),
            n_words: vec![1.0; 3],
        })
        .map_err(|e| format!("the probe profile: {e}"))?;
    // whether the character `raw` normalises to (`normal`) is upper case
    let upper = |raw: char, normal: char| -> Result<bool, String> {
        match normal {
            ' ' => Ok(false),
            _ => match probe.detect_block(&format!("A{raw}"), &DetectOptions::default(), &Seed::Int(0)) {
                Ok(_) => Ok(false),
                Err(e) if e.code() == Some(ErrorCode::CantDetectError) => Ok(true),
                Err(e) => Err(format!("probing U+{:04X}: {e}", raw as u32)),
            },
        }
    };
    let mut chars = vec![u32::from(' '); 0x10000];
    for &(c, n) in &bmp {
        if n as u32 >= 0x10000 {
            return Err(format!("U+{:04X} normalises outside the Basic Multilingual Plane", c as u32));
        }
        chars[c as usize] = n as u32 | u32::from(upper(c, n)?) << 16;
    }
    let mut astral_upper = Vec::new();
    for c in astral {
        if upper(c, c)? {
            astral_upper.push(c as u32);
        }
    }
    Ok((chars, astral_upper))
}
