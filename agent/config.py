"""The daemon's TOML configuration: schema, defaults, validation with errors that name the key.

Every key has a default, so an empty file (or none, for the CLI readers) works. Durations are
written as text (``"5m"``, ``"6h"``) or seconds and become float seconds here, once.
"""

from __future__ import annotations

import json
import os
import socket
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BeforeValidator,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ckpt_advisor.agent.config_jobs import Count, Flag, JobConfig, Number, ParseConfig, Section
from ckpt_advisor.agent.credentials import secret
from ckpt_advisor.agent.units import parse_duration_s

Seconds = Annotated[float, BeforeValidator(parse_duration_s)]


class ConfigError(Exception):
    """A configuration problem; the message names the file and the key."""


def default_db() -> tuple[Path, str]:
    """Where the store lives when nothing says otherwise, and the variable that said so
    (``$CKPT_ADVISOR_DB``, ``$STATE_DIRECTORY``), or ``""`` for the built-in default.

    ``$CKPT_ADVISOR_DB`` if set; else systemd's ``$STATE_DIRECTORY`` (``StateDirectory=``);
    else ``$XDG_STATE_HOME/ckpt-advisor/ckpt-advisor.db`` (``~/.local/state`` by default).
    """
    if env := os.environ.get("CKPT_ADVISOR_DB"):
        return Path(env), "$CKPT_ADVISOR_DB"
    if state := os.environ.get("STATE_DIRECTORY"):
        return Path(state.split(":")[0]) / "ckpt-advisor.db", "$STATE_DIRECTORY"
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg) / "ckpt-advisor" / "ckpt-advisor.db", ""


def default_db_path() -> Path:
    """The path of :func:`default_db`."""
    return default_db()[0]


DAY_S = 86400.0


class StoreConfig(Section):
    """``[store]``: where events, estimates and the Slack outbox live: a SQLite file (``path``,
    the default), or one PostgreSQL database shared by a fleet of agents (``url``)."""

    path: Path = Field(default_factory=default_db_path)
    """SQLite file (WAL mode); default ``$CKPT_ADVISOR_DB``, ``$STATE_DIRECTORY/ckpt-advisor.db``
    or ``~/.local/state/ckpt-advisor/ckpt-advisor.db``. Must be on a local disk. With ``url``
    set, only its directory is used (the daemon's heartbeat and lock files)."""
    url: str | None = None
    """Fleet mode: ``postgresql://user@host:5432/db`` (query parameters such as
    ``?sslmode=verify-full`` are passed to libpq). Never put the password here: it is read from
    ``password_env``. Unset: the SQLite file ``path``."""
    password_env: str = "CKPT_ADVISOR_DB_PASSWORD"
    """Name of the environment variable (or systemd credential) holding the database password;
    unset or empty: libpq's own means (``~/.pgpass``, ``$PGPASSFILE``, peer or certificate
    authentication)."""
    retention_days: Number = Field(default=365.0, gt=0, le=36500)
    """Events older than this many days are pruned daily."""

    @field_validator("path", mode="before")
    @classmethod
    def _path_text(cls, value: object) -> object:
        if not isinstance(value, str | os.PathLike) or not str(value).strip():
            raise ValueError(f"must name the SQLite file (a non-empty string), got {value!r}")
        return value

    @field_validator("path")
    @classmethod
    def _not_a_directory(cls, value: Path) -> Path:
        if value.is_dir():
            raise ValueError(
                f"{value} is a directory; name the store's file in it, e.g. "
                f"{value / 'ckpt-advisor.db'}"
            )
        return value

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is not None:
            from ckpt_advisor.agent.store.url import parse_url

            parse_url(value)  # ValueError names what is wrong (never echoing a password)
        return value

    def target(self) -> str | Path:
        """What :func:`agent.store.open_store` opens: the URL, or else the SQLite path."""
        return self.url if self.url is not None else self.path

    def password(self) -> str | None:
        """The database password from ``$<password_env>``, else from
        ``$CREDENTIALS_DIRECTORY/<password_env>`` (systemd's ``LoadCredential=``); None when
        neither is set. Trailing newlines of a credentials file are dropped."""
        return secret(self.password_env)[0]


class AgentConfig(Section):
    """``[agent]``: this agent's identity among the agents of one store (fleet mode)."""

    name: str = Field(default_factory=lambda: socket.gethostname(), min_length=1, max_length=200)
    """The agent's name, stored with every file it reads and every message it sends; unique
    per store. Default: the host name."""


