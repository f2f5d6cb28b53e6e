"""docs/INSTALL.md's fleet roles and grants, run as written against a real PostgreSQL server:
the owner migrates, the agent role runs an agent, the reader role reads, and none can more."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.store import FileState, RegisteredJob, StoreError, open_store
from ckpt_advisor.parsers.events import Event, EventKind
from tests.pg import PASSWORD_ENV, PgServer

INSTALL = Path(__file__).parents[2] / "docs" / "INSTALL.md"
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _fleet_sql() -> list[tuple[str, list[str]]]:
    """The fleet section's ``sql`` blocks: (database named in the block's first line, its
    statements)."""
    section = INSTALL.read_text("utf-8").split("## 7. Fleet mode", 1)[1]
    blocks = re.findall(r"```sql\n(.*?)```", section, re.S)
    out = []
    for block in blocks:
        database = re.search(r"psql -d (\w+)", block.splitlines()[0])
        assert database, block
        body = "\n".join(line for line in block.splitlines() if not line.startswith("--"))
        out.append((database[1], [s.strip() for s in body.split(";") if s.strip()]))
    return out


def _cli(pg: PgServer, tmp: Path, role: str, password: str, *args: str) -> tuple[int, str]:
    config = tmp / f"{role}.toml"
    config.write_text(f'[store]\nurl = "{pg.url("ckpt_advisor", role)}"\npath = "{tmp}/s.db"\n')
    result = CliRunner().invoke(
        main, [*args, "--config", str(config)], env={PASSWORD_ENV: password}
    )
    return result.exit_code, result.output


def test_install_grants_let_each_role_do_its_part(pg_server: PgServer, tmp_path: Path) -> None:
    """After the documented statements, ``migrate`` as ckpt_owner creates the schema, an agent
    as ckpt_agent stores events and registers its job, ``estimates`` and ``events`` as
    ckpt_reader read them, and the reader cannot write nor the agent role migrate."""
    for database, statements in _fleet_sql():
        for statement in statements:
            pg_server.sql(statement, database=database)
    code, out = _cli(pg_server, tmp_path, "ckpt_owner", "owner-secret", "migrate")
    assert code == 0 and "schema version" in out, out

    url = pg_server.url("ckpt_advisor", "ckpt_agent")
    agent = open_store(url, agent="login1", password="agent-secret")
    agent.register_agent()
    agent.register_jobs([RegisteredJob("llama", "login1", 64, 8)])
    state = FileState(0, "llama", "/logs/a.log", 1, 2, "h" * 32, 1024, 0, 0, 0)
    events = [Event(EventKind.CHECKPOINT_START, 1, "hf_trainer", time=T0)]
    agent.commit_read(state, offset=80, lineno=1, events=events, now_s=1.0)
    agent.close()

    code, out = _cli(pg_server, tmp_path, "ckpt_reader", "reader-secret", "events", "--json")
    assert code == 0 and '"checkpoint_start"' in out, out
    code, out = _cli(pg_server, tmp_path, "ckpt_reader", "reader-secret", "estimates", "--fleet")
    assert code == 1 and "no job with nodes and an estimate yet" in out

    reader = pg_server.url("ckpt_advisor", "ckpt_reader")
    try:
        open_store(reader, agent="r", password="reader-secret").register_agent()
        raise AssertionError("the reader role wrote")
    except StoreError as exc:
        assert "lacks INSERT on table" in str(exc)
    pg_server.sql("CREATE DATABASE ckpt_fresh OWNER ckpt_owner")
    fresh = tmp_path / "fresh.toml"
    fresh.write_text(f'[store]\nurl = "{pg_server.url("ckpt_fresh", "ckpt_agent")}"\n')
    result = CliRunner().invoke(
        main, ["migrate", "--config", str(fresh)], env={PASSWORD_ENV: "agent-secret"}
    )
    assert result.exit_code == 2, result.output
    assert "ckpt_agent@" in result.output and "agent-secret" not in result.output
    assert "Traceback" not in result.output
    print(result.output)
