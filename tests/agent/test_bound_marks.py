"""A figure resting on a bounded C or M is printed as a bound (agent/marks.py), on stores
backfilled from real captures: the HF Trainer crash and resume runs (C from "saved in" lines: a
lower bound), Megatron's saves beside Lightning's crash log without timestamps (C measured,
M a lower bound: the Lightning run's time is only steps × its step time), and the HF crash log
beside the same Lightning log (both lower bounds); and, for contrast, a generated week of an HF
job with its timing file (C and M measured)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.advice import advice_json
from ckpt_advisor.agent.app import estimator_of
from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.config import load_config
from ckpt_advisor.agent.estimate import Estimator
from ckpt_advisor.agent.notify.message import format_details, format_message
from ckpt_advisor.agent.notify.slack import SlackNotifier
from ckpt_advisor.agent.notify.wording import cost_evidence
from ckpt_advisor.agent.plot import figure
from ckpt_advisor.agent.store import open_reader
from ckpt_advisor.agent.synth import simulate
from ckpt_advisor.rules.model import Action, AlertState, Decision, Reason, ReasonCode
from tests.agent.fake_slack import FakeSlack

REAL = Path(__file__).parents[2] / "agent" / "fixtures" / "real"
MEGATRON = Path(__file__).parents[1] / "parsers" / "fixtures" / "megatron" / "megatron_2026.log"
LOGS = {
    "c_bound": (REAL / "hf_trainer_crash.log", REAL / "hf_trainer_resume.log"),
    "m_bound": (MEGATRON, REAL / "lightning_crash.log"),
    "both": (REAL / "hf_trainer_crash.log", REAL / "lightning_crash.log"),
}


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), env={"COLUMNS": "250"})
    return result.exit_code, result.stdout


@pytest.fixture(scope="module")
def dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One store per case of LOGS, and ``exact``: a week of a generated HF job (M = 6 h,
    C = 4 min, saving every 1,200 steps) with its timing file; each job named as its case."""
    week = tmp_path_factory.mktemp("week")
    job = simulate(mtbf_s=6 * 3600.0, cost_s=240.0, interval_steps=1200, seed=3)
    (week / "train.log").write_text("".join(text for _, text in job.log))
    (week / "ckpt_timings.jsonl").write_text("".join(text for _, text in job.timings))
    out = {}
    for name, logs in {**LOGS, "exact": (week / "train.log", week / "ckpt_timings.jsonl")}.items():
        db = str(tmp_path_factory.mktemp(name) / "s.db")
        assert _run("ingest", *map(str, logs), "--job", name, "--db", db)[0] == 0
        out[name] = db
    return out


def _estimate(db: str) -> dict[str, Any]:
    code, out = _run("estimates", "--db", db, "--json")
    assert code == 0
    [row] = json.loads(out)
    return row


def _table_row(db: str, job: str) -> str:
    code, out = _run("estimates", "--db", db)
    assert code == 0
    [row] = [line for line in out.splitlines() if line.strip().startswith(f"{job} ")]
    return row


def test_the_stores_bound_what_their_names_say(dbs: dict[str, str]) -> None:
    """Which of C and M each store knows only from below, with the goodput simulated at them."""
    bounds = {}
    for job, db in dbs.items():
        est = _estimate(db)
        assert est["goodput_current"] is not None and est["goodput_recommended"] is not None
        bounds[job] = (est["checkpoint_cost_is_lower_bound"], est["mtbf_is_lower_bound"])
    assert bounds == {
        "c_bound": (True, False),
        "m_bound": (False, True),
        "both": (True, True),
        "exact": (False, False),
    }


