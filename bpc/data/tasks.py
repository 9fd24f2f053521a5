"""What the per-task counts say about the tasks themselves: the task report.

Several generators attempt the same tasks of a benchmark. A task on which *no* patch of *any*
generator passes anything — no oracle pass, no public-test pass — is more likely a broken task
(a harness, a grader or an oracle that cannot pass) than a hard one, and a user would want to be
told rather than have a model learn it silently as "very hard". On LCB-medium 61 of its 90 tasks
are such tasks, for both of its generators.

:func:`never_passing_tasks` lists them, :func:`task_report` summarises them per benchmark,
:func:`shared_solutions` compares the sets of tasks the generators solve, and
:func:`empty_patches` counts patches that are empty (the generator produced no diff) and are
scored Y = 0, read from the raw files' ``diff_chars`` / ``note`` fields. :func:`task_choices`
turns them into the lines of a command's data-choices summary.

"Passes anything" is judged on the per-task counts (:data:`bpc.schema.TASK_COUNT_VARS`): the
oracle label and the verdicts of the critics that run the task's tests (:data:`TEST_CRITICS`).
A partial pass rate (``y_pass_rate``, ``l2_pass_rate`` in the LiveCodeBench files) is not read:
a task whose patches pass some but not all tests counts as passing nothing (on the corpus this
changes nothing on LCB-medium; on LCB-hard 1 of the 7 listed tasks has a patch passing part of
its tests).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bpc.constants import DIM_BENCHMARK, DIM_CRITIC, DIM_GENERATOR, DIM_TASK
from bpc.data.corpus import read_json_lines
from bpc.schema import has_task_counts

TEST_CRITICS: tuple[str, ...] = ("test",)
"""Critics that run the task's own (public) tests: a pass of one of them is a pass of something."""

FLAG = "possible harness or oracle failure"
"""How the task report flags tasks no generator passes anything on."""

MIN_GENERATORS_TO_FLAG = 2
"""A benchmark's never-passing tasks are flagged only when at least this many generators attempted
them: one generator failing a task three times is a hard task as often as a broken one (SWE-bench
Lite: 213 of 300 tasks for gpt5_mini alone)."""


def _require_tasks(counts: xr.Dataset, where: str) -> None:
    if not has_task_counts(counts):
        raise ValueError(f"{where}: counts carry no per-task counts (task_n, …); build them from raw records")


def _bgt(da: xr.DataArray) -> np.ndarray:
    """``da`` as a (benchmark, generator, task) array."""
    return da.transpose(DIM_BENCHMARK, DIM_GENERATOR, DIM_TASK).values


def _attempted(counts: xr.Dataset) -> np.ndarray:
    return np.nan_to_num(_bgt(counts["task_n"])) > 0


def never_passing_tasks(counts: xr.Dataset) -> pd.DataFrame:
    """The tasks on which no patch of any generator passes the oracle or a test-running critic.

    Parameters
    ----------
    counts : xarray.Dataset
        Counts with per-task counts.

    Returns
    -------
    pandas.DataFrame
        One row per such (benchmark, task): ``benchmark``, ``task``, ``n_generators`` (that
        attempted it), ``n_patches`` (their labelled patches), ``checked`` (what was checked:
        ``"oracle"`` or ``"oracle + test"``).

    Examples
    --------
    >>> from bpc.data.counts import counts_from_records
    >>> rec = pd.DataFrame({"benchmark": "b", "generator": ["g1", "g1", "g2", "g2"],
    ...                     "instance_id": ["t1", "t2", "t1", "t2"], "patch_id": 0, "Y": [0, 1, 0, 0],
    ...                     "test": pd.array([False, True, False, True], dtype="boolean")})
    >>> never_passing_tasks(counts_from_records(rec))[["benchmark", "task", "n_generators", "checked"]]
      benchmark task  n_generators        checked
    0         b   t1             2  oracle + test
    """
    _require_tasks(counts, "never_passing_tasks")
    attempted = _attempted(counts)
    passes = np.nan_to_num(_bgt(counts["task_pass"]))
    checked = np.full(passes.shape[0], "oracle", dtype=object)
    for c in (c for c in TEST_CRITICS if c in [str(v) for v in counts[DIM_CRITIC].values]):
        passes = passes + np.nan_to_num(_bgt(counts["task_critic_pass"].sel({DIM_CRITIC: c})))
        ran = (np.nan_to_num(_bgt(counts["task_critic_n"].sel({DIM_CRITIC: c}))) > 0).any(axis=(1, 2))
        checked = np.where(ran, checked + f" + {c}", checked)
    n = np.nan_to_num(_bgt(counts["task_n"]))
    never = attempted.any(axis=1) & ~((passes > 0) & attempted).any(axis=1)  # (benchmark, task)
    b, t = np.nonzero(never)
    return pd.DataFrame(
        {
            "benchmark": counts[DIM_BENCHMARK].values.astype(str)[b].astype(object),
            "task": counts[DIM_TASK].values.astype(str)[t].astype(object),
            "n_generators": attempted.sum(axis=1)[b, t],
            "n_patches": n.sum(axis=1)[b, t].astype(np.int64),
            "checked": checked[b],
        }
    )


