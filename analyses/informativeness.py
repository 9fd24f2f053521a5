"""Run the analysis 'informativeness': the same as `bpc analyses informativeness [options]`."""

import sys

from bpc.cli import main

if __name__ == "__main__":
    sys.exit(main(["analyses", "informativeness", *sys.argv[1:]]))
