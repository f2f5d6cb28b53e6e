"""What an ``ingest`` imports: only what its path needs (start-up time, issue 15)."""

from __future__ import annotations

from pathlib import Path

from tests.agent.processes import cli_imports

ROOT = Path(__file__).resolve().parents[2]


def test_an_ingest_and_its_estimate_import_no_scipy(tmp_path: Path) -> None:
    """An ingest of a real log with saves and a failure, estimate included, never imports
    scipy (~0.2 s of CPU at start-up)."""
    log = ROOT / "agent" / "fixtures" / "real" / "hf_trainer_crash.log"
    db = tmp_path / "s.db"
    out, imported = cli_imports(
        ["ingest", str(log), "--job", "j", "--db", str(db)], ["scipy"], tmp_path
    )
    assert "2 checkpoint(s), 1 failure(s)" in out.stdout
    assert imported == []
