"""Config loading: defaults, the DESIGN.md keys, and errors that name the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.config import ConfigError, load_config, parse_config
from ckpt_advisor.agent.config_reference import config_reference

DESIGN_EXAMPLE = """
[store]
path = "/var/lib/ckpt-advisor/ckpt-advisor.db"

[schedule]
estimate_every = "5m"

[[jobs]]
name = "llama-70b"
logs = ["/shared/runs/llama-70b/logs/*.log"]
timings = ["/shared/runs/llama-70b/ckpt_timings.jsonl"]

[slack]
channel = "#training-alerts"
token_env = "SLACK_BOT_TOKEN"
base_url = "https://slack.com/api/"
"""


def test_design_example_loads_with_durations_in_seconds(tmp_path: Path) -> None:
    """The config shown in DESIGN.md loads, and "5m" becomes 300 seconds."""
    path = tmp_path / "c.toml"
    path.write_text(DESIGN_EXAMPLE)
    config = load_config(path)
    assert config.schedule.estimate_every == 300.0
    assert config.jobs[0].name == "llama-70b"
    assert config.jobs[0].timings == ["/shared/runs/llama-70b/ckpt_timings.jsonl"]
    assert config.slack.channel == "#training-alerts"
    assert str(config.store.path) == "/var/lib/ckpt-advisor/ckpt-advisor.db"


def test_empty_config_has_every_default() -> None:
    """An empty file is a valid config: every key has a default."""
    config = parse_config({})
    assert config.jobs == []
    assert config.estimation.drift_ratio == 1.5
    assert config.parse.timezone == "UTC"


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("[store]\npth = 1\n", "store.pth: unknown key"),
        (
            "[store]\npath = 5\n",
            "store.path: must name the SQLite file (a non-empty string), got 5",
        ),
        ('[store]\npath = ""\n', "store.path: must name the SQLite file (a non-empty string)"),
        (
            '[store]\npath = "/"\n',
            "store.path: / is a directory; name the store's file in it, e.g.",
        ),
        ('[schedule]\nestimate_every = "soon"\n', "schedule.estimate_every: not a duration"),
        ('[[jobs]]\nname = "a"\nlogs = ["rel/*.log"]\n', "jobs[0].logs: glob 'rel/*.log' must be"),
        ('[[jobs]]\nname = "a"\n[[jobs]]\nname = "a"\n', "jobs: job name 'a' appears twice"),
        ('[parse]\ntimezone = "Mars/Olympus"\n', "parse.timezone: unknown time zone"),
        ('[slack]\nbase_url = "slack.com"\n', "slack.base_url: base_url 'slack.com' must start"),
        ("[store\n", "invalid TOML"),
    ],
)
def test_bad_config_names_file_and_key(tmp_path: Path, toml: str, expected: str) -> None:
    """Each kind of mistake is reported with the file path and the offending key."""
    path = tmp_path / "bad.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value)
    assert expected in str(info.value)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    """A config path that does not exist is reported as such, naming the path."""
    with pytest.raises(ConfigError, match=r"nope\.toml: cannot read config"):
        load_config(tmp_path / "nope.toml")


def test_token_from_environment_then_credentials_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token comes from the named variable, else from systemd's credentials directory."""
    config = parse_config({"slack": {"token_env": "MY_TOKEN"}})
    monkeypatch.delenv("MY_TOKEN", raising=False)
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    assert config.slack_token() is None
    (tmp_path / "MY_TOKEN").write_text("xoxb-from-file\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    assert config.slack_token() == "xoxb-from-file"
    monkeypatch.setenv("MY_TOKEN", "xoxb-from-env")
    assert config.slack_token() == "xoxb-from-env"


@pytest.mark.parametrize(
    ("listen", "address"),
    [
        (None, None),
        ("9464", ("127.0.0.1", 9464)),
        (":9464", ("127.0.0.1", 9464)),
        ("0.0.0.0:9464", ("0.0.0.0", 9464)),
        ("[::1]:9464", ("::1", 9464)),
    ],
)
def test_metrics_listen_defaults_to_loopback(
    listen: str | None, address: tuple[str, int] | None
) -> None:
    """[metrics] listen is off by default, and a bare port binds to loopback only."""
    data = {} if listen is None else {"metrics": {"listen": listen}}
    assert parse_config(data).metrics.address() == address


@pytest.mark.parametrize("listen", ["localhost:http", "host:0", "host:70000", "[::1:9464"])
def test_bad_metrics_listen_names_the_key(listen: str) -> None:
    """A listen value without a usable port is rejected, naming metrics.listen."""
    with pytest.raises(ConfigError, match=r"c\.toml: metrics\.listen: listen"):
        parse_config({"metrics": {"listen": listen}}, "c.toml")


def test_job_format_is_checked_against_the_parsers() -> None:
    """An unknown ``[[jobs]] format`` is an error naming the key and the known formats."""
    data = {"jobs": [{"name": "a", "logs": ["/x/*.log"], "format": "megatron-lm"}]}
    with pytest.raises(ConfigError, match=r"jobs\[0\]\.format: unknown format 'megatron-lm'.*nemo"):
        parse_config(data, "c.toml")
    assert (
        parse_config({"jobs": [{"name": "a", "format": "megatron"}]}).jobs[0].format == "megatron"
    )


def test_custom_patterns_are_validated_at_load_with_their_key() -> None:
    """A bad regex or kind in ``[[jobs.patterns]]`` names jobs[i].patterns[j].<key>."""
    bad_regex = {"jobs": [{"name": "a", "patterns": [{"kind": "step", "regex": "(x"}]}]}
    with pytest.raises(ConfigError, match=r"c\.toml: jobs\[0\]\.patterns\[0\]\.regex: bad regex"):
        parse_config(bad_regex, "c.toml")
    bad_kind = {"jobs": [{"name": "a", "patterns": [{"kind": "save", "regex": "x"}]}]}
    with pytest.raises(ConfigError, match=r"jobs\[0\]\.patterns\[0\]\.kind: unknown kind 'save'"):
        parse_config(bad_kind, "c.toml")
    ok = {"jobs": [{"name": "a", "patterns": [{"kind": "step", "regex": r"it (?P<step>\d+)"}]}]}
    assert parse_config(ok).jobs[0].patterns[0].compiled().regex.pattern == r"it (?P<step>\d+)"


def test_estimation_money_and_job_size_keys() -> None:
    """Price per GPU-hour, currency, minimum excess and a job's nodes are read; a negative price
    names its key."""
    config = parse_config(
        {
            "estimation": {
                "price_per_gpu_hour": 2.5,
                "currency": "EUR ",
                "min_weibull_failures": 8,
            },
            "jobs": [{"name": "a", "gpus": 64, "nodes": 8}],
        }
    )
    assert config.estimation.price_per_gpu_hour == 2.5
    assert config.estimation.currency == "EUR "
    assert config.estimation.min_excess_gpu_hours_per_day == 1.0
    assert config.estimation.min_weibull_failures == 8
    assert config.jobs[0].nodes == 8
    with pytest.raises(ConfigError, match=r"estimation\.price_per_gpu_hour"):
        parse_config({"estimation": {"price_per_gpu_hour": -1}})


def test_docs_config_reference_is_generated_from_the_code() -> None:
    """docs/CONFIG.md is exactly what config_reference() renders, so every key is documented
    with its real default."""
    doc = Path(__file__).parents[2] / "docs" / "CONFIG.md"
    assert doc.read_text() == config_reference()
    for key in ("estimate_every", "drift_ratio", "timezone", "token_env", "listen", "regex"):
        assert f"| `{key}` |" in doc.read_text()


def test_resolve_ratio_above_drift_ratio_is_refused() -> None:
    """Hysteresis needs resolve_ratio <= drift_ratio, else an episode could never end."""
    with pytest.raises(ConfigError, match=r"c\.toml: estimation: .*resolve_ratio \(2\.0\) must"):
        parse_config({"estimation": {"drift_ratio": 1.2, "resolve_ratio": 2.0}}, "c.toml")


def test_absurd_durations_are_refused_at_load() -> None:
    """A poll interval of a million days is refused naming the key, not a crash at run time."""
    with pytest.raises(ConfigError, match=r"schedule\.poll_every: .*less than or equal to 3600"):
        parse_config({"schedule": {"poll_every": "1000000d"}}, "c.toml")


def test_token_with_control_characters_is_refused_without_showing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token with a pasted newline is a config error naming the variable, never echoing the
    token (it would otherwise surface in HTTP header errors)."""
    config = parse_config({"slack": {"token_env": "MY_TOKEN"}})
    monkeypatch.setenv("MY_TOKEN", "xoxb-SECRET-part\nrest")
    with pytest.raises(ConfigError, match=r"\$MY_TOKEN: the Slack token contains") as info:
        config.slack_token()
    assert "SECRET" not in str(info.value)


def test_advice_section_defaults_off_and_the_endpoint_needs_the_listener() -> None:
    """[advice] writes no files and serves nothing by default; endpoint = true without
    [metrics] listen is refused with a message naming both keys."""
    config = parse_config({"advice": {"dir": "/var/lib/ckpt-advisor/advice"}})
    assert config.advice.dir == Path("/var/lib/ckpt-advisor/advice")
    assert not config.advice.endpoint and parse_config({}).advice.dir is None
    with pytest.raises(ConfigError, match=r"^c\.toml: advice\.endpoint needs \[metrics\] listen"):
        parse_config({"advice": {"endpoint": True}}, "c.toml")


def test_job_survival_overrides_reach_the_estimate_and_bad_tiers_are_named() -> None:
    """[[jobs]] survival maps a class to the tier that survives it in the job's facts (other
    classes keep the default table); an unknown tier is refused naming the job's key."""
    from ckpt_advisor.agent.app import job_sizes
    from ckpt_advisor.rules.tiers import Tier

    job = {"name": "j", "survival": {"node_failure": "memory"}}
    facts = job_sizes(parse_config({"jobs": [job]}))["j"]
    assert facts.survival["node_failure"].tier is Tier.MEMORY
    assert facts.survival["preemption"].tier is Tier.PERSISTENT
    bad = {"name": "j", "survival": {"node_failure": "ram"}}
    with pytest.raises(ConfigError, match=r"c\.toml: jobs\[0\]\.survival: node_failure: tier"):
        parse_config({"jobs": [bad]}, "c.toml")


