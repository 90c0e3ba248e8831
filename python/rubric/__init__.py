"""rubric: score rows with a rubric from Python, and use it as an RL reward.

The native module (``rubric._rubric``, Rust with PyO3) loads a rubric and scores rows with the
same code as ``rubric run``, in parallel and with the GIL released; this layer turns rows
(dicts) into JSON lines and records back into dicts, and adapts a rubric to the reward-function
signatures of TRL's ``GRPOTrainer`` and verl. See docs/rl.md, section "Python".

    import rubric
    r = rubric.load("examples/ifeval/main.rubric")
    records = r.score([{"prompt": "...", "response": "...", "instructions": [...]}])

    # judged criteria through the judges of `rubric run --judges`, sharing a cache file
    r = rubric.load("examples/healthbench/main.rubric", judges="judges.toml", cache="judge-cache.sqlite")
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from typing import Any, Callable, Iterable, List, Mapping, Optional, Sequence, Union

from ._rubric import NativeRubric, __version__
from ._rubric import configure_exec as _configure_exec
from ._rubric import exec_stats as _exec_stats

__all__ = [
    "Rubric",
    "RowError",
    "load",
    "configure_exec",
    "exec_stats",
    "trl_reward_fn",
    "trl_async_reward_fn",
    "verl_compute_score",
    "__version__",
]


class RowError(ValueError):
    """A row the rubric could not score (its error record: ``code`` and ``message``)."""

    def __init__(self, index: int, code: str, message: str):
        super().__init__(f"row {index}: {code}: {message}")
        self.index = index
        self.code = code
        self.message = message


def _line(row: Any) -> str:
    # `default` lets NumPy scalars and arrays through; anything else unknown becomes its text
    return json.dumps(row, ensure_ascii=False, default=_jsonable)


def _jsonable(value: Any) -> Any:
    for attr in ("tolist", "item"):
        f = getattr(value, attr, None)
        if callable(f):
            return f()
    return str(value)


class Rubric:
    """A loaded rubric (from :func:`load`) and the engine it runs on."""

    def __init__(self, native: NativeRubric):
        self._native = native

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def version(self) -> str:
        return self._native.version

    @property
    def ir_hash(self) -> str:
        return self._native.ir_hash

    @property
    def bundle(self) -> Optional[str]:
        """The bundle's hash when loaded from a ``.rbk`` bundle, else ``None``."""
        return self._native.bundle

    @property
    def engine(self) -> str:
        return self._native.engine

    @property
    def reward_unscored(self) -> str:
        """The rubric's ``reward { unscored ... }`` rule: ``exclude``, ``zero`` or ``flag_group``."""
        return self._native.reward_unscored

    def __repr__(self) -> str:
        return f"<rubric.Rubric {self.name} @ {self.version} ({self.engine}, ir {self.ir_hash[:12]})>"

    @property
    def has_judges(self) -> bool:
        """Whether judged criteria are dispatched (``load(..., judges=...)`` or ``replay=...``)."""
        return self._native.has_judges

    def judge_stats(self) -> Optional[dict]:
        """The judge dispatcher's counters since :func:`load`: ``http_requests`` (calls over
        HTTP), ``cache_hits``, ``replayed``, ``deduplicated``, ``memo_hits``, tokens, planning
        (``criteria_dispatched``...), latency per endpoint; ``None`` without judges."""
        stats = self._native.judge_stats()
        return None if stats is None else json.loads(stats)

    def score(
        self,
        rows: Iterable[Any],
        groups: Union[str, bool, None] = None,
        verdicts: Optional[str] = None,
        token_offsets: Optional[Sequence[Any]] = None,
        timings: bool = False,
    ) -> List[dict]:
        """Score ``rows`` (dicts, one per row); return one record per row, exactly as ``rubric run``
        writes them (row index, id, identity, score, criteria...; an error record for a row that
        cannot be scored). ``groups``: the group-id field (``True``: ``"group"``), as
        ``rubric run --groups FIELD``: records come back in row order with reward, advantage,
        verdicts, strict flag and group statistics. ``verdicts``: a recorded-verdicts JSONL
        file, as ``rubric run --verdicts FILE``. Judged criteria without a verdict go to the
        judges given to :func:`load`.

        ``token_offsets`` (with ``groups``): a list parallel to ``rows``, each entry the
        character ``[start, end]`` of every token of the row's ``response`` (a list of pairs, or
        a NumPy integer array of shape ``(n_tokens, 2)``), or ``None`` for a row without; each
        becomes its row's ``token_offsets`` field, which rows may also carry themselves. Records
        then get ``token_credit`` and ``criterion_spans`` (docs/rl.md, "Token-level credit").

        ``timings``: each record gets its ``timing``, where the row's time went (``ms``,
        ``evaluate_ms``, ``judges_ms`` and per judged criterion), as ``rubric run --timings``."""
        field = "group" if groups is True else (groups or None)
        rows = list(rows)
        if token_offsets is not None:
            rows = _with_token_offsets(rows, token_offsets, field)
        lines = [_line(r) for r in rows]
        return [json.loads(rec) for rec in self._native.score_lines(lines, field, verdicts, timings)]

    def scores(self, rows: Iterable[Any]) -> List[Optional[float]]:
        """Each row's score: a float, or ``None`` when unscored or an error record."""
        return self._native.scores_lines([_line(r) for r in rows])

    def rewards(self, rows: Iterable[Any], unscored: Any = None) -> List[Any]:
        """Each row's reward: the score less the rubric's declared penalty (the score when it
        declares none). An unscored row gives 0.0 when the rubric says ``reward { unscored zero }``,
        else ``unscored`` (default ``None``). A row that cannot be scored raises :class:`RowError`."""
        zero = self.reward_unscored == "zero"
        out: List[Any] = []
        for i, rec in enumerate(self.score(rows)):
            err = rec.get("error")
            if err is not None:
                raise RowError(i, err.get("code", ""), err.get("message", ""))
            value = rec["reward"] if "reward" in rec else rec.get("score")
            if value is None:
                out.append(0.0 if zero else unscored)
            else:
                out.append(float(value))
        return out


