"""Help text renders for the ``bpc`` parser and every subcommand, in-process and as a real process.

Subcommands are discovered from the parser itself (not listed here), so a new
command module is covered the moment :mod:`bpc.cli` picks it up.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from bpc.cli import build_parser, main


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every subparser reachable from ``parser``, keyed by its command path (``"fit"``, ...)."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:  # argparse keeps subparsers nowhere public
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[name] = sub
                found.update({f"{name} {k}": v for k, v in _subparsers(sub).items()})
    return found


PARSER = build_parser()
COMMANDS = sorted(_subparsers(PARSER))


def test_discovery_finds_the_commands():
    # the README's commands; more may appear, none of these may vanish
    assert {"compare", "demo", "estimate", "fit", "replay", "solve", "summary", "analyses"} <= set(COMMANDS)


def test_top_level_help_renders_and_lists_every_command():
    text = PARSER.format_help()
    assert text.startswith("usage: bpc")
    for name in COMMANDS:
        assert name.split()[0] in text


@pytest.mark.parametrize("command", COMMANDS)
def test_subcommand_help_renders(command):
    sub = _subparsers(PARSER)[command]
    text = sub.format_help()
    assert text.startswith(f"usage: bpc {command}")
    # every documented argument shows up (its help was %-expanded: a stray "%" would have raised)
    for action in sub._actions:
        if action.help is not None and action.help is not argparse.SUPPRESS:
            label = action.option_strings[0] if action.option_strings else str(action.metavar or action.dest)
            assert label in text


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bpc", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_bpc_help_exits_zero():
    proc = _run("--help")
    assert proc.returncode == 0, proc.stderr
    assert "usage: bpc" in proc.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_bpc_subcommand_help_exits_zero(command, capsys):
    # in-process: the exit path of ``--help`` is argparse's for every command, run once for real above
    with pytest.raises(SystemExit) as done:
        main([*command.split(), "--help"])
    out = capsys.readouterr()
    assert done.value.code == 0, out.err
    assert out.out.startswith(f"usage: bpc {command}")
