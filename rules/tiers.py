"""Checkpoint tiers, which interruptions each survives, and the MTBF per tier.

Large jobs save to more than one place: often to host memory or local disk (DLRover Flash
Checkpoint, NeMo/NVRx local checkpointing) and rarely to shared storage. A restart can resume
from a fast copy only when the interruption left that copy in place: a crashed process leaves
host memory intact, a lost node does not. DLRover reports that "about 75% of the faults could
be recovered by restarting the training process. These faults mainly include NCCL anomalies or
network jitter" (``docs/blogs/flash_checkpoint.md``, DLRover, on jobs of thousands of GPUs).

:data:`DEFAULT_SURVIVAL` names, for each failure class of the parsers' vocabulary
(``parsers/vocabulary.py``; a test checks that every class has an entry), the least durable tier
whose copy survives it, assuming the job restarts on the same hosts when they are alive (an
in-place restart by torchrun/DLRover's elastic agent). A tier survives whatever a less durable
tier survives (``memory`` < ``local`` < ``persistent``). A class missing from a table (a new
one) is taken to need the persistent copy: wrongly assuming that a fast copy survived costs
more than one persistent restart too many. The table is configurable: :func:`with_overrides`.

=============================== ========== =========================================================
class                           survived   why
                                from
=============================== ========== =========================================================
cuda_oom                        memory     a Python exception in the worker; the host is alive
cuda_illegal_memory_access      memory     a CUDA context error in one process; the host is alive
cuda_error                      memory     a CUDA API error in one process; the host is alive
cuda_ecc                        persistent an uncorrectable ECC error: the GPU needs a reset and the
                                           node is drained
nccl_timeout                    memory     a collective timed out (network jitter, a straggler); the
                                           hosts are alive (DLRover: "NCCL anomalies")
nccl_hang                       memory     the watchdog itself hung; processes die, hosts live
nccl_error                      memory     a communicator error; the workers restart in place
host_oom                        local      the kernel OOM killer kills processes and can kill the
                                           one holding the shared-memory copy; the disk is intact
gpu_xid_13/31/43                memory     Xids whose causes NVIDIA's Xid table lists a user
                                           application error among (graphics engine exception,
                                           GPU memory page fault, GPU stopped processing)
gpu_xid_<other N>               persistent other Xids call for a GPU reset or node service (Xid 48
                                           double-bit ECC, 74 NVLink, 79 fallen off the bus, ...)
gpu_fallen_off_bus              persistent the node must reboot and is usually replaced
node_failure                    persistent the host and its memory and disks are gone
preemption                      persistent the allocation goes to another job; the run moves
slurm_time_limit                persistent (planned) a new allocation, likely other nodes
slurm_cancelled                 persistent (planned) the job ends; a new one starts elsewhere
slurm_requeue                   persistent (planned) requeued onto a new allocation
keyboard_interrupt              persistent (planned) the launcher stops too; memory is freed
python_exception                memory     a software error in the worker; the host is alive
child_failed                    memory     torchelastic saw a worker die; its agent restarts it
exit_code                       memory     a worker exited non-zero; its host is alive
killed                          memory     SIGKILL of a worker with no OOM or node line beside it
abort                           memory     SIGABRT (a failed assertion, a C++ exception)
segfault                        memory     SIGSEGV in a worker process
bus_error                       memory     SIGBUS in a worker (often a DataLoader worker out of
                                           /dev/shm); the host is alive
ray_worker_died                 memory     Ray reports a worker or actor death from a live raylet
                                           (a memory-monitor kill is ``host_oom``)
peer_lost                       persistent a collective's peer went away and nothing says why:
                                           it may be a lost node
dist_init_timeout               persistent a peer never joined the process group: it may be a
                                           lost node, so only the persistent copy is certain
terminated                      persistent SIGTERM not from Slurm: pod eviction or a drain; the
                                           pod, and its shared memory, goes away
signal                          memory     another signal to a worker process
slurm_task_failure              persistent Slurm ended the job (FAILED): the next run is a new
                                           allocation
unknown                         persistent a run that stopped silently: a lost node, a killed pod
=============================== ========== =========================================================

Peer replication (Gemini-style copies in other nodes' memory) survives a single node loss:
such a job overrides ``node_failure`` (and ``gpu_fallen_off_bus``) to ``memory``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from ckpt_advisor.rules.mtbf import MtbfEstimate, estimate_mtbf


class Tier(StrEnum):
    """Where a checkpoint lives, least durable first (the ``tier`` of a timing record)."""

    MEMORY = "memory"
    """Host RAM or shared memory (DLRover Flash Checkpoint, NVRx in-memory)."""
    LOCAL = "local"
    """Node-local disk (NVMe, NeMo local checkpointing)."""
    PERSISTENT = "persistent"
    """Shared or remote storage (parallel file system, object store)."""

    @property
    def rank(self) -> int:
        """0 for memory, 1 for local, 2 for persistent: a tier survives what lower ranks do."""
        return _RANK[self]


_RANK = {Tier.MEMORY: 0, Tier.LOCAL: 1, Tier.PERSISTENT: 2}


@dataclass(frozen=True, slots=True)
class Survival:
    """The least durable tier that survives one failure class, and why.

    Attributes:
        tier: that tier.
        reason: one sentence for the table and the docs.
    """

    tier: Tier
    reason: str


_M, _L, _P = Tier.MEMORY, Tier.LOCAL, Tier.PERSISTENT

XID_CLASS_PREFIX = "gpu_xid_"
"""Classes ``gpu_xid_<N>``: looked up by name first, then under :data:`XID_DEFAULT`."""
XID_DEFAULT = "gpu_xid_*"
"""The entry for an Xid not listed by number."""

DEFAULT_SURVIVAL: Mapping[str, Survival] = {
    "cuda_oom": Survival(_M, "a Python exception in the worker; the host is alive"),
    "cuda_illegal_memory_access": Survival(_M, "a CUDA context error in one process"),
    "cuda_error": Survival(_M, "a CUDA API error in one process; the host is alive"),
    "cuda_ecc": Survival(_P, "uncorrectable ECC: the GPU needs a reset, the node is drained"),
    "nccl_timeout": Survival(_M, "a collective timed out; the hosts are alive"),
    "nccl_hang": Survival(_M, "the NCCL watchdog hung; processes are killed, hosts live"),
    "nccl_error": Survival(_M, "a communicator error; the workers restart in place"),
    "host_oom": Survival(_L, "the OOM killer can kill the holder of the shared memory"),
    "gpu_xid_13": Survival(_M, "Xid 13 graphics engine exception: often the application"),
    "gpu_xid_31": Survival(_M, "Xid 31 GPU memory page fault: often the application"),
    "gpu_xid_43": Survival(_M, "Xid 43 GPU stopped processing: often the application"),
    XID_DEFAULT: Survival(_P, "the Xid calls for a GPU reset or node service"),
    "gpu_fallen_off_bus": Survival(_P, "the node must reboot and is usually replaced"),
    "node_failure": Survival(_P, "the host and its memory and disks are gone"),
    "preemption": Survival(_P, "the allocation goes to another job"),
    "slurm_time_limit": Survival(_P, "planned: a new allocation, likely other nodes"),
    "slurm_cancelled": Survival(_P, "planned: the job ends; a new one starts elsewhere"),
    "slurm_requeue": Survival(_P, "planned: requeued onto a new allocation"),
    "keyboard_interrupt": Survival(_P, "planned: the launcher stops too; memory is freed"),
    "python_exception": Survival(_M, "a software error in the worker; the host is alive"),
    "child_failed": Survival(_M, "torchelastic saw a worker die; its agent restarts it"),
    "exit_code": Survival(_M, "a worker exited non-zero; its host is alive"),
    "killed": Survival(_M, "SIGKILL of a worker with no OOM or node line beside it"),
    "abort": Survival(_M, "SIGABRT in a worker (an assertion, a C++ exception)"),
    "segfault": Survival(_M, "SIGSEGV in a worker process"),
    "bus_error": Survival(_M, "SIGBUS in a worker (often out of /dev/shm); the host is alive"),
    "ray_worker_died": Survival(_M, "Ray reports a worker death from a live raylet"),
    "peer_lost": Survival(_P, "a collective's peer went away: it may be a lost node"),
    "dist_init_timeout": Survival(_P, "a peer never joined: it may be a lost node"),
    "terminated": Survival(_P, "SIGTERM from an eviction or drain: the pod goes away"),
    "signal": Survival(_M, "another signal to a worker process"),
    "slurm_task_failure": Survival(_P, "Slurm ended the job: the next run is a new allocation"),
    "unknown": Survival(_P, "a run that stopped silently: a lost node, a killed pod"),
}
"""Failure class -> the least durable tier that survives it (module docstring: the reasons)."""

_XID = re.compile(r"gpu_xid_\d{1,4}")
MISSING = Survival(_P, "a class the table does not name: taken to need the persistent copy")


def surviving_tier(
    failure_class: str, table: Mapping[str, Survival] = DEFAULT_SURVIVAL
) -> Survival:
    """The least durable tier whose copy survives an interruption of ``failure_class``.

    Looked up by name; an Xid class ``gpu_xid_<N>`` not listed by number takes the
    :data:`XID_DEFAULT` entry; any other class the table lacks gets :data:`MISSING`
    (persistent).
    """
    found = table.get(failure_class)
    if found is not None:
        return found
    if _XID.fullmatch(failure_class) and XID_DEFAULT in table:
        return table[XID_DEFAULT]
    return MISSING


def with_overrides(
    overrides: Mapping[str, str], table: Mapping[str, Survival] = DEFAULT_SURVIVAL
) -> dict[str, Survival]:
    """``table`` with some classes mapped to another tier (a job's configuration).

    Args:
        overrides: failure class -> tier name (``"memory"``, ``"local"``, ``"persistent"``),
            e.g. ``{"node_failure": "memory"}`` for a job with peer-replicated memory copies.

    Returns:
        A new table; overridden entries say "configured".

    Raises:
        ValueError: a tier name is not one of :class:`Tier`, or a class name is not snake_case;
            the message names the class.
    """
    out = dict(table)
    for name, tier in overrides.items():
        if not re.fullmatch(r"[a-z][a-z0-9_]*|gpu_xid_\*", name):
            raise ValueError(f"failure class {name!r} is not a snake_case class name")
        try:
            out[name] = Survival(Tier(tier), "configured")
        except ValueError:
            known = ", ".join(t.value for t in Tier)
            raise ValueError(f"{name}: tier must be one of {known}, got {tier!r}") from None
    return out


@dataclass(frozen=True, slots=True)
class TierRates:
    """A job's interruptions split by whether a fast tier's copy survives them.

    Competing risks over one exposure (Meeker & Escobar 1998, section 15.2): the interruptions
    the fast tier survives and the others are two Poisson processes whose rates add up to the
    job's, each estimated with :func:`rules.mtbf.estimate_mtbf` over the same running time.

    Attributes:
        fast_tier: the tier asked about (memory or local).
        recoverable: M of the interruptions a copy in ``fast_tier`` survives (``M1``).
        persistent: M of the interruptions that need the persistent copy (``M2``).
        tier_of_class: each counted class -> the least durable tier that survives it.
    """

    fast_tier: Tier
    recoverable: MtbfEstimate
    persistent: MtbfEstimate
    tier_of_class: dict[str, Tier] = field(default_factory=dict)

    @property
    def recoverable_fraction(self) -> float | None:
        """Share of the interruptions the fast tier survives, None with none counted."""
        total = self.recoverable.n_failures + self.persistent.n_failures
        return self.recoverable.n_failures / total if total else None


def tier_rates(
    failure_classes: Mapping[str, int],
    exposure_s: float,
    *,
    fast_tier: Tier = Tier.MEMORY,
    table: Mapping[str, Survival] = DEFAULT_SURVIVAL,
    confidence: float = 0.9,
) -> TierRates:
    """Split a job's counted interruptions into those ``fast_tier`` survives and the rest.

    Args:
        failure_classes: class -> unplanned interruptions of that class (the estimate's
            ``failure_classes``).
        exposure_s: running time they happened in, seconds, >= 0.
        fast_tier: the fast tier (``memory`` or ``local``).
        table: the survival table (:data:`DEFAULT_SURVIVAL`, or :func:`with_overrides`).
        confidence: of the chi-square intervals, in (0, 1).

    Returns:
        Both MTBFs with their intervals.

    Raises:
        ValueError: ``fast_tier`` is persistent, a count is negative, a bad exposure.
    """
    if fast_tier is Tier.PERSISTENT:
        raise ValueError("fast_tier must be memory or local, not persistent")
    tier_of_class = {name: surviving_tier(name, table).tier for name in failure_classes}
    if any(n < 0 for n in failure_classes.values()):
        raise ValueError("failure class counts must be >= 0")
    n_fast = sum(
        n for name, n in failure_classes.items() if tier_of_class[name].rank <= fast_tier.rank
    )
    n_rest = sum(failure_classes.values()) - n_fast
    return TierRates(
        fast_tier,
        estimate_mtbf(exposure_s, n_fast, confidence=confidence),
        estimate_mtbf(exposure_s, n_rest, confidence=confidence),
        tier_of_class,
    )
