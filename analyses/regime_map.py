"""Run the analysis 'regime_map': the same as `bpc analyses regime_map [options]`."""

import sys

from bpc.cli import main

if __name__ == "__main__":
    sys.exit(main(["analyses", "regime_map", *sys.argv[1:]]))
