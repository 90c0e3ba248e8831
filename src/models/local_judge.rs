//! Local logprob judges: a causal language model that scores a yes/no question by one forward
//! pass. The judge's messages go through the model's chat template (`models::chat`) and its
//! tokenizer; the score is P(yes) / (P(yes) + P(no)) over the first answer token, where the
//! yes (no) probability sums every vocabulary token that decodes, trimmed and case-folded, to
//! `yes` (`no`).
//!
//! Prompts are scored in batches that share work ([`LocalJudge::score_tokens`]): the prompts
//! are sorted by their tokens and cut into groups of neighbours that share a long common
//! prefix (the criteria of one response, under the default template); each group's common
//! prefix is prefilled once and the group's suffixes run as one batch against that cache
//! (`CausalLm::extend`). Groups are packed, several per forward pass, into right-padded
//! batches under a token budget. [`LocalJudge::score_alone`] scores one prompt by itself, with
//! a full prefill: the oracle the batched path is tested against.
//!
//! Pipeline position: called by `judge` (the dispatcher answers `local` judges' requests with
//! it), and by `cli` (`rubric model bench`).

use super::causal::{weight_files, CausalLm};
use super::chat::{ChatMessage, ChatTemplate};
use super::ModelError;
use candle_core::{DType, Device, Tensor};
use sha2::{Digest, Sha256};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The yes/no log-probabilities of the first answer token of one prompt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct YesNo {
    /// ln P(yes): every yes token's probability, summed.
    pub logprob_yes: f64,
    /// ln P(no).
    pub logprob_no: f64,
    /// The prompt's length in tokens.
    pub prompt_tokens: usize,
}

impl YesNo {
    /// P(yes) / (P(yes) + P(no)).
    pub fn p_yes(&self) -> f64 {
        p_yes(self.logprob_yes, self.logprob_no)
    }
}

/// P(yes) / (P(yes) + P(no)) from the two log-probabilities, computed stably.
pub fn p_yes(logprob_yes: f64, logprob_no: f64) -> f64 {
    1.0 / (1.0 + (logprob_no - logprob_yes).exp())
}

/// How prompts are batched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOptions {
    /// Padded tokens per forward pass (prefixes or suffixes), at most; a single group larger
    /// than this still runs, alone.
    pub token_budget: usize,
    /// Prompts per group, at most.
    pub max_group: usize,
}

impl BatchOptions {
    /// 8192 tokens per pass on the CPU, 65536 on a GPU; `RUBRIC_LOCAL_BATCH_TOKENS` overrides.
    pub fn for_device(device: &Device) -> BatchOptions {
        let default = if device.is_cpu() { 8192 } else { 65536 };
        let token_budget = std::env::var("RUBRIC_LOCAL_BATCH_TOKENS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or(default);
        BatchOptions { token_budget, max_group: 64 }
    }
}

/// The dtype a model runs in on `device`: f32 on the CPU, bf16 on a GPU
/// (`RUBRIC_LOCAL_DTYPE=f32|bf16|f16` overrides).
pub fn dtype_for(device: &Device) -> DType {
    match std::env::var("RUBRIC_LOCAL_DTYPE").ok().as_deref() {
        Some("f32") => DType::F32,
        Some("bf16") => DType::BF16,
        Some("f16") => DType::F16,
        _ if device.is_cpu() => DType::F32,
        _ => DType::BF16,
    }
}

/// A loaded local judge model: weights, tokenizer, chat template and the yes/no token sets.
pub struct LocalJudge {
    pub model: CausalLm,
    tokenizer: tokenizers::Tokenizer,
    template: ChatTemplate,
    yes: Vec<u32>,
    no: Vec<u32>,
    yes_ids: Tensor,
    no_ids: Tensor,
    pub options: BatchOptions,
}

fn load_err(path: &Path, message: impl std::fmt::Display) -> ModelError {
    ModelError::Load { path: path.display().to_string(), message: message.to_string() }
}

impl LocalJudge {
    /// Load the model directory `dir` onto `device`, in the device's dtype ([`dtype_for`]).
    pub fn load(dir: &Path, device: &Device) -> Result<LocalJudge, ModelError> {
        LocalJudge::load_as(dir, device, dtype_for(device))
    }

