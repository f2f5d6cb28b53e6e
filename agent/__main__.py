"""``python -m agent`` runs the ``ckpt-advisor`` command line."""

from agent.cli import main

main()
