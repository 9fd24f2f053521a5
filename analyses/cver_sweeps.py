"""Run the analysis 'cver_sweeps': the same as `bpc analyses cver_sweeps [options]`."""

import sys

from bpc.cli import main

if __name__ == "__main__":
    sys.exit(main(["analyses", "cver_sweeps", *sys.argv[1:]]))
