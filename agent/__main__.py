"""``python -m ckpt_advisor.agent`` runs the ``ckpt-advisor`` command line."""

from ckpt_advisor.agent.cli import main

main()
