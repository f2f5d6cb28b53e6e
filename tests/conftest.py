"""Suite-wide options: ``@pytest.mark.slow`` tests run only when asked (``pytest -m slow``).

This hook is the one mechanism: the default run shows them as skipped with the reason (no
``-m`` in ``addopts``), and any ``-m`` expression decides for itself (``-m slow`` runs only them,
``-m "slow or not slow"`` everything)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip slow tests unless a ``-m`` expression selects tests by marker."""
    if config.option.markexpr:
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
