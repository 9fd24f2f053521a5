"""Run the analysis 'prior_table': the same as `bpc analyses prior_table [options]`."""

import sys

from bpc.cli import main

if __name__ == "__main__":
    sys.exit(main(["analyses", "prior_table", *sys.argv[1:]]))
