"""Interruptions in real torch captures and in real quoted lines: kind, line, time, class, planned.

Fixtures: tests/parsers/fixtures/torch/ (torch 2.13 CPU runs, made by fixtures/capture/) and
tests/parsers/fixtures/quoted/ (lines no CPU run can print, quoted from docs/FORMATS.md; see its
README).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from ckpt_advisor.parsers import make_parser
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.failures import RULES
from ckpt_advisor.parsers.launcher import RULES as LAUNCHER_RULES
from ckpt_advisor.parsers.traceback import FAILURE_CLASSES, classify_failure
from ckpt_advisor.parsers.vocabulary import (
    CONSEQUENCE_CLASSES,
    GENERIC_CLASSES,
    PLANNED_CLASSES,
    is_known_class,
)
from ckpt_advisor.rules.interruptions import CONSEQUENCE_FAILURE_CLASSES, GENERIC_FAILURE_CLASSES
from tests.parsers._helpers import read_lines, utc, without_clock

FIXTURES = Path(__file__).parent / "fixtures"
FAILURE, RESTART, RUN_START = EventKind.FAILURE, EventKind.RESTART, EventKind.RUN_START


def _t(text: str) -> datetime:
    return utc(text)


def _parse(path: Path, year_hint: int | None = None) -> tuple[list[Event], list[tuple[int, str]]]:
    parser = make_parser("auto", year_hint=year_hint)
    events: list[Event] = []
    for lineno, line in enumerate(read_lines(path), start=1):
        events.extend(parser.feed(line, lineno))
    events.extend(parser.finish())
    assert parser.misses == 0
    return without_clock(events), list(parser.unmatched)


def _rows(events: list[Event]) -> list[tuple[object, ...]]:
    return [
        (e.kind, e.line, e.time, e.step, e.duration_s, e.failure_class, e.planned) for e in events
    ]


# (kind, line, time, step, duration_s, failure_class, planned); a launcher line's glog stamp
# (``E1129 23:02:56.509000``) takes its year from the ChildFailedError banner's full date after
# it (``time : 2026-11-29_23:02:56``), and so does a rank's traceback before them (it closes
# at the launcher's first line after it, in line order, and is dated at that line's stamp, the
# launch's dating nothing after it); the launch banner's ``Setting OMP_NUM_THREADS`` line is
# the run's start (the launch configs block of torchrun_restart.log is the same launch's);
# torchrun_restart.log prints no full date: no time
TORCH = {
    "torchrun_raise.log": [
        (RUN_START, 3, _t("2026-11-29 23:02:42"), None, None, None, False),
        (FAILURE, 10, _t("2026-11-29 23:02:56"), None, None, "python_exception", False),
        (FAILURE, 30, _t("2026-11-29 23:02:56"), None, None, "exit_code", False),
        (FAILURE, 47, _t("2026-11-29 23:02:56"), None, None, "child_failed", False),
    ],
    "torchrun_record.log": [
        (RUN_START, 3, _t("2026-11-29 23:03:01"), None, None, None, False),
        (FAILURE, 9, _t("2026-11-29 23:03:13"), None, None, "python_exception", False),
        (FAILURE, 36, _t("2026-11-29 23:03:13"), None, None, "exit_code", False),
        (FAILURE, 54, _t("2026-11-29 23:03:11"), None, None, "child_failed", False),
    ],
    "torchrun_sigkill.log": [
        (RUN_START, 3, _t("2026-11-29 23:03:17"), None, None, None, False),
        (FAILURE, 10, _t("2026-11-29 23:03:27"), None, None, "peer_lost", False),
        (FAILURE, 22, _t("2026-11-29 23:03:27"), None, None, "killed", False),
        (FAILURE, 39, _t("2026-11-29 23:03:27"), None, None, "killed", False),
    ],
    "torchrun_abort.log": [
        (RUN_START, 3, _t("2026-11-29 23:03:33"), None, None, None, False),
        (FAILURE, 10, _t("2026-11-29 23:03:44"), None, None, "peer_lost", False),
        (FAILURE, 22, _t("2026-11-29 23:03:44"), None, None, "abort", False),
        (FAILURE, 39, _t("2026-11-29 23:03:44"), None, None, "abort", False),
    ],
    "torchrun_segfault.log": [
        (RUN_START, 3, _t("2026-11-29 23:03:48"), None, None, None, False),
        (FAILURE, 10, _t("2026-11-29 23:04:00"), None, None, "peer_lost", False),
        (FAILURE, 22, _t("2026-11-29 23:04:00"), None, None, "segfault", False),
        (FAILURE, 39, _t("2026-11-29 23:04:00"), None, None, "segfault", False),
    ],
    "torchrun_restart.log": [
        (RUN_START, 4, None, None, None, None, False),
        (FAILURE, 49, None, None, None, "python_exception", False),
        (FAILURE, 69, None, None, None, "exit_code", False),
        # "Worker group FAILED. 1/1 attempts left; will restart": the death and its restart
        (FAILURE, 70, None, None, None, "child_failed", False),
        (RESTART, 70, None, None, None, None, False),
    ],
    "spawn.log": [(FAILURE, 1, None, None, None, "python_exception", False)],
    "dataloader.log": [(FAILURE, 10, None, None, None, "killed", False)],
    "rich.log": [(FAILURE, 1, None, None, None, "python_exception", False)],
}

QUOTED = {
    "cuda.log": [
        (FAILURE, 1, None, None, None, "cuda_oom", False),
        (FAILURE, 11, None, None, None, "cuda_illegal_memory_access", False),
        (FAILURE, 18, None, None, None, "cuda_ecc", False),
        (FAILURE, 23, None, None, None, "cuda_error", False),
    ],
    "kernel.log": [
        (FAILURE, 1, _t("2022-02-20 06:16:58"), None, None, "gpu_xid_79", False),  # at line 3's
        (FAILURE, 3, _t("2022-02-20 06:16:58"), None, None, "gpu_xid_94", False),
        (FAILURE, 7, _t("2022-02-21 05:03:41"), None, None, "gpu_fallen_off_bus", False),
        (FAILURE, 8, _t("2022-02-21 07:00:00"), None, None, "host_oom", False),
    ],
    "launcher_old.log": [
        (FAILURE, 2, _t("2024-05-08 08:47:31.400"), None, None, "abort", False),  # line 4's
        (FAILURE, 4, _t("2024-05-08 08:47:31.400"), None, None, "killed", False),
        (FAILURE, 5, _t("2024-05-08 08:49:00"), None, None, "child_failed", False),
        (RESTART, 5, _t("2024-05-08 08:49:00"), None, None, None, False),
        (FAILURE, 7, _t("2024-05-10 13:23:17"), None, None, "exit_code", False),
    ],
    "lookalikes.log": [],
    "nccl.log": [
        (FAILURE, 1, _t("2024-12-06 18:44:12"), None, None, "nccl_timeout", False),
        (FAILURE, 9, _t("2024-03-21 09:15:00"), None, None, "cuda_illegal_memory_access", False),
    ],
    "slurm.log": [
        (FAILURE, 2, _t("2024-03-05 14:22:51"), None, None, "slurm_time_limit", True),
        (FAILURE, 5, None, None, None, "terminated", False),
        (FAILURE, 6, _t("2024-03-06 02:10:05"), None, None, "preemption", False),
        (FAILURE, 7, _t("2024-03-07 09:00:00"), None, None, "node_failure", False),
        (FAILURE, 8, _t("2024-03-08 10:00:00"), None, None, "slurm_cancelled", True),
        (FAILURE, 9, _t("2025-06-01 08:30:00"), None, None, "slurm_cancelled", True),
        (FAILURE, 10, None, None, None, "host_oom", False),
        (FAILURE, 13, None, None, None, "exit_code", False),
        (RESTART, 14, None, None, None, None, False),
    ],
}


@pytest.mark.parametrize(("name", "expected"), TORCH.items(), ids=list(TORCH))
def test_real_torch_captures_give_the_expected_events(
    name: str, expected: list[tuple[object, ...]]
) -> None:
    """Each real torch 2.13 capture gives exactly the events a human reads in it."""
    events, _ = _parse(FIXTURES / "torch" / name)
    assert _rows(events) == expected


@pytest.mark.parametrize(("name", "expected"), QUOTED.items(), ids=list(QUOTED))
def test_quoted_real_lines_give_the_expected_events(
    name: str, expected: list[tuple[object, ...]]
) -> None:
    """Each file of quoted real lines gives exactly the expected events (year 2024 as hint)."""
    events, _ = _parse(FIXTURES / "quoted" / name, year_hint=2024)
    assert _rows(events) == expected


def test_a_month_day_stamp_without_any_year_has_no_time() -> None:
    """``E1206 18:44:12`` with no year hint and no full date before it is left untimed."""
    events, _ = _parse(FIXTURES / "quoted" / "nccl.log")
    assert [(e.line, e.time) for e in events] == [(1, None), (9, None)]


def test_a_month_day_stamp_takes_the_year_of_the_last_full_date() -> None:
    """A torch ≥2.4 launcher stamp after a Slurm line dated 2023-12-31 rolls into 2024."""
    parser = make_parser("auto")
    lines = [
        "slurmstepd: error: *** JOB 9 ON n1 CANCELLED AT 2023-12-31T23:59:00 DUE TO PREEMPTION ***",
        "E0102 00:00:05.000000 1 torch/distributed/elastic/multiprocessing/api.py:869] failed "
        "(exitcode: -9) local_rank: 0 (pid: 2) of binary: /usr/bin/python3",
    ]
    events = without_clock(e for n, line in enumerate(lines, 1) for e in parser.feed(line, n))
    assert [e.time for e in events] == [_t("2023-12-31 23:59:00"), _t("2024-01-02 00:00:05")]


def test_lookalikes_give_nothing_and_error_looking_ones_are_listed_unmatched() -> None:
    """Lines that only mention the key words give no event; error-looking ones are listed."""
    events, unmatched = _parse(FIXTURES / "quoted" / "lookalikes.log")
    assert events == []
    assert [lineno for lineno, _ in unmatched] == [3, 4, 7]


def test_real_captures_leave_no_error_line_unrecognised() -> None:
    """Every error-looking line of the real torch captures is consumed by some rule."""
    for name in TORCH:
        assert _parse(FIXTURES / "torch" / name)[1] == [], name


def test_slurm_job_and_step_lines_of_one_kill_are_one_event() -> None:
    """``*** JOB`` and ``*** STEP`` for the same time limit give one planned failure."""
    events, _ = _parse(FIXTURES / "quoted" / "slurm.log")
    limits = [e for e in events if e.failure_class == "slurm_time_limit"]
    assert [(e.line, e.planned) for e in limits] == [(2, True)]


def test_every_rule_matches_its_sample_and_names_a_known_class() -> None:
    """Each rule's real sample holds its keyword, matches, and classifies into the vocabulary."""
    for rule in RULES:
        assert rule.keyword in rule.sample, rule.name
        m = rule.regex.search(rule.sample)
        assert m is not None, rule.name
        failure_class = rule.classify(m)
        assert failure_class is not None
        assert rule.kind in (RESTART, RUN_START) or is_known_class(failure_class), rule.name