def _with_token_offsets(rows: List[Any], token_offsets: Sequence[Any], field: Optional[str]) -> List[Any]:
    """``rows`` with ``token_offsets[i]`` as row ``i``'s ``token_offsets`` field."""
    if field is None:
        raise ValueError("token_offsets gives token credit, which needs groups= (the group field)")
    offsets = list(token_offsets)
    if len(offsets) != len(rows):
        raise ValueError(f"token_offsets has {len(offsets)} entries for {len(rows)} rows: give one per row (None for none)")
    out = []
    for i, (row, offs) in enumerate(zip(rows, offsets)):
        # a row that is not a dict is left alone: its error record says so
        if offs is not None and isinstance(row, Mapping):
            if "token_offsets" in row:
                raise ValueError(f"row {i} has a token_offsets field and token_offsets[{i}] is given too: give one")
            row = dict(row)
            # a NumPy array becomes nested lists of ints (`tolist`); pairs may be tuples
            row["token_offsets"] = offs.tolist() if callable(getattr(offs, "tolist", None)) else offs
        out.append(row)
    return out


def load(
    path_or_source: Union[str, "os.PathLike[str]"],
    engine: Optional[str] = None,
    *,
    judges: Union[str, "os.PathLike[str]", None] = None,
    replay: Union[str, "os.PathLike[str]", None] = None,
    cache: Union[str, "os.PathLike[str]", bool, None] = None,
    row_fuel: Optional[int] = None,
    row_timeout_ms: Optional[int] = None,
    row_memory_mb: Optional[int] = None,
    budget: Optional[float] = None,
    row_deadline_ms: Optional[int] = None,
) -> Rubric:
    """Load a rubric: rubric source text when the string holds a newline, else a path to a
    ``.rubric`` source or a verified ``.rbk`` bundle. ``engine``: ``"interp"``, ``"wasm"`` or
    ``"jit"`` (default: ``"wasm"`` for a bundle, the sandbox, ``"interp"`` for a source; naming
    another engine for a bundle says you trust it). Raises ``ValueError`` with the rendered
    diagnostics when it does not compile or verify.

    The Wasm engine's row limits, as ``rubric run`` takes them (``docs/sandbox.md``):
    ``row_fuel`` (``--row-fuel``, default 2,000,000,000), ``row_timeout_ms``
    (``--row-timeout-ms``, default 10,000) and ``row_memory_mb`` (``--row-memory-mb``, default
    512); a row over one is a ``rubric::trap::limit`` record.

    Judges, as ``rubric run`` takes them: ``judges``, a ``judges.toml`` (``--judges``) to call
    for judged criteria without a recorded verdict; ``replay``, a transcript to answer them
    from, offline (``--judge replay:FILE``); ``cache``, the SQLite judge cache (``--cache``):
    a path, ``None`` for the default (``$XDG_CACHE_HOME/rubric/judge-cache.sqlite``) or
    ``False`` for none (``--no-cache``). Processes on one machine may share a cache file.
    ``budget``: the most, in US dollars, the rubric's judge calls may cost while it is loaded
    (``--budget``; prices from ``judges.toml``); a call that could pass it is not sent and its
    criteria come back unscored with reason ``budget``.

    ``row_deadline_ms``: every scoring call (``score``, ``rewards``, the trainer adapters) is
    back within this many milliseconds: judge calls still unanswered then are given up, and a
    row that lost one is unscored with reason ``timeout`` (its reward ``None`` for TRL); the
    other rows are scored as without a deadline (docs/trainers.md, "Never block").
    Raises ``ValueError`` when a file is missing or malformed, or a key variable unset."""
    if cache is True:
        cache = None
    no_cache = cache is False
    return Rubric(
        NativeRubric(
            os.fspath(path_or_source),
            engine,
            None if judges is None else os.fspath(judges),
            None if replay is None else os.fspath(replay),
            None if cache is None or cache is False else os.fspath(cache),
            no_cache,
            row_fuel,
            row_timeout_ms,
            row_memory_mb,
            None if budget is None else float(budget),
            None if row_deadline_ms is None else int(row_deadline_ms),
        )
    )


