#!/usr/bin/env bash
# Every benchmark, one after the other, from one command; the report goes to stdout and to
# target/bench-report.txt. Each part measures its own baseline in the same run:
#   1. `rubric bench`: interpreter vs Wasm vs JIT on the IFEval example and on the synthetic
#      100-criterion rubric (bench/synthetic.py): cold start, rows/s on one thread and on all
#      cores, ratios to the interpreter, agreement on every row;
#   2. bench/engines.sh: the same engines end to end (`rubric run`) on every example, and on the
#      expression-heavy case bench/expr;
#   3. bench/scale.sh: 10k, 100k and 1M rows, throughput and peak RSS per engine, cold start;
#   4. bench/ifeval.sh: `rubric run` on IFEval vs the Python reference implementation;
#   5. bench/judges.sh: judge dispatch vs the ideal and vs Autorubric on the mock judge;
#   6. bench/serve.sh: the reward server under 16 concurrent clients (needs `hey`);
#   7. bench/numeric.sh: the batch numeric stage (`rubric bench-numeric`, 1M rows × 50 criteria,
#      scalar vs tensor on the CPU, and CUDA with RUBRIC_DEVICE=cuda) and `rubric run --groups
#      --numeric scalar|tensor` end to end.
#   8. bench/local_judge.sh: a local judge on a Qwen3-0.6B-shaped random model, shared prefixes
#      vs each prompt alone vs transformers (not in the default parts: it installs torch into
#      target/bench-venv and takes 10-20 minutes on 2 cores; PARTS=8 runs it).
#   9. bench/sandbox.sh: hostile rows against the sandbox's row limits (wall time and peak memory
#      of each next to the limit it hit).
#  10. bench/cost.sh: what 2,000 judged criterion checks cost all-strong, several per call, with
#      the prefix cache, through the Batch API and as a cascade, with agreement.
# bench/python.sh (the Python binding vs the IFEval reference) needs the package built first
# (`bash python/build.sh --release`) and runs on its own.
#
#   bash bench/all.sh            # about 20 minutes on 2 cores
#   PARTS="1 3" bash bench/all.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PARTS=${PARTS:-"1 2 3 4 5 6 7 9 10"}
REPORT=target/bench-report.txt
mkdir -p target
cargo build --release -q
RUBRIC=target/release/rubric
{
  echo "# rubric benchmarks, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  for part in $PARTS; do
    case $part in
      1)
        echo; echo "## 1. engines on bound rows (rubric bench)"
        mkdir -p target/bench-synthetic
        [ -f target/bench-synthetic/rows.jsonl ] || python3 bench/synthetic.py target/bench-synthetic 100 5000
        "$RUBRIC" bench examples/ifeval/main.rubric --input examples/ifeval/inputs.jsonl --rows 20000 --runs 3
        "$RUBRIC" bench target/bench-synthetic/main.rubric --input target/bench-synthetic/rows.jsonl --rows 5000 --runs 3
        ;;
      2) echo; echo "## 2. engines end to end (bench/engines.sh)"; RUBRIC_BIN=$RUBRIC bash bench/engines.sh ;;
      3) echo; echo "## 3. scaling (bench/scale.sh)"; bash bench/scale.sh ;;
      4) echo; echo "## 4. IFEval vs the Python reference (bench/ifeval.sh)"; bash bench/ifeval.sh ;;
      5) echo; echo "## 5. judge dispatch (bench/judges.sh)"; bash bench/judges.sh ;;
      6) echo; echo "## 6. the reward server (bench/serve.sh)"; RUBRIC=$RUBRIC bash bench/serve.sh ;;
      7) echo; echo "## 7. the batch numeric stage (bench/numeric.sh)"; RUBRIC=$RUBRIC bash bench/numeric.sh ;;
      8) echo; echo "## 8. local judges (bench/local_judge.sh)"; RUBRIC_BIN=$RUBRIC bash bench/local_judge.sh --rows 2 ;;
      9) echo; echo "## 9. the sandbox's limits (bench/sandbox.sh)"; RUBRIC=$RUBRIC bash bench/sandbox.sh ;;
      10) echo; echo "## 10. judge cost (bench/cost.sh)"; bash bench/cost.sh ;;
    esac
  done
} 2>&1 | tee "$REPORT"
