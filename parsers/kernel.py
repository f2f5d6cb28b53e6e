"""Kernel log lines: NVIDIA Xid errors, GPUs fallen off the bus, the Linux OOM killer.

These come from ``dmesg`` / ``journalctl -k`` (docs/FORMATS.md §14), often collected next to the
training log. Xid format from NVIDIA/open-gpu-kernel-modules ``kernel_rc.c`` (595.45.04):
``NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, %s`` (MIG: ``(PCI:… GPU-I:%02u)``).
The line prefix gives the time (``parsers/failures.py``): ``dmesg`` seconds since boot (no
wall time: ``None``), ``dmesg -T`` ``[Sun Feb 20 06:16:58 2022]``, journalctl ``Feb 14 05:03:41
host kernel:`` (no year: taken from context).

Not failures (recognised, no event): Xid 63 and 92 (a row-remap record, a high single-bit ECC
rate: NVIDIA's Xid catalog calls them informational) and an Xid ``caused by previous Xid N``
(a consequence of N, which has its own line).
"""

from __future__ import annotations

import re

from ckpt_advisor.parsers.failure_rule import FailureRule, fixed

INFORMATIONAL_XIDS = frozenset({63, 92})


def _xid_class(m: re.Match[str]) -> str:
    return f"gpu_xid_{int(m['xid'])}"


PARSER_NAME = "kernel"
"""``Event.parser`` of the events of these rules."""

RULES: tuple[FailureRule, ...] = (
    FailureRule(
        "xid_consequence",
        "caused by previous Xid",
        re.compile(r"NVRM: Xid \([^)]*\): \d{1,4},.*caused by previous Xid \d+"),
        fixed("gpu_xid_45"),
        "NVRM: Xid (PCI:0000:3b:00): 45, pid=1818990, name=python3, Ch 00000001 caused by "
        "previous Xid 149",
        "open-gpu-kernel-modules kernel_rc.c; open-gpu-kernel-modules#1150 (docs/FORMATS.md §14)",
        kind=None,
    ),
    FailureRule(
        "xid_informational",
        "NVRM: Xid (",
        re.compile(r"NVRM: Xid \([^)]*\): (?:63|92),"),
        fixed("gpu_xid_63"),
        "NVRM: Xid (PCI:0000:3b:00): 63, pid=1818990, name=python3, Row Remapper: New row marked "
        "for remapping, reset gpu to activate.",
        "open-gpu-kernel-modules kernel_rc.c (docs/FORMATS.md §14): informational, no event",
        kind=None,
    ),
    FailureRule(
        "xid",
        "NVRM: Xid (",
        re.compile(r"NVRM: Xid \([^)]*\): (?P<xid>\d{1,4}),(?: pid=(?P<pid>\d+),)?"),
        _xid_class,
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1818990, name=python3, GPU has fallen off the bus.",
        "open-gpu-kernel-modules kernel_rc.c (docs/FORMATS.md §14); the pid tells two incidents "
        "apart (public/kernel/tinygrad_6947_xid31_two_pids.log)",
        incident=lambda m: m["pid"] or "",
    ),
    FailureRule(
        "fallen_off_bus",
        "fallen off the bus and is not responding",
        re.compile(r"fallen off the bus and is not responding"),
        fixed("gpu_fallen_off_bus"),
        "NVRM: fallen off the bus and is not responding to commands.",
        "open-gpu-kernel-modules arch/nvalloc/unix/src/osinit.c (docs/FORMATS.md §14)",
    ),
    FailureRule(
        "oom_killer",
        "ut of memory: Killed process",
        re.compile(r"(?:Memory cgroup o|O)ut of memory: Killed process \d+"),
        fixed("host_oom"),
        "Out of memory: Killed process 2385922 (python) total-vm:102400000kB, "
        "anon-rss:98304000kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:200000kB "
        "oom_score_adj:0",
        "linux mm/oom_kill.c __oom_kill_process",
    ),
    FailureRule(
        "oom_kill_summary",
        "oom-kill:",
        re.compile(r"oom-kill:constraint="),
        fixed("host_oom"),
        "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,"
        "global_oom,task_memcg=/user.slice,task=python,pid=2385922,uid=1000",
        "linux mm/oom_kill.c dump_oom_summary",
    ),
    FailureRule(
        "oom_invoked",
        " invoked oom-killer: ",
        re.compile(r"\S+ invoked oom-killer: gfp_mask="),
        fixed("host_oom"),
        "python invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), "
        "order=0, oom_score_adj=0",
        "linux mm/oom_kill.c dump_header",
    ),
)
