//! A BERT encoder on candle (Hugging Face's `BertModel` without its pooler), for the sentence
//! embeddings of the embedding verifiers (`models::embed`).
//!
//! The architecture, as `config.json` describes it: token, position (absolute, from 0) and
//! token-type embeddings summed and layer-normalised, then `num_hidden_layers` post-norm
//! encoder layers, each multi-head self-attention (every query attends to every key that the
//! attention mask keeps) followed by a feed-forward block with `hidden_act` (`gelu`, the exact
//! erf-based one; `gelu_new` or `gelu_pytorch_tanh`, the tanh approximation; `relu`), each
//! wrapped as `LayerNorm(x + block(x))`. [`Bert::forward`] returns the last hidden states.
//!
//! Weights carry Hugging Face's names (`embeddings.word_embeddings.weight`,
//! `encoder.layer.N.attention.self.query.weight`, …), bare as sentence-transformers saves them
//! or under a `bert.` prefix as task models do; every shape is checked against the
//! configuration, and tensors the encoder does not use (the pooler, `position_ids`, task heads)
//! are ignored. Computation is in f32.
//!
//! Pipeline position: loaded by `models::embed` from a model directory; pure tensor code, on
//! the device `models::device()` gives. Weights are read with candle's safe safetensors loader
//! (no memory map).

use super::ModelError;
use candle_core::{DType, Device, Tensor};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// Added to the score of a padded key. Finite on purpose (as in `models::causal`): a row whose
/// keys were all hidden would stay finite instead of turning into NaN; `exp` of it is exactly 0
/// in f32, so padding contributes nothing to a real row.
const MASKED: f32 = -1.0e9;

/// The feed-forward activation (`hidden_act`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `x · Φ(x)` with the exact normal CDF (erf): Hugging Face's `gelu`.
    Gelu,
    /// The tanh approximation of GELU: `gelu_new`, `gelu_pytorch_tanh`.
    GeluTanh,
    Relu,
}

impl Activation {
    fn parse(name: &str) -> Result<Activation, String> {
        match name {
            "gelu" => Ok(Activation::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" => Ok(Activation::GeluTanh),
            "relu" => Ok(Activation::Relu),
            other => Err(format!(
                "config.json: hidden_act `{other}` is not supported (gelu, gelu_new, gelu_pytorch_tanh or relu)"
            )),
        }
    }

    fn apply(self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Activation::Gelu => x.gelu_erf(),
            Activation::GeluTanh => x.gelu(),
            Activation::Relu => x.relu(),
        }
    }
}

/// The architecture of an encoder, read from its `config.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: Activation,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
}

/// `config.json` as Hugging Face writes it for BERT; the optional fields default to
/// `transformers.BertConfig`'s defaults.
#[derive(Deserialize)]
struct RawConfig {
    #[serde(default)]
    model_type: Option<String>,
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    #[serde(default)]
    hidden_act: Option<String>,
    #[serde(default)]
    max_position_embeddings: Option<usize>,
    #[serde(default)]
    type_vocab_size: Option<usize>,
    #[serde(default)]
    layer_norm_eps: Option<f64>,
    #[serde(default)]
    position_embedding_type: Option<String>,
}

impl BertConfig {
    /// Read a `config.json` text.
    pub fn parse(text: &str) -> Result<BertConfig, String> {
        let raw: RawConfig =
            serde_json::from_str(text).map_err(|e| format!("config.json: not a BERT configuration: {e}"))?;
        // RoBERTa-style models offset their positions and other families differ further: refuse
        // them rather than compute wrong embeddings.
        if let Some(kind) = raw.model_type.as_deref().filter(|k| *k != "bert") {
            return Err(format!("config.json: model_type `{kind}` is not supported (the encoder is BERT's)"));
        }
        if let Some(kind) = raw.position_embedding_type.as_deref().filter(|k| *k != "absolute") {
            return Err(format!("config.json: position_embedding_type `{kind}` is not supported (only `absolute`)"));
        }
        let cfg = BertConfig {
            vocab_size: raw.vocab_size,
            hidden_size: raw.hidden_size,
            num_layers: raw.num_hidden_layers,
            num_heads: raw.num_attention_heads,
            intermediate_size: raw.intermediate_size,
            hidden_act: Activation::parse(raw.hidden_act.as_deref().unwrap_or("gelu"))?,
            max_position_embeddings: raw.max_position_embeddings.unwrap_or(512),
            type_vocab_size: raw.type_vocab_size.unwrap_or(2),
            layer_norm_eps: raw.layer_norm_eps.unwrap_or(1e-12),
        };
        let sizes = [cfg.vocab_size, cfg.hidden_size, cfg.num_layers, cfg.intermediate_size];
        if sizes.contains(&0) || cfg.max_position_embeddings == 0 || cfg.type_vocab_size == 0 {
            return Err("config.json: vocabulary, layer, position and type sizes must be positive".into());
        }
        if cfg.num_heads == 0 || !cfg.hidden_size.is_multiple_of(cfg.num_heads) {
            return Err(format!(
                "config.json: hidden_size {} is not a multiple of num_attention_heads {}",
                cfg.hidden_size, cfg.num_heads
            ));
        }
        Ok(cfg)
    }

