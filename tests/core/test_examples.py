"""Every adapter example under examples/ is a snippet of the agent-loop guide, word for word (the adapter
tests run each file); the README's examples (examples/readme_*) are checked by tests/core/test_docs.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "agent-loop.md"
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("readme_"))
RUNNERS = {
    "langgraph_agent.py": "test_langgraph.py",
    "openhands_critic.py": "test_openhands.py",
    "inspect_attempts.py": "test_inspect_ai.py",
}


def guide_python_blocks() -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def test_every_example_has_a_runner():
    assert sorted(p.name for p in EXAMPLES) == sorted(RUNNERS)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_guide_snippet_is_the_example_file(path):
    assert path.read_text(encoding="utf-8") in guide_python_blocks(), (
        f"{GUIDE.relative_to(ROOT)} has no ```python block equal to {path.relative_to(ROOT)}: copy the file "
        "into the guide"
    )
    runner = next((ROOT / "tests").rglob(RUNNERS[path.name])).read_text(encoding="utf-8")  # any stage folder
    assert f'"{path.name}"' in runner  # the adapter's test runs this very file
