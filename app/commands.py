"""Operational commands: ``faust -A app <command>``."""
from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path
from typing import Any

import click
from faust.cli import option

from app import acls as required_acls
from app import app, loadgen
from app.follow import Follower, serve_metrics
from app.preflight import exit_unless_reachable
from app.reconcile import reconcile_until_settled, summary
from config import settings


@app.command(
    option("--count", default=10_000, show_default=True, help="Records to produce (duplicates and bad ones included)."),
    option("--rate", default=0.0, show_default=True, help="Records per second; 0 = as fast as possible."),
    option("--seed", default=1, show_default=True, help="Same seed, same events."),
    option("--merchants", default=20, show_default=True),
    option("--customers", default=1_000, show_default=True),
    option("--duplicate-rate", default=0.05, show_default=True, help="Share of records re-sending an earlier event."),
    option("--bad-rate", default=0.02, show_default=True, help="Share of records that must be dead-lettered."),
)
async def produce(self, count: int, rate: float, seed: int, merchants: int, customers: int,
                  duplicate_rate: float, bad_rate: float) -> None:
    """Produce payment events to the input topic."""
    try:
        spec = loadgen.LoadSpec(count=count, rate=rate, seed=seed, merchants=merchants, customers=customers,
                                duplicate_rate=duplicate_rate, bad_rate=bad_rate)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    exit_unless_reachable(settings)
    result = loadgen.produce(spec, settings)
    self.say(f"produced {result.produced:,} records in {result.elapsed_s:.1f} s ({result.rate:,.0f}/s): "
             + ", ".join(f"{kind} {n:,}" for kind, n in result.by_kind.most_common()))


@app.command(
    option("--wait", default=0.0, show_default=True,
           help="Re-check for up to this many seconds while outputs catch up."),
    option("--json", "json_path", default=None, type=click.Path(dir_okay=False), help="Write the full report here."),
    option("--follow", is_flag=True,
           help="Check continuously from a saved watermark, never ending (see docs/tools.md)."),
    option("--check-seconds", default=10.0, show_default=True, help="With --follow: seconds between rounds."),
    option("--state", "state_path", default=None, type=click.Path(dir_okay=False),
           help="With --follow: where the watermark and state are saved; "
                "default <DATA_DIR>/../reconcile-follow/<APP_ID>.json."),
    option("--differences", "differences_path", default=None, type=click.Path(dir_okay=False),
           help="With --follow: append each difference here as a JSON line."),
    option("--metrics-port", default=6070, show_default=True,
           help="With --follow: serve Prometheus metrics on this port (on WEB_BIND); 0: none."),
)
async def reconcile(self, wait: float, json_path: str | None, follow: bool, check_seconds: float,
                    state_path: str | None, differences_path: str | None, metrics_port: int) -> None:
    """Check the outputs against a recomputation from the input; exit 1 on any mismatch."""
    exit_unless_reachable(settings)
    if follow:
        if check_seconds <= 0:
            raise click.UsageError("--check-seconds must be more than 0")
        await follow_for_ever(self, check_seconds, state_path, differences_path, metrics_port)
        return
    report = reconcile_until_settled(settings, wait)
    self.say(summary(report))
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(report, indent=2))
        self.say(f"report written to {json_path}")
    if not report["ok"]:
        sys.exit(1)


@app.command(
    option("--principal", default=None, help="Whose ACLs, e.g. User:payments; default: the one of the settings."),
)
async def acls(self, principal: str | None) -> None:
    """List the ACLs a worker's principal needs with these settings (grant them with kafka-acls.sh)."""
    who = principal or required_acls.principal(settings)
    rows = [p.row() for p in required_acls.required(settings)]
    self.say(self.tabulate(rows, headers=("resource", "pattern", "name", "operation", "why"),
                           title=f"ACLs {who} needs (each allows any host)"))


async def follow_for_ever(command: Any, check_s: float, state_path: str | None, differences_path: str | None,
                          metrics_port: int) -> None:
    """``reconcile --follow``: rounds until the process is stopped (its state is saved after each)."""
    state = (Path(state_path) if state_path
             else settings.data_dir.parent / "reconcile-follow" / f"{settings.app_id}.json")
    try:
        follower = Follower(settings, state, Path(differences_path) if differences_path else None, say=command.say)
    except ValueError as exc:  # a state file of another version
        raise click.UsageError(str(exc)) from None
    if metrics_port:
        try:
            serve_metrics(follower, metrics_port, settings.web_bind)
        except OSError as exc:
            raise click.UsageError(f"--metrics-port {metrics_port}: {exc.strerror}") from None
        command.say(f"metrics on http://{settings.web_bind}:{metrics_port}/metrics")
    stop = threading.Event()
    try:
        await asyncio.get_running_loop().run_in_executor(None, follower.run, check_s, stop)
    finally:
        stop.set()  # the round under way ends, and saves, before the thread does
