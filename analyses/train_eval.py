"""Run the analysis 'train_eval' (see bpc.analyses.runner)."""

import sys

from bpc.analyses.runner import script_main

if __name__ == "__main__":
    sys.exit(script_main("train_eval"))