@pytest.mark.parametrize(
    ("written", "shown"), [("true", "true"), ('"64"', '"64"'), ("64.0", "64.0")]
)
def test_counts_are_toml_integers_and_every_error_line_is_prefixed(
    tmp_path: Path, written: str, shown: str
) -> None:
    """``gpus = true`` (read as 1 GPU), ``gpus = "64"`` and ``gpus = 64.0`` were accepted
    (pydantic's lax mode); now each count key (``gpus``, ``nodes``, the ``[estimation]``
    counts) is refused naming it and the value as written, and ``check-config`` exits 2 with
    each of the errors on its own ``ckpt-advisor:`` line (only the first was prefixed)."""
    config = tmp_path / "c.toml"
    counts = ("cost_window_saves", "min_failures", "min_saves", "min_weibull_failures")
    config.write_text(
        "[estimation]\n" + "".join(f"{key} = {written}\n" for key in counts)
        + f'[[jobs]]\nname = "j"\ngpus = {written}\nnodes = {written}\n'
    )  # fmt: skip
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    must = f"must be an integer such as 64 (no quotes, no decimal point), got {shown}"
    keys = [f"estimation.{key}" for key in counts] + ["jobs[0].gpus", "jobs[0].nodes"]
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [f"ckpt-advisor: {config}: {key}: {must}" for key in keys]
    config.write_text('[[jobs]]\nname = "j"\ngpus = 64\nnodes = 8\n')
    assert (load_config(config).jobs[0].gpus, load_config(config).jobs[0].nodes) == (64, 8)