def task_report(counts: xr.Dataset) -> pd.DataFrame:
    """Per benchmark: its tasks, the generators that attempted them, and those nothing passes on.

    Returns
    -------
    pandas.DataFrame
        One row per benchmark with per-task counts: ``benchmark``, ``n_tasks``, ``n_generators``,
        ``generators``, ``n_never`` (tasks no generator passes anything on), ``share_never``,
        ``checked``, ``flag`` (:data:`FLAG` where ``n_never`` > 0 and at least
        :data:`MIN_GENERATORS_TO_FLAG` generators attempted the tasks), ``tasks`` (their ids).
    """
    _require_tasks(counts, "task_report")
    attempted = _attempted(counts)
    never = never_passing_tasks(counts)
    gens = [str(g) for g in counts[DIM_GENERATOR].values]
    rows = []
    for i, bench in enumerate(str(b) for b in counts[DIM_BENCHMARK].values):
        n_tasks = int(attempted[i].any(axis=0).sum())
        if n_tasks == 0:
            continue
        mine = never[never["benchmark"] == bench]
        cells = [gens[j] for j in np.flatnonzero(attempted[i].any(axis=1))]
        rows.append(
            {
                "benchmark": bench,
                "n_tasks": n_tasks,
                "n_generators": len(cells),
                "generators": ", ".join(cells),
                "n_never": len(mine),
                "share_never": len(mine) / n_tasks,
                "checked": str(mine["checked"].iloc[0]) if len(mine) else "",
                "flag": FLAG if len(mine) and len(cells) >= MIN_GENERATORS_TO_FLAG else "",
                "tasks": list(mine["task"]),
            }
        )
    return pd.DataFrame(rows)


def flagged_tasks(counts: xr.Dataset) -> pd.DataFrame:
    """The tasks :func:`task_report` flags (:data:`FLAG`): nothing passes on them for any generator.

    The never-passing tasks (:func:`never_passing_tasks`) of the benchmarks where at least
    :data:`MIN_GENERATORS_TO_FLAG` generators attempted them.

    Returns
    -------
    pandas.DataFrame
        ``benchmark``, ``task`` (one row per flagged task, sorted).

    Examples
    --------
    >>> from bpc.data.counts import counts_from_records
    >>> rec = pd.DataFrame({"benchmark": "b", "generator": ["g1", "g1", "g2", "g2"],
    ...                     "instance_id": ["t1", "t2", "t1", "t2"], "patch_id": 0, "Y": [0, 1, 0, 0]})
    >>> flagged_tasks(counts_from_records(rec)).to_dict("records")
    [{'benchmark': 'b', 'task': 't1'}]
    >>> flagged_tasks(counts_from_records(rec[rec["generator"] == "g2"])).empty  # one generator: not flagged
    True
    """
    report = task_report(counts)
    rows = [(str(r["benchmark"]), str(t)) for r in report.to_dict("records") if r["flag"] for t in r["tasks"]]
    return pd.DataFrame(sorted(rows), columns=["benchmark", "task"])


def exclude_tasks(records: pd.DataFrame, tasks: pd.DataFrame) -> pd.DataFrame:
    """``records`` without the rows of the given (benchmark, task) pairs (e.g. :func:`flagged_tasks`).

    Parameters
    ----------
    records : pandas.DataFrame
        Per-patch records (``benchmark``, ``instance_id``, …) or per-task trajectories.
    tasks : pandas.DataFrame
        ``benchmark`` and ``task`` columns.

    Returns
    -------
    pandas.DataFrame
        The other rows, index reset; ``attrs`` kept.

    Examples
    --------
    >>> rec = pd.DataFrame({"benchmark": ["b", "b", "c"], "instance_id": ["t1", "t2", "t1"]})
    >>> exclude_tasks(rec, pd.DataFrame({"benchmark": ["b"], "task": ["t1"]}))["instance_id"].tolist()
    ['t2', 't1']
    """
    if missing := [c for c in ("benchmark", "task") if c not in tasks.columns]:
        raise ValueError(f"exclude_tasks: the task list lacks column(s) {missing}")
    drop = set(zip(tasks["benchmark"].astype(str), tasks["task"].astype(str), strict=True))
    keys = zip(records["benchmark"].astype(str), records["instance_id"].astype(str), strict=True)
    keep = np.fromiter((k not in drop for k in keys), dtype=bool, count=len(records))
    out = records[keep].reset_index(drop=True)
    out.attrs.update(records.attrs)
    return out