    /// Load the model directory `dir` onto `device`, computing in `dtype`.
    pub fn load_as(dir: &Path, device: &Device, dtype: DType) -> Result<LocalJudge, ModelError> {
        if !dir.is_dir() {
            return Err(load_err(dir, "not a directory"));
        }
        let tok_path = dir.join("tokenizer.json");
        let tokenizer = tokenizers::Tokenizer::from_file(&tok_path).map_err(|e| load_err(&tok_path, e))?;
        let template = ChatTemplate::load(dir)?;
        let model = CausalLm::load(dir, device, dtype)?;
        let vocab = model.config.vocab_size.min(tokenizer.get_vocab_size(true)) as u32;
        let (mut yes, mut no) = (Vec::new(), Vec::new());
        for id in 0..vocab {
            let Ok(text) = tokenizer.decode(&[id], false) else { continue };
            match text.trim().to_lowercase().as_str() {
                "yes" => yes.push(id),
                "no" => no.push(id),
                _ => {}
            }
        }
        if yes.is_empty() || no.is_empty() {
            return Err(load_err(dir, "the vocabulary has no token that reads `yes` or none that reads `no`"));
        }
        let yes_ids = Tensor::new(yes.as_slice(), device)?;
        let no_ids = Tensor::new(no.as_slice(), device)?;
        let options = BatchOptions::for_device(device);
        Ok(LocalJudge { model, tokenizer, template, yes, no, yes_ids, no_ids, options })
    }

    /// The token ids read as yes and as no.
    pub fn answer_tokens(&self) -> (&[u32], &[u32]) {
        (&self.yes, &self.no)
    }

    /// The prompt text of `messages` (the chat template with a generation prompt).
    pub fn prompt_text(&self, messages: &[ChatMessage]) -> Result<String, ModelError> {
        self.template.render(messages)
    }

    /// The prompt's tokens (the template supplies any special tokens).
    pub fn prompt_tokens(&self, messages: &[ChatMessage]) -> Result<Vec<u32>, ModelError> {
        let text = self.prompt_text(messages)?;
        let enc =
            self.tokenizer.encode(text.as_str(), false).map_err(|e| ModelError::Run(format!("tokenizer: {e}")))?;
        let ids = enc.get_ids().to_vec();
        if ids.is_empty() {
            return Err(ModelError::Run("the prompt has no tokens".into()));
        }
        Ok(ids)
    }

    /// Score every prompt, batched with shared prefixes; one result per prompt, in order.
    pub fn score(&self, prompts: &[Vec<ChatMessage>]) -> Vec<Result<YesNo, ModelError>> {
        let tokens: Vec<Result<Vec<u32>, ModelError>> = prompts.iter().map(|m| self.prompt_tokens(m)).collect();
        let ok: Vec<Vec<u32>> = tokens.iter().filter_map(|t| t.as_ref().ok().cloned()).collect();
        let mut scored = self.score_tokens(&ok).into_iter();
        tokens.into_iter().map(|t| t.and_then(|_| scored.next().unwrap_or_else(|| Err(missing())))).collect()
    }

    /// Yes/no log-probabilities from next-token log-probabilities `[N, vocab]`.
    fn classes(&self, logprobs: &Tensor, lens: &[usize]) -> Result<Vec<YesNo>, ModelError> {
        let y = logprobs.index_select(&self.yes_ids, 1)?.to_vec2::<f32>()?;
        let n = logprobs.index_select(&self.no_ids, 1)?.to_vec2::<f32>()?;
        y.iter()
            .zip(&n)
            .zip(lens)
            .map(|((y, n), &len)| {
                let (ly, ln) = (logsumexp(y), logsumexp(n));
                if ly.is_nan() || ln.is_nan() || (ly == f64::NEG_INFINITY && ln == f64::NEG_INFINITY) {
                    return Err(ModelError::Run("the model's output is not a number".into()));
                }
                Ok(YesNo { logprob_yes: ly, logprob_no: ln, prompt_tokens: len })
            })
            .collect()
    }

    /// One prompt alone, with a full prefill and no padding.
    pub fn score_alone(&self, tokens: &[u32]) -> Result<YesNo, ModelError> {
        guard(|| {
            let lp = self.model.logprobs_alone(tokens)?.unsqueeze(0)?;
            Ok(self.classes(&lp, &[tokens.len()])?.remove(0))
        })
    }

    /// Every prompt, grouped by shared prefixes and packed into batches; one result per
    /// prompt, in order. A batch that fails fails only its own prompts.
    pub fn score_tokens(&self, prompts: &[Vec<u32>]) -> Vec<Result<YesNo, ModelError>> {
        let mut out: Vec<Option<Result<YesNo, ModelError>>> = vec![None; prompts.len()];
        for (i, p) in prompts.iter().enumerate() {
            if p.is_empty() {
                out[i] = Some(Err(ModelError::Run("an empty prompt has no next token".into())));
            }
        }
        let live: Vec<usize> = (0..prompts.len()).filter(|&i| !prompts[i].is_empty()).collect();
        let groups = group_prompts(prompts, &live, self.options.max_group);
        for pack in pack_groups(&groups, self.options.token_budget) {
            let result = guard(|| self.run_pack(prompts, &pack));
            match result {
                Ok(scores) => {
                    let ids = pack.iter().flat_map(|g| g.members.iter().copied());
                    for (i, s) in ids.zip(scores) {
                        out[i] = Some(Ok(s));
                    }
                }
                Err(e) => {
                    for i in pack.iter().flat_map(|g| g.members.iter().copied()) {
                        out[i] = Some(Err(e.clone()));
                    }
                }
            }
        }
        out.into_iter().map(|r| r.unwrap_or_else(|| Err(missing()))).collect()
    }

