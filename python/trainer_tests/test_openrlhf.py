"""OpenRLHF 0.11.2's remote reward client (`--reward.remote_url`, which its messages still call
`--remote_rm_url`: `SingleTurnAgentExecutor._fetch_rewards_via_http`, which its single-turn
agent awaits after each generation with that one sample) against `rubric serve`'s
`POST /v1/openrlhf`: the queries are made as OpenRLHF makes them (the prompt's and the
response's tokens decoded together, special tokens kept), and the rewards it reads back are
those `rubric run --groups` gives the rows the endpoint builds — the prompt, the query less the
prompt as the response (the whole query when it does not start with the prompt), the query, the
label, and a JSON-object label's fields — with an unscored row's reward 0.0 and
`extra_logs.unscored` 1.0."""

import asyncio
import json
import subprocess
import urllib.request

import pytest
from openrlhf.utils.agent import SingleTurnAgentExecutor

from support import rubric_run
from trainer_support import KEYWORDS, MANNERS, rewards_of

pytestmark = pytest.mark.timeout(120, method="thread")

# (prompt, response, label)
KEYWORD_SAMPLES = [
    ("name the sun", "please name the sun", {"keywords": ["sun"]}),
    ("name the cat", "cat", {"keywords": ["cat", "dog"]}),
    ("say a word", "yes please thanks", {"keywords": []}),  # an empty checklist: unscored
    ("name the rain", "please rain hello thanks wait ok no yes", {"keywords": ["rain"]}),
    ("name the dog", "no", {"keywords": ["dog"]}),
    ("say a word", "hello skip", {"keywords": []}),
]
MANNER_SAMPLES = [
    ("say a word", "please hello", "a label"),
    ("say a word", "hello skip", "a label"),  # the judge refuses to grade `warm`: unscored
    ("say a word", "no", "a label"),
    # its query does not start with the prompt's text (decoding gives "<unk> a word <unk>")
    ("Say a word!", "please", "a label"),
]


class Serve:
    """A running `rubric serve FILES... --addr 127.0.0.1:0`; `base_url` is the address it prints."""

    def __init__(self, rubric_bin, files, *args):
        self.proc = subprocess.Popen(
            [rubric_bin, "serve", *map(str, files), "--addr", "127.0.0.1:0", *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            self.stop()
            raise RuntimeError(f"rubric serve did not print its address: {self.base_url!r}")

    def metrics(self):
        with urllib.request.urlopen(self.base_url + "/metrics", timeout=10) as resp:
            return json.loads(resp.read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def queries_of(tokenizer, samples):
    """Each sample's query as OpenRLHF's single-turn agent makes it: the prompt tokenized without
    special tokens, the response's tokens (ending with EOS) after it, decoded together keeping
    special tokens."""
    queries = []
    for prompt, response, _ in samples:
        ids = tokenizer(text=prompt, add_special_tokens=False)["input_ids"]
        ids = ids + tokenizer(response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        queries.append(tokenizer.decode(ids, skip_special_tokens=False))
    return queries


def endpoint_rows(queries, prompts, labels):
    """The rows `POST /v1/openrlhf` scores (its contract), one per query."""
    rows = []
    for i, (query, prompt, label) in enumerate(zip(queries, prompts, labels)):
        row = {"group": f"g{i}", "prompt": prompt, "query": query, "label": label}
        row["response"] = query.removeprefix(prompt)  # the whole query when it does not start with it
        if isinstance(label, dict):
            row.update(label)
        rows.append(row)
    return rows


def fetch(server, url, queries, prompts, labels, per_sample=False):
    """OpenRLHF's client call: the responses of its reward servers, in order. `per_sample`: as its
    single-turn agent asks, one request per sample (a query, its prompt, its label) after that
    sample's generation, many at once, rotating over the URLs; else one call with every query,
    which the client splits between the URLs."""
    executor = SingleTurnAgentExecutor(remote_rm_url=url)

    async def ask():
        if not per_sample:
            return await executor._fetch_rewards_via_http(queries, prompts, labels)
        calls = [executor._fetch_rewards_via_http([q], [p], [lab]) for q, p, lab in zip(queries, prompts, labels)]
        return [resp for answer in await asyncio.gather(*calls) for resp in answer]

    try:
        return asyncio.run(ask())
    except RuntimeError as e:
        statuses = server.metrics().get("requests_by_status")
        pytest.fail(
            f"OpenRLHF's client got no rewards from {url} ({e}); the server answered {statuses}: "
            "does this `rubric serve` have POST /v1/openrlhf?"
        )


def check(responses, records, n):
    want = rewards_of(records)
    rewards = [x for resp in responses for x in resp["rewards"]]
    scores = [x for resp in responses for x in resp["scores"]]
    unscored = [x for resp in responses for x in resp["extra_logs"]["unscored"]]
    assert len(rewards) == len(scores) == len(unscored) == n
    assert rewards == [0.0 if w is None else pytest.approx(w, rel=1e-12, abs=1e-12) for w in want]
    assert unscored == [1.0 if w is None else 0.0 for w in want]
    assert all(isinstance(s, (int, float)) for s in scores)
    return want


def test_remote_reward_url_scores_queries_as_rubric_run(rubric_bin, tiny_lm, tmp_path):
    _, tokenizer = tiny_lm
    prompts = [p for p, _, _ in KEYWORD_SAMPLES]
    labels = [label for _, _, label in KEYWORD_SAMPLES]
    queries = queries_of(tokenizer, KEYWORD_SAMPLES)
    assert all(q.startswith(p) and q.endswith("<eos>") for q, p in zip(queries, prompts))
    records = rubric_run(rubric_bin, tmp_path, KEYWORDS, endpoint_rows(queries, prompts, labels), "--groups", "group")
    server = Serve(rubric_bin, [KEYWORDS])
    try:
        url = server.base_url + "/v1/openrlhf"
        # as OpenRLHF's agent asks: a request per sample
        want = check(fetch(server, url, queries, prompts, labels, per_sample=True), records, len(queries))
        assert want.count(None) == 2
        # a batch in one request
        check(fetch(server, url, queries, prompts, labels), records, len(queries))
        # two reward servers (here the same one twice): the batch split between them
        check(fetch(server, [url, url], queries, prompts, labels), records, len(queries))
    finally:
        server.stop()


def test_remote_reward_url_names_the_rubric_and_its_judges_answer(rubric_bin, mock_judge, tiny_lm, tmp_path):
    _, tokenizer = tiny_lm
    prompts = [p for p, _, _ in MANNER_SAMPLES]
    labels = [label for _, _, label in MANNER_SAMPLES]
    queries = queries_of(tokenizer, MANNER_SAMPLES)
    assert not queries[-1].startswith(prompts[-1])
    rows = endpoint_rows(queries, prompts, labels)
    records = rubric_run(
        rubric_bin, tmp_path, MANNERS, rows, "--groups", "group", "--judges", mock_judge.judges, "--no-cache"
    )
    # two rubrics served: the query parameter picks one
    server = Serve(rubric_bin, [KEYWORDS, MANNERS], "--judges", mock_judge.judges, "--no-cache")
    try:
        url = server.base_url + "/v1/openrlhf?rubric=trainers.manners"
        want = check(fetch(server, url, queries, prompts, labels, per_sample=True), records, len(queries))
        assert None in want
    finally:
        server.stop()
