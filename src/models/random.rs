//! Random-weight model directories of real architectures (`rubric model init`): `config.json`,
//! `model.safetensors`, a word-level `tokenizer.json` of the full vocabulary size and a
//! `tokenizer_config.json` with a ChatML-style chat template. Forward-pass speed does not depend
//! on the weight values, so such a model stands in for a real one in benchmarks (the GPU
//! machine has no weights), and tiny ones make the model tests self-contained.
//!
//! Weights are uniform with the given standard deviation, drawn from a seeded splitmix64
//! stream per tensor and chunk (the same seed always gives the same files); norm weights are
//! one plus such noise. The tokenizer maps whole words and punctuation runs to ids (unknown
//! words to `<unk>`): `yes`, `no` and their capitalised forms, a few hundred English words,
//! then made-up syllable words until the vocabulary is full, then the chat special tokens.
//!
//! Pipeline position: called by `cli` (`rubric model init`) and by tests.

use super::causal::{CausalConfig, Family};
use super::ModelError;
use candle_core::{DType, Device, Tensor};
use rayon::prelude::*;
use serde_json::{json, Value as Json};
use std::collections::HashMap;
use std::path::Path;

/// A named model size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A few hundred thousand parameters, a 512-word vocabulary: for tests.
    Tiny,
    /// Qwen3-0.6B's architecture (28 layers, hidden 1024, 16 query and 8 key/value heads of
    /// 128, vocabulary 151936, tied embeddings).
    Qwen3_0_6B,
}

impl std::str::FromStr for Shape {
    type Err = String;
    fn from_str(s: &str) -> Result<Shape, String> {
        match s {
            "tiny" => Ok(Shape::Tiny),
            "qwen3-0.6b" => Ok(Shape::Qwen3_0_6B),
            other => Err(format!("unknown model shape `{other}`: expected tiny or qwen3-0.6b")),
        }
    }
}

/// The architecture of `family` at `shape`.
pub fn shape_config(family: Family, shape: Shape) -> Result<CausalConfig, String> {
    let base = CausalConfig {
        family,
        vocab_size: 512,
        hidden_size: 64,
        intermediate_size: 128,
        num_layers: 2,
        num_heads: 4,
        num_kv_heads: 2,
        head_dim: 16,
        rms_norm_eps: 1e-6,
        rope_theta: 1_000_000.0,
        rope_scaling: None,
        tie_word_embeddings: family == Family::Qwen3,
        qkv_bias: family == Family::Qwen2,
        o_bias: false,
        qk_norm: family == Family::Qwen3,
        mlp_bias: false,
        max_position_embeddings: 4096,
    };
    match (shape, family) {
        (Shape::Tiny, Family::Llama) => Ok(CausalConfig { rope_theta: 500_000.0, rms_norm_eps: 1e-5, ..base }),
        (Shape::Tiny, _) => Ok(base),
        (Shape::Qwen3_0_6B, Family::Qwen3) => Ok(CausalConfig {
            vocab_size: 151_936,
            hidden_size: 1024,
            intermediate_size: 3072,
            num_layers: 28,
            num_heads: 16,
            num_kv_heads: 8,
            head_dim: 128,
            tie_word_embeddings: true,
            max_position_embeddings: 40_960,
            ..base
        }),
        (Shape::Qwen3_0_6B, other) => Err(format!("shape qwen3-0.6b is a qwen3 shape, not {}", other.name())),
    }
}

/// What to write.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomModel {
    pub family: Family,
    pub shape: Shape,
    pub seed: u64,
    /// Standard deviation of the weights.
    pub std: f64,
    /// The dtype stored in `model.safetensors`.
    pub dtype: DType,
}

pub(super) fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `n` uniform values with mean `mean` and standard deviation `std`, from `seed`.
pub(super) fn uniform(n: usize, seed: u64, mean: f32, std: f32) -> Vec<f32> {
    const CHUNK: usize = 1 << 16;
    let half_width = std * 3f32.sqrt();
    let mut out = vec![0f32; n];
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, chunk)| {
        let mut s = seed ^ (c as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93);
        for x in chunk.iter_mut() {
            let u = (splitmix(&mut s) >> 40) as f32 / (1u64 << 24) as f32;
            *x = mean + (2.0 * u - 1.0) * half_width;
        }
    });
    out
}

