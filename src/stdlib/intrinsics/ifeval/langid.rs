//! `detect_language`: langdetect 1.0.9 (the detector IFEval uses) as CPython 3.11 runs it with
//! `DetectorFactory.seed = 0`, answer for answer and probability for probability, over tables
//! that `build.rs` lays out from langdetect's profiles and this module reads in place from the
//! binary (see `build.rs` for the layout). Nothing is built at start-up: a process that detects
//! one language touches a few pages of the tables, where restoring the `langdetect` crate's
//! factory took about 15 ms of CPU and 40 MB of fresh memory.
//!
//! The algorithm is langdetect's: the text is prepared as `Detector.append` and
//! `Detector.cleaning_text` prepare it (the `langdetect` crate's own `text::prepare` and
//! `text::clean`), its one- to three-character n-grams are collected as `NGram` collects them,
//! and seven random walks, each drawing n-grams with CPython's Mersenne Twister seeded with 0,
//! multiply every language's probability by the drawn n-gram's until one language passes
//! 0.99999. The `langdetect` crate stays the reference: a unit test compares every probability,
//! bit for bit, over every IFEval response and its loose variants.

use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::sync::LazyLock;

static TABLES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/langid.bin"));

/// langdetect's constants (`Detector`).
const N_TRIAL: usize = 7;
const ALPHA: f64 = 0.5;
const ALPHA_WIDTH: f64 = 0.05;
const BASE_FREQ: f64 = 10000.0;
const ITERATION_LIMIT: usize = 1000;
const CONV_THRESHOLD: f64 = 0.99999;
const PROB_THRESHOLD: f64 = 0.1;
const MAX_TEXT_LENGTH: i64 = 10000;
/// The number of languages of langdetect's built-in profiles.
const LANGS: usize = 55;

/// Views into [`TABLES`], each part as laid out by `build.rs`.
struct Tables {
    langs: Vec<&'static str>,
    bits: u32,
    keys: &'static [u8],
    rows: &'static [u8],
    chars: &'static [u8],
    unigram: &'static [u8],
    astral_upper: &'static [u8],
    row_start: &'static [u8],
    slot_lang: &'static [u8],
    slot_prob: &'static [u8],
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    let s = &b[4 * i..4 * i + 4];
    u32::from_le_bytes([s[0], s[1], s[2], s[3]])
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    let s = &b[8 * i..8 * i + 8];
    u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]])
}

