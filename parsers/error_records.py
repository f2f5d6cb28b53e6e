"""Any logger's ERROR record that carries a known failure text, whatever its prefix.

Custom trainers log their own death through their own formatter, often without a traceback and
without a year (``06/26 18:54:31 [ERROR] trainer - <class 'RuntimeError'> at trainer.py:101 -
CUDA error: an illegal memory access was encountered``, yewzijian/RegTR#33). One rule,
driven by the failure vocabulary: the record is a failure when the text after the level
names one of ``parsers/traceback.py`` ``FAILURE_CLASSES`` (CUDA errors, OOM, NCCL errors,
``DistBackendError``, …); an ERROR record naming none of them (a warning-grade error, a retried
request) goes on to the stack and, unrecognised, to ``parse --misses``. These rules come last:
every more specific rule (torchrun's ``ERROR:…:failed (exitcode: …)``, NCCL's ``[E …]`` lines)
is tried first (docs/FORMATS.md §19).
"""

from __future__ import annotations

import re

from ckpt_advisor.parsers.failure_rule import FailureRule
from ckpt_advisor.parsers.traceback import classify_failure

PARSER_NAME = "error_record"
"""``Event.parser`` of the events of these rules."""


def _named_failure(m: re.Match[str]) -> str | None:
    found = classify_failure(m.string[m.end() :])
    return None if found is None or found.planned else found.name


RULES: tuple[FailureRule, ...] = (
    FailureRule(
        "error_record",
        "ERROR",
        re.compile(r"(?<![\w.])ERROR\b"),
        _named_failure,
        "06/26 18:54:31 [ERROR] trainer - <class 'RuntimeError'> at trainer.py:101 - CUDA error: "
        "an illegal memory access was encountered",
        "the ERROR level name of CPython logging / loguru / custom formatters; "
        "public/generic/regtr_33_error_record.log",
    ),
)
"""The ERROR level word anywhere in a piece (no real CRITICAL record with a failure text was
found in the corpus, so none is matched: a rule needs a real sample)."""
