"""The dependence strengths of the simulated panel, from a corpus (bpc.experiments.panel_strengths).

Usage: ``python analyses/panel_strengths.py ../shared/data/paper_corpus`` prints the constants
:mod:`bpc.data.simulate` embeds (``KAPPA``, ``DIFFICULTY_CORRELATION``, ``CRITIC_KAPPA``).
"""

import argparse
import sys

import pandas as pd

from bpc.data.corpus import load_corpus
from bpc.experiments.panel_strengths import panel_strengths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Dependence strengths of the simulated panel, from a corpus."
    )
    parser.add_argument("corpus", help="corpus folder (e.g. ../shared/data/paper_corpus)")
    args = parser.parse_args(argv)
    s = panel_strengths(load_corpus(args.corpus).records)
    with pd.option_context("display.width", 160, "display.max_rows", 100):
        print(s["pairs"].round(3).to_string(index=False))
        print(s["critics"].round(3).to_string(index=False))
    print(f"kappa = {s['kappa']:.4f}")
    print(f"difficulty_correlation = {s['difficulty_correlation']:.4f}")
    pairs = ", ".join(f"{c!r}: ({a:.4g}, {b:.4g})" for c, (a, b) in s["critic_kappa"].items())
    print("critic_kappa = {" + pairs + "}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
