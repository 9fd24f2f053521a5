"""Run a panel's independent pieces on a ``dask.distributed`` cluster, data scattered, not embedded.

A panel solve or replay is a map over independent pieces — cells, or blocks
of posterior draws — so it spreads over the workers of a cluster with no
change to the numbers. Two things make that work at scale:

- the parameters are **scattered** to the workers (:meth:`Client.scatter`)
  and the tasks refer to them by future, so the task graph stays a few
  kilobytes instead of carrying every array ("large graph" warnings, a
  scheduler that holds the whole panel);
- each task holds **one piece**, so a worker's memory is bounded by the
  piece, not the panel.

:func:`solve_panel` is the panel solve (:func:`bpc.decide.solve.solve_policy`
piece by piece); :func:`map_pieces` is the general map that
:func:`bpc.experiments.grid.utility_grid` (``bpc analyses --scheduler``)
uses. ``scheduler`` is a scheduler address (``tcp://10.0.0.5:8786``), a
``LocalCluster`` or a ``Client``; ``None`` runs everything in this process.
Results are identical to the single-process run (the pieces are computed by
the same functions on the same inputs and put back in order).

Examples
--------
>>> import numpy as np, xarray as xr
>>> from bpc.costs import Costs
>>> params = xr.Dataset(
...     {"prior": (("benchmark", "generator"), [[0.3], [0.6]]),
...      "tpr": (("benchmark", "generator", "critic"), [[[0.9]], [[0.8]]]),
...      "fpr": (("benchmark", "generator", "critic"), [[[0.2]], [[0.3]]]),
...      "gap": (("benchmark", "generator", "critic"), [[[0.7]], [[0.5]]]),
...      "p_fix": (("benchmark", "generator"), [[0.2], [0.1]]),
...      "p_break": (("benchmark", "generator"), [[0.05], [0.1]])},
...     coords={"benchmark": ["a", "b"], "generator": ["g"], "critic": ["test"]})
>>> costs = Costs(c_gen=10, c_ver=90, reward=100, critic={"test": 2.0})
>>> local = solve_panel(params, costs, critics=["test"])   # no scheduler: one process, piece by piece
>>> bool((local["value"] == solve_policy(params, costs, critics=["test"])["value"]).all())
True
"""

from __future__ import annotations

import contextlib
import functools
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import xarray as xr

from bpc.constants import DIM_BENCHMARK, DIM_DRAW
from bpc.costs import Costs
from bpc.decide.solve import solve_policy
from bpc.progress import interrupt_guard


@contextlib.contextmanager
def client_for(scheduler: Any) -> Iterator[Any]:
    """A ``dask.distributed.Client`` for ``scheduler`` (an address, a cluster or a client).

    A client passed in is used as is (and left open); one made here from an
    address or a cluster is closed at the end of the block.

    Raises
    ------
    ImportError
        If ``dask.distributed`` is not installed (the message says how to add it).
    ValueError
        If no scheduler answers at the address (one line, the address named).
    """
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("a scheduler address needs dask.distributed: pip install 'bpc[dask]'") from exc
    if isinstance(scheduler, Client):
        yield scheduler
        return
    try:
        client = Client(scheduler, set_as_default=False, timeout="20s")
    except OSError as exc:
        raise ValueError(f"--scheduler {scheduler}: no dask scheduler answers there ({exc})") from None
    try:
        yield client
    finally:
        client.close()


