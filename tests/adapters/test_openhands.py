"""The OpenHands SDK adapter: the README example in a real conversation, and a real cell's recorded verdicts.

`make dev-agents` installs the framework (pinned: .ci/constraints-agents.txt). Without it these tests
skip, except under ``BPC_REQUIRE_AGENTS=1`` (set by .ci/run), where a missing framework is an error.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from tests.adapters.frameworks import CELL, recorded_cell, require

require(
    "openhands.sdk",
    reason="the OpenHands adapter needs openhands-sdk (make dev-agents; pip install -e '.[openhands]')",
)

from bpc.decide.live import Controller  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "openhands_critic.py"


def test_the_readme_example_runs_a_real_conversation(capsys, monkeypatch):
    monkeypatch.setenv("OPENHANDS_SUPPRESS_BANNER", "1")
    ns = runpy.run_path(str(EXAMPLE), run_name="__main__")
    critic, episode = ns["critic"], ns["critic"].episode
    assert episode.done and episode.passed and episode.regenerations == 2  # wrong, broken, right
    attempts: list[list[dict]] = [[]]
    for move in episode.history:
        if move["op"] == "refined":
            attempts.append([])
        else:
            attempts[-1].append(move)
    # the first attempt fooled the checks and failed the oracle; the second (a syntax error) failed a check
    assert attempts[0][-1] == {"op": "verified", "passed": False}
    assert any(m.get("passed") is False and m["op"] == "observe" for m in attempts[1])
    assert attempts[2][-1] == {"op": "verified", "passed": True}
    assert capsys.readouterr().out.strip().endswith(f"passed after 3 attempts: spent {episode.spent:g}")
    assert critic.action == "verify"


def test_score_is_the_belief_and_refining_is_the_episodes_decision():
    from openhands.sdk.critic import CriticResult, IterativeRefinementConfig

    from bpc.adapters.openhands import EpisodeCritic

    ctrl = Controller(
        prior=0.3, critics={"test": (0.95, 0.2, 2.0)}, costs={"c_gen": 10, "c_ver": 30, "reward": 100}
    )
    critic = EpisodeCritic(
        controller=ctrl,
        checks={"test": lambda events, patch: patch == "good"},
        iterative_refinement=IterativeRefinementConfig(success_threshold=0.6, max_iterations=3),
    )
    bad = critic.evaluate([], git_patch="bad")
    expect = ctrl.episode().observe("test", False)
    assert bad.score == pytest.approx(expect.p_pass) and bad.metadata["bpc"]["episode"] == expect.to_dict()
    assert critic.should_refine(bad) == (expect.decide().action == "regenerate")
    good = critic.evaluate([], git_patch="good")
    expect = expect.refined().observe("test", True)
    assert good.score == pytest.approx(expect.p_pass) and critic.action == expect.decide().action
    assert "test: fail" in critic.get_followup_prompt(bad, 1) or "failed" in critic.get_followup_prompt(
        bad, 1
    )
    # a result of another critic keeps OpenHands' threshold rule
    assert critic.should_refine(CriticResult(score=0.5, message=None))
    assert not critic.should_refine(CriticResult(score=0.7, message=None))
    with pytest.raises(ValueError, match="missing \\['test'\\]"):
        EpisodeCritic(controller=ctrl, checks={})
    critic.reset(expect.to_dict())
    assert critic.episode.to_dict() == expect.to_dict()


@pytest.mark.corpus
def test_recorded_verdicts_of_a_real_cell_drive_the_critic(corpus_path):
    """Each recorded patch of lcb_hard/gpt5_mini is one attempt; OpenHands' loop around the critic."""
    from openhands.sdk.critic import IterativeRefinementConfig

    from bpc.adapters.openhands import EpisodeCritic
    from bpc.replay.engine import cell_pool

    records, _, params = recorded_cell(corpus_path)
    pool = cell_pool(records, "paper")
    ctrl = Controller.from_params(params, cell=CELL)
    config = IterativeRefinementConfig(max_iterations=int(pool.n_patches.max()))
    unlike_threshold = 0  # evaluations where OpenHands' default rule (refine below 0.6) would differ

    def recorded(i: int, patch: dict, name: str):
        k = pool.critics.index(name)

        def run(events, git_patch):
            z = int(pool.z[i, patch["k"], k])
            return None if z < 0 else bool(z)

        return run

    for i in range(pool.n_instances):
        patch = {"k": 0}
        checks = {c: recorded(i, patch, c) for c in ctrl.critics}
        critic = EpisodeCritic(controller=ctrl, checks=checks, iterative_refinement=config)
        direct = ctrl.episode()
        while True:  # the harness: OpenHands' refinement loop, then the oracle on "verify"
            result = critic.evaluate([], git_patch=None)
            for step in result.metadata["bpc"]["checks"]:
                name, verdict = step.split(": ")
                direct.observe(name, {"pass": True, "fail": False, "none": None}[verdict])
            assert result.score == pytest.approx(direct.p_pass)
            action = critic.action
            assert action == (direct.decide().action if not direct.done else "stop")
            unlike_threshold += critic.should_refine(result) != (result.score < 0.6)
            if critic.should_refine(result):
                assert action == "regenerate"
                if patch["k"] + 1 >= pool.n_patches[i]:
                    break  # no recorded attempt left
                patch["k"] += 1
                direct.refined()
                continue
            if action == "stop":
                direct.stop()
                break
            passed = bool(pool.Y[i, patch["k"]] == 1)
            critic.verified(passed)
            direct.verified(passed)
            if direct.done or patch["k"] + 1 >= pool.n_patches[i]:
                break
            patch["k"] += 1
            direct.refined()
        assert critic.episode.to_dict()["moves"] == direct.to_dict()["moves"]
        assert critic.episode.utility == direct.utility
    assert unlike_threshold > 0  # the episode is not a threshold in disguise
