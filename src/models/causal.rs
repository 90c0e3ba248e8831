//! Decoder-only causal language models (the Qwen2, Qwen3 and Llama families) on candle, for
//! local logprob judges (`models::local_judge`).
//!
//! One implementation covers the three families; they differ only in details read from
//! `config.json`: Qwen2 has biases on the q/k/v projections, Qwen3 normalises every query and
//! key head with its own RMSNorm and may set `head_dim` explicitly, Llama 3 may scale RoPE
//! frequencies (`rope_scaling.rope_type = "llama3"`), and any of them may tie the output
//! projection to the embeddings. Keys and values are explicit tensors ([`KvCache`]), never a
//! cache hidden inside the layers, so that one prefix's cache serves many continuations:
//!
//! - [`CausalLm::prefill`] runs a padded batch of sequences from position 0 (right padding, an
//!   explicit mask hides the padding) and returns every layer's keys and values;
//! - [`CausalLm::extend`] runs a batch of continuations, `per_group` of them for each sequence
//!   of a prefilled batch, against that batch's cache without copying it: the queries of a
//!   group's continuations are stacked into one matrix that attends to the group's prefix keys,
//!   and to their own keys, under one softmax.
//!
//! Pipeline position: loaded by `models::local_judge` from a model directory; pure tensor code,
//! on the device `models::device()` gives. Weights are read with candle's safe safetensors
//! loader (no memory map).

use super::ModelError;
use candle_core::{DType, Device, IndexOp, Tensor, D};
use serde::Deserialize;
use serde_json::Value as Json;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// Added to the score of a key a query must not see. Finite on purpose: a query row whose keys
/// are all hidden (padding) then stays finite instead of turning into NaN, which would reach
/// real rows through the next layer's keys (NaN times a zero weight is NaN).
const MASKED: f32 = -1.0e9;

/// The model families this implementation covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Qwen2,
    Qwen3,
    Llama,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Qwen2 => "qwen2",
            Family::Qwen3 => "qwen3",
            Family::Llama => "llama",
        }
    }

    /// The Hugging Face architecture name written into `config.json`.
    pub fn architecture(self) -> &'static str {
        match self {
            Family::Qwen2 => "Qwen2ForCausalLM",
            Family::Qwen3 => "Qwen3ForCausalLM",
            Family::Llama => "LlamaForCausalLM",
        }
    }
}

impl std::str::FromStr for Family {
    type Err = String;
    fn from_str(s: &str) -> Result<Family, String> {
        match s {
            "qwen2" => Ok(Family::Qwen2),
            "qwen3" => Ok(Family::Qwen3),
            "llama" => Ok(Family::Llama),
            other => Err(format!("unknown model family `{other}`: expected qwen2, qwen3 or llama")),
        }
    }
}

/// Llama 3's RoPE frequency scaling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Llama3Scaling {
    pub factor: f64,
    pub low_freq_factor: f64,
    pub high_freq_factor: f64,
    pub original_max_position_embeddings: f64,
}

/// The architecture of a model, read from its `config.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct CausalConfig {
    pub family: Family,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub rope_scaling: Option<Llama3Scaling>,
    pub tie_word_embeddings: bool,
    /// Biases on the q, k and v projections (Qwen2; Llama's `attention_bias`).
    pub qkv_bias: bool,
    /// A bias on the output projection too (Llama's `attention_bias`).
    pub o_bias: bool,
    /// Per-head RMSNorm on queries and keys (Qwen3).
    pub qk_norm: bool,
    pub mlp_bias: bool,
    pub max_position_embeddings: usize,
}

#[derive(Deserialize)]
struct RawConfig {
    #[serde(default)]
    model_type: Option<String>,
    #[serde(default)]
    architectures: Option<Vec<String>>,
    vocab_size: usize,
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    #[serde(default)]
    num_key_value_heads: Option<usize>,
    #[serde(default)]
    head_dim: Option<usize>,
    rms_norm_eps: f64,
    #[serde(default)]
    rope_theta: Option<f64>,
    #[serde(default)]
    rope_scaling: Option<Json>,
    #[serde(default)]
    tie_word_embeddings: Option<bool>,
    #[serde(default)]
    attention_bias: Option<bool>,
    #[serde(default)]
    mlp_bias: Option<bool>,
    #[serde(default)]
    hidden_act: Option<String>,
    #[serde(default)]
    use_sliding_window: Option<bool>,
    #[serde(default)]
    max_position_embeddings: Option<usize>,
}

