"""Run the analysis 'gap_table': the same as `bpc analyses gap_table [options]`."""

import sys

from bpc.cli import main

if __name__ == "__main__":
    sys.exit(main(["analyses", "gap_table", *sys.argv[1:]]))
