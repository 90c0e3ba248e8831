"""Helpers of the trainer tests: the test rubrics, and a tiny causal language model with its
tokenizer made on the spot (nothing is downloaded): a word-level vocabulary of a few words and a
randomly initialised one-layer Llama. The trainers generate with it on the CPU; its completions
are random strings of those words, which the test rubrics grade."""

from pathlib import Path

HERE = Path(__file__).resolve().parent
RUBRICS = HERE / "rubrics"
# deterministic: a row's `keywords` named, "please"; unscored when `keywords` is empty
KEYWORDS = RUBRICS / "keywords.rubric"
# judged through `rubric mock-judge` with MANNERS_RULES; unscored when the reply says "skip"
MANNERS = RUBRICS / "manners.rubric"
MANNERS_RULES = RUBRICS / "manners-mock-rules.toml"

# the words of the vocabulary; the rubrics look for some of them ("please", "thanks", "hello",
# "skip" and the keywords)
WORDS = "please thanks hello skip no yes wait ok sun rain cat dog red blue name the a say word".split()
SPECIAL = ["<pad>", "<unk>", "<bos>", "<eos>"]


def make_tokenizer():
    """A word-level fast tokenizer (whitespace pre-tokenizer; decoding joins tokens with spaces)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIAL + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", bos_token="<bos>", eos_token="<eos>"
    )


def make_tiny_lm(directory, seed=0):
    """Save the tokenizer and a randomly initialised tiny Llama (hidden size 32, one layer) into
    ``directory``, loadable with ``from_pretrained``; return the tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    directory = Path(directory)
    tokenizer = make_tokenizer()
    tokenizer.save_pretrained(directory)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(directory)
    return tokenizer


def rewards_of(records):
    """The reward of each `rubric run` record: its `reward` (score less penalty), ``None`` when
    unscored; fails on an error record (a row that did not bind is a broken test)."""
    out = []
    for rec in records:
        assert "error" not in rec, f"rubric run gave an error record: {rec['error']}"
        out.append(rec["reward"] if "reward" in rec else rec.get("score"))
    return out