impl CausalConfig {
    /// Read a `config.json` text.
    pub fn parse(text: &str) -> Result<CausalConfig, String> {
        let raw: RawConfig = serde_json::from_str(text).map_err(|e| format!("config.json: {e}"))?;
        let arch = raw.architectures.as_ref().and_then(|a| a.first()).map(String::as_str);
        let family = match (raw.model_type.as_deref(), arch) {
            (Some("qwen2"), _) | (None, Some("Qwen2ForCausalLM")) => Family::Qwen2,
            (Some("qwen3"), _) | (None, Some("Qwen3ForCausalLM")) => Family::Qwen3,
            (Some("llama"), _) | (None, Some("LlamaForCausalLM")) => Family::Llama,
            (Some(other), _) => {
                return Err(format!(
                "config.json: model_type `{other}` is not supported (local judges run qwen2, qwen3 and llama models)"
            ))
            }
            (None, _) => return Err("config.json: no `model_type`".into()),
        };
        if let Some(act) = raw.hidden_act.as_deref() {
            if act != "silu" {
                return Err(format!("config.json: hidden_act `{act}` is not supported (only `silu`)"));
            }
        }
        if raw.use_sliding_window == Some(true) {
            return Err("config.json: sliding-window attention (`use_sliding_window`) is not supported".into());
        }
        let heads = raw.num_attention_heads;
        let kv = raw.num_key_value_heads.unwrap_or(heads);
        if heads == 0 || kv == 0 || !heads.is_multiple_of(kv) {
            return Err(format!("config.json: {heads} attention heads cannot share {kv} key/value heads evenly"));
        }
        let head_dim = match raw.head_dim {
            Some(d) => d,
            None if raw.hidden_size.is_multiple_of(heads) => raw.hidden_size / heads,
            None => return Err("config.json: hidden_size is not a multiple of num_attention_heads".into()),
        };
        if head_dim == 0 || head_dim % 2 != 0 {
            return Err(format!("config.json: head_dim {head_dim} must be even"));
        }
        let rope_scaling = match &raw.rope_scaling {
            None | Some(Json::Null) => None,
            Some(s) => {
                let kind = s.get("rope_type").or_else(|| s.get("type")).and_then(Json::as_str).unwrap_or("");
                let num = |k: &str| s.get(k).and_then(Json::as_f64);
                match kind {
                    "llama3" => Some(Llama3Scaling {
                        factor: num("factor").ok_or("config.json: rope_scaling has no `factor`")?,
                        low_freq_factor: num("low_freq_factor").unwrap_or(1.0),
                        high_freq_factor: num("high_freq_factor").unwrap_or(4.0),
                        original_max_position_embeddings: num("original_max_position_embeddings").unwrap_or(8192.0),
                    }),
                    "default" => None,
                    other => return Err(format!("config.json: rope_scaling `{other}` is not supported")),
                }
            }
        };
        let attention_bias = raw.attention_bias.unwrap_or(false);
        let cfg = CausalConfig {
            family,
            vocab_size: raw.vocab_size,
            hidden_size: raw.hidden_size,
            intermediate_size: raw.intermediate_size,
            num_layers: raw.num_hidden_layers,
            num_heads: heads,
            num_kv_heads: kv,
            head_dim,
            rms_norm_eps: raw.rms_norm_eps,
            rope_theta: raw.rope_theta.unwrap_or(10_000.0),
            rope_scaling,
            tie_word_embeddings: raw.tie_word_embeddings.unwrap_or(false),
            qkv_bias: match family {
                Family::Qwen2 => true,
                Family::Qwen3 | Family::Llama => attention_bias,
            },
            o_bias: match family {
                Family::Qwen2 => false,
                Family::Qwen3 | Family::Llama => attention_bias,
            },
            qk_norm: family == Family::Qwen3,
            mlp_bias: raw.mlp_bias.unwrap_or(false),
            max_position_embeddings: raw.max_position_embeddings.unwrap_or(32_768),
        };
        if cfg.vocab_size == 0 || cfg.hidden_size == 0 || cfg.num_layers == 0 {
            return Err("config.json: vocab_size, hidden_size and num_hidden_layers must be positive".into());
        }
        Ok(cfg)
    }

