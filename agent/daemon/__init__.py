"""The daemon, one question per module: ``loop.py`` (the main loop: scan, supervise, reload,
stop), ``jobs.py`` (the scheduler and its jobs: estimate, deliver, prune), ``watcher.py`` (file
notifications that wake the loop), ``health.py`` (what systemd, ``status`` and Prometheus are
told after each scan), ``heartbeat.py`` (the heartbeat file and the verdict ``ckpt-advisor
status`` gives from it), ``systemd.py`` (sd_notify) and ``metrics.py`` (Prometheus).

The daemon is built from config by ``agent/app.py``. Nothing is imported here, so ``status``
reads the heartbeat without loading APScheduler or watchdog.
"""
