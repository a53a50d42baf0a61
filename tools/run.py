"""One isolated run of the pipeline: its own topics, consumer group and workers.

The demo, the tests, the fault harness and the benchmarks all drive the
pipeline through a :class:`PipelineRun`, so none of them sees another's data.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import config
from app import loadgen
from app.kafka import ensure_topics
from app.reconcile import reconcile_until_settled
from config import Settings
from tools.workers import Worker, worker_env


class PipelineRun:
    """Topics prefixed ``<name>-``, consumer group ``faust-eos-<name>``, workers in ``run_dir``."""

    def __init__(self, name: str, run_dir: Path, *, guarantee: str = "exactly_once", **env: str) -> None:
        self.name = name
        self.run_dir = run_dir
        self.env = config.child_env(
            TOPIC_PREFIX=f"{name}-", APP_ID=f"faust-eos-{name}", PROCESSING_GUARANTEE=guarantee, **env
        )
        self.settings: Settings = config.load(self.env)
        self.workers: list[Worker] = []
        self.followers: list[Worker] = []  # reconcile --follow processes, apart from the workers
        ensure_topics(self.settings)

    def add_worker(self, app_module: str = "app", *, command: Optional[tuple[str, ...]] = None, **env: str) -> Worker:
        """Start one more worker process (of ``app_module``'s Faust app: the pipeline's unless told; or
        ``command``, a whole command line)."""
        index = len(self.workers)
        worker = Worker(
            f"worker-{index}",
            worker_env(self.env, index=index, run_dir=self.run_dir, **env),
            self.run_dir / f"worker-{index}.log",
            app_module=app_module,
            command=command,
        )
        worker.start()
        self.workers.append(worker)
        return worker

    def start_follower(self, check_s: float = 5.0) -> Worker:
        """Start ``reconcile --follow`` on this run's topics; its metrics on its ``web_port``, its state in
        ``run_dir``."""
        env = worker_env(self.env, index=0, run_dir=self.run_dir, DATA_DIR=str(self.run_dir / "follower"))
        follower = Worker("follower", env, self.run_dir / "follower.log", args=(
            "reconcile", "--follow", "--check-seconds", str(check_s), "--state", str(self.follow_state),
            "--differences", str(self.run_dir / "differences.jsonl"), "--metrics-port", env["WEB_PORT"]))
        follower.start()
        self.followers.append(follower)
        return follower

    @property
    def follow_state(self) -> Path:
        return self.run_dir / "follower" / "state.json"

    def produce(self, spec: loadgen.LoadSpec, *, progress: bool = False) -> loadgen.LoadSummary:
        return loadgen.produce(spec, self.settings, progress=progress)

    def reconcile(self, wait_s: float = 0.0, on_retry: Optional[Callable[[dict], None]] = None) -> dict[str, Any]:
        return reconcile_until_settled(self.settings, wait_s, on_retry=on_retry)

    def stop_all(self) -> dict[str, Optional[int]]:
        """Stop every worker cleanly; return each one's exit code."""
        return {worker.name: worker.stop() for worker in self.workers}