def test_the_goodput_column_is_a_bound_the_way_c_or_m_bounds_it(dbs: dict[str, str]) -> None:
    """At a lower-bound C (0.037 s) the goodput simulated now and at the recommended interval
    (70.0% and 73.3%) are upper bounds: '≤ 70.0%→≤ 73.3%'; at a lower-bound M (1m 05s)
    lower bounds: '≥ 61.5%→≥ 71.1%'; at both, no bound either way: '-'. The title says so."""
    shown = {}
    for job, db in dbs.items():
        est = _estimate(db)
        now, best = est["goodput_current"], est["goodput_recommended"]
        shown[job] = (f"{now:.1%}", f"{best:.1%}", _table_row(db, job).rstrip())
    assert shown["c_bound"][:2] == ("70.0%", "73.3%")
    assert shown["c_bound"][2].endswith("  ≤ 70.0%→≤ 73.3%")
    assert shown["m_bound"][:2] == ("61.5%", "71.1%")
    assert shown["m_bound"][2].endswith("  ≥ 61.5%→≥ 71.1%")
    assert shown["both"][2].endswith(" or more   -")
    assert shown["exact"][:2] == ("76.4%", "82.1%")
    assert shown["exact"][2].endswith("  save_steps=480   76.4%→82.1%")
    _, table = _run("estimates", "--db", dbs["both"])
    assert "; goodput ≤ at such a C, ≥ at such an M, - at both)" in table.splitlines()[0]


def test_json_says_the_setting_is_to_be_read_or_more(dbs: dict[str, str]) -> None:
    """Where the table prints the setting with "or more" (the interval open above: C or M a
    lower bound), estimates --json and the advice file say so in
    recommended_setting_is_lower_bound; recommended_setting keeps its value."""
    settings = {}
    for job, db in dbs.items():
        est = _estimate(db)
        advice = advice_json(Estimator().estimate(open_reader(db), job, time.time()))
        assert advice["recommended_setting"] == est["recommended_setting"]
        settings[job] = (
            est["recommended_setting"],
            est["recommended_setting_is_lower_bound"],
            advice["recommended_setting_is_lower_bound"],
            f"  {est['recommended_setting']} or more  " in _table_row(db, job),
        )
    assert settings == {
        "c_bound": ("save_steps=8", True, True, True),
        "m_bound": ("--save-interval 22", True, True, True),
        "both": ("save_steps=5", True, True, True),
        "exact": ("save_steps=480", False, False, False),
    }


def test_the_backtest_header_marks_a_lower_bound_of_c_and_of_m(dbs: dict[str, str]) -> None:
    """simulate --job replays each job at its estimated C and M: the header shows each as a
    bound where it is one ('C ≥ 0.037s', 'M ≥ 1m 05s'), as --json says; at a lower-bound M it
    says how many of the interruptions M counts the replay holds (only the timed running
    time is replayed). The README's command, with --sweep, runs on the captures' M of
    seconds: no Monte Carlo size limit applies to a replay."""
    heads, flags = {}, {}
    for job, db in dbs.items():
        args = ("simulate", "--job", job, "--db", db, "--sweep")
        code, out = _run(*args)
        assert code == 0
        heads[job] = out.splitlines()[0]
        code, out = _run(*args, "--json")
        shown = json.loads(out)
        flags[job] = (shown["checkpoint_cost_is_lower_bound"], shown["mtbf_is_lower_bound"])
    replayed = "interruptions replayed: the timed running time only)"
    no_r = "R not measured (0 assumed)"  # no restart placed in time: it read 'R 0s'
    assert heads == {
        "c_bound": "backtest of c_bound (1 interruption(s)); M 21s, C ≥ 0.037s, R 5.85s",
        "m_bound": f"backtest of m_bound (0 of 1 {replayed}; M ≥ 1m 05s, C 3.41s, {no_r}",
        "both": f"backtest of both (1 of 2 {replayed}; M ≥ 5.62s, C ≥ 0.0545s, {no_r}",
        "exact": "backtest of exact (31 interruption(s)); M 5h 14m, C 4m 00s, R 10m 36s",
    }
    assert flags == {
        "c_bound": (True, False),
        "m_bound": (False, True),
        "both": (True, True),
        "exact": (False, False),
    }


