"""Run the analysis 'uncertainty_score': the same as `bpc analyses uncertainty_score [options]`."""

import sys

from bpc.cli import main

if __name__ == "__main__":
    sys.exit(main(["analyses", "uncertainty_score", *sys.argv[1:]]))