    /// Every weight the encoder uses with its shape, in Hugging Face's naming (no prefix).
    pub fn weight_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let (h, i) = (self.hidden_size, self.intermediate_size);
        let mut out = vec![
            ("embeddings.word_embeddings.weight".to_string(), vec![self.vocab_size, h]),
            ("embeddings.position_embeddings.weight".to_string(), vec![self.max_position_embeddings, h]),
            ("embeddings.token_type_embeddings.weight".to_string(), vec![self.type_vocab_size, h]),
            ("embeddings.LayerNorm.weight".to_string(), vec![h]),
            ("embeddings.LayerNorm.bias".to_string(), vec![h]),
        ];
        for l in 0..self.num_layers {
            let p = format!("encoder.layer.{l}");
            for (name, rows, cols) in [
                ("attention.self.query", h, h),
                ("attention.self.key", h, h),
                ("attention.self.value", h, h),
                ("attention.output.dense", h, h),
                ("intermediate.dense", i, h),
                ("output.dense", h, i),
            ] {
                out.push((format!("{p}.{name}.weight"), vec![rows, cols]));
                out.push((format!("{p}.{name}.bias"), vec![rows]));
            }
            for name in ["attention.output.LayerNorm", "output.LayerNorm"] {
                out.push((format!("{p}.{name}.weight"), vec![h]));
                out.push((format!("{p}.{name}.bias"), vec![h]));
            }
        }
        out
    }
}

/// A projection: `x · Wᵀ + b`.
struct Linear {
    weight: Tensor,
    bias: Tensor,
}

impl Linear {
    /// `x` is `[N, in]`; the result `[N, out]`.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.matmul(&self.weight.t()?)?.broadcast_add(&self.bias)
    }
}

struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// A BERT encoder's weights on a device.
pub struct Bert {
    pub config: BertConfig,
    word_embeddings: Tensor,
    position_embeddings: Tensor,
    token_type_embeddings: Tensor,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
}

fn load_err(path: &Path, message: impl std::fmt::Display) -> ModelError {
    ModelError::Load { path: path.display().to_string(), message: message.to_string() }
}

impl Bert {
    /// Load `config.json` and the safetensors weights of `dir` onto `device`.
    pub fn load(dir: &Path, device: &Device) -> Result<Bert, ModelError> {
        let cfg_path = dir.join("config.json");
        let text = std::fs::read_to_string(&cfg_path).map_err(|e| load_err(&cfg_path, e))?;
        let config = BertConfig::parse(&text).map_err(|m| load_err(&cfg_path, m))?;
        let mut tensors: HashMap<String, Tensor> = HashMap::new();
        for f in super::causal::weight_files(dir)? {
            tensors.extend(candle_core::safetensors::load(&f, &Device::Cpu).map_err(|e| load_err(&f, e))?);
        }
        Bert::from_tensors(config, tensors, device).map_err(|m| load_err(dir, m))
    }