    /// The `config.json` of this architecture, as Hugging Face writes it.
    pub fn to_json(&self) -> Json {
        let mut j = serde_json::json!({
            "architectures": [self.family.architecture()],
            "model_type": self.family.name(),
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": null,
            "tie_word_embeddings": self.tie_word_embeddings,
            "max_position_embeddings": self.max_position_embeddings,
            "torch_dtype": "float32",
            "use_cache": true,
        });
        if self.family != Family::Qwen2 {
            j["attention_bias"] = Json::Bool(self.o_bias);
            j["attention_dropout"] = Json::from(0.0);
        }
        if self.family == Family::Llama {
            j["mlp_bias"] = Json::Bool(self.mlp_bias);
        }
        if self.family == Family::Qwen2 {
            j["use_sliding_window"] = Json::Bool(false);
        }
        j
    }

    /// The rotary frequencies of one head (`head_dim / 2` of them), in f32 as Hugging Face
    /// computes them, with Llama 3's scaling applied.
    pub fn inv_freq(&self) -> Vec<f32> {
        let d = self.head_dim;
        let base = self.rope_theta as f32;
        let mut f: Vec<f32> = (0..d / 2).map(|i| 1.0 / base.powf((2 * i) as f32 / d as f32)).collect();
        if let Some(s) = self.rope_scaling {
            let low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
            let high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
            for x in f.iter_mut() {
                let freq = *x as f64;
                let wavelen = 2.0 * std::f64::consts::PI / freq;
                let scaled = if wavelen > low_wavelen {
                    freq / s.factor
                } else if wavelen < high_wavelen {
                    freq
                } else {
                    // Between the two wavelengths: blend the scaled and the original frequency.
                    let t = (s.original_max_position_embeddings / wavelen - s.low_freq_factor)
                        / (s.high_freq_factor - s.low_freq_factor);
                    (1.0 - t) * freq / s.factor + t * freq
                };
                *x = scaled as f32;
            }
        }
        f
    }

    /// Every weight name of this architecture with its shape, in Hugging Face's naming.
    pub fn weight_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let (h, i, v) = (self.hidden_size, self.intermediate_size, self.vocab_size);
        let (q, kv) = (self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim);
        let mut out = vec![("model.embed_tokens.weight".to_string(), vec![v, h])];
        for l in 0..self.num_layers {
            let p = format!("model.layers.{l}");
            out.push((format!("{p}.input_layernorm.weight"), vec![h]));
            out.push((format!("{p}.post_attention_layernorm.weight"), vec![h]));
            for (name, rows) in [("q_proj", q), ("k_proj", kv), ("v_proj", kv)] {
                out.push((format!("{p}.self_attn.{name}.weight"), vec![rows, h]));
                if self.qkv_bias {
                    out.push((format!("{p}.self_attn.{name}.bias"), vec![rows]));
                }
            }
            out.push((format!("{p}.self_attn.o_proj.weight"), vec![h, q]));
            if self.o_bias {
                out.push((format!("{p}.self_attn.o_proj.bias"), vec![h]));
            }
            if self.qk_norm {
                out.push((format!("{p}.self_attn.q_norm.weight"), vec![self.head_dim]));
                out.push((format!("{p}.self_attn.k_norm.weight"), vec![self.head_dim]));
            }
            for (name, shape) in [("gate_proj", vec![i, h]), ("up_proj", vec![i, h]), ("down_proj", vec![h, i])] {
                let rows = shape[0];
                out.push((format!("{p}.mlp.{name}.weight"), shape));
                if self.mlp_bias {
                    out.push((format!("{p}.mlp.{name}.bias"), vec![rows]));
                }
            }
        }
        out.push(("model.norm.weight".to_string(), vec![h]));
        if !self.tie_word_embeddings {
            out.push(("lm_head.weight".to_string(), vec![v, h]));
        }
        out
    }
}

/// A projection: `x · Wᵀ (+ b)`.
struct Linear {
    weight: Tensor,
    bias: Option<Tensor>,
}

impl Linear {
    /// `x` is `[N, in]`; the result `[N, out]`.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let y = x.matmul(&self.weight.t()?)?;
        match &self.bias {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        }
    }
}

