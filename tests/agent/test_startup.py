"""What an ``ingest`` imports: only what its path needs (start-up time, issue 15)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_an_ingest_and_its_estimate_import_no_scipy(tmp_path: Path) -> None:
    """An ingest of a real log with saves and a failure, estimate included, never imports
    scipy (~0.2 s of CPU at start-up)."""
    code = (
        "import sys\n"
        "from ckpt_advisor.agent.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('scipy' in sys.modules)\n"
    )
    log = ROOT / "agent" / "fixtures" / "real" / "hf_trainer_crash.log"
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "ingest",
            str(log),
            "--job",
            "j",
            "--db",
            str(tmp_path / "s.db"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "1 failure(s)" in out.stderr, out.stderr
    assert out.stdout.splitlines()[-1] == "False"
