"""The estimator's columnar read, chunk by chunk, for every backend.

A job's timed events arrive as chunks of packed numbers (:data:`~agent.store.schema.NUMBERS`
records, in time order, ties by id; a few tens of thousands of rows each) and
:class:`ColumnBuilder` turns each chunk into compact per-row columns at once: four float64
columns, and one int32 group number per row naming the event's source, parser, timing flag,
kind and tier. Reading ten million events as one buffer took a 400 MB aggregate in the
database, a 400 MB copy into Python and four more copies into columns, every one of them
fresh pages for the kernel to fault in (about 20 ms per 80 MB array on the 2-core bench
machine): the estimate's read grew 15x for 10x the events. Chunks of a few MB are reused from
the heap, so only the output columns are new memory.

numpy only; the caller (:meth:`agent.store.queries.SqlQueries.event_columns`) reads the
chunks and resolves each new group key with one indexed look-up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ckpt_advisor.agent.store.records import EventColumns
from ckpt_advisor.agent.store.schema import NUMBER_FIELDS

NUMBERS_DTYPE = np.dtype([(n, "<f8") for n in NUMBER_FIELDS] + [("key", "<u8")])
"""One ``events.numbers`` record as numpy reads it (40 bytes)."""

Group = tuple[str, str, int, str, "str | None"]
"""An event group: source, parser, timing flag (0/1), kind, tier (None: none)."""


def _unknown_as_nan(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``values`` (a fresh copy) with +inf as NaN: NULL is packed as +inf (1e999), how SQLite
    reads NULL into a packed number."""
    values[values == np.inf] = np.nan
    return values


