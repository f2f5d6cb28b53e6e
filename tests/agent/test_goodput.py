"""``goodput``: each bucket on real HF Trainer lines of a known shape, and every bucket within 2%
of wall time on generated weeks with known truth (timing file, and logs alone)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.synth import SynthJob, Templates, simulate, stamp
from ckpt_advisor.rules.goodput import BUCKETS

T0 = datetime(2026, 11, 1, tzinfo=UTC)
HOUR = 3600.0
SHAPE: dict[str, Any] = {
    "mtbf_s": 1.0,  # unused: the lives are given
    "cost_s": 240.0,
    "interval_steps": 600,  # an hour of 6 s steps
    "restart_s": 600.0,
    "duration_s": 8 * HOUR,
}
"""A job of known shape: saves of 4 min every hour of compute, 10 min restarts."""


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def _goodput(
    tmp: Path, log: str, timings: str | None = None, *args: str, job: str = "j"
) -> dict[str, Any]:
    """Write the log (and timing file), ingest them and return ``goodput --json``."""
    db = tmp / "s.db"
    (tmp / "train.log").write_text(log)
    files = [tmp / "train.log"]
    if timings is not None:
        (tmp / "ckpt_timings.jsonl").write_text(timings)
        files.append(tmp / "ckpt_timings.jsonl")
    for path in files:
        _run("ingest", str(path), "--job", job, "--db", str(db))
    out: dict[str, Any] = json.loads(
        _run("goodput", "--job", job, "--db", str(db), "--json", *args)
    )
    return out


def _text(job: SynthJob) -> tuple[str, str]:
    return "".join(t for _, t in job.log), "".join(t for _, t in job.timings)


def _truth(job: SynthJob, out: dict[str, Any]) -> dict[str, float]:
    since = datetime.fromisoformat(out["window_start"])
    until = datetime.fromisoformat(out["window_end"])
    return job.truth_seconds(since, until)


def test_checkpoint_from_a_timing_file_is_each_saves_blocking_time(tmp_path: Path) -> None:
    """With a timing file, checkpoint time is the saves' recorded durations, exactly, and says
    it comes from the timing file; a job that never failed loses nothing and restarts never."""
    job = simulate(**SHAPE, lives_s=[])
    out = _goodput(tmp_path, *_text(job))
    assert out["n_saves"] == job.n_saves == 7
    assert out["checkpoint_s"] == pytest.approx(7 * 240.0, abs=0.01)
    assert out["lost_s"] == out["restart_s"] == out["idle_s"] == 0.0
    assert out["productive_s"] + out["checkpoint_s"] == pytest.approx(out["wall_s"])
    assert out["goodput"] == pytest.approx(out["productive_s"] / out["wall_s"])
    checkpoint = out["measured_by"]["checkpoint"]
    assert checkpoint["source"] == "timing_file"
    assert checkpoint["bound"] is None
    assert checkpoint["range_s"] == [out["checkpoint_s"], out["checkpoint_s"]]
    assert out["goodput_range"] == [out["goodput"], out["goodput"]]


def test_checkpoint_from_log_lines_is_a_lower_bound_closed_by_the_next_step(
    tmp_path: Path,
) -> None:
    """From log lines alone a save lasts from its first line to its "Model weights saved" line
    (40% of the true 240 s here): a lower bound, said so, with an upper bound from the first
    step shown after each save that holds the truth; goodput's range holds the true goodput."""
    job = simulate(**SHAPE, lives_s=[])
    log, _ = _text(job)
    out = _goodput(tmp_path, log)
    truth = _truth(job, out)
    assert out["checkpoint_s"] == pytest.approx(7 * 96.0, abs=0.01)
    low, high = out["measured_by"]["checkpoint"]["range_s"]
    assert low == out["checkpoint_s"]
    assert truth["checkpoint"] <= high <= truth["checkpoint"] + 7 * 1.5  # tqdm's 1 s resolution
    assert out["checkpoint_is_lower_bound"] is True
    checkpoint = out["measured_by"]["checkpoint"]
    assert (checkpoint["source"], checkpoint["bound"]) == ("log_lines", "lower")
    assert "lower bound" in checkpoint["how"]
    assert out["measured_by"]["productive"]["bound"] == "upper"
    good_low, good_high = out["goodput_range"]
    assert good_low <= truth["productive"] / out["wall_s"] <= good_high == out["goodput"]