impl Tables {
    fn read(b: &'static [u8]) -> Option<Tables> {
        let mut rest = b.strip_prefix(b"RLI1")?;
        let mut take = |n: usize| -> Option<&'static [u8]> {
            let (head, tail) = rest.split_at_checked(n)?;
            rest = tail;
            Some(head)
        };
        let mut header = [0usize; 5];
        for h in &mut header {
            *h = u32_at(take(4)?, 0) as usize;
        }
        let [nl, n_rows, n_slots, bits, n_astral] = header;
        if nl != LANGS || !(4..=30).contains(&bits) {
            return None;
        }
        let mut langs = Vec::with_capacity(nl);
        for _ in 0..nl {
            let n = usize::from(*take(1)?.first()?);
            langs.push(std::str::from_utf8(take(n)?).ok()?);
        }
        let cap = 1usize << bits;
        let t = Tables {
            langs,
            bits: bits as u32,
            keys: take(8 * cap)?,
            rows: take(4 * cap)?,
            chars: take(4 * 0x10000)?,
            unigram: take(4 * 0x10000)?,
            astral_upper: take(4 * n_astral)?,
            row_start: take(4 * (n_rows + 1))?,
            slot_lang: take(n_slots)?,
            slot_prob: take(8 * n_slots)?,
        };
        (rest.is_empty() && u32_at(t.row_start, n_rows) as usize == n_slots).then_some(t)
    }

    /// The row of an n-gram of two or three characters, or of an astral character.
    fn row(&self, chars: &[char]) -> Option<u32> {
        let key = chars.iter().enumerate().fold(0u64, |k, (i, &c)| k | (u64::from(c) + 1) << (21 * i));
        let mask = (1usize << self.bits) - 1;
        let mut h = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bits)) as usize;
        loop {
            match u64_at(self.keys, h) {
                0 => return None,
                k if k == key => return Some(u32_at(self.rows, h)),
                _ => h = (h + 1) & mask,
            }
        }
    }

    /// `NGram.normalize(c)` and whether the result is upper case in CPython 3.11.
    fn normal(&self, c: char) -> (char, bool) {
        let cp = c as u32;
        if cp < 0x10000 {
            let v = u32_at(self.chars, cp as usize);
            (char::from_u32(v & 0xffff).unwrap_or(' '), v & 0x1_0000 != 0)
        } else {
            let n = self.astral_upper.len() / 4;
            let (mut lo, mut hi) = (0, n);
            while lo < hi {
                let mid = (lo + hi) / 2;
                match u32_at(self.astral_upper, mid).cmp(&cp) {
                    std::cmp::Ordering::Less => lo = mid + 1,
                    std::cmp::Ordering::Greater => hi = mid,
                    std::cmp::Ordering::Equal => return (c, true),
                }
            }
            (c, false)
        }
    }

    /// `Detector._extract_ngrams` on a prepared text: the row of every n-gram some profile
    /// has, in the order langdetect lists them.
    fn extract(&self, text: &str, out: &mut Vec<u32>) {
        // `NGram.grams`: at most three characters, starting as one space
        let mut grams = [' '; 3];
        let mut len = 1;
        let mut last_upper = false;
        let mut capital_word = false;
        for raw in text.chars() {
            let (ch, upper) = self.normal(raw);
            if grams[len - 1] == ' ' {
                grams[0] = ' ';
                len = 1;
                capital_word = false;
                if ch == ' ' {
                    continue;
                }
            } else if len == 3 {
                grams = [grams[1], grams[2], ' '];
                len = 2;
            }
            grams[len] = ch;
            len += 1;
            if upper {
                capital_word |= last_upper;
            } else {
                capital_word = false;
            }
            last_upper = upper;
            if capital_word {
                continue;
            }
            if ch != ' ' {
                let found = if (ch as u32) < 0x10000 {
                    u32_at(self.unigram, ch as usize).checked_sub(1)
                } else {
                    self.row(&[ch])
                };
                out.extend(found);
            }
            for n in 2..=len {
                out.extend(self.row(&grams[len - n..len]));
            }
        }
    }

    /// The probability of each language for `ngrams` (`Detector._detect_block` after
    /// extraction), or `None` where langdetect raises (every probability underflowed to 0).
    fn walk(&self, scratch: &mut Scratch) -> Option<[f64; LANGS]> {
        scratch.begin();
        let n = scratch.ngrams.len();
        let mut rng = PyRandom::seeded_zero();
        let mut langprob = [0.0f64; LANGS];
        for _ in 0..N_TRIAL {
            let mut prob = [1.0 / LANGS as f64; LANGS];
            let alpha = ALPHA + rng.gauss() * ALPHA_WIDTH;
            let weight = alpha / BASE_FREQ;
            let mut i = 0usize;
            loop {
                let row = scratch.row(self, rng.below(n));
                for (p, r) in prob.iter_mut().zip(row) {
                    *p *= weight + r;
                }
                if i.is_multiple_of(5) {
                    // Python 3.11's `sum`: one addition after the other, from the first
                    let total = prob.iter().fold(0.0, |s, &p| s + p);
                    if total == 0.0 {
                        return None;
                    }
                    // Each division alone (so that they run side by side), then the
                    // maximum as langdetect takes it, in order.
                    for p in &mut prob {
                        *p /= total;
                    }
                    let maxp = prob.iter().fold(0.0f64, |m, &p| if m < p { p } else { m });
                    if maxp > CONV_THRESHOLD || i >= ITERATION_LIMIT {
                        break;
                    }
                }
                i += 1;
            }
            for (lp, p) in langprob.iter_mut().zip(prob) {
                *lp += p / N_TRIAL as f64;
            }
        }
        Some(langprob)
    }
}

