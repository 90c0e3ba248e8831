//! Embedding verifiers: semantic similarity through the process's sentence-embedding model
//! (`models::embed`, sentence-transformers semantics). The model is named by the run
//! configuration (`--embedding-model DIR`), never downloaded; without one, or in a build
//! without the `models` feature, a call traps with `rubric::trap::model` and the criterion is
//! an error, never a silent zero.
//!
//! Doc examples hold for any reasonable sentence-embedding model (and run in the tests with
//! all-MiniLM-L6-v2).

#[cfg(feature = "models")]
use super::TrapKind;
use super::{list_arg, num_arg, text_arg, Intrinsic, Trap};
use crate::stdlib::EvalCtx;
use crate::value::Value;
use std::sync::Arc;

/// Fuel for one token of an embedding forward pass (about 10 µs of work).
#[cfg(feature = "models")]
const FUEL_PER_TOKEN: usize = 10_000;

/// The embeddings of `texts` (unit vectors), within the row's budget: tokenizing is charged by
/// the byte and every batch by its tokens, before it runs, so a row over its limits stops
/// between batches.
#[cfg(feature = "models")]
fn embed(texts: &[&str], ctx: &mut EvalCtx) -> Result<Vec<Arc<[f32]>>, Trap> {
    let model = crate::models::embed::embedder().map_err(|e| Trap::new(TrapKind::Model, e.to_string()))?;
    let mut stop = None;
    let mut go_on = |units: usize| match ctx.work(units.saturating_mul(FUEL_PER_TOKEN)) {
        Ok(()) => true,
        Err(t) => {
            stop = Some(t);
            false
        }
    };
    let r = model.embed_cached_polled(texts, &mut go_on);
    match (r, stop) {
        (Ok(e), _) => Ok(e),
        (Err(_), Some(t)) => Err(t),
        (Err(e), None) => Err(Trap::new(TrapKind::Model, e.to_string())),
    }
}

#[cfg(not(feature = "models"))]
fn embed(_: &[&str], _: &mut EvalCtx) -> Result<Vec<Arc<[f32]>>, Trap> {
    Err(Trap::new(
        crate::stdlib::TrapKind::Model,
        "this build of rubric has no local models (it was built without the `models` feature)",
    ))
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum()
}

/// The sentences `covers` compares a nugget with: the text's sentences, or the whole text when
/// it has none (only whitespace).
fn units<'t>(text: &'t Arc<str>, ctx: &mut EvalCtx) -> Result<Vec<&'t str>, Trap> {
    let idx = ctx.text_index(text)?;
    let s: Vec<&str> = idx.sentences().iter().map(|r| r.get(text)).collect();
    Ok(if s.is_empty() { vec![&text[..]] } else { s })
}

/// The largest similarity between `nugget` and a sentence of `text`.
fn best_sentence(text: &Arc<str>, nugget: &str, ctx: &mut EvalCtx) -> Result<f64, Trap> {
    let mut all = units(text, ctx)?;
    all.push(nugget);
    let e = embed(&all, ctx)?;
    let Some((n, sentences)) = e.split_last() else {
        return Err(Trap::new(crate::stdlib::TrapKind::Model, "the embedder returned no embeddings"));
    };
    Ok(sentences.iter().map(|s| cosine(s, n)).fold(f64::NEG_INFINITY, f64::max))
}

pub(super) const SIMILARITY: Intrinsic = Intrinsic {
    name: "similarity",
    sig: "(a: Text, b: Text) -> Number",
    doc: "The cosine similarity of the sentence embeddings of `a` and `b` (mean pooling over the \
          tokens, L2-normalised, as sentence-transformers computes them), in [-1, 1]. Needs an \
          embedding model (`--embedding-model DIR`); traps with `rubric::trap::model` without one.",
    examples: &[
        r#"similarity("Call an ambulance now.", "Call an ambulance now.") > 0.999"#,
        r#"similarity("Phone 911 right away.", "Call emergency services immediately.") > similarity("Phone 911 right away.", "Paris is the capital of France.")"#,
    ],
    imp: |a, c| {
        let e = embed(&[text_arg(a, 0)?, text_arg(a, 1)?], c)?;
        Ok(Value::Number(cosine(&e[0], &e[1])))
    },
};

pub(super) const COVERS: Intrinsic = Intrinsic {
    name: "covers",
    sig: "(response: Text, nugget: Text, threshold: Number) -> Bool",
    doc: "Whether `response` covers the information `nugget`: the largest `similarity` between the \
          nugget and a sentence of the response (as `sentences` splits it) is at least `threshold`. \
          Needs an embedding model (`--embedding-model DIR`).",
    examples: &[
        r#"covers("Rest for a day. If the pain spreads to your arm, call emergency services.", "Call emergency services.", 0.5)"#,
        r#"not covers("Rest for a day and drink water.", "Call emergency services.", 0.5)"#,
    ],
    imp: |a, c| {
        let t = num_arg(a, 2)?;
        if !t.is_finite() {
            return Err(super::invalid(format!("threshold must be a finite number, got {}", Value::Number(t))));
        }
        Ok(Value::Bool(best_sentence(text_arg(a, 0)?, text_arg(a, 1)?, c)? >= t))
    },
};

pub(super) const BEST_MATCH: Intrinsic = Intrinsic {
    name: "best_match",
    sig: "(response: Text, references: List[Text]) -> {index: Number, score: Number}",
    doc: "The reference most similar to `response`: its position in `references` (from 0) and its \
          `similarity`; the first wins a tie. Traps (`rubric::trap::invalid_argument`) on an \
          empty list. Needs an embedding model (`--embedding-model DIR`).",
    examples: &[
        r#"best_match("Call emergency services now.", ["Drink water.", "Phone 911 immediately.", "See a dentist."]).index == 1"#,
        r#"best_match("Call emergency services now.", ["Phone 911 immediately."]).score > 0.5"#,
    ],
    imp: |a, c| {
        let refs = list_arg(a, 1)?;
        if refs.is_empty() {
            return Err(super::invalid("best_match needs at least one reference"));
        }
        let mut all = vec![&**text_arg(a, 0)?];
        for (i, r) in refs.iter().enumerate() {
            all.push(r.as_text().ok_or_else(|| super::invalid(format!("reference {i} is not text")))?);
        }
        let e = embed(&all, c)?;
        let (index, score) = e[1..]
            .iter()
            .map(|r| cosine(&e[0], r))
            .enumerate()
            .fold((0, f64::NEG_INFINITY), |best, (i, s)| if s > best.1 { (i, s) } else { best });
        let mut rec = crate::value::Record::new();
        rec.insert("index".into(), Value::Number(index as f64));
        rec.insert("score".into(), Value::Number(score));
        Ok(Value::Record(Arc::new(rec)))
    },
};