def test_the_backtest_rows_mark_the_waste_and_goodput_as_bounds(dbs: dict[str, str]) -> None:
    """Each row of the backtest: the replay's waste and goodput rest on C alone (the job's own
    lives are replayed, M does not enter), '≥' and '≤' at a lower-bound C (more C, more waste);
    the first-order formula rests on C and M: '≥' at a lower-bound C, '≤' at a lower-bound M,
    '-' at both, said under the rows. Measured C and M print as before."""
    rows = {}
    for job, db in dbs.items():
        code, out = _run("simulate", "--job", job, "--db", db, "--sweep")
        assert code == 0
        rows[job] = out.splitlines()[1:]
    assert rows["c_bound"] == [
        "Daly          1.21s  waste ≥ 26.03% (first-order formula ≥ 34.43%), goodput ≤ 73.97%",
        "current     ≤ 3.91s  waste ≥ 27.46% (first-order formula ≥ 38.89%), goodput ≤ 72.54%",
        "best          4.51s  waste ≥ 22.92% (first-order formula ≥ 40.22%), goodput ≤ 77.08%",
    ]
    assert rows["m_bound"] == [
        "Daly            19s  waste 10.83% (first-order formula ≤ 32.55%), goodput 89.17%",
        "current         48s  waste 5.41% (first-order formula ≤ 43.78%), goodput 94.59%",
        "best         1m 01s  waste 0.00% (first-order formula ≤ 52.61%), goodput 100.00%",
    ]
    assert rows["both"] == [
        "Daly         0.747s  waste ≥ 9.38% (first-order formula -), goodput ≤ 90.62%",
        "current     ≤ 4.07s  waste ≥ 10.25% (first-order formula -), goodput ≤ 89.75%",
        "best          2.19s  waste ≥ 3.51% (first-order formula -), goodput ≤ 96.49%",
        "first-order formula -: C and M are both lower bounds: no bound either way",
    ]
    assert rows["exact"] == [
        "Daly        47m 30s  waste 17.49% (first-order formula 19.36%), goodput 82.51%",
        "current      2h 00m  waste 24.91% (first-order formula 25.81%), goodput 75.09%",
        "best        41m 21s  waste 16.82% (first-order formula 19.63%), goodput 83.18%",
    ]


def test_a_backtest_refuses_the_monte_carlos_options(dbs: dict[str, str]) -> None:
    """A backtest draws nothing at random: --days, --replicates (and the other Monte Carlo
    options) changed nothing in its output, so with --job they are refused (exit 2), while the
    Monte Carlo keeps its size limit."""
    code, _ = _run("simulate", "--job", "c_bound", "--db", dbs["c_bound"], "--days", "1")
    assert code == 2
    result = CliRunner().invoke(
        main,
        ["simulate", "--job", "exact", "--db", dbs["exact"], "--replicates", "2", "--seed", "1"],
    )
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "ckpt-advisor: --replicates, --seed: Monte Carlo option(s), not used by a backtest "
        "(--job replays the job's own interruptions at its estimated C, M and R)"
    )
    code, _ = _run("simulate", "--mtbf", "20s", "--cost", "0.037s", "--sweep")
    assert code == 2  # ~26 million simulated failures: over the limit


def test_goodputs_simulated_line_marks_the_goodput_as_a_bound(dbs: dict[str, str]) -> None:
    """goodput's last line, the goodput simulated with the job's C, M and R: '≤' at a
    lower-bound C, '≥' at a lower-bound M, the recommended interval as the estimates table
    shows it, the gain (no bound) said at the bound it is computed at; at both, no figure."""
    lines = {}
    for job, db in dbs.items():
        code, out = _run("goodput", "--job", job, "--db", db)
        assert code == 0
        lines[job] = out.splitlines()[-1].removeprefix("simulated with this job's C, M and R: ")
    assert lines == {
        "c_bound": "goodput ≤ 70.0% at the current interval (≤ 3.91s), ≤ 73.3% at the "
        "recommended interval (≥ 1.21s): +3.3 points if C is 0.037s",
        "m_bound": "goodput ≥ 61.5% at the current interval (48s), ≥ 71.1% at the recommended "
        "interval (≥ 19s): +9.6 points if M is 1m 05s",
        "both": "- (C and M are both lower bounds: no bound either way)",
        "exact": "goodput 76.4% at the current interval (2h 00m), 82.1% at the recommended "
        "interval (47m 30s): +5.7 points",
    }


