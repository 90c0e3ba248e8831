"""Drive Autorubric (PyPI `autorubric`) against `rubric mock-judge` on the judge benchmark's
workload: ITEMS responses x CRITERIA binary criteria, one LLM call per criterion verdict, at most
CONCURRENCY requests in flight. Prints one JSON line: wall seconds, verdicts, met count.
Used by bench/judges.sh; not a test."""
import asyncio
import json
import sys
import time

from autorubric import LLMConfig, Rubric
from autorubric.graders import CriterionGrader


async def main(base_url: str, items: int, criteria: int, concurrency: int) -> None:
    rubric = Rubric.from_dict(
        [{"weight": 1.0, "requirement": f"Criterion {c}: the reply mentions topic number {c}."} for c in range(criteria)]
    )
    grader = CriterionGrader(
        judge_model_config=LLMConfig(
            model="openai/mock-grader-1",
            api_base=base_url,
            api_key="not-a-key",
            temperature=0.0,
            max_parallel_requests=concurrency,
            cache_enabled=False,
            max_retries=2,
        )
    )
    responses = [f"Reply {i}: it mentions topics {i % criteria} and {(i * 7) % criteria}." for i in range(items)]
    start = time.perf_counter()
    reports = await asyncio.gather(*(rubric.grade(to_grade=r, grader=grader) for r in responses))
    wall = time.perf_counter() - start
    verdicts = 0
    met = 0
    for rep in reports:
        for c in rep.report or []:
            verdicts += 1
            met += str(getattr(c, "final_verdict", getattr(c, "verdict", ""))).upper().endswith("MET") and not str(
                getattr(c, "final_verdict", getattr(c, "verdict", ""))
            ).upper().endswith("UNMET")
    print(json.dumps({"wall_s": wall, "verdicts": verdicts, "met": met, "score_0": reports[0].score}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
