"""The Python reference for bench/ifeval.sh: IFEval's own checks, strict and loose, on prepared rows.

  python3 bench/ifeval_reference.py ROWS.jsonl OUT.jsonl

ROWS.jsonl holds the rows examples/ifeval/README.md prepares (`id`, `prompt`, `response`,
`instructions`: [{"id": ..., kwargs...}]). The checks are IFEval's reference implementation as
lm-eval ships it (`lm_eval/tasks/ifeval`: instructions.py, instructions_registry.py,
instructions_util.py and the strict/loose drivers of utils.py), installed from PyPI with
`pip install --no-deps lm-eval` plus its real dependencies (langdetect, nltk, immutabledict,
packaging). The module is loaded without `lm_eval/__init__.py`, which would pull in the whole
harness. NLTK needs the Punkt `punkt_tab` English model in $NLTK_DATA (bench/ifeval_punkt.py).

langdetect is seeded with 0 (`DetectorFactory.seed = 0`), as std.ifeval is, so that both
implementations decide the same; seeding does not change its speed. Two verdicts stay random:
for a `keywords:letter_frequency` letter outside a-z (`#`, key 1122; `!`, key 1129) the
reference checks a letter drawn from Python's unseeded `random` instead, anew for each mode, so
one run may differ from std.ifeval on either (tests/ifeval_divergences.tsv lists 1122, where the
published results differ too).

Writes one line per row (`id`, `strict`, `loose`: the follow_instruction_list of each mode) and
prints the rows, the seconds spent scoring (imports excluded) and rows per second.
"""

import importlib.util
import json
import os
import sys
import time
import types


def load_ifeval():
    spec = importlib.util.find_spec("lm_eval")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("lm_eval is not installed: pip install --no-deps lm-eval")
    base = os.path.join(list(spec.submodule_search_locations)[0], "tasks", "ifeval")
    # Bare package objects stand in for lm_eval and lm_eval.tasks so their __init__ never runs.
    for name, path in [("lm_eval", os.path.dirname(os.path.dirname(base))), ("lm_eval.tasks", os.path.dirname(base)), ("lm_eval.tasks.ifeval", base)]:
        pkg = types.ModuleType(name)
        pkg.__path__ = [path]
        sys.modules[name] = pkg
    mods = {}
    for name in ["instructions_util", "instructions", "instructions_registry", "utils"]:
        full = "lm_eval.tasks.ifeval." + name
        s = importlib.util.spec_from_file_location(full, os.path.join(base, name + ".py"))
        mod = importlib.util.module_from_spec(s)
        sys.modules[full] = mod
        s.loader.exec_module(mod)
        mods[name] = mod
    return mods["utils"]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    utils = load_ifeval()
    import langdetect

    langdetect.DetectorFactory.seed = 0
    rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
    start = time.perf_counter()
    out = []
    for row in rows:
        ids = [i["id"] for i in row["instructions"]]
        kwargs = [{k: v for k, v in i.items() if k != "id"} for i in row["instructions"]]
        inp = utils.InputExample(key=row["id"], instruction_id_list=ids, prompt=row["prompt"], kwargs=kwargs)
        strict = utils.test_instruction_following_strict(inp, row["response"])
        loose = utils.test_instruction_following_loose(inp, row["response"])
        out.append({"id": row["id"], "strict": strict.follow_instruction_list, "loose": loose.follow_instruction_list})
    elapsed = time.perf_counter() - start
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        for o in out:
            f.write(json.dumps(o) + "\n")
    print(f"python reference: {len(rows)} rows scored (strict + loose) in {elapsed:.3f} s, imports excluded: {len(rows) / elapsed:.0f} rows/s")


if __name__ == "__main__":
    main()