class ColumnBuilder:
    """Columns of the events of ``kinds``, built from chunks of packed numbers in time order.

    Args:
        kinds: the kind strings asked for (events of other kinds are dropped).
        resolve: group key and the time (epoch s) of one of its events → its :data:`Group`
            (called once per distinct key, in the order keys are first met).
    """

    def __init__(self, kinds: Sequence[str], resolve: Callable[[int, float], Group]) -> None:
        self.kinds = tuple(kinds)
        self._resolve = resolve
        self._ids: dict[int, int] = {}  # group key -> group number
        self._groups: list[Group] = []
        self._first: list[int] = []  # per group: row (in the kept rows) of its first event
        self._size: list[int] = []  # per group: its kept events
        self._kind: list[int] = []  # per group: index into kinds, -1 when not asked
        self._parts: dict[str, list[npt.NDArray[Any]]] = {
            name: [] for name in (*NUMBER_FIELDS, "group")
        }
        self._rows = 0

    def add(self, chunk: npt.NDArray[Any]) -> None:
        """Take the next chunk (shape (m,), :data:`NUMBERS_DTYPE`, following the last)."""
        if not chunk.size:
            return
        keys = chunk["key"]
        change = np.ones(keys.size, np.bool_)  # runs of equal keys are long: look at runs
        np.not_equal(keys[1:], keys[:-1], out=change[1:])
        starts = np.flatnonzero(change)
        distinct, at = np.unique(keys[starts], return_index=True)
        new = [key for key in distinct.tolist() if key not in self._ids]
        for key, i in zip(distinct.tolist(), starts[at].tolist(), strict=True):
            if key not in self._ids:
                self._add_group(key, float(chunk["time_s"][i]))
        local = np.array([self._ids[k] for k in distinct.tolist()], np.int32)
        group = local[np.searchsorted(distinct, keys)]
        if min(self._kind[g] for g in local.tolist()) < 0:
            asked = np.array(self._kind, np.intp)[group] >= 0
            chunk, group = chunk[asked], group[asked]
        for g in (self._ids[key] for key in new):
            hit = np.flatnonzero(group == g)
            if hit.size:
                self._first[g] = self._rows + int(hit[0])
        for g, n in enumerate(np.bincount(group, minlength=len(self._groups)).tolist()):
            self._size[g] += n
        for name in NUMBER_FIELDS:
            values = chunk[name].copy()
            self._parts[name].append(values if name == "time_s" else _unknown_as_nan(values))
        self._parts["group"].append(group)
        self._rows += group.size

    def _add_group(self, key: int, time_s: float) -> None:
        """Number the group ``key`` met first at ``time_s`` (its next number)."""
        self._ids[key] = len(self._groups)
        group = self._resolve(key, time_s)
        self._groups.append(group)
        self._kind.append(self.kinds.index(group[3]) if group[3] in self.kinds else -1)
        self._first.append(-1)
        self._size.append(0)

    def columns(
        self,
        failures: Sequence[Any],
        untimed: Sequence[Any],
        host_dated: Mapping[str, Sequence[Any]] | None = None,
    ) -> EventColumns:
        """The columns of every chunk added (their parts are released as each is joined).

        Args:
            failures: ``(failure_class, planned)`` of the job's timed failures in time order.
            untimed: ``(parser, count, first id)`` of its log events without time, per parser.
            host_dated: per log source without stamps, whether each of its events of the
                kinds (in time order, ties by id) was dated by the host; a source whose count
                disagrees with its rows here is taken as host-dated throughout.
        """
        from ckpt_advisor.rules.timeline import tier_code

        numbers = {name: self._joined(name, np.float64) for name in NUMBER_FIELDS}
        group = self._joined("group", np.int32)
        groups = self._groups
        logs = [
            (g, n, i)
            for g, n, i, k in zip(groups, self._size, self._first, self._kind, strict=True)
            if k >= 0 and not g[2]
        ]
        by_source: dict[str, int] = {}
        for g, _, i in logs:
            by_source[g[0]] = min(i, by_source.get(g[0], i))
        first_of_source = np.zeros(group.size, np.bool_)
        first_of_source[list(by_source.values())] = True
        dated = np.zeros(group.size, np.bool_)
        for source, flags in (host_dated or {}).items():
            of_source = [g[0] == source and not g[2] for g in groups]
            rows = np.flatnonzero(_spread(group, of_source, np.bool_))
            found = np.asarray(flags, np.bool_)
            dated[rows] = found if found.size == rows.size else True
        first_row: dict[str, float] = {}  # per source: its first kept row (inf: none)
        for g, n, i in zip(groups, self._size, self._first, strict=True):
            at = float(i) if n else float("inf")
            first_row[g[0]] = min(at, first_row.get(g[0], at))
        sources = tuple(sorted(first_row, key=lambda name: (first_row[name], name)))
        code = {name: i for i, name in enumerate(sources)}
        return EventColumns(
            kinds=self.kinds,
            time_s=numbers["time_s"],
            kind=_spread(group, self._kind, np.int8),
            step=numbers["step"],
            duration_s=numbers["duration_s"],
            persist_s=numbers["persist_s"],
            from_timing_file=_spread(group, [bool(g[2]) for g in groups], np.bool_),
            tier=_spread(group, [tier_code(g[4]) for g in groups], np.int8),
            first_of_source=first_of_source,
            failure_class=tuple(r[0] for r in failures),
            failure_planned=np.array([bool(r[1]) for r in failures], np.bool_),
            parser_counts=parser_counts([(g[1], n, i) for g, n, i in logs], untimed),
            host_dated=dated,
            sources=sources,
            source=_spread(group, [code[g[0]] for g in groups], np.int32),
        )

    def _joined(self, name: str, dtype: Any) -> npt.NDArray[Any]:
        parts = self._parts.pop(name)
        return np.concatenate(parts) if parts else np.zeros(0, dtype)


def _spread(group: npt.NDArray[np.int32], values: Sequence[Any], dtype: Any) -> Any:
    """``values`` (one per group) at each row of ``group``, as ``dtype``."""
    return np.array(values, dtype)[group] if values else np.zeros(group.size, dtype)


def parser_counts(timed: Sequence[tuple[str, int, int]], untimed: Sequence[Any]) -> dict[str, int]:
    """Log events per parser, most first, ties by the first seen in time order (events
    without time after those with, by id): the order of ``Counter.most_common`` over
    :meth:`~agent.store.queries.SqlQueries.events`. ``timed``: (parser, count, index of the
    first) of each group of timed log events; ``untimed``: (parser, count, first id) of the
    events without time."""
    ranks: dict[str, list[Any]] = {}
    for parser, n, first in timed:
        rank = ranks.setdefault(parser, [0, (0, first)])
        rank[0] += n
        rank[1] = min(rank[1], (0, first))
    for parser, n, first_id in untimed:
        rank = ranks.setdefault(parser, [0, (1, first_id)])
        rank[0] += n
    ranked = sorted(ranks.items(), key=lambda item: (-item[1][0], item[1][1]))
    return {parser: n for parser, (n, _) in ranked}
