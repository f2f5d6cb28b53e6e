"""The registered training stacks, each imported when a log first needs it.

A stack module compiles its pattern table when it is imported (a dozen regexes each). An
``ingest`` of an HF log needs one stack; importing the nine at start-up cost every command that
parses a log their compiles (issue 15: "import what a path needs, when it needs it"). So the
registry names each stack's module and class, and carries the literals ``auto`` needs before
it knows the file's stack:

* ``keywords``: the stack's prefilter literals (:attr:`parsers.stack.Stack.keywords`), which
  select the lines offered to detection;
* ``header_literals`` / ``pattern_literals``: the keywords of the headers and patterns that
  identify the stack. :meth:`parsers.stack.Stack.detects` is true only for a piece holding one
  of them (a header or pattern is searched only in a text holding its keyword), so a piece
  holding none is not the stack's, and its module need not be imported to say so.

The literals are copied from the stack modules; tests/parsers/test_registry.py checks them
against every stack class, so a pattern added to a stack fails there until its keyword is
added here. The names of the formats that are no stack (:data:`AUTO`, :data:`JSONL`,
:data:`CSV`) live here too, so that naming a format imports no parser.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ckpt_advisor.parsers.stack import ParseContext, Stack

AUTO = "auto"
"""The format that decides per file: a timing file or a log, then the log's stack."""
JSONL = "timing_jsonl"
"""The JSON Lines checkpoint timing file's format (``parsers/timing.py``)."""
CSV = "timing_csv"
"""The CSV checkpoint timing file's format (``parsers/timing.py``)."""


@dataclass(frozen=True, slots=True)
class StackEntry:
    """One registered stack.

    Attributes:
        name: the stack's format name (``Stack.name``).
        module: its module under ``ckpt_advisor.parsers``.
        cls: its class in that module.
        keywords: its prefilter literals, in :attr:`Stack.keywords` order.
        header_literals: keywords of its headers that identify it (``identifies_stack``).
        shared: those of ``keywords`` that no pattern identifying it has (header keywords,
            wording other stacks print too); the others are its identifying patterns'.
        absorbs: :attr:`Stack.absorbs`.
    """

    name: str
    module: str
    cls: str
    keywords: tuple[str, ...]
    header_literals: tuple[str, ...]
    shared: tuple[str, ...] = ()
    absorbs: tuple[str, ...] = ()

    @property
    def pattern_literals(self) -> tuple[str, ...]:
        """Keywords of the patterns that identify the stack (``identifies_stack``)."""
        return tuple(k for k in self.keywords if k not in self.shared)

    def load(self) -> type[Stack]:
        """The stack class, its module imported on the first call (Python caches it)."""
        stack: type[Stack] = getattr(
            importlib.import_module(f"ckpt_advisor.parsers.{self.module}"), self.cls
        )
        return stack


