"""Subcommands of the ``bpc`` CLI, one module each (discovered by :mod:`bpc.cli`)."""