def shared_solutions(counts: xr.Dataset) -> pd.DataFrame:
    """Per benchmark with several generators on shared tasks: how their solved sets overlap.

    A task is solved by a generator when one of its patches passes the oracle.

    Returns
    -------
    pandas.DataFrame
        ``benchmark``, ``generators``, ``n_tasks`` (attempted by all of them), ``solved`` (per
        generator, on those tasks), ``solved_by_all``, ``solved_by_any``, ``identical`` (every
        generator solves exactly the same tasks).

    Examples
    --------
    >>> from bpc.data.counts import counts_from_records
    >>> rec = pd.DataFrame({"benchmark": "b", "generator": ["g1", "g1", "g2", "g2"],
    ...                     "instance_id": ["t1", "t2", "t1", "t2"], "patch_id": 0, "Y": [1, 0, 1, 0]})
    >>> shared_solutions(counts_from_records(rec))[["n_tasks", "solved_by_all", "identical"]]
       n_tasks  solved_by_all  identical
    0        2              1       True
    """
    _require_tasks(counts, "shared_solutions")
    attempted = _attempted(counts)
    passes = np.nan_to_num(_bgt(counts["task_pass"]))
    gens = [str(g) for g in counts[DIM_GENERATOR].values]
    rows = []
    for i, bench in enumerate(str(b) for b in counts[DIM_BENCHMARK].values):
        cells = np.flatnonzero(attempted[i].any(axis=1))
        if len(cells) < 2:
            continue
        common = attempted[i][cells].all(axis=0)
        if not common.any():
            continue
        solved = (passes[i][cells] > 0) & common[None, :]
        rows.append(
            {
                "benchmark": bench,
                "generators": [gens[j] for j in cells],
                "n_tasks": int(common.sum()),
                "solved": {gens[j]: int(solved[r].sum()) for r, j in enumerate(cells)},
                "solved_by_all": int(solved.all(axis=0).sum()),
                "solved_by_any": int(solved.any(axis=0).sum()),
                "identical": bool((solved == solved[0]).all()),
            }
        )
    columns = ["benchmark", "generators", "n_tasks", "solved", "solved_by_all", "solved_by_any", "identical"]
    return pd.DataFrame(rows, columns=columns)


def empty_patch_flags(
    records: pd.DataFrame, root: str | os.PathLike, files: Mapping[str, Sequence[str]]
) -> np.ndarray:
    """Per record row: the patch is an empty diff (raw ``diff_chars`` 0 or ``note`` ``"empty_diff"``).

    The records schema keeps neither field, so the cells' ``critic_results.jsonl`` files
    (``counts.attrs["files"]``, relative to ``root``) are read again for them. Rows of a cell
    without raw files are ``False``.

    Parameters
    ----------
    records : pandas.DataFrame
        The labelled records.
    root : str or os.PathLike
        The corpus folder the file names are relative to (``counts.attrs["corpus"]``).
    files : mapping
        ``"benchmark/generator"`` → file names (``counts.attrs["files"]``).

    Returns
    -------
    numpy.ndarray
        bool, one per row of ``records``.
    """
    root = Path(root)
    keyed = records[["benchmark", "generator", "instance_id"]].astype(str)
    keyed = keyed.assign(patch_id=records["patch_id"].astype(int))
    patch_keys = list(keyed.itertuples(index=False, name=None))
    keys = set(patch_keys)
    empty: set[tuple] = set()
    for cell, names in files.items():
        bench, gen = cell.split("/", 1)
        for name in names:
            path = root / name
            if not str(name).endswith(".jsonl") or not path.is_file():
                continue
            for _, obj in read_json_lines(path):  # the corpus reader already accepted these files
                key = (bench, gen, str(obj.get("instance_id")), obj.get("patch_id"))
                if key in keys and (obj.get("diff_chars") == 0 or obj.get("note") == "empty_diff"):
                    empty.add(key)
    return np.fromiter((k in empty for k in patch_keys), dtype=bool, count=len(patch_keys))