    /// One forward pass over the groups' prefixes, one over all their suffixes.
    fn run_pack(&self, prompts: &[Vec<u32>], pack: &[Group]) -> Result<Vec<YesNo>, ModelError> {
        let per_group = pack.iter().map(|g| g.members.len()).max().unwrap_or(1);
        let prefixes: Vec<Vec<u32>> = pack.iter().map(|g| prompts[g.members[0]][..g.prefix].to_vec()).collect();
        let (_, cache) = self.model.prefill(&prefixes)?;
        let mut conts = Vec::with_capacity(pack.len() * per_group);
        let mut at = Vec::new();
        let mut lens = Vec::new();
        for g in pack {
            for slot in 0..per_group {
                match g.members.get(slot) {
                    Some(&i) => {
                        let suffix = prompts[i][g.prefix..].to_vec();
                        at.push((conts.len(), suffix.len() - 1));
                        lens.push(prompts[i].len());
                        conts.push(suffix);
                    }
                    None => conts.push(Vec::new()),
                }
            }
        }
        let hidden = self.model.extend(&cache, &conts, per_group)?;
        let lp = self.model.next_token_logprobs(&hidden, &at)?;
        self.classes(&lp, &lens)
    }
}

fn missing() -> ModelError {
    ModelError::Run("internal: no score for this prompt".into())
}

/// Run `f`, turning a panic inside the tensor library into an error.
fn guard<T>(f: impl FnOnce() -> Result<T, ModelError>) -> Result<T, ModelError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(ModelError::Run(format!("the model failed: {what}")))
        }
    }
}

fn logsumexp(xs: &[f32]) -> f64 {
    let m = xs.iter().map(|&x| x as f64).fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY || m.is_nan() {
        return m;
    }
    m + xs.iter().map(|&x| (x as f64 - m).exp()).sum::<f64>().ln()
}

/// Prompts that share a prefix: `members` (indices into the prompt list), each longer than
/// `prefix` tokens, all agreeing on their first `prefix` tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub prefix: usize,
    pub members: Vec<usize>,
    /// The longest suffix.
    pub max_suffix: usize,
}

