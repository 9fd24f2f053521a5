"""Run the analysis 'delta_table': the same as `bpc analyses delta_table [options]`."""

import sys

from bpc.cli import main

if __name__ == "__main__":
    sys.exit(main(["analyses", "delta_table", *sys.argv[1:]]))
