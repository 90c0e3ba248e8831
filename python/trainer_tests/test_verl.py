"""verl 0.9.1's own reward code scores a batch through `rubric.verl_compute_score`: the reward
managers of `verl.workers.reward_manager` (NaiveRewardManager, one call per sample;
BatchRewardManager, one call per batch) on a real `DataProto` of token tensors, and the reward
loop its PPO trainer runs (`verl.experimental.reward_loop`), which loads the function from a
file named by `reward.custom_reward_function.path`, in process (RewardLoopWorker) and on Ray
actors (RewardLoopManager). Each reward tensor holds, at every response's last token, the reward
`rubric run --groups` gives the same row, and 0 elsewhere; an unscored row gets the
`unscored=` value (NaN by default)."""

import math

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.workers.reward_manager import BatchRewardManager, NaiveRewardManager

import rubric
from support import rubric_run
from trainer_support import KEYWORDS, MANNERS, rewards_of

# (prompt, response, keywords): the response's words are decoded by verl from token ids; the
# third row's empty checklist leaves it unscored; the fourth is over six words (penalty 0.1)
SAMPLES = [
    ("name the sun", "please name the sun", ["sun"]),
    ("name the cat", "cat", ["cat", "dog"]),
    ("say a word", "yes please thanks", []),
    ("name the rain", "please rain hello thanks wait ok no yes", ["rain"]),
    ("name the dog", "no", ["dog"]),
    ("say a word", "hello skip", []),
]
PROMPT_LEN, RESPONSE_LEN = 6, 12


def make_batch(tokenizer, samples=SAMPLES):
    """A DataProto as verl's rollout leaves it: prompts left-padded, responses (ending with EOS)
    right-padded, one attention mask over both; the data source, the ground truth under
    `reward_model` and the prompt's text in `extra_info`, as verl's datasets carry them. Returns
    it and each response's length in tokens."""
    n, pad = len(samples), tokenizer.pad_token_id
    prompts = torch.full((n, PROMPT_LEN), pad)
    responses = torch.full((n, RESPONSE_LEN), pad)
    mask = torch.zeros((n, PROMPT_LEN + RESPONSE_LEN), dtype=torch.long)
    lengths = []
    for i, (prompt, response, _) in enumerate(samples):
        p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        r = tokenizer(response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        prompts[i, PROMPT_LEN - len(p) :] = torch.tensor(p)
        mask[i, PROMPT_LEN - len(p) : PROMPT_LEN] = 1
        responses[i, : len(r)] = torch.tensor(r)
        mask[i, PROMPT_LEN : PROMPT_LEN + len(r)] = 1
        lengths.append(len(r))
    data = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses,
            "input_ids": torch.cat([prompts, responses], dim=1),
            "attention_mask": mask,
        },
        non_tensors={
            "data_source": np.array(["rubric-test"] * n, dtype=object),
            "reward_model": np.array([{"ground_truth": kw, "style": "rule"} for _, _, kw in samples], dtype=object),
            "extra_info": np.array([{"prompt": p, "index": i} for i, (p, _, _) in enumerate(samples)], dtype=object),
        },
    )
    return data, lengths


def expected_rewards(rubric_bin, tmp_path, file, *args, samples=SAMPLES, name="verl"):
    rows = [{"group": f"g{i}", "prompt": p, "response": r, "keywords": kw} for i, (p, r, kw) in enumerate(samples)]
    return rewards_of(rubric_run(rubric_bin, tmp_path, file, rows, "--groups", "group", *args, name=name))


def reward_tensor(rewards, lengths, unscored):
    """What a reward manager should return: each reward at its response's last token."""
    want = torch.zeros((len(rewards), RESPONSE_LEN), dtype=torch.float32)
    for i, (r, n) in enumerate(zip(rewards, lengths)):
        want[i, n - 1] = unscored if r is None else r
    return want


def assert_same(got, want):
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def test_naive_and_batch_reward_managers(rubric_bin, tiny_lm, tmp_path):
    _, tokenizer = tiny_lm
    want = expected_rewards(rubric_bin, tmp_path, KEYWORDS)
    assert want.count(None) == 2 and all(w is not None for i, w in enumerate(want) if i not in (2, 5))
    r = rubric.load(KEYWORDS)

    # one call per sample, NaN for the unscored rows (the default of `unscored=`)
    data, lengths = make_batch(tokenizer)
    naive = NaiveRewardManager(
        tokenizer=tokenizer, num_examine=0, compute_score=rubric.verl_compute_score(r, ground_truth="keywords")
    )
    got = naive(data, return_dict=True)["reward_tensor"]
    assert_same(got, reward_tensor(want, lengths, math.nan))
    assert torch.isnan(got[2]).any() and torch.isnan(got[5]).any()

    # one call for the batch, 0.0 for the unscored rows
    data, lengths = make_batch(tokenizer)
    batch = BatchRewardManager(
        tokenizer=tokenizer,
        num_examine=0,
        compute_score=rubric.verl_compute_score(r, ground_truth="keywords", unscored=0.0),
    )
    got = batch(data)
    assert_same(got, reward_tensor(want, lengths, 0.0))
    # BatchRewardManager also keeps each sample's reward as `acc`
    assert data.batch["acc"].tolist() == pytest.approx([0.0 if w is None else w for w in want], abs=1e-7)


