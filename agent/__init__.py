"""The agent: the daemon, the CLI, the tailer, the store and the notifier."""

__version__ = "0.1.0"
"""The release (the package metadata's version is read from here: pyproject.toml), known
without importing ``importlib.metadata`` (~10 ms of every start that writes the agent's row)."""