def configure_exec(
    allow: bool = False,
    *,
    cache: Union[str, "os.PathLike[str]", bool, None] = None,
    record: Union[str, "os.PathLike[str]", None] = None,
    replay: Union[str, "os.PathLike[str]", None] = None,
    concurrency: int = 0,
    dir_root: Union[str, "os.PathLike[str]", None] = None,
) -> None:
    """How rubrics that call ``exec`` run programs in this process (``docs/exec.md``), as
    ``rubric run`` takes it: ``allow`` (``--allow-exec``) lets them run in the sandbox, else
    nothing is executed and ``exec`` is unscored (``exec_not_allowed``); ``cache``: the
    execution cache directory, ``None`` for the default (``$XDG_CACHE_HOME/rubric/exec``) or
    ``False`` for none; ``record`` and ``replay``: transcripts (``--exec-record``,
    ``--exec-replay``); ``concurrency``: sandboxes at once (0: the cores); ``dir_root``: the
    directory under which ``exec(..., dir: PATH)`` reads submission directories
    (``--exec-dir-root``; ``None``: a ``dir`` is unscored)."""
    no_cache = cache is False
    path = None if cache in (None, False, True) else os.fspath(cache)
    _configure_exec(
        bool(allow),
        path,
        no_cache,
        None if record is None else os.fspath(record),
        None if replay is None else os.fspath(replay),
        int(concurrency),
        None if dir_root is None else os.fspath(dir_root),
    )


def exec_stats() -> Optional[dict]:
    """What ``exec`` did in this process: ``executed`` (run in the sandbox), ``cache_hits``,
    ``replayed``, ``deduplicated``, ``failed``; ``None`` before :func:`configure_exec`."""
    s = _exec_stats()
    return None if s is None else json.loads(s)


def _as_rubric(r: Union[Rubric, str]) -> Rubric:
    return r if isinstance(r, Rubric) else load(r)


def _text(x: Any, role: Optional[str]) -> str:
    """A completion or prompt as text: a string as is; a list of chat messages as the content of
    its messages (``role``: only that role's), joined by newlines."""
    if isinstance(x, str):
        return x
    if isinstance(x, Mapping):
        return str(x.get("content", ""))
    parts = []
    for m in x:
        if isinstance(m, Mapping):
            if role is None or m.get("role", role) == role:
                c = m.get("content", "")
                parts.append(c if isinstance(c, str) else json.dumps(c, ensure_ascii=False))
        else:
            parts.append(str(m))
    return "\n".join(parts)


# keyword arguments TRL passes that are not dataset columns (`environments`: TRL 1.16's per-completion
# environment instances, passed when the trainer has environments)
_TRL_INTERNAL = {"completion_ids", "trainer_state", "log_extra", "log_metric", "completions_ids", "environments"}


def trl_reward_fn(
    rubric: Union[Rubric, str],
    *,
    prompt: Optional[str] = "prompt",
    response: str = "response",
    columns: Optional[Sequence[str]] = None,
    name: Optional[str] = None,
) -> Callable[..., List[Optional[float]]]:
    """A reward function for TRL's ``GRPOTrainer(reward_funcs=[...])``:
    ``reward_func(prompts, completions, **kwargs) -> list[float | None]``.

    Row ``i`` given to the rubric holds the dataset columns TRL passes as keyword arguments
    (``columns``: those named; default: every list-valued one), the completion's text under
    ``response`` and the prompt's text under ``prompt`` (``None``: not passed). A completion
    or prompt in conversational form (a list of ``{"role", "content"}`` messages) becomes the
    text of its messages: for a completion, the ``content`` of every message; for a prompt, of
    the ``user`` messages. The reward is :meth:`Rubric.rewards`: score less penalty; an unscored
    row gives ``None`` (TRL leaves it out of that reward function's contribution) unless the
    rubric says ``reward { unscored zero }``; a row the rubric cannot bind raises
    :class:`RowError`.
    """
    r = _as_rubric(rubric)

    def reward_func(prompts=None, completions=None, **kwargs) -> List[Optional[float]]:
        return r.rewards(_trl_rows(prompts, completions, kwargs, prompt, response, columns))

    return _trl_named(reward_func, r, name)


