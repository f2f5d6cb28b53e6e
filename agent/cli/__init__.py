"""The ``ckpt-advisor`` command line: one module per group of commands.

``service.py`` (the daemon: run, check-config, slack-test, status, demo), ``logs.py`` (parse,
ingest), ``query.py`` (estimates, events, silence), ``calc.py`` (interval, simulate, plot),
``goodput.py`` (goodput), and
``common.py`` (options and helpers they share). Each command parses its arguments, calls into
the agent, formats and prints: readable tables by default, ``--json`` for machines (the shapes
of ``agent/contracts.py``: docs/DESIGN.md, "Contracts"). Bad input exits non-zero (2 for a bad
option or config) with a message that names the file, line or key. Heavy libraries are imported
inside the commands that need them, so ``--help`` stays fast.
"""

from __future__ import annotations

import click

from ckpt_advisor.agent.cli import calc, goodput, logs, query, service


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