struct Layer {
    input_norm: Tensor,
    post_norm: Tensor,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    q_norm: Option<Tensor>,
    k_norm: Option<Tensor>,
    gate: Linear,
    up: Linear,
    down: Linear,
}

/// The keys and values of every layer for a batch of sequences, after RoPE: per layer
/// `(k, v)`, each `[batch, kv_heads, positions, head_dim]`.
pub struct KvCache {
    pub layers: Vec<(Tensor, Tensor)>,
    /// The real length of each sequence (the rest is padding).
    pub lens: Vec<usize>,
}

/// How the queries of one forward pass attend.
enum Attend<'a> {
    /// To their own sequence, causally; `mask` is `[B, kv, rep, S, S]` (0 or `MASKED`).
    Own { mask: Tensor },
    /// To a prefilled prefix and to their own continuation, under one softmax. The batch holds
    /// `per_group` continuations of each of the cache's `groups` sequences, group-major;
    /// `mask` is `[B, kv, rep, S, P + S]`.
    Shared { cache: &'a KvCache, groups: usize, per_group: usize, mask: Tensor },
}

/// A causal language model's weights on a device.
pub struct CausalLm {
    pub config: CausalConfig,
    embed: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    lm_head: Tensor,
    inv_freq: Tensor,
    device: Device,
    dtype: DType,
}

/// The safetensors files of a model directory: `model.safetensors`, or the shards that
/// `model.safetensors.index.json` names.
pub fn weight_files(dir: &Path) -> Result<Vec<PathBuf>, ModelError> {
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(vec![single]);
    }
    let index = dir.join("model.safetensors.index.json");
    let text = std::fs::read_to_string(&index).map_err(|e| ModelError::Load {
        path: dir.display().to_string(),
        message: format!("no model.safetensors, and no model.safetensors.index.json ({e})"),
    })?;
    let j: Json = serde_json::from_str(&text)
        .map_err(|e| ModelError::Load { path: index.display().to_string(), message: e.to_string() })?;
    let files: BTreeSet<&str> = j
        .get("weight_map")
        .and_then(Json::as_object)
        .ok_or_else(|| ModelError::Load { path: index.display().to_string(), message: "no `weight_map`".into() })?
        .values()
        .filter_map(Json::as_str)
        .collect();
    let mut out = Vec::new();
    for f in files {
        if f.contains('/') || f.contains('\\') || f.starts_with('.') {
            return Err(ModelError::Load {
                path: index.display().to_string(),
                message: format!("shard name `{f}` is not a file name in the model directory"),
            });
        }
        out.push(dir.join(f));
    }
    if out.is_empty() {
        return Err(ModelError::Load { path: index.display().to_string(), message: "the weight map is empty".into() });
    }
    Ok(out)
}

impl CausalLm {
    /// Load `config.json` and the safetensors weights of `dir` onto `device`, in `dtype`.
    pub fn load(dir: &Path, device: &Device, dtype: DType) -> Result<CausalLm, ModelError> {
        let cfg_path = dir.join("config.json");
        let text = std::fs::read_to_string(&cfg_path)
            .map_err(|e| ModelError::Load { path: cfg_path.display().to_string(), message: e.to_string() })?;
        let config =
            CausalConfig::parse(&text).map_err(|m| ModelError::Load { path: dir.display().to_string(), message: m })?;
        let mut tensors: HashMap<String, Tensor> = HashMap::new();
        for f in weight_files(dir)? {
            let loaded = candle_core::safetensors::load(&f, &Device::Cpu)
                .map_err(|e| ModelError::Load { path: f.display().to_string(), message: e.to_string() })?;
            tensors.extend(loaded);
        }
        CausalLm::from_tensors(config, tensors, device, dtype)
            .map_err(|m| ModelError::Load { path: dir.display().to_string(), message: m })
    }

