"""An HF Trainer save read as one block: the pattern of its lines, for the buffer path.

In an event-dense HF log most lines fed are a save's own: ``Saving model checkpoint to``, two
``Configuration saved in``, blank lines, ``Writing model shards`` bars, ``Model weights saved
in`` (transformers 5.24.0 ``trainer.py`` ``_save``, ``configuration_utils.py``,
``modeling_utils.py``; docs/FORMATS.md §1; ``bench/inputs.py``'s dense log). Fed one by one they
cost a Python call chain each; :meth:`parsers.hf_trainer.HfTrainer.took_save_block` matches
them with one :func:`save_block` match instead and applies them at once, with the state and
events that feeding them one by one gives (``tests/parsers/test_buffers.py`` proves it).
"""

from __future__ import annotations

import functools
import re

_STAMP = rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
_THING = rb"[A-Za-z]+(?: (?!saved in |Saving model)[A-Za-z]+)*"
_SAVED_IN = (
    rb"\[[A-Z]+\|[\w.-]+:\d+\] {stamp} >> " + _THING + rb" saved in (?P=dir)/"
    rb"(?:(?!it/s|s/it|%\|)[^\s\x1b])*\n"
)
_SHARDS_BAR = (
    rb"Writing model shards: *\d{1,3}%\|(?: |\xe2\x96[\x88-\x8f])*\| *\d{1,15}/\d{1,15} "
    rb"\[[\d:]+<[\d:?]+, *(?:\d{1,15}(?:\.\d{1,15})?|\?)(?:it/s|s/it)\](?:\x1b\[A)?"
)


@functools.cache
def save_block() -> re.Pattern[bytes]:
    """The lines of an HF save in the shape transformers prints them (compiled on first use).

    From the save's start line (explicit format, ``Saving model checkpoint to DIR``, groups
    ``ts``, ``msg``, ``dir``) to its last "saved in" line (group ``last_ts``), through
    (group ``body``):

    * "saved in" lines of ``DIR/…`` stamped as the start (``Configuration saved in`` ×2): the
      stamp :meth:`~parsers.stack.Stack.time_of` has just read, so a cache hit each;
    * blank lines: no keyword, no rate marker, never fed;
    * ``Writing model shards`` bars (two on a line, ``\\x1b[A`` between): no keyword of any
      stack or failure rule, and a last bar with a description, which no stack acts on
      (:meth:`~parsers.stack.Stack.inert_bar`): fed, they change nothing;

    then one "saved in" line of ``DIR/…`` stamped anyhow (``Model weights saved in``). A
    "saved in" line's message holds that phrase once, then its path, and no ``Saving model
    checkpoint to``; its file name (``[\\w.-]``) and path hold no ``\\r``, ``\\x1b``, ``%|``
    or rate marker (a path across ``DIR``'s end is the caller's to check), so the buffer path
    would give it to :meth:`~parsers.hf_trainer.HfTrainer.took_record` as a record; lines
    holding a failure keyword are the caller's to keep out (``limit``). Anything else (a
    traceback, DeepSpeed's lines, a sharded save's index line, sub-steps stamped apart, a
    start glued after a bar) ends the block before it: those lines go one by one.
    """
    return re.compile(
        rb"\[[A-Z]+\|[^\]|\r\n]+:\d+\] (?P<ts>" + _STAMP + rb") >> "
        rb"(?P<msg>Saving model checkpoint to (?P<dir>[^\s\x1b]*[^\s\x1b/])/*)\n"
        rb"(?P<body>(?:\n|(?:"
        + _SHARDS_BAR
        + rb")+\n|"
        + _SAVED_IN.replace(b"{stamp}", rb"(?P=ts)")
        + rb")*)"
        + _SAVED_IN.replace(b"{stamp}", rb"(?P<last_ts>" + _STAMP + rb")")
    )