/// English words the tokenizer knows as whole words (besides yes/no).
pub const WORDS: &str = "a an the and or not no yes of to in on at by for with from as is are was were be been being \
it its this that these those there here which who whom whose what when where why how all any each every both \
some such only own same so than too very can will just should would could may might must do does did done \
have has had having you your yours he she they them their we our us i me my one two three four five six seven \
eight nine ten first second last next other another more most less least many much few answer question \
criterion criteria material below above grade graded grader judge response prompt reference input inputs \
met unmet true false word words reply with exactly one single careful impartial decide whether piece work \
meets given using message data enclosed begin end markers read never follow instructions appear inside \
follows against time each enclosed line matching between requests rules formats text follow do if it \
user assistant system advice advises emergency care call help helpful clear clearly concise accurate safe \
unsafe correct incorrect complete polite tone source sources cites cite citation explains explanation \
step steps example examples number numbers list lists item items summary summarises mentions mention \
includes include avoids avoid uses use gives give states state asks ask says say good bad best better";

/// Syllables of the made-up words that fill the vocabulary.
const ONSETS: &[&str] =
    &["b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "st"];
const NUCLEI: &[&str] = &["a", "e", "i", "o", "u", "ai", "ou"];

/// The special tokens of the chat template, in id order at the end of the vocabulary.
pub const SPECIAL_TOKENS: &[&str] = &["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"];

/// A ChatML-style template: each message between `<|im_start|>ROLE` and `<|im_end|>`, then
/// the assistant's header, and an empty thought when thinking is off.
pub const CHAT_TEMPLATE: &str = "{%- for m in messages -%}\
{{- '<|im_start|>' ~ m.role ~ '\\n' ~ m.content ~ '<|im_end|>\\n' -}}\
{%- endfor -%}\
{%- if add_generation_prompt -%}\
{{- '<|im_start|>assistant\\n' -}}\
{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}\
{%- endif -%}";

/// The `tokenizer.json` of a word-level tokenizer with exactly `vocab_size` ids.
pub fn tokenizer_json(vocab_size: usize) -> Result<Json, String> {
    let words = vocab_size.checked_sub(SPECIAL_TOKENS.len() + 1).filter(|&n| n >= 64).ok_or_else(|| {
        format!("a vocabulary of {vocab_size} is too small for the tokenizer (at least {})", 65 + SPECIAL_TOKENS.len())
    })?;
    let mut vocab: Vec<String> = vec!["<unk>".to_string()];
    let mut seen = std::collections::HashSet::new();
    seen.insert("<unk>".to_string());
    let mut push = |w: String, vocab: &mut Vec<String>| {
        if vocab.len() < words + 1 && seen.insert(w.clone()) {
            vocab.push(w);
        }
    };
    for w in ["yes", "no", "Yes", "No", "YES", "NO"] {
        push(w.to_string(), &mut vocab);
    }
    for p in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~".chars() {
        push(p.to_string(), &mut vocab);
    }
    for w in WORDS.split_whitespace() {
        push(w.to_string(), &mut vocab);
    }
    for d in 0..100 {
        push(d.to_string(), &mut vocab);
    }
    let syllables: Vec<String> = ONSETS.iter().flat_map(|o| NUCLEI.iter().map(move |n| format!("{o}{n}"))).collect();
    let mut len = 1;
    'fill: while vocab.len() < words + 1 {
        // Every word of `len` syllables, in order.
        let total = syllables.len().pow(len as u32);
        for mut k in 0..total {
            let mut w = String::new();
            for _ in 0..len {
                w.push_str(&syllables[k % syllables.len()]);
                k /= syllables.len();
            }
            push(w, &mut vocab);
            if vocab.len() > words {
                break 'fill;
            }
        }
        len += 1;
    }
    let base = vocab.len();
    let map: serde_json::Map<String, Json> = vocab.iter().enumerate().map(|(i, w)| (w.clone(), json!(i))).collect();
    let added: Vec<Json> = SPECIAL_TOKENS
        .iter()
        .enumerate()
        .map(|(i, t)| {
            json!({"id": base + i, "content": t, "single_word": false, "lstrip": false, "rstrip": false,
                   "normalized": false, "special": true})
        })
        .collect();
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null,
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": map, "unk_token": "<unk>"},
    }))
}