def test_goodputs_gpu_hours_are_the_range_its_time_and_share_are(
    dbs: dict[str, str], tmp_path: Path
) -> None:
    """With the job's gpus (512), each bucket's GPU-hours are the same range as its time and
    share where log saves make it a bound (productive's 2.5 was its upper end, checkpoint's 0.0
    its lower end), one figure where it is measured; --json's gpu_hours keep their values."""
    config = tmp_path / "gpus.toml"
    config.write_text('[[jobs]]\nname = "c_bound"\nlogs = ["/nowhere/*.log"]\ngpus = 512\n')
    args = ("goodput", "--job", "c_bound", "--db", dbs["c_bound"], "--config", str(config))
    code, out = _run(*args)
    assert code == 0
    rows = [re.split(r"\s{2,}", line.strip()) for line in out.splitlines()]
    assert rows[2][:4] == ["bucket", "time", "share", "GPU-h"]
    assert {name: cells for name, *cells, _ in rows[4:9]} == {
        "productive": ["16s – 17s", "63.9% – 70.2%", "2.3 – 2.5"],
        "checkpoint": ["0.185s – 1.99s", "0.7% – 8.0%", "0.0 – 0.3"],
        "lost": ["1.16s – 1.38s", "4.7% – 5.5%", "0.2 – 0.2"],
        "restart": ["5.85s", "23.5%", "0.8"],
        "idle": ["0s", "0.0%", "0.0"],
    }
    shown = json.loads(_run(*args, "--json")[1])
    assert round(shown["gpu_hours"]["productive"], 1) == 2.5  # the split's own value
    assert round(shown["gpu_hours"]["checkpoint"], 1) == 0.0


def test_the_slack_message_and_its_detail_mark_the_bounds(
    dbs: dict[str, str], fake_slack: FakeSlack, tmp_path: Path
) -> None:
    """Each store's drift message and its detail (a thread reply), posted with the real
    slack-sdk client to the loopback Slack, for a job of 64 GPUs: the action's goodput is
    marked '≤' at a lower-bound C and '≥' at a lower-bound M (it was unmarked there), left
    out at both; the GPU-hours at stake, no bound, are said at the bounds they are computed
    at; the detail's setting reads 'or more' as the action's does, its waste and goodput are
    marked (or '-' at both), and so are Young's and Daly's intervals ('≥' at either bound) and
    the current/recommended ratio ('≤': a lower bound divides an upper one or an exact one)."""
    notifier = SlackNotifier(fake_slack.token, "#training-alerts", base_url=fake_slack.base_url)
    drift = Reason(ReasonCode.DRIFT, {"ratio": 4.0, "drift_ratio": 1.5})
    notify = Decision(Action.NOTIFY, drift, AlertState(in_drift=True))
    for job, db in dbs.items():
        config = tmp_path / f"{job}.toml"
        config.write_text(f'[[jobs]]\nname = "{job}"\nlogs = ["/nowhere/*.log"]\ngpus = 64\n')
        est = estimator_of(load_config(str(config))).estimate(open_reader(db), job, time.time())
        ts = notifier.send(format_message(est, notify))
        notifier.send(format_details(est, notify), thread_ts=ts)
    posted, channel = fake_slack.messages, fake_slack.posted
    assert [m.get("thread_ts") for m in channel[1::2]] == [m["ts"] for m in channel[::2]]
    shown, models = {}, {}
    for job, message, detail in zip(dbs, posted[::2], posted[1::2], strict=True):
        action = message["blocks"][1]["text"]["text"]
        facts = detail["blocks"][0]["text"]["text"].splitlines()
        shown[job] = (action.split("): ", 1)[-1], *facts[1:4])
        every = [line for b in detail["blocks"] for line in b["text"]["text"].splitlines()]
        [models[job]] = [line for line in every if line.startswith("*Model:*")]
    assert models == {
        "c_bound": "*Model:* Young (1974) ≥ 1.23s, Daly (2006) ≥ 1.21s; current/recommended "
        "≤ 3.24×",
        "m_bound": "*Model:* Young (1974) ≥ 21s, Daly (2006) ≥ 19s; current/recommended ≤ 2.53×",
        "both": "*Model:* Young (1974) ≥ 0.783s, Daly (2006) ≥ 0.747s; current/recommended ≤ 5.45×",
        "exact": "*Model:* Young (1974) 50m 08s, Daly (2006) 47m 30s; current/recommended 2.53×",
    }
    waste_note, goodput_note = (
        "(Daly's model: saves and rework; restarts not counted)",
        "(of wall time, restarts included: simulated with the job's own C, M and R)",
    )
    assert shown["c_bound"] == (
        "goodput ≤ 70.0% → ≤ 73.3%; 49 GPU-h/day at stake if C is 0.037s",
        "*Recommended interval:* 1.21s (1 s, 8 steps of 0.153s); set save_steps=8 or more; at "
        "least 0.542s over M's interval and the plausible C",
        f"*Waste:* ≥ 32.4% of run time now, ≥ 29.2% at the recommended interval {waste_note}",
        f"*Goodput:* ≤ 70.0% now, ≤ 73.3% at the recommended interval {goodput_note}",
    )
    assert shown["m_bound"] == (
        "goodput ≥ 61.5% → ≥ 71.1%; 147 GPU-h/day at stake if M is 1m 05s",
        "*Recommended interval:* 19s (19 s, 22 steps of 0.85s); set --save-interval 22 or "
        "more; at least 7.53s",
        f"*Waste:* ≤ 38.6% of run time now, ≤ 29.0% at the recommended interval {waste_note}",
        f"*Goodput:* ≥ 61.5% now, ≥ 71.1% at the recommended interval {goodput_note}",
    )
    assert shown["both"] == (
        "305 GPU-h/day at stake if C is 0.0545s and M is 5.62s",
        "*Recommended interval:* 0.747s (1 s, 5 steps of 0.143s); set save_steps=5 or more; at "
        "least 0.405s over M's interval and the plausible C",
        "*Waste:* - (C and M are both lower bounds: no bound either way)",
        "*Goodput:* - (C and M are both lower bounds: no bound either way)",
    )
    assert shown["exact"] == (
        "goodput 76.4% → 82.1%, 88 GPU-h/day at stake",
        "*Recommended interval:* 47m 30s (2,850 s, 480 steps of 6s); set save_steps=480; range "
        "40m 32s–56m 17s",
        f"*Waste:* 23.7% of run time now, 17.9% at the recommended interval {waste_note}",
        f"*Goodput:* 76.4% now, 82.1% at the recommended interval {goodput_note}",
    )