    /// Build an encoder from named tensors (Hugging Face's names, bare or under `bert.`),
    /// checking every shape.
    pub fn from_tensors(
        config: BertConfig,
        mut tensors: HashMap<String, Tensor>,
        device: &Device,
    ) -> Result<Bert, String> {
        const FIRST: &str = "embeddings.word_embeddings.weight";
        let prefix = if tensors.contains_key(FIRST) {
            ""
        } else if tensors.contains_key(&format!("bert.{FIRST}")) {
            "bert."
        } else {
            return Err(format!("the weights have no tensor `{FIRST}` (nor `bert.{FIRST}`): not a BERT model"));
        };
        let expected: HashMap<String, Vec<usize>> = config.weight_shapes().into_iter().collect();
        let mut take = |name: &str| -> Result<Tensor, String> {
            let full = format!("{prefix}{name}");
            let t = tensors.remove(&full).ok_or_else(|| format!("the weights have no tensor `{full}`"))?;
            if let Some(shape) = expected.get(name) {
                if t.dims() != shape.as_slice() {
                    return Err(format!("tensor `{full}` has shape {:?}, expected {shape:?}", t.dims()));
                }
            }
            t.to_dtype(DType::F32).and_then(|t| t.to_device(device)).map_err(|e| format!("tensor `{full}`: {e}"))
        };
        let word_embeddings = take("embeddings.word_embeddings.weight")?;
        let position_embeddings = take("embeddings.position_embeddings.weight")?;
        let token_type_embeddings = take("embeddings.token_type_embeddings.weight")?;
        let embeddings_norm =
            LayerNorm { weight: take("embeddings.LayerNorm.weight")?, bias: take("embeddings.LayerNorm.bias")? };
        let mut layers = Vec::with_capacity(config.num_layers);
        for l in 0..config.num_layers {
            let p = format!("encoder.layer.{l}");
            let mut lin = |name: &str| -> Result<Linear, String> {
                Ok(Linear { weight: take(&format!("{p}.{name}.weight"))?, bias: take(&format!("{p}.{name}.bias"))? })
            };
            let (query, key, value) =
                (lin("attention.self.query")?, lin("attention.self.key")?, lin("attention.self.value")?);
            let attention_out = lin("attention.output.dense")?;
            let intermediate = lin("intermediate.dense")?;
            let output = lin("output.dense")?;
            let mut norm = |name: &str| -> Result<LayerNorm, String> {
                Ok(LayerNorm { weight: take(&format!("{p}.{name}.weight"))?, bias: take(&format!("{p}.{name}.bias"))? })
            };
            let attention_norm = norm("attention.output.LayerNorm")?;
            let output_norm = norm("output.LayerNorm")?;
            layers.push(Layer { query, key, value, attention_out, attention_norm, intermediate, output, output_norm });
        }
        Ok(Bert { config, word_embeddings, position_embeddings, token_type_embeddings, embeddings_norm, layers })
    }

    fn norm(&self, x: &Tensor, n: &LayerNorm) -> candle_core::Result<Tensor> {
        candle_nn::ops::layer_norm(&x.contiguous()?, &n.weight, &n.bias, self.config.layer_norm_eps as f32)
    }

    /// The last hidden states `[B, S, hidden]` of a batch: `input_ids` and `token_type_ids` are
    /// `[B, S]` (u32), positions run from 0 in every row, and `attention_mask` (`[B, S]`, any
    /// dtype: 1 attends, 0 is padding) hides padded keys from every query; without it every
    /// position attends.
    pub fn forward(
        &self,
        input_ids: &Tensor,
        token_type_ids: &Tensor,
        attention_mask: Option<&Tensor>,
    ) -> Result<Tensor, ModelError> {
        let c = &self.config;
        let (b, s) = input_ids.dims2()?;
        if s > c.max_position_embeddings {
            return Err(ModelError::Run(format!(
                "a sequence of {s} tokens is longer than the model's {} positions",
                c.max_position_embeddings
            )));
        }
        if token_type_ids.dims() != [b, s] {
            return Err(ModelError::Run(format!(
                "token type ids of shape {:?} for input ids of shape [{b}, {s}]",
                token_type_ids.dims()
            )));
        }
        let (h, heads) = (c.hidden_size, c.num_heads);
        let d = h / heads;
        // Hugging Face's order: words + token types, then + positions.
        let words = self.word_embeddings.index_select(&input_ids.flatten_all()?, 0)?;
        let types = self.token_type_embeddings.index_select(&token_type_ids.flatten_all()?, 0)?;
        let x = (words + types)?.reshape((b, s, h))?;
        let x = x.broadcast_add(&self.position_embeddings.narrow(0, 0, s)?)?.reshape((b * s, h))?;
        let mut x = self.norm(&x, &self.embeddings_norm)?;
        // The additive mask [B, heads, S, S] (0 or MASKED per key), made once per forward pass,
        // so that each layer adds it without broadcasting.
        let mask = match attention_mask {
            Some(m) => {
                if m.dims() != [b, s] {
                    return Err(ModelError::Run(format!(
                        "an attention mask of shape {:?} for input ids of shape [{b}, {s}]",
                        m.dims()
                    )));
                }
                let keep = m.to_dtype(DType::F32)?;
                // keep · (−MASKED) + MASKED: 0 for a kept key, MASKED for padding (exact in f32)
                let add = keep.affine(f64::from(-MASKED), f64::from(MASKED))?;
                Some(add.reshape((b, 1, 1, s))?.broadcast_as((b, heads, s, s))?.contiguous()?)
            }
            None => None,
        };
        let scale = 1.0 / (d as f64).sqrt();
        let split = |t: Tensor| t.reshape((b, s, heads, d))?.transpose(1, 2)?.contiguous();
        for layer in &self.layers {
            let q = split(layer.query.forward(&x)?)?;
            let k = split(layer.key.forward(&x)?)?;
            let v = split(layer.value.forward(&x)?)?;
            let scores = (q.matmul(&k.t()?)? * scale)?;
            let scores = match &mask {
                Some(m) => (scores + m)?,
                None => scores,
            };
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let context = probs.matmul(&v)?.transpose(1, 2)?.contiguous()?.reshape((b * s, h))?;
            let attended = self.norm(&(layer.attention_out.forward(&context)? + &x)?, &layer.attention_norm)?;
            let inner = c.hidden_act.apply(&layer.intermediate.forward(&attended)?)?;
            x = self.norm(&(layer.output.forward(&inner)? + &attended)?, &layer.output_norm)?;
        }
        Ok(x.reshape((b, s, h))?)
    }
}

