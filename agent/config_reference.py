"""The configuration reference (``docs/CONFIG.md``), generated from the config's models.

``python -m ckpt_advisor.agent.config_reference > docs/CONFIG.md`` rewrites it; a test checks
that the file is what the code renders, so every key is documented with its default.
"""

from __future__ import annotations

import inspect
import json
import sys
from typing import Any

from pydantic import BaseModel

from ckpt_advisor.agent.config import Config
from ckpt_advisor.agent.config_jobs import JobConfig, PatternConfig
from ckpt_advisor.agent.units import format_duration, parse_duration_s


def config_reference() -> str:
    """Every config key with its default and meaning, as Markdown (``docs/CONFIG.md``).

    Generated from the models' field docstrings, so the reference cannot drift from the code.
    """

    def default_of(name: str, field: Any) -> str:
        if field.is_required():
            return "required"
        if field.default_factory is not None and not isinstance(field.default_factory, type):
            return "see meaning"  # made where it runs (a path, the host name): the text says
        value = field.get_default(call_default_factory=True)
        if value is None or value == []:
            return "unset"
        if any(getattr(m, "func", None) is parse_duration_s for m in field.metadata):
            return f"`{format_duration(float(value))}`"
        return f"`{json.dumps(value)}`"

    lines = [
        "# Configuration reference",
        "",
        "Generated from `agent/config.py` (`python -m ckpt_advisor.agent.config_reference > "
        "docs/CONFIG.md`). Every key has a "
        "default; "
        "durations are seconds or text such as `90s`, `5m`, `6h`, `2d`.",
    ]
    sections: list[tuple[str, type[BaseModel]]] = [
        (name, field.annotation)  # type: ignore[misc]
        for name, field in Config.model_fields.items()
        if name != "jobs"
    ]
    sections[3:3] = [("jobs", JobConfig), ("jobs.patterns", PatternConfig)]
    for name, model in sections:
        table = f"[[{name}]]" if name.startswith("jobs") else f"[{name}]"
        lines += ["", f"## `{table}`", "", inspect.cleandoc(model.__doc__ or ""), ""]
        lines += ["| key | default | meaning |", "| --- | --- | --- |"]
        for key, field in model.model_fields.items():
            if key == "patterns":
                continue
            text = " ".join((field.description or "").split()).replace("|", "\\|")
            lines.append(f"| `{key}` | {default_of(key, field)} | {text} |")
    return "\n".join(lines).replace("``", "`") + "\n"


if __name__ == "__main__":
    sys.stdout.write(config_reference())