def test_lost_is_the_work_since_the_last_completed_save(tmp_path: Path) -> None:
    """A failure 5,000 s into the run, 1,160 s after the save that completed at 3,840 s, loses
    those 1,160 s (less up to one bar redraw, 10 steps, since the traceback is dated by the last
    bar); the lost stretch is owed to interruption 1."""
    job = simulate(**SHAPE, lives_s=[5000.0])
    out = _goodput(tmp_path, *_text(job))
    assert _truth(job, out)["lost"] == pytest.approx(1160.0)
    assert 1160.0 - 60.0 <= out["lost_s"] <= 1160.0
    assert out["n_interruptions"] == 1
    assert out["measured_by"]["lost"]["source"] == "log_lines"


def test_lost_runs_from_the_older_save_a_restart_resumed_from(tmp_path: Path) -> None:
    """When the next run resumes from an older save than the last one (its log says "global step
    600" where step 1200 was saved too), the work since that older save is lost, less the later
    save's own blocking time (checkpoint time either way)."""
    job = simulate(**SHAPE, lives_s=[9000.0])
    log, timings = _text(job)
    head, _, tail = log.partition("Resuming training from checkpoint")
    tail = tail.replace("global step 1200", "global step 600", 1).replace(
        "past 0 epochs and 1200 batches", "past 0 epochs and 600 batches", 1
    )
    out = _goodput(tmp_path, f"{head}Resuming training from checkpoint{tail}", timings)
    # saves at 3,600-3,840 s (step 600) and 7,440-7,680 s (step 1200); failure at 9,000 s
    expected = (7440.0 - 3840.0) + (9000.0 - 7680.0)
    assert expected - 60.0 <= out["lost_s"] <= expected


def test_restart_runs_from_the_failure_to_the_next_runs_first_step(tmp_path: Path) -> None:
    """The 600 s down after a failure are restart time (plus up to one bar redraw: the failure
    is dated by the last bar before it); the next run's first step is dated back by the step
    time to the run's start."""
    job = simulate(**SHAPE, lives_s=[5000.0])
    out = _goodput(tmp_path, *_text(job))
    assert 600.0 <= out["restart_s"] <= 660.0
    assert "dated back by the step time" in out["measured_by"]["restart"]["how"]
    assert out["lost_s"] + out["restart_s"] == pytest.approx(1160.0 + 600.0, abs=1.0)


def test_a_failed_restart_attempt_is_part_of_the_restart(tmp_path: Path) -> None:
    """A restarted run that dies 30 s in, before any progress, is one interruption with the
    first: its restart holds both downtimes and the attempt (600 + 30 + 600 s), not a loss."""
    job = simulate(**SHAPE, lives_s=[5000.0, 30.0])
    out = _goodput(tmp_path, *_text(job))
    assert out["n_interruptions"] == job.n_interruptions == 1
    assert 1230.0 <= out["restart_s"] <= 1290.0
    truth = _truth(job, out)
    assert truth["restart"] == pytest.approx(1230.0)
    assert out["lost_s"] == pytest.approx(truth["lost"], abs=60.0)


def test_idle_is_the_time_between_a_clean_end_and_the_next_run(tmp_path: Path) -> None:
    """A run that ends with "Training completed." and a new run two hours later: the two hours
    are idle (no interruption, nothing lost), measured as inferred; the rest is saves and
    kept progress."""
    tpl = Templates.load()
    first = simulate(**{**SHAPE, "duration_s": 4 * HOUR}, lives_s=[])
    end = T0 + timedelta(hours=4)
    done = "".join(stamp(line, end) + "\n" for line in tpl.completed)
    second = simulate(
        **{**SHAPE, "duration_s": 4 * HOUR}, lives_s=[], start=end + timedelta(hours=2)
    )
    log = _text(first)[0] + done + _text(second)[0]
    out = _goodput(tmp_path, log, _text(first)[1] + _text(second)[1])
    assert out["idle_s"] == pytest.approx(2 * HOUR, abs=1.0)
    assert out["n_interruptions"] == 0
    assert out["lost_s"] == out["restart_s"] == 0.0
    assert out["measured_by"]["idle"]["source"] == "inferred"
    assert out["checkpoint_s"] == pytest.approx((first.n_saves + second.n_saves) * 240.0, abs=0.1)


