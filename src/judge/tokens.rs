//! Prompt token counts, for `rubric plan` and for budgets. A model whose family is known (the
//! OpenAI chat models: `cl100k_base`, `o200k_base`, `o200k_harmony`, through tiktoken-rs's
//! model table) is counted with its real tokenizer and the chat framing the provider adds
//! (3 tokens per message and 3 priming the reply, as OpenAI's cookbook counts them); any other
//! model is *estimated* at 4 bytes per token and labelled so.
//!
//! A budget needs a bound, not a count: [`prompt_bound`] is the real count plus the reply
//! schema's tokens and a margin where the family is known, and otherwise one token per byte
//! (no subword tokenizer makes a token of less than one byte), plus the framing.
//!
//! Images are not counted: a count is of the text parts alone (what an image costs depends on
//! the provider's resizing and tiling rules, which differ by model). A bound adds
//! [`IMAGE_TOKENS_BOUND`] per image, the most any OpenAI chat model charges for one.

use super::prompt::Message;

/// A prompt's token count and how it was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    pub tokens: u64,
    /// The tokenizer that counted it (`o200k_base`...), or `None` for an estimate.
    pub tokenizer: Option<&'static str>,
}

impl Count {
    pub fn exact(&self) -> bool {
        self.tokenizer.is_some()
    }
}

/// The most prompt tokens one image costs on an OpenAI chat model: high detail, scaled to fit
/// 2048×2048 and then to 768 on its short side, at most 2×4 tiles of 512 px; gpt-4o-mini
/// charges 2833 + 5667 per tile (gpt-4o 85 + 170 per tile; the patch-based models at most
/// 1536 patches × 1.72).
pub const IMAGE_TOKENS_BOUND: u64 = 2833 + 5667 * 8;

/// Tokens the chat format adds per message, and once to prime the reply.
const PER_MESSAGE: u64 = 3;
const REPLY_PRIMING: u64 = 3;

fn bpe(model: &str) -> Option<(&'static tiktoken_rs::CoreBPE, &'static str)> {
    use tiktoken_rs::tokenizer::{get_tokenizer, Tokenizer};
    let tokenizer = get_tokenizer(model)?;
    let name = match tokenizer {
        Tokenizer::O200kHarmony => "o200k_harmony",
        Tokenizer::O200kBase => "o200k_base",
        Tokenizer::Cl100kBase => "cl100k_base",
        // Completion-era encodings: not chat models, so not counted as chat.
        _ => return None,
    };
    tiktoken_rs::bpe_for_tokenizer(tokenizer).ok().map(|b| (b, name))
}

/// The estimate for a model of unknown family: the messages' contents joined by newlines, at
/// 4 bytes per token.
pub fn estimate(messages: &[Message]) -> u64 {
    let bytes: usize = messages.iter().map(|m| m.content.len()).sum::<usize>() + messages.len().saturating_sub(1);
    bytes as u64 / 4 + 1
}

/// The prompt tokens `messages` cost when sent to `model`.
pub fn count_prompt(model: &str, messages: &[Message]) -> Count {
    match bpe(model) {
        Some((bpe, name)) => {
            let mut n = REPLY_PRIMING;
            for m in messages {
                n += PER_MESSAGE
                    + bpe.count_with_special_tokens(&m.role) as u64
                    + bpe.count_with_special_tokens(&m.content) as u64;
            }
            Count { tokens: n, tokenizer: Some(name) }
        }
        None => Count { tokens: estimate(messages), tokenizer: None },
    }
}

/// An upper bound on the prompt tokens of `messages` with reply schema `schema` (structured
/// output counts its schema as prompt) when sent to `model`.
pub fn prompt_bound(model: &str, messages: &[Message], schema: &str) -> u64 {
    let framing = REPLY_PRIMING + PER_MESSAGE * messages.len() as u64;
    let images: u64 = messages.iter().map(|m| m.images.len() as u64).sum::<u64>() * IMAGE_TOKENS_BOUND;
    images
        + match bpe(model) {
            Some((bpe, _)) => {
                // The provider's own framing of a schema may differ a little from its text.
                count_prompt(model, messages).tokens + bpe.count_with_special_tokens(schema) as u64 + 64
            }
            None => {
                let bytes: usize = messages.iter().map(|m| m.content.len() + m.role.len()).sum();
                bytes as u64 + schema.len() as u64 + framing
            }
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(content: &str) -> Message {
        Message::text("user", content)
    }

    #[test]
    fn known_families_are_counted_with_their_tokenizer() {
        // OpenAI's cookbook: "tiktoken is great!" is 6 tokens in cl100k_base; tiktoken's own
        // test: "hello world" is [15339, 1917]. With the chat framing: 3 per message, the role
        // ("user", one token), 3 priming the reply.
        let c = count_prompt("gpt-4", &[user("tiktoken is great!")]);
        assert_eq!(c, Count { tokens: 3 + 1 + 6 + 3, tokenizer: Some("cl100k_base") });
        assert_eq!(count_prompt("gpt-3.5-turbo", &[user("hello world")]).tokens, 3 + 1 + 2 + 3);
        assert_eq!(count_prompt("gpt-4o-mini", &[user("hello world")]).tokenizer, Some("o200k_base"));
        assert_eq!(count_prompt("gpt-4.1-mini", &[user("x")]).tokenizer, Some("o200k_base"));
    }

    #[test]
    fn other_models_are_estimated_and_bounded_by_bytes() {
        let ms = [Message::text("system", "be brief"), user(&"word ".repeat(100))];
        let c = count_prompt("Qwen/Qwen2.5-7B-Instruct", &ms);
        assert_eq!(c.tokenizer, None);
        assert_eq!(c.tokens, (8 + 1 + 500) / 4 + 1);
        let bound = prompt_bound("Qwen/Qwen2.5-7B-Instruct", &ms, "{}");
        assert!(bound >= 8 + 500, "{bound}");
        // A real count is never above its bound.
        let real = count_prompt("gpt-4o", &ms).tokens;
        assert!(prompt_bound("gpt-4o", &ms, "{}") >= real);
        assert!(real < 200, "{real}");
    }

    #[test]
    fn images_are_not_counted_but_are_bounded() {
        let mut m = user("look");
        let plain = count_prompt("gpt-4o", std::slice::from_ref(&m));
        m.images.push(crate::judge::prompt::ImagePart { at: 4, url: "data:image/png;base64,AAAA".into() });
        assert_eq!(count_prompt("gpt-4o", std::slice::from_ref(&m)), plain);
        let without = prompt_bound("gpt-4o", &[user("look")], "{}");
        assert_eq!(prompt_bound("gpt-4o", &[m], "{}"), without + IMAGE_TOKENS_BOUND);
    }
}
