//! Reference-based text similarity, with the semantics of the implementations people compare
//! against: edit distance (Levenshtein over Unicode characters, as rapidfuzz counts it), its
//! normalised similarity, sentence BLEU (sacreBLEU's `sentence_bleu`: 13a tokenisation,
//! exponential smoothing, effective order, the closest reference length) and ROUGE-N / ROUGE-L
//! F-measures (Google's `rouge-score`: its default tokeniser, no stemming). Importers of peer
//! formats (promptfoo's `levenshtein`, OpenAI's `text_similarity` grader) map onto these.
//!
//! Pipeline position: part of `stdlib::intrinsics::ALL`, called by every engine. The quadratic
//! ones (edit distance, LCS) charge their cells as work before they run.

use super::{invalid, text_arg, texts_arg};
use crate::stdlib::{EvalCtx, Intrinsic, Trap};
use crate::value::Value;
use regex::Regex;
use std::collections::HashMap;
use std::sync::OnceLock;

pub(super) const EDIT_DISTANCE: Intrinsic = Intrinsic {
    name: "edit_distance",
    sig: "(a: Text, b: Text) -> Number",
    doc: "The Levenshtein distance between `a` and `b`: the fewest single-character insertions, \
          deletions and substitutions that turn one into the other, counted over Unicode \
          characters (code points), case-sensitive. promptfoo's `levenshtein` assertion passes \
          when this is at most its threshold.",
    examples: &[
        r##"edit_distance("kitten", "sitting") == 3"##,
        r##"edit_distance("", "abc") == 3"##,
        r##"edit_distance("héllo", "hello") == 1"##,
    ],
    imp: edit_distance,
};

pub(super) const EDIT_SIMILARITY: Intrinsic = Intrinsic {
    name: "edit_similarity",
    sig: "(a: Text, b: Text) -> Number",
    doc: "1 − `edit_distance(a, b)` / the longer length, from 0 to 1 (1 when both are empty): \
          rapidfuzz's `Levenshtein.normalized_similarity`.",
    examples: &[
        r##"abs(edit_similarity("kitten", "sitting") - (1 - 3 / 7)) < 1e-12"##,
        r##"edit_similarity("", "") == 1"##,
    ],
    imp: edit_similarity,
};

pub(super) const BLEU: Intrinsic = Intrinsic {
    name: "bleu",
    sig: "(candidate: Text, references: List[Text]) -> Number",
    doc: "Sentence BLEU of `candidate` against `references`, from 0 to 1: sacreBLEU's \
          `sentence_bleu` with its defaults, divided by 100. Both sides are tokenised as \
          mteval-v13a does (punctuation split off, periods and commas apart from digits), n-grams \
          up to 4 are clipped by their largest count in any one reference, the brevity penalty \
          uses the reference length closest to the candidate's (the shorter on a tie), orders the \
          candidate is too short for are left out, and an order with no match counts as \
          1 / (2^k · its n-grams) for the k-th such order. No match at all is 0.",
    examples: &[
        r##"abs(bleu("the cat sat on the mat", ["the cat sat on the mat"]) - 1) < 1e-12"##,
        r##"bleu("completely different", ["the cat sat on the mat"]) == 0"##,
    ],
    imp: bleu,
};

pub(super) const ROUGE: Intrinsic = Intrinsic {
    name: "rouge",
    sig: "(candidate: Text, reference: Text, kind: Text = \"rougeL\") -> Number",
    doc: "The ROUGE F-measure of `candidate` against `reference`, from 0 to 1, as Google's \
          `rouge-score` computes it with its default tokeniser (lowercased, every run of \
          characters other than `a`–`z` and `0`–`9` a separator, no stemming). `kind` is \
          `\"rouge1\"` … `\"rouge9\"` (n-gram overlap, clipped counts) or `\"rougeL\"` (longest \
          common subsequence of the tokens). An empty side scores 0.",
    examples: &[
        r##"rouge("The cat sat.", "the cat sat", "rouge1") == 1"##,
        r##"abs(rouge("a b c d", "a c e", "rougeL") - 2 * (2 / 4) * (2 / 3) / (2 / 4 + 2 / 3)) < 1e-12"##,
    ],
    imp: rouge,
};

// ---------------------------------------------------------------- edit distance

