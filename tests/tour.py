"""The README tour's `bpc solve` state (prior, three critics, kernel, costs): one home for the tests."""

TOUR_ARGS: list[str] = (
    "--prior 0.3 --critic syn:0.99:0.97:1 --critic test:0.95:0.2:2 --critic llm:0.7:0.4:5 "
    "--p-fix 0.15 --p-break 0.05 --c-gen 10 --c-ver 90 --reward 100"
).split()
"""Every option of the tour's state, without the subcommand."""
