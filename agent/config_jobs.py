"""The job sections of the configuration: ``[[jobs]]`` with its ``[[jobs.patterns]]``, and
``[parse]`` (how their log text is read); the base every section shares. The whole schema is
``config.py``; docs/CONFIG.md is generated from both (``config_reference.py``).
"""

from __future__ import annotations

import glob
import os
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, Strict, field_validator

from ckpt_advisor import parsers
from ckpt_advisor.parsers.events import EventKind
from ckpt_advisor.rules.tiers import with_overrides

Count = Annotated[int, Strict()]
"""A count (GPUs, nodes, saves, failures): a TOML integer; ``true``, ``"64"`` or ``64.0`` is
refused, naming the key, where pydantic's lax mode would read 1 or 64."""
Number = Annotated[float, Strict()]
"""A number (days, ratios, prices): a TOML integer or float; ``true`` or ``"365"`` is refused,
naming the key, where pydantic's lax mode would read 1 or 365 (``retention_days = true``
pruned every event older than a day)."""
Flag = Annotated[bool, Strict()]
"""A switch: TOML ``true`` or ``false``; ``"false"``, ``"no"`` or ``0`` is refused, naming the
key, where pydantic's lax mode would read them as booleans."""


class Section(BaseModel):
    """A configuration section: unknown keys refused, values frozen."""

    # Field docstrings become descriptions: docs/CONFIG.md is generated from them.
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def known_zone(value: str) -> str:
    """``value`` if it names an IANA time zone.

    Raises:
        ValueError: it names none (the message says what was given).
    """
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {value!r} (use an IANA name such as UTC)") from None
    return value


class ParseConfig(Section):
    """``[parse]``: how log text is read."""

    timezone: str = "UTC"
    """IANA zone of timestamps printed without an offset (most frameworks print local time).
    Logs of a zone east of it show stamps after their files' last writes: ``ingest`` warns and
    the estimate's ``stamp_after_write`` note names them."""

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        return known_zone(value)


class PatternConfig(Section):
    """``[[jobs.patterns]]``: a custom log pattern (``parsers/custom.py``)."""

    kind: str
    """Event kind the pattern produces (``checkpoint_start``, ``checkpoint_end``, ``failure``,
    ``restart``, ``resume``, ``run_start``, ``run_end``, ``step``)."""
    regex: str
    """Python regex searched in each line; optional named groups ``step``, ``time``,
    ``duration_s``."""

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in {k.value for k in EventKind}:
            known = ", ".join(k.value for k in EventKind)
            raise ValueError(f"unknown kind {value!r}; known kinds: {known}")
        return value

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        parsers.compile_pattern("checkpoint_end", value)  # ValueError names the problem
        return value

    def compiled(self) -> parsers.CustomPattern:
        """The :class:`parsers.CustomPattern` the parsers take."""
        return parsers.compile_pattern(self.kind, self.regex)


class JobConfig(Section):
    """``[[jobs]]``: one training job (or a family of runs that share an interval setting)."""

    name: str = Field(min_length=1)
    """The job's name in messages, the store and the CLI."""
    logs: list[str] = Field(default_factory=list)
    """Absolute globs of training logs (``**`` recurses); files appearing later are found. A
    file that the globs of several jobs match is read once, as the first of them in the config
    (``check-config`` warns of each)."""
    timings: list[str] = Field(default_factory=list)
    """Absolute globs of checkpoint timing files (JSONL or CSV; exact C)."""
    format: str = "auto"
    """Parser for the logs: ``auto`` (detected per file) or a stack name (``ckpt-advisor
    parse --help`` lists them)."""
    gpus: Count | None = Field(default=None, ge=1)
    """GPUs the job runs on: waste in GPU-hours per day, and the worth-it threshold."""
    patterns: list[PatternConfig] = Field(default_factory=list)
    """Custom ``[[jobs.patterns]]`` for lines no built-in parser knows."""
    timezone: str | None = None
    """IANA zone of this job's timestamps printed without an offset, where its nodes' differs
    from ``[parse] timezone`` (unset: that one)."""

    @field_validator("timezone")
    @classmethod
    def _known_job_zone(cls, value: str | None) -> str | None:
        return None if value is None else known_zone(value)

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value not in parsers.available_formats():
            known = ", ".join(parsers.available_formats())
            raise ValueError(f"unknown format {value!r}; known formats: {known}")
        return value

    nodes: Count | None = Field(default=None, ge=1)
    """Nodes the job runs on: M per node, rescaled when the job is resized."""
    survival: dict[str, str] = Field(default_factory=dict)
    """For a job that saves to two tiers: failure class -> the least durable tier whose copy
    survives it (``memory``, ``local``, ``persistent``), where it differs from the default
    table in ``rules/tiers.py``; e.g. ``{ node_failure = "memory" }`` for peer-replicated
    memory copies."""

    @field_validator("survival")
    @classmethod
    def _known_tiers(cls, value: dict[str, str]) -> dict[str, str]:
        with_overrides(value)  # ValueError names the class
        return value

    @field_validator("logs", "timings")
    @classmethod
    def _globs_absolute(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            if not os.path.isabs(os.path.expanduser(pattern)):
                raise ValueError(f"glob {pattern!r} must be an absolute path")
            if glob.has_magic(pattern) and "[" in pattern and "]" not in pattern:
                raise ValueError(f"glob {pattern!r} has an unclosed '['")
        return [os.path.expanduser(p) for p in patterns]
