"""Fault-injection harness: proves (or disproves) exactly-once under failures.

``python -m tools.faults --help``. For each processing guarantee asked for, it
runs the pipeline with W workers on P partitions under a steady load with
upstream duplicates and bad records, while a ``read_committed`` verifier reads
the outputs the whole time, and injects faults at seeded random times:

* ``kill``: SIGKILL a worker (no shutdown, no final commit), restart it;
* ``lose``: SIGKILL a worker while its transaction is open, and never restart
  it; a replacement joins on a data directory of its own (a machine lost, its
  worker rescheduled elsewhere);
* ``zombie``: SIGSTOP a worker past its session timeout, let the group
  rebalance, SIGCONT it; its late commits must be fenced;
* ``rebalance``: add a worker, later stop one cleanly;
* ``broker-kill`` / ``broker-term``: restart the broker after SIGKILL / SIGTERM.

After the load, once the outputs stop changing, it checks: reconcile (exact
totals, counts 1..n per merchant, every event once, dead letters); a fresh
worker's tables rebuilt from the changelogs equal the expected totals; no
transaction left open (LSO = high watermark everywhere, and a sentinel is the
only thing a ``read_committed`` reader at the end sees); no worker died
except those the harness killed; ``reconcile --follow``, run beside the workers
all along, has its watermark at the input's end and found no difference (under
at_least_once: nothing missing). The exit status is 0 if exactly_once came out
exact and at_least_once lost nothing (its duplicates are counted, not failed).
"""
from __future__ import annotations

import argparse
import json
import logging
import random
import re
import signal
import sys
import threading
import time
import urllib.request
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

import config
from app.kafka import CLIENT_LOG, admin
from app.loadgen import LoadSpec
from config import GUARANTEES, REPO_ROOT
from faust_eos.committing.offsets import retrying
from faust_eos.committing.outside import worker_id
from faust_eos.committing.transaction import worker_transactional_id
from kafka_ops.transactions import describe_transactions
from kafka_ops.wire_security import cluster as wire_cluster
from tools import broker
from tools.fault_outcome import Outcome, summary
from tools.markers import MarkerMender
from tools.observers import FollowerView, Verifier, no_open_transactions, sentinels_only
from tools.run import PipelineRun
from tools.workers import Worker, wait_for

FAULTS = ("kill", "lose", "zombie", "rebalance", "broker-kill", "broker-term")
RESUMED = re.compile(r"Resuming from committed offsets: (.*)")
TP_TEXT = re.compile(r"(\S+)\[(\d+)\]=(\d+|None)")
DROPPED = re.compile(r"Dropped (\d+) uncommitted records")
LOSE_ATTEMPTS = 200  # pauses to catch a worker to be lost inside its transaction
FOLLOW_CHECK_S = 5.0  # reconcile --follow's rounds beside a run
FOLLOW_CATCH_UP_S = 180.0  # bounds a hang on a shared machine; not a timing check


class CoordinatorGone(Exception):
    """The broker's group coordinator stopped answering: a broker failure the run cannot measure through."""


@dataclass
class Plan:
    """What one run does; every choice follows from ``seed``."""

    faults: dict[str, int]  # fault -> how many times
    workers: int = 3
    partitions: int = 6
    rate: float = 300.0  # input records per second
    duration_s: float = 60.0  # of the load
    seed: int = 1
    standby_replicas: int = 0  # STANDBY_REPLICAS of the workers
    transaction_timeout_ms: Optional[int] = None  # TRANSACTION_TIMEOUT_MS of the workers; None: the default

    def schedule(self) -> list[tuple[float, str]]:
        """(seconds after the load starts, fault), spread over 10%..80% of the load."""
        rng = random.Random(self.seed)
        names = [name for name, n in self.faults.items() for _ in range(n)]
        rng.shuffle(names)
        if not names:
            return []
        span = self.duration_s * 0.7 / len(names)
        return [(self.duration_s * 0.1 + i * span + rng.uniform(0, span * 0.3), name) for i, name in enumerate(names)]


