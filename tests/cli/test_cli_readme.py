"""README's "Using it" block, where a new user looks first, shows every command ``kueue-es --help`` lists."""

from __future__ import annotations

import argparse
import re

from clihelp import REPO

from kueue_es.cli import build_parser


def _using_it() -> str:
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Using it\n", 1)[1]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> set[str]:
    names: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                inner = _commands(sub, f"{prefix}{name} ")
                names |= inner or {f"{prefix}{name}"}
    return names


def test_using_it_shows_every_command() -> None:
    shown = {m.group(1) for m in re.finditer(r"^kueue-es ((?:log )?[a-z]+)", _using_it(), re.M)}
    assert _commands(build_parser()) - shown == set()


def test_using_it_shows_audit_by_cluster_queue_and_every_output() -> None:
    block = _using_it()
    assert re.search(r"^kueue-es audit --log \S+ --cluster-queue .*--since.*--until", block, re.M)
    assert "[-o table|json|csv]" in block


def test_audit_says_what_it_shows_without_a_workload() -> None:
    """``kueue-es audit --log L`` alone prints every workload's steps; its help said only what a workload means."""
    assert "every workload's steps" in " ".join(build_parser()._subparsers._group_actions[0].choices["audit"]
                                                .format_help().split())


def test_audit_says_how_its_time_range_takes_a_collapsed_step() -> None:
    """A step collapsed from repeated pending attempts is shown at its first repeat, which may be before --since:
    the help said only "steps at or after TIME", and that row looked like a bug."""
    text = " ".join(build_parser()._subparsers._group_actions[0].choices["audit"].format_help().split())
    assert "a collapsed step is kept whole, at the time of its first repeat" in text
    assert "only steps at or after TIME (a collapsed step: its last repeat)" in text
