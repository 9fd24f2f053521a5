"""Run every analysis of the paper on the simulated panel and the corpus; writes OUT/index.md.

The same as ``bpc analyses [options]``; usage:
python analyses/run_all.py [SOURCE ...] --out bpc-analyses [--seed N] [--quick] [--dask]
"""

import sys

from bpc.cli import main

if __name__ == "__main__":
    sys.exit(main(["analyses", *sys.argv[1:]]))
