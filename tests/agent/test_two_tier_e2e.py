"""A two-tier job end to end: its timing file (records with ``tier``) and its log (failures),
ingested with the real CLI or tailed by the real daemon, give each tier's C and M, the current
pair and the advised one, in ``estimates --json`` and in the advice file.

The job is ``tests.rules.simulate.two_tier_trace`` (the rules tests' generated job: memory saves
of 5 s every 10 min, every 10th save 300 s to storage; NCCL-class interruptions every 8 h, node
losses every 24 h), written as the files a user has: the timing records by the real writer
(``agent.training.timing_record``), the log in the lines of docs/FORMATS.md (Megatron-LM's
iteration and start lines, torchrun's 2.2-2.3 failure and restart lines, Slurm's node-failure
banner: tests/parsers/fixtures/megatron/megatron_2024.log, quoted/launcher_old.log,
quoted/slurm.log), re-timed. The truth in the data: its exposure over each kind's count."""

from __future__ import annotations

import json
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path
from subprocess import Popen

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.training import timing_record
from ckpt_advisor.agent.units import format_duration
from ckpt_advisor.rules.tiers import Tier, surviving_tier
from ckpt_advisor.rules.two_level import TwoTierJob, optimal_plan, two_tier_waste_fraction
from tests.agent.processes import start_daemon, until
from tests.rules.simulate import TwoTierTrace, two_tier_trace

HOUR_S = 3600.0
TRUTH = TwoTierJob(5.0, 300.0, 8 * HOUR_S, 24 * HOUR_S, 300.0, 300.0)
"""The simulated parameters (C1, C2, M1, M2, restart after each kind)."""


def _job(directory: Path, *, steps: bool = True) -> TwoTierTrace:
    """30 days of the job, ending an hour ago, as ``train.log`` and ``ckpt_timings.jsonl``;
    without ``steps``, the log prints no iteration lines (the timing file's saves are then the
    only progress between failures)."""
    trace = two_tier_trace(
        fast_cost_s=5.0,
        persistent_cost_s=300.0,
        fast_interval_s=600.0,
        saves_per_persistent=10,
        class_mtbf_s={"nccl_timeout": 8 * HOUR_S, "node_failure": 24 * HOUR_S},
        restart_s=300.0,
        days=30.0,
        seed=4,
    )
    shift_s = time.time() - HOUR_S - trace.observations[-1].time_s

    def at(time_s: float) -> datetime:
        return datetime.fromtimestamp(time_s + shift_s, UTC)

    def ms(t: datetime) -> str:
        return f"{t:%Y-%m-%d %H:%M:%S},{t.microsecond // 1000:03d}"

    log, timings = [], []
    for o in trace.observations:
        t = at(o.time_s)
        if o.kind == "checkpoint_end":
            record = timing_record(o.step or 0, at(o.time_s - (o.duration_s or 0)), t, tier=o.tier)
            timings.append(json.dumps(record) + "\n")
        elif o.kind in ("run_start", "restart"):
            log.append(f"[before the start of training step] datetime: {t:%Y-%m-%d %H:%M:%S} \n")
        elif o.kind == "step" and steps:
            log.append(
                f" [{t:%Y-%m-%d %H:%M:%S}] iteration {o.step:>8}/ 2000000 | consumed samples: "
                f"{(o.step or 0) * 128:>12} | elapsed time per iteration (ms): 2000.0 | learning "
                "rate: 1.000000E-04 | global batch size:   128 | lm loss: 6.412345E+00 | loss "
                "scale: 1.0 | grad norm: 1.234 | number of skipped iterations:   0 | number of "
                "nan iterations:   0 |\n"
            )
        elif o.kind == "failure" and surviving_tier(o.failure_class).tier is Tier.MEMORY:
            log.append(
                f"[{ms(t)}] torch.distributed.elastic.multiprocessing.api: [ERROR] failed "
                "(exitcode: 1) local_rank: 1 (pid: 5939) of binary: /usr/bin/python3\n"
                f"[{ms(at(o.time_s + 1.0))}] torch.distributed.elastic.agent.server.api: [INFO] "
                "[default] Worker group FAILED. 2/3 attempts left; will restart worker group\n"
            )
        elif o.kind == "failure":
            log.append(
                f"slurmstepd: error: *** JOB 1234569 ON gpu-node-019 CANCELLED AT "
                f"{t:%Y-%m-%dT%H:%M:%S} DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***\n"
            )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "train.log").write_text("".join(log))
    (directory / "ckpt_timings.jsonl").write_text("".join(timings))
    return trace


