"""Benchmarks for the issue-7 speed and memory targets: ``python -m bench`` (see bench/run.py)."""
