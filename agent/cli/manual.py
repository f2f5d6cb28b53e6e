"""The manual page (``docs/ckpt-advisor.1``), generated from click's own help of every command.

``python -m ckpt_advisor.agent.cli.manual > docs/ckpt-advisor.1`` rewrites it (a test checks the
file is what the code renders); ``man -l docs/ckpt-advisor.1`` reads it, and an installed copy
can write it where ``man`` looks (``python -m ckpt_advisor.agent.cli.manual >
~/.local/share/man/man1/ckpt-advisor.1``). Each command's section is its ``--help`` as
``ckpt-advisor COMMAND --help`` prints it, examples included, so the page and the help cannot
drift apart. (click-man, the maintained generator, drops click's epilogs, where the examples
are: hence this page of ~60 lines.)
"""

from __future__ import annotations

import sys
from importlib.metadata import version

import click

WIDTH = 78
"""Columns of the help text in the page (a terminal's 80, less the page's indent)."""


def _escaped(text: str) -> str:
    return text.replace("\\", "\\e").replace("-", "\\-")


def _roff(text: str) -> list[str]:
    """``text`` as lines of a no-fill roff block: backslashes and minus signs escaped (so
    options copy as typed), a leading ``.`` or ``'`` made literal."""
    out = []
    for line in text.splitlines():
        line = _escaped(line)
        out.append("\\&" + line if line.startswith((".", "'")) else line)
    return out


def _context(command: click.Command, name: str, parent: click.Context | None) -> click.Context:
    """The context ``command`` runs in under ``parent`` (its settings, the page's width)."""
    settings = {**command.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    return click.Context(command, info_name=name, parent=parent, **settings)


def manual(group: click.Group, name: str = "ckpt-advisor") -> str:
    """The manual page of ``group`` (the ``ckpt-advisor`` command line) as roff ``man(7)``:
    NAME, SYNOPSIS, DESCRIPTION (the group's help), one subsection per command with its whole
    ``--help``, and how to enable shell completion."""
    title = name.upper()
    top = _context(group, name, None)
    lines = [
        f'.TH {title} 1 "" "{name} {version(name)}" "User Commands"',
        ".SH NAME",
        f"{_escaped(name)} \\- {(group.help or '').splitlines()[0]}",
        ".SH SYNOPSIS",
        f".B {_escaped(name)}\n\\fICOMMAND\\fR [\\fIOPTIONS\\fR]",
        ".SH DESCRIPTION",
        ".nf",
        *_roff(group.get_help(top)),
        ".fi",
        ".SH COMMANDS",
    ]
    for command_name in group.list_commands(top):  # sorted; each loaded from its module
        command = group.get_command(top, command_name)
        assert command is not None
        lines += [f".SS {_escaped(name)} {_escaped(command_name)}", ".nf"]
        lines += _roff(command.get_help(_context(command, command_name, top)))
        lines.append(".fi")
    lines += [
        ".SH SHELL COMPLETION",
        ".nf",
        *_roff(
            'bash: eval "$(_CKPT_ADVISOR_COMPLETE=bash_source ckpt-advisor)"   (in ~/.bashrc)\n'
            'zsh:  eval "$(_CKPT_ADVISOR_COMPLETE=zsh_source ckpt-advisor)"    (in ~/.zshrc)\n'
            "fish: _CKPT_ADVISOR_COMPLETE=fish_source ckpt-advisor | source   "
            "(in ~/.config/fish/completions/ckpt-advisor.fish)"
        ),
        ".fi",
        ".SH EXIT STATUS",
        "0 on success, 1 on a failure (an unknown job, a store that cannot be read, an "
        "unhealthy daemon for \\fBstatus\\fR), 2 on bad input (an option or a config).",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    from ckpt_advisor.agent.cli import main

    sys.stdout.write(manual(main))