@pytest.mark.parametrize("steps", [True, False], ids=["steps", "no-steps"])
def test_an_ingested_two_tier_job_has_each_tiers_c_and_m_and_the_pair(
    tmp_path: Path, steps: bool
) -> None:
    """`ingest` of the job's log and timing file: C per tier within 2% of 5 s and 300 s, each
    kind's interruptions counted within 5%, each M's interval holding the data's truth (its
    exposure over that count), the current pair 600 s x 10, and an advised pair whose waste
    under the truth's parameters is within 1% of the truth's own optimum's; the same when the
    log prints no steps, where the fast saves alone separate one interruption from the next
    (dropped from the persistent tier's timeline, they merged 34 of 104 interruptions)."""
    trace = _job(tmp_path / "job", steps=steps)
    db = str(tmp_path / "s.db")
    files = [str(tmp_path / "job" / name) for name in ("train.log", "ckpt_timings.jsonl")]
    runner = CliRunner()
    ingest = runner.invoke(main, ["ingest", *files, "--job", "two", "--db", db])
    assert ingest.exit_code == 0, ingest.output
    [est] = json.loads(runner.invoke(main, ["estimates", "--json", "--db", db]).stdout)
    two = est["tiers"]
    assert two["fast_tier"] == "memory"
    assert two["fast_cost_s"] == pytest.approx(5.0, rel=0.02)
    assert two["persistent_cost_s"] == pytest.approx(300.0, rel=0.02)
    assert est["checkpoint_cost_s"] == two["persistent_cost_s"]
    assert two["n_recoverable"] == pytest.approx(trace.n_recoverable, rel=0.05)
    assert two["n_unrecoverable"] == pytest.approx(trace.n_unrecoverable, rel=0.05)
    for kind, n in (("recoverable", trace.n_recoverable), ("persistent", trace.n_unrecoverable)):
        low, high = two[f"mtbf_{kind}_ci_s"]
        assert low < trace.exposure_s / n < high
    assert two["current_saves_per_persistent"] == 10
    assert two["current_fast_interval_s"] == pytest.approx(600.0, rel=0.01)
    assert two["saves_per_persistent"] >= 2 and two["fast_interval_s"] > 0
    table = runner.invoke(main, ["estimates", "--db", db]).stdout
    assert f" {format_duration(two['fast_interval_s'])} ×{two['saves_per_persistent']} " in table
    advised = two_tier_waste_fraction(TRUTH, two["fast_interval_s"], two["saves_per_persistent"])
    assert advised - optimal_plan(TRUTH).waste_fraction < 0.01


def test_the_daemon_writes_a_two_tier_jobs_pair_into_its_advice_file(
    tmp_path: Path, procs: list[Popen[str]]
) -> None:
    """The real daemon tailing the job's files writes ``advice/two.json`` whose ``tiers`` hold
    the advised memory and persistent intervals of ``estimates --json``'s ``tiers``."""
    _job(tmp_path / "staging")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[store]\npath = "{tmp_path / "state" / "s.db"}"\n\n'
        '[schedule]\nestimate_every = "1s"\npoll_every = "0.2s"\n\n'
        f'[advice]\ndir = "{tmp_path / "advice"}"\n\n'
        f'[[jobs]]\nname = "two"\nlogs = ["{tmp_path}/runs/**/*.log"]\n'
        f'timings = ["{tmp_path}/runs/**/ckpt_timings.jsonl"]\n'
    )
    (tmp_path / "runs").mkdir()
    procs.append(start_daemon(config))
    shutil.copytree(tmp_path / "staging", tmp_path / "runs" / "job-1")
    advice = tmp_path / "advice" / "two.json"

    def paired() -> bool:
        return advice.exists() and bool(json.loads(advice.read_text()).get("tiers"))

    assert until(paired, timeout_s=60)
    tiers = json.loads(advice.read_text())["tiers"]
    out = CliRunner().invoke(
        main, ["estimates", "--json", "--db", str(tmp_path / "state" / "s.db")]
    )
    two = json.loads(out.stdout)[0]["tiers"]
    assert tiers["memory"] == {
        "interval_s": pytest.approx(two["fast_interval_s"], rel=0.01),
        "interval_steps": pytest.approx(two["fast_interval_steps"], rel=0.01),
    }
    assert tiers["persistent"]["interval_s"] == pytest.approx(
        two["persistent_interval_s"], rel=0.01
    )
    assert tiers["persistent"]["interval_s"] == pytest.approx(
        tiers["memory"]["interval_s"] * two["saves_per_persistent"], rel=1e-6
    )