def empty_patches(
    records: pd.DataFrame, root: str | os.PathLike, files: Mapping[str, Sequence[str]]
) -> pd.DataFrame:
    """Per cell with raw records: patches that are empty (no diff) and how they were scored.

    A patch is empty when its raw record has ``diff_chars`` 0 or ``note`` ``"empty_diff"`` (the
    SWE-bench full runs, see the corpus README; :func:`empty_patch_flags`).

    Parameters
    ----------
    records : pandas.DataFrame
        The labelled records (their keys decide which raw rows count).
    root : str or os.PathLike
        The corpus folder the file names are relative to (``counts.attrs["corpus"]``).
    files : mapping
        ``"benchmark/generator"`` → file names (``counts.attrs["files"]``).

    Returns
    -------
    pandas.DataFrame
        ``benchmark``, ``generator``, ``n_patches``, ``n_empty``, ``share_empty``,
        ``empty_passing`` (empty patches with Y = 1), for cells with at least one empty patch.
    """
    flags = empty_patch_flags(records, root, files)
    frame = records[["benchmark", "generator"]].astype(str)
    frame = frame.assign(empty=flags, passing=flags & (records["Y"].to_numpy() == 1))
    cells = {tuple(c.split("/", 1)) for c in files}
    frame = frame[[(b, g) in cells for b, g in zip(frame["benchmark"], frame["generator"], strict=True)]]
    agg = frame.groupby(["benchmark", "generator"], sort=False).agg(
        n_patches=("empty", "size"), n_empty=("empty", "sum"), empty_passing=("passing", "sum")
    )
    agg = agg[agg["n_empty"] > 0].reset_index()
    agg["share_empty"] = agg["n_empty"] / agg["n_patches"]
    out = agg[["benchmark", "generator", "n_patches", "n_empty", "share_empty", "empty_passing"]]
    return out.astype({"n_patches": int, "n_empty": int, "empty_passing": int}).reset_index(drop=True)


def empty_task_groups(
    records: pd.DataFrame, root: str | os.PathLike, files: Mapping[str, Sequence[str]]
) -> pd.DataFrame:
    """Per (benchmark, generator, task) of the cells with empty patches: how many of them are empty.

    ``"all empty"``, ``"some empty"`` or ``"none empty"`` (:func:`empty_patch_flags`).

    Returns
    -------
    pandas.DataFrame
        ``benchmark, generator, instance_id, group`` for the cells with at least one empty patch.
    """
    frame = (
        records[["benchmark", "generator", "instance_id"]]
        .astype(str)
        .assign(empty=empty_patch_flags(records, root, files))
    )
    per = frame.groupby(["benchmark", "generator", "instance_id"], sort=True)["empty"].agg(["sum", "size"])
    per = per[per.groupby(level=[0, 1])["sum"].transform("sum") > 0]
    group = np.where(
        per["sum"] == per["size"], "all empty", np.where(per["sum"] > 0, "some empty", "none empty")
    )
    return per.assign(group=group).reset_index()[["benchmark", "generator", "instance_id", "group"]]


def _some(ids: list[str], limit: int | None) -> str:
    """``ids`` joined by commas, the first ``limit`` of them and the rest counted."""
    if limit is None or len(ids) <= limit:
        return ", ".join(ids)
    return f"{', '.join(ids[:limit])} … and {len(ids) - limit} more"


def task_choices(
    counts: xr.Dataset, *, records: pd.DataFrame | None = None, max_ids: int | None = None
) -> list[str]:
    """The task report as lines of a data-choices summary (nothing without per-task counts).

    One line per flagged benchmark (:func:`task_report`: tasks no generator passes anything on,
    with their count and their ids — the first ``max_ids`` of them, the rest counted, when
    ``max_ids`` is given; :func:`flagged_tasks` lists them all), one per benchmark whose
    generators solve identical task sets, and one per cell whose empty patches are scored
    Y = 0 (when ``records`` are given and ``counts.attrs`` name the corpus folder and its files).
    """
    if not has_task_counts(counts):
        return []
    lines = []
    for rep in task_report(counts).to_dict("records"):
        if rep["flag"]:
            lines.append(
                f"{rep['benchmark']}: {rep['n_never']} of {rep['n_tasks']} tasks pass nothing "
                f"({rep['checked']}) for any of its {rep['n_generators']} generators — {rep['flag']}: "
                f"{_some(list(rep['tasks']), max_ids)}"
            )
    for sol in shared_solutions(counts).to_dict("records"):
        if sol["identical"]:
            solved = next(iter(dict(sol["solved"]).values()))
            lines.append(
                f"{sol['benchmark']}: {' and '.join(sol['generators'])} solve the identical {solved} of "
                f"{sol['n_tasks']} tasks (task difficulty is shared; the crossed model pools it)"
            )
    root, files = counts.attrs.get("corpus"), counts.attrs.get("files")
    if records is not None and root and isinstance(files, Mapping):
        for row in empty_patches(records, root, files).itertuples(index=False):
            lines.append(
                f"{row.benchmark}/{row.generator}: {row.n_empty} of {row.n_patches} patches "
                f"({row.share_empty:.0%}) are empty diffs, scored Y = 0 ({row.empty_passing} pass)"
            )
    return lines
