"""``estimates --fleet``, on both backends: the per-node failure rate pooled over the latest
estimates of every agent's jobs with nodes, with its chi-square interval (README, "Job size")."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner
from scipy.stats import chi2

from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.store import RegisteredJob, Store, open_store
from tests import pg

HOUR = 3600.0


def _estimate(store: Store, job: str, exposure_s: float, n_failures: int, at_s: float) -> None:
    payload = {"job": job, "status": "ok", "exposure_s": exposure_s, "n_failures": n_failures}
    store.save_estimate(job, at_s, "ok", payload)


def _fleet_store(target: str | Path, password: str | None) -> None:
    """Agent a runs ja (4 nodes), b runs jb (8 nodes) and jc (no nodes); ja's older estimate
    is superseded by its latest."""
    a = open_store(target, agent="a", password=password)
    b = open_store(target, agent="b", password=password)
    for store in (a, b):
        store.register_agent()
    a.register_jobs([RegisteredJob("ja", "a", 32, 4)])
    b.register_jobs([RegisteredJob("jb", "b", 64, 8), RegisteredJob("jc", "b", 8, None)])
    _estimate(a, "ja", 50 * HOUR, 9, 1.0)
    _estimate(a, "ja", 100 * HOUR, 2, 2.0)
    _estimate(b, "jb", 200 * HOUR, 4, 2.0)
    _estimate(b, "jc", 900 * HOUR, 30, 2.0)
    a.close()
    b.close()


def _cli(target: str | Path, password: str | None, tmp: Path, *args: str) -> tuple[int, str]:
    if password is None:
        where = ["--db", str(target)]
        env = {}
    else:  # the CLI on another machine: a config with only the URL
        config = tmp / "fleet.toml"
        config.write_text(f'[store]\nurl = "{target}"\n')
        where, env = ["--config", str(config)], {pg.PASSWORD_ENV: password}
    result = CliRunner().invoke(main, ["estimates", "--fleet", *where, *args], env=env)
    return result.exit_code, result.output


def test_fleet_rate_pools_every_agents_jobs_with_nodes(
    store_target: str | Path, store_password: str | None, tmp_path: Path
) -> None:
    """ja (4 nodes, latest: 100 h, 2 failures) and jb (8 nodes, 200 h, 4) pool to 2,000
    node-hours and 6 failures: per-node MTBF 333.3 h with the chi-square interval
    [2E/χ²(0.95; 14), 2E/χ²(0.05; 12)]; jc, without nodes, is left out."""
    _fleet_store(store_target, store_password)
    code, out = _cli(store_target, store_password, tmp_path, "--json")
    assert code == 0, out
    fleet = json.loads(out)
    assert [(j["job"], j["nodes"], j["n_failures"]) for j in fleet["jobs"]] == [
        ("ja", 4, 2),
        ("jb", 8, 4),
    ]
    node_s = 2000 * HOUR
    assert fleet["node_exposure_s"] == node_s and fleet["n_failures"] == 6
    assert abs(fleet["per_node_mtbf_s"] - node_s / 6) < 1e-6
    lower, upper = fleet["per_node_mtbf_ci_s"]
    assert abs(lower - 2 * node_s / chi2.ppf(0.95, 14)) < 1e-3
    assert abs(upper - 2 * node_s / chi2.ppf(0.05, 12)) < 1e-3
    assert fleet["confidence"] == 0.9

    code, text = _cli(store_target, store_password, tmp_path)
    assert code == 0, text
    assert re.search(r"per-node MTBF: 13d 21h.* from 6 failure\(s\) in 2,000 node-hours", text)
    assert "jc" not in text


def test_fleet_without_sized_jobs_says_what_to_set(
    store_target: str | Path, store_password: str | None, tmp_path: Path
) -> None:
    """A store whose jobs have no nodes gives exit 1 and names the key to set, and --fleet
    refuses --job (it pools every job)."""
    store = open_store(store_target, agent="a", password=store_password)
    store.register_jobs([RegisteredJob("jc", "a", 8, None)])
    _estimate(store, "jc", 900 * HOUR, 30, 2.0)
    store.close()
    code, out = _cli(store_target, store_password, tmp_path)
    assert code == 1 and "set [[jobs]] nodes" in out
    code, out = _cli(store_target, store_password, tmp_path, "--job", "jc")
    assert code == 2 and "no --job" in out