def test_every_traceback_class_is_in_the_vocabulary() -> None:
    """Classes named by the traceback table are documented, and planned ones flagged planned."""
    for failure_class in FAILURE_CLASSES:
        assert is_known_class(failure_class.name)
        assert failure_class.planned == (failure_class.name in PLANNED_CLASSES)


def test_rules_layer_generic_classes_are_the_vocabularys() -> None:
    """rules/interruptions.py's generic and consequence classes equal the vocabulary's, so root
    causes agree."""
    assert GENERIC_FAILURE_CLASSES == GENERIC_CLASSES
    assert CONSEQUENCE_FAILURE_CLASSES == CONSEQUENCE_CLASSES <= GENERIC_CLASSES


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA out of memory. Tried to allocate 1.71 GiB (GPU 0; 31.72 GiB total "
        "capacity; 23.58 GiB already allocated; 1.58 GiB free; 29.08 GiB reserved in total by "
        "PyTorch)",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 58.00 MiB. GPU 0 has "
        "a total capacty of 23.69 GiB of which 38.75 MiB is free.",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.15 GiB of which 1.2 GiB is free. Including non-PyTorch memory, "
        "this process has 77.9 GiB memory in use.",
    ],
)
def test_three_generations_of_cuda_oom_are_cuda_oom(line: str) -> None:
    """≤2.0, ~2.1 and ≥2.2 OOM messages (docs/FORMATS.md §12) all classify as ``cuda_oom``."""
    found = classify_failure(line)
    assert found is not None and found.name == "cuda_oom"