def test_productive_is_the_kept_work_and_goodput_its_share(tmp_path: Path) -> None:
    """Productive time is the compute that ended up saved (or not lost yet): the buckets add up
    to the wall time, and goodput is productive over wall; the by-day rows add up to the
    window, and GPU-hours follow the job's gpus from --config."""
    job = simulate(**{**SHAPE, "duration_s": 30 * HOUR}, lives_s=[5000.0, 20000.0])
    log, timings = _text(job)
    (tmp_path / "config.toml").write_text(
        f'[store]\npath = "{tmp_path / "s.db"}"\n[[jobs]]\nname = "j"\n'
        f'logs = ["{tmp_path}/train.log"]\ngpus = 8\n'
    )
    out = _goodput(tmp_path, log, timings, "--config", str(tmp_path / "config.toml"))
    truth = _truth(job, out)
    assert out["productive_s"] == pytest.approx(truth["productive"], abs=1.0)
    assert sum(out[f"{b}_s"] for b in BUCKETS) == pytest.approx(out["wall_s"])
    assert out["goodput"] == pytest.approx(truth["productive"] / out["wall_s"], abs=1e-4)
    days = out["by_day"]
    assert [d["day"] for d in days] == ["2026-11-01", "2026-11-02"]
    for name in (*BUCKETS, "wall"):
        assert sum(d[f"{name}_s"] for d in days) == pytest.approx(out[f"{name}_s"])
    assert out["gpus"] == 8
    assert out["gpu_hours"]["lost"] == pytest.approx(out["lost_s"] * 8 / 3600.0)


def test_since_keeps_the_last_stretch_before_the_newest_event(tmp_path: Path) -> None:
    """--since 6h splits only the six hours before the job's newest event, and says so."""
    job = simulate(**{**SHAPE, "duration_s": 30 * HOUR}, lives_s=[5000.0, 20000.0])
    out = _goodput(tmp_path, *_text(job), "--since", "6h")
    assert out["since_s"] == 6 * HOUR
    assert out["wall_s"] == pytest.approx(6 * HOUR)
    end = datetime.fromisoformat(out["window_end"])
    assert datetime.fromisoformat(out["window_start"]) == end - timedelta(hours=6)
    truth = _truth(job, out)
    for name in BUCKETS:
        assert out[f"{name}_s"] == pytest.approx(truth[name], abs=61.0)