def verl_compute_score(
    rubric: Union[Rubric, str],
    *,
    response: str = "response",
    ground_truth: Optional[str] = "ground_truth",
    data_source: Optional[str] = "data_source",
    unscored: float = math.nan,
) -> Callable[..., Any]:
    """A custom reward function for verl (``custom_reward_function.path`` / ``.name``):
    ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float``.

    The rubric's row holds the ``extra_info`` dict's fields, then the response text under
    ``response``, the ground truth under ``ground_truth`` and the data source under
    ``data_source`` (``None``: not passed). The result is the row's reward (score less penalty);
    an unscored row gives ``unscored`` (default NaN: set it, e.g. ``0.0``, to make it a number)
    unless the rubric says ``reward { unscored zero }``. Called with lists (verl's batch reward
    manager: ``data_sources``, ``solution_strs``, ``ground_truths``, ``extra_infos``) it scores
    the batch in one parallel call and returns a list.
    """
    r = _as_rubric(rubric)

    def row_of(ds, sol, gt, extra) -> dict:
        row = dict(extra) if isinstance(extra, Mapping) else {}
        if data_source is not None:
            row[data_source] = ds
        if ground_truth is not None:
            row[ground_truth] = gt
        row[response] = sol
        return row

    def compute_score(
        data_source=None,
        solution_str=None,
        ground_truth=None,
        extra_info=None,
        data_sources=None,
        solution_strs=None,
        ground_truths=None,
        extra_infos=None,
        **kwargs,
    ):
        if solution_strs is not None:
            n = len(solution_strs)
            ds = data_sources if data_sources is not None else [None] * n
            gts = ground_truths if ground_truths is not None else [None] * n
            exs = extra_infos if extra_infos is not None else [None] * n
            rows = [row_of(ds[i], solution_strs[i], gts[i], exs[i]) for i in range(n)]
            return [float(x) for x in r.rewards(rows, unscored=unscored)]
        (value,) = r.rewards([row_of(data_source, solution_str, ground_truth, extra_info)], unscored=unscored)
        return float(value)

    return compute_score


def _trl_rows(
    prompts: Any,
    completions: Any,
    kwargs: Mapping[str, Any],
    prompt: Optional[str],
    response: str,
    columns: Optional[Sequence[str]],
) -> List[dict]:
    """The rubric's rows for one call of a TRL reward function (see :func:`trl_reward_fn`)."""
    completions = list(completions or [])
    n = len(completions)
    keys = columns if columns is not None else [k for k in kwargs if k not in _TRL_INTERNAL]
    rows = []
    for i in range(n):
        row = {}
        for k in keys:
            v = kwargs.get(k)
            if isinstance(v, (list, tuple)) and len(v) == n:
                row[k] = v[i]
        if prompt is not None and prompts is not None:
            row[prompt] = _text(prompts[i], "user")
        row[response] = _text(completions[i], None)
        rows.append(row)
    return rows


def _trl_named(func: Callable[..., Any], r: Rubric, name: Optional[str]) -> Callable[..., Any]:
    """``func`` named ``name``, else after the rubric (TRL logs each reward function's rewards
    under its name: ``rewards/NAME/mean``)."""
    func.__name__ = name or "rubric_" + "".join(c if c.isalnum() else "_" for c in r.name)
    func.__qualname__ = func.__name__
    return func


def trl_async_reward_fn(
    rubric: Union[Rubric, str],
    *,
    prompt: Optional[str] = "prompt",
    response: str = "response",
    columns: Optional[Sequence[str]] = None,
    name: Optional[str] = None,
) -> Callable[..., Any]:
    """:func:`trl_reward_fn` as a coroutine function, for TRL's asynchronous reward functions:
    ``async reward_func(prompts, completions, **kwargs) -> list[float | None]``.

    ``GRPOTrainer`` awaits its coroutine reward functions together on an event loop of its own
    (``asyncio.gather``), while it calls the others one after another. This one scores in a
    worker thread (``asyncio.to_thread``; scoring releases the GIL), so the loop stays free for
    the other asynchronous reward functions while the rubric's judges answer. Same arguments,
    rows and rewards as :func:`trl_reward_fn`.
    """
    r = _as_rubric(rubric)

    async def reward_func(prompts=None, completions=None, **kwargs) -> List[Optional[float]]:
        rows = _trl_rows(prompts, completions, kwargs, prompt, response, columns)
        return await asyncio.to_thread(r.rewards, rows)

    return _trl_named(reward_func, r, name)
