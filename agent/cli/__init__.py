"""The ``ckpt-advisor`` command line: one module per group of commands.

``service.py`` (the daemon: run, migrate, check-config, slack-test, demo), ``status.py``
(status), ``logs.py`` (parse, ingest), ``query.py`` (estimates, events, silence), ``calc.py``
(interval, simulate, plot), ``goodput.py`` (goodput), ``common.py`` (options and helpers they
share) and ``manual.py`` (the man page, from the help). Each command parses its arguments,
calls into the agent, formats and prints: readable tables by default, ``--json`` for machines
(the shapes of ``agent/contracts.py``: docs/DESIGN.md, "Contracts"). What a command produces
(a table, JSON, the summary of what it did) goes to stdout; warnings, progress and errors to
stderr. Bad input exits 2 (a bad option or config), any other failure 1 (an unknown job names
the known ones), with a message that names the file, line or key. Every ``--help`` ends with
examples. A command's module is imported when the command runs (the group's ``--help`` and
completion import them all), and heavy libraries inside the commands that need them, so each
command starts with what its own path needs (issue 15: ``ingest`` of a small file in 0.3 s).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import click

from ckpt_advisor.agent.cli.common import examples, fail

BLAS_THREADS = "OPENBLAS_NUM_THREADS"
"""Set to 1 here (unless set already), before any command imports numpy: the rules' arrays
never reach OpenBLAS's threaded kernels (one small dot product), but numpy's OpenBLAS starts a
thread per core when it loads, which spins for a while: ~45 ms of CPU per command on 2 cores
(``import numpy``: 0.12 s of CPU, 0.08 s with one thread), and with another process on the
other core, wall time as well. One thread also sums in the same order on every machine."""
os.environ.setdefault(BLAS_THREADS, "1")

COMMAND_MODULES = {
    **dict.fromkeys(("run", "check-config", "slack-test", "demo", "migrate"), "service"),
    "status": "status",
    **dict.fromkeys(("parse", "ingest"), "logs"),
    **dict.fromkeys(("estimates", "events", "silence"), "query"),
    **dict.fromkeys(("interval", "simulate", "plot"), "calc"),
    "goodput": "goodput",
}
"""Each command's module in this package (whose ``COMMANDS`` holds it)."""


class _Main(click.Group):
    """The command group: each command loaded from its module when asked for
    (:data:`COMMAND_MODULES`); a store error met in any command (a page found damaged by a
    query) ends it with its message, as when the store is opened, never with a traceback."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMAND_MODULES:
            return None
        module = importlib.import_module(f"{__name__}.{COMMAND_MODULES[cmd_name]}")
        commands: tuple[click.Command, ...] = module.COMMANDS
        return next(c for c in commands if c.name == cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        from ckpt_advisor.agent.store.records import StoreError

        try:
            return super().invoke(ctx)
        except StoreError as exc:
            fail(str(exc))


@click.group(
    cls=_Main,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=examples(
        "ckpt-advisor demo                                  # a replayed week, one command",
        "ckpt-advisor check-config --config config.toml",
        "ckpt-advisor parse train.log                       # what is recognised in a file",
        "ckpt-advisor COMMAND --help                        # each command, with examples",
    )
    + '\n\nShell completion: eval "$(_CKPT_ADVISOR_COMPLETE=bash_source ckpt-advisor)" (zsh:'
    " zsh_source, fish: fish_source). The manual page: python -m ckpt_advisor.agent.cli.manual.",
)
@click.version_option(package_name="ckpt-advisor")
def main() -> None:
    """Learn checkpoint cost and MTBF from training logs; recommend the checkpoint interval."""