fn edit_distance(a: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let (x, y) = (text_arg(a, 0)?, text_arg(a, 1)?);
    let (x, y): (Vec<char>, Vec<char>) = (x.chars().collect(), y.chars().collect());
    Ok(Value::Number(levenshtein(&x, &y, ctx)? as f64))
}

fn edit_similarity(a: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let (x, y) = (text_arg(a, 0)?, text_arg(a, 1)?);
    let (x, y): (Vec<char>, Vec<char>) = (x.chars().collect(), y.chars().collect());
    let longest = x.len().max(y.len());
    if longest == 0 {
        return Ok(Value::Number(1.0));
    }
    let d = levenshtein(&x, &y, ctx)?;
    Ok(Value::Number(1.0 - d as f64 / longest as f64))
}

/// The Levenshtein distance, one row of the table at a time; its cells are charged first.
fn levenshtein<T: PartialEq>(a: &[T], b: &[T], ctx: &mut EvalCtx) -> Result<usize, Trap> {
    let (a, b) = if a.len() < b.len() { (b, a) } else { (a, b) };
    ctx.work(a.len().saturating_mul(b.len()))?;
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    Ok(row[b.len()])
}

// ---------------------------------------------------------------- BLEU

/// mteval-v13a's regular expressions, in order, with their replacements.
fn v13a_rules() -> &'static [(Regex, &'static str)] {
    static RULES: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    RULES.get_or_init(|| {
        [
            // ASCII punctuation but `'`, `,`, `-` and `.`, set apart
            (r"([{-~\[-` -&(-+:-@/])", " $1 "),
            // a period or comma after a non-digit
            (r"([^0-9])([.,])", "$1 $2 "),
            // a period or comma before a non-digit
            (r"([.,])([^0-9])", " $1 $2"),
            // a dash after a digit
            (r"([0-9])(-)", "$1 $2 "),
        ]
        .into_iter()
        .filter_map(|(p, r)| Regex::new(p).ok().map(|re| (re, r)))
        .collect()
    })
}

/// A segment tokenised as sacreBLEU's `13a` tokeniser does.
fn tokenize_13a(segment: &str) -> Vec<String> {
    let mut line = segment.trim_end().replace("<skipped>", "").replace("-\n", "").replace('\n', " ");
    if line.contains('&') {
        line = line.replace("&quot;", "\"").replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">");
    }
    let mut line = format!(" {line} ");
    for (re, with) in v13a_rules() {
        line = re.replace_all(&line, *with).into_owned();
    }
    line.split_whitespace().map(str::to_string).collect()
}

/// Counts of every n-gram of `tokens` for n = 1 ..= 4.
fn ngram_counts(tokens: &[String]) -> HashMap<&[String], usize> {
    let mut out = HashMap::new();
    for n in 1..=4 {
        for gram in tokens.windows(n) {
            *out.entry(gram).or_insert(0) += 1;
        }
    }
    out
}

fn bleu(a: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let candidate = text_arg(a, 0)?;
    let references = texts_arg(a, 1)?;
    if references.is_empty() {
        return Err(invalid("bleu: give at least one reference"));
    }
    ctx.work(candidate.len() + references.iter().map(|r| r.len()).sum::<usize>())?;
    let hyp = tokenize_13a(candidate);
    let refs: Vec<Vec<String>> = references.iter().map(|r| tokenize_13a(r)).collect();
    // the largest count of each n-gram in any one reference
    let mut most: HashMap<&[String], usize> = HashMap::new();
    for r in &refs {
        for (gram, c) in ngram_counts(r) {
            let m = most.entry(gram).or_insert(0);
            *m = (*m).max(c);
        }
    }
    let mut correct = [0usize; 4];
    let mut total = [0usize; 4];
    for (gram, c) in ngram_counts(&hyp) {
        correct[gram.len() - 1] += c.min(most.get(gram).copied().unwrap_or(0));
    }
    for (n, t) in total.iter_mut().enumerate() {
        *t = hyp.len().saturating_sub(n);
    }
    // the reference length closest to the candidate's, the shorter on a tie
    let hyp_len = hyp.len();
    let ref_len = refs.iter().map(Vec::len).min_by_key(|&l| (l.abs_diff(hyp_len), l)).unwrap_or(0);
    Ok(Value::Number(bleu_from_counts(&correct, &total, hyp_len, ref_len)))
}

