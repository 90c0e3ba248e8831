"""TRL's real `GRPOTrainer` (trl 1.16) trains a tiny random model on the CPU for two steps with
rubric reward functions — a deterministic rubric and a judged one (through `rubric mock-judge`),
synchronous (`rubric.trl_reward_fn`) and asynchronous (`rubric.trl_async_reward_fn`) — and the
rewards TRL logs for each completion (its completions table, `log_completions`) and their means
(`rewards/NAME/mean`) are those of `rubric run --groups` on the same completions. A row the
rubric leaves unscored reaches TRL as None: NaN in its table, left out of the logged mean."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from datasets import Dataset
from transformers import LlamaForCausalLM
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import is_async_callable

import rubric
from support import rubric_run
from trainer_support import KEYWORDS, MANNERS, rewards_of

STEPS = 2
NUM_GENERATIONS = 4
# two prompts per step, four completions each; the second prompt's empty checklist leaves every
# one of its completions unscored by the keywords rubric
DATASET = [
    {"prompt": "name the sun", "keywords": ["sun"]},
    {"prompt": "say a word", "keywords": []},
]
KEYWORDS_OF = {row["prompt"]: row["keywords"] for row in DATASET}


def train(tiny_lm, out_dir, reward_funcs):
    model_dir, tokenizer = tiny_lm
    args = GRPOConfig(
        output_dir=str(out_dir),
        per_device_train_batch_size=len(DATASET) * NUM_GENERATIONS,
        num_generations=NUM_GENERATIONS,
        max_completion_length=8,
        max_steps=STEPS,
        learning_rate=1e-2,
        logging_steps=1,
        log_completions=True,  # the completions table: out_dir/completions/completions_0000N.parquet
        report_to="none",
        use_cpu=True,
        bf16=False,
        fp16=False,
        save_strategy="no",
        seed=0,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=str(model_dir),
        processing_class=tokenizer,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=Dataset.from_list(DATASET),
    )
    trainer.train()
    return trainer


def check_trained(trainer, tiny_lm):
    """Two optimiser steps ran, each logged its loss, gradients flowed and the weights moved."""
    assert trainer.state.global_step == STEPS
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert [h["step"] for h in logs] == list(range(1, STEPS + 1)), trainer.state.log_history
    assert all(math.isfinite(h["loss"]) and h["grad_norm"] > 0 for h in logs), logs
    before = LlamaForCausalLM.from_pretrained(str(tiny_lm[0])).state_dict()
    after = trainer.model.state_dict()
    assert any(not torch.equal(before[k], after[k].cpu()) for k in before), "no weight changed in training"
    return logs


def check_rewards(logs, rubric_bin, tmp_path, specs):
    """For every step: the rewards TRL logged per completion and per function equal `rubric run
    --groups` on the same completions (`specs`: reward function name → rubric file and extra
    `rubric run` arguments), and the logged mean is the mean over the scored ones. Returns how
    many rewards of each function were None (NaN in TRL's table)."""
    unscored = {name: 0 for name in specs}
    for step, log in zip(range(1, STEPS + 1), logs):
        table = pd.read_parquet(tmp_path / "out" / "completions" / f"completions_{step:05d}.parquet")
        assert len(table) == len(DATASET) * NUM_GENERATIONS and set(table["step"]) == {step}
        rows = [
            {"group": f"{step}/{p}", "prompt": p, "response": c, "keywords": KEYWORDS_OF[p]}
            for p, c in zip(table["prompt"], table["completion"])
        ]
        for name, (file, args) in specs.items():
            records = rubric_run(rubric_bin, tmp_path, file, rows, "--groups", "group", *args, name=f"{name}-{step}")
            want = rewards_of(records)
            got = table[name].tolist()
            for row, w, g in zip(rows, want, got):
                if w is None:
                    assert math.isnan(g), f"{name}: {row} is unscored, TRL logged {g}"
                    unscored[name] += 1
                else:
                    # TRL keeps rewards as float32
                    assert g == float(np.float32(w)), f"{name}: {row}: rubric run {w}, TRL {g}"
            scored = [w for w in want if w is not None]
            logged = log[f"rewards/{name}/mean"]
            if scored:
                assert logged == pytest.approx(sum(scored) / len(scored), rel=1e-6, abs=1e-7), (name, step, want)
            else:
                assert logged is None or math.isnan(logged), (name, step, logged)
        # a completion no function could score carries no learning signal: TRL zeroes its advantage
        for i in range(len(table)):
            if all(math.isnan(table[name][i]) for name in specs):
                assert table["advantage"][i] == 0.0
    return unscored


def test_grpo_trains_with_sync_rubric_rewards(rubric_bin, mock_judge, tiny_lm, tmp_path):
    keywords = rubric.trl_reward_fn(rubric.load(KEYWORDS), name="keywords")
    manners = rubric.trl_reward_fn(rubric.load(MANNERS, judges=mock_judge.judges, cache=False), name="manners")
    trainer = train(tiny_lm, tmp_path / "out", [keywords, manners])
    logs = check_trained(trainer, tiny_lm)
    unscored = check_rewards(
        logs,
        rubric_bin,
        tmp_path,
        {"keywords": (KEYWORDS, []), "manners": (MANNERS, ["--judges", mock_judge.judges, "--no-cache"])},
    )
    # every step had completions of the empty checklist: None reached TRL
    assert unscored["keywords"] == STEPS * NUM_GENERATIONS
    assert mock_judge.requests() > 0


def test_grpo_awaits_async_rubric_rewards(rubric_bin, mock_judge, tiny_lm, tmp_path):
    keywords = rubric.trl_async_reward_fn(rubric.load(KEYWORDS), name="keywords_async")
    manners = rubric.trl_async_reward_fn(
        rubric.load(MANNERS, judges=mock_judge.judges, cache=False), name="manners_async"
    )
    # TRL's own test: these are awaited together on its event loop, not called
    assert is_async_callable(keywords) and is_async_callable(manners)
    trainer = train(tiny_lm, tmp_path / "out", [keywords, manners])
    logs = check_trained(trainer, tiny_lm)
    unscored = check_rewards(
        logs,
        rubric_bin,
        tmp_path,
        {
            "keywords_async": (KEYWORDS, []),
            "manners_async": (MANNERS, ["--judges", mock_judge.judges, "--no-cache"]),
        },
    )
    assert unscored["keywords_async"] == STEPS * NUM_GENERATIONS
    assert mock_judge.requests() > 0