def test_a_worker_group_restart_is_a_failure_and_its_restart() -> None:
    """``Worker group FAILED. N/M attempts left; will restart`` says a worker died (an
    interruption, even with the worker's own output elsewhere) and the group restarts."""
    rule = next(r for r in LAUNCHER_RULES if r.name == "worker_group_restart")
    events, _ = _parse_lines([rule.sample])
    assert [(e.kind, e.failure_class) for e in events] == [
        (FAILURE, "child_failed"),
        (RESTART, None),
    ]


OMP = (
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid "
    "your system being overloaded, please further tune the variable for optimal performance in "
    "your application as needed. "
)


@pytest.mark.parametrize(
    ("lines", "line", "time"),
    [
        (["WARNING:torch.distributed.run:", "*" * 41, OMP], 3, None),  # ≤2.1: the message's lines
        (
            [
                f"[2024-03-12 08:22:45,549] torch.distributed.run: [WARNING] {OMP}",
                "[2024-03-12 08:22:45,549] torch.distributed.launcher.api: [INFO] Starting "
                "elastic_operator with launch configs:",
            ],
            1,
            _t("2024-03-12 08:22:45.549"),
        ),
        ([f"W1129 23:02:42.256000 15009 torch/distributed/run.py:874] {OMP}"], 1, None),  # no year
    ],
)
def test_a_launch_banner_of_each_prefix_generation_is_one_run_start(
    lines: list[str], line: int, time: datetime | None
) -> None:
    """torchrun's launch banner (torch/distributed/run.py; docs/FORMATS.md §10) under the prefix
    of torch ≤2.1, 2.2-2.3 and ≥2.4 is a run start, with the prefix's time; the same launch's
    ``Starting elastic_operator`` line right after it is no second one."""
    events, _ = _parse_lines(lines)
    assert [(e.kind, e.line, e.time, e.parser) for e in events] == [
        (RUN_START, line, time, "torchrun")
    ]


def test_mmcvs_copy_of_the_launch_banner_is_no_launch() -> None:
    """mmcv's setup_multi_processes warns the banner's words in every worker
    (``warnings.warn(f'Setting OMP_NUM_THREADS …')``): a worker's UserWarning, not a launch."""
    events, _ = _parse_lines([f"/opt/mmcv/utils/setup_env.py:32: UserWarning: {OMP.strip()}"])
    assert events == []


def _parse_lines(lines: list[str]) -> tuple[list[Event], None]:
    parser = make_parser("auto")
    events = [e for n, line in enumerate(lines, 1) for e in parser.feed(line, n)]
    return without_clock([*events, *parser.finish()]), None