class ScheduleConfig(Section):
    """``[schedule]``: how often the daemon looks and thinks (durations: ``90s``, ``5m``)."""

    estimate_every: Seconds = Field(default=300.0, gt=0, le=7 * DAY_S)
    """Re-estimate every job this often (UTC, coalesced after a suspend)."""
    after_failure: Seconds = Field(default=30.0, ge=0, le=DAY_S)
    """Estimate again this soon after a new failure is stored."""
    poll_every: Seconds = Field(default=2.0, gt=0, le=3600)
    """Stat every known file this often (shared filesystems send no inotify events for other
    hosts' writes, so polling is always on)."""
    discover_every: Seconds = Field(default=20.0, gt=0, le=DAY_S)
    """Search the globs for new files this often, and at once on a file notification that a
    file was created, moved or deleted (or when a known file's name stops leading to it)."""
    estimate_timeout: Seconds = Field(default=600.0, gt=0, le=DAY_S)
    """An estimate run longer than this is stuck: watchdog pings stop (systemd restarts)."""
    file_events: Flag = True
    """Wake on file notifications (watchdog/inotify); false: stat polling only."""
    rotated_idle: Seconds = Field(default=3600.0, ge=0, le=7 * DAY_S)
    """A file renamed out of its globs or deleted while open (logrotate ``create``, a rotated
    stdout: the trainer writes on to its old descriptor) is read on through the daemon's open
    descriptor, whatever its new name, until its size has not changed for this long; it is
    always read to its end at shutdown. Longer than a hung job's silence before its timeout
    traceback (NCCL's default is 10 min); each such file holds a descriptor meanwhile. ``0``:
    read it to its end and let it go."""


class EstimationConfig(Section):
    """``[estimation]``: the statistics and the drift rule (README, "How it decides")."""

    confidence: Number = Field(default=0.9, gt=0, lt=1)
    """Level of every confidence interval (C, M, the recommended interval)."""
    cost_window_saves: Count = Field(default=20, ge=1, le=10_000)
    """C is the median of this many most recent saves."""
    mtbf_window: Seconds = Field(default=30 * DAY_S, gt=0, le=3650 * DAY_S)
    """M counts interruptions and running time over this span before the job's newest event."""
    min_failures: Count = Field(default=2, ge=0)
    """Interruptions needed before advising."""
    min_saves: Count = Field(default=3, ge=1)
    """Timed saves needed before advising."""
    drift_ratio: Number = Field(default=1.5, gt=1)
    """Advise when current/recommended is outside [1/ratio, ratio] (and the other conditions)."""
    resolve_ratio: Number = Field(default=1.3, gt=1)
    """A drift episode ends when the ratio is back inside [1/resolve_ratio, resolve_ratio];
    at most ``drift_ratio`` (hysteresis)."""
    repeat_after: Seconds = Field(default=DAY_S, gt=0)
    """An unchanged recommendation is posted again only after this long."""
    min_excess_gpu_hours_per_day: Number = Field(default=1.0, ge=0)
    """Advise only when the current interval wastes at least this much more (needs ``gpus``)."""
    min_weibull_failures: Count = Field(default=10, ge=2)
    """Interruptions needed before a Weibull fit of the times between them is tried."""
    price_per_gpu_hour: Number | None = Field(default=None, ge=0)
    """If set, messages also give the excess waste in money per day."""
    currency: str = "$"
    """Prefix for money amounts."""

    @model_validator(mode="after")
    def _hysteresis(self) -> EstimationConfig:
        if self.resolve_ratio > self.drift_ratio:
            raise ValueError(
                f"resolve_ratio ({self.resolve_ratio}) must not exceed drift_ratio "
                f"({self.drift_ratio}): a drift episode must be able to end"
            )
        return self


class SlackConfig(Section):
    """``[slack]``: where recommendations go; without a token they go to the daemon's log."""

    channel: str | None = None
    """Channel name (``#training-alerts``) or ID (``C…``; lets delivery check for duplicates
    before any post succeeded)."""
    token_env: str = "SLACK_BOT_TOKEN"
    """Name of the environment variable (or systemd credential) holding the bot token."""
    base_url: str = "https://slack.com/api/"
    """Web API base URL (other Slack deployments, e.g. GovSlack, differ)."""
    timeout: Seconds = Field(default=10.0, gt=0, le=600)
    """Timeout of one Web API call."""

    @field_validator("base_url")
    @classmethod
    def _trailing_slash(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url {value!r} must start with http:// or https://")
        return value if value.endswith("/") else value + "/"


class MetricsConfig(Section):
    """``[metrics]``: the Prometheus endpoint, off unless ``listen`` is set.

    ``listen`` is ``"host:port"``, ``"[v6addr]:port"``, or ``":port"``/``"port"`` for loopback
    (``127.0.0.1``): metrics name jobs and paths, so they are not published beyond the host
    unless asked.
    """

    listen: str | None = None
    """``host:port`` of the Prometheus endpoint; a bare port binds to 127.0.0.1; off if unset."""

    @field_validator("listen")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is not None:
            listen_address(value)
        return value

    def address(self) -> tuple[str, int] | None:
        """``(host, port)`` to bind, or None when metrics are off."""
        return None if self.listen is None else listen_address(self.listen)


class AdviceConfig(Section):
    """``[advice]``: each job's current recommendation for the training side (opt-in).

    The training callbacks' ``advice_file`` reads ``dir/JOB.json`` (README, "Advice that
    applies itself"); ``JOB`` is the job's name with any character other than letters, digits
    and ``_.-~`` percent-encoded.
    """

    dir: Path | None = None
    """Directory of one ``JOB.json`` per job, replaced atomically after each estimate
    (mode 0644: the training jobs' users read it); off if unset."""
    endpoint: Flag = False
    """Also serve each job's advice as JSON at ``/advice/JOB`` on ``[metrics] listen``."""


def listen_address(value: str) -> tuple[str, int]:
    """Split ``"host:port"`` (``"[::1]:9464"``, ``":9464"``, ``"9464"``) into host and port.

    Raises:
        ValueError: no port, a port outside 1-65535, or an unclosed ``[``.
    """
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    if host.startswith("["):
        if not host.endswith("]"):
            raise ValueError(f"listen {value!r}: unclosed '['")
        host = host[1:-1]
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"listen {value!r} must be host:port with a port from 1 to 65535")
    return host or "127.0.0.1", int(port)