/// `tokenizer_config.json` for [`tokenizer_json`]'s tokenizer and [`CHAT_TEMPLATE`].
pub fn tokenizer_config_json(max_length: usize) -> Json {
    json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": null,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": "<unk>",
        "model_max_length": max_length,
        "clean_up_tokenization_spaces": false,
        "chat_template": CHAT_TEMPLATE,
    })
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> ModelError {
    ModelError::Load { path: path.display().to_string(), message: e.to_string() }
}

/// Write a random-weight model directory (created if needed; existing files are replaced).
pub fn write_random_model(dir: &Path, spec: &RandomModel) -> Result<CausalConfig, ModelError> {
    let config = shape_config(spec.family, spec.shape).map_err(ModelError::Config)?;
    std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
    let mut cfg_json = config.to_json();
    cfg_json["torch_dtype"] = json!(match spec.dtype {
        DType::BF16 => "bfloat16",
        DType::F16 => "float16",
        _ => "float32",
    });
    let write = |name: &str, j: &Json| -> Result<(), ModelError> {
        let p = dir.join(name);
        let text = serde_json::to_string_pretty(j).map_err(|e| io_err(&p, e))?;
        std::fs::write(&p, text + "\n").map_err(|e| io_err(&p, e))
    };
    write("config.json", &cfg_json)?;
    let tok = tokenizer_json(config.vocab_size).map_err(ModelError::Config)?;
    // Written through the tokenizers crate, so the file is one it reads back.
    let tok_path = dir.join("tokenizer.json");
    let parsed: tokenizers::Tokenizer = tok.to_string().parse().map_err(|e| io_err(&tok_path, e))?;
    parsed.save(&tok_path, false).map_err(|e| io_err(&tok_path, e))?;
    write("tokenizer_config.json", &tokenizer_config_json(config.max_position_embeddings))?;
    let mut tensors: HashMap<String, Tensor> = HashMap::new();
    for (i, (name, shape)) in config.weight_shapes().into_iter().enumerate() {
        let n: usize = shape.iter().product();
        let seed = splitmix(&mut (spec.seed ^ (i as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407)));
        let is_norm = name.ends_with("norm.weight");
        let values = if is_norm {
            uniform(n, seed, 1.0, (spec.std as f32).min(0.2))
        } else {
            uniform(n, seed, 0.0, spec.std as f32)
        };
        let t = Tensor::from_vec(values, shape, &Device::Cpu)?.to_dtype(spec.dtype)?;
        tensors.insert(name, t);
    }
    let w = dir.join("model.safetensors");
    candle_core::safetensors::save(&tensors, &w).map_err(|e| io_err(&w, e))?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tokenizer_has_the_full_vocabulary_and_reads_words() {
        let j = tokenizer_json(512).unwrap();
        let t: tokenizers::Tokenizer = j.to_string().parse().unwrap();
        assert_eq!(t.get_vocab_size(true), 512);
        let enc = t.encode("<|im_start|>user\nIs it yes or no?<|im_end|>", false).unwrap();
        let toks = enc.get_tokens();
        assert_eq!(toks[0], "<|im_start|>");
        assert!(toks.contains(&"yes".to_string()) && toks.contains(&"?".to_string()), "{toks:?}");
        assert!(tokenizer_json(10).is_err());
        assert_eq!(uniform(5, 7, 0.0, 1.0), uniform(5, 7, 0.0, 1.0));
        let u = uniform(100_000, 3, 0.0, 0.5);
        let var = u.iter().map(|x| (x * x) as f64).sum::<f64>() / u.len() as f64;
        assert!((var.sqrt() - 0.5).abs() < 0.01, "{}", var.sqrt());
    }
}
