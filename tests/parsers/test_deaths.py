"""Deaths that only a shell, the kernel, Slurm, Ray or an ERROR record reports, read from real
public pastes (tests/parsers/fixtures/public/), one behaviour per test."""

from __future__ import annotations

from pathlib import Path

from ckpt_advisor.parsers.events import Event, EventKind
from tests.parsers._helpers import parse, read_lines

PUBLIC = Path(__file__).parent / "fixtures" / "public"
FAILURE, RESTART = EventKind.FAILURE, EventKind.RESTART


def _failures(name: str) -> list[tuple[int, str | None, str]]:
    events, _ = parse(read_lines(PUBLIC / name))
    return [(e.line, e.failure_class, e.parser) for e in events if e.kind is FAILURE]


def _events(name: str) -> list[Event]:
    return parse(read_lines(PUBLIC / name))[0]


def test_the_shell_killed_line_after_a_bar_is_a_sigkill() -> None:
    """bash's 'Killed' on the line after a tqdm bar at 100%."""
    assert _failures("shell/hedwig_70_killed_after_bar.log") == [(4, "killed", "shell")]


def test_a_localised_shell_message_is_read() -> None:
    """zh_CN bash prints '已杀死' for Killed."""
    assert _failures("shell/dreamerv3_203_killed_zh.log") == [(6, "killed", "shell")]


def test_segfault_glued_after_a_bar_and_lowercase_zsh_wording() -> None:
    """'…5.02it/s]Segmentation fault (core dumped)' and zsh's 'segmentation fault'."""
    assert _failures("shell/tnt_33_segfault_after_bar.log") == [(1, "segfault", "shell")]
    assert _failures("shell/unet_193_segfault_lowercase.log") == [(2, "segfault", "shell")]


def test_a_batch_script_job_report_and_the_cgroup_oom_are_one_host_oom_burst() -> None:
    """'line 28:  8156 Killed  python3 main.py' then Slurm's oom-kill line: the rules layer
    gets the signal and its cause; the root cause of the burst is host_oom."""
    assert _failures("slurm/arjuna_52_batch_killed.log") == [
        (1, "killed", "shell"),
        (2, "host_oom", "slurm"),
    ]


def test_dataloader_bus_errors_of_every_worker_are_one_failure() -> None:
    """Three workers' 'Unexpected bus error' lines and the DataLoader traceback: one bus error
    from the shell rule, the traceback classified bus_error too (one family, merged)."""
    assert _failures("shell/pipedream_28_bus_error.log") == [(3, "bus_error", "shell")]


def test_pycharm_exit_signal_after_zsh_report_is_the_same_death() -> None:
    """zsh's '14957 segmentation fault (core dumped)  python …' and PyCharm's 'exit code 139
    (interrupted by signal 11: SIGSEGV)': one segfault."""
    assert _failures("shell/point2skeleton_6_zsh_segfault.log") == [(1, "segfault", "shell")]


def test_xid_lines_of_different_pids_are_different_incidents() -> None:
    """Xid 31 for pid 14292 and, 344 s later, for pid 14566; the GPU/serial context lines that
    precede them give nothing."""
    assert _failures("kernel/tinygrad_6947_xid31_two_pids.log") == [
        (3, "gpu_xid_31", "kernel"),
        (4, "gpu_xid_31", "kernel"),
    ]


def test_xid_lines_of_one_pid_on_three_gpus_are_one_incident() -> None:
    """One pid's Xid 31 on three GPUs in one second, then abrt's SIGABRT report: one gpu_xid_31
    and the abort the rules layer clusters with it."""
    assert _failures("kernel/openmm_4393_xid31_one_pid_three_gpus.log") == [
        (1, "gpu_xid_31", "kernel"),
        (5, "abort", "shell"),
    ]


def test_iso_stamped_dmesg_oom_kill_is_dated() -> None:
    """'2024-04-29T14:55:41,678628+02:00 pool invoked oom-killer' is 12:55:41.678628 UTC."""
    [event] = [e for e in _events("kernel/ert_7797_oom_iso.log") if e.kind is FAILURE]
    assert (event.line, event.failure_class) == (2, "host_oom")
    assert event.time is not None and event.time.isoformat() == "2024-04-29T12:55:41.678628+00:00"


def test_a_step_cancelled_right_after_a_task_death_is_not_a_planned_end() -> None:
    """srun's 'task 4: Out Of Memory', then 'STEP … CANCELLED AT …' with no reason: srun
    cancelled the step; no planned slurm_cancelled event censors the OOM."""
    events = _events("slurm/hafs_101_oom_kill.log")
    assert [(e.line, e.failure_class, e.planned) for e in events] == [(1, "host_oom", False)]


def test_a_bus_error_task_line_is_sigbus() -> None:
    """srun's 'task 289: Bus error' (strsignal text) is bus_error."""
    assert _failures("slurm/hafs_101_bus_error.log") == [(1, "bus_error", "slurm")]


def test_ray_actor_and_worker_deaths_are_one_failure_each() -> None:
    """A Ray-prefixed ActorDiedError; a worker death line with its actor explanation lines."""
    assert _failures("ray/verl_2987_actor_died.log") == [(8, "ray_worker_died", "ray")]
    assert _failures("ray/verl_472_worker_died.log") == [(1, "ray_worker_died", "ray")]


def test_the_raylet_memory_monitor_kill_is_a_host_oom() -> None:
    """'13 Workers (tasks / actors) killed due to memory pressure (OOM)' is host_oom, dated by
    its '[2023-04-19 16:22:19,798 E 329 329]' prefix."""
    [event] = [e for e in _events("ray/ray_34695_memory_monitor.log") if e.kind is FAILURE]
    assert event.failure_class == "host_oom"
    assert event.time is not None and event.time.isoformat() == "2023-04-19T16:22:19.798000+00:00"


def test_an_error_record_with_a_known_failure_text_is_a_failure() -> None:
    """A custom logger's '[ERROR] … CUDA error: an illegal memory access' is that failure."""
    assert _failures("generic/regtr_33_error_record.log") == [
        (1, "cuda_illegal_memory_access", "error_record")
    ]


def test_error_records_and_warnings_without_a_death_give_nothing() -> None:
    """An [ERROR] record naming no failure, and fairseq's recovered OOM WARNINGs."""
    assert _events("generic/dlrover_1585_error_record_negative.log") == []
    assert _events("generic/espresso_48_recovered_oom_negative.log") == []


def test_worker_group_failed_is_an_interruption_and_its_restart() -> None:
    """torch elastic's 'Worker group FAILED. 3/3 attempts left; will restart worker group' with
    no worker output in view: a failure and a restart on that line."""
    events = _events("torchrun/doc2edag_24_restart.log")
    assert [(e.kind, e.line, e.failure_class) for e in events] == [
        (FAILURE, 1, "child_failed"),
        (RESTART, 1, None),
    ]