fn lcp(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Cut `live` prompts (non-empty) into groups that share prefixes: sorted by their tokens,
/// then split into runs of at most `max_group` neighbours so that the padded work —
/// for each group its prefix plus its member count times its longest suffix — is least
/// (dynamic programming over the sorted order).
pub fn group_prompts(prompts: &[Vec<u32>], live: &[usize], max_group: usize) -> Vec<Group> {
    let mut order = live.to_vec();
    order.sort_by(|&a, &b| prompts[a].cmp(&prompts[b]).then(a.cmp(&b)));
    let n = order.len();
    let max_group = max_group.max(1);
    let adj: Vec<usize> = order.windows(2).map(|w| lcp(&prompts[w[0]], &prompts[w[1]])).collect();
    // best[i]: least work for the first i sorted prompts, and where its last group starts.
    let mut best = vec![(0usize, 0usize); n + 1];
    for i in 1..=n {
        best[i] = (usize::MAX, 0);
        let (mut shared, mut min_len, mut max_len) = (usize::MAX, usize::MAX, 0usize);
        for j in (i.saturating_sub(max_group)..i).rev() {
            let len = prompts[order[j]].len();
            min_len = min_len.min(len);
            max_len = max_len.max(len);
            if j + 1 < i {
                shared = shared.min(adj[j]);
            }
            let prefix = shared.min(min_len - 1);
            let cost = prefix + (i - j) * (max_len - prefix);
            let total = best[j].0.saturating_add(cost);
            if total < best[i].0 {
                best[i] = (total, j);
            }
        }
    }
    let mut groups = Vec::new();
    let mut i = n;
    while i > 0 {
        let j = best[i].1;
        let members: Vec<usize> = order[j..i].to_vec();
        let min_len = members.iter().map(|&m| prompts[m].len()).min().unwrap_or(1);
        let shared = (j..i - 1).map(|k| adj[k]).min().unwrap_or(usize::MAX);
        let prefix = shared.min(min_len - 1);
        let max_suffix = members.iter().map(|&m| prompts[m].len() - prefix).max().unwrap_or(1);
        groups.push(Group { prefix, members, max_suffix });
        i = j;
    }
    groups.reverse();
    groups
}

/// Pack groups into forward passes: by prefix length, as many per pass as keep both the padded
/// prefix batch and the padded suffix batch within `budget` tokens.
pub fn pack_groups(groups: &[Group], budget: usize) -> Vec<Vec<Group>> {
    let mut sorted = groups.to_vec();
    sorted.sort_by_key(|g| (g.prefix, g.max_suffix));
    let mut packs: Vec<Vec<Group>> = Vec::new();
    let mut cur: Vec<Group> = Vec::new();
    let (mut pmax, mut smax, mut nmax) = (0, 0, 0);
    for g in sorted {
        let (p, s, n) = (pmax.max(g.prefix), smax.max(g.max_suffix), nmax.max(g.members.len()));
        let count = cur.len() + 1;
        if !cur.is_empty() && (count * p > budget || count * n * s > budget) {
            packs.push(std::mem::take(&mut cur));
            (pmax, smax, nmax) = (g.prefix, g.max_suffix, g.members.len());
        } else {
            (pmax, smax, nmax) = (p, s, n);
        }
        cur.push(g);
    }
    if !cur.is_empty() {
        packs.push(cur);
    }
    packs
}

/// An identity for a model directory, cheap to compute: SHA-256 over `config.json`,
/// `tokenizer.json`, `tokenizer_config.json`, `chat_template.jinja` (those present), and for
/// each weight file its name, its size and 64 evenly spaced 4 KiB samples of its bytes
/// (safetensors headers included). Part of every local request, so the judge cache never
/// answers for another model.
pub fn fingerprint(dir: &Path) -> Result<String, ModelError> {
    let mut h = Sha256::new();
    h.update(b"rubric-local-model-v1\0");
    for name in ["config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"] {
        let p = dir.join(name);
        match std::fs::read(&p) {
            Ok(bytes) => {
                h.update(name.as_bytes());
                h.update((bytes.len() as u64).to_le_bytes());
                h.update(&bytes);
            }
            Err(e) if name == "config.json" || name == "tokenizer.json" => return Err(load_err(&p, e)),
            Err(_) => {}
        }
    }
    for f in weight_files(dir)? {
        let mut file = std::fs::File::open(&f).map_err(|e| load_err(&f, e))?;
        let size = file.metadata().map_err(|e| load_err(&f, e))?.len();
        h.update(f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default().as_bytes());
        h.update(size.to_le_bytes());
        const SAMPLES: u64 = 64;
        const CHUNK: usize = 4096;
        let mut buf = vec![0u8; CHUNK];
        for k in 0..SAMPLES {
            let at = (size.saturating_sub(CHUNK as u64)) * k / (SAMPLES - 1);
            file.seek(SeekFrom::Start(at)).map_err(|e| load_err(&f, e))?;
            let mut got = 0;
            while got < CHUNK {
                match file.read(&mut buf[got..]) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) => return Err(load_err(&f, e)),
                }
            }
            h.update(&buf[..got]);
        }
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("sha256:{hex}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_follow_shared_prefixes() {
        // Two "responses" of three criteria each, and a stray prompt.
        let a = |c: u32| vec![1, 2, 3, 4, 5, 6, 7, 8, 90 + c, 99];
        let b = |c: u32| vec![1, 2, 30, 40, 50, 60, 70, 80, 90 + c, 99];
        let prompts = vec![a(1), b(2), a(2), b(1), a(3), b(3), vec![7, 7]];
        let live: Vec<usize> = (0..prompts.len()).collect();
        let groups = group_prompts(&prompts, &live, 64);
        let mut members: Vec<Vec<usize>> = groups.iter().map(|g| g.members.clone()).collect();
        members.iter_mut().for_each(|m| m.sort());
        assert_eq!(members, vec![vec![0, 2, 4], vec![1, 3, 5], vec![6]]);
        assert_eq!(groups[1].prefix, 8);
        assert_eq!(groups[1].max_suffix, 2);
        assert_eq!(groups[2].prefix, 1, "a lone prompt leaves one token to run as its suffix");
        // Group size is bounded.
        let groups = group_prompts(&prompts, &live, 2);
        assert!(groups.iter().all(|g| g.members.len() <= 2));
        assert_eq!(groups.iter().map(|g| g.members.len()).sum::<usize>(), 7);
        // Packing keeps every group, within the budget where it can.
        let packs = pack_groups(&group_prompts(&prompts, &live, 64), 20);
        assert_eq!(packs.iter().map(Vec::len).sum::<usize>(), 3);
        assert!(packs.len() >= 2);
    }

    #[test]
    fn p_yes_is_a_stable_ratio() {
        assert!((p_yes((0.3f64).ln(), (0.1f64).ln()) - 0.75).abs() < 1e-12);
        assert_eq!(p_yes(-1000.0, -2000.0), 1.0);
        assert!((logsumexp(&[(0.25f32).ln(), (0.5f32).ln()]) - (0.75f64).ln()).abs() < 1e-6);
    }
}
