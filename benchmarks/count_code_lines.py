"""Count code lines: lines holding at least one code token (line budget).

Comments, blank lines and docstrings (string statements) are not counted. The
budget of an earlier round is ``bpc/decide`` + ``bpc/replay`` together:

    .venv/bin/python benchmarks/count_code_lines.py bpc/decide bpc/replay

Prints one line per ``.py`` file (code lines, path) and the total.
"""

from __future__ import annotations

import io
import pathlib
import sys
import tokenize

_LAYOUT = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER, tokenize.ENCODING}
_NOISE = (tokenize.COMMENT, tokenize.NL)


def code_lines(path: pathlib.Path) -> int:
    """Lines of ``path`` that hold a code token (docstrings and comments excluded)."""
    toks = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    lines: set[int] = set()
    prev = None
    for i, t in enumerate(toks):
        if t.type in _NOISE:
            continue
        if t.type in _LAYOUT:
            prev = t
            continue
        starts_statement = prev is None or prev.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
        if t.type == tokenize.STRING and starts_statement:
            j = i + 1
            while toks[j].type in (*_NOISE, tokenize.STRING):
                j += 1
            if toks[j].type in (tokenize.NEWLINE, tokenize.ENDMARKER):  # a string statement: a docstring
                prev = t
                continue
        lines.update(range(t.start[0], t.end[0] + 1))
        prev = t
    return len(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the code lines of every ``.py`` file below the given folders, and the total."""
    total = 0
    for root in argv if argv is not None else sys.argv[1:]:
        for p in sorted(pathlib.Path(root).rglob("*.py")):
            n = code_lines(p)
            total += n
            print(f"{n:6d} {p}")
    print(f"{total:6d} total")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
