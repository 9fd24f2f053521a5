"""``python -m bpc`` runs the CLI."""

import sys

from bpc.cli import main

sys.exit(main())
