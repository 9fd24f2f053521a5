"""Run the analysis 'cver_sweeps' (see bpc.analyses.runner)."""

import sys

from bpc.analyses.runner import script_main

if __name__ == "__main__":
    sys.exit(script_main("cver_sweeps"))
