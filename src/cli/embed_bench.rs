//! `rubric bench-embed`: sentence-embedding throughput of the embedding verifiers' model on
//! the configured device (`--device`), sentences per second at each batch size, measured in
//! the same run. Sentences are synthetic (a fixed word pool, 6 to 40 words, deterministic);
//! `--random` replaces the weights with random ones of the same shape (speed does not depend
//! on the values), so a machine without the model's weights can still be measured.

use crate::models::embed::Embedder;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

pub struct EmbedBench<'a> {
    pub model: &'a Path,
    pub random: bool,
    pub batch_sizes: &'a [usize],
    pub sentences: usize,
    pub runs: usize,
}

/// `n` deterministic sentences of 6 to 40 words.
pub fn sentences(n: usize) -> Vec<String> {
    const WORDS: &[&str] = &[
        "the",
        "patient",
        "should",
        "call",
        "emergency",
        "services",
        "if",
        "pain",
        "spreads",
        "to",
        "arm",
        "rest",
        "drink",
        "water",
        "and",
        "avoid",
        "heavy",
        "lifting",
        "for",
        "two",
        "days",
        "dose",
        "of",
        "paracetamol",
        "is",
        "500",
        "mg",
        "every",
        "six",
        "hours",
        "consult",
        "a",
        "doctor",
        "when",
        "symptoms",
        "persist",
        "answer",
        "explains",
        "algorithm",
        "sorts",
        "list",
        "in",
        "place",
        "with",
        "quicksort",
        "capital",
        "France",
        "Paris",
        "response",
        "refuses",
        "politely",
        "cites",
        "source",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..n)
        .map(|_| {
            let len = 6 + (next() % 35) as usize;
            let mut s: Vec<&str> = (0..len).map(|_| WORDS[(next() % WORDS.len() as u64) as usize]).collect();
            s[0] = if next() % 2 == 0 { "The" } else { "A" };
            format!("{}.", s.join(" "))
        })
        .collect()
}

pub fn run(opts: &EmbedBench<'_>) -> ExitCode {
    let device = crate::models::device();
    let scratch;
    let dir = if opts.random {
        scratch = std::env::temp_dir().join(format!("rubric-bench-embed-{}", std::process::id()));
        if let Err(e) = Embedder::write_random(opts.model, &scratch) {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
        scratch.as_path()
    } else {
        opts.model
    };
    let start = Instant::now();
    let model = match Embedder::load(dir, device) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if opts.random {
        let _ = std::fs::remove_dir_all(dir);
    }
    let load_ms = start.elapsed().as_secs_f64() * 1000.0;
    let texts = sentences(opts.sentences);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let tokens: usize = refs.iter().map(|t| model.token_ids(t).map_or(0, |i| i.len())).sum();
    outln!(
        "bench-embed: {} ({}{}, dim {}) on {:?}; {} sentences, {:.1} tokens each on average; load {:.0} ms; best of {}",
        opts.model.display(),
        model.name,
        if opts.random { ", random weights" } else { "" },
        model.dim,
        device,
        refs.len(),
        tokens as f64 / refs.len().max(1) as f64,
        load_ms,
        opts.runs.max(1)
    );
    outln!("{:>6}  {:>12}  {:>12}  {:>8}", "batch", "sentences/s", "ms/batch", "vs 1");
    let mut base = None;
    for &b in opts.batch_sizes {
        // warm-up: one batch
        if let Err(e) = model.embed(&refs[..b.min(refs.len())], b) {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
        let mut best = f64::INFINITY;
        for _ in 0..opts.runs.max(1) {
            let t = Instant::now();
            if let Err(e) = model.embed(&refs, b) {
                eprintln!("error: {e}");
                return ExitCode::from(1);
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        let rate = refs.len() as f64 / best;
        let base = *base.get_or_insert(rate);
        outln!("{b:>6}  {rate:>12.1}  {:>12.2}  {:>7.2}x", best * 1000.0 / refs.len().div_ceil(b) as f64, rate / base);
    }
    ExitCode::SUCCESS
}
