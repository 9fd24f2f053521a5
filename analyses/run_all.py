"""Run every analysis of the paper on the simulated panel and the corpus; writes OUT/index.md.

Usage: python analyses/run_all.py --out bpc-analyses [--corpus PATH] [--seed N] [--quick] [--dask]
"""

import sys

from bpc.report.analyses import script_main

if __name__ == "__main__":
    sys.exit(script_main(None))
