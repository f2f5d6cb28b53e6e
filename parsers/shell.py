"""Deaths that only the shell, a supervisor or a DataLoader's signal handler reports.

A process killed by a signal prints nothing itself; what reaches the log is the report of
whoever waited for it (docs/FORMATS.md §17):

* the shell, on a line of its own: bash's ``Killed``, ``Segmentation fault (core dumped)``,
  ``Bus error (core dumped)`` (glibc ``strsignal`` text, localised with the shell's locale:
  ``已杀死``), zsh's lowercase ``segmentation fault (core dumped)``; a non-interactive shell (a
  Slurm batch script) and zsh's job report put the pid and command around it
  (``line 28:  8156 Killed                  python3 main.py``);
* an IDE's run console: PyCharm's ``Process finished with exit code 139 (interrupted by signal
  11: SIGSEGV)``;
* abrt's ``Process 223309 (python3.10) of user 1010 killed by SIGABRT - dumping core``;
* the C signal handler of PyTorch's and Paddle's DataLoader workers: ``ERROR: Unexpected bus
  error encountered in worker.`` (torch/csrc/DataLoader.cpp), ``ERROR: Unexpected BUS error
  encountered in DataLoader worker.`` (Paddle).

Each rule's sample is a line of tests/parsers/fixtures/public/; the class is the signal's
(``parsers/vocabulary.py`` ``signal_class``). Every rank's worker prints its own bus error line:
``parsers/failures.py`` keeps one per interruption.
"""

from __future__ import annotations

import re

from ckpt_advisor.parsers.failure_rule import FailureRule, fixed
from ckpt_advisor.parsers.vocabulary import signal_class

PARSER_NAME = "shell"
"""``Event.parser`` of the events of these rules."""

_WORDS: tuple[tuple[str, str, str], ...] = (
    ("Killed", "Killed", "killed"),
    ("[Ss]egmentation fault", "egmentation fault", "segfault"),
    ("[Bb]us error", "us error", "bus_error"),
    ("已杀死", "已杀死", "killed"),
    ("段错误", "段错误", "segfault"),
)
"""(regex, prefilter literal, class) of the shell's report of a child's death: glibc
``strsignal`` text, as bash prints it, zsh's lowercase form, glibc's zh_CN translation."""

_SHELL_LINE = (
    r"(?:^\s*|(?:^|: )(?:line \d+: +)?\d+ +)(?:{word})(?: ?\(core dumped\)| ?\(核心已转储\))?"
    r"(?:\s*$| {{2,}}\S)"
)
"""The word alone on its line, or a job report ``[line N: ] PID <word>  <command>``."""


def _shell_rules() -> tuple[FailureRule, ...]:
    return tuple(
        FailureRule(
            f"shell_{cls}_{i}",
            keyword,
            re.compile(_SHELL_LINE.format(word=word)),
            fixed(cls),
            _SHELL_SAMPLES[i],
            "bash execute_cmd.c / jobs.c (strsignal text of a child's signal, ' (core dumped)' "
            "on WCOREDUMP), zsh jobs.c; glibc zh_CN translations",
        )
        for i, (word, keyword, cls) in enumerate(_WORDS)
    )


_SHELL_SAMPLES = (
    "/var/spool/slurmd/job00191/slurm_script: line 28:  8156 Killed                  python3 "
    "main.py --prop hform",  # public/slurm/arjuna_52_batch_killed.log
    "14957 segmentation fault (core dumped)  python train.py --pc_list_file "
    "../data/data-split/all-train.txt --data_root",  # public/shell/point2skeleton_6_...
    "Bus error (core dumped)",  # POSTECH-CVLab/point-transformer#50 (issue title)
    "已杀死",  # public/shell/dreamerv3_203_killed_zh.log
    "段错误 (核心已转储)",  # hit-computer/SC-LSTM#9 (quoted in the issue)
)


RULES: tuple[FailureRule, ...] = (
    *_shell_rules(),
    FailureRule(
        "ide_exit_signal",
        "interrupted by signal ",
        re.compile(r"Process finished with exit code \d+ \(interrupted by signal (?P<n>\d+):"),
        lambda m: signal_class(int(m["n"])),
        "Process finished with exit code 139 (interrupted by signal 11: SIGSEGV)",
        "PyCharm run console; public/shell/point2skeleton_6_zsh_segfault.log",
    ),
    FailureRule(
        "abrt_killed",
        " killed by SIG",
        re.compile(r"Process \d+ \([^)]*\) of user \d+ killed by SIG(?P<name>[A-Z]+)"),
        lambda m: signal_class(f"SIG{m['name']}"),
        "Jan 10 13:04:06 host abrt-hook-ccpp: Process 223309 (python3.10) of user 1010 killed by "
        "SIGABRT - dumping core",
        "abrt abrt-hook-ccpp; public/kernel/openmm_4393_xid31_one_pid_three_gpus.log",
    ),
    FailureRule(
        "dataloader_bus_error",
        " error encountered in ",
        re.compile(r"Unexpected (?:bus|BUS) error encountered in (?:DataLoader )?worker"),
        fixed("bus_error"),
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
        "shared memory (shm).",
        "torch/csrc/DataLoader.cpp SIGBUS handler; Paddle fluid/dataloader "
        "(public/generic/paddleocr_9391_bus_error.log)",
    ),
)
