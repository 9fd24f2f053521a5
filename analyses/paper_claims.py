"""Run the analysis 'paper_claims': the same as `bpc analyses paper_claims [options]`."""

import sys

from bpc.cli import main

if __name__ == "__main__":
    sys.exit(main(["analyses", "paper_claims", *sys.argv[1:]]))
