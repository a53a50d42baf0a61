"""Run ``faust -A app worker`` processes from outside, as an operator would.

Used by the demo, the integration and fault tests, the fault harness and the
benchmarks. Each worker gets its own data directory, web port and log file;
everything else comes from the settings passed in, as environment variables.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from config import REPO_ROOT


@dataclass
class Worker:
    """One worker process (or another ``faust -A app`` command: ``args``; another app: ``app_module``;
    a process that is no Faust app at all: its whole ``command``)."""

    name: str
    env: dict[str, str]
    log_path: Path
    args: tuple[str, ...] = ("worker", "-l", "info")
    app_module: str = "app"
    command: tuple[str, ...] | None = None
    process: subprocess.Popen | None = field(default=None, repr=False)

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            self.command or [sys.executable, "-m", "faust", "-A", self.app_module, *self.args],
            cwd=REPO_ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    @property
    def pid(self) -> int:
        assert self.process is not None, f"{self.name} was never started"
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def signal(self, sig: signal.Signals) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM, wait for a clean exit; SIGKILL if it takes longer than ``timeout``."""
        if not self.alive():
            return self.exit_code()
        self.signal(signal.SIGCONT)  # a paused worker cannot stop
        self.signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.exit_code()

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final commit."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
            self.process.wait()

    @property
    def web_port(self) -> int:
        return int(self.env["WEB_PORT"])

    def get(self, path: str, timeout: float = 30.0) -> tuple[int, bytes]:
        """HTTP GET ``path`` on the worker's web port: status and body."""
        return http_get(f"http://localhost:{self.web_port}{path}", timeout)

    def ready(self) -> bool:
        """Whether the worker answers ``/ready`` with 200 (the pipeline's view: tables restored, partitions
        assigned, not rebalancing); False while it does not serve HTTP yet."""
        try:
            return self.get("/ready", timeout=5)[0] == 200
        except OSError:
            return False

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def http_get(url: str, timeout: float = 30.0) -> tuple[int, bytes]:
    """Status and body of a GET; error statuses are returned, not raised."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def worker_env(base: Mapping[str, str], *, index: int, run_dir: Path, **overrides: str) -> dict[str, str]:
    """Environment for worker ``index`` of a run: own data dir and a free web port."""
    env = dict(base)
    env.update(DATA_DIR=str(run_dir / f"worker-{index}"), WEB_PORT=str(free_port()), PYTHONUNBUFFERED="1",
               PYTHONFAULTHANDLER="1")
    env.update(overrides)
    return env


def wait_for(predicate, timeout: float, interval: float = 0.5, what: str = "condition") -> float:
    """Poll ``predicate`` until true; return the seconds waited or raise TimeoutError."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - started
