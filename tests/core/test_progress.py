"""Progress output: rate-limited off a terminal, in place on one; the data-choice digest."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpc.progress import Meter, choices_summary, notes_digest


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _meter_output(
    total: int, *, stream: io.StringIO | None = None, note: str | None = None, **options
) -> str:
    """What a meter of ``total`` steps writes (``options`` go to :class:`Meter`)."""
    buf = io.StringIO() if stream is None else stream
    meter = Meter("file", total=total, stream=buf, **options)
    for _ in range(total):
        meter.step(note)
    meter.close()
    return buf.getvalue()


@given(st.integers(min_value=1, max_value=400))
def test_log_lines_at_most_one_per_tenth(total):
    lines = _meter_output(total, note="f.json", interval=0.0).splitlines()
    assert 1 <= len(lines) <= 10
    assert lines[-1].startswith(f"[bpc] file {total}/{total}")  # the final count is always shown


def test_time_limit_holds_back_lines_but_not_the_last():
    assert _meter_output(50, interval=3600.0).splitlines() == ["[bpc] file 5/50", "[bpc] file 50/50"]


def test_terminal_counter_redraws_in_place():
    text = _meter_output(3, stream=_Tty(), note="not shown on a terminal")
    assert text.startswith("\r[bpc] file 1/3") and text.endswith("\r[bpc] file 3/3\n")
    assert "not shown" not in text


def test_delay_keeps_fast_work_silent():
    assert _meter_output(5, delay=3600.0) == ""


def test_digest_names_the_chosen_source_with_both_priors():
    notes = [
        "skipped superseded lcb_calibration/g/critic_results.jsonl (include_superseded=True loads it)",
        "swebench_lite/gpt5_mini: raw records (full/gpt5_mini/critic_results.jsonl) define the cell; the "
        "likelihood table rel/gpt5_mini/likelihood_tables.json disagrees (n_patches 900 vs 135; "
        "n_pass 233 vs 67; critic_n[syn, Y=0] 667 vs 68) and is not used",
        "x.jsonl: 3 unlabelled row(s) (Y null) skipped",
        "a/b: likelihood table t.json agrees with the raw records",
    ]
    assert notes_digest(notes) == [
        "swebench_lite/gpt5_mini: used the raw records full/gpt5_mini/critic_results.jsonl (900 patches, "
        "prior 0.259), not the released table rel/gpt5_mini/likelihood_tables.json "
        "(135 patches, prior 0.496)",
        "x.jsonl: 3 unlabelled row(s) (Y null) skipped",
        "1 released likelihood table(s) agree with the raw records (counted once)",
        "skipped 1 superseded run(s) (--include-superseded loads them)",
    ]


def test_choices_summary_is_short():
    buf = io.StringIO()
    choices_summary("data choices", [f"note {i}" for i in range(20)], limit=3, stream=buf)
    assert buf.getvalue().splitlines() == [
        "[bpc] data choices:",
        "  - note 0",
        "  - note 1",
        "  - note 2",
        "  … and 17 more (all in the output's notes)",
    ]
    empty = io.StringIO()
    choices_summary("data choices", [], stream=empty)
    assert empty.getvalue() == ""


def test_a_ctrl_c_a_c_callback_swallowed_prints_nothing_and_still_ends_the_block(capsys):
    """Inside the guard, a KeyboardInterrupt that Python reports as unraisable (raised in a C callback,
    e.g. llvmlite's compile cache) prints no traceback, and the block still ends interrupted."""
    import signal
    import sys
    from types import SimpleNamespace

    import pytest

    from bpc.progress import interrupt_guard

    unraisable = SimpleNamespace(
        exc_type=KeyboardInterrupt,
        exc_value=KeyboardInterrupt(),
        exc_traceback=None,
        err_msg=None,
        object=None,
    )
    seen = []
    sys.unraisablehook, hook = seen.append, sys.unraisablehook  # what the guard falls back to
    try:
        sys.unraisablehook(SimpleNamespace(exc_value=ValueError()))
        with pytest.raises(KeyboardInterrupt):
            with interrupt_guard():
                sys.unraisablehook(SimpleNamespace(exc_value=KeyboardInterrupt()))  # no Ctrl-C yet: passed on
                try:
                    signal.raise_signal(signal.SIGINT)
                except KeyboardInterrupt:  # as a C callback would swallow it
                    sys.unraisablehook(unraisable)
        restored = sys.unraisablehook
    finally:
        sys.unraisablehook = hook
    assert len(seen) == 2 and unraisable not in seen  # the one after the Ctrl-C was quiet
    assert restored == seen.append  # the guard put the hook back


def test_the_interrupt_guard_leaves_an_ignored_sigint_ignored():
    """A background job (a shell's ``&``, ``nohup``) ignores SIGINT; the guard must not take it back."""
    import signal

    from bpc.progress import interrupt_guard

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupt_guard():
            assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
            signal.raise_signal(signal.SIGINT)  # ignored: the block goes on
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_swallowed_ctrl_c_stops_the_block_at_its_next_progress_point(capsys):
    """A Ctrl-C raised inside a callback whose exceptions are ignored (a gc callback, as dask's
    scheduler installs) is lost to Python: the guard raises it at the next progress line, not after
    the rest of the work, and never while cleanup after a delivered interrupt is running."""
    import gc
    import signal

    from bpc.progress import Meter, info, interrupt_guard, stage

    def swallowing_callback(phase, _info):
        if phase == "start":
            gc.callbacks.remove(swallowing_callback)
            signal.raise_signal(signal.SIGINT)  # the KeyboardInterrupt is raised here and ignored

    reached = []
    with pytest.raises(KeyboardInterrupt):
        with interrupt_guard():
            with stage("first"):
                gc.callbacks.append(swallowing_callback)
                gc.collect()
                reached.append("the block went on")  # Python lost the interrupt
            reached.append("the next stage")  # not reached: the stage's closing line raised it
    assert reached == ["the block went on"]
    assert "first done" not in capsys.readouterr().err
    info("after the guard: no interrupt pending")  # the outermost guard cleared it
    Meter("x", total=1, enabled=False).step()

    with pytest.raises(KeyboardInterrupt):
        with interrupt_guard():
            try:
                signal.raise_signal(signal.SIGINT)  # delivered
            finally:
                info("cleanup after a delivered interrupt runs undisturbed")
                reached.append("cleanup done")
    assert reached[-1] == "cleanup done"