ENTRIES: tuple[StackEntry, ...] = (
    StackEntry(
        "hf_trainer",
        "hf_trainer",
        "HfTrainer",
        (
            " >> ",
            " - ",
            "] [Rank ",
            "Saving model checkpoint to ",
            " saved in ",
            "Total optimization steps = ",
            "***** Running training *****",
            "Resuming training from checkpoint with epoch ",
            "Continuing training from global step ",
            "Training completed.",
            "{'loss': ",
            "{'train_runtime': ",
            " is about to be saved!",
            "Saving model checkpoint: ",
            "[Torch] Saving ",
            " is ready now!",
        ),
        (" >> ",),
        (
            " >> ",
            " - ",
            " saved in ",
            "] [Rank ",
            " is about to be saved!",
            "Saving model checkpoint: ",
            "[Torch] Saving ",
            " is ready now!",
        ),
        ("deepspeed",),
    ),
    StackEntry(
        "accelerate",
        "accelerate",
        "Accelerate",
        (
            " - ",
            "Saving current state to ",
            "Random states saved in ",
            "Loading states from ",
            "Resumed from checkpoint: ",
        ),
        (),
        (" - ", "Resumed from checkpoint: "),
    ),
    StackEntry(
        "lightning",
        "lightning",
        "Lightning",
        (
            "resuming from a checkpoint that ended",
            "saving model to ",
            "Restored all states from the checkpoint ",
            "`Trainer.fit` stopped: ",
            ", saved checkpoint to ",
            "[rank: ",
            "GPU available: ",
            "lightning",
        ),
        (),
    ),
    StackEntry(
        "nemo",
        "nemo",
        "NeMo",
        (
            "[NeMo ",
            "resuming from a checkpoint that ended",
            "Checkpoint save for step ",
            "Global Checkpoint Save : ",
            "Scheduled async checkpoint save for ",
            ") finalized successfully",
            "Resuming training from checkpoint: ",
            "global_step: ",
        ),
        ("[NeMo ",),
        ("[NeMo ",),
    ),
    StackEntry(
        "deepspeed",
        "deepspeed",
        "DeepSpeed",
        (
            "] [Rank ",
            " is about to be saved!",
            "Saving model checkpoint: ",
            "[Torch] Saving ",
            " is ready now!",
            " checkpoint from ",
            ", skipped=",
            "DeepSpeed info: version=",
        ),
        ("] [Rank ",),
        ("] [Rank ",),
    ),
    StackEntry(
        "megatron",
        "megatron",
        "Megatron",
        (
            "saving checkpoint at iteration",
            "successfully saved ",
            "save-checkpoint",
            "elapsed time per iteration (ms): ",
            "successfully loaded checkpoint from ",
            "checkpoint from ",
            "[before the start of training step] datetime: ",
            "[after training is done] datetime: ",
        ),
        (),
    ),
    StackEntry(
        "megatron_progress",
        "megatron",
        "MegatronProgress",
        (
            "\tJob ID: ",
            "Starting job",
            "Saving async checkpoint",
            "Saved async checkpoint",
            "Saved checkpoint",
        ),
        ("\tJob ID: ",),
        ("\tJob ID: ",),
    ),
    StackEntry(
        "torchtitan",
        "torchtitan",
        "Torchtitan",
        (
            "Finished ",
            "Last step checkpoint completed in ",
            "ing the checkpoint",
            " at last step, step ",
            "Loading the checkpoint ",
            "step:",
            "Training starts at step ",
            "Training completed",
        ),
        ("[titan] ",),
    ),
    StackEntry(
        "composer",
        "composer",
        "Composer",
        (
            ": rank",
            "Saving ",
            "Checkpoint locally saved to ",
            "Loading checkpoint from ",
            "Waiting for checkpoint uploading to finish",
            "autoresume",
            "[batch=",
        ),
        (": rank",),
        (": rank", "Loading checkpoint from ", "[batch="),
    ),
)
"""Every registered stack, in auto-detection order. A new stack is one module plus one entry."""


class StackCandidate:
    """A registered stack that ``auto`` may detect, its module imported and the stack built
    (for ``context``) the first time a piece holds one of its identifying literals.

    :class:`parsers.logs.LogParser` asks a candidate what it asks a :class:`Stack` before a
    stack is detected (:attr:`keywords`, :meth:`detects_by_header`, :meth:`detects`), then
    reads the detected one through :meth:`stack`. Only detection goes through it: once a
    file's stack is known the parser holds that stack itself, so nothing on the per-line path
    after detection consults a candidate.
    """

    __slots__ = ("_detect_literals", "_stack", "absorbs", "context", "entry", "keywords", "name")

    def __init__(self, entry: StackEntry, context: ParseContext) -> None:
        self.entry = entry
        self.context = context
        self.name = entry.name
        self.keywords = entry.keywords
        self.absorbs = entry.absorbs
        self._detect_literals = entry.header_literals + entry.pattern_literals
        self._stack: Stack | None = None
        """The built stack, once needed: only asked whether it detects a piece (no state)."""

    def stack(self) -> Stack:
        """The stack itself (built on the first call)."""
        if self._stack is None:
            self._stack = self.entry.load()(self.context)
        return self._stack

    def detects_by_header(self, text: str) -> bool:
        """:meth:`Stack.detects_by_header` of the stack, which is false without one of its
        identifying header keywords in ``text`` (then nothing is imported)."""
        literals = self.entry.header_literals
        return any(k in text for k in literals) and self.stack().detects_by_header(text)

    def detects(self, text: str) -> bool:
        """:meth:`Stack.detects` of the stack, which is false without one of its identifying
        header or pattern keywords in ``text`` (then nothing is imported)."""
        literals = self._detect_literals
        return any(k in text for k in literals) and self.stack().detects(text)
