#!/usr/bin/env python3
"""Hugging Face transformers on the prompts of `rubric model bench`.

Reads the report `rubric model bench --out FILE` wrote (the messages of every prompt, our token
ids and our scores), renders the same messages with transformers' chat template and tokenizer,
and scores each prompt the usual transformers way: batches of left-padded prompts (one
response's criteria per batch by default), one forward pass each, the log-softmax of the last
position's logits, and P(yes) / (P(yes) + P(no)) over the tokens that decode (trimmed,
lower-cased) to "yes" / "no". Prints and writes criteria per second, whether the token ids
agree with ours, and the largest difference between its scores and ours: an independent check
of the model code.
"""

import argparse
import json
import math
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="the model directory")
    ap.add_argument("--rubric-json", required=True, help="the report of `rubric model bench`")
    ap.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    ap.add_argument("--dtype", default=None, help="float32 or bfloat16 (default: float32 on cpu, bfloat16 on cuda)")
    ap.add_argument("--batch", type=int, default=0, help="prompts per forward pass (default: the criteria of a row)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads on the CPU (default: torch's choice)")
    ap.add_argument("--out", required=True, help="where to write the JSON report")
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    report = json.load(open(args.rubric_json))
    device = torch.device(args.device)
    dtype_name = args.dtype or ("float32" if device.type == "cpu" else "bfloat16")
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype_name]

    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(args.model)
    try:
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype)
    except TypeError:
        model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=dtype)
    model = model.to(device).eval()
    load_s = time.perf_counter() - t0

    vocab = min(model.config.vocab_size, len(tok))
    yes, no = [], []
    for i in range(vocab):
        word = tok.decode([i]).strip().lower()
        if word == "yes":
            yes.append(i)
        elif word == "no":
            no.append(i)
    yes_t = torch.tensor(yes, device=device)
    no_t = torch.tensor(no, device=device)

    ids = []
    for messages in report["messages"]:
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, enable_thinking=False)
        ids.append(tok(text, add_special_tokens=False)["input_ids"])
    same_tokens = sum(1 for a, b in zip(ids, report["token_ids"]) if a == b)
    ids_used = "transformers"
    if same_tokens != len(ids):
        # transformers picks a tokenizer class by model type (e.g. Qwen2Tokenizer), which may
        # not follow a tokenizer.json written for another vocabulary; the model check then runs
        # on rubric's token ids.
        print(f"note: transformers tokenizes {len(ids) - same_tokens} prompts differently ({type(tok).__name__}); "
              "scoring rubric's token ids", file=sys.stderr)
        ids = report["token_ids"]
        ids_used = "rubric"

    pad = tok.pad_token_id if tok.pad_token_id is not None else 0

    def score(batch):
        width = max(len(s) for s in batch)
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, seq in enumerate(batch):
            input_ids[r, width - len(seq):] = torch.tensor(seq)
            mask[r, width - len(seq):] = 1
        # Left padding: positions count real tokens only (a plain forward call does not derive
        # them from the mask).
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        input_ids, mask, positions = input_ids.to(device), mask.to(device), positions.to(device)
        with torch.inference_mode():
            try:
                out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, logits_to_keep=1)
            except TypeError:
                out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions)
            lp = torch.log_softmax(out.logits[:, -1, :].float(), dim=-1)
            ly = torch.logsumexp(lp.index_select(1, yes_t), dim=-1)
            ln = torch.logsumexp(lp.index_select(1, no_t), dim=-1)
            p = torch.sigmoid(ly - ln)
        return p.double().cpu().tolist()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    batch = args.batch or report["criteria"]
    score(ids[:1])  # warm-up, untimed
    sync()
    t1 = time.perf_counter()
    cpu1 = time.process_time()
    scores = []
    for i in range(0, len(ids), batch):
        scores.extend(score(ids[i:i + batch]))
    sync()
    secs = time.perf_counter() - t1
    cpu_secs = time.process_time() - cpu1

    n = len(ids)
    out = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "device": str(device),
        "dtype": dtype_name,
        "threads": torch.get_num_threads(),
        "load_s": load_s,
        "prompts": n,
        "batch": batch,
        "seconds": secs,
        "cpu_seconds": cpu_secs,
        "criteria_per_s": n / secs,
        "same_token_ids": same_tokens,
        "token_ids_used": ids_used,
        "yes_tokens": len(yes),
        "no_tokens": len(no),
        "scores": scores,
    }
    for mode in ("shared", "naive"):
        if mode in report:
            ours = report[mode]["scores"]
            out[f"max_abs_diff_vs_{mode}"] = max(abs(a - b) for a, b in zip(scores, ours))
    json.dump(out, open(args.out, "w"))
    print(
        f"transformers {transformers.__version__} on {device} ({dtype_name}): {n} criteria in {secs:.2f}s "
        f"({n / secs:.2f} criteria/s, {cpu_secs:.1f} CPU seconds); token ids equal ours for {same_tokens}/{n} prompts; "
        + ", ".join(f"max |hf - {m}| = {out[f'max_abs_diff_vs_{m}']:.2e}" for m in ("shared", "naive") if m in report),
        file=sys.stderr,
    )
    if not all(math.isfinite(s) for s in scores):
        print("error: transformers gave non-finite scores", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