def test_batch_reward_manager_with_a_judged_rubric(rubric_bin, mock_judge, tiny_lm, tmp_path):
    _, tokenizer = tiny_lm
    want = expected_rewards(rubric_bin, tmp_path, MANNERS, "--judges", mock_judge.judges, "--no-cache")
    assert None in want  # "hello skip": the judge refuses to grade `warm`
    calls_before = mock_judge.requests()
    r = rubric.load(MANNERS, judges=mock_judge.judges, cache=False)
    data, lengths = make_batch(tokenizer)
    manager = BatchRewardManager(
        tokenizer=tokenizer, num_examine=0, compute_score=rubric.verl_compute_score(r, unscored=0.0)
    )
    assert_same(manager(data), reward_tensor(want, lengths, 0.0))
    assert mock_judge.requests() > calls_before  # the batch went to the judge, not a cache


def reward_loop_config(tmp_path, model_dir, num_workers):
    """The `reward` section of verl's PPO config (as in its trainer/config/reward/*.yaml) with
    the rubric's compute_score in a file, as a user writes it (docs/trainers.md)."""
    reward_file = tmp_path / "rubric_reward.py"
    reward_file.write_text(
        "import rubric\n"
        f"rubric_ = rubric.load({str(KEYWORDS)!r})\n"
        "compute_score = rubric.verl_compute_score(rubric_, ground_truth='keywords', unscored=0.0)\n"
    )
    return OmegaConf.create(
        {
            "actor_rollout_ref": {"model": {"path": str(model_dir), "tokenizer_path": None}},
            "reward": {
                "num_workers": num_workers,
                "custom_reward_function": {"path": str(reward_file), "name": "compute_score", "reward_kwargs": {}},
                "reward_manager": {
                    "source": "register",
                    "name": "naive",
                    "module": {"path": None, "name": "custom_reward_manager"},
                },
                "reward_model": {"enable": False, "enable_resource_pool": False},
                "sandbox_fusion": None,
            },
        }
    )


def test_reward_loop_worker_loads_compute_score_from_its_file(rubric_bin, tiny_lm, tmp_path):
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.experimental.reward_loop.reward_manager import NaiveRewardManager as LoopNaiveRewardManager

    model_dir, tokenizer = tiny_lm
    want = expected_rewards(rubric_bin, tmp_path, KEYWORDS)
    # the worker loads the tokenizer from the model's directory, the function from the file
    worker = RewardLoopWorker(reward_loop_config(tmp_path, model_dir, num_workers=1))
    assert isinstance(worker.reward_manager, LoopNaiveRewardManager)
    data, lengths = make_batch(tokenizer)
    # its manager awaits on the event loop it took when made
    outputs = worker.reward_manager.loop.run_until_complete(worker.compute_score_batch(data))
    scores = [o["reward_score"] for o in outputs]
    assert scores == pytest.approx([0.0 if w is None else w for w in want], abs=0)
    assert_same(LoopNaiveRewardManager.assemble_rm_scores(data, scores), reward_tensor(want, lengths, 0.0))


@pytest.mark.timeout(300, method="thread")
def test_reward_loop_manager_on_ray_actors(rubric_bin, tiny_lm, tmp_path):
    import ray
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager

    model_dir, tokenizer = tiny_lm
    want = expected_rewards(rubric_bin, tmp_path, KEYWORDS)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        # two reward workers (Ray actors), each loading the file; the batch is split between them
        manager = RewardLoopManager(reward_loop_config(tmp_path, model_dir, num_workers=2))
        data, lengths = make_batch(tokenizer)
        out = manager.compute_rm_score(data)
    finally:
        ray.shutdown()
    assert_same(out.batch["rm_scores"], reward_tensor(want, lengths, 0.0))
    assert out.non_tensor_batch["acc"].tolist() == pytest.approx([0.0 if w is None else w for w in want], abs=0)