class FaultRun:
    """One pipeline run under one guarantee, with the faults of a plan."""

    def __init__(self, plan: Plan, guarantee: str, run_dir: Path, say=print) -> None:
        self.plan = plan
        self.say = say
        name = f"faults-{guarantee.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
        timeout = ({} if plan.transaction_timeout_ms is None
                   else {"TRANSACTION_TIMEOUT_MS": str(plan.transaction_timeout_ms)})
        self.run = PipelineRun(name, run_dir / name, guarantee=guarantee, PARTITIONS=str(plan.partitions),
                               STANDBY_REPLICAS=str(plan.standby_replicas), **timeout)
        self.settings = self.run.settings
        self.load_error: Optional[BaseException] = None
        self.outcome = Outcome(guarantee=guarantee, plan=asdict(plan))
        self.retired: list[Worker] = []  # workers the harness stopped on purpose
        self.follower: Optional[Worker] = None  # reconcile --follow, beside the workers (in run.followers)
        self.mender: Optional[MarkerMender] = None  # from the first broker restart on
        self.started = time.monotonic()  # of the load, set again when it starts
        self.admin = admin(self.settings)
        self._stale_admins: list = []  # kept alive: destroying a client right after a broker restart is not safe
        self.offsets_reader = Consumer({  # reads the group's committed offsets; never joins it
            **self.settings.kafka_client(),
            "group.id": self.settings.app_id,
            "enable.auto.commit": False,
            # not a stable read: it only times recoveries, and Kafka 4.4 can leave a committed transaction's
            # offset commit pending for good (docs/limitations.md), where a stable read waits for ever
            "isolation.level": "read_uncommitted",
            "logger": CLIENT_LOG,
        })

    # -- the run ----------------------------------------------------------------
    def execute(self) -> Outcome:
        try:
            return self._execute()
        finally:  # on failure too: leave no worker running (nor paused)
            if self.mender is not None:
                self.mender.stop(last_check=False)
            for worker in [*self.run.workers, *self.run.followers]:
                worker.kill()
            self.offsets_reader.close()

    def _execute(self) -> Outcome:
        for _ in range(self.plan.workers):
            self.run.add_worker()
        wait_for(lambda: all(_owned(w) for w in self.run.workers), 120, what="every worker to own partitions")
        self.follower = self.run.start_follower(check_s=FOLLOW_CHECK_S)
        verifier = Verifier(self.settings)
        verifier.start()
        load = threading.Thread(target=self._produce, daemon=True)
        self.started = time.monotonic()
        load.start()
        for at, fault in self.plan.schedule():
            time.sleep(max(0.0, self.started + at - time.monotonic()))
            self.say(f"  t={time.monotonic() - self.started:5.1f}s {fault}")
            getattr(self, "_" + fault.replace("-", "_"))()
            self.outcome.faults_done.append(fault)
        load.join()
        if self.load_error is not None:
            raise RuntimeError("the load generator failed") from self.load_error
        report = self._settle()
        self._record(report)
        self._check_follower()
        if self.mender is not None:
            self.mender.stop()
            self.outcome.lost_markers_written = self.mender.written
        self.outcome.checks["no open transaction"] = no_open_transactions(self.settings, self.admin)
        verifier.stop()
        self.outcome.verifier_records = verifier.records
        self.outcome.checks["verifier saw every committed update"] = verifier.records == report["total_updates"]
        self._stop_workers()
        self.outcome.checks["sentinel is all a reader at the end sees"] = sentinels_only(self.settings, self.admin)
        self.outcome.checks["fresh worker rebuilds the expected totals"] = self._fresh_worker_matches(report)
        return self.outcome

    def _produce(self) -> None:
        count = int(self.plan.rate * self.plan.duration_s)
        spec = LoadSpec(count=count, rate=self.plan.rate, seed=self.plan.seed, duplicate_rate=0.05, bad_rate=0.02)
        try:
            self.outcome.events_in = self.run.produce(spec).produced
        except BaseException as exc:  # surfaces in execute(), not as a lost thread traceback
            self.load_error = exc

    # -- faults -------------------------------------------------------------------
    def _live_worker(self) -> Worker:
        live = [w for w in self.run.workers if w.alive() and w not in self.retired]
        if not live:
            raise RuntimeError(f"no live worker left to inject a fault into: see the worker logs in {self.run.run_dir}")
        return random.Random(self.plan.seed + len(self.outcome.faults_done)).choice(live)

    def _kill(self) -> None:
        worker = self._live_worker()
        partitions = _owned(worker)
        before = self._committed(partitions) if partitions else {}
        killed_at = time.monotonic()
        worker.kill()
        time.sleep(1.0)
        worker.start()  # same name, same data directory: a restart
        if partitions:
            self.outcome.recovery_s.append(round(self._time_to_progress(partitions, before, killed_at), 2))
        else:
            self.outcome.notes.append(f"{worker.name} owned no partition when killed: no recovery time")

    def _lose(self) -> None:
        worker = self._live_worker()
        partitions = _owned(worker)
        if not self._pause_inside_transaction(worker):
            self.outcome.notes.append(f"{worker.name} was lost outside a transaction: none was open in "
                                      f"{LOSE_ATTEMPTS} pauses")
        lost_at = time.monotonic()
        before = self._committed(partitions) if partitions else {}  # paused: it commits nothing more
        worker.kill()
        self.retired.append(worker)
        self.run.add_worker()  # the replacement: nothing of the lost worker's, not its directory nor its id
        if partitions:
            self.outcome.recovery_after_loss_s.append(
                round(self._time_to_progress(partitions, before, lost_at, every=True), 2))
        else:
            self.outcome.notes.append(f"{worker.name} owned no partition when lost: no recovery time")

    def _pause_inside_transaction(self, worker: Worker) -> bool:
        """Pause ``worker`` (SIGSTOP) at a moment its transaction is open, the worst moment to lose it:
        nobody ends that transaction but the broker, after ``transaction.timeout.ms``. False if
        none was open at any of :data:`LOSE_ATTEMPTS` pauses (it is left paused at the last)."""
        transactional_id = worker_transactional_id(self.settings.app_id, worker_id(Path(worker.env["DATA_DIR"])))
        cluster = wire_cluster(self.settings.kafka_client())
        rng = random.Random(self.plan.seed)
        try:
            for _ in range(LOSE_ATTEMPTS):
                worker.signal(signal.SIGSTOP)
                described = describe_transactions(cluster, [transactional_id]).get(transactional_id)
                if described is not None and described.state == "Ongoing":
                    return True
                worker.signal(signal.SIGCONT)
                time.sleep(rng.uniform(0.0, 0.05))
            worker.signal(signal.SIGSTOP)
            return False
        finally:
            cluster.close()

    def _zombie(self) -> None:
        worker = self._live_worker()
        log_size = len(worker.log_text())
        worker.signal(signal.SIGSTOP)
        time.sleep(self.settings.session_timeout_s + 5)  # the group moves on without it
        worker.signal(signal.SIGCONT)
        time.sleep(self.settings.session_timeout_s)
        late = worker.log_text()[log_size:]
        self.outcome.fenced_zombie_writes += sum(int(n) for n in DROPPED.findall(late))

    def _rebalance(self) -> None:
        self.run.add_worker()
        time.sleep(8)
        leaving = self._live_worker()
        self.retired.append(leaving)
        code = leaving.stop()
        if code != 0:
            self.outcome.notes.append(f"{leaving.name} exited {code} when asked to stop")

    def _broker_kill(self) -> None:
        self._restart_broker(broker.kill)

    def _broker_term(self) -> None:
        self._restart_broker(broker.stop)

    def _restart_broker(self, how) -> None:
        if not self.settings.use_local_broker:
            self.outcome.notes.append("broker restart skipped: KAFKA_BOOTSTRAP_SERVERS points at an external cluster")
            return
        how(self.settings)
        broker.ensure_running(self.settings)
        # a client's cached leader epochs are stale now (FENCED_LEADER_EPOCH): use a new one
        self._stale_admins.append(self.admin)
        self.admin = admin(self.settings)
        if self.mender is None:
            self.mender = MarkerMender(self.settings, lambda: self.admin, self.started)
            self.mender.start()

    # -- measurements -------------------------------------------------------------
    def _committed(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        # asked again while the broker reloads its coordinators after a restart
        try:
            committed = retrying(
                lambda: self.offsets_reader.committed([TopicPartition(t, p) for t, p in tps], timeout=30), 120)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.NOT_COORDINATOR:
                raise
            raise CoordinatorGone(
                "the broker answered NOT_COORDINATOR to every read of the group's committed offsets for 120 s: "
                "its group coordinator has most likely failed for good until the broker restarts (Kafka 4.4.0 "
                "does so after a SIGKILL restart, seen on brokers holding earlier runs' groups: "
                "docs/limitations.md); wipe the broker (python -m tools.broker wipe) and run again") from exc
        return {(tp.topic, tp.partition): tp.offset for tp in committed}

    def _time_to_progress(self, tps: list[tuple[str, int]], before: dict, since: float, every: bool = False) -> float:
        """Seconds from ``since`` until a commit advances one of ``tps``, or ``every`` one of them (or 120 s)."""
        advanced = all if every else any
        while time.monotonic() - since < 120:
            now = self._committed(tps)
            if advanced(now[tp] > before[tp] for tp in tps):
                break
            time.sleep(0.25)
        return time.monotonic() - since

    def _settle(self, quiet_s: float = 60.0, limit_s: float = 300.0) -> dict:
        """Reconcile until the outputs are exact or stop changing for ``quiet_s``
        (longer than a recovery after a broker restart takes)."""
        deadline = time.monotonic() + limit_s
        last, last_change = None, time.monotonic()
        while True:
            report = self.run.reconcile()
            counts = (report["total_updates"], report["dead_letters"], report["window_updates"])
            if counts != last:
                last, last_change = counts, time.monotonic()
            if report["ok"] or time.monotonic() - last_change > quiet_s or time.monotonic() > deadline:
                return report
            time.sleep(2)

    def _record(self, report: dict) -> None:
        problems = report["problems"]
        outcome = self.outcome
        outcome.events_aggregated = report["counted_events"]
        outcome.upstream_duplicates = report["upstream_duplicates"]
        outcome.duplicates_in_output = problems.get("totals: duplicate update", {}).get("count", 0)
        outcome.losses = problems.get("totals: lost event", {}).get("count", 0)
        outcome.dead_letters = report["dead_letters"]
        outcome.expected_dead_letters = report["expected_dead_letters"]
        outcome.late_events = report["late_events"]
        outcome.problems = problems
        outcome.checks["reconcile"] = report["ok"]

    def _check_follower(self) -> None:
        """``reconcile --follow`` ran beside it all: its watermark must reach the input's end, having found no
        difference under exactly_once and nothing missing under at_least_once (whose duplicates are extra)."""
        view = FollowerView(self.follower)
        settled = time.time()
        try:
            wait_for(lambda: view.caught_up(settled), FOLLOW_CATCH_UP_S, what="reconcile --follow to catch up")
            reached = True
        except TimeoutError:
            reached = False
        self.outcome.checks["reconcile --follow: watermark at the input's end"] = reached
        self.outcome.follow_differences = view.differences()  # {} if it does not answer
        if self.outcome.guarantee == "exactly_once":
            self.outcome.checks["reconcile --follow: no difference"] = (
                bool(self.outcome.follow_differences) and not any(self.outcome.follow_differences.values()))
        else:
            self.outcome.checks["reconcile --follow: nothing missing"] = (
                self.outcome.follow_differences.get("missing") == 0)

    def _stop_workers(self) -> None:
        for worker in self.run.workers:
            if worker in self.retired:
                continue
            code = worker.stop()
            if code != 0:
                self.outcome.notes.append(f"{worker.name} exited {code} at the end")
        died = [w.name for w in self.run.workers if w.exit_code() not in (0, None) and w not in self.retired]
        self.outcome.checks["no worker died unasked"] = not died

    def _fresh_worker_matches(self, report: dict) -> bool:
        """A worker with empty local state restores the tables from the changelogs."""
        worker = self.run.add_worker(DATA_DIR=str(self.run.run_dir / "fresh"))
        try:
            wait_for(lambda: _owned(worker), 180, what="the fresh worker to restore its tables")
            url = f"http://localhost:{worker.env['WEB_PORT']}/merchants/"
            with urllib.request.urlopen(url, timeout=30) as response:
                tables = json.load(response)
        finally:
            worker.stop()
        rebuilt = {m: {"count": t["count"], "amount_cents": t["amount_cents"]} for m, t in tables.items()}
        return rebuilt == report["expected_totals"]


def _owned(worker: Worker) -> list[tuple[str, int]]:
    """Input partitions the worker resumed last, from its log ([] before it has any)."""
    matches = RESUMED.findall(worker.log_text())
    return [(t, int(p)) for t, p, _ in TP_TEXT.findall(matches[-1])] if matches else []


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.faults", description=__doc__.splitlines()[0])
    parser.add_argument("--guarantee", choices=[*GUARANTEES, "both"], default="both")
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--losses", type=int, default=1, help="workers killed and replaced, never restarted")
    parser.add_argument("--zombies", type=int, default=1)
    parser.add_argument("--rebalances", type=int, default=1)
    parser.add_argument("--broker-kills", type=int, default=1)
    parser.add_argument("--broker-terms", type=int, default=1)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rate", type=float, default=300.0, help="input records per second")
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of load")
    parser.add_argument("--seed", type=int, default=1, help="same seed, same faults at the same times")
    parser.add_argument("--standby-replicas", type=int, default=0, help="standby copies of each table partition")
    parser.add_argument("--transaction-timeout-ms", type=int, default=None,
                        help="the workers' TRANSACTION_TIMEOUT_MS (default: theirs)")
    parser.add_argument("--json", dest="json_path", help="write the report here")
    args = parser.parse_args(argv)
    plan = Plan(
        faults={"kill": args.kills, "lose": args.losses, "zombie": args.zombies, "rebalance": args.rebalances,
                "broker-kill": args.broker_kills, "broker-term": args.broker_terms},
        workers=args.workers, partitions=args.partitions, rate=args.rate, duration_s=args.duration, seed=args.seed,
        standby_replicas=args.standby_replicas, transaction_timeout_ms=args.transaction_timeout_ms,
    )
    settings = config.load()
    CLIENT_LOG.setLevel(logging.CRITICAL)  # the broker goes away on purpose: its clients' complaints are expected
    if settings.use_local_broker:
        broker.ensure_running(settings)
    guarantees = GUARANTEES if args.guarantee == "both" else (args.guarantee,)
    outcomes = []
    coordinator_gone = False
    for guarantee in guarantees:
        print(f"{guarantee}: {plan.workers} workers, {plan.partitions} partitions, {plan.rate:.0f} events/s "
              f"for {plan.duration_s:.0f} s, seed {plan.seed}")
        try:
            outcome = FaultRun(plan, guarantee, REPO_ROOT / ".data").execute()
        except CoordinatorGone as exc:
            print(f"{guarantee}: the run stopped, with nothing measured: {exc}", file=sys.stderr)
            coordinator_gone = True
            break
        print(summary(outcome))
        outcomes.append(outcome)
    if args.json_path:  # with the runs measured before a stop, if any
        Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_path).write_text(json.dumps([asdict(o) | {"exact": o.exact} for o in outcomes], indent=2))
        print(f"report written to {args.json_path}")
    if coordinator_gone:
        return 2
    # exactly_once must be exact; at_least_once may duplicate, but never lose
    return 0 if all(o.exact if o.guarantee == "exactly_once" else not o.losses for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
