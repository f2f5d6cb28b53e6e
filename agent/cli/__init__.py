"""The ``ckpt-advisor`` command line: one module per group of commands.

``service.py`` (the daemon: run, check-config, slack-test, status, demo), ``logs.py`` (parse,
ingest), ``query.py`` (estimates, events, silence), ``calc.py`` (interval, simulate, plot),
``goodput.py`` (goodput) and ``common.py`` (options and helpers they share). Each command parses
its arguments, calls into the agent, formats and prints: readable tables by default, ``--json``
for machines (the shapes of ``agent/contracts.py``: docs/DESIGN.md, "Contracts"). What a command
produces (a table, JSON, the summary of what it did) goes to stdout; warnings, progress and
errors to stderr. Bad input exits 2 (a bad option or config), any other failure 1 (an unknown
job names the known ones), with a message that names the file, line or key. Heavy libraries are
imported inside the commands that need them, so ``--help`` stays fast.
"""

from __future__ import annotations

from typing import Any

import click

from ckpt_advisor.agent.cli import calc, goodput, logs, query, service
from ckpt_advisor.agent.cli.common import fail


class _Main(click.Group):
    """The command group; a store error met in any command (a page found damaged by a query)
    ends it with its message, as when the store is opened, never with a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        from ckpt_advisor.agent.store.records import StoreError

        try:
            return super().invoke(ctx)
        except StoreError as exc:
            fail(str(exc))


@click.group(
    cls=_Main,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(package_name="ckpt-advisor")
def main() -> None:
    """Learn checkpoint cost and MTBF from training logs; recommend the checkpoint interval."""


for _command in (
    *service.COMMANDS,
    *logs.COMMANDS,
    *query.COMMANDS,
    *calc.COMMANDS,
    *goodput.COMMANDS,
):
    main.add_command(_command)