/// Random weights for `config`, seeded (the same seed gives the same tensors), on the CPU:
/// of the magnitudes PyTorch-style initialisation gives (projections uniform with standard
/// deviation √(2 / fan-in), their biases 1 / √(3 · fan-in), embeddings 1, layer norms exactly
/// one and zero), so that activations stay of realistic size through the layers. For
/// benchmarks and device-agreement tests (`models::embed::Embedder::write_random`).
pub fn random_weights(config: &BertConfig, seed: u64) -> Result<HashMap<String, Tensor>, ModelError> {
    let mut out = HashMap::new();
    let mut fan_in = 1;
    for (i, (name, shape)) in config.weight_shapes().into_iter().enumerate() {
        let n: usize = shape.iter().product();
        let values = if name.contains("LayerNorm") {
            vec![if name.ends_with(".weight") { 1.0 } else { 0.0 }; n]
        } else {
            let std = if name.contains("embeddings") {
                1.0
            } else if name.ends_with(".weight") {
                // a projection's bias follows its weight in `weight_shapes`
                fan_in = shape[1];
                (2.0 / fan_in as f32).sqrt()
            } else {
                1.0 / (3.0 * fan_in as f32).sqrt()
            };
            let tensor_seed = super::random::splitmix(&mut (seed ^ (i as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407)));
            super::random::uniform(n, tensor_seed, 0.0, std)
        };
        out.insert(name, Tensor::from_vec(values, shape, &Device::Cpu)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str = r#"{"architectures":["BertModel"],"model_type":"bert","vocab_size":50,"hidden_size":16,
        "num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":32,"hidden_act":"gelu",
        "max_position_embeddings":12,"type_vocab_size":2,"layer_norm_eps":1e-12,"position_embedding_type":"absolute"}"#;

    fn ids(rows: &[&[u32]]) -> Tensor {
        let width = rows[0].len();
        Tensor::from_vec(rows.concat(), (rows.len(), width), &Device::Cpu).unwrap()
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b).unwrap().abs().unwrap().flatten_all().unwrap().max(0).unwrap().to_scalar::<f32>().unwrap()
    }

    #[test]
    fn reads_configurations_and_refuses_other_families() {
        let c = BertConfig::parse(TINY).unwrap();
        assert_eq!(
            (c.hidden_size, c.num_heads, c.hidden_act, c.max_position_embeddings),
            (16, 4, Activation::Gelu, 12)
        );
        assert_eq!(c.weight_shapes().len(), 5 + 2 * 16);
        let tanh = TINY.replace("\"gelu\"", "\"gelu_pytorch_tanh\"");
        assert_eq!(BertConfig::parse(&tanh).unwrap().hidden_act, Activation::GeluTanh);
        let bad = TINY.replace("\"gelu\"", "\"swish\"");
        assert!(BertConfig::parse(&bad).unwrap_err().contains("`swish`"));
        let roberta = TINY.replace("\"bert\"", "\"roberta\"");
        assert!(BertConfig::parse(&roberta).unwrap_err().contains("`roberta`"));
        let uneven = TINY.replace("\"num_attention_heads\":4", "\"num_attention_heads\":3");
        assert!(BertConfig::parse(&uneven).unwrap_err().contains("multiple"));
    }

    #[test]
    fn loads_prefixed_weights_and_checks_shapes() {
        let c = BertConfig::parse(TINY).unwrap();
        let w = random_weights(&c, 7).unwrap();
        let bare = Bert::from_tensors(c.clone(), w.clone(), &Device::Cpu).unwrap();
        let prefixed: HashMap<String, Tensor> = w.iter().map(|(k, v)| (format!("bert.{k}"), v.clone())).collect();
        let under_bert = Bert::from_tensors(c.clone(), prefixed, &Device::Cpu).unwrap();
        let input = ids(&[&[1, 5, 9, 2]]);
        let types = input.zeros_like().unwrap();
        let a = bare.forward(&input, &types, None).unwrap();
        let b = under_bert.forward(&input, &types, None).unwrap();
        assert_eq!(a.dims(), [1, 4, 16]);
        assert_eq!(max_diff(&a, &b), 0.0);
        assert_eq!(
            random_weights(&c, 7).unwrap()["encoder.layer.1.output.dense.weight"].to_vec2::<f32>().unwrap(),
            w["encoder.layer.1.output.dense.weight"].to_vec2::<f32>().unwrap()
        );
        let mut wrong = w.clone();
        wrong.insert(
            "encoder.layer.0.attention.self.key.bias".into(),
            Tensor::zeros(3, DType::F32, &Device::Cpu).unwrap(),
        );
        let e = Bert::from_tensors(c.clone(), wrong, &Device::Cpu).err().unwrap();
        assert!(e.contains("`encoder.layer.0.attention.self.key.bias` has shape [3]"), "{e}");
        let mut missing = w;
        missing.remove("encoder.layer.1.output.LayerNorm.bias");
        let e = Bert::from_tensors(c, missing, &Device::Cpu).err().unwrap();
        assert!(e.contains("no tensor `encoder.layer.1.output.LayerNorm.bias`"), "{e}");
    }

    #[test]
    fn padded_keys_are_ignored_and_positions_are_limited() {
        let c = BertConfig::parse(TINY).unwrap();
        let model = Bert::from_tensors(c.clone(), random_weights(&c, 3).unwrap(), &Device::Cpu).unwrap();
        let alone = ids(&[&[1, 5, 9, 2]]);
        let alone = model.forward(&alone, &alone.zeros_like().unwrap(), None).unwrap();
        // the same sequence right-padded with other tokens, beside a longer one
        let batch = ids(&[&[1, 5, 9, 2, 7, 7], &[1, 3, 4, 8, 6, 2]]);
        let mask = ids(&[&[1, 1, 1, 1, 0, 0], &[1, 1, 1, 1, 1, 1]]);
        let padded = model.forward(&batch, &batch.zeros_like().unwrap(), Some(&mask)).unwrap();
        let real = padded.narrow(0, 0, 1).unwrap().narrow(1, 0, 4).unwrap();
        assert!(max_diff(&real, &alone) < 1e-5, "{}", max_diff(&real, &alone));
        // token types change the result
        let typed = model.forward(&batch, &batch.ones_like().unwrap(), Some(&mask)).unwrap();
        assert!(max_diff(&typed, &padded) > 1e-3);
        let long = Tensor::zeros((1, 13), DType::U32, &Device::Cpu).unwrap();
        let e = model.forward(&long, &long, None).err().unwrap();
        assert!(e.to_string().contains("longer than the model's 12 positions"), "{e}");
    }

    #[test]
    fn activations_are_the_exact_and_the_tanh_gelu() {
        let x = Tensor::new(&[-2.0f32, -0.5, 0.0, 1.0, 3.0], &Device::Cpu).unwrap();
        let exact: Vec<f32> = Activation::Gelu.apply(&x).unwrap().to_vec1().unwrap();
        let tanh: Vec<f32> = Activation::GeluTanh.apply(&x).unwrap().to_vec1().unwrap();
        let relu: Vec<f32> = Activation::Relu.apply(&x).unwrap().to_vec1().unwrap();
        // x · Φ(x): Φ(1) = 0.8413447, Φ(-2) = 0.0227501
        assert!((exact[3] - 0.841_344_7).abs() < 1e-6 && (exact[0] + 0.045_500_26).abs() < 1e-6, "{exact:?}");
        // the approximation differs from it in the fourth decimal place
        assert!((tanh[3] - 0.841_192).abs() < 1e-5 && (tanh[3] - exact[3]).abs() > 1e-4, "{tanh:?}");
        assert_eq!(relu, vec![0.0, 0.0, 0.0, 1.0, 3.0]);
    }
}
