"""Every file under examples/ is a README snippet, word for word (the adapter tests run each file)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
RUNNERS = {
    "langgraph_agent.py": "test_langgraph.py",
    "openhands_critic.py": "test_openhands.py",
    "inspect_attempts.py": "test_inspect_ai.py",
}


def readme_python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def test_every_example_has_a_runner():
    assert sorted(p.name for p in EXAMPLES) == sorted(RUNNERS)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_readme_snippet_is_the_example_file(path):
    assert path.read_text(encoding="utf-8") in readme_python_blocks(), (
        f"README.md has no ```python block equal to {path.relative_to(ROOT)}: copy the file into the README"
    )
    runner = (ROOT / "tests" / RUNNERS[path.name]).read_text(encoding="utf-8")
    assert f'"{path.name}"' in runner  # the adapter's test runs this very file
