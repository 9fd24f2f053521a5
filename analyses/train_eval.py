"""Run the analysis 'train_eval': the same as `bpc analyses train_eval [options]`."""

import sys

from bpc.cli import main

if __name__ == "__main__":
    sys.exit(main(["analyses", "train_eval", *sys.argv[1:]]))