class Config(Section):
    """The whole configuration file (DESIGN.md, "Contracts")."""

    store: StoreConfig = Field(default_factory=StoreConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    estimation: EstimationConfig = Field(default_factory=EstimationConfig)
    parse: ParseConfig = Field(default_factory=ParseConfig)
    jobs: list[JobConfig] = Field(default_factory=list)
    slack: SlackConfig = Field(default_factory=SlackConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    advice: AdviceConfig = Field(default_factory=AdviceConfig)

    @field_validator("jobs")
    @classmethod
    def _unique_names(cls, jobs: list[JobConfig]) -> list[JobConfig]:
        seen: set[str] = set()
        for job in jobs:
            if job.name in seen:
                raise ValueError(f"job name {job.name!r} appears twice")
            seen.add(job.name)
        return jobs

    @model_validator(mode="after")
    def _endpoint_listens(self) -> Config:
        if self.advice.endpoint and self.metrics.listen is None:
            raise ValueError("advice.endpoint needs [metrics] listen (it is served there)")
        return self

    def slack_token(self) -> str | None:
        """The bot token from the variable named by ``slack.token_env`` (or its credentials file).

        Looks in ``$<token_env>``, then in ``$CREDENTIALS_DIRECTORY/<token_env>`` (systemd's
        ``LoadCredential=``). Returns None when neither is set: recommendations then go to the log.

        Raises:
            ConfigError: the token holds control characters (a pasted newline): it could never
                authenticate, and would end up echoed in HTTP errors. The token is not shown.
        """
        token, where = secret(self.slack.token_env)
        if token is not None and any(ord(c) < 0x21 or ord(c) == 0x7F for c in token):
            raise ConfigError(
                f"{where}: the Slack token contains whitespace or control characters "
                "(a pasted newline?); it is not shown here"
            )
        return token


_TYPE_WORDS = {
    "int_type": "an integer such as 64 (no quotes, no decimal point)",
    "float_type": "a number such as 365 or 1.5 (no quotes)",
    "bool_type": "true or false (no quotes)",
}
"""What a strict count, number or switch must be (:data:`config_jobs.Count`, ``Number``,
``Flag``), by pydantic's error type."""


def _message(err: Mapping[str, Any]) -> str:
    """One pydantic error in words: an unknown key, a count, number or switch of another TOML
    type (with the value as written), else pydantic's message."""
    if err["type"] == "extra_forbidden":
        return "unknown key"
    if (words := _TYPE_WORDS.get(err["type"])) is not None:
        written = json.dumps(err["input"], default=str)  # as TOML writes it: true, "64", 64.0
        return f"must be {words}, got {written}"
    return str(err["msg"]).removeprefix("Value error, ")


def _key_path(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic error location as a TOML key, e.g. ``jobs[0].logs``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse_config(data: dict[str, Any], source: str = "<config>") -> Config:
    """Validate a decoded TOML mapping.

    Raises:
        ConfigError: one line per problem, each naming ``source`` and the key.
    """
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            key = _key_path(tuple(err["loc"]))
            msg = _message(err)
            lines.append(f"{source}: {key}: {msg}" if key else f"{source}: {msg}")
        raise ConfigError("\n".join(lines)) from None


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and validate a TOML config file.

    Raises:
        ConfigError: missing/unreadable file, TOML syntax error (with line), or invalid keys.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config: {exc.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: invalid TOML: {exc}") from None
    return parse_config(data, str(p))