/// Per-thread space of a detection: the n-grams of the text, and each n-gram drawn spread into
/// a dense row of one probability per language the first time it is drawn.
#[derive(Default)]
struct Scratch {
    ngrams: Vec<u32>,
    /// Per position of `ngrams`: its dense row + 1, or 0 before its first draw.
    at: Vec<u32>,
    /// The dense row of each n-gram drawn so far.
    built: FxHashMap<u32, u32>,
    dense: Vec<[f64; LANGS]>,
}

impl Scratch {
    fn begin(&mut self) {
        self.at.clear();
        self.at.resize(self.ngrams.len(), 0);
        self.built.clear();
        self.dense.clear();
    }

    /// The probabilities of the n-gram at position `pick`.
    fn row(&mut self, t: &Tables, pick: usize) -> &[f64; LANGS] {
        let d = match self.at[pick].checked_sub(1) {
            Some(d) => d,
            None => {
                let row = self.ngrams[pick];
                let next = self.dense.len() as u32;
                let d = *self.built.entry(row).or_insert(next);
                if d == next {
                    let mut dense = [0.0f64; LANGS];
                    let (s, e) = (u32_at(t.row_start, row as usize), u32_at(t.row_start, row as usize + 1));
                    for slot in s as usize..e as usize {
                        dense[usize::from(t.slot_lang[slot])] = f64::from_bits(u64_at(t.slot_prob, slot));
                    }
                    self.dense.push(dense);
                }
                self.at[pick] = d + 1;
                d
            }
        };
        &self.dense[d as usize]
    }
}

/// CPython's `random.Random`: MT19937, seeded as `seed(0)` seeds it, with `random()`,
/// `gauss(0, 1)` and `_randbelow(n)` as CPython computes them.
struct PyRandom {
    mt: [u32; 624],
    next: usize,
    gauss_next: Option<f64>,
}