def test_numbers_and_switches_are_their_toml_types(tmp_path: Path) -> None:
    """``retention_days = true`` was read as 1 day (every older event pruned), ``"365"`` as
    365, ``file_events = "false"`` and ``endpoint = 1`` as booleans (pydantic's lax mode); now
    each number and switch key is refused naming it and the value as written. Integers stay
    numbers."""
    config = tmp_path / "c.toml"
    config.write_text(
        '[store]\nretention_days = true\n[schedule]\nfile_events = "false"\n'
        '[estimation]\nconfidence = "0.9"\ndrift_ratio = 2\n[advice]\nendpoint = 1\n'
    )
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        f"ckpt-advisor: {config}: store.retention_days: must be a number such as 365 or 1.5 "
        "(no quotes), got true",
        f"ckpt-advisor: {config}: schedule.file_events: must be true or false (no quotes), "
        'got "false"',
        f"ckpt-advisor: {config}: estimation.confidence: must be a number such as 365 or 1.5 "
        '(no quotes), got "0.9"',
        f"ckpt-advisor: {config}: advice.endpoint: must be true or false (no quotes), got 1",
    ]
    config.write_text("[store]\nretention_days = 30\n[estimation]\ndrift_ratio = 2\n")
    loaded = load_config(config)
    assert (loaded.store.retention_days, loaded.estimation.drift_ratio) == (30.0, 2.0)
