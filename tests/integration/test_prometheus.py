"""A real Prometheus, with the shipped scrape config and alert rules, scraping two workers and
``reconcile --follow`` through a load.

Every query of the Grafana dashboard must return data, its rates must add up
to what the load put through, and its gauges must say what the pipeline holds.
"""
from __future__ import annotations

import json
import math
import shutil
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any, Iterator

import pytest

from app.loadgen import LoadSpec
from tests.prometheus_files import ALERT_RULES, DASHBOARD, SCRAPE_CONFIG, command
from tools.workers import free_port, http_get, wait_for

pytestmark = pytest.mark.broker

JOB = "faust-eos"
SCRAPE_S = 5  # the shipped scrape interval
DRAIN_S = 180  # bounds a hang on a shared machine; not a timing check


class Prometheus:
    """A Prometheus server run from a copy of the shipped files, its targets written beside them."""

    def __init__(self, directory: Path, workers: list[str], reconciler: str) -> None:
        directory.mkdir()
        shutil.copy(SCRAPE_CONFIG, directory / SCRAPE_CONFIG.name)
        shutil.copy(ALERT_RULES, directory / ALERT_RULES.name)
        (directory / "targets").mkdir()
        (directory / "targets" / "workers.json").write_text(json.dumps([{"targets": workers}]))
        (directory / "targets" / "reconciler.json").write_text(json.dumps([{"targets": [reconciler]}]))
        self.url = f"http://localhost:{free_port()}"
        self.log = open(directory / "prometheus.log", "wb")
        self.process = subprocess.Popen(
            [command("prometheus"), f"--config.file={directory / SCRAPE_CONFIG.name}",
             f"--storage.tsdb.path={directory / 'data'}", f"--web.listen-address={self.url.removeprefix('http://')}"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def api(self, path: str, **params: Any) -> Any:
        status, body = http_get(f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}")
        answer = json.loads(body)
        assert status == 200 and answer["status"] == "success", (path, params, answer)
        return answer["data"]

    def query(self, expr: str, at: float) -> dict[tuple, float]:
        """The instant vector of ``expr`` at ``at``: labels -> value."""
        return {tuple(sorted(s["metric"].items())): float(s["value"][1])
                for s in self.api("query", query=expr, time=at)["result"]}

    def ready(self) -> bool:
        try:
            return http_get(f"{self.url}/-/ready", timeout=2)[0] == 200
        except OSError:
            return False

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)
        self.log.close()


@pytest.fixture
def prometheus_for(tmp_path) -> Iterator:
    started: list[Prometheus] = []

    def start(workers: list[str], reconciler: str) -> Prometheus:
        server = Prometheus(tmp_path / "prometheus", workers, reconciler)
        started.append(server)
        wait_for(server.ready, timeout=60, what="Prometheus to start")
        return server

    yield start
    for server in started:
        server.stop()


def dashboard_queries() -> dict[str, str]:
    """Every PromQL expression of the dashboard, by panel and legend, for the job the scrape config names."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return {f"{panel['title']}: {target.get('legendFormat', '')}": target["expr"].replace("$job", JOB)
            for panel in panels for target in panel.get("targets", [])}


def by(labels: tuple, name: str) -> str:
    return dict(labels)[name]


def test_the_dashboard_queries_return_data_add_up_to_the_load_and_the_alert_rules_evaluate(
        pipeline, prometheus_for):
    run = pipeline("exactly_once")
    workers = [run.add_worker(), run.add_worker()]
    follower = run.start_follower(check_s=SCRAPE_S)
    prometheus = prometheus_for([f"localhost:{worker.web_port}" for worker in workers],
                                f"localhost:{follower.web_port}")
    started = time.time()
    wait_for(lambda: all(w.ready() for w in workers), timeout=DRAIN_S, what="both workers to be ready")
    wait_for(lambda: len([v for v in prometheus.query('up{job=~"faust-eos.*"}', time.time()).values() if v == 1]) == 3,
             timeout=60, what="Prometheus to scrape both workers and the reconciler")

    load = run.produce(LoadSpec(count=3_000, rate=100, seed=61, duplicate_rate=0.05, bad_rate=0.03))
    report = run.reconcile(DRAIN_S)
    assert report["ok"], report["problems"]
    loaded = time.time()
    # one worker leaves cleanly: the other restores its table partitions from the changelogs
    assert workers[1].stop() == 0
    wait_for(lambda: workers[0].ready() and prometheus.query(
        f'sum(faust_eos_partitions_assigned{{job="{JOB}", kind="source"}})', time.time()).get((), 0) == 12,
        timeout=DRAIN_S, what="the remaining worker to hold every input partition")
    # the dashboard's rates average over a minute: wait until that minute holds no more activity
    wait_for(lambda: prometheus.query(
        f'sum(rate(faust_eos_events_in_total{{job="{JOB}"}}[1m])) + '
        f'sum(rate(faust_eos_changelog_records_restored_total{{job="{JOB}"}}[1m])) + '
        f'sum(rate(faust_eos_reconciler_checked_events_total{{job="{JOB}-reconciler"}}[1m]))',
        time.time()).get((), 1) == 0,
        timeout=DRAIN_S, what="the rate windows to pass the load, the takeover and the reconciler's checks")
    end = time.time()

    # 1. every query returns data while the load runs, or (the takeover's) afterwards
    queries = dashboard_queries()
    for title, expr in queries.items():
        samples = prometheus.api("query_range", query=expr, start=started, end=end, step=SCRAPE_S)["result"]
        finite = [v for series in samples for _, v in series["values"] if math.isfinite(float(v))]
        assert finite, f"{title}: {expr} returned no data"

    # 2. each rate, summed over the run, is the count it is the rate of
    def summed(expr: str) -> dict[tuple, float]:
        window = math.ceil(end - started) + 60
        return prometheus.query(f"sum_over_time(({expr})[{window}s:{SCRAPE_S}s]) * {SCRAPE_S}", end)

    def close_to(got: float, want: float) -> bool:  # rate() extrapolates at the edges of each window
        return abs(got - want) <= 0.1 * want + 10

    events_in = summed(queries["Events in per second, by agent and topic: {{agent}} {{topic}}"])
    assert {by(labels, "agent") for labels in events_in} == {"ingest", "aggregate"}
    for labels, total in events_in.items():
        want = load.produced if by(labels, "agent") == "ingest" else report["counted_events"]
        assert close_to(total, want), (labels, total, want)
    outcomes = {
        "aggregated ({{agent}})": report["counted_events"],
        "deduplicated ({{agent}})": report["upstream_duplicates"],
    }
    for legend, want in outcomes.items():
        got = sum(v for k, v in summed(queries[f"Event outcomes per second: {legend}"]).items())
        assert close_to(got, want), (legend, got, want)
    dead = summed(queries["Event outcomes per second: dead-lettered: {{reason}}"])
    assert close_to(sum(dead.values()), report["dead_letters"]), (dead, report["dead_letters"])
    for legend, counter in [("begun", "transactions_begun"), ("committed", "transactions_committed"),
                            ("aborted", "transactions_aborted"), ("fenced", "producers_fenced"),
                            ("input partitions committed (both guarantees)", "input_partitions_committed")]:
        got = sum(summed(queries[f"Commits per second: {legend}"]).values())
        counted = sum(prometheus.query(f'max_over_time(faust_eos_{counter}_total{{job="{JOB}"}}'
                                       f'[{math.ceil(end - started)}s])',
                                       end).values())
        assert close_to(got, counted), (legend, got, counted)
    restored = summed(queries["Changelog recovery: restored/s {{instance}} ({{kind}})"])
    restored_counted = sum(prometheus.query(
        f'max_over_time(faust_eos_changelog_records_restored_total{{job="{JOB}"}}[{math.ceil(end - started)}s])',
        end).values())
    assert restored_counted > 0 and close_to(sum(restored.values()), restored_counted), (restored, restored_counted)
    checked = sum(summed(queries["Reconciler: progress: events checked/s"]).values())
    assert close_to(checked, report["counted_events"]), (checked, report["counted_events"])

    # 3. the commit latency quantiles are ordered, within the histogram's buckets
    during = (started + loaded) / 2
    p50, p95, p99 = (prometheus.query(queries[f"Commit latency (one partition's transaction): {q}"],
                                      during).get((), math.nan)
                     for q in ("p50", "p95", "p99"))
    assert 0 < p50 <= p95 <= p99 <= 30, (p50, p95, p99)

    # 4. the gauges say what the pipeline holds, now that the remaining worker holds it all
    keys = {by(k, "table"): v for k, v in prometheus.query(queries["Table keys: {{table}}"], end).items()}
    assert keys["merchant-totals"] == report["merchants"], keys
    assert keys["seen-events"] == report["counted_events"], keys
    lags = prometheus.query(queries["Consumer lag per partition (LSO - position, read_committed): "
                                    "{{topic}}[{{partition}}]"], end)
    assert len(lags) == 12 and set(lags.values()) == {0}, lags
    lso_lags = prometheus.query(queries["LSO lag per partition (high watermark - LSO): {{topic}}[{{partition}}]"], end)
    assert lso_lags and set(lso_lags.values()) == {0}, lso_lags
    remaining = prometheus.query(queries["Changelog recovery: remaining {{instance}} {{table}} ({{kind}})"], end)
    assert set(remaining.values()) == {0}, remaining
    assert list(prometheus.query(queries["Ready workers: {{instance}}"], end).values()) == [1]
    assert list(prometheus.query(queries["Reconciler: watermark lag and differences: watermark lag"],
                                 end).values()) == [0]
    differences = prometheus.query(queries["Reconciler: watermark lag and differences: differences: {{kind}}"], end)
    assert {by(k, "kind"): v for k, v in differences.items()} == {"missing": 0, "extra": 0, "mismatched": 0}

    # 5. the alert rules loaded and evaluate without errors; nothing fires, nor is pending, but the gone worker's
    # absence
    rules = [rule for group in prometheus.api("rules")["groups"] for rule in group["rules"]]
    assert {rule["name"] for rule in rules} == {"FaustEosWorkerDown", "FaustEosWorkerNotReady",
                                                "FaustEosHangingTransaction", "FaustEosLsoLagGrowing",
                                                "FaustEosConsumerLagGrowing", "FaustEosCommitFailures",
                                                "FaustEosCommitsStalled", "FaustEosReconcilerStalled",
                                                "FaustEosReconcilerDifferences"}
    assert all(rule["health"] == "ok" for rule in rules), [(r["name"], r.get("lastError")) for r in rules]
    gone = f"localhost:{workers[1].web_port}"
    alerts = [alert["labels"] for rule in rules for alert in rule["alerts"]
              if not (alert["labels"]["alertname"] == "FaustEosWorkerDown" and alert["labels"]["instance"] == gone)]
    assert alerts == [], alerts