def test_the_current_interval_at_a_lower_bound_c_is_an_upper_bound(
    dbs: dict[str, str], fake_slack: FakeSlack
) -> None:
    """The current interval is the save spacing less C: at a lower-bound C (the HF captures,
    and beside the Lightning log) it is an upper bound, shown '≤ 3.91s' in the estimates
    table (its title says why), the Slack action ('now 25 steps, ≤ 3.91s') and detail, and
    said by current_interval_is_upper_bound in estimates --json, the advice file and the
    backtest's --json, current_interval_s keeping its value; a measured C (Megatron's, a
    timing file) leaves it as it was."""
    notifier = SlackNotifier(fake_slack.token, "#training-alerts", base_url=fake_slack.base_url)
    drift = Reason(ReasonCode.DRIFT, {"ratio": 4.0, "drift_ratio": 1.5})
    notify = Decision(Action.NOTIFY, drift, AlertState(in_drift=True))
    shown = {}
    for job, db in dbs.items():
        row = _estimate(db)
        est = Estimator().estimate(open_reader(db), job, time.time())
        backtest = json.loads(_run("simulate", "--job", job, "--db", db, "--json")[1])
        ts = notifier.send(format_message(est, notify))
        notifier.send(format_details(est, notify), thread_ts=ts)
        message, detail = fake_slack.messages[-2:]
        shown[job] = (
            round(row["current_interval_s"], 2),
            row["current_interval_is_upper_bound"],
            advice_json(est)["current_interval_is_upper_bound"],
            backtest["current_interval_is_upper_bound"],
            re.split(r"\s{2,}", _table_row(db, job))[8],
            message["blocks"][1]["text"]["text"].split("; ")[1].split(")")[0],
            detail["blocks"][0]["text"]["text"].splitlines()[0],
        )
    assert shown == {
        "c_bound": (
            3.91,
            True,
            True,
            True,
            "≤ 3.91s",
            "now 25 steps, ≤ 3.91s",
            "*Current interval:* ≤ 3.91s (≤ 4 s, 25 steps)",
        ),
        "m_bound": (
            47.68,
            False,
            False,
            False,
            "48s",
            "now 20 steps = 48s",
            "*Current interval:* 48s (48 s, 20 steps)",
        ),
        "both": (
            4.07,
            True,
            True,
            True,
            "≤ 4.07s",
            "now 25 steps, ≤ 4.07s",
            "*Current interval:* ≤ 4.07s (≤ 4 s, 25 steps)",
        ),
        "exact": (
            7200.0,
            False,
            False,
            False,
            "2h 00m",
            "now 1,200 steps = 2h 00m",
            "*Current interval:* 2h 00m (7,200 s, 1,200 steps)",
        ),
    }
    _, table = _run("estimates", "--db", dbs["c_bound"])
    assert "; now ≤ at such a C (the save spacing less C); goodput ≤" in table.splitlines()[0]


