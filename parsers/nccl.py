"""c10d / NCCL failure lines outside Python tracebacks: watchdog, heartbeat monitor, C++ aborts.

Format strings from ``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp`` and NCCL
``src/debug.cc`` (docs/FORMATS.md §11). The c10 logger prefix (``[rank0]:[E1206 18:44:12.715298746
ProcessGroupNCCL.cpp:607] ``) is read by ``parsers/failures.py``.

Decision on ``NCCL WARN`` lines: NCCL warns about things it recovers from (a retried socket, a
missing plugin), and when it does not recover the failure surfaces right after as an
``NCCL error in: …`` exception or a watchdog line. So a WARN line alone is recognised (never
listed as unrecognised) but gives no event.
"""

from __future__ import annotations

import re

from ckpt_advisor.parsers.failure_rule import FailureRule, fixed
from ckpt_advisor.parsers.traceback import classify_failure


def _classified(text: str, default: str | None) -> str | None:
    found = classify_failure(text)
    return found.name if found is not None else default


PARSER_NAME = "nccl"
"""``Event.parser`` of the events of these rules."""

RULES: tuple[FailureRule, ...] = (
    FailureRule(
        "watchdog_timeout",
        "Watchdog caught collective operation timeout",
        re.compile(r"Watchdog caught collective operation timeout:(?: WorkNCCL\(|\s*$)"),
        fixed("nccl_timeout"),
        "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.",
        "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, torch 1.13-2.x (docs/FORMATS.md "
        "§11); a terminal may wrap it after 'timeout: ' (public/nccl/milabench_269_*)",
    ),
    FailureRule(
        "watchdog_work_timeout",
        "Timeout at NCCL work",
        re.compile(r"Timeout at NCCL work: \d+"),
        fixed("nccl_timeout"),
        "[rank2]:[E ProcessGroupNCCL.cpp:563] [PG 0 Rank 2] Timeout at NCCL work: 7487, last "
        "enqueued NCCL work: 7487, last completed NCCL work: 7486.",
        "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, torch 2.2-2.3 (docs/FORMATS.md §11)",
    ),
    FailureRule(
        "watchdog_exception",
        "detected by watchdog",
        re.compile(r"Exception \(either an error or timeout\) detected by watchdog"),
        fixed("nccl_error"),
        "[rank1]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:1632] [PG ID 0 PG GUID "
        "0(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at "
        "work: 808, last enqueued NCCL work: 811, last completed NCCL work: 807.",
        "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, torch ≥2.4 (docs/FORMATS.md §11)",
    ),
    FailureRule(
        "watchdog_terminated",
        "watchdog thread terminated with exception",
        re.compile(r"watchdog thread terminated with exception: (?P<reason>.*)"),
        lambda m: _classified(m["reason"], "nccl_error"),
        "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:1376] [PG ID 0 PG GUID "
        "0(default_pg) Rank 0] Process group watchdog thread terminated with exception: CUDA "
        "error: an illegal memory access was encountered",
        "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (docs/FORMATS.md §11)",
    ),
    FailureRule(
        "watchdog_hang",
        "watchdog hang",
        re.compile(r"due to ProcessGroupNCCL watchdog hang"),
        fixed("nccl_hang"),
        "[rank0]:[F1206 18:54:12.715298746 ProcessGroupNCCL.cpp:1306] [PG ID 0 PG GUID "
        "0(default_pg) Rank 0] [PG ID 0 PG GUID 0(default_pg) Rank 0] Terminating the process "
        "after attempting to dump debug info, due to ProcessGroupNCCL watchdog hang.",
        "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp heartbeat monitor, torch ≥2.3",
    ),
    FailureRule(
        "nccl_operations_failed",
        "Some NCCL operations have failed or timed out",
        re.compile(r"Some NCCL operations have failed or timed out"),
        fixed("nccl_error"),
        "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:621] [Rank 0] Some NCCL "
        "operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, "
        "subsequent GPU operations might run on corrupted/incomplete data.",
        "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (docs/FORMATS.md §11)",
    ),
    FailureRule(
        "taking_process_down",
        "taking the entire process down",
        re.compile(r"To avoid data inconsistency, we are taking the entire process down"),
        fixed("nccl_error"),
        "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:627] [Rank 0] To avoid data "
        "inconsistency, we are taking the entire process down.",
        "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (docs/FORMATS.md §11)",
    ),
    FailureRule(
        "nccl_error_in",
        "NCCL error in: ",
        re.compile(r"NCCL error in: \S+"),
        fixed("nccl_error"),
        "[E ProcessGroupNCCL.cpp:737] NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1333, unhandled system error (run with NCCL_DEBUG=INFO for "
        "details), NCCL version 2.18.6",
        "torch/csrc/distributed/c10d C10D_NCCL_CHECK (docs/FORMATS.md §11)",
    ),
    FailureRule(
        "nccl_warn",
        " NCCL WARN ",
        re.compile(r"\S+:\d+:\d+ \[\d+\] (?:\S+:\d+ (?:\(\w+\) )?)?NCCL WARN "),
        fixed("nccl_error"),
        "node001:312247:326969 [0] transport/net_socket.cc:547 NCCL WARN NET/Socket : "
        "peer 10.0.0.2<53412> shutdown",
        "NCCL src/debug.cc (docs/FORMATS.md §11): no event, see the module docstring",
        kind=None,
    ),
    FailureRule(
        "cpp_terminate",
        "terminate called after throwing",
        re.compile(r"terminate called after throwing an instance of"),
        fixed("abort"),
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        "libstdc++ std::terminate (docs/FORMATS.md §11): its ``what():`` line carries the cause",
        kind=None,
    ),
    FailureRule(
        "cpp_what",
        "what():",
        re.compile(r"^\s*what\(\):\s+(?P<reason>.*)"),
        lambda m: _classified(m["reason"], "abort"),
        "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread "
        "terminated with exception: [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=808, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600020 "
        "milliseconds before timing out.",
        "libstdc++ std::terminate after c10::DistBackendError (docs/FORMATS.md §11)",
    ),
    FailureRule(
        "cpp_exception_origin",
        "Exception raised from ",
        re.compile(r"^Exception raised from \S+ at \S+ \(most recent call first\):"),
        fixed("abort"),
        "Exception raised from c10_cuda_check_implementation at "
        "/pytorch/c10/cuda/CUDAException.cpp:43 (most recent call first):",
        "c10/util/Exception.cpp c10::Error backtrace header (public/nccl/protenix_217_*): part of "
        "the failure whose message precedes it, no event",
        kind=None,
    ),
    FailureRule(
        "cpp_frame",
        "frame #",
        re.compile(r"^frame #\d+: "),
        fixed("abort"),
        "frame #0: c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, "
        "std::char_traits<char>, std::allocator<char> >) + 0x98 (0x7fa9633785e8 in "
        "/root/miniconda3/lib/python3.11/site-packages/torch/lib/libc10.so)",
        "c10 backtrace frame lines (public/nccl/protenix_217_*): no event",
        kind=None,
    ),
    FailureRule(
        "fatal_python_error",
        "Fatal Python error: ",
        re.compile(r"^Fatal Python error: (?P<reason>Aborted|Segmentation fault|Bus error)"),
        lambda m: {"Aborted": "abort", "Segmentation fault": "segfault"}.get(m["reason"], "signal"),
        "Fatal Python error: Aborted",
        "CPython faulthandler (enabled by torch.distributed) after SIGABRT / SIGSEGV",
    ),
)
