"""One voice: which jobs this agent decides and posts for (docs/RELIABILITY.md, scenario 32).

Every :data:`LEASE_EVERY_S` the agent renews its jobs' leases in the store and takes those it
should hold (``agent/store/sql/fleet.py``: a job's own agent first, another while that one is
away). Only held jobs are estimated, decided on and delivered; the store refuses a decision or
a send for a job another agent holds (fencing), so an agent that stalls past its lease cannot
speak twice. A lease outlives its last renewal by :data:`LEASE_TTL_S`, and an agent is away
after ``AGENT_ALIVE_S``: a dead agent's jobs are taken over within about a minute. With SQLite
(one agent) every configured job is this agent's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from ckpt_advisor.agent.store import RegisteredJob, Store, StoreError

log = logging.getLogger(__name__)

LEASE_TTL_S = 30.0
"""How long a lease lasts after its last renewal."""
LEASE_EVERY_S = 10.0
"""How often leases are renewed and free ones taken."""


class Voice:
    """The jobs this agent speaks for, kept current in the store.

    Args:
        store: where the leases and the registered jobs are.
        jobs: this agent's configured jobs with their sizes (registered on the first renewal
            and after :meth:`configure`).
    """

    def __init__(
        self,
        store: Store,
        jobs: Iterable[RegisteredJob],
        *,
        ttl_s: float = LEASE_TTL_S,
    ) -> None:
        self.store = store
        self.ttl_s = ttl_s
        self.held: set[str] = set()
        self._jobs = list(jobs)
        self._registered = False
        self._lock = threading.Lock()
        self._failing = False

    def configure(self, jobs: Iterable[RegisteredJob]) -> None:
        """Register these jobs instead from the next renewal on (a config reload)."""
        self._jobs = list(jobs)
        self._registered = False

    def renew(self) -> set[str]:
        """Register (when due), renew and take leases; returns the jobs newly taken (those
        held are :attr:`held`). A store error is logged once per outage and leaves nothing
        held (an agent that cannot reach the store cannot speak)."""
        with self._lock:
            try:
                if not self._registered:
                    self.store.register_agent()
                    self.store.register_jobs(self._jobs)
                    self._registered = True
                held = self.store.claim_leases(self.ttl_s)
            except StoreError as exc:
                if not self._failing:
                    log.warning("cannot renew the jobs' leases: %s", exc)
                self._failing, self.held = True, set()
                return set()
            self._failing = False
            taken, lost = held - self.held, self.held - held
            if taken:
                log.info("deciding and posting for %s", ", ".join(sorted(taken)))
            if lost:
                log.info("no longer deciding for %s: another agent does", ", ".join(sorted(lost)))
            self.held = held
        return taken

    def stop(self) -> None:
        """Release every lease and say this agent stopped (a clean shutdown)."""
        try:
            self.store.stop_agent()
        except StoreError as exc:
            log.warning("cannot release the jobs' leases: %s", exc)
        self.held = set()