/// sacreBLEU's `compute_bleu` with `exp` smoothing and effective order, on a 0–1 scale.
fn bleu_from_counts(correct: &[usize; 4], total: &[usize; 4], hyp_len: usize, ref_len: usize) -> f64 {
    if correct.iter().all(|&c| c == 0) {
        return 0.0;
    }
    let brevity = match hyp_len {
        0 => 0.0,
        h if h < ref_len => (1.0 - ref_len as f64 / h as f64).exp(),
        _ => 1.0,
    };
    let mut smooth = 1.0;
    let mut logs = 0.0;
    let mut order = 0;
    for n in 0..4 {
        if total[n] == 0 {
            break;
        }
        order = n + 1;
        let precision = if correct[n] == 0 {
            smooth *= 2.0;
            1.0 / (smooth * total[n] as f64)
        } else {
            correct[n] as f64 / total[n] as f64
        };
        logs += precision.ln();
    }
    brevity * (logs / order as f64).exp()
}

// ---------------------------------------------------------------- ROUGE

/// `rouge-score`'s default tokeniser without stemming.
fn tokenize_rouge(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

fn f_measure(precision: f64, recall: f64) -> f64 {
    if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    }
}

fn rouge(a: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let candidate = tokenize_rouge(text_arg(a, 0)?);
    let reference = tokenize_rouge(text_arg(a, 1)?);
    let kind = text_arg(a, 2)?;
    if &**kind == "rougeL" {
        if candidate.is_empty() || reference.is_empty() {
            return Ok(Value::Number(0.0));
        }
        let lcs = lcs_length(&reference, &candidate, ctx)?;
        let (p, r) = (lcs as f64 / candidate.len() as f64, lcs as f64 / reference.len() as f64);
        return Ok(Value::Number(f_measure(p, r)));
    }
    let n = kind
        .strip_prefix("rouge")
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| (1..=9).contains(n))
        .ok_or_else(|| invalid(format!("rouge: `kind` is \"rouge1\" … \"rouge9\" or \"rougeL\", not {kind:?}")))?;
    ctx.work(candidate.len() + reference.len())?;
    let grams = |tokens: &[String]| {
        let mut out: HashMap<Vec<String>, usize> = HashMap::new();
        for g in tokens.windows(n) {
            *out.entry(g.to_vec()).or_insert(0) += 1;
        }
        out
    };
    let (cand, refs) = (grams(&candidate), grams(&reference));
    let overlap: usize = refs.iter().map(|(g, c)| (*c).min(cand.get(g).copied().unwrap_or(0))).sum();
    let (cand_total, ref_total) = (cand.values().sum::<usize>(), refs.values().sum::<usize>());
    let p = overlap as f64 / cand_total.max(1) as f64;
    let r = overlap as f64 / ref_total.max(1) as f64;
    Ok(Value::Number(f_measure(p, r)))
}

/// The length of the longest common subsequence, one row at a time; its cells charged first.
fn lcs_length(a: &[String], b: &[String], ctx: &mut EvalCtx) -> Result<usize, Trap> {
    ctx.work(a.len().saturating_mul(b.len()))?;
    let mut row = vec![0usize; b.len() + 1];
    for x in a {
        let mut diagonal = 0;
        for (j, y) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if x == y { diagonal + 1 } else { above.max(row[j]) };
            diagonal = above;
        }
    }
    Ok(row[b.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v13a_tokenisation_matches_sacrebleu() {
        // sacrebleu 2.6.0's Tokenizer13a on the same lines
        let cases = [
            ("Hello, world! It's 3.14 and 1,000 - ok.", "Hello , world ! It's 3.14 and 1,000 - ok ."),
            ("state-of-the-art (2024) \"quoted\" a/b", "state-of-the-art ( 2024 ) \" quoted \" a / b"),
            ("x &amp; y &lt;z&gt; 12-3", "x & y < z > 12 - 3"),
            ("e.g. U.S.A. $5", "e . g . U . S . A . $ 5"),
        ];
        for (line, want) in cases {
            assert_eq!(tokenize_13a(line).join(" "), want, "{line}");
        }
    }

    #[test]
    fn rouge_tokenisation_matches_rouge_score() {
        assert_eq!(tokenize_rouge("The Cat's 2nd-best ÉCLAIR!"), ["the", "cat", "s", "2nd", "best", "clair"]);
    }
}