def test_the_plot_marks_c_m_the_interval_and_the_waste_as_bounds(dbs: dict[str, str]) -> None:
    """The waste curve of each store's estimate: the title marks C and M where they are lower
    bounds; where either is, the recommended range is open (the recommended interval '≥') and
    each interval's waste is marked the way the bound moves it (more C, more waste: '≥'; more
    M, less: '≤'; both: no figure); the curve says at which bounds it is drawn. Measured C
    and M draw as before."""
    drawn = {}
    for job, db in dbs.items():
        fig, _ = figure(_estimate(db))
        try:
            ax = fig.axes[0]
            legend = [t.get_text() for t in ax.get_legend().get_texts()]
            drawn[job] = (ax.get_title().split(", R ")[0], legend)
        finally:
            plt.close(fig)
    rough = " (too little data to trust)"
    assert drawn["c_bound"] == (
        "c_bound: M 21s, C ≥ 0.037s",
        [
            "waste if C is 0.037s (a lower bound: more if C is)" + rough,
            "recommended range: ≥ 1.21s",
            "recommended: ≥ 1.21s, ≥ 29.2%",
            "current: ≤ 3.91s, ≥ 32.4%",
        ],
    )
    assert drawn["m_bound"] == (
        "m_bound: M ≥ 1m 05s, C 3.41s",
        [
            "waste if M is 1m 05s (a lower bound: less if M is)" + rough,
            "recommended range: ≥ 19s",
            "recommended: ≥ 19s, ≤ 29.0%",
            "current: 48s, ≤ 38.6%",
        ],
    )
    assert drawn["both"] == (
        "both: M ≥ 5.62s, C ≥ 0.0545s",
        [
            "waste if C is 0.0545s and M is 5.62s (lower bounds: more if C is, less if M is)"
            + rough,
            "recommended range: ≥ 0.747s",
            "recommended: ≥ 0.747s",
            "current: ≤ 4.07s",
        ],
    )
    assert drawn["exact"] == (
        "exact: M 5h 14m, C 4m 00s",
        [
            "waste (Daly, exponential failures)",
            "optimum's confidence band",
            "recommended: 47m 30s, 17.9%",
            "current: 2h 00m, 23.7%",
        ],
    )


def test_c_measured_from_save_end_lines_is_said_to_come_from_them(dbs: dict[str, str]) -> None:
    """Megatron's C (from its log's save-end lines, measured: beside the Lightning log in
    ``m_bound``) reads 'from log lines that end each save' in the message's evidence; it read
    'from the timing file', which the job has none of. A timing file's C says so."""
    evidence = {}
    for job in ("m_bound", "exact"):
        est = Estimator().estimate(open_reader(dbs[job]), job, time.time())
        evidence[job] = (est.checkpoint_cost_source, cost_evidence(est))
    assert evidence["m_bound"][0] == "log"
    assert evidence["m_bound"][1].startswith("C 3.41s")
    assert evidence["m_bound"][1].endswith("from log lines that end each save, 5 saves")
    assert evidence["exact"][0] == "timing_file"
    assert " from the timing file, " in evidence["exact"][1]
