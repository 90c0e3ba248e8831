"""Writes the synthetic benchmark workload: a rubric with N deterministic criteria (word and
sentence counts, substring and case-insensitive checks, regexes, markdown structure, numbers,
JSON, arithmetic on counts; no judges) and ROWS JSONL rows of varied responses.

    python3 bench/synthetic.py OUT_DIR [CRITERIA=100] [ROWS=10000]

writes OUT_DIR/main.rubric and OUT_DIR/rows.jsonl. Deterministic: the same arguments give the
same files. Used by bench/scale.sh; not a test."""
import json
import os
import random
import sys

WORDS = ("alpha beta gamma delta echo foxtrot golf hotel india juliet kilo lima mike november "
         "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def criterion(i: int) -> str:
    w = WORDS[i % len(WORDS)]
    k = 5 + (i * 7) % 60
    kinds = [
        f'check word_count(response) >= {k}',
        f'check contains_ci(response, "{w}")',
        f'check matches(response, "(?i)\\\\b{w}\\\\w*\\\\b")',
        f'check sentence_count(response) <= {3 + i % 9}',
        f'check count_occurrences(response, "{w[:3]}") >= {1 + i % 3}',
        f'check bullet_count(response) >= {i % 4}',
        f'check heading_count(response) <= {1 + i % 3}',
        f'check len(numbers(response)) >= {i % 3} and sum(numbers(response)) < {100 * (1 + i % 7)}',
        f'check letter_count(lower(response), "{w[0]}") >= {k // 5}',
        f'check word_count(response) / max(sentence_count(response), 1) <= {8 + i % 12}',
    ]
    return f'criterion c{i} "Synthetic check {i}" weight {1 + i % 3} {kinds[i % len(kinds)]}'


def response(rng: random.Random) -> str:
    parts = []
    if rng.random() < 0.3:
        parts.append("# " + " ".join(rng.choices(WORDS, k=3)).title())
    for _ in range(rng.randint(1, 6)):
        words = rng.choices(WORDS, k=rng.randint(4, 18))
        if rng.random() < 0.4:
            words.insert(rng.randint(0, len(words)), str(rng.randint(0, 99)))
        parts.append(" ".join(words).capitalize() + ".")
    if rng.random() < 0.4:
        parts += ["* " + " ".join(rng.choices(WORDS, k=4)) for _ in range(rng.randint(1, 4))]
    return "\n".join(parts)


def main() -> None:
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    rows = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
    os.makedirs(out, exist_ok=True)
    lines = ["rubric bench.synthetic @ 1.0.0", "input response: Text"]
    lines += [criterion(i) for i in range(n)]
    lines.append("score = weighted_mean(all)")
    with open(os.path.join(out, "main.rubric"), "w") as f:
        f.write("\n".join(lines) + "\n")
    rng = random.Random(7)
    # A pool of distinct responses, cycled: generating a million in Python would dominate.
    pool = [json.dumps({"response": response(rng)}) for _ in range(min(rows, 5000))]
    with open(os.path.join(out, "rows.jsonl"), "w") as f:
        for i in range(rows):
            f.write(pool[i % len(pool)] + "\n")


if __name__ == "__main__":
    main()
