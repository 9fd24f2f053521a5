"""Decision kernels, batched over a leading axis of parameter samples (import them from their modules).

Pure numpy throughout; the one grid DP kernel is compiled by numba (default)
or run by the interpreter, with identical numbers. Every solver takes the one
validated :class:`~bpc.decide.kernels.belief.Problem`
(:func:`~bpc.decide.kernels.belief.make_problem`, κ included); the paper's
solvers are the κ = ∞ cases named by option sets (:data:`PAPER_TABLE`,
:data:`PAPER_TREE`, :data:`PAPER_GREEDY`).

Action index convention everywhere: ``0 = stop``, ``1 = verify``,
``2 = regenerate``, ``3 + k`` = critic ``k`` (``k`` indexes the critic axis of
``tpr`` / ``fpr``). Ties between actions go to the lowest index.

- :mod:`bpc.decide.kernels.options` — the planning conventions, one :class:`KernelOptions`.
- :mod:`bpc.decide.kernels.belief` — Bayes update, repair kernel, the validated problem.
- :mod:`bpc.decide.kernels.greedy` — the one-step rule (the paper's ``bayesian_greedy``: its κ = ∞ case).
- :mod:`bpc.decide.kernels.dp` — the one grid DP (the paper's ``bayesian_dp`` table is its κ = ∞ case).
- :mod:`bpc.decide.kernels.instance` — the θ-belief, the one exact tree (the paper's tree: its κ = ∞ case).
"""
