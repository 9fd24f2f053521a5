"""Run the analysis 'regime_map' (see bpc.analyses.runner)."""

import sys

from bpc.analyses.runner import script_main

if __name__ == "__main__":
    sys.exit(script_main("regime_map"))