impl PyRandom {
    /// `random.Random(0)`: `init_by_array([0])`.
    fn seeded_zero() -> PyRandom {
        static STATE: LazyLock<[u32; 624]> = LazyLock::new(|| {
            let mut mt = [0u32; 624];
            mt[0] = 19_650_218;
            for i in 1..624 {
                mt[i] = 1_812_433_253u32.wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_add(i as u32);
            }
            let key = [0u32];
            let mut i = 1;
            let mut j = 0;
            for _ in 0..624usize.max(key.len()) {
                mt[i] = (mt[i] ^ (mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_mul(1_664_525))
                    .wrapping_add(key[j])
                    .wrapping_add(j as u32);
                i += 1;
                j = (j + 1) % key.len();
                if i == 624 {
                    mt[0] = mt[623];
                    i = 1;
                }
            }
            for _ in 0..623 {
                mt[i] = (mt[i] ^ (mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
                i += 1;
                if i == 624 {
                    mt[0] = mt[623];
                    i = 1;
                }
            }
            mt[0] = 0x8000_0000;
            mt
        });
        PyRandom { mt: *STATE, next: 624, gauss_next: None }
    }

    fn word(&mut self) -> u32 {
        if self.next == 624 {
            let twist = |a: u32, b: u32, far: u32| {
                let y = (a & 0x8000_0000) | (b & 0x7fff_ffff);
                far ^ (y >> 1) ^ if y & 1 == 1 { 0x9908_b0df } else { 0 }
            };
            for k in 0..624 {
                self.mt[k] = twist(self.mt[k], self.mt[(k + 1) % 624], self.mt[(k + 397) % 624]);
            }
            self.next = 0;
        }
        let mut y = self.mt[self.next];
        self.next += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `random()`: 53 random bits from two words.
    fn random(&mut self) -> f64 {
        let a = f64::from(self.word() >> 5);
        let b = f64::from(self.word() >> 6);
        (a * 67_108_864.0 + b) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `gauss(0.0, 1.0)`: Box-Muller, keeping the second value for the next call.
    fn gauss(&mut self) -> f64 {
        if let Some(z) = self.gauss_next.take() {
            return z;
        }
        let x2pi = self.random() * std::f64::consts::TAU;
        let g2rad = (-2.0 * (1.0 - self.random()).ln()).sqrt();
        self.gauss_next = Some(x2pi.sin() * g2rad);
        x2pi.cos() * g2rad
    }

    /// `_randbelow(n)` for `1 <= n < 2**32`: `getrandbits(n.bit_length())` until below `n`.
    fn below(&mut self, n: usize) -> usize {
        let k = usize::BITS - n.leading_zeros();
        loop {
            let r = (self.word() >> (32 - k)) as usize;
            if r < n {
                return r;
            }
        }
    }
}

#[expect(clippy::expect_used, reason = "build.rs writes the tables; every IFEval test reads them")]
static LOADED: LazyLock<Tables> =
    LazyLock::new(|| Tables::read(TABLES).expect("detect_language's tables, as build.rs lays them out, read back"));

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// The probability of every language (in [`languages`] order) langdetect gives `text`, or
/// `None` where it raises: no n-gram of any profile in the text, or every probability gone
/// to 0.
pub(super) fn probabilities(text: &str) -> Option<[f64; LANGS]> {
    let prepared = langdetect::text::prepare(text, MAX_TEXT_LENGTH);
    let text = langdetect::text::clean(&prepared).unwrap_or(prepared);
    let t = &*LOADED;
    SCRATCH.with_borrow_mut(|s| {
        s.ngrams.clear();
        t.extract(&text, &mut s.ngrams);
        if s.ngrams.is_empty() {
            return None;
        }
        t.walk(s)
    })
}

/// The language codes, in langdetect's order (`af` ... `zh-tw`).
pub(super) fn languages() -> &'static [&'static str] {
    &LOADED.langs
}

/// `langdetect.detect(text)`: the most probable language above 0.1 (the first of equals), or
/// `unknown`; `None` where langdetect raises.
pub(super) fn detect(text: &str) -> Option<&'static str> {
    let p = probabilities(text)?;
    let mut best: Option<(usize, f64)> = None;
    for (i, &x) in p.iter().enumerate() {
        if x > PROB_THRESHOLD && best.is_none_or(|(_, b)| x > b) {
            best = Some((i, x));
        }
    }
    Some(best.map_or("unknown", |(i, _)| languages()[i]))
}

/// Reads the tables and compiles the patterns of langdetect's text preparation (URLs and
/// e-mail addresses), so that the first row that detects a language does not.
pub(super) fn load() {
    LazyLock::force(&LOADED);
    let _ = langdetect::text::prepare("http://example.org a@example.org", MAX_TEXT_LENGTH);
}

#[cfg(test)]
mod tests {
    use super::*;
    use langdetect::{Compat, DetectorFactory, Seed};

    /// The reference: the `langdetect` crate's factory built from langdetect's profiles, as
    /// CPython 3.11 runs it, seeded with 0.
    fn reference() -> DetectorFactory {
        let mut f = DetectorFactory::new(Compat::python(11));
        let loaded = f.load_builtin(&DetectorFactory::builtin_files());
        assert!(loaded.is_ok(), "langdetect's built-in profiles load: {loaded:?}");
        f.seed = Seed::Int(0);
        f
    }

    /// IFEval's loose variants of a response: without its first line, its last line, both,
    /// and each of those four without asterisks.
    fn variants(r: &str) -> Vec<String> {
        let lines: Vec<&str> = r.split('\n').collect();
        let n = lines.len();
        let cut = |a: usize, b: usize| lines.get(a.min(n)..b.max(a.min(n))).unwrap_or_default().join("\n");
        let base = [r.to_string(), cut(1, n), cut(0, n.saturating_sub(1)), cut(1, n.saturating_sub(1))];
        base.iter().cloned().chain(base.iter().map(|t| t.replace('*', ""))).collect()
    }

    fn ifeval_responses() -> Vec<String> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/conformance/ifeval/responses_gpt4.jsonl");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
            panic!("the IFEval conformance data is missing ({path}: {e}); see ../shared/conformance/README.md")
        });
        text.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}: {e}"));
                v["response"].as_str().unwrap_or_else(|| panic!("{path}: a row without a response")).to_string()
            })
            .collect()
    }

    /// Texts in many scripts, and the corners of n-gram collection: capitals after capitals,
    /// astral letters (Deseret, mathematical bold, emoji), letters Unicode made upper case after
    /// CPython 3.11's version, URLs and addresses, mostly non-Latin text with Latin in it.
    const CORNERS: &[&str] = &[
        "This is an English sentence about the weather.",
        "Dies ist ein deutscher Satz über das Wetter.",
        "Ceci est une phrase française sur la météo.",
        "यह मौसम के बारे में एक हिंदी वाक्य है।",
        "这是一个关于天气的中文句子。",
        "這是一個關於天氣的中文句子。",
        "これは天気についての日本語の文です。",
        "이것은 날씨에 관한 한국어 문장입니다.",
        "Это русское предложение о погоде.",
        "هذه جملة عربية عن الطقس ی",
        "Đây là một câu tiếng Việt về thời tiết. Tiếng Việt có dấu: a\u{301} e\u{300}.",
        "ok",
        "12345 !!!",
        "",
        "   ",
        "NASA and the USA SENT ROCKETS; ThE mIxEd CaSe",
        "ABC DEF GHI jkl MNO pqr",
        "\u{10400}\u{10428} \u{1D400}\u{1D401}\u{1D41A} \u{1F600} \u{1F130}\u{1F131}",
        "A\u{1C89}b \u{A7CB}a \u{A7DA}x \u{10D50}y",
        "see https://example.org/path?q=1 and mail me at someone@example.com please",
        "Привет, hello, как дела? ok ok ok",
        "ab привет мир",
        "ș ț Ș Ț ạ ả",
        "ひらがな カタカナ ㄅㄆ 한글",
    ];

    #[test]
    fn probabilities_are_langdetects_bit_for_bit() {
        let f = reference();
        let long = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(300);
        let mut texts: Vec<String> = CORNERS.iter().map(|t| t.to_string()).collect();
        texts.push(long);
        let responses = ifeval_responses();
        assert_eq!(responses.len(), 540, "responses_gpt4.jsonl should hold IFEval's 540 GPT-4 responses");
        texts.extend(responses.iter().flat_map(|r| variants(r)));
        let (mut detected, mut raised) = (0, 0);
        for t in &texts {
            let mut d = f.create().unwrap_or_else(|e| panic!("{e}"));
            d.append(t);
            let theirs = d.langprob().map(|p| p.iter().map(|x| x.to_bits()).collect::<Vec<_>>()).ok();
            let ours = probabilities(t).map(|p| p.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
            assert_eq!(ours, theirs, "probabilities of {t:?}");
            assert_eq!(detect(t).map(str::to_string), f.detect(t).ok(), "language of {t:?}");
            if ours.is_some() {
                detected += 1
            } else {
                raised += 1
            }
        }
        // both outcomes were compared, not only one
        assert!(detected > 3000 && raised > 100, "{detected} detected, {raised} without features");
        assert_eq!(languages(), f.langlist());
    }

    #[test]
    fn characters_normalise_as_langdetect_normalises_them() {
        let t = &*LOADED;
        for c in (0..=0x10_FFFFu32).filter_map(char::from_u32) {
            assert_eq!(t.normal(c).0, langdetect::text::normalize(c), "U+{:04X}", c as u32);
        }
        assert!(t.normal('A').1 && t.normal('Ä').1 && !t.normal('a').1 && !t.normal('1').1);
        // capital Deseret and mathematical bold letters are astral capitals; an emoji is not
        assert!(t.normal('\u{10400}').1 && t.normal('\u{1D400}').1 && !t.normal('\u{1F600}').1);
        // U+1C89 became a capital in Unicode 16, after CPython 3.11's Unicode 14
        assert!(!t.normal('\u{1C89}').1);
    }

    /// CPython: `r = random.Random(0)`; `r.getstate()[1][:2]`, `[623]`; `r.gauss(0.0, 1.0)`;
    /// `r.getrandbits(17)`; `r.random()`.
    #[test]
    fn random_is_cpythons() {
        let mut r = PyRandom::seeded_zero();
        assert_eq!((r.mt[0], r.mt[1], r.mt[623]), (2_147_483_648, 766_982_754, 2_902_720_905));
        assert_eq!(r.gauss().to_bits(), 0.941_715_404_680_664_4f64.to_bits());
        assert_eq!(r.word() >> 15, 55_125);
        assert_eq!(r.random().to_bits(), 0.040_484_378_180_777_55f64.to_bits());
    }
}
