"""The ``failure_class`` vocabulary: every class a parser can give, in one table.

The rules layer relies on these names: ``rules/interruptions.py`` ``GENERIC_FAILURE_CLASSES`` must
equal :data:`GENERIC_CLASSES` (a test checks it), and a burst's root cause is its first class
that is not generic, else its first that is no :data:`CONSEQUENCE_CLASSES` one. ``planned``
classes censor MTBF exposure but are not failures (DESIGN.md "Which interruptions count toward
M").

=============================== ======= ======= ==================================================
class                           planned generic meaning
=============================== ======= ======= ==================================================
cuda_oom                                        GPU memory exhausted (``CUDA out of memory``)
cuda_illegal_memory_access                      ``an illegal memory access was encountered``
cuda_ecc                                        uncorrectable ECC error reported by CUDA
cuda_error                                      any other ``CUDA error: …``
nccl_timeout                                    c10d watchdog: a collective timed out
nccl_hang                                       c10d heartbeat monitor: the watchdog itself hung
nccl_error                                      ``NCCL error in: …``, ``DistBackendError``
dist_init_timeout                               ``Timed out initializing process group`` (a peer
                                                never joined the rendezvous)
host_oom                                        Linux OOM killer, Slurm ``oom_kill`` event
gpu_xid_<N>                                     NVIDIA driver Xid N (kernel log): gpu_xid_79
gpu_fallen_off_bus                              ``fallen off the bus`` without an Xid line
node_failure                                    Slurm ``NODE FAILURE``, srun ``Node failure on``
preemption                                      Slurm ``DUE TO PREEMPTION`` (kept apart by its name)
slurm_time_limit                yes             Slurm ``DUE TO TIME LIMIT``
slurm_cancelled                 yes             ``scancel`` (``CANCELLED AT …`` with no reason)
slurm_requeue                   yes             ``DUE TO JOB REQUEUE`` (``scontrol requeue``)
keyboard_interrupt              yes             ``KeyboardInterrupt`` (Ctrl-C)
python_exception                        yes     a traceback naming none of the above
child_failed                            yes     torchelastic ``ChildFailedError`` without a cause
exit_code                               yes     a process exited non-zero (launcher, srun)
killed                                  yes     SIGKILL (exit code -9 / 137, ``Killed``)
abort                                   yes     SIGABRT (-6, ``Aborted``)
segfault                                yes     SIGSEGV (-11, ``Segmentation fault``)
bus_error                               yes     SIGBUS (-7, ``Bus error``, a DataLoader worker's
                                                ``Unexpected bus error``)
terminated                              yes     SIGTERM (-15, ``Terminated``) not from Slurm
signal                                  yes     any other signal
slurm_task_failure                      yes     Slurm ``DUE TO TASK FAILURE`` / ``FAILED``
ray_worker_died                         yes     Ray: ``A worker died or was killed``, ``The actor
                                                died unexpectedly`` (cause only guessed)
peer_lost                               yes     a collective's peer went away (gloo ``Connection
                                                reset by peer``): another process's death, so a
                                                burst's root cause only if nothing else is
unknown                                 yes     (rules layer) a failure with no class
=============================== ======= ======= ==================================================
"""

from __future__ import annotations

import re

PLANNED_CLASSES = frozenset(
    {"slurm_time_limit", "slurm_cancelled", "slurm_requeue", "keyboard_interrupt"}
)
"""Classes of planned ends: events carry ``planned=True``."""

GENERIC_CLASSES = frozenset(
    {
        "python_exception",
        "child_failed",
        "exit_code",
        "killed",
        "abort",
        "segfault",
        "bus_error",
        "terminated",
        "signal",
        "slurm_task_failure",
        "ray_worker_died",
        "peer_lost",
        "unknown",
    }
)
"""Classes that say *that* a process died, not *why*; see ``rules/interruptions.py``."""

CONSEQUENCE_CLASSES = frozenset({"peer_lost"})
"""Generic classes that report another process's death as its peers saw it: a burst's root
cause only when it holds no other class (a rank killed by a signal prints no traceback, its
peers' collectives fail: torchrun's root cause is the signal)."""

SPECIFIC_CLASSES = frozenset(
    {
        "cuda_oom",
        "cuda_illegal_memory_access",
        "cuda_ecc",
        "cuda_error",
        "nccl_timeout",
        "nccl_hang",
        "nccl_error",
        "dist_init_timeout",
        "host_oom",
        "gpu_fallen_off_bus",
        "node_failure",
        "preemption",
    }
)

_XID = re.compile(r"gpu_xid_\d{1,4}")


def is_known_class(name: str) -> bool:
    """True for a name of the vocabulary above (``gpu_xid_<N>`` for any N)."""
    return (
        name in PLANNED_CLASSES
        or name in GENERIC_CLASSES
        or name in SPECIFIC_CLASSES
        or _XID.fullmatch(name) is not None
    )


_BY_SIGNAL = {9: "killed", 6: "abort", 11: "segfault", 7: "bus_error", 15: "terminated"}
"""Linux signal numbers (the logs come from Linux nodes, whatever runs the parser)."""
_BY_STRSIGNAL = {
    "Killed": "killed",
    "Aborted": "abort",
    "Segmentation fault": "segfault",
    "Bus error": "bus_error",
    "Terminated": "terminated",
}


_SIGNAL_NUMBERS = {"SIGKILL": 9, "SIGABRT": 6, "SIGBUS": 7, "SIGSEGV": 11, "SIGTERM": 15}
"""Linux numbers of the signal names launchers and supervisors print (``SIGKILL``)."""


def signal_class(signal: int | str) -> str:
    """Class of a death by ``signal``: a number (9), a name (``"SIGKILL"``) or ``strsignal``
    text (``"Killed"``).

    Linux numbering (SIGKILL 9, SIGABRT 6, SIGBUS 7, SIGSEGV 11, SIGTERM 15); others are
    ``signal``. ``strsignal`` text is glibc's (``Killed``, ``Bus error``), as bash and srun
    print it, with or without `` (core dumped)``.
    """
    if isinstance(signal, str):
        text = signal.strip().removesuffix(" (core dumped)")
        if text in _SIGNAL_NUMBERS:
            return _BY_SIGNAL.get(_SIGNAL_NUMBERS[text], "signal")
        return _BY_STRSIGNAL.get(text, "signal")
    return _BY_SIGNAL.get(signal, "signal")


def exit_code_class(code: int) -> str:
    """Class of a launcher exit code: negative = killed by that signal (Python ``Popen``)."""
    return signal_class(-code) if code < 0 else "exit_code"