def test_table_plot_and_spans_export(tmp_path: Path) -> None:
    """Without --json the command prints each bucket with how it was measured and the simulated
    goodput; --plot writes a PNG, --spans a CSV of labelled stretches that add up to the wall
    time, each named last on stdout (on stderr with --json, whose stdout is the JSON alone); an
    unknown job exits 1 naming the known ones."""
    import pandas as pd

    job = simulate(mtbf_s=6 * HOUR, cost_s=240.0, interval_steps=1200, seed=3, duration_s=3 * 86400)
    out = _goodput(tmp_path, *_text(job))
    png, csv = tmp_path / "badput.png", tmp_path / "spans.csv"
    db = str(tmp_path / "s.db")
    args = [
        "goodput",
        "--job",
        "j",
        "--db",
        db,
        "--by-day",
        "--plot",
        str(png),
        "--spans",
        str(csv),
    ]
    text = _run(*args)
    assert "  checkpoint: timing file: the blocking part of each of" in text  # below the table
    assert "at the recommended interval" in text
    assert "by UTC day" in text
    assert text.splitlines()[-2:] == [
        f"j: spans CSV written to {csv}",
        f"j: badput plot written to {png}",
    ]
    as_json = CliRunner().invoke(main, [*args, "--json"])
    assert json.loads(as_json.stdout)["wall_s"] == out["wall_s"]
    assert as_json.stderr.splitlines() == text.splitlines()[-2:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    spans = pd.read_csv(csv)
    assert set(spans["bucket"]) <= set(BUCKETS)
    assert spans["seconds"].sum() == pytest.approx(out["wall_s"])
    assert spans.groupby("bucket")["seconds"].sum()["lost"] == pytest.approx(out["lost_s"])
    result = CliRunner().invoke(main, ["goodput", "--job", "nope", "--db", db])
    assert result.exit_code == 1
    assert "no job 'nope' here; known: j" in result.output


def _accuracy(job: SynthJob, out: dict[str, Any]) -> dict[str, float]:
    """Per bucket, (measured − truth) as a share of wall time."""
    truth = _truth(job, out)
    return {b: (out[f"{b}_s"] - truth[b]) / out["wall_s"] for b in BUCKETS}


WEEKS = [
    {"mtbf_s": 6 * HOUR, "cost_s": 240.0, "interval_steps": 1200, "seed": 0},
    {"mtbf_s": 2 * HOUR, "cost_s": 600.0, "interval_steps": 600, "restart_s": 1800.0, "seed": 5},
    {"mtbf_s": 6 * HOUR, "cost_s": 240.0, "interval_steps": 1200, "shape": 0.7, "seed": 6},
    {
        "mtbf_s": 8 * HOUR,
        "cost_s": 300.0,
        "interval_steps": 900,
        "cost_sigma": 0.3,
        "stops": [(36 * HOUR, 3 * HOUR), (96 * HOUR, 9 * HOUR)],
        "seed": 7,
    },
]
"""Generated weeks: the demo's job, a short-MTBF job with long saves and restarts, one with
Weibull failures (k = 0.7), and one with saves of varied length that stops cleanly twice and
idles 3 h and 9 h before its next run."""
IDS = ["demo", "short-mtbf", "weibull", "idle"]


@pytest.mark.parametrize("week", WEEKS, ids=IDS)
def test_every_bucket_is_within_2_percent_of_wall_time_with_a_timing_file(
    tmp_path: Path, week: dict[str, Any]
) -> None:
    """On a generated week with a timing file every bucket is within 2% of wall time of the
    truth the job was made with (the failures are dated by the last bar before them: up to 10
    steps moved from lost to restart per interruption)."""
    job = simulate(**week)
    out = _goodput(tmp_path, *_text(job))
    errors = _accuracy(job, out)
    assert max(abs(e) for e in errors.values()) < 0.02, errors
    assert out["n_interruptions"] == job.n_interruptions
    assert out["idle_s"] == pytest.approx(sum(idle for _, idle in week.get("stops", ())), abs=1.0)


@pytest.mark.parametrize("week", WEEKS, ids=IDS)
def test_log_only_buckets_hold_the_truth_within_their_bounds(
    tmp_path: Path, week: dict[str, Any]
) -> None:
    """From the log alone restart and idle are within 2% of wall time; checkpoint is a lower
    bound and productive and lost upper bounds whose ranges hold the truth, each range's far
    end within 2% of wall time of it."""
    job = simulate(**week)
    out = _goodput(tmp_path, _text(job)[0])
    truth, wall = _truth(job, out), out["wall_s"]
    errors = _accuracy(job, out)
    assert abs(errors["restart"]) < 0.02 and abs(errors["idle"]) < 0.02, errors
    for name in ("checkpoint", "productive", "lost"):
        low, high = out["measured_by"][name]["range_s"]
        # a failure is dated by the last bar before it: up to 10 steps early
        slack = 60.0 * out["n_interruptions"] if name == "lost" else 0.0
        assert low - slack <= truth[name] <= high + slack, (name, low, truth[name], high)
        far = low if name == "checkpoint" else high
        near = high if name == "checkpoint" else low
        assert abs(near - truth[name]) < 0.02 * wall, (name, near, truth[name])
        assert far == out[f"{name}_s"]


REAL = Path(__file__).parents[2] / "agent" / "fixtures" / "real"


def test_logs_without_timestamps_are_named_not_split(tmp_path: Path) -> None:
    """A job whose only logs print no timestamps (the captured Lightning runs) has no wall time
    to split: goodput exits 1 naming each file and its first event's line; beside a timed log
    the untimed file is listed in untimed_files and the table warns about it."""
    db = str(tmp_path / "s.db")
    for name in ("lightning_crash.log", "lightning_resume.log"):
        _run("ingest", str(REAL / name), "--job", "pl", "--db", db)
    result = CliRunner().invoke(main, ["goodput", "--job", "pl", "--db", db])
    assert result.exit_code == 1
    assert "pl: no wall time to split: no timestamps in" in result.output
    assert f"{REAL / 'lightning_crash.log'} (first event at line 1)" in result.output
    for name in ("hf_trainer_crash.log", "hf_trainer_resume.log", "lightning_crash.log"):
        _run("ingest", str(REAL / name), "--job", "mix", "--db", db)
    out = json.loads(_run("goodput", "--job", "mix", "--db", db, "--json"))
    assert out["untimed_files"] == {str(REAL / "lightning_crash.log"): 1}
    assert "Caution, the split is not measured around these" in _run(
        "goodput", "--job", "mix", "--db", db
    )
    timed = json.loads(_run("goodput", "--job", "j", "--db", _hf_only(tmp_path), "--json"))
    assert timed["untimed_files"] == {}


def test_goodput_json_without_wall_time_says_why(tmp_path: Path) -> None:
    """The captured Lightning runs alone (no timestamps: every event dated when read): goodput
    --json prints its object, every figure of the split null, with insufficient_data saying
    why in the words the text's error gives, exit 0 (as estimates --json prints [] with no
    estimate); with --plot, nothing is drawn: the same object, then exit 1."""
    db = str(tmp_path / "s.db")
    _run("ingest", str(REAL / "lightning_crash.log"), str(REAL / "lightning_resume.log"),
         "--job", "pl", "--db", db)  # fmt: skip
    text = CliRunner().invoke(main, ["goodput", "--job", "pl", "--db", db])
    assert (text.exit_code, text.stdout) == (1, "")
    out = json.loads(_run("goodput", "--job", "pl", "--db", db, "--json"))
    assert f"pl: {out['insufficient_data']}\n" in text.stderr
    assert out["insufficient_data"].startswith(
        f"no wall time to split: no timestamps in {REAL / 'lightning_crash.log'} (first event "
        "at line 1)"
    )
    split = ("window_start", "window_end", "wall_s", "productive_s", "checkpoint_s", "lost_s")
    split += ("restart_s", "idle_s", "goodput", "checkpoint_is_lower_bound", "measured_by")
    split += ("n_saves", "n_interruptions", "gpu_hours")
    assert {key: out[key] for key in split} == dict.fromkeys(split)
    assert (out["goodput_range"], out["by_day"], out["job"]) == ([None, None], [], "pl")
    assert out["untimed_files"] == {
        str(REAL / "lightning_crash.log"): 1,
        str(REAL / "lightning_resume.log"): 1,
    }
    png = tmp_path / "badput.png"
    drawn = CliRunner().invoke(
        main, ["goodput", "--job", "pl", "--db", db, "--json", "--plot", str(png)]
    )
    assert drawn.exit_code == 1 and json.loads(drawn.stdout) == out and not png.exists()
    timed = json.loads(_run("goodput", "--job", "j", "--db", _hf_only(tmp_path), "--json"))
    assert timed["insufficient_data"] is None and timed["wall_s"] > 0


def test_a_log_read_in_the_wrong_zone_is_split_on_its_timing_files_clock(tmp_path: Path) -> None:
    """The HF capture and its timing file (both written in UTC), the log read as New York
    time: the log's times are moved the 5 h between the two sources onto the timing file's
    clock, so the split is the one read in UTC to the millisecond, and it says so as
    estimates does (the zone_offset note, in the text and in --json notes and note_data); read
    in UTC, no such note."""
    hf = Path(__file__).parents[1] / "parsers" / "fixtures" / "hf_trainer"
    files = [str(hf / "hf_trainer_446.log"), str(hf / "ckpt_timings.jsonl")]
    for tz in ("America/New_York", "UTC"):
        _run("ingest", *files, "--job", "j", "--db", str(tmp_path / f"{tz[:3]}.db"), "--tz", tz)
    wrong = ["goodput", "--job", "j", "--db", str(tmp_path / "Ame.db")]
    out = json.loads(_run(*wrong, "--json"))
    assert out["note_data"] == [{"code": "zone_offset", "offset_s": 18000.0, "n_saves": 4}]
    [sentence] = out["notes"]
    assert sentence.startswith("the log's saves are stamped 5h 00m after the timing file's")
    assert "the log's were moved by that onto the timing file's clock" in sentence
    assert f"Note on the split's clock: {sentence}\n" in _run(*wrong)
    right = json.loads(_run("goodput", "--job", "j", "--db", str(tmp_path / "UTC.db"), "--json"))
    assert (right["notes"], right["note_data"]) == ([], [])
    keys = ("wall_s", *(f"{b}_s" for b in BUCKETS), "n_saves", "n_interruptions")
    assert [out[k] for k in keys] == pytest.approx([right[k] for k in keys], abs=1e-3)
    assert (out["window_start"], out["window_end"]) == (right["window_start"], right["window_end"])


def _hf_only(tmp: Path) -> str:
    db = str(tmp / "hf.db")
    for name in ("hf_trainer_crash.log", "hf_trainer_resume.log"):
        _run("ingest", str(REAL / name), "--job", "j", "--db", db)
    return db


def test_the_goodput_bench_runs_and_reads_its_rows(tmp_path: Path) -> None:
    """bench/goodput.py's path (write, tail, estimate, split) runs on a two-day job from both
    sources and its acceptance rows are met, so `python -m bench.goodput` cannot rot unseen."""
    from bench.goodput import rows, run_scenario

    job = simulate(mtbf_s=6 * HOUR, cost_s=240.0, interval_steps=600, duration_s=2 * 86400)
    results = [
        run_scenario("two days", job, tmp_path / str(timed), timing_file=timed)
        for timed in (True, False)
    ]
    assert [met for *_, met in rows(results)] == [True] * 4, rows(results)
    assert abs(results[0].error("lost")) < 0.02


def test_a_bucket_known_as_a_range_has_its_share_as_a_range(tmp_path: Path) -> None:
    """The HF crash and resume captures (C from log lines, a lower bound): a bucket whose
    time is a range shows its share as the same range, as the headline's goodput; a bucket
    measured exactly (restart) shows one share. Piped, no line folds: the title neither."""
    db = str(tmp_path / "s.db")
    _run("ingest", str(REAL / "hf_trainer_crash.log"), str(REAL / "hf_trainer_resume.log"),
         "--job", "hf", "--db", db)  # fmt: skip
    out = json.loads(_run("goodput", "--job", "hf", "--db", db, "--json"))
    text = _run("goodput", "--job", "hf", "--db", db)
    rows = {
        line.split()[0]: line
        for line in text.splitlines()
        if line.startswith("  ") and line.strip()
    }
    wall = out["wall_s"]
    low, high = out["measured_by"]["productive"]["range_s"]
    assert low < high and f"{low / wall:.1%} – {high / wall:.1%}" in rows["productive"]
    assert f"{out['goodput_range'][0]:.1%} to {out['goodput']:.1%}" in text.splitlines()[0]
    # piped, the title is one line, though wider than the table (rich folded it to that width)
    assert text.splitlines()[0].endswith("; 5 save(s), 1 interruption(s)")
    restart = out["restart_s"] / wall
    assert f" {restart:.1%} " in rows["restart"] and "–" not in rows["restart"]
