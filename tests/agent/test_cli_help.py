"""Help a new user can find: every command's --help ends with examples of itself, the manual
page is generated from that help, and shell completion works as the README says."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import COMMAND_MODULES, main
from ckpt_advisor.agent.cli.manual import manual

ROOT = Path(__file__).parents[2]


def test_every_command_is_found_in_its_module() -> None:
    """The group loads each command from the module :data:`COMMAND_MODULES` names, and that
    table holds every command of every module's ``COMMANDS`` (a new one cannot go missing)."""
    defined = {
        command.name: name
        for name in set(COMMAND_MODULES.values())
        for command in importlib.import_module(f"ckpt_advisor.agent.cli.{name}").COMMANDS
    }
    assert defined == COMMAND_MODULES
    ctx = click.Context(main)
    loaded = [main.get_command(ctx, name) for name in main.list_commands(ctx)]
    assert [c.name for c in loaded if c is not None] == sorted(defined)
    assert main.get_command(ctx, "nosuch") is None


@pytest.mark.parametrize("name", sorted(COMMAND_MODULES))
def test_every_command_help_ends_with_examples_of_itself(name: str) -> None:
    """`ckpt-advisor NAME --help` has an Examples section whose every line runs NAME."""
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0
    lines = result.stdout.split("Examples:\n", 1)[1].strip().splitlines()
    runs = [re.search(rf"(^|\s)ckpt-advisor {name}(\s|$)", line) for line in lines]
    assert lines and all(runs), lines


def test_the_manual_page_is_generated_from_the_help() -> None:
    """docs/ckpt-advisor.1 is what `python -m ckpt_advisor.agent.cli.manual` renders: a section
    per command holding its help and examples, roff-escaped (options keep their minus signs)."""
    page = manual(main)
    assert (ROOT / "docs" / "ckpt-advisor.1").read_text() == page
    for name in COMMAND_MODULES:
        name = name.replace("-", "\\-")
        assert f".SS ckpt\\-advisor {name}\n.nf\nUsage: ckpt\\-advisor {name} [OPTIONS]" in page
    assert "ckpt\\-advisor parse \\-\\-json" in page
    assert page.count("Examples:") == len(COMMAND_MODULES) + 1  # and the group's own


def test_bash_completion_completes_commands_and_choices() -> None:
    """The README's bash completion (click's, under _CKPT_ADVISOR_COMPLETE) offers the
    commands for a prefix and an option's choices."""
    cmd = [str(Path(sys.executable).parent / "ckpt-advisor")]  # the installed script's name

    def complete(words: str, cword: int) -> str:
        env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(cword)}
        env["_CKPT_ADVISOR_COMPLETE"] = "bash_complete"
        return subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout

    script = subprocess.run(
        cmd, env={**os.environ, "_CKPT_ADVISOR_COMPLETE": "bash_source"},
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "complete -o nosort -F _ckpt_advisor_completion" in script
    assert "parse" in complete("ckpt-advisor pa", 1).split()[0]
    assert complete("ckpt-advisor events --kind fa", 3).split() == ["plain,failure"]
