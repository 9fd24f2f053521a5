"""The inspect-ai adapter: real evals with inspect-ai's mock model (no network).

`make dev-agents` installs the framework (pinned: .ci/constraints-agents.txt). Without it these tests
skip, except under ``BPC_REQUIRE_AGENTS=1`` (set by .ci/run), where a missing framework is an error.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from bpc.decide.options import Budget
from tests.adapters.frameworks import require

require(
    "inspect_ai",
    reason="the inspect-ai adapter needs inspect-ai (make dev-agents, or pip install -e '.[inspect]')",
)

from bpc.decide.live import Controller, Episode  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "inspect_attempts.py"


def answers(*texts: str) -> list:
    from inspect_ai.model import ModelOutput, ModelUsage

    out = [ModelOutput.from_content("mockllm/model", t) for t in texts]
    for o in out:
        o.usage = ModelUsage(input_tokens=10, output_tokens=1, total_tokens=11)
    return out


def test_the_readme_example_runs_a_real_eval(capsys):
    ns = runpy.run_path(str(EXAMPLE), run_name="__main__")
    log, ctrl = ns["log"], ns["ctrl"]
    assert log.status == "success"
    sample = log.samples[0]
    episode = Episode.from_dict(sample.metadata["bpc"], ctrl)  # the log holds the whole episode
    assert episode.passed and episode.regenerations == 1  # answered 5, refined, answered 4
    assert sample.output.completion == "4" and sample.scores["match"].value == "C"
    assert episode.utility == 100 - episode.spent
    assert [m["passed"] for m in episode.history if m["op"] == "verified"][-1] is True
    assert (
        capsys.readouterr().out.strip()
        == f"success: passed after {len(episode.history)} moves, spent {episode.spent:g}"
    )


@pytest.mark.parametrize(
    ("max_patches", "max_attempts", "outcome"),
    [(10, 3, "stopped"), (3, 10, "budget")],  # the solver's cap binds first; the episode's budget does
)
def test_the_task_scorer_is_the_verifier_and_a_cap_stops_a_hopeless_sample(
    tmp_path, max_patches, max_attempts, outcome
):
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import get_model
    from inspect_ai.scorer import match

    from bpc.adapters.inspect_ai import episode_attempts

    ctrl = Controller(
        prior=0.5,
        critics={"match": (0.9, 0.1, 1.0)},
        costs={"c_gen": 1, "c_ver": 5, "reward": 100},
        budget=Budget(max_patches=max_patches),
    )
    task = Task(
        dataset=[Sample(input="2 + 2?", target="4")],
        solver=episode_attempts(ctrl, {"match": match()}, max_attempts=max_attempts),
        scorer=match(),
    )
    model = get_model("mockllm/model", custom_outputs=answers("5", "6", "7", "8", "9"))
    log = eval(task, model=model, display="none", log_dir=str(tmp_path))[0]
    assert log.status == "success"
    state = log.samples[0].metadata["bpc"]
    episode = Episode.from_dict(state, ctrl)
    assert episode.outcome == outcome and episode.regenerations == 2  # three wrong answers, then the cap
    assert not episode.passed and log.samples[0].scores["match"].value == "I"


def test_critics_must_match_the_controller():
    from inspect_ai.scorer import match

    from bpc.adapters.inspect_ai import episode_attempts

    ctrl = Controller(
        prior=0.5, critics={"match": (0.9, 0.1, 1.0)}, costs={"c_gen": 1, "c_ver": 5, "reward": 100}
    )
    with pytest.raises(ValueError, match="missing \\['match'\\]"):
        episode_attempts(ctrl, {})
    with pytest.raises(ValueError, match="max_attempts"):
        episode_attempts(ctrl, {"match": match()}, max_attempts=0)
