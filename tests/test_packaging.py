"""How the project installs and what each package may import.

The wheel holds one import name, ``ckpt_advisor``, mapped over the repository's folders
(pyproject.toml ``[tool.setuptools]``); ``parsers`` and ``rules`` stay pure (docs/DESIGN.md,
"Architecture"), and the training-side module imports the standard library only, so it can be
imported inside any training script, beside any local package.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "parsers", "rules")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

IO_MODULES = {"watchdog", "apscheduler", "slack_sdk", "sqlite3", "sqlalchemy", "psycopg"}
PURE_FORBIDDEN = {
    "parsers": {"agent", "rules", *IO_MODULES}
    | {"os", "pathlib", "io", "shutil", "subprocess", "socket", "threading", "asyncio"}
    | {"time", "glob", "tempfile", "urllib", "requests", "builtins"},
    "rules": {"agent", "parsers", "time", *IO_MODULES},
}
FORBIDDEN_CALLS = {"open", "input", "print", "exec", "eval", "__import__"}


def _sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def _imported(tree: ast.AST) -> set[str]:
    """Dotted names of the modules a module imports (absolute imports only)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _root(name: str) -> str:
    """The package a dotted name belongs to: ``ckpt_advisor.rules.x`` -> ``rules``."""
    parts = name.split(".")
    return parts[1] if parts[0] == "ckpt_advisor" and len(parts) > 1 else parts[0]


@pytest.mark.parametrize("path", _sources(*PACKAGES, "tests", "bench"), ids=str)
def test_no_module_imports_a_bare_top_level_package(path: Path) -> None:
    """``agent``, ``parsers`` and ``rules`` are imported as ``ckpt_advisor.*`` only: the bare
    names are not installed, and would find a training repo's own ``agent/`` first."""
    bare = {n for n in _imported(ast.parse(path.read_text("utf-8"))) if n.split(".")[0] in PACKAGES}
    assert not bare


@pytest.mark.parametrize(
    "path", _sources("parsers", "rules"), ids=lambda p: str(p.relative_to(ROOT))
)
def test_pure_packages_import_no_io_no_clock_and_no_sibling(path: Path) -> None:
    """parsers/ and rules/ import neither agent nor each other nor an I/O library, and
    parsers/ calls no open/print: text in, events out; events in, numbers out."""
    package = path.relative_to(ROOT).parts[0]
    tree = ast.parse(path.read_text("utf-8"))
    roots = {_root(name) for name in _imported(tree)}
    assert not roots & PURE_FORBIDDEN[package]
    if package == "parsers":
        calls = {
            node.func.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        }
        assert not calls & FORBIDDEN_CALLS


def test_every_package_folder_is_installed_under_ckpt_advisor() -> None:
    """Each folder with an ``__init__.py`` is listed in pyproject's ``packages`` (setuptools
    installs only what is listed), mapped from its own folder."""
    setuptools = PYPROJECT["tool"]["setuptools"]
    folders = {
        "ckpt_advisor." + ".".join(init.parent.relative_to(ROOT).parts)
        for package in PACKAGES
        for init in (ROOT / package).rglob("__init__.py")
    }
    assert folders <= set(setuptools["packages"])
    assert setuptools["package-dir"] == {f"ckpt_advisor.{p}": p for p in PACKAGES}


def test_the_wheel_installs_only_ckpt_advisor(tmp_path: Path) -> None:
    """A built wheel, named with ``ckpt_advisor.agent.__version__``, has one top-level name (plus
    its metadata) and carries the demo's logs, the store's backends and the Alembic scripts the
    store migrates with."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("ckpt_advisor-*.whl")
    from ckpt_advisor.agent import __version__

    assert wheel.name.startswith(f"ckpt_advisor-{__version__}-")  # the version's one source
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {
        "ckpt_advisor",
        wheel.name.split("-py3")[0] + ".dist-info",
    }
    assert "ckpt_advisor/agent/training.py" in names
    assert "ckpt_advisor/agent/fixtures/real/hf_trainer_crash.log" in names
    assert "ckpt_advisor/agent/store/postgres/store.py" in names
    assert "ckpt_advisor/agent/store/sql/fleet.py" in names
    assert "ckpt_advisor/agent/store/migrations/env.py" in names
    assert "ckpt_advisor/agent/store/migrations/script.py.mako" in names
    assert "ckpt_advisor/agent/store/migrations/versions/r0005_fleet.py" in names
    assert "ckpt_advisor/agent/store/migrations/versions/r0006_tier.py" in names


def test_training_callbacks_import_beside_a_local_agent_package(tmp_path: Path) -> None:
    """A training repo with its own ``agent/`` still imports the timing writers, and importing
    them loads nothing outside the standard library and ckpt_advisor."""
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "__init__.py").write_text("MINE = True\n")
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "from ckpt_advisor.agent.training import checkpoint_timer, hf_trainer_callback\n"
        "import agent\n"
        "assert agent.MINE\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(sorted(new - set(sys.stdlib_module_names) - {'ckpt_advisor', 'agent'}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