def dask_setup(worker: Any = None) -> None:
    """Worker preload of the local cluster (``bpc compare --scheduler local``): Ctrl-C is the parent's.

    A terminal's Ctrl-C reaches every process of its foreground group. The parent stops the run and
    closes the cluster (one line, exit 130); a worker that took the signal too printed a traceback of
    its own. The workers therefore ignore SIGINT (distributed calls this in each worker's main thread;
    ``scheduler="processes"`` in each process it starts).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def map_pieces(
    fn: Callable[..., Any],
    pieces: Sequence[Any],
    *,
    scheduler: Any = None,
    shared: Mapping[str, Any] | None = None,
    progress: Callable[[Sequence[Any]], Any] | None = None,
) -> list[Any]:
    """``[fn(piece, **shared) for piece in pieces]``, on local processes or a cluster when asked.

    Parameters
    ----------
    fn : callable
        A module-level function (workers import it by name).
    pieces : sequence
        One task each; scattered to the workers, so the graph holds futures only.
    scheduler : str, LocalCluster, Client or None
        Where to run: ``None`` here, in order; ``"processes"`` with dask on local processes (the
        ``dask`` extra); otherwise a ``dask.distributed`` scheduler address, cluster or client.
    shared : mapping, optional
        Keyword arguments every task needs (e.g. a posterior): scattered once
        to every worker (``broadcast=True``), passed by future.
    progress : callable, optional
        Wraps the local iteration (e.g. :func:`bpc.progress.track`).

    Returns
    -------
    list
        The results, in the order of ``pieces``.
    """
    shared = dict(shared or {})
    if scheduler is None:
        items = progress(pieces) if progress is not None else pieces
        return [fn(p, **shared) for p in items]
    if isinstance(scheduler, str) and scheduler == "processes":
        try:
            import dask
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("scheduler='processes' needs the dask extra: pip install 'bpc[dask]'") from exc

        tasks = [dask.delayed(functools.partial(fn, **shared))(p) for p in pieces]
        # workers ignore Ctrl-C: the parent stops the run and reports it once (no traceback per worker);
        # the guard turns a SIGINT the pool's wait loop swallowed into KeyboardInterrupt all the same
        with interrupt_guard():
            return list(dask.compute(*tasks, scheduler="processes", initializer=dask_setup))
    with client_for(scheduler) as client:
        # a list of one: scatter() would read a dict as {key: data} and a list as many pieces
        shared_futures = {k: client.scatter([v], broadcast=True)[0] for k, v in shared.items()}
        piece_futures = client.scatter(list(pieces))
        futures = client.map(fn, piece_futures, pure=False, **shared_futures)
        return client.gather(futures)


def split_pieces(params: xr.Dataset, *, dim: str | None = None, size: int | None = None) -> list[xr.Dataset]:
    """Cut a parameter Dataset into pieces along ``dim`` (default ``draw`` if present, else ``benchmark``).

    ``size`` is the length of a piece along ``dim`` (default: 250 draws, or
    one benchmark).
    """
    dim = dim or (DIM_DRAW if DIM_DRAW in params.dims else DIM_BENCHMARK)
    if dim not in params.dims:
        raise ValueError(
            f"split_pieces: the parameters have no {dim!r} dim (dims: {', '.join(map(str, params.dims))})"
        )
    n = params.sizes[dim]
    size = int(size) if size is not None else (250 if dim == DIM_DRAW else 1)
    if size < 1:
        raise ValueError(f"split_pieces: size must be >= 1, got {size}")
    return [params.isel({dim: slice(i, i + size)}) for i in range(0, n, size)]


def _solve_piece(piece: xr.Dataset, *, costs: Any, options: Mapping[str, Any]) -> xr.Dataset:
    return solve_policy(piece, costs, **options)


def solve_panel(
    params: xr.Dataset,
    costs: Costs | Callable[[str], Costs],
    *,
    scheduler: Any = None,
    dim: str | None = None,
    size: int | None = None,
    **options: Any,
) -> xr.Dataset:
    """:func:`bpc.decide.solve.solve_policy` of a whole panel, piece by piece, on a cluster if given.

    Parameters
    ----------
    params : xarray.Dataset
        Parameter schema (Laplace estimates or posterior draws), in memory.
    costs : Costs or callable
        As for ``solve_policy`` (a callable must be importable by the workers,
        e.g. :func:`bpc.costs.paper_costs_for`).
    scheduler : str, LocalCluster, Client or None
        A ``dask.distributed`` scheduler address (``"tcp://host:8786"``), a
        cluster or a client; ``None`` solves here.
    dim, size : optional
        How to cut the panel (:func:`split_pieces`): by default blocks of 250
        draws, or one benchmark per piece for point estimates.
    **options
        Passed to ``solve_policy`` (``horizon``, ``grid_size``, ``keep_q``,
        ``belief_model``, …).

    Returns
    -------
    xarray.Dataset
        Identical to ``solve_policy(params, costs, **options)``.
    """
    pieces = split_pieces(params, dim=dim, size=size)
    cut = dim or (DIM_DRAW if DIM_DRAW in params.dims else DIM_BENCHMARK)
    parts = map_pieces(
        _solve_piece, pieces, scheduler=scheduler, shared={"costs": costs, "options": dict(options)}
    )
    datasets: list[xr.Dataset] = list(parts)
    out: xr.Dataset = xr.concat(
        datasets, dim=cut, data_vars="minimal", coords="minimal", compat="override", join="override"
    )
    first = datasets[0]
    return out.assign({str(name): out[name].transpose(*first[name].dims) for name in out.data_vars})
