"""The Grafana dashboard's PostgreSQL panels (grafana/ckpt-advisor.json, last row), run
against a real fleet store as a SELECT-only role, with Grafana's macros expanded as its
PostgreSQL data source does: each query is valid and shows what the store holds."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import psycopg

from ckpt_advisor.agent.cli.query import fleet_json
from ckpt_advisor.agent.contracts import estimate_json
from ckpt_advisor.agent.store import RegisteredJob, open_reader, open_store
from ckpt_advisor.rules.model import AlertState
from tests.pg import ROLE_PASSWORD, PgServer
from tests.samples import drifting_estimate

DASHBOARD = Path(__file__).parents[2] / "grafana" / "ckpt-advisor.json"
HOUR = 3600.0
T_S = 1_700_000_000.0
JOBS = ["ja", "jb", "jc"]


def _sql_targets() -> dict[str, str]:
    """Panel title → its SQL (every target on the store data source)."""
    dashboard = json.loads(DASHBOARD.read_text())
    return {
        p["title"]: t["rawSql"]
        for p in dashboard["panels"]
        for t in p.get("targets", [])
        if t["datasource"]["uid"] == "${store}"
    }


def _expand(sql: str, jobs: list[str]) -> str:
    """Grafana's expansion (PostgreSQL data source docs, "Macros"; multi-value variables are
    quoted and comma-separated): the whole time range and every job selected."""
    sql = re.sub(r"\$__unixEpochFilter\((\w+)\)", r"\1 BETWEEN 0 AND 4102444800", sql)
    return sql.replace("$store_job", ", ".join(f"'{j}'" for j in jobs))


def _fleet(url: str) -> None:
    """Agents a (ja, 4 nodes) and b (jb, 8 nodes; jc unsized), two estimates of ja, b holding
    its jobs' leases (a has not claimed yet) and one queued message for jb."""
    a = open_store(url, agent="a", password=ROLE_PASSWORD)
    b = open_store(url, agent="b", password=ROLE_PASSWORD)
    for store in (a, b):
        store.register_agent()
    a.register_jobs([RegisteredJob("ja", "a", 32, 4)])
    b.register_jobs([RegisteredJob("jb", "b", 64, 8), RegisteredJob("jc", "b", 8, None)])
    for store, job, at_s, exposure_s, n in (
        (a, "ja", T_S, 50 * HOUR, 9),
        (a, "ja", T_S + 60, 100 * HOUR, 2),
        (b, "jb", T_S + 60, 200 * HOUR, 4),
        (b, "jc", T_S + 60, 900 * HOUR, 30),
    ):
        est = drifting_estimate(job=job, computed_at_s=at_s, exposure_s=exposure_s, n_failures=n)
        store.save_estimate(job, at_s, str(est.status), estimate_json(est))
    assert b.claim_leases(30.0) == {"jb", "jc"}  # a claims none: ja is silent
    state = AlertState(in_drift=True, last_sent_s=None, last_recommended_s=3600.0)
    b.record_decision("jb", state, message={"text": "drift"}, action="notify", now_s=T_S + 61)
    a.close()
    b.close()


def _reader(pg: PgServer, database: str) -> psycopg.Connection[Any]:
    pg.sql("DROP ROLE IF EXISTS grafana_reader")
    pg.sql("CREATE ROLE grafana_reader LOGIN PASSWORD 'g'")
    pg.sql("GRANT SELECT ON ALL TABLES IN SCHEMA public TO grafana_reader", database=database)
    return psycopg.connect(
        host="127.0.0.1", port=pg.port, dbname=database, user="grafana_reader", password="g"
    )


def test_store_panels_query_the_fleet_as_a_read_only_role(pg_server: PgServer, pg_url: str) -> None:
    """The job variable lists every job; the estimates table has each job's latest estimate
    and b speaking for its jobs; the interval history has both series of every estimate; the
    per-node MTBF equals `estimates --fleet` (2,000 node-hours / 6 failures); the agents
    table says both run; the outbox shows jb's queued message, queued by b."""
    _fleet(pg_url)
    database = pg_url.rsplit("/", 1)[1]
    targets = _sql_targets()
    assert len(targets) == 5
    dashboard = json.loads(DASHBOARD.read_text())
    [variable] = [v for v in dashboard["templating"]["list"] if v["name"] == "store_job"]
    with _reader(pg_server, database) as conn:

        def rows(title: str) -> list[tuple[Any, ...]]:
            return conn.execute(_expand(targets[title], JOBS)).fetchall()  # type: ignore[arg-type]

        assert [r[0] for r in conn.execute(variable["query"]).fetchall()] == JOBS
        latest = rows("Latest estimate per job, and who speaks for it")
        assert [(r[0], r[2], r[3]) for r in latest] == [
            ("ja", "a", None),
            ("jb", "b", "b"),
            ("jc", "b", "b"),
        ]
        assert latest[0][4:8] == (300.0, 21_600.0, 14_400.0, 3_600.0)
        history = rows("Checkpoint interval: current vs recommended (store history)")
        assert len(history) == 2 * 4
        assert {r[1] for r in history} == {f"{j} {s}" for j in JOBS for s in ("now", "recommended")}
        [(mtbf_s, failures, node_hours)] = rows("Fleet per-node MTBF")
        reader = open_reader(pg_url, password=ROLE_PASSWORD)
        expected = fleet_json(reader, {}, 0.9)
        reader.close()
        assert abs(mtbf_s - expected["per_node_mtbf_s"]) < 1e-6
        assert (failures, node_hours) == (6, 2000.0)
        agents = rows("Agents")
        assert [(r[0], r[3], r[5]) for r in agents] == [("a", "running", 0), ("b", "running", 2)]
        [message] = rows("Slack messages (outbox)")
        assert message[1:5] == ("jb", "notify", "queued", "b")
