"""Score a JSONL dataset with a rubric on Ray Data (docs/rl.md, "Scale-out on Ray").

    python ray_score.py RUBRIC INPUT.jsonl OUTPUT.jsonl [--workers 2] [--cpus-per-worker 1]
        [--judges judges.toml --cache /local/disk/judge-cache.sqlite] [--groups FIELD]

`ray.data.read_json` reads the rows; `map_batches` hands batches of them to a pool of actors
(`Scorer`), each of which loads the rubric once, with its judges when given, and scores a batch
in one call of the bindings (in parallel on the worker's threads, the GIL released). With
`--groups`, rows are grouped by their group id first (`groupby(...).map_groups`), so that every
group is scored whole, as `rubric run --groups` scores it. The driver streams the records into
OUTPUT, one JSON object per line.

Each record is the one `rubric run` writes for that row, except `row`: the rows reach the
workers in blocks, not in file order, so a row's position means nothing here and is left out;
key records by the rows' `id` field. A record travels from the worker as JSON text, so that
Arrow does not reshape it (it would give every criterion object the fields of all the others,
as nulls).

Judges: every worker opens the same SQLite cache file (`--cache`), so a request answered by one
worker is not paid for again by another worker or a later run. SQLite shares a file between the
processes of one machine only: on a cluster of several nodes give `--cache` a path on each
node's local disk (never a network file system); each node then keeps its own cache.

Runs on the Ray instance `ray.init()` finds (`RAY_ADDRESS`), or starts a local one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional

import ray

import rubric


class Scorer:
    """One Ray actor: the rubric loaded once (with its judge dispatcher and cache), then every
    batch scored with it."""

    def __init__(
        self,
        rubric_path: str,
        engine: Optional[str] = None,
        judges: Optional[str] = None,
        cache: Optional[str] = None,
        groups: Optional[str] = None,
        threads: Optional[int] = None,
    ):
        if threads:
            # rayon sizes its pool from this when the first batch is scored: one worker's
            # threads should match the CPUs Ray gave it, not every core of the node
            os.environ["RAYON_NUM_THREADS"] = str(threads)
        self.rubric = rubric.load(rubric_path, engine=engine, judges=judges, cache=cache)
        self.groups = groups

    def __call__(self, batch) -> Dict[str, List[Any]]:
        rows = batch.to_pylist()  # a pyarrow.Table: one dict per row
        records = self.rubric.score(rows, groups=self.groups)
        for rec in records:
            rec.pop("row", None)
        return {
            "score": [rec.get("score") for rec in records],
            "record": [json.dumps(rec, ensure_ascii=False) for rec in records],
        }


def score_dataset(
    rubric_path: str,
    input_path: str,
    *,
    engine: Optional[str] = None,
    judges: Optional[str] = None,
    cache: Optional[str] = None,
    groups: Optional[str] = None,
    workers: int = 2,
    cpus_per_worker: float = 1.0,
    batch_size: int = 256,
):
    """The Ray dataset of scored records (columns `score` and `record`, the record as JSON text)."""
    ds = ray.data.read_json(input_path)
    scorer_args = dict(
        rubric_path=os.path.abspath(rubric_path) if "\n" not in rubric_path else rubric_path,
        engine=engine,
        judges=None if judges is None else os.path.abspath(judges),
        cache=None if cache is None else os.path.abspath(cache),
        groups=groups,
        threads=max(1, int(cpus_per_worker)),
    )
    pool = ray.data.ActorPoolStrategy(size=workers)
    if groups is None:
        return ds.map_batches(
            Scorer,
            fn_constructor_kwargs=scorer_args,
            batch_size=batch_size,
            batch_format="pyarrow",
            compute=pool,
            num_cpus=cpus_per_worker,
        )
    # A group must reach one call whole: one call per group.
    return ds.groupby(groups).map_groups(
        Scorer,
        fn_constructor_kwargs=scorer_args,
        batch_format="pyarrow",
        compute=pool,
        num_cpus=cpus_per_worker,
    )


def write_records(ds, output_path: str) -> int:
    """Stream the records into `output_path` (JSON lines); returns how many."""
    n = 0
    with open(output_path, "w", encoding="utf-8") as out:
        for row in ds.iter_rows():
            out.write(row["record"] + "\n")
            n += 1
    return n


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Score a JSONL dataset with a rubric on Ray Data.")
    p.add_argument("rubric", help="a .rubric source or a .rbk bundle")
    p.add_argument("input", help="JSONL rows (a file or a directory of them)")
    p.add_argument("output", help="the records, one JSON object per line")
    p.add_argument("--engine", choices=["interp", "wasm", "jit"], help="default: wasm for a bundle, interp for a source")
    p.add_argument("--judges", help="judges.toml: call judges for judged criteria without a verdict")
    p.add_argument("--cache", help="the judge cache shared by every worker (a path on local disk)")
    p.add_argument("--groups", metavar="FIELD", help="score groups of rows with this group id together")
    p.add_argument("--workers", type=int, default=2, help="scoring actors (default 2)")
    p.add_argument("--cpus-per-worker", type=float, default=1.0, help="CPUs Ray reserves for each (default 1)")
    p.add_argument("--batch-size", type=int, default=256, help="rows per call (default 256)")
    args = p.parse_args(argv)
    if not ray.is_initialized():
        ray.init()
    ds = score_dataset(
        args.rubric,
        args.input,
        engine=args.engine,
        judges=args.judges,
        cache=args.cache,
        groups=args.groups,
        workers=args.workers,
        cpus_per_worker=args.cpus_per_worker,
        batch_size=args.batch_size,
    )
    n = write_records(ds, args.output)
    print(f"ray_score: {n} records in {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
