"""Run the analysis 'delta_table' (see bpc.report.analyses)."""

import sys

from bpc.report.analyses import script_main

if __name__ == "__main__":
    sys.exit(script_main("delta_table"))
