"""Fleet mode end to end: three real agents on one PostgreSQL store and a loopback Slack
(docs/RELIABILITY.md, scenario 32). Each tails its own logs; the CLI in another process with
only the URL lists every job; each job gets exactly one message; killing the agent that speaks
for a job hands it over within a minute; two agents racing for one job post once."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.agent.fake_slack import FakeSlack
from tests.agent.fleet import Agent, agent_config, agent_env, cli, drifting_job, stored_lines
from tests.agent.processes import until

HANDOVER_S = 60.0


def _jobs_posted(slack: FakeSlack) -> list[str]:
    """The jobs of the messages in the channel (not their replies: a detail names its job too)."""
    top = [m for m in slack.posted if "thread_ts" not in m]
    return sorted(job for m in top for job in ("ja", "jb", "jc", "jr") if f"for {job}" in m["text"])


def _url_only(tmp: Path, url: str) -> Path:
    config = tmp / "cli" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[store]\nurl = "{url}"\n')
    return config


def test_three_agents_one_store_one_message_each_and_a_handover(
    tmp_path: Path, pg_url: str, fake_slack: FakeSlack
) -> None:
    """Agents a, b, c tail their own job's logs into one store; the CLI with only the URL lists
    all three jobs; jb and jc get one message each; ja, silenced while a ran, is taken over by
    b or c within a minute of a's SIGKILL and posted once, by that agent, when the silence ends."""
    env = agent_env(fake_slack.token)
    configs = {}
    for name, seed in (("a", 1), ("b", 2), ("c", 3)):
        drifting_job(tmp_path / "runs" / name, seed)
        configs[name] = agent_config(
            tmp_path, name, pg_url, {f"j{name}": tmp_path / "runs" / name},
            slack_url=fake_slack.base_url, estimate_every="2s",
        )  # fmt: skip
    assert cli("migrate", "--config", str(configs["a"]), env=env).returncode == 0
    silenced = cli("silence", "--job", "ja", "--for", "75s", "--config", str(configs["a"]), env=env)
    assert silenced.returncode == 0, silenced.stderr
    agents = {name: Agent(config, env) for name, config in configs.items()}
    try:
        assert until(lambda: _jobs_posted(fake_slack) == ["jb", "jc"], timeout_s=60)
        url_only = _url_only(tmp_path, pg_url)
        listed = cli("estimates", "--config", str(url_only), "--json", env=env)
        assert listed.returncode == 0, listed.stderr
        assert sorted(e["job"] for e in json.loads(listed.stdout)) == ["ja", "jb", "jc"]
        assert all(e["status"] == "drift" for e in json.loads(listed.stdout))
        for name in "abc":  # each job's events were read by its own agent only
            [source] = {s for s, _, _ in stored_lines(pg_url, f"j{name}")} & {
                str(tmp_path / "runs" / name / "train.log")
            }
            assert source

        def speaker() -> str:
            out = cli("status", "--config", str(url_only), "--json", env=env)
            return str(json.loads(out.stdout)["leases"]["ja"]["agent"])

        assert speaker() == "a"
        agents["a"].kill()
        killed = time.monotonic()
        assert until(lambda: speaker() in ("b", "c"), timeout_s=HANDOVER_S)
        handover_s = time.monotonic() - killed
        assert handover_s < HANDOVER_S
        assert until(lambda: _jobs_posted(fake_slack) == ["ja", "jb", "jc"], timeout_s=90)
        time.sleep(5.0)  # several more estimate runs on every agent: nothing posted again
        assert _jobs_posted(fake_slack) == ["ja", "jb", "jc"]
        status = json.loads(cli("status", "--config", str(url_only), "--json", env=env).stdout)
        assert {a["name"] for a in status["agents"]} == {"a", "b", "c"}
    finally:
        for name in "bc":
            assert agents[name].stop() == 0
    print(f"handover after {handover_s:.1f} s")


def test_two_agents_racing_for_one_job_post_one_message(
    tmp_path: Path, pg_url: str, fake_slack: FakeSlack
) -> None:
    """Two agents configured with the same job over one shared folder start together: the
    job's events are stored once (the second agent sees the first's files by their first KiB)
    and its recommendation is posted once."""
    env = agent_env(fake_slack.token)
    folder = tmp_path / "runs" / "shared"
    drifting_job(folder, 5)
    configs = [
        agent_config(
            tmp_path,
            name,
            pg_url,
            {"jr": folder},
            slack_url=fake_slack.base_url,
            estimate_every="1s",
        )
        for name in ("x", "y")
    ]
    assert cli("migrate", "--config", str(configs[0]), env=env).returncode == 0
    agents = [Agent(config, env) for config in configs]
    try:
        assert until(lambda: _jobs_posted(fake_slack) == ["jr"], timeout_s=60)
        time.sleep(5.0)
        assert _jobs_posted(fake_slack) == ["jr"]
        lines = stored_lines(pg_url, "jr")
        assert lines and max(lines.values()) == 1
        assert any("reads this file; not read here" in a.stderr for a in agents)
    finally:
        for agent in agents:
            assert agent.stop() == 0