    /// Build a model from named tensors (Hugging Face's names), checking every shape.
    pub fn from_tensors(
        config: CausalConfig,
        mut tensors: HashMap<String, Tensor>,
        device: &Device,
        dtype: DType,
    ) -> Result<CausalLm, String> {
        let expected: HashMap<String, Vec<usize>> = config.weight_shapes().into_iter().collect();
        let mut take = |name: &str| -> Result<Tensor, String> {
            let t = tensors.remove(name).ok_or_else(|| format!("the weights have no tensor `{name}`"))?;
            if let Some(shape) = expected.get(name) {
                if t.dims() != shape.as_slice() {
                    return Err(format!("tensor `{name}` has shape {:?}, expected {shape:?}", t.dims()));
                }
            }
            t.to_dtype(dtype).and_then(|t| t.to_device(device)).map_err(|e| format!("tensor `{name}`: {e}"))
        };
        let embed = take("model.embed_tokens.weight")?;
        let mut layers = Vec::with_capacity(config.num_layers);
        for l in 0..config.num_layers {
            let p = format!("model.layers.{l}");
            let mut lin = |name: &str, bias: bool| -> Result<Linear, String> {
                Ok(Linear {
                    weight: take(&format!("{p}.{name}.weight"))?,
                    bias: if bias { Some(take(&format!("{p}.{name}.bias"))?) } else { None },
                })
            };
            let q = lin("self_attn.q_proj", config.qkv_bias)?;
            let k = lin("self_attn.k_proj", config.qkv_bias)?;
            let v = lin("self_attn.v_proj", config.qkv_bias)?;
            let o = lin("self_attn.o_proj", config.o_bias)?;
            let gate = lin("mlp.gate_proj", config.mlp_bias)?;
            let up = lin("mlp.up_proj", config.mlp_bias)?;
            let down = lin("mlp.down_proj", config.mlp_bias)?;
            let (q_norm, k_norm) = if config.qk_norm {
                (
                    Some(take(&format!("{p}.self_attn.q_norm.weight"))?),
                    Some(take(&format!("{p}.self_attn.k_norm.weight"))?),
                )
            } else {
                (None, None)
            };
            layers.push(Layer {
                input_norm: take(&format!("{p}.input_layernorm.weight"))?,
                post_norm: take(&format!("{p}.post_attention_layernorm.weight"))?,
                q,
                k,
                v,
                o,
                q_norm,
                k_norm,
                gate,
                up,
                down,
            });
        }
        let norm = take("model.norm.weight")?;
        let lm_head = if config.tie_word_embeddings { embed.clone() } else { take("lm_head.weight")? };
        let inv_freq = Tensor::new(config.inv_freq(), device).map_err(|e| e.to_string())?;
        Ok(CausalLm { config, embed, layers, norm, lm_head, inv_freq, device: device.clone(), dtype })
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    fn rms(&self, x: &Tensor, w: &Tensor) -> candle_core::Result<Tensor> {
        candle_nn::ops::rms_norm(&x.contiguous()?, w, self.config.rms_norm_eps as f32)
    }

    /// cos and sin of every position, `[B, S, head_dim / 2]` in the model's dtype, from
    /// positions given row-major as `[B, S]`.
    fn rope_tables(&self, positions: &[u32], b: usize, s: usize) -> candle_core::Result<(Tensor, Tensor)> {
        let pos: Vec<f32> = positions.iter().map(|&p| p as f32).collect();
        let pos = Tensor::from_vec(pos, (b, s, 1), &self.device)?;
        let half = self.config.head_dim / 2;
        let freqs = pos.broadcast_mul(&self.inv_freq.reshape((1, 1, half))?)?;
        Ok((freqs.cos()?.to_dtype(self.dtype)?, freqs.sin()?.to_dtype(self.dtype)?))
    }

    /// One decoder layer over `x` (`[B, S, H]`); returns the new `x` and this layer's keys and
    /// values (`[B, kv, S, d]`, after RoPE).
    fn layer(
        &self,
        l: usize,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        attend: &Attend<'_>,
    ) -> candle_core::Result<(Tensor, Tensor, Tensor)> {
        let layer = &self.layers[l];
        let c = &self.config;
        let (b, s, hidden) = x.dims3()?;
        let (heads, kvh, d) = (c.num_heads, c.num_kv_heads, c.head_dim);
        let rep = heads / kvh;
        let h = self.rms(x, &layer.input_norm)?.reshape((b * s, hidden))?;
        let heads_of = |t: Tensor, n: usize, norm: &Option<Tensor>| -> candle_core::Result<Tensor> {
            let t = t.reshape((b, s, n, d))?;
            let t = match norm {
                Some(w) => self.rms(&t, w)?,
                None => t,
            };
            let t = t.transpose(1, 2)?.contiguous()?;
            candle_nn::rotary_emb::rope(&t, cos, sin)
        };
        let q = heads_of(layer.q.forward(&h)?, heads, &layer.q_norm)?;
        let k = heads_of(layer.k.forward(&h)?, kvh, &layer.k_norm)?;
        let v = layer.v.forward(&h)?.reshape((b, s, kvh, d))?.transpose(1, 2)?.contiguous()?;
        let scale = 1.0 / (d as f64).sqrt();
        // Queries grouped by the key/value head they share: [B, kv, rep * S, d].
        let attn = match attend {
            Attend::Own { mask } => {
                let qg = q.reshape((b, kvh, rep * s, d))?;
                let scores = (qg.matmul(&k.t()?)? * scale)?;
                let scores = scores.reshape((b, kvh, rep, s, s))?.broadcast_add(mask)?;
                let w = candle_nn::ops::softmax_last_dim(&scores)?.reshape((b, kvh, rep * s, s))?;
                w.matmul(&v)?
            }
            Attend::Shared { cache, groups, per_group, mask } => {
                let (g, n) = (*groups, *per_group);
                let (pk, pv) = &cache.layers[l];
                let p = pk.dim(2)?;
                // Every continuation of a group against the group's prefix keys, in one matrix
                // per group and key/value head: [G, kv, rep * n * S, P].
                let qp = q
                    .reshape(vec![g, n, kvh, rep, s, d])?
                    .permute([0, 2, 3, 1, 4, 5])?
                    .contiguous()?
                    .reshape((g, kvh, rep * n * s, d))?;
                let sp = (qp.matmul(&pk.t()?)? * scale)?
                    .reshape(vec![g, kvh, rep, n, s, p])?
                    .permute([0, 3, 1, 2, 4, 5])?
                    .contiguous()?
                    .reshape((b, kvh, rep, s, p))?;
                // Each continuation against its own keys: [B, kv, rep, S, S].
                let qs = q.reshape((b, kvh, rep * s, d))?;
                let ss = (qs.matmul(&k.t()?)? * scale)?.reshape((b, kvh, rep, s, s))?;
                let scores = Tensor::cat(&[&sp, &ss], 4)?.broadcast_add(mask)?;
                let w = candle_nn::ops::softmax_last_dim(&scores)?;
                let wp = w
                    .narrow(4, 0, p)?
                    .reshape(vec![g, n, kvh, rep, s, p])?
                    .permute([0, 2, 3, 1, 4, 5])?
                    .contiguous()?
                    .reshape((g, kvh, rep * n * s, p))?;
                let from_prefix = wp
                    .matmul(pv)?
                    .reshape(vec![g, kvh, rep, n, s, d])?
                    .permute([0, 3, 1, 2, 4, 5])?
                    .contiguous()?
                    .reshape((b, kvh, rep * s, d))?;
                let ws = w.narrow(4, p, s)?.contiguous()?.reshape((b, kvh, rep * s, s))?;
                (from_prefix + ws.matmul(&v)?)?
            }
        };
        let attn = attn.reshape((b, heads, s, d))?.transpose(1, 2)?.contiguous()?.reshape((b * s, heads * d))?;
        let x = (x + layer.o.forward(&attn)?.reshape((b, s, hidden))?)?;
        let h = self.rms(&x, &layer.post_norm)?.reshape((b * s, hidden))?;
        let gate = candle_nn::ops::silu(&layer.gate.forward(&h)?)?;
        let mlp = layer.down.forward(&(gate * layer.up.forward(&h)?)?)?;
        let x = (x + mlp.reshape((b, s, hidden))?)?;
        Ok((x, k, v))
    }

    /// The additive mask `[B, S, K]` (row-major in `mask`) spread over every head once per
    /// forward pass, `[B, kv, rep, S, K]`, so that each layer adds it without broadcasting
    /// (a broadcast over the middle dimensions is slow on the CPU).
    fn full_mask(&self, mask: Vec<f32>, b: usize, s: usize, k: usize) -> candle_core::Result<Tensor> {
        let (kvh, rep) = (self.config.num_kv_heads, self.config.num_heads / self.config.num_kv_heads);
        Tensor::from_vec(mask, (b, 1, 1, s, k), &self.device)?
            .to_dtype(self.dtype)?
            .broadcast_as((b, kvh, rep, s, k))?
            .contiguous()
    }

    fn ids_tensor(&self, ids: &[Vec<u32>], width: usize) -> Result<Tensor, ModelError> {
        let vocab = self.config.vocab_size as u32;
        let mut flat = Vec::with_capacity(ids.len() * width);
        for row in ids {
            if let Some(bad) = row.iter().find(|&&t| t >= vocab) {
                return Err(ModelError::Run(format!("token id {bad} is outside the vocabulary of {vocab}")));
            }
            flat.extend_from_slice(row);
            flat.extend(std::iter::repeat_n(0u32, width - row.len()));
        }
        Ok(Tensor::from_vec(flat, (ids.len(), width), &self.device)?)
    }

    /// Run `seqs` from position 0 as one batch, right-padded to the longest; returns the hidden
    /// states `[B, T, H]` and every layer's keys and values. An empty sequence is allowed: its
    /// row is all padding, and its cache hides every position.
    pub fn prefill(&self, seqs: &[Vec<u32>]) -> Result<(Tensor, KvCache), ModelError> {
        let b = seqs.len();
        let t = seqs.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let ids = self.ids_tensor(seqs, t)?;
        let positions: Vec<u32> = (0..b).flat_map(|_| 0..t as u32).collect();
        let mut mask = vec![0f32; b * t * t];
        for (r, seq) in seqs.iter().enumerate() {
            for i in 0..t {
                for j in 0..t {
                    if j > i || j >= seq.len() {
                        mask[(r * t + i) * t + j] = MASKED;
                    }
                }
            }
        }
        let mask = self.full_mask(mask, b, t, t)?;
        let (cos, sin) = self.rope_tables(&positions, b, t)?;
        let mut x = self.embed.index_select(&ids.flatten_all()?, 0)?.reshape((b, t, self.config.hidden_size))?;
        let mut layers = Vec::with_capacity(self.layers.len());
        let attend = Attend::Own { mask };
        for l in 0..self.layers.len() {
            let (nx, k, v) = self.layer(l, &x, &cos, &sin, &attend)?;
            x = nx;
            layers.push((k, v));
        }
        Ok((x, KvCache { layers, lens: seqs.iter().map(Vec::len).collect() }))
    }

    /// Run continuations against a prefilled cache of `G` sequences: `conts` holds
    /// `per_group` continuations per sequence, group-major (`G * per_group` of them; an empty
    /// one is padding). Continuation `j` of group `g` starts at position `cache.lens[g]` and
    /// sees the first `cache.lens[g]` cached positions and itself, causally. Returns the
    /// hidden states `[G * per_group, S, H]`.
    pub fn extend(&self, cache: &KvCache, conts: &[Vec<u32>], per_group: usize) -> Result<Tensor, ModelError> {
        let g = cache.lens.len();
        if per_group == 0 || conts.len() != g * per_group {
            return Err(ModelError::Run(format!(
                "{} continuations do not make {per_group} for each of {g} prefixes",
                conts.len()
            )));
        }
        let b = conts.len();
        let s = conts.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let p = match cache.layers.first() {
            Some((k, _)) => k.dim(2)?,
            None => 0,
        };
        let ids = self.ids_tensor(conts, s)?;
        let mut positions = Vec::with_capacity(b * s);
        let mut mask = vec![0f32; b * s * (p + s)];
        for (r, cont) in conts.iter().enumerate() {
            let plen = cache.lens[r / per_group];
            positions.extend((0..s).map(|i| (plen + i) as u32));
            for i in 0..s {
                let row = &mut mask[(r * s + i) * (p + s)..(r * s + i + 1) * (p + s)];
                for (j, m) in row.iter_mut().enumerate() {
                    let hidden = if j < p { j >= plen } else { j - p > i || j - p >= cont.len() };
                    if hidden {
                        *m = MASKED;
                    }
                }
            }
        }
        let mask = self.full_mask(mask, b, s, p + s)?;
        let (cos, sin) = self.rope_tables(&positions, b, s)?;
        let mut x = self.embed.index_select(&ids.flatten_all()?, 0)?.reshape((b, s, self.config.hidden_size))?;
        let attend = Attend::Shared { cache, groups: g, per_group, mask };
        for l in 0..self.layers.len() {
            x = self.layer(l, &x, &cos, &sin, &attend)?.0;
        }
        Ok(x)
    }

    /// Log-probabilities of the next token (f32, `[N, vocab]`) after the hidden states at
    /// `(row, position)` of `hidden` (`[B, T, H]`).
    pub fn next_token_logprobs(&self, hidden: &Tensor, at: &[(usize, usize)]) -> Result<Tensor, ModelError> {
        let (b, t, h) = hidden.dims3()?;
        let idx: Vec<u32> = at
            .iter()
            .map(|&(r, i)| {
                if r < b && i < t {
                    Ok((r * t + i) as u32)
                } else {
                    Err(ModelError::Run(format!("position ({r}, {i}) is outside the batch")))
                }
            })
            .collect::<Result<_, _>>()?;
        let n = idx.len();
        let idx = Tensor::from_vec(idx, n, &self.device)?;
        let rows = hidden.reshape((b * t, h))?.index_select(&idx, 0)?;
        let rows = self.rms(&rows, &self.norm)?;
        let logits = rows.matmul(&self.lm_head.t()?)?.to_dtype(DType::F32)?;
        Ok(candle_nn::ops::log_softmax(&logits, D::Minus1)?)
    }

    /// The next-token log-probabilities after the whole of `seq`, computed alone (no padding,
    /// no shared cache): the reference the batched paths are tested against.
    pub fn logprobs_alone(&self, seq: &[u32]) -> Result<Tensor, ModelError> {
        if seq.is_empty() {
            return Err(ModelError::Run("an empty prompt has no next token".into()));
        }
        let (hidden, _) = self.prefill(&[seq.to_vec()])?;
        Ok(self.next_token_logprobs(&hidden, &[(0, seq.len() - 1)])?.i(0)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_three_families() {
        let qwen3 = r#"{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","vocab_size":10,"hidden_size":8,
            "intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":4,
            "rms_norm_eps":1e-6,"rope_theta":1000000,"tie_word_embeddings":true,"attention_bias":false}"#;
        let c = CausalConfig::parse(qwen3).unwrap();
        assert_eq!(
            (c.family, c.head_dim, c.qk_norm, c.qkv_bias, c.tie_word_embeddings),
            (Family::Qwen3, 4, true, false, true)
        );
        let qwen2 = qwen3.replace("qwen3", "qwen2").replace(",\"head_dim\":4", "");
        let c = CausalConfig::parse(&qwen2).unwrap();
        assert_eq!((c.family, c.head_dim, c.qk_norm, c.qkv_bias, c.o_bias), (Family::Qwen2, 2, false, true, false));
        assert!(c.weight_shapes().iter().any(|(n, s)| n == "model.layers.0.self_attn.k_proj.bias" && s == &vec![4]));
        let llama = r#"{"model_type":"llama","vocab_size":10,"hidden_size":8,"intermediate_size":16,
            "num_hidden_layers":1,"num_attention_heads":2,"rms_norm_eps":1e-5,"rope_theta":500000,
            "rope_scaling":{"rope_type":"llama3","factor":32.0,"low_freq_factor":1.0,"high_freq_factor":4.0,
            "original_max_position_embeddings":8192}}"#;
        let c = CausalConfig::parse(llama).unwrap();
        assert_eq!((c.family, c.num_kv_heads, c.head_dim), (Family::Llama, 2, 4));
        assert!(c.weight_shapes().iter().any(|(n, _)| n == "lm_head.weight"));
        // Scaling divides the low frequencies by the factor and keeps the high ones.
        let plain = CausalConfig { rope_scaling: None, ..c.clone() }.inv_freq();
        let scaled = c.inv_freq();
        assert_eq!(scaled[0], plain[0]);
        assert!((scaled[1] as f64 - plain[1] as f64 / 32.0).abs() < 1e-9 || scaled[1] < plain[1]);
        let bad = qwen3.replace("qwen3", "gpt2");
        assert!(CausalConfig::parse(&bad).unwrap_err().contains("`gpt2`"));
        let uneven = qwen3.replace("\"num_key_value_heads\":2", "\"num_key_value_heads\":3");
        assert!(CausalConfig::parse(&uneven).unwrap_err().contains("evenly"));
    }
}
