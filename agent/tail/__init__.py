"""Following files: the globs of each job in, stored events out, each complete line once.

The facade is :class:`Tailer` (``tailer.py``); see its module for which question each module of
this package answers.
"""

from ckpt_advisor.agent.tail.discovery import WatchSpec
from ckpt_advisor.agent.tail.followed import FilePosition
from ckpt_advisor.agent.tail.reader import ScanStats
from ckpt_advisor.agent.tail.tailer import Tailer

__all__ = ["FilePosition", "ScanStats", "Tailer", "WatchSpec"]
